//! One rank's slab of the grid: `rows` rows of `cols` f64 plus a halo row above and below,
//! twice (Jacobi reads one copy and writes the other), in fresh anonymous memory that nothing
//! has touched yet — the case PART is for: the first halo a neighbour puts meets missing pages.

use activerma::{Error, Result};

pub struct Slab {
    base: *mut f64,
    bytes: usize,
    pub rows: usize,
    pub cols: usize,
}

impl Slab {
    /// Maps the two copies (untouched unless `pretouch`: then every page is written first).
    /// `huge_pages`: leave transparent huge pages to the kernel's default; false asks for
    /// 4 KiB pages (MADV_NOHUGEPAGE) — PART installs faulted pages one 4 KiB page at a time, so
    /// this compares faults alone, without the page-size difference.
    pub fn new(rows: usize, cols: usize, pretouch: bool, huge_pages: bool) -> Result<Slab> {
        let bytes = (2 * (rows + 2) * cols * 8).next_multiple_of(4096);
        // SAFETY: a fresh private anonymous mapping, ours until drop.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Os { call: "mmap (stencil slab)", errno_text: std::io::Error::last_os_error().to_string() });
        }
        if !huge_pages {
            // SAFETY: advice on our own fresh mapping.
            unsafe { libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE) };
        }
        if pretouch {
            // SAFETY: the mapping is `bytes` long.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
        }
        Ok(Slab { base: p as *mut f64, bytes, rows, cols })
    }

    pub fn addr(&self) -> *mut u8 {
        self.base as *mut u8
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Byte offset of row `r` (0 = top halo, rows + 1 = bottom halo) of copy `c`.
    pub fn row_off(&self, c: usize, r: usize) -> usize {
        ((c * (self.rows + 2) + r) * self.cols) * 8
    }

    /// Row `r` of copy `c`.
    pub fn row(&self, c: usize, r: usize) -> &[f64] {
        // SAFETY: inside the mapping; neighbours write only halo rows, and only between the
        // barriers that separate an exchange from the sweep that reads it.
        unsafe { std::slice::from_raw_parts(self.base.add(self.row_off(c, r) / 8), self.cols) }
    }

    #[allow(clippy::mut_from_ref)] // rows of the mapping are disjoint; see `row`
    pub fn row_mut(&self, c: usize, r: usize) -> &mut [f64] {
        // SAFETY: as `row`; the caller writes one row at a time.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(self.row_off(c, r) / 8), self.cols) }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        unsafe { libc::munmap(self.base as *mut _, self.bytes) };
    }
}
