//! PAGEMAP_SCAN (Linux 6.7+): the written pages of a range, protected again in the same walk.

use crate::{iowr, os_error};
use std::io;
use std::os::fd::AsRawFd;

const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

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

const PAGEMAP_SCAN: libc::c_ulong = iowr(b'f' as u64, 16, std::mem::size_of::<PmScanArg>());

/// This process's page map, to ask which pages were written.
pub struct PageScan {
    pagemap: std::fs::File,
}

impl PageScan {
    pub fn open() -> io::Result<PageScan> {
        let pagemap =
            std::fs::File::open("/proc/self/pagemap").map_err(|e| io::Error::new(e.kind(), format!("/proc/self/pagemap: {e}")))?;
        Ok(PageScan { pagemap })
    }

    /// Calls `written(addr, len)` for every run of pages of `[start, end)` (registered for
    /// asynchronous write-protection) stored to since they were last protected, and protects
    /// them again.
    pub fn take_written(&self, start: usize, end: usize, written: &mut dyn FnMut(usize, usize)) -> io::Result<()> {
        let mut vec = [PageRegion::default(); 256];
        let mut from = start as u64;
        while from < end as u64 {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                start: from,
                end: end as u64,
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
            if (n as usize) < vec.len() && arg.walk_end >= end as u64 {
                break;
            }
            from = arg.walk_end.max(from + 1);
        }
        Ok(())
    }
}
