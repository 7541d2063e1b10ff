//! Local writes, seen by the MMU: userfaultfd write-protection in asynchronous mode (Linux 6.7+,
//! `UFFD_FEATURE_WP_ASYNC`). The rank's protected ranges are write-protected in its own page
//! tables; its first store to a page clears the protection in the kernel's fault path (no
//! signal, no handler thread), and `PAGEMAP_SCAN` returns the written pages and protects them
//! again in one call. Other ranks write through their own mappings of the shared heap, so
//! their puts never show here — that is the paper's point: RMA bypasses the target's MMU,
//! and the access log (remote.rs) tracks them instead.
//!
//! Soft-dirty bits (`/proc/self/clear_refs`) would be the other MMU source; kernels built
//! without CONFIG_MEM_SOFT_DIRTY (this project's test machines) have none, so this is the one
//! used. Where userfaultfd is refused, `Checkpointer` falls back to comparing each page's
//! checksum with the previous checkpoint's (reads everything, writes only what changed).

use activerma::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// The kernel's ABI (linux/userfaultfd.h, linux/fs.h); the system headers of older
// distributions lack the asynchronous mode and PAGEMAP_SCAN.
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

const fn iowr(ty: u64, nr: u64, size: usize) -> libc::c_ulong {
    ((3u64 << 30) | ((size as u64) << 16) | (ty << 8) | nr) as libc::c_ulong
}

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const UFFDIO_API: libc::c_ulong = iowr(0xAA, 0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::c_ulong = iowr(0xAA, 0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_WRITEPROTECT: libc::c_ulong = iowr(0xAA, 0x06, std::mem::size_of::<UffdioWriteprotect>());
const PAGEMAP_SCAN: libc::c_ulong = iowr(b'f' as u64, 16, std::mem::size_of::<PmScanArg>());

fn os_error(what: &str) -> Error {
    Error::Unsupported(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Write tracking of this process's own stores to some ranges of its address space.
pub struct WriteTracker {
    uffd: OwnedFd,
    pagemap: std::fs::File,
    regions: Vec<PageRegion>,
}

impl WriteTracker {
    /// A tracker with no ranges yet; fails (Unsupported, saying why) where the kernel or its
    /// settings refuse asynchronous write-protection.
    pub fn new() -> Result<WriteTracker> {
        // SAFETY: a plain system call; the descriptor is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY) };
        if fd < 0 {
            return Err(os_error("userfaultfd"));
        }
        // SAFETY: a fresh descriptor of ours.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED,
            ioctls: 0,
        };
        // SAFETY: the struct matches the kernel's layout.
        if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
            return Err(os_error("userfaultfd asynchronous write-protection (Linux 6.7 or later)"));
        }
        let pagemap = std::fs::File::open("/proc/self/pagemap").map_err(|e| Error::Unsupported(format!("/proc/self/pagemap: {e}")))?;
        Ok(WriteTracker { uffd, pagemap, regions: Vec::new() })
    }

    /// Starts tracking `[addr, addr+len)` (page-aligned): from now on a store there marks its page.
    pub fn track(&mut self, addr: usize, len: usize) -> Result<()> {
        let range = || UffdioRange { start: addr as u64, len: len as u64 };
        let mut reg = UffdioRegister { range: range(), mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        // SAFETY: layouts match the kernel's; the range is ours.
        if unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
            return Err(os_error("userfaultfd register"));
        }
        let mut wp = UffdioWriteprotect { range: range(), mode: UFFDIO_WRITEPROTECT_MODE_WP };
        // SAFETY: as above.
        if unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp) } != 0 {
            return Err(os_error("userfaultfd write-protect"));
        }
        self.regions.push(PageRegion { start: addr as u64, end: (addr + len) as u64, categories: 0 });
        Ok(())
    }

    /// Calls `written(addr, len)` for every run of pages stored to since the last call (or
    /// `track`), and protects them again.
    pub fn take_written(&self, written: &mut dyn FnMut(usize, usize)) -> Result<()> {
        let mut vec = vec![PageRegion::default(); 512];
        for r in &self.regions {
            let mut start = r.start;
            while start < r.end {
                let mut arg = PmScanArg {
                    size: std::mem::size_of::<PmScanArg>() as u64,
                    flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                    start,
                    end: r.end,
                    walk_end: 0,
                    vec: vec.as_mut_ptr() as u64,
                    vec_len: vec.len() as u64,
                    max_pages: 0,
                    category_inverted: 0,
                    category_mask: PAGE_IS_WRITTEN,
                    category_anyof_mask: 0,
                    return_mask: PAGE_IS_WRITTEN,
                };
                // SAFETY: layouts match the kernel's; `vec` outlives the call.
                let n = unsafe { libc::ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
                if n < 0 {
                    return Err(os_error("PAGEMAP_SCAN"));
                }
                for p in &vec[..n as usize] {
                    written(p.start as usize, (p.end - p.start) as usize);
                }
                // The walk stops early when the vector fills; it says where.
                start = arg.walk_end.max(start + 1);
                if (n as usize) < vec.len() && arg.walk_end >= r.end {
                    break;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pages_written_and_rearms() {
        let page = 4096;
        let n = 2048; // more runs than one scan's vector holds
                      // SAFETY: a fresh private mapping, unmapped at the end.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), n * page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        } as *mut u8;
        let mut t = match WriteTracker::new() {
            Ok(t) => t,
            Err(e) => return eprintln!("skipped: {e}"),
        };
        t.track(p as usize, n * page).unwrap();
        let touched: Vec<usize> = (0..n).step_by(2).collect();
        // SAFETY: inside the mapping.
        touched.iter().for_each(|&i| unsafe { *p.add(i * page + 7) = 1 });
        let mut got = Vec::new();
        t.take_written(&mut |a, l| (0..l / page).for_each(|k| got.push((a - p as usize) / page + k))).unwrap();
        assert_eq!(got, touched);
        let mut again = 0;
        t.take_written(&mut |_, l| again += l).unwrap();
        assert_eq!(again, 0, "protected again after the scan");
        // SAFETY: as above.
        unsafe { *p.add(5 * page) = 2 };
        let mut third = Vec::new();
        t.take_written(&mut |a, l| third.push(((a - p as usize) / page, l / page))).unwrap();
        assert_eq!(third, vec![(5, 1)]);
        // SAFETY: our mapping.
        unsafe { libc::munmap(p as *mut libc::c_void, n * page) };
    }
}
