//! One rank's counted data structure, in a segment so that every variant can reach it: an array
//! of `pages` pages of 8-byte words, then the per-page counters that the RMA variant increments
//! with remote atomics (on pages of their own, never marked).
//!
//! ```text
//! | data[pages * 4096] | rma_puts[pages] rma_gets[pages] (page-rounded) |
//! ```
//!
//! The counts of AA-Poll and A-KV are kept by handlers in plain local memory (`PageCounts`).

use crate::workload::{initial, legal, Access, Kind, PAGE, WORDS_PER_PAGE};
use activerma::{RemotePtr, Segment, World};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the parts of an array are, identical on every rank.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub pages: usize,
    pub counters_off: usize,
    pub bytes: usize,
}

impl Layout {
    pub fn new(pages: usize) -> Layout {
        let counters_off = pages * PAGE;
        Layout { pages, counters_off, bytes: counters_off + (pages * 16).next_multiple_of(PAGE) }
    }
    pub fn words(&self) -> usize {
        self.pages * WORDS_PER_PAGE
    }
    pub fn data_bytes(&self) -> usize {
        self.counters_off
    }
    fn counter_off(&self, kind: Kind, page: usize) -> usize {
        let at = match kind {
            Kind::Put => page,
            Kind::Get => self.pages + page,
        };
        self.counters_off + at * 8
    }
}

/// This rank's array, and the addresses of everybody's.
pub struct Array {
    pub layout: Layout,
    pub seg: Segment,
}

impl Array {
    /// Collective: every rank allocates its array.
    pub fn alloc(world: &World, layout: Layout) -> activerma::Result<Array> {
        let seg = world.alloc_segment(layout.bytes)?;
        let a = Array { layout, seg };
        a.reset(world.rank());
        Ok(a)
    }

    /// Writes the initial pattern and zeroes the RMA counters (no remote access may be in
    /// flight: call between barriers).
    pub fn reset(&self, me: usize) {
        for w in 0..self.layout.words() {
            self.word(w).store(initial(me, w), Ordering::Relaxed);
        }
        // SAFETY: the counters lie inside our segment; nobody else writes them between barriers.
        unsafe { std::ptr::write_bytes(self.seg.as_ptr().add(self.layout.counters_off), 0, self.layout.bytes - self.layout.counters_off) };
    }

    fn at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off & 7 == 0 && off + 8 <= self.layout.bytes);
        // SAFETY: 8-aligned inside our segment; every access to its words (local CPU, remote
        // puts, gets and atomics) is a whole aligned word.
        unsafe { &*(self.seg.as_ptr().add(off) as *const AtomicU64) }
    }

    /// Word `w` of this rank's array (the A-KV handlers access it locally).
    pub fn word(&self, w: usize) -> &AtomicU64 {
        self.at(w * 8)
    }

    /// Word `w` of rank `r`'s array.
    pub fn word_at(&self, r: usize, w: usize) -> RemotePtr {
        self.seg.remote(r, w * 8)
    }

    /// Rank `r`'s RMA counter of `kind` accesses to `page`.
    pub fn counter_at(&self, r: usize, kind: Kind, page: usize) -> RemotePtr {
        self.seg.remote(r, self.layout.counter_off(kind, page))
    }

    /// The RMA counters of this rank: (puts, gets) per page.
    pub fn rma_counts(&self) -> (Vec<u64>, Vec<u64>) {
        let read = |k| (0..self.layout.pages).map(|pg| self.at(self.layout.counter_off(k, pg)).load(Ordering::Acquire)).collect();
        (read(Kind::Put), read(Kind::Get))
    }

    /// The page of the array that `addr` (an address in this rank's memory, from a log entry)
    /// falls in.
    pub fn page_of_addr(&self, addr: u64) -> Option<usize> {
        let off = addr.checked_sub(self.seg.as_ptr() as u64)? as usize;
        (off < self.layout.data_bytes()).then_some(off / PAGE)
    }

    /// Every word of this rank's array holds its initial value or one that a put to exactly
    /// that word wrote (`writers[o]`: the accesses of origin `o`).
    pub fn check(&self, me: usize, writers: &[Vec<Access>]) -> Result<u64, String> {
        let mut written = 0;
        for w in 0..self.layout.words() {
            let v = self.word(w).load(Ordering::Acquire);
            if !legal(writers, me, w, v) {
                return Err(format!("word {w} of the array holds {v:#x}, which no put to it wrote"));
            }
            written += (v != initial(me, w)) as u64;
        }
        Ok(written)
    }
}

/// Per-page counts of puts and gets, kept by this rank's handlers (AA-Poll's log handler,
/// A-KV's message handlers) in local memory: nobody but the handlers writes them, so the
/// increments are uncontended local atomics (the paper's handlers may use any local
/// synchronization; handlers of one log never overlap).
pub struct PageCounts {
    puts: Vec<AtomicU64>,
    gets: Vec<AtomicU64>,
}

impl PageCounts {
    pub fn new(pages: usize) -> PageCounts {
        PageCounts { puts: (0..pages).map(|_| AtomicU64::new(0)).collect(), gets: (0..pages).map(|_| AtomicU64::new(0)).collect() }
    }

    #[inline]
    pub fn bump(&self, kind: Kind, page: usize) {
        let c = match kind {
            Kind::Put => &self.puts[page],
            Kind::Get => &self.gets[page],
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        for c in self.puts.iter().chain(&self.gets) {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// (puts, gets) per page.
    pub fn snapshot(&self) -> (Vec<u64>, Vec<u64>) {
        let read = |v: &[AtomicU64]| v.iter().map(|c| c.load(Ordering::Acquire)).collect();
        (read(&self.puts), read(&self.gets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sit_after_the_data_on_their_own_pages() {
        let l = Layout::new(256);
        assert_eq!(l.data_bytes(), 256 * PAGE);
        assert_eq!(l.counter_off(Kind::Put, 0), l.data_bytes());
        assert_eq!(l.counter_off(Kind::Get, 255) + 8, l.data_bytes() + 512 * 8);
        assert_eq!(l.bytes % PAGE, 0);
        assert!(l.counter_off(Kind::Get, 255) + 8 <= l.bytes);
    }
}
