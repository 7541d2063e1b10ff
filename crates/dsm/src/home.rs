//! What a rank keeps as the home of its regions: where each region's master copy lies, its
//! tag, whether it is freed, and its lock (Java monitor: owner, the ranks waiting to enter,
//! the ranks in `wait`). Pure state: the handlers and the local calls decide what to send.
//!
//! ```text
//! lock(src):    free -> owner = src, grant src      held -> queue src
//! unlock(src):  owner must be src; owner = next in queue (granted) or none
//! wait(src):    owner must be src; src joins the waiters; the lock passes on as by unlock
//! notify(src):  owner must be src; the first waiter (all, for notify_all) joins the queue:
//!               it gets the lock back after src (and those before it) unlock
//! ```

use crate::global_ref::GlobalRef;
use activerma::Rank;
use std::collections::{HashMap, VecDeque};

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
    owner: Option<Rank>,
    entering: VecDeque<Rank>,
    waiting: VecDeque<Rank>,
}

#[derive(Default)]
pub(crate) struct Home {
    regions: Vec<Region>,
    monitors: HashMap<u32, Monitor>,
    /// Draws tags (a counter mixed so that neighbouring regions' tags differ in many bits).
    tags: u64,
}

impl Home {
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

    /// `src` asks for `r`'s lock: true when it has it now (else it waits in line).
    pub(crate) fn lock(&mut self, r: GlobalRef, src: Rank) -> Result<bool, String> {
        self.region(r)?;
        let m = self.monitors.entry(r.id()).or_default();
        if m.owner.is_none() {
            m.owner = Some(src);
            return Ok(true);
        }
        m.entering.push_back(src);
        Ok(false)
    }

    fn owned_by(&mut self, r: GlobalRef, src: Rank, what: &str) -> Result<&mut Monitor, String> {
        let m = self.monitors.get_mut(&r.id()).filter(|m| m.owner == Some(src));
        m.ok_or_else(|| format!("{what} of {r} by rank {src}, which does not hold its lock"))
    }

    /// `src` leaves `r`'s monitor: the next rank to own it (to be granted), if any.
    pub(crate) fn unlock(&mut self, r: GlobalRef, src: Rank) -> Result<Option<Rank>, String> {
        let m = self.owned_by(r, src, "unlock")?;
        m.owner = m.entering.pop_front();
        Ok(m.owner)
    }

    /// `src` waits on `r`: it gives the lock up (the next owner returned) and sleeps until
    /// notified and granted again.
    pub(crate) fn wait(&mut self, r: GlobalRef, src: Rank) -> Result<Option<Rank>, String> {
        let m = self.owned_by(r, src, "wait")?;
        m.waiting.push_back(src);
        m.owner = m.entering.pop_front();
        Ok(m.owner)
    }

    /// `src` (the owner) wakes one waiter of `r`, or all: they line up for the lock.
    pub(crate) fn notify(&mut self, r: GlobalRef, src: Rank, all: bool) -> Result<(), String> {
        let m = self.owned_by(r, src, "notify")?;
        let n = if all { m.waiting.len() } else { m.waiting.len().min(1) };
        let woken: Vec<Rank> = m.waiting.drain(..n).collect();
        m.entering.extend(woken);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home_with_one() -> (Home, GlobalRef) {
        let mut h = Home::default();
        let r = h.add(0, [Place { off: 0, len: 64, twin: None, meta: None }]);
        (h, r)
    }

    #[test]
    fn locks_pass_in_order() {
        let (mut h, r) = home_with_one();
        assert_eq!(h.lock(r, 1), Ok(true));
        assert_eq!(h.lock(r, 2), Ok(false));
        assert_eq!(h.lock(r, 3), Ok(false));
        assert!(h.unlock(r, 2).is_err(), "only the owner unlocks");
        assert_eq!(h.unlock(r, 1), Ok(Some(2)));
        assert_eq!(h.unlock(r, 2), Ok(Some(3)));
        assert_eq!(h.unlock(r, 3), Ok(None));
        assert_eq!(h.lock(r, 1), Ok(true));
    }

    #[test]
    fn wait_and_notify() {
        let (mut h, r) = home_with_one();
        assert_eq!(h.lock(r, 1), Ok(true));
        assert_eq!(h.lock(r, 2), Ok(false));
        assert_eq!(h.wait(r, 1), Ok(Some(2)), "a waiter hands the lock on");
        assert!(h.notify(r, 1, false).is_err(), "a waiter does not own the lock");
        assert_eq!(h.notify(r, 2, false), Ok(()));
        assert_eq!(h.unlock(r, 2), Ok(Some(1)), "the notified waiter gets the lock back");
        assert_eq!(h.wait(r, 1), Ok(None));
        assert_eq!(h.lock(r, 3), Ok(true));
        assert_eq!(h.notify(r, 3, true), Ok(()));
        assert_eq!(h.unlock(r, 3), Ok(Some(1)));
        assert!(h.notify(r, 2, true).is_err());
    }

    #[test]
    fn forged_and_freed_references_are_refused() {
        let (mut h, r) = home_with_one();
        let forged = GlobalRef::new(0, r.tag() ^ 1, r.id());
        assert!(h.region(forged).unwrap_err().contains("forged"));
        assert!(h.region(GlobalRef::new(0, r.tag(), 5)).is_err());
        assert!(h.lock(forged, 1).is_err());
        h.free(r).unwrap();
        assert!(h.region(r).unwrap_err().contains("dangling"));
        assert!(h.free(r).is_err());
    }
}
