//! The origin's source / destination buffer: page-aligned, as the MPI peer kit's
//! (`posix_memalign(4096)`), so that both sides copy between equally aligned buffers. A `Vec`
//! of this size starts 16 bytes into a page; a 1 MiB memcpy from such a source into an aligned
//! destination took 1-3 % longer here (median of 9 x 100 copies, one core).

use activerma_transport::mapping::Mapping;
use std::ops::{Deref, DerefMut};

pub struct PageBuf(Mapping);

impl PageBuf {
    /// `len` bytes holding `fill(i)` at offset `i`.
    pub fn filled(len: usize, fill: impl Fn(usize) -> u8) -> PageBuf {
        let m = Mapping::anonymous(len.max(1), 0).expect("mmap of the benchmark's buffer");
        let mut b = PageBuf(m);
        for (i, x) in b.iter_mut().enumerate() {
            *x = fill(i);
        }
        b
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: our private mapping of `len` bytes, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len) }
    }
}
