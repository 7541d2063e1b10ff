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
//!     otherwise                        -> get_pieces / put_pieces now (the run's method)
//! ```

use crate::strided::Direction;
use crate::transfer::{Ask, PendingTransfer};
use crate::{Proto, Transfer};
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};

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
        self.put_pieces(rank, &pieces)?;
        Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy))
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
