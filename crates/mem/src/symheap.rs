//! The symmetric heap: segment allocations are collective, so every rank runs this same
//! deterministic first-fit allocator with the same calls and gets the same offsets — a segment
//! has the same offset (and, when the heaps map at the same address, the same address) everywhere.

use activerma_core::page::page_ceil;
use activerma_core::{settings, Error, Result};

pub struct SymHeap {
    size: usize,
    /// Free ranges (offset, len), sorted by offset, coalesced.
    free: Vec<(usize, usize)>,
}

impl SymHeap {
    pub fn new(size: usize) -> SymHeap {
        SymHeap { size, free: vec![(0, size)] }
    }

    /// Allocates `len` bytes (rounded up to pages); returns the offset.
    pub fn alloc(&mut self, len: usize) -> Result<usize> {
        if len == 0 {
            return Err(Error::InvalidArgument("a segment of 0 bytes".into()));
        }
        let want = page_ceil(len);
        let i = self.free.iter().position(|&(_, l)| l >= want).ok_or_else(|| {
            let largest = self.free.iter().map(|f| f.1).max().unwrap_or(0);
            Error::OutOfResources(format!(
                "segment of {len} bytes does not fit the symmetric heap ({} bytes, largest free block {largest}); raise {} for the launcher",
                self.size,
                settings::SEGMENT_SIZE
            ))
        })?;
        let (off, l) = self.free[i];
        if l == want {
            self.free.remove(i);
        } else {
            self.free[i] = (off + want, l - want);
        }
        Ok(off)
    }

    pub fn free(&mut self, off: usize, len: usize) {
        let len = page_ceil(len);
        let i = self.free.partition_point(|&(o, _)| o < off);
        self.free.insert(i, (off, len));
        // Coalesce with neighbours.
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use activerma_core::page::page_size;

    #[test]
    fn first_fit_and_coalesce() {
        let p = page_size();
        let mut h = SymHeap::new(10 * p);
        let a = h.alloc(1).unwrap();
        let b = h.alloc(2 * p).unwrap();
        let c = h.alloc(p).unwrap();
        assert_eq!((a, b, c), (0, p, 3 * p));
        h.free(b, 2 * p);
        assert_eq!(h.alloc(p).unwrap(), p, "reuses the hole first");
        h.free(p, p);
        h.free(a, 1);
        h.free(c, p);
        assert_eq!(h.free, vec![(0, 10 * p)]);
        assert!(matches!(h.alloc(11 * p), Err(Error::OutOfResources(_))));
    }
}
