//! Local writes, seen by the MMU: userfaultfd write-protection in asynchronous mode (Linux 6.7+;
//! `activerma-mmu`). The rank's protected ranges are write-protected in its own page tables;
//! its first store to a page clears the protection in the kernel's fault path (no signal, no
//! handler thread), and `PAGEMAP_SCAN` returns the written pages and protects them again in
//! one call. Other ranks write through their own mappings of the shared heap, so their puts
//! never show here — that is the paper's point: RMA bypasses the target's MMU, and the access
//! log (remote.rs) tracks them instead.
//!
//! Soft-dirty bits (`/proc/self/clear_refs`) would be the other MMU source; kernels built
//! without CONFIG_MEM_SOFT_DIRTY (this project's test machines) have none, so this is the one
//! used. Where userfaultfd is refused, `Checkpointer` falls back to comparing each page's
//! checksum with the previous checkpoint's (reads everything, writes only what changed).

use activerma::{Error, Result};
use activerma_mmu::{PageScan, Uffd};

fn unsupported(e: std::io::Error) -> Error {
    Error::Unsupported(e.to_string())
}

/// Write tracking of this process's own stores to some ranges of its address space.
pub struct WriteTracker {
    uffd: Uffd,
    scan: PageScan,
    ranges: Vec<(usize, usize)>,
}

impl WriteTracker {
    /// A tracker with no ranges yet; fails (Unsupported, saying why) where the kernel or its
    /// settings refuse asynchronous write-protection.
    pub fn new() -> Result<WriteTracker> {
        let uffd = Uffd::open(Uffd::WP_ASYNC | Uffd::WP_SHMEM | Uffd::WP_UNPOPULATED).map_err(unsupported)?;
        Ok(WriteTracker { uffd, scan: PageScan::open().map_err(unsupported)?, ranges: Vec::new() })
    }

    /// Starts tracking `[addr, addr+len)` (page-aligned): from now on a store there marks its page.
    pub fn track(&mut self, addr: usize, len: usize) -> Result<()> {
        self.uffd.register(addr, len, Uffd::WP).map_err(unsupported)?;
        self.uffd.write_protect(addr, len).map_err(unsupported)?;
        self.ranges.push((addr, addr + len));
        Ok(())
    }

    /// Calls `written(addr, len)` for every run of pages stored to since the last call (or
    /// `track`), and protects them again.
    pub fn take_written(&self, written: &mut dyn FnMut(usize, usize)) -> Result<()> {
        self.ranges.iter().try_for_each(|&(start, end)| self.scan.take_written(start, end, written)).map_err(unsupported)
    }
}
