//! The firehose table for one remote rank: which of *its* buckets we hold a firehose on, in
//! which state, with how many local operations using each; plus its victim FIFO of unused
//! firehoses and the count of firehose slots (f) not in use.
//!
//! Slot accounting (always): entries + to_release + releasing (in moves not yet answered)
//!                          + free = f.
//! A replacement reaped by a gathering request is not counted apart: its slot is the one the
//! request's PENDING_UNCOMMITTED entry occupies (rollback puts it back, commit releases it).

use super::bucket_map::BucketMap;
use super::config::{Buckets, Region};
use super::page_table::longest_run;
use super::victims::VictimFifo;
use activerma_core::{Error, Rank, Result};
use std::collections::VecDeque;

/// Identifies one remote request (one call of remote_pin) while it gathers firehoses.
pub type ReqId = u64;

/// State of one firehose. Explicit states, where GASNet packs bits into pointers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirehoseState {
    /// Created by request `owner`, which is still gathering firehoses for the rest of its
    /// buckets; nothing is sent yet and the request may still roll it back. Other requests must
    /// not count on it (the paper's PENDING_UNCOMMITTED).
    PendingUncommitted { owner: ReqId },
    /// Move `move_id` is in flight: the target has not confirmed the pin. Requests that need
    /// this bucket take a reference and wait for the reply instead of sending another move.
    Pending { move_id: u64 },
    /// The target keeps the bucket pinned for us: one-sided access is allowed while we hold a
    /// reference. With no reference it sits in the victim FIFO, still valid.
    Committed,
    /// Invalidated (the target's memory was freed or unexposed) while referenced or pending:
    /// never a hit again; once unreferenced it is released to the target by the next move.
    Stale { move_id: Option<u64> },
}

#[derive(Clone, Copy, Debug)]
pub struct FhEntry {
    pub state: FirehoseState,
    pub refs: u32,
    /// In the victim FIFO. Idle firehoses (Committed, no reference) always are; a hit leaves
    /// its bucket there (lazy removal: no FIFO work on the hit path) and the reaper drops
    /// entries it finds referenced.
    pub queued: bool,
    /// Became idle again while still queued: a second chance before the reaper takes it, as
    /// a hit would have moved it to the newest end of an exact FIFO.
    pub recent: bool,
}

impl FhEntry {
    pub fn new(state: FirehoseState) -> FhEntry {
        FhEntry { state, refs: 0, queued: false, recent: false }
    }

    /// A Committed firehose just lost its last reference: if it is still queued (a hit left it
    /// there) it only earns a second chance, and true says so; false: it must be queued.
    fn idle_again_in_place(&mut self) -> bool {
        self.recent |= self.queued;
        self.queued
    }
}

pub(crate) struct RemoteTable {
    pub rank: Rank,
    bucket: usize,
    pub entries: BucketMap<FhEntry>,
    /// Every idle firehose (Committed, no reference), oldest first out, and lazily some that a
    /// hit took back since (their entries say `queued`).
    victims: VictimFifo<usize>,
    /// Idle firehoses: those the next requests may reap.
    idle: usize,
    /// Firehose slots not mapped at all.
    pub free: usize,
    /// Mappings dropped from the table (invalidated, or a rolled-back replacement whose bucket
    /// was meanwhile taken again) that the target still pins for us; the next move releases
    /// them, and they may be reaped as replacements like victims.
    pub to_release: Vec<usize>,
    /// Slots released by moves in flight; they become free when the move is answered, so a
    /// target never sees more than f of our firehoses even if moves arrive out of order.
    pub releasing: usize,
    /// Deadlock avoidance: the request that holds this rank's token, and those waiting for it
    /// (handed over in arrival order, which is what makes the protocol fair).
    pub da_owner: Option<ReqId>,
    pub da_queue: VecDeque<ReqId>,
}

/// What a request's buckets look like right now (the paper's "Estimate Remote Request").
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    /// Buckets with no firehose: each needs a slot or a replacement.
    pub need: usize,
    /// Buckets with a committed firehose in the victim FIFO (a hit must not reap them).
    pub victim_hits: usize,
    /// A bucket is PENDING_UNCOMMITTED for another request, or Stale: cannot count on it.
    pub conflict: bool,
    /// Every bucket is Committed: a hit, nothing to send or wait for.
    pub all_committed: bool,
}

impl RemoteTable {
    pub fn new(rank: Rank, bucket: usize, f: usize) -> RemoteTable {
        RemoteTable {
            rank,
            bucket,
            entries: BucketMap::new(bucket),
            victims: VictimFifo::new(),
            idle: 0,
            free: f,
            to_release: Vec::new(),
            releasing: 0,
            da_owner: None,
            da_queue: VecDeque::new(),
        }
    }

    pub fn estimate(&self, bk: Buckets, me: ReqId) -> Estimate {
        let mut est = Estimate { all_committed: true, ..Estimate::default() };
        for b in bk.iter() {
            match self.entries.get(&b).map(|e| (e.state, e.refs)) {
                None => {
                    est.need += 1;
                    est.all_committed = false;
                }
                Some((FirehoseState::Committed, refs)) => est.victim_hits += (refs == 0) as usize,
                Some((FirehoseState::Pending { .. }, _)) => est.all_committed = false,
                Some((FirehoseState::PendingUncommitted { owner }, _)) => {
                    est.conflict |= owner != me;
                    est.all_committed = false;
                }
                Some((FirehoseState::Stale { .. }, _)) => {
                    est.conflict = true;
                    est.all_committed = false;
                }
            }
        }
        est
    }

    /// Idle firehoses (Committed, no reference): what the victim FIFO holds for reaping.
    #[cfg(test)]
    pub fn idle(&self) -> usize {
        self.idle
    }

    /// Slots a request could gather now without waiting (its own victim hits excluded).
    pub fn available(&self, est: &Estimate) -> usize {
        self.free + self.to_release.len() + self.idle - est.victim_hits
    }

    /// Takes a reference on a committed firehose (a hit).
    pub fn take_ref(&mut self, b: usize) {
        let e = self.entries.get_mut(&b).expect("hit on a missing firehose");
        if e.refs == 0 && e.state == FirehoseState::Committed {
            self.idle -= 1;
        }
        e.refs += 1;
    }

    /// A hit: takes a reference on every bucket of `bk` if all are Committed (one lookup per
    /// bucket and no FIFO work: this is the hit path of every put); otherwise takes none and
    /// returns false.
    pub fn take_refs_if_committed(&mut self, bk: Buckets) -> bool {
        let mut taken = 0;
        let mut woken = 0;
        let all = self.entries.run_mut(bk, |_, e| match e {
            Some(e) if e.state == FirehoseState::Committed => {
                woken += (e.refs == 0) as usize;
                e.refs += 1;
                taken += 1;
                true
            }
            _ => false,
        });
        self.idle -= woken;
        if !all {
            // Give back what this call took; those buckets become idle again.
            bk.iter().take(taken).for_each(|b| self.drop_ref(b));
        }
        all
    }

    /// Drops one reference (a release, or a failed request giving back what it took).
    pub fn drop_ref(&mut self, b: usize) {
        let released = self.try_drop_ref(b);
        debug_assert!(released, "release of a firehose {b:#x} nobody holds");
    }

    /// Drops one reference if the bucket has one; false when it has none (nothing changes).
    fn try_drop_ref(&mut self, b: usize) -> bool {
        let Some(e) = self.entries.get_mut(&b).filter(|e| e.refs > 0) else { return false };
        e.refs -= 1;
        if e.refs == 0 {
            self.settle_unreferenced(b);
        }
        true
    }

    /// A firehose's last reference is gone: it becomes idle (FIFO), leaves the table (stale),
    /// or waits for its move's reply.
    fn settle_unreferenced(&mut self, b: usize) {
        let e = self.entries.get_mut(&b).expect("settling a firehose without an entry");
        match e.state {
            FirehoseState::Committed => {
                self.idle += 1;
                if !e.idle_again_in_place() {
                    e.queued = true;
                    self.victims.push_newest(b);
                }
            }
            FirehoseState::Stale { move_id: None } => {
                self.entries.remove(&b);
                self.to_release.push(b);
            }
            // Still in flight: `move_done` files it once answered.
            FirehoseState::Pending { .. } | FirehoseState::Stale { move_id: Some(_) } => {}
            FirehoseState::PendingUncommitted { .. } => unreachable!("references are taken at commit"),
        }
    }

    /// Releases a RemotePin's buckets in one pass (one lookup per bucket: this is on the hit
    /// path of every put). A RemotePin comes only from this crate and release consumes it, so
    /// a bucket without a reference means a bug; it is reported, and the others are released.
    pub fn release(&mut self, bk: Buckets) -> Result<()> {
        // One pass over the entries (a lookup per group); the rare buckets that need more than
        // their entry (a FIFO push, a stale firehose leaving the table) are finished after it.
        let (mut unheld, mut idle, mut rest) = (0, 0, Vec::new());
        self.entries.run_mut(bk, |b, e| {
            match e {
                Some(e) if e.refs > 0 => {
                    e.refs -= 1;
                    if e.refs == 0 {
                        if e.state == FirehoseState::Committed && e.idle_again_in_place() {
                            idle += 1;
                        } else if !matches!(e.state, FirehoseState::Pending { .. } | FirehoseState::Stale { move_id: Some(_) }) {
                            rest.push(b);
                        }
                    }
                }
                _ => unheld += 1,
            }
            true
        });
        self.idle += idle;
        for b in rest {
            self.settle_unreferenced(b);
        }
        if unheld > 0 {
            return Err(Error::InvalidArgument(format!(
                "firehose: release of remote pin {:#x}+{} buckets on rank {}: {unheld} of them not held (released twice?)",
                bk.first, bk.count, self.rank
            )));
        }
        Ok(())
    }

    /// Longest run of committed firehoses inside `bk` (the paper's partial remote pin).
    pub fn longest_committed_run(&self, bk: Buckets) -> Option<Buckets> {
        longest_run(bk, |b| matches!(self.entries.get(&b), Some(e) if e.state == FirehoseState::Committed))
    }

    /// The target's memory `r` went away: no firehose on it may be used again.
    pub fn invalidate(&mut self, r: Region) -> usize {
        let lo = r.addr & !(self.bucket - 1);
        let hit: Vec<usize> = self.entries.iter().map(|(b, _)| b).filter(|&b| b >= lo && b < r.end()).collect();
        let mut n = 0;
        for b in hit {
            let e = self.entries.get_mut(&b).unwrap();
            if e.queued && matches!(e.state, FirehoseState::Committed) {
                // Stale firehoses never sit in the FIFO.
                e.queued = false;
                self.victims.remove(b);
            }
            match e.state {
                FirehoseState::Committed if e.refs == 0 => {
                    self.idle -= 1;
                    self.entries.remove(&b);
                    self.to_release.push(b);
                }
                FirehoseState::Committed => e.state = FirehoseState::Stale { move_id: None },
                FirehoseState::Pending { move_id } => e.state = FirehoseState::Stale { move_id: Some(move_id) },
                // Not sent yet: its move will be served after the target's invalidation, so
                // the target pins the bucket afresh. Already stale: nothing to do.
                FirehoseState::PendingUncommitted { .. } | FirehoseState::Stale { .. } => continue,
            }
            n += 1;
        }
        n
    }

    /// Recounts and checks the slot accounting and f; for tests.
    pub fn check(&self, f: usize) -> std::result::Result<(), String> {
        let total = self.entries.len() + self.to_release.len() + self.releasing + self.free;
        if total != f {
            return Err(format!(
                "rank {}: slots drifted: {} entries + {} to release + {} releasing + {} free != f = {f}",
                self.rank,
                self.entries.len(),
                self.to_release.len(),
                self.releasing,
                self.free
            ));
        }
        let mut idle = 0;
        for (b, e) in self.entries.iter() {
            let victim = e.state == FirehoseState::Committed && e.refs == 0;
            idle += victim as usize;
            let queued = self.victims.contains(b);
            if queued != e.queued || (victim && !queued) || (queued && e.state != FirehoseState::Committed) {
                return Err(format!("rank {}: firehose {b:#x} {e:?}, in victim FIFO: {queued}", self.rank));
            }
        }
        if idle != self.idle || self.victims.len() < idle {
            return Err(format!("rank {}: {idle} idle firehoses, counted {}, {} queued", self.rank, self.idle, self.victims.len()));
        }
        Ok(())
    }

    /// A firehose just became Committed with no reference (its move was answered, or a
    /// rollback gives a reaped one back: `oldest`).
    pub fn file_idle(&mut self, b: usize, oldest: bool) {
        let e = self.entries.get_mut(&b).expect("idle firehose without an entry");
        debug_assert!(e.state == FirehoseState::Committed && e.refs == 0 && !e.queued);
        e.queued = true;
        e.recent = false;
        self.idle += 1;
        if oldest {
            self.victims.push_oldest(b);
        } else {
            self.victims.push_newest(b);
        }
    }

    /// Takes the oldest idle firehose not in `keep` out of the table (its slot is reused);
    /// drops referenced entries the FIFO still held and gives recently idle ones a second
    /// chance on the way.
    pub fn reap_victim(&mut self, keep: Buckets) -> Option<usize> {
        let mut chances = self.victims.len();
        loop {
            let b = self.victims.pop_oldest_where(|v| !keep.contains(v))?;
            let e = self.entries.get_mut(&b).expect("queued firehose without an entry");
            if e.refs > 0 {
                e.queued = false; // in use again: its release files it anew
                continue;
            }
            if e.recent && chances > 0 {
                chances -= 1;
                e.recent = false;
                self.victims.push_newest(b);
                continue;
            }
            self.idle -= 1;
            self.entries.remove(&b);
            return Some(b);
        }
    }
}
