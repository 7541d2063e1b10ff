//! Remote requests shared by many client threads of one rank (the paper's Firehose-SMP).
//!
//! Everything here runs under the table lock and never waits; the waiting (polling the
//! network, sleeping on the condition variable) is done by the caller in `api.rs`, outside the
//! lock. One call of `step` is one attempt of the paper's figure 5/6 loop:
//!
//! ```text
//! step(req):
//!   est = estimate(req.buckets)                       # hits, pending hits, missing, conflicts
//!   if all committed and req holds nothing: commit    # a hit: one-sided, no message
//!   if another request holds rank's DA token:
//!       rollback(req); queue for the token; WAIT      # losers give everything back
//!   if no conflict:
//!       if est.need <= slots free + to_release + victims not in req:   # the easy path
//!           gather(est.need); commit
//!       gather(what is available)                      # optimistic: keep as PENDING_UNCOMMITTED
//!   if req holds the token: POLL (keep gathering)      # the winner is never rolled back
//!   req.tries += 1
//!   if conflict: rollback(req)
//!   if req.tries >= DA_LIMIT: take the token
//!   POLL
//! ```
//! The token is handed to the oldest queued request when its holder commits, so every request
//! that lost a round gets its turn: no thread starves, and under heavy contention the
//! rank's requests are served round robin.

use super::api::RemotePin;
use super::config::{Buckets, Config, Region};
use super::page_table::PageTable;
use super::remote_table::{FhEntry, FirehoseState, RemoteTable, ReqId};
use super::stats::FirehoseStats;
use super::transport::{MoveReply, MoveRequest};
use activerma_core::{Error, Rank, Result};
use std::collections::{HashMap, VecDeque};

/// Called once when an asynchronous remote pin completes.
pub type DoneCallback = Box<dyn FnOnce(Result<RemotePin>) + Send>;

/// What happens when a committed request's moves are answered.
pub(crate) enum Outcome {
    /// A thread waits in `remote_pin`; the result is parked here for it.
    Sync(Option<Result<()>>),
    Callback(DoneCallback),
    /// The waiting thread gave up (timeout): drop its references once the moves complete.
    Abandoned,
}

/// A committed request waiting for one or more moves (its own, or others' it hit on).
pub(crate) struct Waiter {
    pub pin: RemotePin,
    /// Each bucket with the move it waits for (None: it was committed already).
    held: Vec<(usize, Option<u64>)>,
    pending: usize,
    failed: Vec<u64>,
    error: Option<Error>,
    pub outcome: Outcome,
}

pub(crate) struct MoveInFlight {
    rank: Rank,
    creator: ReqId,
    pins: Vec<usize>,
    /// Slots released by this move beyond the replacements for its pins (see `releasing`).
    frees_on_reply: usize,
    waiting: Vec<ReqId>,
}

/// All of one rank's Firehose state, behind one lock.
pub(crate) struct Tables {
    pub local: PageTable,
    pub remote: Vec<RemoteTable>,
    pub moves: HashMap<u64, MoveInFlight>,
    pub waiters: HashMap<ReqId, Waiter>,
    next_move: u64,
    /// Local pins waiting for MAXVICTIM budget, served first come first served.
    pub local_queue: VecDeque<u64>,
    /// Bumped on every change a waiting thread could be waiting for.
    pub epoch: u64,
    /// Threads asleep on the condition variable (notify only when someone sleeps).
    pub sleepers: usize,
}

impl Tables {
    pub fn new(cfg: &Config) -> Tables {
        Tables {
            local: PageTable::new(cfg.rank, cfg.bucket_bytes, cfg.max_remote_buckets, cfg.max_victim_buckets, cfg.prepinned.clone()),
            remote: (0..cfg.nranks).map(|r| RemoteTable::new(r, cfg.bucket_bytes, cfg.firehoses_per_rank)).collect(),
            moves: HashMap::new(),
            waiters: HashMap::new(),
            next_move: 0,
            local_queue: VecDeque::new(),
            epoch: 0,
            sleepers: 0,
        }
    }
}

/// One remote pin request while it gathers firehoses.
pub(crate) struct Request {
    pub id: ReqId,
    pub rank: Rank,
    pub bk: Buckets,
    pub region: Region,
    pub target_arg: Option<u64>,
    /// Our PENDING_UNCOMMITTED entries, in bucket order.
    created: Vec<usize>,
    /// Slots taken from the free count (given back on rollback).
    free_taken: usize,
    /// Victims or to-release mappings reaped to be moved (given back on rollback).
    replacements: Vec<usize>,
    pub tries: u32,
    /// Queued at least once for another request's deadlock-avoidance token.
    pub queued: bool,
}

impl Request {
    pub fn new(id: ReqId, rank: Rank, bk: Buckets, region: Region, target_arg: Option<u64>) -> Request {
        Request { id, rank, bk, region, target_arg, created: Vec::new(), free_taken: 0, replacements: Vec::new(), tries: 0, queued: false }
    }

    fn holds_anything(&self) -> bool {
        !self.created.is_empty()
    }
}

pub(crate) enum Step {
    /// References taken. `send` is the move to send (outside the lock). `ready` is the pin when
    /// nothing is in flight; otherwise a `Waiter` under the request's id awaits the replies.
    Committed { send: Option<MoveRequest>, ready: Option<RemotePin> },
    /// Not enough firehoses yet: poll the network (completions release firehoses) and retry.
    Poll,
    /// Another request holds this rank's deadlock-avoidance token; we rolled back and queued.
    WaitToken,
}

pub(crate) fn step(t: &mut Tables, req: &mut Request, cfg: &Config, stats: &FirehoseStats) -> Step {
    let rt = &mut t.remote[req.rank];
    let est = rt.estimate(req.bk, req.id);
    // A hit commits whoever holds the token: it sends nothing and waits for nothing.
    if est.all_committed && !req.holds_anything() {
        return commit(t, req, cfg, stats);
    }
    if let Some(owner) = rt.da_owner {
        if owner != req.id {
            if req.holds_anything() {
                rollback(rt, req);
                FirehoseStats::add(&stats.rollbacks, 1);
                t.epoch += 1;
            }
            if !rt.da_queue.contains(&req.id) {
                rt.da_queue.push_back(req.id);
                if !req.queued {
                    req.queued = true;
                    FirehoseStats::add(&stats.token_waits, 1);
                }
            }
            return Step::WaitToken;
        }
    }
    if !est.conflict {
        let avail = rt.available(&est);
        if est.need <= avail {
            if req.tries == 0 && !req.queued && !req.holds_anything() {
                FirehoseStats::add(&stats.easy_path, 1);
            }
            gather(rt, req, est.need);
            return commit(t, req, cfg, stats);
        }
        gather(rt, req, avail);
    }
    if rt.da_owner == Some(req.id) {
        return Step::Poll;
    }
    req.tries += 1;
    FirehoseStats::add(&stats.da_retries, 1);
    if est.conflict && req.holds_anything() {
        // Someone else's uncommitted firehose (or a stale one) covers one of our buckets: give
        // way rather than hold firehoses it may need.
        rollback(rt, req);
        FirehoseStats::add(&stats.rollbacks, 1);
        t.epoch += 1;
    }
    if req.tries >= cfg.da_limit {
        rt.da_owner = Some(req.id);
        FirehoseStats::add(&stats.da_claims, 1);
    }
    Step::Poll
}

/// Gives up a request that never committed (timeout): returns what it gathered, leaves the
/// token queue, hands the token on if it had it.
pub(crate) fn abort(t: &mut Tables, req: &mut Request) {
    let rt = &mut t.remote[req.rank];
    rollback(rt, req);
    rt.da_queue.retain(|&r| r != req.id);
    if rt.da_owner == Some(req.id) {
        rt.da_owner = rt.da_queue.pop_front();
    }
    t.epoch += 1;
}

/// Creates up to `n` PENDING_UNCOMMITTED firehoses for buckets of `req` that have none, each
/// backed by a free slot, else a to-release mapping, else the oldest victim not in `req`.
fn gather(rt: &mut RemoteTable, req: &mut Request, n: usize) {
    let mut got = 0;
    for b in req.bk.iter() {
        if got == n {
            break;
        }
        if rt.entries.contains_key(&b) {
            continue;
        }
        if rt.free > 0 {
            rt.free -= 1;
            req.free_taken += 1;
        } else if let Some(x) = rt.to_release.pop() {
            req.replacements.push(x);
        } else if let Some(x) = rt.reap_victim(req.bk) {
            req.replacements.push(x);
        } else {
            break;
        }
        rt.entries.insert(b, FhEntry::new(FirehoseState::PendingUncommitted { owner: req.id }));
        req.created.push(b);
        got += 1;
    }
}

/// Returns every replacement to the victim FIFO (at the old end, where it came from) and
/// destroys the request's PENDING_UNCOMMITTED firehoses.
fn rollback(rt: &mut RemoteTable, req: &mut Request) {
    for b in req.created.drain(..) {
        let e = rt.entries.remove(&b);
        debug_assert!(matches!(e, Some(FhEntry { state: FirehoseState::PendingUncommitted { owner }, .. }) if owner == req.id));
    }
    rt.free += std::mem::take(&mut req.free_taken);
    for x in req.replacements.drain(..) {
        if rt.entries.contains_key(&x) {
            // Another request made a new firehose for this bucket meanwhile: ours is now a
            // duplicate mapping, released by the next move.
            rt.to_release.push(x);
        } else {
            rt.entries.insert(x, FhEntry::new(FirehoseState::Committed));
            rt.file_idle(x, true);
        }
    }
}

/// Takes the references, turns our PENDING_UNCOMMITTED firehoses into PENDING under a new
/// move, registers the waiter, and hands the token on.
fn commit(t: &mut Tables, req: &mut Request, cfg: &Config, stats: &FirehoseStats) -> Step {
    let move_id = if req.created.is_empty() {
        None
    } else {
        t.next_move += 1;
        Some(t.next_move)
    };
    let rt = &mut t.remote[req.rank];
    let mut held = Vec::with_capacity(req.bk.count);
    let mut waits: Vec<u64> = Vec::new();
    for b in req.bk.iter() {
        let e = rt.entries.get_mut(&b).expect("commit with a bucket not covered");
        match e.state {
            FirehoseState::Committed => {
                rt.take_ref(b);
                held.push((b, None));
            }
            FirehoseState::Pending { move_id: m } => {
                e.refs += 1;
                held.push((b, Some(m)));
                if !waits.contains(&m) {
                    waits.push(m);
                }
            }
            FirehoseState::PendingUncommitted { owner } if owner == req.id => {
                let m = move_id.unwrap();
                e.state = FirehoseState::Pending { move_id: m };
                e.refs = 1;
                held.push((b, Some(m)));
            }
            s => unreachable!("commit over a firehose in state {s:?}"),
        }
    }
    let mut send = None;
    if let Some(m) = move_id {
        waits.push(m);
        let mut release = std::mem::take(&mut req.replacements);
        // Piggy-back mappings waiting to be released; their slots free up when answered.
        let extra = rt.to_release.len();
        release.append(&mut rt.to_release);
        rt.releasing += extra;
        req.free_taken = 0;
        let pins = std::mem::take(&mut req.created);
        FirehoseStats::add(&stats.moves_sent, 1);
        FirehoseStats::add(&stats.remote_misses, 1);
        FirehoseStats::add(&stats.firehoses_moved, pins.len() as u64);
        t.moves.insert(m, MoveInFlight { rank: req.rank, creator: req.id, pins: pins.clone(), frees_on_reply: extra, waiting: Vec::new() });
        send = Some(MoveRequest { move_id: m, bucket_bytes: cfg.bucket_bytes, release, pin: pins, target_arg: req.target_arg });
    } else if waits.is_empty() {
        FirehoseStats::add(&stats.remote_hits, 1);
    } else {
        FirehoseStats::add(&stats.remote_pending_hits, 1);
    }
    // A queued request may commit on a hit before its turn: it must leave the queue, or the
    // token would later be handed to a request that no longer exists.
    rt.da_queue.retain(|&r| r != req.id);
    if rt.da_owner == Some(req.id) {
        rt.da_owner = rt.da_queue.pop_front();
    }
    let pin = RemotePin { rank: req.rank, region: req.region, bk: req.bk, target_callback_ran: false };
    t.epoch += 1;
    if waits.is_empty() {
        return Step::Committed { send, ready: Some(pin) };
    }
    for m in &waits {
        t.moves.get_mut(m).expect("pending firehose without its move").waiting.push(req.id);
    }
    let pending = waits.len();
    t.waiters.insert(req.id, Waiter { pin, held, pending, failed: Vec::new(), error: None, outcome: Outcome::Sync(None) });
    Step::Committed { send, ready: None }
}

/// A move's reply arrived (or it could not be sent: `unsent` holds its release list, which
/// then still counts against f and goes to the next move). Returns the callbacks of requests
/// this completed, to be run outside the lock.
pub(crate) fn move_done(t: &mut Tables, reply: MoveReply, unsent: Option<Vec<usize>>) -> Vec<(DoneCallback, Result<RemotePin>)> {
    let Some(mv) = t.moves.remove(&reply.move_id) else {
        return Vec::new(); // a duplicate or unknown reply: nothing waits for it
    };
    let rt = &mut t.remote[mv.rank];
    let ok = reply.result.is_ok();
    rt.releasing -= mv.frees_on_reply;
    if unsent.is_none() {
        rt.free += mv.frees_on_reply;
    }
    for &b in &mv.pins {
        let e = rt.entries.get_mut(&b).expect("moved firehose vanished");
        match (e.state, ok) {
            (FirehoseState::Pending { .. }, true) => {
                e.state = FirehoseState::Committed;
                if e.refs == 0 {
                    rt.file_idle(b, false);
                }
            }
            (FirehoseState::Stale { .. }, true) => {
                e.state = FirehoseState::Stale { move_id: None };
                if e.refs == 0 {
                    rt.entries.remove(&b);
                    rt.to_release.push(b);
                }
            }
            (_, false) => {
                rt.entries.remove(&b);
                rt.free += 1;
            }
            (s, true) => unreachable!("reply for a firehose in state {s:?}"),
        }
    }
    if let Some(release) = unsent {
        // The target never saw the move, so all it was to release is still pinned for us and
        // keeps its slot: the replacements the failed pins freed above go back to to_release
        // (only slots the request took from the free count stay free).
        let replacements = release.len() - mv.frees_on_reply;
        rt.free -= replacements;
        rt.to_release.extend(release);
    }
    let mut callbacks = Vec::new();
    for w in mv.waiting {
        let wt = t.waiters.get_mut(&w).expect("waiter vanished");
        wt.pending -= 1;
        if w == mv.creator {
            wt.pin.target_callback_ran = reply.target_callback_ran;
        }
        if let Err(e) = &reply.result {
            wt.failed.push(reply.move_id);
            wt.error.get_or_insert_with(|| e.clone());
        }
        if wt.pending == 0 {
            if let Some(cb) = finish(t, w) {
                callbacks.push(cb);
            }
        }
    }
    t.epoch += 1;
    callbacks
}

/// All of a waiter's moves are answered: on failure give back the references that are still
/// valid, then deliver the result as its outcome asks.
fn finish(t: &mut Tables, w: ReqId) -> Option<(DoneCallback, Result<RemotePin>)> {
    let wt = t.waiters.get_mut(&w).unwrap();
    let rt = &mut t.remote[wt.pin.rank];
    let result = match wt.error.take() {
        Some(e) => {
            for &(b, m) in &wt.held {
                if m.is_none_or(|m| !wt.failed.contains(&m)) {
                    rt.drop_ref(b);
                }
            }
            Err(e)
        }
        None => Ok(()),
    };
    match &mut wt.outcome {
        Outcome::Sync(slot) => {
            *slot = Some(result);
            None
        }
        Outcome::Abandoned => {
            let wt = t.waiters.remove(&w).unwrap();
            if result.is_ok() {
                let rt = &mut t.remote[wt.pin.rank];
                wt.held.iter().for_each(|&(b, _)| rt.drop_ref(b));
            }
            None
        }
        Outcome::Callback(_) => {
            let wt = t.waiters.remove(&w).unwrap();
            let Outcome::Callback(cb) = wt.outcome else { unreachable!() };
            Some((cb, result.map(|()| wt.pin)))
        }
    }
}
