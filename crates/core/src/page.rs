//! Page arithmetic.

use std::sync::OnceLock;

#[inline]
pub fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize })
}

#[inline]
pub fn page_floor(addr: usize) -> usize {
    addr & !(page_size() - 1)
}

#[inline]
pub fn page_ceil(addr: usize) -> usize {
    (addr + page_size() - 1) & !(page_size() - 1)
}

/// Faults in the pages of `[p, p + len)` for writing in this process (MADV_POPULATE_WRITE:
/// page-table entries made now, in one call, instead of a fault per page on first touch),
/// ignoring failure: on a kernel without it (before 5.14) pages come on first touch.
///
/// # Safety
/// The range lies in a writable mapping of this process.
pub unsafe fn populate_for_write(p: *mut u8, len: usize) {
    let start = page_floor(p as usize);
    let end = page_ceil(p as usize + len);
    // SAFETY: the caller's range, widened to its pages (inside the same mapping: mappings are
    // whole pages).
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
}

/// Index range of the pages that `[addr, addr+len)` touches, relative to `base` (page aligned).
#[inline]
pub fn pages_spanned(base: usize, addr: usize, len: usize) -> std::ops::Range<usize> {
    let shift = page_size().trailing_zeros();
    let first = (addr - base) >> shift;
    let last = if len == 0 { first } else { (addr + len - 1 - base) >> shift };
    first..last + 1
}

/// The memlock limit (RLIMIT_MEMLOCK soft limit), `None` when unlimited.
pub fn memlock_limit() -> Option<u64> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into rl.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
    if rl.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(rl.rlim_cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        let p = page_size();
        assert_eq!(pages_spanned(0, 0, 1), 0..1);
        assert_eq!(pages_spanned(0, p - 1, 2), 0..2);
        assert_eq!(pages_spanned(p, p * 3, p), 2..3);
        assert_eq!(pages_spanned(0, 5, 0), 0..1);
        assert_eq!(page_ceil(1), p);
        assert_eq!(page_floor(p + 1), p);
    }
}
