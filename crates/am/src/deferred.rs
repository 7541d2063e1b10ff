//! Messages a handler sent (`reply`, `forward`) that could not go at once (the destination's
//! send lock was busy, its queue full, or earlier ones to it were waiting): sent by the next
//! progress step, in order per destination.
//!
//! Every progress step asks whether anything waits; the answer comes from a count read
//! without the lock, so an idle step takes no lock here (a locked instruction per step is
//! latency on every active-message round trip, which polls in a loop).

use activerma_core::Rank;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub struct Deferred {
    pub dst: Rank,
    pub handler: u16,
    pub token: u64,
    pub payload: Vec<u8>,
}

#[derive(Default)]
pub struct DeferredQueue {
    queue: Mutex<VecDeque<Deferred>>,
    /// `queue.len()`, written under the lock.
    len: AtomicUsize,
}

impl DeferredQueue {
    /// Whether nothing waits (a message pushed by another thread concurrently may be missed:
    /// the next step sees it).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    pub fn push(&self, d: Deferred) {
        let mut q = self.queue.lock().unwrap();
        q.push_back(d);
        self.len.store(q.len(), Ordering::Release);
    }

    /// Whether a message to `dst` waits (a new one to it must queue behind).
    pub fn has_for(&self, dst: Rank) -> bool {
        !self.is_empty() && self.queue.lock().unwrap().iter().any(|d| d.dst == dst)
    }

    /// Takes the oldest message to `dst`.
    pub fn take_for(&self, dst: Rank) -> Option<Deferred> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.queue.lock().unwrap();
        let d = q.iter().position(|d| d.dst == dst).and_then(|i| q.remove(i));
        self.len.store(q.len(), Ordering::Release);
        d
    }

    /// The destinations something waits for (with repeats).
    pub fn destinations(&self) -> Vec<Rank> {
        self.queue.lock().unwrap().iter().map(|d| d.dst).collect()
    }

    /// Drops every message to `dst` (it cannot be reached).
    pub fn drop_for(&self, dst: Rank) {
        let mut q = self.queue.lock().unwrap();
        q.retain(|d| d.dst != dst);
        self.len.store(q.len(), Ordering::Release);
    }
}
