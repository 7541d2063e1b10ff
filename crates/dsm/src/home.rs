//! What a rank keeps as the home of its regions: where each region's master copy lies, its
//! tag, whether it is freed, and its lock (Java monitor: owner, the ranks waiting to enter,
//! the ranks in `wait`). Pure state: the handlers and the local calls decide what to send.
//!
//! A lock stays with its owner after the owner's unlock (lock caching, lock_cache.rs): a
//! rank that takes the same lock again takes it without a message. The owner gives it up
//! when somebody else asks — at once if it is not inside, else at its unlock once it has
//! had the lock for the lease (ACTIVERMA_DSM_LOCK_LEASE_US): a rank in a loop on a lock
//! others want too keeps taking it for that long instead of handing it over every time
//! (the paper's 1 and 2 machines run a synchronized loop at the same rate).
//!
//! ```text
//! lock(src):    free                         -> owner = src, granted now
//!               kept idle here               -> the home: takes it again; another rank:
//!                                               joins the line, the first in it gets it
//!               owned by o                   -> queue src; o remote and not recalled yet:
//!                                               RECALL -> o
//! a grant says whether others wait: a remote owner then treats it as recalled
//! unlock(home): nobody waits, or the home has had it for less than the lease
//!                                            -> kept idle here (waiters: handed on by the
//!                                               next progress step if not taken again)
//!               else                         -> owner = next in queue (granted)
//! unlock(src):  (a remote owner returning it) owner = next in queue (granted) or none
//! wait(src):    owner must be src; src joins the waiters; the lock passes on as by unlock
//! notify(src):  owner must be src; the first waiter (all, for notify_all) joins the queue:
//!               it gets the lock back after src (and those before it) unlock
//! ```

use crate::global_ref::GlobalRef;
use activerma::Rank;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Where a region lies in its home's heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub off: usize,
    pub len: usize,
    /// The master's twin (update protocols: the home writes its master like any copy).
    pub twin: Option<usize>,
    /// The region's lock word and copy set (update in place), in the home's heap.
    pub meta: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct Region {
    pub place: Place,
    pub tag: u16,
    pub live: bool,
}

#[derive(Default)]
struct Monitor {
    /// Who has the lock: inside the monitor, or keeping it idle (the home: `idle_here`; a
    /// remote rank: its lock cache) until somebody else asks.
    owner: Option<Rank>,
    /// The home owns the lock without being inside (it kept it at its unlock).
    idle_here: bool,
    /// A RECALL went to the remote owner and the lock has not come back since.
    recalled: bool,
    /// When the owner got the lock: its lease against waiting ranks runs from here.
    since: Option<Instant>,
    /// Times the home left it while others waited, and that count as the last
    /// `hand_on_idle` saw it (unchanged since: the home stopped taking it).
    leaves: u64,
    leaves_seen: u64,
    entering: VecDeque<Rank>,
    waiting: VecDeque<Rank>,
}

impl Monitor {
    /// The lock passes to the next rank in line (or is free): that rank, to be granted.
    fn pass_on(&mut self, now: Now) -> Option<Grant> {
        self.owner = self.entering.pop_front();
        self.idle_here = false;
        // Others still in line: the grant itself tells the new owner (no RECALL needed).
        self.recalled = !self.entering.is_empty();
        self.since = Some(now());
        self.owner.map(|to| Grant { to, wanted: self.recalled })
    }
}

/// While others wait, a leave of a kept lock reads the clock only this often.
pub(crate) const LEASE_CHECK_EVERY: u64 = 16;

/// The clock, read only where a lock changes hands or its lease is looked at (a lock taken
/// and left again by its owner reads no clock).
pub(crate) type Now<'a> = &'a dyn Fn() -> Instant;

/// A lock passed to a rank: `wanted` when others wait behind it, so that a remote owner
/// gives it back at its unlock (it comes with the GRANT instead of a RECALL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub to: Rank,
    pub wanted: bool,
}

/// What `lock` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The lock is the asker's now; `kept`: it was the home's own idle lock, so nobody else
    /// had it since the home's last unlock (the home need not drop its copies).
    Now { kept: bool, wanted: bool },
    /// In line; the owner to send a RECALL to, if one must go.
    Queued { recall: Option<Rank> },
    /// In line behind others: the home's idle lock went to the first of them.
    Handed(Grant),
}

pub(crate) struct Home {
    me: Rank,
    lease: Duration,
    regions: Vec<Region>,
    monitors: HashMap<u32, Monitor>,
    /// Locks this home kept idle at its unlock while others waited: the next progress step
    /// hands them on if the home has not taken them again (`hand_on_idle`).
    idle_wanted: Vec<GlobalRef>,
    /// Draws tags (a counter mixed so that neighbouring regions' tags differ in many bits).
    tags: u64,
}

impl Home {
    pub(crate) fn new(me: Rank, lease: Duration) -> Home {
        Home { me, lease, regions: Vec::new(), monitors: HashMap::new(), idle_wanted: Vec::new(), tags: 0 }
    }

    /// The lease from now on (dsm.rs: fitted to the job's round trip).
    pub(crate) fn set_lease(&mut self, lease: Duration) {
        self.lease = lease;
    }

    /// Records regions (an array's chunks, in order) under one tag; returns the first
    /// reference.
    pub(crate) fn add(&mut self, me: Rank, places: impl IntoIterator<Item = Place>) -> GlobalRef {
        self.tags = self.tags.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let tag = ((self.tags >> 48) as u16).max(1);
        let id = self.regions.len() as u32;
        self.regions.extend(places.into_iter().map(|place| Region { place, tag, live: true }));
        GlobalRef::new(me, tag, id)
    }

    /// Every live region's reference and place (a diff-array names regions by reference).
    pub(crate) fn place(&self, r: GlobalRef) -> Option<Place> {
        self.region(r).ok().map(|g| g.place)
    }

    /// The live region `r` names, or why it names none.
    pub(crate) fn region(&self, r: GlobalRef) -> Result<&Region, String> {
        match self.regions.get(r.id() as usize) {
            Some(g) if g.tag != r.tag() => Err(format!("{r} is not a reference rank {} handed out (forged or corrupted)", r.home())),
            Some(g) if !g.live => Err(format!("{r} is dangling: its region was freed")),
            Some(g) => Ok(g),
            None => Err(format!("{r} names no region of rank {} (forged or corrupted)", r.home())),
        }
    }

    pub(crate) fn free(&mut self, r: GlobalRef) -> Result<(), String> {
        self.region(r)?;
        self.regions[r.id() as usize].live = false;
        Ok(())
    }

    /// `src` asks for `r`'s lock at `now`.
    pub(crate) fn lock(&mut self, r: GlobalRef, src: Rank, now: Now) -> Result<Entry, String> {
        self.region(r)?;
        let me = self.me;
        let m = self.monitors.entry(r.id()).or_default();
        match m.owner {
            None => {
                m.owner = Some(src);
                m.since = Some(now());
                Ok(Entry::Now { kept: false, wanted: false })
            }
            Some(o) if o == me && m.idle_here && src == me => {
                m.idle_here = false;
                Ok(Entry::Now { kept: true, wanted: !m.entering.is_empty() })
            }
            Some(o) if o == me && m.idle_here => {
                // Kept idle here: it goes on now, to the first in line (the asker if nobody
                // waited before it).
                m.entering.push_back(src);
                let g = m.pass_on(now).expect("someone is in line");
                Ok(if g.to == src { Entry::Now { kept: false, wanted: g.wanted } } else { Entry::Handed(g) })
            }
            Some(o) => {
                m.entering.push_back(src);
                let recall = o != me && !m.recalled;
                m.recalled |= recall;
                Ok(Entry::Queued { recall: recall.then_some(o) })
            }
        }
    }

    fn owned_by(&mut self, r: GlobalRef, src: Rank, what: &str) -> Result<&mut Monitor, String> {
        let m = self.monitors.get_mut(&r.id()).filter(|m| m.owner == Some(src));
        m.ok_or_else(|| format!("{what} of {r} by rank {src}, which does not hold its lock"))
    }

    /// `src` leaves `r`'s monitor (a remote rank: gives the lock back) at `now`: the next
    /// rank to own it (to be granted), if any. The home keeps it (module comment).
    pub(crate) fn unlock(&mut self, r: GlobalRef, src: Rank, now: Now) -> Result<Option<Grant>, String> {
        let (me, lease) = (self.me, self.lease);
        let m = self.owned_by(r, src, "unlock")?;
        if src == me && m.idle_here {
            return Err(format!("unlock of {r} by rank {src}, which does not hold its lock"));
        }
        if src != me {
            return Ok(m.pass_on(now));
        }
        if m.entering.is_empty() {
            m.idle_here = true;
            return Ok(None);
        }
        // Others wait: the clock is read every LEASE_CHECK_EVERY-th leave only (a loop on
        // the lock overshoots its lease by a few turns, and pays no clock per turn).
        m.leaves += 1;
        let within =
            !m.leaves.is_multiple_of(LEASE_CHECK_EVERY) || m.since.is_some_and(|since| now().saturating_duration_since(since) < lease);
        if within {
            m.idle_here = true;
            if !self.idle_wanted.contains(&r) {
                self.idle_wanted.push(r);
            }
            return Ok(None);
        }
        Ok(m.pass_on(now))
    }

    /// `src` waits on `r`: it gives the lock up (the next owner returned) and sleeps until
    /// notified and granted again.
    pub(crate) fn wait(&mut self, r: GlobalRef, src: Rank, now: Now) -> Result<Option<Grant>, String> {
        let me = self.me;
        let m = self.owned_by(r, src, "wait")?;
        if src == me && m.idle_here {
            return Err(format!("wait of {r} by rank {src}, which does not hold its lock"));
        }
        m.waiting.push_back(src);
        Ok(m.pass_on(now))
    }

    /// Whether the home kept a lock idle while others wait (`hand_on_idle` has work).
    pub(crate) fn has_idle_wanted(&self) -> bool {
        !self.idle_wanted.is_empty()
    }

    /// The locks this home kept idle at its unlock while others waited: each passes to the
    /// next in line once its lease is over, or when the home has not left it again since the
    /// last call (it stopped taking it: no need to wait out the lease). Returns the grants to
    /// send; the others stay for a later call (`has_idle_wanted`), which the caller makes
    /// some time later (the progress hook: every few steps), not at once.
    pub(crate) fn hand_on_idle(&mut self, now: Now) -> Vec<(GlobalRef, Grant)> {
        let (me, lease) = (self.me, self.lease);
        let mut grants = Vec::new();
        for r in std::mem::take(&mut self.idle_wanted) {
            let Some(m) = self.monitors.get_mut(&r.id()) else { continue };
            if m.owner != Some(me) || m.entering.is_empty() {
                continue; // handed on since
            }
            let stopped = m.idle_here && m.leaves == m.leaves_seen;
            m.leaves_seen = m.leaves;
            let over = m.since.is_none_or(|at| now().saturating_duration_since(at) >= lease);
            if m.idle_here && (stopped || over) {
                if let Some(g) = m.pass_on(now) {
                    grants.push((r, g));
                }
            } else {
                self.idle_wanted.push(r); // inside now, or still taking it: look again later
            }
        }
        grants
    }

    /// `src` (the owner) wakes one waiter of `r`, or all: they line up for the lock.
    /// Returns the owner to recall, if a remote one must now give the lock back at its unlock
    /// (a woken waiter is in line and nobody recalled it yet).
    pub(crate) fn notify(&mut self, r: GlobalRef, src: Rank, all: bool) -> Result<Option<Rank>, String> {
        let me = self.me;
        let m = self.owned_by(r, src, "notify")?;
        if src == me && m.idle_here {
            return Err(format!("notify of {r} by rank {src}, which does not hold its lock"));
        }
        let n = if all { m.waiting.len() } else { m.waiting.len().min(1) };
        let woken: Vec<Rank> = m.waiting.drain(..n).collect();
        m.entering.extend(woken);
        let recall = src != me && !m.recalled && !m.entering.is_empty();
        m.recalled |= recall;
        Ok(recall.then_some(src))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Entry = Entry::Now { kept: false, wanted: false };
    const QUEUED: Entry = Entry::Queued { recall: None };

    fn to(to: Rank, wanted: bool) -> Option<Grant> {
        Some(Grant { to, wanted })
    }

    /// A home (rank 0) with one region and the given lease.
    fn home_with_one(lease: Duration) -> (Home, GlobalRef, Instant) {
        let mut h = Home::new(0, lease);
        let r = h.add(0, [Place { off: 0, len: 64, twin: None, meta: None }]);
        (h, r, Instant::now())
    }

    #[test]
    fn locks_pass_in_order() {
        let (mut h, r, t) = home_with_one(Duration::ZERO);
        assert_eq!(h.lock(r, 1, &|| t), Ok(NOW));
        assert_eq!(h.lock(r, 2, &|| t), Ok(Entry::Queued { recall: Some(1) }), "the remote owner is recalled once");
        assert_eq!(h.lock(r, 3, &|| t), Ok(QUEUED));
        assert!(h.unlock(r, 2, &|| t).is_err(), "only the owner unlocks");
        assert_eq!(h.unlock(r, 1, &|| t), Ok(to(2, true)), "rank 3 still waits: the grant says so");
        assert_eq!(h.unlock(r, 2, &|| t), Ok(to(3, false)));
        assert_eq!(h.unlock(r, 3, &|| t), Ok(None));
        assert_eq!(h.lock(r, 1, &|| t), Ok(NOW));
    }

    #[test]
    fn wait_and_notify() {
        let (mut h, r, t) = home_with_one(Duration::ZERO);
        assert_eq!(h.lock(r, 1, &|| t), Ok(NOW));
        assert_eq!(h.lock(r, 2, &|| t), Ok(Entry::Queued { recall: Some(1) }));
        assert_eq!(h.wait(r, 1, &|| t), Ok(to(2, false)), "a waiter hands the lock on");
        assert!(h.notify(r, 1, false).is_err(), "a waiter does not own the lock");
        assert_eq!(h.notify(r, 2, false), Ok(Some(2)), "a woken waiter is in line: the remote owner is recalled");
        assert_eq!(h.unlock(r, 2, &|| t), Ok(to(1, false)), "the notified waiter gets the lock back");
        assert_eq!(h.wait(r, 1, &|| t), Ok(None));
        assert_eq!(h.lock(r, 3, &|| t), Ok(NOW));
        assert_eq!(h.notify(r, 3, true), Ok(Some(3)));
        assert_eq!(h.unlock(r, 3, &|| t), Ok(to(1, false)));
        assert!(h.notify(r, 2, true).is_err());
    }

    #[test]
    fn the_home_keeps_its_lock_for_the_lease() {
        let lease = Duration::from_millis(10);
        let (mut h, r, t) = home_with_one(lease);
        assert_eq!(h.lock(r, 0, &|| t), Ok(NOW));
        assert_eq!(h.unlock(r, 0, &|| t), Ok(None), "nobody waits: kept idle");
        assert!(!h.has_idle_wanted());
        let kept = Entry::Now { kept: true, wanted: false };
        assert_eq!(h.lock(r, 0, &|| t), Ok(kept), "taken again: nobody had it since");
        assert!(h.unlock(r, 0, &|| t).is_ok());
        assert!(h.unlock(r, 0, &|| t).is_err(), "kept idle is not held: a second unlock is refused");
        assert!(h.wait(r, 0, &|| t).is_err() && h.notify(r, 0, false).is_err());
        assert_eq!(h.lock(r, 0, &|| t), Ok(kept));
        assert_eq!(h.lock(r, 1, &|| t), Ok(QUEUED), "the home is inside: rank 1 waits, no recall to the home");
        let soon = t + Duration::from_millis(1);
        assert_eq!(h.unlock(r, 0, &|| soon), Ok(None), "within the lease the home keeps it");
        assert!(h.has_idle_wanted());
        assert_eq!(h.lock(r, 0, &|| soon), Ok(Entry::Now { kept: true, wanted: true }), "and may take it again");
        // Lease over: handed on at the first leave that looks at the clock.
        let mut leaves = 1;
        while h.unlock(r, 0, &|| t + lease * 2) == Ok(None) {
            assert_eq!(h.lock(r, 0, &|| t + lease * 2), Ok(Entry::Now { kept: true, wanted: true }));
            leaves += 1;
        }
        assert!(leaves <= LEASE_CHECK_EVERY, "handed on within {LEASE_CHECK_EVERY} leaves, not {leaves}");
        assert!(h.monitors[&r.id()].owner == Some(1), "lease over: handed on to rank 1");
        assert!(h.hand_on_idle(&|| t + lease * 2).is_empty(), "nothing kept idle any more");
        assert_eq!(h.lock(r, 0, &|| t + lease * 2), Ok(Entry::Queued { recall: Some(1) }));
        assert_eq!(h.unlock(r, 1, &|| t + lease * 3), Ok(to(0, false)), "rank 1 gives it back to the waiting home");
    }

    #[test]
    fn a_lock_kept_idle_goes_to_waiters() {
        let (mut h, r, t) = home_with_one(Duration::from_secs(10));
        assert_eq!(h.lock(r, 0, &|| t), Ok(NOW));
        assert_eq!(h.lock(r, 2, &|| t), Ok(QUEUED));
        assert_eq!(h.unlock(r, 0, &|| t), Ok(None), "within the lease: kept");
        assert!(h.hand_on_idle(&|| t).is_empty(), "left since the last look, lease not over: kept");
        assert_eq!(h.hand_on_idle(&|| t), vec![(r, Grant { to: 2, wanted: false })], "not left again since: handed on");
        assert_eq!(h.lock(r, 3, &|| t), Ok(Entry::Queued { recall: Some(2) }));
        assert_eq!(h.unlock(r, 2, &|| t), Ok(to(3, false)));
        assert_eq!(h.unlock(r, 3, &|| t), Ok(None));
        assert_eq!(h.lock(r, 1, &|| t), Ok(NOW), "free again");
        // Kept idle with nobody waiting: a remote asker gets it at once.
        let (mut h, r, t) = home_with_one(Duration::from_secs(10));
        assert_eq!(h.lock(r, 0, &|| t), Ok(NOW));
        assert_eq!(h.unlock(r, 0, &|| t), Ok(None));
        assert_eq!(h.lock(r, 1, &|| t), Ok(NOW));
        assert_eq!(h.lock(r, 0, &|| t), Ok(Entry::Queued { recall: Some(1) }));
        // Kept idle while others wait: a new asker gets in line, the first waiter gets it.
        let (mut h, r, t) = home_with_one(Duration::from_secs(10));
        assert_eq!(h.lock(r, 0, &|| t), Ok(NOW));
        assert_eq!(h.lock(r, 2, &|| t), Ok(QUEUED));
        assert_eq!(h.unlock(r, 0, &|| t), Ok(None));
        assert_eq!(h.lock(r, 3, &|| t), Ok(Entry::Handed(Grant { to: 2, wanted: true })));
        assert!(h.hand_on_idle(&|| t).is_empty(), "no longer idle here");
        assert_eq!(h.unlock(r, 2, &|| t), Ok(to(3, false)));
    }

    #[test]
    fn forged_and_freed_references_are_refused() {
        let (mut h, r, t) = home_with_one(Duration::ZERO);
        let forged = GlobalRef::new(0, r.tag() ^ 1, r.id());
        assert!(h.region(forged).unwrap_err().contains("forged"));
        assert!(h.region(GlobalRef::new(0, r.tag(), 5)).is_err());
        assert!(h.lock(forged, 1, &|| t).is_err());
        h.free(r).unwrap();
        assert!(h.region(r).unwrap_err().contains("dangling"));
        assert!(h.free(r).is_err());
    }
}
