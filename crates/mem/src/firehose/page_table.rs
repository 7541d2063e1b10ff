//! The local page table: one entry per bucket of *this* rank's memory that Firehose pinned,
//! with the two reference counts the paper's table 2 describes (local operations in progress,
//! remote firehoses mapped onto it) and the victim FIFO of unused pinned buckets.
//!
//! Budgets (all in buckets, prepinned regions excluded):
//! ```text
//! R  = entries with remote_refs > 0      R  <= M          (each is a remote firehose; f*(n-1) <= M)
//! Lh = entries with local_refs  > 0      Lh + V <= MAXVICTIM
//! V  = victims: pinned, both refs 0
//! pinned <= |R u Lh u V| <= M + MAXVICTIM
//! ```
//! A bucket both remotely and locally held is charged to both R and Lh. That is conservative
//! but keeps the bound true at every instant without the AM handler ever having to wait: a
//! move only consumes R (guaranteed by the origins' f), and releasing a firehose only grows V,
//! which is trimmed at once by unpinning the oldest victim.

use super::config::{Buckets, Region};
use super::stats::FirehoseStats;
use super::victims::VictimFifo;
use super::Pinner;
use activerma_core::{Error, Rank, Result};
use rustc_hash::FxHashMap as HashMap;

/// Registration state of a local bucket that has an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageState {
    /// Pinned by us: usable for one-sided access.
    Pinned,
    /// Invalidated (memory freed or unexposed) while references were outstanding: unpinned,
    /// kept only so the references can be returned; the next pin of it pins afresh.
    Stale,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct PageEntry {
    pub state: PageState,
    pub local_refs: u32,
    pub remote_refs: u32,
}

/// What a local acquire did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LocalAcquire {
    /// References taken; `pinned` is true when it had to pin something (a miss).
    Done { pinned: bool },
    /// The MAXVICTIM budget is fully used by other local pins: wait for releases.
    NeedBudget,
    /// A `try` found a bucket that is not pinned.
    NotPinned,
}

pub(crate) struct PageTable {
    me: Rank,
    bucket: usize,
    max_remote: usize,
    max_victim: usize,
    prepinned: Vec<Region>,
    entries: HashMap<usize, PageEntry>,
    victims: VictimFifo<usize>,
    local_held: usize,
    remote_held: usize,
    pinned: usize,
}

impl PageTable {
    pub fn new(me: Rank, bucket: usize, max_remote: usize, max_victim: usize, prepinned: Vec<Region>) -> Self {
        PageTable {
            me,
            bucket,
            max_remote,
            max_victim,
            prepinned,
            entries: HashMap::default(),
            victims: VictimFifo::new(),
            local_held: 0,
            remote_held: 0,
            pinned: 0,
        }
    }

    /// Buckets pinned by Firehose now.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    pub fn is_prepinned(&self, b: usize) -> bool {
        self.prepinned.iter().any(|r| b >= r.addr && b + self.bucket <= r.end())
    }

    /// Usable for one-sided access now (prepinned or pinned).
    pub fn is_pinned(&self, b: usize) -> bool {
        self.is_prepinned(b) || matches!(self.entries.get(&b), Some(e) if e.state == PageState::Pinned)
    }

    /// Local buckets of `bk` that consume the MAXVICTIM budget (all but prepinned ones).
    pub fn chargeable(&self, bk: Buckets) -> usize {
        bk.iter().filter(|&b| !self.is_prepinned(b)).count()
    }

    /// The buckets Firehose manages (not prepinned), in order.
    fn charged(&self, buckets: impl Iterator<Item = usize>) -> Vec<usize> {
        buckets.filter(|&b| !self.is_prepinned(b)).collect()
    }

    /// Takes a local reference on every bucket of `bk`, all or nothing, pinning what is not
    /// pinned when `pin_missing` (else answers NotPinned). `may_grow` false refuses to charge
    /// the budget (a waiter queued ahead of us has the right to it first).
    pub fn acquire(
        &mut self,
        bk: Buckets,
        pin_missing: bool,
        may_grow: bool,
        pinner: &dyn Pinner,
        stats: &FirehoseStats,
    ) -> Result<LocalAcquire> {
        let mine = self.charged(bk.iter());
        let mut growth = 0;
        let mut reused = 0;
        let mut missing = Vec::new();
        for &b in &mine {
            match self.entries.get(&b) {
                None => {
                    growth += 1;
                    missing.push(b);
                }
                Some(e) => {
                    if e.local_refs == 0 {
                        growth += 1;
                        reused += self.victims.contains(b) as usize;
                    }
                    if e.state == PageState::Stale {
                        missing.push(b);
                    }
                }
            }
        }
        if !pin_missing && !missing.is_empty() {
            return Ok(LocalAcquire::NotPinned);
        }
        if growth > 0 && (!may_grow || self.local_held + growth > self.max_victim) {
            return Ok(LocalAcquire::NeedBudget);
        }
        // Make room: after this call Lh grows by `growth` and V loses the `reused` victims.
        let mut out = Vec::new();
        while self.local_held + growth + self.victims.len() - reused > self.max_victim {
            out.push(self.victims.pop_oldest_where(|v| !bk.contains(v)).expect("victims to evict"));
        }
        self.evict(out, pinner, stats);
        self.pin_runs(&missing, pinner, stats)?;
        for b in mine {
            self.take_ref(b, true, stats);
        }
        Ok(LocalAcquire::Done { pinned: !missing.is_empty() })
    }

    /// Longest run of already pinned buckets inside `bk` (the paper's partial pin).
    pub fn longest_pinned_run(&self, bk: Buckets) -> Option<Buckets> {
        longest_run(bk, |b| self.is_pinned(b))
    }

    /// Drops the local references of a `LocalPin`.
    pub fn release(&mut self, bk: Buckets, pinner: &dyn Pinner, stats: &FirehoseStats) -> Result<()> {
        let held = |b| self.is_prepinned(b) || matches!(self.entries.get(&b), Some(e) if e.local_refs > 0);
        if !bk.iter().all(held) {
            return Err(Error::InvalidArgument(format!(
                "firehose: release of local pin {:#x}+{} buckets that is not held (released twice?)",
                bk.first, bk.count
            )));
        }
        for b in self.charged(bk.iter()) {
            let e = self.entries.get_mut(&b).unwrap();
            e.local_refs -= 1;
            if e.local_refs == 0 {
                self.local_held -= 1;
                if e.remote_refs == 0 {
                    self.retire(b);
                }
            }
        }
        self.trim(pinner, stats);
        Ok(())
    }

    /// Takes one local (or remote) reference on bucket `b`, which is pinned by now: the first
    /// one counts the bucket as held on that side, and takes it back from the victims if
    /// nobody held it.
    fn take_ref(&mut self, b: usize, local: bool, stats: &FirehoseStats) {
        let e = self.entries.entry(b).or_insert(PageEntry { state: PageState::Pinned, local_refs: 0, remote_refs: 0 });
        e.state = PageState::Pinned;
        let (mine, other, held) = if local {
            (&mut e.local_refs, e.remote_refs, &mut self.local_held)
        } else {
            (&mut e.remote_refs, e.local_refs, &mut self.remote_held)
        };
        if *mine == 0 {
            *held += 1;
            if other == 0 && self.victims.remove(b) {
                FirehoseStats::add(&stats.victim_reuses, 1);
            }
        }
        *mine += 1;
    }

    /// Target side of a move, first half: a remote rank stops using bucket `b`. The victims
    /// this makes are trimmed by `trim_victims` once the whole move's releases are applied, so
    /// that buckets evicted together are unpinned in runs.
    pub fn serve_release(&mut self, from: Rank, b: usize) -> Result<()> {
        if self.is_prepinned(b) {
            return Ok(());
        }
        match self.entries.get_mut(&b) {
            Some(e) if e.remote_refs > 0 => {
                e.remote_refs -= 1;
                if e.remote_refs == 0 {
                    self.remote_held -= 1;
                    if e.local_refs == 0 {
                        self.retire(b);
                    }
                }
                Ok(())
            }
            _ => Err(Error::InvalidArgument(format!(
                "firehose: rank {from} released a firehose on {b:#x} of rank {} that it does not hold",
                self.me
            ))),
        }
    }

    /// Target side of a move, second half: pin `pins` for a remote rank, all or nothing. Never
    /// waits (it runs in an AM handler): the origins' f guarantees room within M.
    pub fn serve_pin(&mut self, from: Rank, pins: &[usize], pinner: &dyn Pinner, stats: &FirehoseStats) -> Result<()> {
        let mine = self.charged(pins.iter().copied());
        let mut growth = 0;
        let mut missing = Vec::new();
        for &b in &mine {
            match self.entries.get(&b) {
                None => {
                    growth += 1;
                    missing.push(b);
                }
                Some(e) => {
                    growth += (e.remote_refs == 0) as usize;
                    if e.state == PageState::Stale {
                        missing.push(b);
                    }
                }
            }
        }
        if self.remote_held + growth > self.max_remote {
            return Err(Error::OutOfResources(format!(
                "firehose: rank {from} asked rank {} to pin {growth} more buckets for remote use, beyond \
                 M = {} ({} in use): ranks disagree on f or M",
                self.me, self.max_remote, self.remote_held
            )));
        }
        missing.sort_unstable();
        self.pin_runs(&missing, pinner, stats)?;
        for b in mine {
            self.take_ref(b, false, stats);
        }
        // Reviving victims shrank V; nothing to trim. Pinning new buckets only grew R.
        Ok(())
    }

    /// Memory `r` is being freed or unexposed: unpin every bucket that overlaps it, so no later
    /// request hits a stale registration. Buckets still referenced become Stale (their counts
    /// stay exact) and are pinned afresh if asked for again. Unpin errors are ignored: if the
    /// memory is already unmapped, its lock went with it.
    pub fn invalidate(&mut self, r: Region, pinner: &dyn Pinner, stats: &FirehoseStats) -> usize {
        let lo = r.addr & !(self.bucket - 1);
        let hits: Vec<usize> = self.entries.keys().copied().filter(|&b| b >= lo && b < r.end()).collect();
        for &b in &hits {
            let e = self.entries.get_mut(&b).unwrap();
            if e.state == PageState::Pinned {
                e.state = PageState::Stale;
                self.pinned -= 1;
                FirehoseStats::add(&stats.unpins, 1);
                FirehoseStats::add(&stats.bytes_unpinned, self.bucket as u64);
                let _ = pinner.unpin(b, self.bucket);
            }
            if e.local_refs == 0 && e.remote_refs == 0 {
                self.victims.remove(b);
                self.entries.remove(&b);
            }
        }
        hits.len()
    }

    /// Recounts everything from the entries and checks the bounds; for tests.
    pub fn check(&self) -> std::result::Result<(), String> {
        let (mut lh, mut rh, mut pinned, mut v) = (0, 0, 0, 0);
        for (&b, e) in &self.entries {
            lh += (e.local_refs > 0) as usize;
            rh += (e.remote_refs > 0) as usize;
            pinned += (e.state == PageState::Pinned) as usize;
            let idle = e.local_refs == 0 && e.remote_refs == 0;
            if idle != self.victims.contains(b) || (idle && e.state != PageState::Pinned) {
                return Err(format!("bucket {b:#x}: {e:?}, in victim FIFO: {}", self.victims.contains(b)));
            }
            v += idle as usize;
        }
        if (lh, rh, pinned, v) != (self.local_held, self.remote_held, self.pinned, self.victims.len()) {
            return Err(format!(
                "counts drifted: recounted Lh {lh} R {rh} pinned {pinned} V {v}, kept {} {} {} {}",
                self.local_held,
                self.remote_held,
                self.pinned,
                self.victims.len()
            ));
        }
        if rh > self.max_remote || lh + v > self.max_victim || pinned > self.max_remote + self.max_victim {
            return Err(format!(
                "bound exceeded: R {rh} (M {}), Lh {lh} + V {v} (MAXVICTIM {}), pinned {pinned}",
                self.max_remote, self.max_victim
            ));
        }
        Ok(())
    }

    /// A bucket nobody references any more: keep it pinned as a victim, or drop it if stale.
    fn retire(&mut self, b: usize) {
        if self.entries[&b].state == PageState::Pinned {
            self.victims.push_newest(b);
        } else {
            self.entries.remove(&b);
        }
    }

    /// Lazy deregistration happens here: only when Lh + V exceeds MAXVICTIM.
    fn trim(&mut self, pinner: &dyn Pinner, stats: &FirehoseStats) {
        let mut out = Vec::new();
        while self.local_held + self.victims.len() > self.max_victim {
            out.push(self.victims.pop_oldest().unwrap());
        }
        self.evict(out, pinner, stats);
    }

    /// `trim` for the move handler, after all of a move's releases (`serve_release`).
    pub fn trim_victims(&mut self, pinner: &dyn Pinner, stats: &FirehoseStats) {
        self.trim(pinner, stats);
    }

    /// Unpins victims (already out of the FIFO) and forgets them; consecutive buckets in one
    /// unpin call (a move's released buckets often are: they age out of the FIFO together).
    fn evict(&mut self, mut out: Vec<usize>, pinner: &dyn Pinner, stats: &FirehoseStats) {
        out.sort_unstable();
        for &b in &out {
            self.entries.remove(&b);
        }
        self.pinned -= out.len();
        FirehoseStats::add(&stats.bytes_unpinned, (out.len() * self.bucket) as u64);
        let mut i = 0;
        while i < out.len() {
            let mut j = i + 1;
            while j < out.len() && out[j] == out[j - 1] + self.bucket {
                j += 1;
            }
            FirehoseStats::add(&stats.unpins, 1);
            // A failing munlock leaves the run locked but not counted: the bound on what we
            // *count* holds, and the kernel's RLIMIT_MEMLOCK still caps the real amount.
            let _ = pinner.unpin(out[i], (j - i) * self.bucket);
            i = j;
        }
    }

    /// Pins sorted buckets in runs of consecutive ones (one pinner call per run), all or
    /// nothing. Entries are created or updated by the caller; this only counts.
    fn pin_runs(&mut self, sorted: &[usize], pinner: &dyn Pinner, stats: &FirehoseStats) -> Result<()> {
        let mut done: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i + 1;
            while j < sorted.len() && sorted[j] == sorted[j - 1] + self.bucket {
                j += 1;
            }
            let (addr, len) = (sorted[i], (j - i) * self.bucket);
            if let Err(e) = pinner.pin(addr, len) {
                for &(a, l) in &done {
                    let _ = pinner.unpin(a, l);
                }
                return Err(e);
            }
            done.push((addr, len));
            i = j;
        }
        let bytes: usize = done.iter().map(|d| d.1).sum();
        self.pinned += sorted.len();
        FirehoseStats::add(&stats.pins, done.len() as u64);
        FirehoseStats::add(&stats.bytes_pinned, bytes as u64);
        Ok(())
    }
}

/// Longest run of consecutive buckets of `bk` satisfying `ok`.
pub(crate) fn longest_run(bk: Buckets, ok: impl Fn(usize) -> bool) -> Option<Buckets> {
    let (mut best, mut start, mut len) = ((0, 0), 0, 0);
    for (i, b) in bk.iter().enumerate() {
        if ok(b) {
            if len == 0 {
                start = i;
            }
            len += 1;
            if len > best.1 {
                best = (start, len);
            }
        } else {
            len = 0;
        }
    }
    (best.1 > 0).then(|| bk.sub(best.0, best.1))
}
