//! The pages of the protected regions changed since the last checkpoint: one bit per page,
//! set by the access log's handler (remote writes) and by the MMU scan (local writes).

use std::sync::atomic::{AtomicU64, Ordering};

/// A protected range of this rank's symmetric heap.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    /// Its address here.
    pub addr: usize,
    /// Its offset in every rank's heap (what the store records: addresses may differ after a restart).
    pub heap_offset: usize,
    pub len: usize,
}

impl Region {
    pub fn pages(&self, page: usize) -> usize {
        self.len.div_ceil(page)
    }

    /// The bytes of page `p` (of `page` bytes) of this region here.
    pub fn page_bytes(&self, p: usize, page: usize) -> &[u8] {
        debug_assert!(p < self.pages(page));
        // SAFETY: inside the protected segment (its length is rounded up to whole pages of the
        // heap), which lives as long as the job.
        unsafe { std::slice::from_raw_parts((self.addr + p * page) as *const u8, page) }
    }
}

pub struct DirtyPages {
    page: usize,
    regions: Vec<(Region, Box<[AtomicU64]>)>,
}

impl DirtyPages {
    pub fn new(page: usize) -> DirtyPages {
        DirtyPages { page, regions: Vec::new() }
    }

    pub fn add(&mut self, r: Region) {
        let words = r.pages(self.page).div_ceil(64);
        self.regions.push((r, (0..words).map(|_| AtomicU64::new(0)).collect()));
    }

    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.iter().map(|(r, _)| r)
    }

    /// Marks every page `[addr, addr+len)` touches (parts outside the regions are ignored:
    /// the access log may also carry the application's own domains' entries elsewhere).
    pub fn mark(&self, addr: usize, len: usize) {
        for (r, bits) in &self.regions {
            let (lo, hi) = (addr.max(r.addr), (addr + len.max(1)).min(r.addr + r.len));
            if lo >= hi {
                continue;
            }
            for p in (lo - r.addr) / self.page..=(hi - 1 - r.addr) / self.page {
                bits[p / 64].fetch_or(1 << (p % 64), Ordering::Relaxed);
            }
        }
    }

    /// Whether the page holding `addr` is marked (false outside the regions).
    pub fn is_marked(&self, addr: usize) -> bool {
        self.regions.iter().any(|(r, bits)| {
            let p = addr.wrapping_sub(r.addr) / self.page;
            addr >= r.addr && addr < r.addr + r.len && bits[p / 64].load(Ordering::Relaxed) & 1 << (p % 64) != 0
        })
    }

    /// The marked pages of region `i`, as page indices; clears them.
    pub fn take(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for (w, word) in self.regions[i].1.iter().enumerate() {
            let mut v = word.swap(0, Ordering::Relaxed);
            while v != 0 {
                out.push(w * 64 + v.trailing_zeros() as usize);
                v &= v - 1;
            }
        }
        out
    }

    /// Marks pages of region `i` again (what a checkpoint took and could not write).
    pub fn put_back(&self, i: usize, pages: &[usize]) {
        let bits = &self.regions[i].1;
        for &p in pages {
            bits[p / 64].fetch_or(1 << (p % 64), Ordering::Relaxed);
        }
    }

    pub fn clear(&self) {
        self.regions.iter().flat_map(|(_, b)| b.iter()).for_each(|w| w.store(0, Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_every_page_an_access_touches_and_nothing_outside() {
        let mut d = DirtyPages::new(4096);
        d.add(Region { addr: 0x10000, heap_offset: 0, len: 100 * 4096 });
        d.mark(0x10000 + 4095, 2); // straddles pages 0 and 1
        d.mark(0x10000 + 99 * 4096 + 10, 1 << 20); // runs off the end
        d.mark(0x1000, 8); // before the region
        assert!(d.is_marked(0x10000 + 4096) && !d.is_marked(0x10000 + 2 * 4096) && !d.is_marked(0x1000));
        assert_eq!(d.take(0), vec![0, 1, 99]);
        assert!(d.take(0).is_empty(), "taking clears");
        d.put_back(0, &[1, 70]);
        assert_eq!(d.take(0), vec![1, 70]);
    }
}
