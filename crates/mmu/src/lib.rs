//! activerma-mmu: the kernel's page tables as a source of access events, for layers that
//! must know which pages a process touched without checking every access in software.
//!
//! - `Uffd` (userfaultfd): ranges registered for *missing* faults stop a thread's first
//!   access to an absent page until another thread installs it (`copy`); ranges registered
//!   for *write-protection* in the asynchronous mode let the first store to a protected page
//!   through in the kernel and remember it (no signal, no thread woken).
//! - `PageScan` (PAGEMAP_SCAN on /proc/self/pagemap): the pages written since they were last
//!   protected, protecting them again in the same call.
//!
//! Used by the checkpointer (a rank's own stores between checkpoints) and by the object DSM's
//! page-granular mode (first reads fetched on a fault, written pages found at a release).
//! The ioctl layouts are the kernel's (linux/userfaultfd.h, linux/fs.h): the system headers
//! of older distributions lack the asynchronous mode and PAGEMAP_SCAN, so they are written
//! out here rather than taken from libc.

mod pagemap;
mod uffd;

pub use pagemap::PageScan;
pub use uffd::{Fault, Uffd};

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// `_IOWR(ty, nr, size)` / `_IOR`: the kernel's ioctl numbers.
const fn ioc(dir: u64, ty: u64, nr: u64, size: usize) -> libc::c_ulong {
    ((dir << 30) | ((size as u64) << 16) | (ty << 8) | nr) as libc::c_ulong
}
const fn iowr(ty: u64, nr: u64, size: usize) -> libc::c_ulong {
    ioc(3, ty, nr, size)
}
const fn ior(ty: u64, nr: u64, size: usize) -> libc::c_ulong {
    ioc(2, ty, nr, size)
}

/// The last OS error, naming what failed.
fn os_error(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}
