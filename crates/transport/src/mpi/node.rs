//! Active messages between ranks of one node on the mpi conduit: each rank's inbox lives in its
//! part of the node's shared window (after its heap and table), as on the smp conduit, so
//! messages inside a node never enter MPI; a progress thread asleep is woken by a futex on its
//! wake word. Ranks of other nodes still get MPI point-to-point messages (`am.rs`).

use crate::inbox::{Fragment, Inbox, Receiver, WakeWords};
use activerma_core::page::page_ceil;
use activerma_core::{futex, settings, Config, Rank, Result};
use std::sync::atomic::{fence, AtomicU64, Ordering};

pub struct NodeQueues {
    /// Per rank of the job, where its wake words (and, after them, its inbox) are mapped here;
    /// None for ranks of other nodes.
    at: Vec<Option<usize>>,
    /// Per destination, its inbox's head as this rank last read it.
    seen_heads: Vec<AtomicU64>,
    receiver: Receiver,
    slots: usize,
    slot_size: usize,
}

/// Slots and slot size of every inbox (the smp conduit's settings).
pub fn shape(cfg: &Config) -> Result<(usize, usize)> {
    let (slots, slot_size) = (cfg.get_u64(settings::AM_SLOTS)?, cfg.get_u64(settings::AM_SLOT_SIZE)?);
    crate::inbox::check_settings(slots, slot_size)?;
    Ok((slots as usize, slot_size as usize))
}

/// Bytes a rank's wake words and inbox take in its part of the node's window.
pub fn bytes((slots, slot_size): (usize, usize)) -> usize {
    page_ceil(std::mem::size_of::<WakeWords>() + Inbox::bytes(slots, slot_size))
}

impl NodeQueues {
    /// `at[r]`: where rank r's queue area is mapped here (None: another node). Our own area
    /// must be zeroed before any rank of the node sends (init's collectives order that).
    pub fn new(at: Vec<Option<usize>>, (slots, slot_size): (usize, usize)) -> NodeQueues {
        let n = at.len();
        NodeQueues { at, seen_heads: (0..n).map(|_| AtomicU64::new(0)).collect(), receiver: Receiver::default(), slots, slot_size }
    }

    pub fn on_node(&self, rank: Rank) -> bool {
        self.at[rank].is_some()
    }

    pub fn capacity(&self) -> usize {
        self.slot_size - crate::inbox::SLOT_HEADER
    }

    fn words(&self, rank: Rank) -> Option<&WakeWords> {
        // SAFETY: the area of a rank of this node, mapped for the conduit's lifetime.
        self.at[rank].map(|a| unsafe { &*(a as *const WakeWords) })
    }

    fn inbox(&self, rank: Rank) -> Option<Inbox> {
        // SAFETY: the inbox follows the wake words in the rank's area (128-aligned), mapped
        // for the conduit's lifetime and used as nothing else.
        self.at[rank].map(|a| unsafe { Inbox::new((a + std::mem::size_of::<WakeWords>()) as *mut u8, self.slots, self.slot_size) })
    }

    /// Some(sent?) when `dst` is on this node, None otherwise (the caller sends through MPI).
    pub fn try_send(&self, me: Rank, dst: Rank, header: crate::FragHeader, payload: &[u8], deliver_at: u64) -> Option<bool> {
        let sent = self.inbox(dst)?.try_push(me as u32, &self.seen_heads[dst], header, payload, deliver_at, 0);
        if sent {
            // Pairs with the SeqCst store of `sleeping` in `sleep`.
            fence(Ordering::SeqCst);
            if self.words(dst).is_some_and(|w| w.sleeping.load(Ordering::Relaxed) != 0) {
                self.wake(dst);
            }
        }
        Some(sent)
    }

    /// Runs `f` on up to `budget` fragments of our inbox (the caller holds the poll lock).
    pub fn poll(&self, me: Rank, budget: usize, f: &mut dyn FnMut(Fragment)) -> usize {
        match self.inbox(me) {
            // MPI ends the job when a rank dies: no claimer is ever dead while we run.
            Some(inbox) => self.receiver.poll(&inbox, budget, &|_, _| false, f),
            None => 0,
        }
    }

    /// Sets our `serving` word (a no-op off a shared node).
    pub fn announce_serving(&self, me: Rank, on_its_own: bool) {
        if let Some(w) = self.words(me) {
            w.serving.store(on_its_own as u32, Ordering::Release);
        }
    }

    /// `rank`'s `serving` word; false for ranks of other nodes.
    pub fn serves_on_its_own(&self, rank: Rank) -> bool {
        self.words(rank).is_some_and(|w| w.serving.load(Ordering::Acquire) != 0)
    }

    pub fn wake(&self, rank: Rank) {
        if let Some(w) = self.words(rank) {
            w.wake.fetch_add(1, Ordering::AcqRel);
            futex::wake_all(&w.wake);
        }
    }

    /// Sleeps on our wake word for at most `timeout_ns`, unless `still_idle` says otherwise
    /// once `sleeping` is announced; false when we are not on a shared node (no word).
    pub fn sleep(&self, me: Rank, timeout_ns: u64, still_idle: &mut dyn FnMut() -> bool) -> bool {
        let Some(w) = self.words(me) else { return false };
        let word = w.wake.load(Ordering::Acquire);
        w.sleeping.store(1, Ordering::SeqCst);
        if still_idle() {
            futex::wait(&w.wake, word, timeout_ns);
        }
        w.sleeping.store(0, Ordering::Release);
        true
    }
}
