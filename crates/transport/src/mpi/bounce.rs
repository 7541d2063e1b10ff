//! Copies of the sources of implicit puts (`rma::put`): an `MPI_Put` sent from a copy lets the
//! caller reuse its buffer at once without waiting for local completion. Each copy is kept
//! until a flush of its window and target completes it, then kept for reuse by size class.

use activerma_core::Rank;
use mpi_sys::MPI_Win;

/// Bytes of completed copies kept for reuse at most.
const SPARE_MAX: usize = 16 << 20;

/// The size class of a copy of `len` bytes: its capacity is 4 KiB << class.
fn class(len: usize) -> usize {
    (len.max(4096).next_power_of_two().trailing_zeros() - 12) as usize
}

#[derive(Default)]
pub struct Bounced {
    /// Copies not completed yet: (window, target, bytes).
    kept: Vec<(MPI_Win, Rank, Vec<u8>)>,
    kept_bytes: usize,
    /// Completed copies by size class, at most SPARE_MAX bytes in all: fresh ones faulted
    /// their pages in again each time the allocator gave memory back, which held 64 KiB put
    /// windows over TCP at 920-1030 MB/s; reused, 1470-1540.
    spare: Vec<Vec<Vec<u8>>>,
    spare_bytes: usize,
}

impl Bounced {
    /// A copy of `src`, in a spare buffer of its size class if one is kept.
    pub fn copy(&mut self, src: &[u8]) -> Vec<u8> {
        let c = class(src.len());
        let mut copy = match self.spare.get_mut(c).and_then(Vec::pop) {
            Some(b) => {
                self.spare_bytes -= b.capacity();
                b
            }
            None => Vec::with_capacity(4096 << c),
        };
        copy.clear();
        copy.extend_from_slice(src);
        copy
    }

    /// Whether keeping `len` more bytes would pass `budget`.
    pub fn over(&self, len: usize, budget: usize) -> bool {
        self.kept_bytes + len > budget
    }

    /// The windows some kept copy was put on, each once.
    pub fn windows(&self) -> Vec<MPI_Win> {
        let mut w: Vec<MPI_Win> = Vec::new();
        for &(win, _, _) in &self.kept {
            if !w.contains(&win) {
                w.push(win);
            }
        }
        w
    }

    pub fn keep(&mut self, win: MPI_Win, rank: Rank, bytes: Vec<u8>) {
        self.kept_bytes += bytes.len();
        self.kept.push((win, rank, bytes));
    }

    /// A flush of `win` to `rank` (all ranks: None) completed: its copies become spares.
    pub fn completed(&mut self, win: MPI_Win, rank: Option<Rank>) {
        let mut i = 0;
        while i < self.kept.len() {
            let (w, r, _) = &self.kept[i];
            if *w != win || rank.is_some_and(|rank| rank != *r) {
                i += 1;
                continue;
            }
            let (_, _, bytes) = self.kept.swap_remove(i);
            self.kept_bytes -= bytes.len();
            if self.spare_bytes + bytes.capacity() <= SPARE_MAX {
                let c = class(bytes.capacity());
                if self.spare.len() <= c {
                    self.spare.resize_with(c + 1, Vec::new);
                }
                self.spare_bytes += bytes.capacity();
                self.spare[c].push(bytes);
            }
        }
    }
}
