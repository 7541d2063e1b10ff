//! The locks of other homes this rank keeps after its unlock (lock caching; the home's side
//! is in home.rs). Taking a kept lock again needs no message and no acquire: nobody else had
//! it since this rank's own release. The home asks for it back with a RECALL when another
//! rank wants it.
//!
//! ```text
//! enter(r):      kept here -> inside, taken without a message     else -> LOCK to the home
//! granted(r):    the home's GRANT: inside, the lease starts (recalled already when the
//!                GRANT says others wait)
//! leave(r):      not recalled                -> kept idle
//!                recalled, lease not over    -> kept idle, given back by the next progress
//!                                               step unless taken again first
//!                recalled, lease over        -> UNLOCK to the home (given back)
//! recall(r):     idle -> UNLOCK to the home at once; inside -> marked, given back at leave
//! give_up(r):    a wait: WAIT to the home carries the lock back
//! ```
//! Shared between the rank's thread and its handlers (which may run on the progress thread).
//! A lock given back is handed to `back` while the cache is still locked, so that its UNLOCK
//! leaves before any LOCK this rank sends for it afterwards.

use crate::global_ref::GlobalRef;
use crate::home::{Now, LEASE_CHECK_EVERY};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Kept {
    inside: bool,
    recalled: bool,
    since: Instant,
    /// Times this rank left it while its home wanted it back, and that count as the last
    /// `take_recalled_idle` saw it (unchanged since: this rank stopped taking it).
    leaves: u64,
    leaves_seen: u64,
}

pub(crate) struct LockCache {
    /// The lease in nanoseconds (set once the job's round trip is measured: dsm.rs).
    lease_ns: AtomicU64,
    kept: Mutex<HashMap<GlobalRef, Kept>>,
}

impl LockCache {
    pub(crate) fn new(lease: Duration) -> LockCache {
        LockCache { lease_ns: AtomicU64::new(lease.as_nanos() as u64), kept: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn set_lease(&self, lease: Duration) {
        self.lease_ns.store(lease.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn lease(&self) -> Duration {
        Duration::from_nanos(self.lease_ns.load(Ordering::Relaxed))
    }

    /// Takes `r` if this rank keeps it: true when it is inside now.
    pub(crate) fn enter(&self, r: GlobalRef) -> bool {
        match self.kept.lock().unwrap().get_mut(&r) {
            Some(k) => {
                k.inside = true;
                true
            }
            None => false,
        }
    }

    /// The home granted `r` at `now`; `wanted`: others wait for it already (as if recalled).
    pub(crate) fn granted(&self, r: GlobalRef, now: Instant, wanted: bool) {
        self.kept.lock().unwrap().insert(r, Kept { inside: true, recalled: wanted, since: now, leaves: 0, leaves_seen: 0 });
    }

    /// Leaves `r` at `now`: whether it stays here, and if its home wants it back; a lock
    /// that goes goes to `back`.
    pub(crate) fn leave(&self, r: GlobalRef, now: Now, back: impl FnOnce(GlobalRef)) -> Leave {
        let mut kept = self.kept.lock().unwrap();
        let leave = match kept.get_mut(&r) {
            Some(k) => {
                k.inside = false;
                k.leaves += u64::from(k.recalled);
                if !k.recalled {
                    Leave::Keep
                } else if !k.leaves.is_multiple_of(LEASE_CHECK_EVERY) || now().saturating_duration_since(k.since) < self.lease() {
                    Leave::KeepWanted // (the clock read every few leaves: home.rs)
                } else {
                    Leave::GiveBack
                }
            }
            None => Leave::GiveBack,
        };
        if leave == Leave::GiveBack {
            kept.remove(&r);
            back(r);
        }
        leave
    }

    /// The home wants `r` back: to `back` at once if it is idle here, else marked (it goes
    /// at `leave`). A RECALL that crossed our UNLOCK finds nothing and is ignored.
    pub(crate) fn recall(&self, r: GlobalRef, back: impl FnOnce(GlobalRef)) {
        let mut kept = self.kept.lock().unwrap();
        match kept.get_mut(&r) {
            Some(k) if k.inside => k.recalled = true,
            Some(_) => {
                kept.remove(&r);
                back(r);
            }
            None => {}
        }
    }

    /// `r` goes back with a WAIT (`back` sends it).
    pub(crate) fn give_up(&self, r: GlobalRef, back: impl FnOnce(GlobalRef)) {
        let mut kept = self.kept.lock().unwrap();
        kept.remove(&r);
        back(r);
    }

    /// The locks their homes recalled go to `back` (no longer kept) when idle here and either
    /// their lease is over or this rank has not left them again since the last call (it
    /// stopped taking them). Returns whether some recalled ones stay, for a later call (the
    /// progress hook's, every few steps: home.rs).
    pub(crate) fn take_recalled_idle(&self, now: Instant, mut back: impl FnMut(GlobalRef)) -> bool {
        let mut kept = self.kept.lock().unwrap();
        let mut pending = false;
        kept.retain(|r, k| {
            if !k.recalled {
                return true;
            }
            let stopped = !k.inside && k.leaves == k.leaves_seen;
            k.leaves_seen = k.leaves;
            if !k.inside && (stopped || now.saturating_duration_since(k.since) >= self.lease()) {
                back(*r);
                return false;
            }
            pending = true;
            true
        });
        pending
    }
}

/// What `leave` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leave {
    Keep,
    /// Kept although recalled (the lease is not over): a progress step gives it back unless
    /// this rank takes it again first.
    KeepWanted,
    GiveBack,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a call gave back.
    fn back_of(f: impl FnOnce(&mut dyn FnMut(GlobalRef))) -> Vec<GlobalRef> {
        let mut out = Vec::new();
        f(&mut |r| out.push(r));
        out
    }

    #[test]
    fn a_lock_is_kept_until_recalled_and_the_lease_is_over() {
        let c = LockCache::new(Duration::from_millis(50));
        let r = GlobalRef::new(1, 7, 3);
        let t0 = Instant::now();
        assert!(!c.enter(r), "not kept before the first grant");
        c.granted(r, t0, false);
        assert_eq!(c.leave(r, &|| t0, |_| panic!("kept")), Leave::Keep, "nobody asked");
        assert!(c.enter(r), "taken again without a message");
        assert!(back_of(|b| c.recall(r, b)).is_empty(), "inside: marked, not given back yet");
        assert_eq!(c.leave(r, &|| t0 + Duration::from_millis(1), |_| panic!("kept")), Leave::KeepWanted, "within the lease");
        assert!(c.enter(r));
        // Lease over: given back at the first leave that looks at the clock.
        let mut back = Vec::new();
        let late = t0 + Duration::from_millis(60);
        let mut leaves = 1;
        while c.leave(r, &|| late, |r| back.push(r)) == Leave::KeepWanted {
            assert!(c.enter(r));
            leaves += 1;
        }
        assert!(leaves <= LEASE_CHECK_EVERY, "given back within {LEASE_CHECK_EVERY} leaves, not {leaves}");
        assert_eq!(back, vec![r]);
        assert!(!c.enter(r), "no longer kept");
        assert!(back_of(|b| c.recall(r, b)).is_empty(), "a RECALL that crossed our UNLOCK is ignored");
    }

    #[test]
    fn an_idle_lock_goes_back_at_once_or_at_the_next_progress_step() {
        let c = LockCache::new(Duration::from_secs(10));
        let (a, b) = (GlobalRef::new(1, 7, 3), GlobalRef::new(2, 9, 4));
        let t0 = Instant::now();
        c.granted(a, t0, false);
        c.granted(b, t0, true);
        assert_eq!(c.leave(a, &|| t0, |_| panic!("kept")), Leave::Keep);
        assert_eq!(back_of(|f| c.recall(a, f)), vec![a], "idle: given back at once");
        assert_eq!(c.leave(b, &|| t0, |_| panic!("kept")), Leave::KeepWanted, "granted with others waiting: recalled from the start");
        assert!(back_of(|f| {
            assert!(c.take_recalled_idle(t0, f), "left since the last look: still looked at");
        })
        .is_empty());
        assert_eq!(
            back_of(|f| {
                c.take_recalled_idle(t0, f);
            }),
            vec![b],
            "not left again since: given back"
        );
        assert!(back_of(|f| assert!(!c.take_recalled_idle(t0, f))).is_empty());
        assert!(!c.enter(b));
    }
}
