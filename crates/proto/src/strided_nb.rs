//! Non-blocking strided gets and puts by transfer protocol (the ARMCI paper's §4 protocols
//! applied to a 2-D patch: what ARMCI_NbGetS / NbPutS call, and its Figure 7(b) measures).
//!
//! ```text
//! get_strided_nb_by(t, rank, addr, pattern, dst):   (put_strided_nb_by: the same, the pieces'
//!                                                    bytes in the requests, which the target
//!                                                    scatters and acknowledges)
//!     (run, counted as) = resolve(t, rank, addr, remote extent, Get)       (transfer.rs)
//!     buffered  -> the pieces in groups of at most a landing slot (a longer piece split), one
//!                  at a time: the target's CPU gathers a group into the slot, `test`/`wait`
//!                  get it and scatter it into dst (landing.rs); without a landing zone, one
//!                  packed request listing every piece, answered in one message
//!     pipelined -> the same groups, up to PIPELINE_DEPTH in flight (without a landing zone:
//!                  packed requests of at most ACTIVERMA_PIPELINE_CHUNK bytes)
//!     zero-copy -> the core's strided path moves the data now (one check, a CPU copy per
//!                  piece to a segment mapped here); complete at the modelled network's time
//!                  (ACTIVERMA_NONCONTIG=target-assisted, a rank of this host: one request
//!                  with the list, the target's CPU moves the pieces into dst by scatter/gather
//!                  calls while ours goes on; complete at its answer and the modelled time;
//!                  from ACTIVERMA_NB_TARGET_FROM bytes into plain segment memory mapped
//!                  here, with a copy engine this run (copy_engine.rs) and a target that does
//!                  not move it itself: checked and booked now, the engine thread copies it
//!                  while we go on, the wait takes it back if the engine has not started it;
//!                  a get from a rank of another host, host-assisted: the list's one-sided
//!                  get started as one operation (MPI_Rget, a datatype each side, straight
//!                  into dst's pieces); complete when the conduit says so and at the
//!                  modelled time)
//!     dynamic registration -> dst pinned for the call, then the core's path
//!     local pieces that overlap (a stride below the piece) cannot be lent out one request
//!     each: the core's path, blocking
//! ```

use crate::noncontig_target::{self, StridedAsk};
use crate::strided::{Direction, Pieces, StridedPattern};
use crate::transfer::{Ask, PendingTransfer, Run};
use crate::{Proto, Transfer};
use activerma_core::{Rank, Result};
use activerma_mem::AccessKind;
use std::collections::VecDeque;

impl Proto {
    /// Non-blocking strided get by protocol `t` (Auto: chosen for the pattern's remote extent):
    /// `dst`, laid out by the pattern's local strides, holds the pieces once the returned
    /// handle's `wait` returns (it borrows `dst` until then).
    pub fn get_strided_nb_by<'a>(
        &'a self,
        t: Transfer,
        rank: Rank,
        addr: usize,
        pattern: &StridedPattern,
        dst: &'a mut [u8],
    ) -> Result<PendingTransfer<'a>> {
        self.check_rank(rank)?;
        let extent = pattern.remote_extent()?;
        let bytes = pattern.bytes();
        if extent == 0 || bytes == 0 {
            pattern.pieces_of(addr, dst)?; // the local buffer is still checked
            return Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy));
        }
        let (run, used) = self.resolve(t, rank, addr, extent, AccessKind::Get)?;
        if let Some((limit, depth)) = self.through_target(run) {
            if pattern.local_pieces_apart()? {
                let pieces = pattern.pieces_of(addr, dst)?.expect("the local pieces lie apart");
                self.count(used, bytes);
                return Ok(PendingTransfer::asking(self, rank, used, self.get_asks(pieces, limit), depth));
            }
            // Overlapping local pieces: lent out one at a time, by the core's path, and counted
            // as what that path is.
            let (_, core) = self.resolve(Transfer::ZeroCopy, rank, addr, extent, AccessKind::Get)?;
            let at = self.get_strided_moved(rank, addr, pattern, dst)?;
            return Ok(PendingTransfer::at(self, rank, self.count(core, bytes), at));
        }
        if run == Run::PinUserBuffer {
            let (start, len) = (dst.as_ptr() as usize, dst.len());
            let used = self.pinning_user_buffer(start, len, |pinned| {
                if pinned {
                    self.get_strided(rank, addr, pattern, dst)
                } else {
                    match pattern.pieces_of(addr, &mut *dst)? {
                        Some(pieces) => {
                            let asks = self.get_asks(pieces, self.transfer.chunk);
                            PendingTransfer::asking(self, rank, Transfer::Pipelined, asks, None).wait().map(drop)
                        }
                        None => self.get_strided(rank, addr, pattern, dst),
                    }
                }
            })?;
            return Ok(PendingTransfer::done(self, rank, self.count(used, bytes)));
        }
        if self.nb_moved_by_target(rank, bytes) && pattern.local_pieces_apart()? {
            let ask = if noncontig_target::sends_as_pattern(pattern) {
                pattern.check_local(dst.len())?;
                Ask::TargetGetStrided(StridedAsk { addr, pattern: pattern.clone(), local: dst })
            } else {
                Ask::TargetGet(pattern.pieces_of(addr, dst)?.expect("the local pieces lie apart"))
            };
            return Ok(PendingTransfer::target_moving(self, rank, self.count(used, bytes), ask, bytes));
        }
        if self.list_gets_start_one_sided(rank) && pattern.local_pieces_apart()? {
            let pieces = pattern.pieces_of(addr, dst)?.expect("the local pieces lie apart");
            let list: Vec<(usize, *mut u8, usize)> = pieces.into_iter().map(|(a, d)| (a, d.as_mut_ptr(), d.len())).collect();
            // SAFETY: the returned transfer borrows `dst` until its wait or drop.
            if let Some(get) = unsafe { self.get_list_started(rank, &list)? } {
                let at = self.net.completion_time(bytes);
                return Ok(PendingTransfer::started_get(self, rank, self.count(used, bytes), get, at));
            }
        }
        // SAFETY: the returned transfer borrows `dst` until its wait or drop.
        if let Some((job, at)) = unsafe { self.copy_engine_job(rank, addr, pattern, dst.as_mut_ptr(), dst.len(), Direction::Get)? } {
            return Ok(PendingTransfer::by_engine(self, rank, self.count(used, bytes), job, at));
        }
        let at = self.get_strided_moved(rank, addr, pattern, dst)?;
        Ok(PendingTransfer::at(self, rank, self.count(used, bytes), at))
    }
}

impl Proto {
    /// Non-blocking strided put by protocol `t`, as `get_strided_nb_by`: `src` (laid out by the
    /// pattern's local strides) is borrowed until the handle's `wait` returns. Buffered and
    /// pipelined puts carry the pieces in packed requests the target's CPU scatters (sent now,
    /// or when cells free up, by `test`/`wait`); zero-copy moves them now.
    pub fn put_strided_nb_by<'a>(
        &'a self,
        t: Transfer,
        rank: Rank,
        addr: usize,
        pattern: &StridedPattern,
        src: &'a [u8],
    ) -> Result<PendingTransfer<'a>> {
        self.check_rank(rank)?;
        let extent = pattern.remote_extent()?;
        let bytes = pattern.bytes();
        pattern.check_local(src.len())?;
        if extent == 0 || bytes == 0 {
            return Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy));
        }
        let (run, used) = self.resolve(t, rank, addr, extent, AccessKind::Put)?;
        let pieces = || pattern.source_pieces(addr, src);
        let (request_bytes, depth) = match run {
            Run::Buffered | Run::Pipelined => self.through_target(run).expect("buffered and pipelined go through the target"),
            Run::PinUserBuffer => {
                let used = self.pinning_user_buffer(src.as_ptr() as usize, src.len(), |pinned| {
                    if pinned {
                        self.put_strided(rank, addr, pattern, src)
                    } else {
                        let asks = self.put_asks(pieces()?, self.transfer.chunk);
                        PendingTransfer::asking(self, rank, Transfer::Pipelined, asks, None).wait().map(drop)
                    }
                })?;
                return Ok(PendingTransfer::done(self, rank, self.count(used, bytes)));
            }
            Run::Core if self.nb_moved_by_target(rank, bytes) => {
                let ask = if noncontig_target::sends_as_pattern(pattern) {
                    Ask::TargetPutStrided(StridedAsk { addr, pattern: pattern.clone(), local: src })
                } else {
                    Ask::TargetPut(pieces()?)
                };
                return Ok(PendingTransfer::target_moving(self, rank, self.count(used, bytes), ask, bytes));
            }
            Run::Core => {
                // The engine only reads `src` (borrowed until the wait, as every put here).
                // SAFETY: as for the get: `src` is borrowed until the wait.
                let job = unsafe { self.copy_engine_job(rank, addr, pattern, src.as_ptr() as *mut u8, src.len(), Direction::Put)? };
                if let Some((job, at)) = job {
                    return Ok(PendingTransfer::by_engine(self, rank, self.count(used, bytes), job, at));
                }
                let at = self.put_strided_moved(rank, addr, pattern, src)?;
                return Ok(PendingTransfer::at(self, rank, self.count(used, bytes), at));
            }
        };
        self.count(used, bytes);
        let asks = self.put_asks(pieces()?, request_bytes);
        Ok(PendingTransfer::asking(self, rank, used, asks, depth))
    }

    /// For a run through the target's CPU: the bytes per packed message without a landing
    /// zone, and the requests in flight at once (None: PIPELINE_DEPTH) — buffered takes one
    /// landing slot at a time, or everything in one message.
    fn through_target(&self, run: Run) -> Option<(usize, Option<usize>)> {
        match run {
            Run::Buffered if self.landing().is_some() => Some((usize::MAX, Some(1))),
            Run::Buffered => Some((usize::MAX, None)),
            Run::Pipelined => Some((self.transfer.chunk, None)),
            Run::Core | Run::PinUserBuffer => None,
        }
    }

    /// A list get's requests through the target's CPU: groups of at most a landing slot where
    /// the job has a landing zone, else packed messages of at most `limit` bytes.
    pub(crate) fn get_asks<'d>(&self, pieces: Pieces<'d>, limit: usize) -> VecDeque<Ask<'d>> {
        match self.landing() {
            Some(l) => grouped(pieces, l.slot_bytes()).into_iter().map(|g| Ask::LandedPieces(g, None)).collect(),
            None => packed_asks(pieces, limit),
        }
    }

    /// A list put's requests, as `get_asks`.
    pub(crate) fn put_asks<'d>(&self, pieces: Vec<(usize, &'d [u8])>, limit: usize) -> VecDeque<Ask<'d>> {
        match self.landing() {
            Some(l) => grouped(pieces, l.slot_bytes()).into_iter().map(|g| Ask::LandedPutPieces(g, None)).collect(),
            None => grouped(pieces, limit).into_iter().map(Ask::PutPieces).collect(),
        }
    }
}

/// Bytes a request lends out: a piece to fill (a get) or to send (a put), split where a
/// request's limit falls.
trait Lent: Sized {
    fn len(&self) -> usize;
    fn split(self, at: usize) -> (Self, Self);
}

impl Lent for &mut [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at_mut(at)
    }
}

impl Lent for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at(at)
    }
}

/// The pieces in groups of at most `limit` bytes each, in order, for one packed request each;
/// a piece longer than `limit` is split (its parts are pieces of their own).
fn grouped<B: Lent>(pieces: Vec<(usize, B)>, limit: usize) -> Vec<Vec<(usize, B)>> {
    let limit = limit.max(1);
    let mut groups = Vec::new();
    let mut group: Vec<(usize, B)> = Vec::new();
    let mut group_bytes = 0;
    for (at, piece) in pieces {
        let (mut rest, mut off) = (piece, 0);
        loop {
            let n = rest.len().min(limit);
            let (part, tail) = rest.split(n);
            if group_bytes + n > limit && !group.is_empty() {
                groups.push(std::mem::take(&mut group));
                group_bytes = 0;
            }
            group_bytes += n;
            group.push((at + off, part));
            (rest, off) = (tail, off + n);
            if rest.len() == 0 {
                break;
            }
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
}

/// A strided get's pieces in packed requests of at most `limit` bytes.
fn packed_asks(pieces: Pieces<'_>, limit: usize) -> VecDeque<Ask<'_>> {
    grouped(pieces, limit).into_iter().map(Ask::Pieces).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_asks_group_pieces_up_to_the_limit_and_split_long_ones() {
        let mut buf = [0u8; 40];
        let (a, rest) = buf.split_at_mut(10);
        let (b, c) = rest.split_at_mut(25);
        let pieces = vec![(1000, a), (2000, b), (3000, c)];
        let lists: Vec<Vec<(usize, usize)>> = packed_asks(pieces, 16)
            .into_iter()
            .map(|ask| match ask {
                Ask::Pieces(p) => p.iter().map(|(at, d)| (*at, d.len())).collect(),
                _ => panic!("strided gets ask for pieces"),
            })
            .collect();
        assert_eq!(lists, vec![vec![(1000, 10)], vec![(2000, 16)], vec![(2016, 9), (3000, 5)]]);
        let mut one = [0u8; 8];
        let all = packed_asks(vec![(7, &mut one[..])], usize::MAX);
        assert_eq!(all.len(), 1, "buffered: one request for everything");
    }
}
