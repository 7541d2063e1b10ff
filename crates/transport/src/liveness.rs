//! Which incarnation of each rank this process talks to, in a job whose launcher replaces
//! ranks that die (`activerma run --respawn N`).
//!
//! Every rank has a life word in the job's shared memory, `incarnation << 1 | down`, written
//! by the launcher when the rank dies (next incarnation, down) and by the replacement when it
//! has rejoined (same incarnation, up). Every process keeps the life word it last agreed to
//! for each peer (`known`). An operation to a peer is allowed while the two are equal — one
//! load of a read-mostly line, paid only in respawn jobs; otherwise it fails with
//! `RankFailed` until the program calls `wait_for_rank(peer)`, which adopts the new word once
//! the replacement is up. So no write of a survivor reaches a replacement's memory before the
//! replacement has restored it and said so, and none of a survivor's waits hangs on a dead
//! process.

use crate::mapping::Mapping;
use activerma_core::{Error, Rank, Result};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A life word: `incarnation << 1 | down`.
pub const DOWN: u32 = 1;

pub fn incarnation_of(life: u32) -> u32 {
    life >> 1
}

pub struct Liveness {
    /// Keeps the shared words mapped.
    _map: Arc<Mapping>,
    words: *const AtomicU32,
    known: Vec<AtomicU32>,
}

// SAFETY: the words are atomics in a shared mapping that `_map` keeps alive.
unsafe impl Send for Liveness {}
unsafe impl Sync for Liveness {}

impl Liveness {
    /// # Safety
    /// `words` points to `n` life words inside `map`.
    pub unsafe fn new(map: Arc<Mapping>, words: *const AtomicU32, n: usize) -> Liveness {
        // SAFETY: per the contract.
        let known = (0..n).map(|r| AtomicU32::new(unsafe { (*words.add(r)).load(Ordering::Acquire) })).collect();
        Liveness { _map: map, words, known }
    }

    /// The shared life word of `rank`.
    #[inline]
    pub fn word(&self, rank: Rank) -> &AtomicU32 {
        debug_assert!(rank < self.known.len());
        // SAFETY: rank < n (callers checked the rank), inside the mapping.
        unsafe { &*self.words.add(rank) }
    }

    /// The life word this process last agreed to for `rank`.
    #[inline]
    pub fn known(&self, rank: Rank) -> u32 {
        self.known[rank].load(Ordering::Relaxed)
    }

    /// Whether `rank` is the incarnation this process talks to, and up.
    #[inline]
    pub fn usable(&self, rank: Rank) -> bool {
        self.word(rank).load(Ordering::Acquire) == self.known(rank)
    }

    /// `RankFailed` naming the incarnation we knew, if `rank` is not usable.
    #[inline]
    pub fn check(&self, rank: Rank) -> Result<()> {
        if self.usable(rank) {
            return Ok(());
        }
        Err(self.failed(rank))
    }

    #[cold]
    pub fn failed(&self, rank: Rank) -> Error {
        Error::RankFailed { rank, incarnation: incarnation_of(self.known(rank)) }
    }

    /// The first rank (other than `me`) whose life changed since we agreed to it.
    pub fn first_failed(&self, me: Rank) -> Option<Error> {
        (0..self.known.len()).filter(|&r| r != me).find(|&r| !self.usable(r)).map(|r| self.failed(r))
    }

    /// Adopts `rank`'s current life word if it is up; returns it.
    pub fn adopt_if_up(&self, rank: Rank) -> Option<u32> {
        let life = self.word(rank).load(Ordering::Acquire);
        if life & DOWN != 0 {
            return None;
        }
        self.known[rank].store(life, Ordering::Relaxed);
        Some(life)
    }
}
