//! Synchronization with Java-monitor semantics and release consistency (paper section 3):
//! every lock, unlock, wait and barrier first publishes this rank's changes (a release), and
//! every lock, wait and barrier then drops what others may have changed (an acquire).
//!
//! ```text
//! release (invalidation):  for r in dirty:  diff(copy, twin) -> r's home (applied there,
//!           acknowledged); wait for every acknowledgement; r stays valid here
//!           (update protocols: update_in_place.rs, diff_array.rs)
//! acquire (invalidation):  every copy of another home becomes invalid (fetched again on
//!           next access); at a barrier only those of regions another rank wrote since the
//!           last barrier (write notices, exchanged by the barrier); update protocols keep
//!           their copies current instead
//! lock(r):    re-entered: count + 1.  else release; LOCK -> home; wait for GRANT; acquire
//! unlock(r):  count - 1; at 0: release; UNLOCK -> home (which grants the next in line)
//! wait(r):    release; WAIT -> home (gives the lock up); wait for GRANT after a notify;
//!             acquire; the re-entry count is restored
//! notify(r), notify_all(r):  NOTIFY -> home: waiters line up for the lock
//! barrier:    release; the job's barrier; acquire
//! ```

use crate::cache::State;
use crate::diff;
use crate::dsm::{bump, Dsm};
use crate::global_ref::GlobalRef;
use crate::home::{Entry, Place};
use crate::lock_cache::Leave;
use crate::protocol::Protocol;
use crate::shared::Via;
use crate::wire;
use activerma::{Error, Rank, Result};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Write notices of one rank at a barrier: a list of references, or "assume everything
/// changed" when the list would be longer than MAX_NOTICES.
const LISTED: u8 = 0;
const ALL_CHANGED: u8 = 1;
const MAX_NOTICES: usize = 1 << 16;

impl Dsm {
    /// Enters `r`'s monitor (re-entrant). Changes other ranks released before their unlock
    /// of `r` are visible after it.
    pub fn lock(&mut self, r: GlobalRef) -> Result<()> {
        self.failures()?;
        self.check_no_open_views("lock")?;
        r.check(self.n)?;
        if let Some(count) = self.held.get_mut(&r) {
            *count += 1;
            return Ok(());
        }
        self.release()?;
        // A lock this rank kept since its own unlock (lock_cache.rs, home.rs): nobody else
        // released anything under it since, so there is nothing to acquire; a progress step
        // still runs, so that a home's RECALL reaches this rank while it loops on the lock.
        let kept = if r.home() == self.me {
            let entry = {
                let mut home = self.shared.home.lock().unwrap();
                let entry = home.lock(r, self.me, &Instant::now).map_err(refused)?;
                if let Entry::Queued { recall: Some(owner) } = entry {
                    // Posted under the table's lock: after any GRANT it is about.
                    self.shared.post_ref(Via::Post, owner, wire::RECALL, r);
                }
                entry
            };
            match entry {
                Entry::Now { kept, .. } => kept,
                Entry::Queued { .. } => {
                    self.await_grant(r)?;
                    false
                }
                Entry::Handed(_) => unreachable!("the home's own lock call never passes its idle lock to another"),
            }
        } else if self.shared.locks.enter(r) {
            true
        } else {
            bump(&self.counts.remote_locks, 1);
            self.w.send_am(r.home(), wire::LOCK, 0, &r.to_bits().to_le_bytes())?;
            self.await_grant(r)?;
            false
        };
        if kept {
            bump(&self.counts.kept_locks, 1);
            self.w.progress();
        } else {
            self.acquire()?;
        }
        self.held.insert(r, 1);
        Ok(())
    }

    /// Leaves `r`'s monitor once per `lock`; the last leaves publishes this rank's changes.
    pub fn unlock(&mut self, r: GlobalRef) -> Result<()> {
        self.failures()?;
        self.check_no_open_views("unlock")?;
        let count = self.held.get_mut(&r).ok_or_else(|| not_held(r, "unlock"))?;
        if *count > 1 {
            *count -= 1;
            return Ok(());
        }
        self.release()?;
        self.held.remove(&r);
        self.hand_on(r, false)
    }

    /// Java's `Object.wait`: gives `r`'s lock up until another rank's `notify` and the lock is
    /// this rank's again. Needs the lock.
    pub fn wait(&mut self, r: GlobalRef) -> Result<()> {
        self.failures()?;
        self.check_no_open_views("wait")?;
        let count = *self.held.get(&r).ok_or_else(|| not_held(r, "wait"))?;
        self.release()?;
        self.held.remove(&r);
        self.hand_on(r, true)?;
        self.await_grant(r)?;
        self.acquire()?;
        self.held.insert(r, count);
        Ok(())
    }

    /// Java's `Object.notify`: one rank waiting on `r` lines up for the lock. Needs the lock.
    pub fn notify(&mut self, r: GlobalRef) -> Result<()> {
        self.notify_some(r, false)
    }

    /// Java's `Object.notifyAll`.
    pub fn notify_all(&mut self, r: GlobalRef) -> Result<()> {
        self.notify_some(r, true)
    }

    fn notify_some(&mut self, r: GlobalRef, all: bool) -> Result<()> {
        self.failures()?;
        self.check_no_open_views("notify")?;
        self.held.get(&r).ok_or_else(|| not_held(r, if all { "notify_all" } else { "notify" }))?;
        if r.home() == self.me {
            // The home itself hands the lock on at its unlock: nothing to recall.
            return self.shared.home.lock().unwrap().notify(r, self.me, all).map(drop).map_err(refused);
        }
        let mut msg = r.to_bits().to_le_bytes().to_vec();
        msg.push(all as u8);
        self.w.send_am(r.home(), wire::NOTIFY, 0, &msg)
    }

    /// Every rank: publishes its changes, waits for all, sees everyone's.
    pub fn barrier(&mut self) -> Result<()> {
        self.failures()?;
        self.check_no_open_views("barrier")?;
        self.release()?;
        if !self.protocol.invalidates() {
            self.w.barrier()?;
            self.acquire()?;
            return Ok(());
        }
        if self.mirrors.is_some() {
            return self.barrier_pages();
        }
        // Invalidation: every rank's write notices since the last barrier travel with the
        // barrier itself (an allgather: nobody leaves before everyone arrived, and everyone's
        // release is done by then); a copy is dropped only if another rank wrote its region.
        let written = std::mem::take(self.written.get_mut());
        let others = self.exchange_notices(written.iter().map(|r| r.to_bits()).collect())?;
        let cache = self.cache.get_mut();
        for &r in &written {
            if let Some(c) = cache.get_mut(r) {
                c.noted = false;
            }
        }
        match others {
            Some(words) => self.acquire_changed(Some(&words.into_iter().map(GlobalRef::from_bits).collect())),
            None => self.acquire(),
        }
    }

    /// The barrier's exchange of write notices (references, or pages in the page-granular
    /// mode), as words: every other rank's, or None when one of them said "assume everything
    /// changed" (its list longer than MAX_NOTICES). An allgather: nobody leaves before
    /// everyone arrived, and everyone's release is done by then.
    fn exchange_notices(&self, mine: Vec<u64>) -> Result<Option<Vec<u64>>> {
        let notices: Vec<u8> = if mine.len() > MAX_NOTICES {
            vec![ALL_CHANGED]
        } else {
            std::iter::once(LISTED).chain(mine.iter().flat_map(|w| w.to_le_bytes())).collect()
        };
        let all = self.w.allgather(&notices)?;
        let others = all.iter().enumerate().filter(|&(p, _)| p != self.me).map(|(_, b)| b);
        if others.clone().any(|b| b.first() != Some(&LISTED)) {
            return Ok(None);
        }
        Ok(Some(others.flat_map(|b| b[1..].chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap()))).collect()))
    }

    /// The barrier of the page-granular mode: the write notices are pages — those this rank's
    /// releases diffed since the last barrier, and those of its own regions it wrote (as
    /// home) — and a mirror page is dropped only if another rank wrote it.
    fn barrier_pages(&mut self) -> Result<()> {
        let page = activerma_mmu::page_size();
        let mut pages = std::mem::take(&mut self.page_notices);
        let written = std::mem::take(self.written.get_mut());
        let cache = self.cache.get_mut();
        for r in written {
            if let Some(c) = cache.get_mut(r) {
                c.noted = false;
                let last = (c.off + c.len.max(1) - 1) / page;
                pages.extend((c.off / page..=last).map(|p| crate::mirrors::notice(self.me, p)));
            }
        }
        pages.sort_unstable();
        pages.dedup();
        match self.exchange_notices(pages)? {
            Some(changed) => self.acquire_pages(Some(&changed)),
            None => self.acquire(),
        }
    }

    /// UNLOCK or WAIT at the home: the lock passes on.
    fn hand_on(&self, r: GlobalRef, wait: bool) -> Result<()> {
        // Posted under the lock's state (lock_cache.rs, shared.rs: in the order of its
        // changes), then pushed out by a progress step rather than left for the next call.
        let mut posted = false;
        if r.home() != self.me {
            let mut give_back = |id| {
                self.shared.post_ref(Via::Post, r.home(), id, r);
                posted = true;
            };
            if wait {
                self.shared.locks.give_up(r, |_| give_back(wire::WAIT));
            } else if self.shared.locks.leave(r, &Instant::now, |_| give_back(wire::UNLOCK)) == Leave::KeepWanted {
                self.shared.locks_wanted.store(true, Ordering::Release);
            }
        } else {
            let mut home = self.shared.home.lock().unwrap();
            let next = if wait { home.wait(r, self.me, &Instant::now) } else { home.unlock(r, self.me, &Instant::now) };
            if home.has_idle_wanted() {
                self.shared.locks_wanted.store(true, Ordering::Release);
            }
            if let Some(g) = next.map_err(refused)? {
                self.shared.grant(Via::Post, g, r);
                posted = g.to != self.me;
            }
        }
        if posted {
            self.w.progress();
        }
        Ok(())
    }

    fn await_grant(&self, r: GlobalRef) -> Result<()> {
        let mut outcome = None;
        self.wait_message("a lock", r.home(), || {
            outcome = self.shared.mail.take_grant(r);
            outcome.is_some()
        })?;
        outcome.unwrap().map_err(refused)
    }

    /// Publishes this rank's changes, by the run's protocol; they are everywhere they must be
    /// when this returns.
    pub(crate) fn release(&mut self) -> Result<()> {
        if self.n == 1 {
            // Alone: every region is homed here, nobody caches a copy, nothing to publish.
            self.take_dirty();
            return Ok(());
        }
        match self.protocol {
            Protocol::Invalidate | Protocol::InvalidateRdma if self.mirrors.is_some() => self.release_pages(),
            Protocol::Invalidate | Protocol::InvalidateRdma => self.release_to_homes(),
            Protocol::UpdateInPlace => self.release_in_place(),
            Protocol::UpdateDiff => self.release_diff_arrays(),
        }
    }

    /// The copies written since the last release, each marked valid again: what a release
    /// publishes (with where they and their twins lie).
    pub(crate) fn take_dirty(&mut self) -> Vec<(GlobalRef, Place)> {
        let cache = self.cache.get_mut();
        let dirty = std::mem::take(&mut cache.dirty);
        dirty
            .into_iter()
            .filter_map(|r| {
                let c = cache.get_mut(r).filter(|c| c.state == State::Dirty)?;
                c.state = State::Valid;
                Some((r, Place { off: c.off, len: c.len, twin: c.twin, meta: c.meta }))
            })
            .collect()
    }

    /// Invalidation: a diff per dirty copy to its home, every one applied before this returns.
    fn release_to_homes(&mut self) -> Result<()> {
        if self.cache.get_mut().dirty.is_empty() {
            // Nothing to publish, and no refusal pending: the release that sent the last
            // diffs waited for all their answers.
            return Ok(());
        }
        let acked = self.shared.mail.acked();
        let mut sent = 0u64;
        let mut homes = Vec::new();
        let mut msg = Vec::new();
        for (r, c) in self.take_dirty() {
            let twin = c.twin.expect("a dirty copy has a twin");
            msg.clear();
            msg.extend_from_slice(&r.to_bits().to_le_bytes());
            // SAFETY: copy and twin of c.len bytes in this heap; no view is alive (&mut self).
            let (copy, old) = unsafe { (self.shared.heap.bytes(c.off, c.len), self.shared.heap.bytes(twin, c.len)) };
            if diff::encode(copy, old, &mut msg) == 0 {
                continue;
            }
            self.w.send_am(r.home(), wire::DIFF, 0, &msg)?;
            bump(&self.counts.diffs, 1);
            bump(&self.counts.diff_bytes, msg.len() as u64 - 8);
            sent += 1;
            homes.push(r.home());
        }
        self.await_diff_acks(acked, sent, &homes)
    }

    /// The page-granular mode's release: a diff per written mirror page to its home
    /// (mirrors.rs), every one applied before this returns.
    fn release_pages(&mut self) -> Result<()> {
        let Some(mirrors) = &self.mirrors else { return Ok(()) };
        let acked = self.shared.mail.acked();
        let (mut sent, mut homes) = (0u64, Vec::new());
        let (w, counts) = (&self.w, &self.counts);
        let notices = mirrors.release(&mut |home, msg| {
            w.send_am(home, wire::DIFF_PAGE, 0, msg)?;
            bump(&counts.diffs, 1);
            bump(&counts.diff_bytes, msg.len() as u64 - 8);
            sent += 1;
            homes.push(home);
            Ok(())
        })?;
        self.page_notices.extend(notices);
        self.await_diff_acks(acked, sent, &homes)
    }

    /// Waits until `sent` diffs past the count `acked` are acknowledged by their `homes`;
    /// fails with a home's refusal, if any.
    fn await_diff_acks(&self, acked: u64, sent: u64, homes: &[Rank]) -> Result<()> {
        for &home in homes {
            self.wait_message("diff acknowledgements", home, || self.shared.mail.acked() - acked >= sent)?;
        }
        let refusals = std::mem::take(&mut *self.shared.mail.diff_refusals.lock().unwrap());
        match refusals.first() {
            Some(why) => Err(Error::InvalidArgument(format!("dsm: a home refused a diff: {why}"))),
            None => Ok(()),
        }
    }

    /// Makes others' released changes visible: invalidation drops every copy of other homes'
    /// regions (fetched again when next touched); update-diff applies the arrays that arrived;
    /// update-in-place has nothing to do. Notices of freed regions that arrived are taken in.
    pub(crate) fn acquire(&mut self) -> Result<()> {
        if self.mirrors.is_some() {
            return self.acquire_pages(None);
        }
        self.acquire_changed(None)
    }

    /// The page-granular mode's acquire: drops every mirror page, or (a barrier) those of the
    /// page notices in `changed`.
    fn acquire_pages(&mut self, changed: Option<&[u64]>) -> Result<()> {
        self.cache.get_mut().graveyard.clear();
        self.w.progress();
        let dropped = self.mirrors.as_ref().map_or(Ok(0), |m| m.drop_pages(changed))?;
        bump(&self.counts.pages_dropped, dropped);
        Ok(())
    }

    /// As `acquire`; with `changed` (a barrier's write notices from the other ranks) only the
    /// copies of those regions are dropped — every other copy stays valid: nobody changed it
    /// since it was fetched, or since the barrier before (which dropped it if somebody had).
    fn acquire_changed(&mut self, changed: Option<&std::collections::HashSet<GlobalRef>>) -> Result<()> {
        self.cache.get_mut().graveyard.clear(); // no view is alive (&mut self, none open)
        self.w.progress();
        crate::diff_array::receive(&self.shared); // (update-diff: the progress step may have)
        if !self.protocol.invalidates() {
            return Ok(());
        }
        let cache = self.cache.get_mut();
        let valid = std::mem::take(&mut cache.valid);
        let mut dropped = 0;
        for r in valid {
            let Some(c) = cache.get_mut(r).filter(|c| c.state == State::Valid) else { continue };
            if changed.is_none_or(|set| set.contains(&r)) {
                c.state = State::Invalid;
                dropped += 1;
            } else {
                cache.valid.push(r);
            }
        }
        bump(&self.counts.invalidations, dropped);
        Ok(())
    }

    /// A sync call a home refused earlier (reported here, at the next one).
    fn failures(&self) -> Result<()> {
        match self.shared.mail.failures.lock().unwrap().pop() {
            Some(why) => Err(Error::InvalidArgument(format!("dsm: {why}"))),
            None => Ok(()),
        }
    }
}

fn refused(why: String) -> Error {
    Error::InvalidArgument(format!("dsm: {why}"))
}

fn not_held(r: GlobalRef, what: &str) -> Error {
    Error::InvalidArgument(format!("dsm: {what} of {r}, whose lock this rank does not hold"))
}
