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
//!     the bounding range plain segment memory mapped here, host-assisted
//!                                      -> with a copy engine this run and
//!                                         ACTIVERMA_NB_TARGET_FROM bytes or more, its job
//!                                         (copy_engine.rs): copied by the engine thread while
//!                                         we go on, or by the wait if not started; else CPU
//!                                         copies now; complete at the modelled time
//!     otherwise                        -> get_pieces / put_pieces now (the run's method)
//! ```

use crate::copy_engine::Job;
use crate::strided::{apart, copy_pieces, Direction};
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
        let list: Vec<(usize, *mut u8, usize)> = pieces.iter_mut().map(|(a, d)| (*a, d.as_mut_ptr(), d.len())).collect();
        let bytes: usize = list.iter().map(|p| p.2).sum();
        let lent_out = bytes > 0 && apart(list.iter().map(|p| (p.1 as usize, p.2)));
        if lent_out && self.nb_moved_by_target(rank, bytes) {
            bump(&self.counters.noncontig_pieces, pieces.len() as u64);
            return Ok(PendingTransfer::target_moving(self, rank, Transfer::ZeroCopy, Ask::TargetGet(pieces), bytes));
        }
        if lent_out {
            // SAFETY: the returned transfer borrows every buffer until its wait or drop.
            if let Some(get) = unsafe { self.get_list_started(rank, &list)? } {
                let at = self.net.completion_time(bytes);
                return Ok(PendingTransfer::started_get(self, rank, Transfer::ZeroCopy, get, at));
            }
        }
        // SAFETY: as above.
        if let Some(moved) = unsafe { self.moved_by_shortcut(rank, &list, Direction::Get, lent_out) } {
            return Ok(moved);
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
        // SAFETY: the returned transfer borrows every piece until its wait or drop; a put only
        // reads them.
        if let Some(moved) = unsafe { self.moved_by_shortcut(rank, &list, Direction::Put, true) } {
            return Ok(moved);
        }
        self.put_pieces(rank, &pieces)?;
        Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy))
    }

    /// A list `(addr at rank, buffer, bytes)` whose bounding range is plain segment memory
    /// mapped here, lists moving host-assisted (one check, as the strided shortcut's): handed
    /// to the copy engine when `may_lend` and the engine takes it (copy_engine.rs), else
    /// copied by this CPU now; counted as those copies and complete at the modelled time
    /// either way (not spun out at issue, as the blocking list is). None: not such a list,
    /// nothing done.
    ///
    /// # Safety
    /// Every buffer is the caller's until the returned transfer completes.
    unsafe fn moved_by_shortcut<'a>(
        &'a self,
        rank: Rank,
        list: &[(usize, *mut u8, usize)],
        direction: Direction,
        may_lend: bool,
    ) -> Option<PendingTransfer<'a>> {
        let lo = list.iter().map(|p| p.0).min()?;
        let hi = list.iter().map(|p| p.0.saturating_add(p.2)).max()?;
        let kind = if direction == Direction::Get { AccessKind::Get } else { AccessKind::Put };
        let Some((remote, HeapFast::Plain)) = self.shortcut(rank, lo, hi - lo, kind) else { return None };
        // SAFETY: every piece lies in [lo, hi), checked and mapped at `remote`.
        let mapped: Vec<(*mut u8, *mut u8, usize)> =
            list.iter().map(|&(addr, buffer, len)| (unsafe { remote.add(addr - lo) }, buffer, len)).collect();
        let bytes = list.iter().map(|p| p.2).sum();
        let at = self.net.completion_time(bytes);
        bump(&self.counters.noncontig_host_assisted, 1);
        bump(&self.counters.noncontig_pieces, list.len() as u64);
        self.count_direct(direction, bytes);
        if may_lend && self.engine_takes(bytes) {
            // SAFETY: the pieces lie in the checked mapping and in the caller's buffers.
            let job = self.submit(unsafe { Job::pieces(mapped, direction) });
            return Some(PendingTransfer::by_engine(self, rank, Transfer::ZeroCopy, job, at));
        }
        // Ordered as the blocking list's copies are (get_host_assisted, put_host_assisted).
        if direction == Direction::Get {
            fence(Ordering::Acquire);
        }
        // SAFETY: as above.
        unsafe { copy_pieces(&mapped, direction) };
        if direction == Direction::Put {
            fence(Ordering::Release);
        }
        Some(PendingTransfer::at(self, rank, Transfer::ZeroCopy, at))
    }
}
