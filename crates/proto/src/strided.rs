//! Strided puts and gets: many pieces of one size at regular distances, described once. To a
//! segment mapped in this process the whole pattern is checked in one translation (its
//! bounding range) and every piece is one CPU copy, instead of one checked operation per
//! piece; anything else (private memory, Active Access pages, other hosts) becomes a list of
//! pieces for `noncontig` (host-assisted scatter/gather, per piece or packed, as
//! ACTIVERMA_NONCONTIG says).
//!
//! ```text
//! pattern: piece bytes; dimension k (1..levels) has counts[k-1] pieces,
//!          remote_strides[k-1] / local_strides[k-1] bytes apart; the first dimension fastest
//! get_strided(rank, addr, pattern, dst):
//!     extent = bounding range of the remote pieces
//!     host-assisted and segment_fast(rank, addr, extent) is plain memory
//!                    -> copy each piece; one op counted
//!     otherwise      -> get_pieces(rank, [(addr + r, dst[l..l + piece]) for each piece])
//! put_strided: the same the other way
//! ```

use crate::noncontig_target::{self, StridedAsk};
use crate::transfer::Ask;
use crate::{Noncontig, Proto};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast};
use std::sync::atomic::{fence, Ordering};

/// Pieces of a transfer lent out of one local buffer: (remote address, the local bytes).
pub(crate) type Pieces<'d> = Vec<(usize, &'d mut [u8])>;

/// A strided pattern (see the module's notes). Strides of each side must keep every piece of
/// a dimension apart from the next (no check: overlapping remote pieces are the caller's).
#[derive(Clone, Debug)]
pub struct StridedPattern {
    pub piece: usize,
    pub counts: Vec<usize>,
    pub remote_strides: Vec<usize>,
    pub local_strides: Vec<usize>,
}

impl StridedPattern {
    /// Fails if the arrays' lengths disagree.
    pub fn new(piece: usize, counts: Vec<usize>, remote_strides: Vec<usize>, local_strides: Vec<usize>) -> Result<StridedPattern> {
        if remote_strides.len() != counts.len() || local_strides.len() != counts.len() {
            return Err(Error::InvalidArgument(format!(
                "a strided pattern of {} levels needs that many strides on each side ({} remote, {} local)",
                counts.len(),
                remote_strides.len(),
                local_strides.len()
            )));
        }
        Ok(StridedPattern { piece, counts, remote_strides, local_strides })
    }

    pub fn is_empty(&self) -> bool {
        self.piece == 0 || self.counts.contains(&0)
    }

    /// Pieces in the pattern.
    pub fn pieces(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.counts.iter().product()
        }
    }

    /// Bytes the pattern moves.
    pub fn bytes(&self) -> usize {
        self.piece * self.pieces()
    }

    /// Bytes from the first byte to one past the last byte the pattern touches with these
    /// strides: every piece lies inside [base, base + extent).
    fn extent(&self, strides: &[usize]) -> Result<usize> {
        if self.is_empty() {
            return Ok(0);
        }
        let mut e = self.piece;
        for (c, s) in self.counts.iter().zip(strides) {
            e = (c - 1)
                .checked_mul(*s)
                .and_then(|x| x.checked_add(e))
                .ok_or_else(|| Error::InvalidArgument("the strided pattern spans more than the address space".into()))?;
        }
        Ok(e)
    }
    pub fn remote_extent(&self) -> Result<usize> {
        self.extent(&self.remote_strides)
    }
    pub fn local_extent(&self) -> Result<usize> {
        self.extent(&self.local_strides)
    }

    /// Calls f(remote offset, local offset) for every piece, the first dimension fastest.
    pub fn for_each<E>(&self, mut f: impl FnMut(usize, usize) -> std::result::Result<(), E>) -> std::result::Result<(), E> {
        if self.is_empty() {
            return Ok(());
        }
        let mut idx = vec![0usize; self.counts.len()];
        loop {
            let (mut r, mut l) = (0, 0);
            for (k, &i) in idx.iter().enumerate() {
                r += i * self.remote_strides[k];
                l += i * self.local_strides[k];
            }
            f(r, l)?;
            // Odometer step: the lowest dimension that is not at its end advances.
            let mut k = 0;
            loop {
                if k == idx.len() {
                    return Ok(());
                }
                idx[k] += 1;
                if idx[k] < self.counts[k] {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
        }
    }

    /// The pattern's pieces as (remote address, local bytes) from `addr` and `dst`, in the
    /// pattern's order; None when pieces overlap on the local side (a stride below the piece),
    /// where no two of them may borrow the same bytes: then take them one at a time.
    pub(crate) fn pieces_of<'d>(&self, addr: usize, dst: &'d mut [u8]) -> Result<Option<Pieces<'d>>> {
        self.check_local(dst.len())?;
        let piece = self.piece;
        let offsets = self.offsets()?;
        if !self.local_nested()? && !disjoint(&offsets, piece) {
            return Ok(None);
        }
        let base = dst.as_mut_ptr();
        Ok(Some(
            offsets
                .iter()
                // SAFETY: l + piece <= dst.len() (check_local), and no two local ranges overlap.
                .map(|&(r, l)| (addr + r, unsafe { std::slice::from_raw_parts_mut(base.add(l), piece) }))
                .collect(),
        ))
    }

    /// The pattern's pieces as (remote address, local bytes) from `addr` and `src`, in the
    /// pattern's order (pieces that overlap on the local side may: they are only read).
    pub(crate) fn source_pieces<'s>(&self, addr: usize, src: &'s [u8]) -> Result<Vec<(usize, &'s [u8])>> {
        self.check_local(src.len())?;
        Ok(self.offsets()?.into_iter().map(|(r, l)| (addr + r, &src[l..l + self.piece])).collect())
    }

    /// Whether no two pieces overlap on the local side (then `pieces_of` lends them out).
    pub(crate) fn local_pieces_apart(&self) -> Result<bool> {
        Ok(self.local_nested()? || disjoint(&self.offsets()?, self.piece))
    }

    /// Whether each level's local stride clears everything the levels below it span (an
    /// array's patch, row by row): then no two pieces overlap locally, seen in O(levels)
    /// instead of sorting every piece's offset. False says nothing (check the pieces).
    fn local_nested(&self) -> Result<bool> {
        let mut below = self.piece;
        for (&count, &stride) in self.counts.iter().zip(&self.local_strides) {
            if count > 1 && stride < below {
                return Ok(false);
            }
            below = (count.max(1) - 1)
                .checked_mul(stride)
                .and_then(|x| x.checked_add(below))
                .ok_or_else(|| Error::InvalidArgument("the strided pattern spans more than the address space".into()))?;
        }
        Ok(true)
    }

    /// Every piece's (remote, local) offset, in the pattern's order.
    fn offsets(&self) -> Result<Vec<(usize, usize)>> {
        let mut offsets = Vec::with_capacity(self.pieces());
        self.for_each(|r, l| {
            offsets.push((r, l));
            Ok::<(), Error>(())
        })?;
        Ok(offsets)
    }

    /// Checks that the local buffer holds the pattern's local side.
    pub(crate) fn check_local(&self, len: usize) -> Result<()> {
        let need = self.local_extent()?;
        if len < need {
            return Err(Error::InvalidArgument(format!("the local buffer has {len} bytes but the strided pattern reaches {need}")));
        }
        Ok(())
    }
}

impl Proto {
    /// Blocking strided get from `rank`'s `addr` into `dst` (laid out by the local strides).
    pub fn get_strided(&self, rank: Rank, addr: usize, pattern: &StridedPattern, dst: &mut [u8]) -> Result<()> {
        let complete_at = self.get_strided_moved(rank, addr, pattern, dst)?;
        crate::completion::spin_until(complete_at);
        Ok(())
    }

    /// The strided get's data movement: returns once `dst` holds the bytes, with the modelled
    /// time the transfer completes at (0: now; the modelled network books only the CPU-copied
    /// shortcut here, the other paths wait for their own completion).
    pub(crate) fn get_strided_moved(&self, rank: Rank, addr: usize, pattern: &StridedPattern, dst: &mut [u8]) -> Result<u64> {
        pattern.check_local(dst.len())?;
        let extent = pattern.remote_extent()?;
        if extent == 0 {
            return Ok(0);
        }
        if let Some((local, HeapFast::Plain)) = self.shortcut(rank, addr, extent, AccessKind::Get) {
            // Booked at issue, as a contiguous get's is (`Proto::get_start`).
            let at = self.net.completion_time(pattern.bytes());
            fence(Ordering::Acquire);
            // SAFETY: the extent lies inside the checked mapping, the local pieces in `dst`.
            unsafe { pattern.copy_mapped(local, dst.as_mut_ptr(), Direction::Get) };
            self.count_shortcut(pattern);
            self.count_direct(Direction::Get, pattern.bytes());
            return Ok(at);
        }
        if self.target_moves(rank, pattern) && pattern.local_pieces_apart()? {
            bump(&self.counters.noncontig_pieces, pattern.pieces() as u64);
            let ask = StridedAsk { addr, pattern: pattern.clone(), local: dst };
            return noncontig_target::moved_by_target(self, rank, Ask::TargetGetStrided(ask), pattern.bytes()).map(|_| 0);
        }
        // The pieces may overlap on the local side (a stride below the piece): take them apart
        // from the buffer one at a time, so that no two pieces borrow the same bytes.
        if let Some(mut pieces) = pattern.pieces_of(addr, dst)? {
            return self.get_pieces(rank, &mut pieces).map(|_| 0);
        }
        let piece = pattern.piece;
        pattern.for_each(|r, l| self.get(rank, addr + r, &mut dst[l..l + piece]))?;
        Ok(0)
    }

    /// A pattern moved by the shortcut is a host-assisted list too.
    pub(crate) fn count_shortcut(&self, pattern: &StridedPattern) {
        bump(&self.counters.noncontig_host_assisted, 1);
        bump(&self.counters.noncontig_pieces, pattern.pieces() as u64);
    }

    /// A transfer the CPU copied to or from a segment mapped here (`put_direct`/`get_direct`).
    pub(crate) fn count_direct(&self, direction: Direction, bytes: usize) {
        let (calls, moved) = match direction {
            Direction::Get => (&self.counters.get_direct, &self.counters.bytes_got),
            Direction::Put => (&self.counters.put_direct, &self.counters.bytes_put),
        };
        bump(calls, 1);
        bump(moved, bytes as u64);
    }

    /// The whole pattern in one check, when it lies in plain memory of a segment mapped here
    /// and lists are moved host-assisted (the other methods are there to be compared).
    pub(crate) fn shortcut(&self, rank: Rank, addr: usize, extent: usize, kind: AccessKind) -> Option<(*mut u8, HeapFast<'_>)> {
        if self.noncontig() != Noncontig::HostAssisted {
            return None;
        }
        self.segment_fast(rank, addr, extent, kind)
    }

    /// Blocking strided put of `src` (laid out by the local strides) to `rank`'s `addr`.
    pub fn put_strided(&self, rank: Rank, addr: usize, pattern: &StridedPattern, src: &[u8]) -> Result<()> {
        let complete_at = self.put_strided_moved(rank, addr, pattern, src)?;
        crate::completion::spin_until(complete_at);
        Ok(())
    }

    /// The strided put's data movement, as `get_strided_moved`: returns once the bytes are in
    /// place, with the modelled time the transfer completes at (0: now).
    pub(crate) fn put_strided_moved(&self, rank: Rank, addr: usize, pattern: &StridedPattern, src: &[u8]) -> Result<u64> {
        pattern.check_local(src.len())?;
        let extent = pattern.remote_extent()?;
        if extent == 0 {
            return Ok(0);
        }
        if let Some((local, HeapFast::Plain)) = self.shortcut(rank, addr, extent, AccessKind::Put) {
            let at = self.net.completion_time(pattern.bytes());
            // SAFETY: as for the get; a put only reads `src`.
            unsafe { pattern.copy_mapped(local, src.as_ptr() as *mut u8, Direction::Put) };
            fence(Ordering::Release);
            self.count_shortcut(pattern);
            self.count_direct(Direction::Put, pattern.bytes());
            return Ok(at);
        }
        if self.target_moves(rank, pattern) {
            bump(&self.counters.noncontig_pieces, pattern.pieces() as u64);
            let ask = StridedAsk { addr, pattern: pattern.clone(), local: src };
            return noncontig_target::moved_by_target(self, rank, Ask::TargetPutStrided(ask), pattern.bytes()).map(|_| 0);
        }
        self.put_pieces(rank, &pattern.source_pieces(addr, src)?).map(|_| 0)
    }

    /// Whether `rank`'s CPU moves this pattern, sent as the pattern (target-assisted lists
    /// on this host; a pattern too large to describe goes as a list).
    fn target_moves(&self, rank: Rank, pattern: &StridedPattern) -> bool {
        self.noncontig() == Noncontig::TargetAssisted && self.target_can_assist(rank) && noncontig_target::sends_as_pattern(pattern)
    }
}

/// Which way a pattern's bytes go between a segment mapped here and a local buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Segment -> buffer.
    Get,
    /// Buffer -> segment.
    Put,
}

impl StridedPattern {
    /// Copies every piece between `remote + r` (a segment mapped here) and `local + l`, for
    /// each (r, l) of the pattern, in the pattern's order (the CPU standing for the NIC: the
    /// strided shortcut and the copy engine).
    ///
    /// # Safety
    /// Every piece lies inside the mapping at `remote` and inside the buffer at `local`, which
    /// nobody else writes meanwhile (a put only reads it).
    pub(crate) unsafe fn copy_mapped(&self, remote: *mut u8, local: *mut u8, direction: Direction) {
        let piece = self.piece;
        let _ = self.for_each(|r, l| {
            // SAFETY: the caller's contract.
            unsafe {
                match direction {
                    Direction::Get => activerma_core::copy::copy_bytes(remote.add(r), local.add(l), piece),
                    Direction::Put => activerma_core::copy::copy_bytes(local.add(l), remote.add(r), piece),
                }
            }
            Ok::<(), ()>(())
        });
    }
}

/// Copies every piece (in a segment mapped here, in the caller's buffer, bytes) the way
/// `direction` says: the list form of `StridedPattern::copy_mapped`.
///
/// # Safety
/// Every piece is valid for its bytes on both sides.
pub(crate) unsafe fn copy_pieces(pieces: &[(*mut u8, *mut u8, usize)], direction: Direction) {
    for &(mapped, buffer, len) in pieces {
        // SAFETY: the caller's contract.
        unsafe {
            match direction {
                Direction::Get => activerma_core::copy::copy_bytes(mapped, buffer, len),
                Direction::Put => activerma_core::copy::copy_bytes(buffer, mapped, len),
            }
        }
    }
}

/// Whether the local ranges [l, l + piece) of the offsets are pairwise apart.
fn disjoint(offsets: &[(usize, usize)], piece: usize) -> bool {
    apart(offsets.iter().map(|o| (o.1, piece)))
}

/// Whether no two ranges `(start, bytes)` share a byte.
pub(crate) fn apart(spans: impl Iterator<Item = (usize, usize)>) -> bool {
    let mut spans: Vec<(usize, usize)> = spans.collect();
    spans.sort_unstable();
    spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apart_sees_any_shared_byte() {
        assert!(apart([(100, 8), (0, 100), (108, 1)].into_iter()));
        assert!(!apart([(0, 8), (7, 8)].into_iter()));
        assert!(!apart([(50, 10), (0, 51)].into_iter()));
        assert!(apart(std::iter::empty()));
    }

    #[test]
    fn local_pieces_apart_by_nesting_or_by_sorting() {
        // Rows of an array's patch: each stride clears the level below (seen without sorting).
        let rows = StridedPattern::new(8, vec![3, 2], vec![100, 1000], vec![8, 24]).unwrap();
        assert!(rows.local_nested().unwrap() && rows.local_pieces_apart().unwrap());
        // Transposed: the outer stride is the smaller one; apart, found by sorting.
        let transposed = StridedPattern::new(8, vec![2, 2], vec![64, 8], vec![16, 8]).unwrap();
        assert!(!transposed.local_nested().unwrap() && transposed.local_pieces_apart().unwrap());
        // A stride below the piece: pieces overlap.
        let overlapping = StridedPattern::new(8, vec![3], vec![8], vec![4]).unwrap();
        assert!(!overlapping.local_pieces_apart().unwrap());
        // A level of one piece says nothing about its stride.
        let single = StridedPattern::new(8, vec![1, 4], vec![0, 8], vec![0, 8]).unwrap();
        assert!(single.local_nested().unwrap());
    }

    #[test]
    fn strided_pattern_visits_every_piece_first_dimension_fastest() {
        let p = StridedPattern::new(8, vec![3, 2], vec![100, 1000], vec![8, 24]).unwrap();
        let mut seen = Vec::new();
        p.for_each(|r, l| {
            seen.push((r, l));
            Ok::<(), Error>(())
        })
        .unwrap();
        assert_eq!(seen, vec![(0, 0), (100, 8), (200, 16), (1000, 24), (1100, 32), (1200, 40)]);
        assert_eq!((p.pieces(), p.remote_extent().unwrap(), p.local_extent().unwrap()), (6, 1208, 48));
        assert!(p.check_local(47).is_err() && p.check_local(48).is_ok());
        let empty = StridedPattern::new(8, vec![0], vec![8], vec![8]).unwrap();
        assert_eq!((empty.pieces(), empty.remote_extent().unwrap()), (0, 0));
        assert!(StridedPattern::new(8, vec![2], vec![], vec![8]).is_err(), "strides must match the levels");
        let huge = StridedPattern::new(8, vec![usize::MAX], vec![usize::MAX], vec![8]).unwrap();
        assert!(huge.remote_extent().is_err(), "overflow is an error");
    }
}
