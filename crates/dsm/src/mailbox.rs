//! What handlers leave for the rank's own thread: replies it waits for. Shared between the
//! handlers (which may run on the progress thread) and the calls that wait.

use crate::global_ref::GlobalRef;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Mailbox {
    /// The object reply that came as a message: (sequence number, body).
    pub reply: Mutex<Option<(u64, Vec<u8>)>>,
    /// Locks granted to this rank (or refused: the text), not taken yet.
    pub grants: Mutex<HashMap<GlobalRef, Result<(), String>>>,
    /// Diffs the homes have applied (or refused) so far.
    pub diff_acks: AtomicU64,
    pub diff_refusals: Mutex<Vec<String>>,
    /// The answer to an ALLOC or FREE this rank sent (one at a time).
    pub answer: Mutex<Option<Vec<u8>>>,
    /// Ranks that took in a free notice this rank sent.
    pub notice_acks: AtomicU64,
    /// Sync calls a home refused (reported by the next call).
    pub failures: Mutex<Vec<String>>,
    /// Bumped (and the condition signalled) after every handler: a rank whose handlers run on
    /// a progress thread sleeps on it while it waits for a message, as Jackal's requesting
    /// thread waits on a condition that its upcall thread signals (paper Fig. 2).
    events: AtomicU64,
    signal: (Mutex<()>, Condvar),
}

impl Mailbox {
    pub(crate) fn grant(&self, r: GlobalRef, outcome: Result<(), String>) {
        self.grants.lock().unwrap().insert(r, outcome);
        self.notify();
    }

    /// Something arrived: wakes the rank's thread if it sleeps in `sleep`.
    pub(crate) fn notify(&self) {
        self.events.fetch_add(1, Ordering::AcqRel);
        let _g = self.signal.0.lock().unwrap();
        self.signal.1.notify_all();
    }

    pub(crate) fn events(&self) -> u64 {
        self.events.load(Ordering::Acquire)
    }

    /// Sleeps until an event after `seen` (or `at_most` passes).
    pub(crate) fn sleep(&self, seen: u64, at_most: Duration) {
        let g = self.signal.0.lock().unwrap();
        if self.events() == seen {
            let _ = self.signal.1.wait_timeout(g, at_most);
        }
    }

    pub(crate) fn take_grant(&self, r: GlobalRef) -> Option<Result<(), String>> {
        self.grants.lock().unwrap().remove(&r)
    }

    pub(crate) fn acked(&self) -> u64 {
        self.diff_acks.load(Ordering::Acquire)
    }
}
