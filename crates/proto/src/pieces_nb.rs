//! Non-blocking lists of pieces (what ARMCI_NbGetV / NbPutV call): the vector counterpart of
//! strided_nb.rs, for pieces at arbitrary addresses.
//!
//! ```text
//! get_pieces_nb(rank, pieces):              (put_pieces_nb: the same, its bytes in the request)
//!     empty pieces dropped; none left -> complete
//!     local pieces overlap             -> get_pieces now (they cannot be lent out at once)
//!     the target moves large lists itself (nb_moved_by_target: target-assisted, or
//!       ACTIVERMA_NB_TARGET_FROM bytes to a rank of this host whose progress runs on its own)
//!                                      -> one request with the list; its CPU moves the pieces
//!                                         into ours by scatter/gather calls while we go on
//!     a get from a rank of another host, host-assisted
//!                                      -> one MPI_Rget of the list (get_list_started), in
//!                                         flight until the wait
//!     ACTIVERMA_NB_TARGET_FROM bytes or more, the bounding range plain segment memory mapped
//!       here, a copy engine this run  -> its job (copy_engine.rs): copied by the engine thread
//!                                         while we go on, or by the wait if not started
//!     the bounding range plain segment memory mapped here, host-assisted
//!                                      -> CPU copies now, complete at the modelled time
//!     otherwise                        -> get_pieces / put_pieces now (the run's method)
//! ```

use crate::strided::{copy_pieces, Direction};
use crate::transfer::{Ask, PendingTransfer};
use crate::{Proto, Transfer};
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};
use activerma_mem::{AccessKind, HeapFast};
use std::sync::atomic::{fence, Ordering};

impl Proto {
    /// Non-blocking get of every piece `(addr, buffer)` from `rank`: the buffers hold the data
    /// once the returned transfer's `wait` returns (they are borrowed until then). Every piece
    /// is checked before any moves, as `get_pieces` does.
    pub fn get_pieces_nb<'a>(&'a self, rank: Rank, mut pieces: Vec<(usize, &'a mut [u8])>) -> Result<PendingTransfer<'a>> {
        self.check_rank(rank)?;
        pieces.retain(|p| !p.1.is_empty());
        let bytes: usize = pieces.iter().map(|p| p.1.len()).sum();
        let spans = pieces.iter().map(|p| (p.1.as_ptr() as usize, p.1.len()));
        if bytes > 0 && apart(spans) {
            if self.nb_moved_by_target(rank, bytes) {
                bump(&self.counters.noncontig_pieces, pieces.len() as u64);
                return Ok(PendingTransfer::target_moving(self, rank, Transfer::ZeroCopy, Ask::TargetGet(pieces), bytes));
            }
            // SAFETY: the returned transfer borrows every buffer until its wait or drop.
            if let Some(get) = unsafe { self.get_list_started(rank, &mut pieces)? } {
                let at = self.net.completion_time(bytes);
                return Ok(PendingTransfer::started_get(self, rank, Transfer::ZeroCopy, get, at));
            }
            let list: Vec<(usize, *mut u8, usize)> = pieces.iter_mut().map(|(a, d)| (*a, d.as_mut_ptr(), d.len())).collect();
            // SAFETY: as above.
            if let Some((job, at)) = unsafe { self.copy_engine_list_job(rank, &list, Direction::Get)? } {
                return Ok(PendingTransfer::by_engine(self, rank, Transfer::ZeroCopy, job, at));
            }
        }
        if let Some(at) = self.copied_now(rank, pieces.iter_mut().map(|(a, d)| (*a, d.as_mut_ptr(), d.len())).collect(), Direction::Get) {
            return Ok(PendingTransfer::at(self, rank, Transfer::ZeroCopy, at));
        }
        self.get_pieces(rank, &mut pieces)?;
        Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy))
    }

    /// Non-blocking put of every piece `(addr, bytes)` to `rank`, as `get_pieces_nb`: the
    /// pieces' bytes are borrowed until the returned transfer's `wait` returns.
    pub fn put_pieces_nb<'a>(&'a self, rank: Rank, mut pieces: Vec<(usize, &'a [u8])>) -> Result<PendingTransfer<'a>> {
        self.check_rank(rank)?;
        pieces.retain(|p| !p.1.is_empty());
        let bytes: usize = pieces.iter().map(|p| p.1.len()).sum();
        if bytes > 0 && self.nb_moved_by_target(rank, bytes) {
            bump(&self.counters.noncontig_pieces, pieces.len() as u64);
            return Ok(PendingTransfer::target_moving(self, rank, Transfer::ZeroCopy, Ask::TargetPut(pieces), bytes));
        }
        let list: Vec<(usize, *mut u8, usize)> = pieces.iter().map(|(a, s)| (*a, s.as_ptr() as *mut u8, s.len())).collect();
        // SAFETY: the returned transfer borrows every piece until its wait or drop; the engine
        // only reads them (a put).
        if let Some((job, at)) = unsafe { self.copy_engine_list_job(rank, &list, Direction::Put)? } {
            return Ok(PendingTransfer::by_engine(self, rank, Transfer::ZeroCopy, job, at));
        }
        if let Some(at) = self.copied_now(rank, list, Direction::Put) {
            return Ok(PendingTransfer::at(self, rank, Transfer::ZeroCopy, at));
        }
        self.put_pieces(rank, &pieces)?;
        Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy))
    }

    /// The list's pieces as they lie in a segment mapped here, when its bounding range is plain
    /// segment memory mapped here and lists move host-assisted (one check, as the strided
    /// shortcut's): (piece in the segment, piece of the buffer, bytes).
    pub(crate) fn list_shortcut(
        &self,
        rank: Rank,
        pieces: &[(usize, *mut u8, usize)],
        direction: Direction,
    ) -> Option<Vec<(*mut u8, *mut u8, usize)>> {
        let lo = pieces.iter().map(|p| p.0).min()?;
        let hi = pieces.iter().map(|p| p.0.saturating_add(p.2)).max()?;
        let kind = if direction == Direction::Get { AccessKind::Get } else { AccessKind::Put };
        let Some((remote, HeapFast::Plain)) = self.shortcut(rank, lo, hi - lo, kind) else { return None };
        // SAFETY: every piece lies in [lo, hi), checked and mapped at `remote`.
        Some(pieces.iter().map(|&(addr, buffer, len)| (unsafe { remote.add(addr - lo) }, buffer, len)).collect())
    }

    /// A list moved by the list shortcut: host-assisted CPU copies.
    pub(crate) fn count_list_shortcut(&self, pieces: usize, direction: Direction, bytes: usize) {
        bump(&self.counters.noncontig_host_assisted, 1);
        bump(&self.counters.noncontig_pieces, pieces as u64);
        self.count_direct(direction, bytes);
    }

    /// A non-blocking list the list shortcut lets the CPU copy now: copied, counted and booked
    /// at the modelled network's time, which the transfer's wait keeps (not spun out at issue,
    /// as the blocking list's copies are). None: nothing done.
    fn copied_now(&self, rank: Rank, pieces: Vec<(usize, *mut u8, usize)>, direction: Direction) -> Option<u64> {
        let mapped = self.list_shortcut(rank, &pieces, direction)?;
        let bytes = pieces.iter().map(|p| p.2).sum();
        let at = self.net.completion_time(bytes);
        // Ordered as the blocking list's copies are (get_host_assisted, put_host_assisted).
        if direction == Direction::Get {
            fence(Ordering::Acquire);
        }
        // SAFETY: the pieces lie in the checked mapping and in the caller's buffers.
        unsafe { copy_pieces(&mapped, direction) };
        if direction == Direction::Put {
            fence(Ordering::Release);
        }
        self.count_list_shortcut(pieces.len(), direction, bytes);
        Some(at)
    }
}

/// Whether no two local ranges `(start, bytes)` share a byte.
fn apart(spans: impl Iterator<Item = (usize, usize)>) -> bool {
    let mut spans: Vec<(usize, usize)> = spans.collect();
    spans.sort_unstable();
    spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0)
}

#[cfg(test)]
mod tests {
    use super::apart;

    #[test]
    fn apart_sees_any_shared_byte() {
        assert!(apart([(100, 8), (0, 100), (108, 1)].into_iter()));
        assert!(!apart([(0, 8), (7, 8)].into_iter()));
        assert!(!apart([(50, 10), (0, 51)].into_iter()));
        assert!(apart(std::iter::empty()));
    }
}
