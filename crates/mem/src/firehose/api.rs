//! The Firehose API of the paper's figure 4: init, local pin / try / partial, remote pin
//! (blocking, or with a completion callback, optionally running a callback at the target),
//! try / partial remote pin, release — plus the two AM-handler entry points (`serve_move`,
//! `move_done`) and invalidation.
//!
//! Any number of client threads may call it at once (the SMP variant); the active-message
//! handlers may run on any thread. One lock guards the tables and is never held while waiting:
//! threads that must wait poll the network and sleep on a condition variable outside it.

use super::config::{Buckets, Config, Region};
use super::page_table::LocalAcquire;
use super::smp::{self, DoneCallback, Outcome, Request, Step, Tables};
use super::stats::FirehoseStats;
use super::transport::{MoveReply, MoveRequest, MoveTransport};
use super::Pinner;
use activerma_core::{Error, Rank, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Runs at the target after a move pinned buckets for `origin` (the paper's optional target
/// callback): (origin, pinned bucket addresses, the argument the origin passed).
pub type TargetCallback = Arc<dyn Fn(Rank, &[usize], u64) + Send + Sync>;

/// A local region pinned for this rank's own operations (source of a put, destination of a
/// get). Give it back with `release_local`.
#[must_use = "a LocalPin holds pinned memory until passed to Firehose::release_local"]
#[derive(Debug)]
pub struct LocalPin {
    pub region: Region,
    pub(crate) bk: Buckets,
}

/// A region of another rank that stays pinned for us, through our firehoses, until passed to
/// `release_remote`: one-sided puts and gets into it are allowed meanwhile.
#[must_use = "a RemotePin holds firehoses until passed to Firehose::release_remote"]
#[derive(Debug)]
pub struct RemotePin {
    pub rank: Rank,
    pub region: Region,
    pub(crate) bk: Buckets,
    /// True when a move ran the target's callback; a hit sends nothing, so a client that
    /// needs the target to act must then tell it some other way.
    pub target_callback_ran: bool,
}

pub struct Firehose {
    cfg: Config,
    pinner: Arc<dyn Pinner>,
    transport: Arc<dyn MoveTransport>,
    target_callback: Option<TargetCallback>,
    tables: Mutex<Tables>,
    cv: Condvar,
    next_id: AtomicU64,
    stats: FirehoseStats,
}

/// How long a waiting thread polls before it sleeps, and how long it sleeps at most (a wake-up
/// comes sooner when the tables change).
const POLL_ROUNDS: u32 = 16;
const NAP: Duration = Duration::from_micros(200);

struct Waiting {
    deadline: Option<Instant>,
    rounds: u32,
}

impl Firehose {
    /// `firehose_init`: the pinner, the AM layer, and (in `cfg`) M, MAXVICTIM, f and the
    /// prepinned regions.
    pub fn new(cfg: Config, pinner: Arc<dyn Pinner>, transport: Arc<dyn MoveTransport>) -> Result<Firehose> {
        cfg.validate()?;
        Ok(Firehose {
            tables: Mutex::new(Tables::new(&cfg)),
            cfg,
            pinner,
            transport,
            target_callback: None,
            cv: Condvar::new(),
            next_id: AtomicU64::new(1),
            stats: FirehoseStats::default(),
        })
    }

    /// Sets the callback moves run at this rank (as target) when the origin asks for it.
    pub fn with_target_callback(mut self, cb: TargetCallback) -> Firehose {
        self.target_callback = Some(cb);
        self
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> &FirehoseStats {
        &self.stats
    }

    /// Buckets pinned by Firehose now (prepinned regions not included).
    pub fn pinned_buckets(&self) -> usize {
        self.lock().local.pinned()
    }

    // ---- local pins ------------------------------------------------------------------------

    /// Pins `[addr, addr+len)` for a local operation, waiting (polling) while the MAXVICTIM
    /// budget is used up by other local pins. Waiters are served in arrival order.
    pub fn local_pin(&self, addr: usize, len: usize) -> Result<LocalPin> {
        let bk = self.cfg.buckets(addr, len);
        let mut g = self.lock();
        let need = g.local.chargeable(bk);
        if need > self.cfg.max_victim_buckets {
            return Err(Error::SizeLimit(format!(
                "firehose: a local pin of {len} bytes needs {need} buckets of {} bytes, but MAXVICTIM is {} \
                 buckets: split the operation or raise MAXVICTIM",
                self.cfg.bucket_bytes, self.cfg.max_victim_buckets
            )));
        }
        let mut ticket = None;
        let mut w = self.waiting();
        loop {
            let my_turn = g.local_queue.front().is_none_or(|&t| Some(t) == ticket);
            match g.local.acquire(bk, true, my_turn, &*self.pinner, &self.stats) {
                Ok(LocalAcquire::Done { pinned }) => {
                    let c = if pinned { &self.stats.local_misses } else { &self.stats.local_hits };
                    FirehoseStats::add(c, 1);
                    // Our own ticket, which need not be the front: a hit needs no budget and
                    // goes ahead of the queue.
                    self.leave_local_queue(&mut g, ticket);
                    return Ok(LocalPin { region: Region::new(addr, len), bk });
                }
                Ok(_) => {}
                Err(e) => {
                    self.leave_local_queue(&mut g, ticket);
                    return Err(e);
                }
            }
            if ticket.is_none() {
                let t = self.next_id.fetch_add(1, Ordering::Relaxed);
                g.local_queue.push_back(t);
                ticket = Some(t);
                FirehoseStats::add(&self.stats.local_waits, 1);
            }
            if w.expired() {
                self.leave_local_queue(&mut g, ticket);
                return Err(self.timeout("local pinning budget (MAXVICTIM) to be released by other local pins"));
            }
            g = self.wait(g, &mut w);
        }
    }

    /// Pins only if every bucket is pinned already (a hit); never waits.
    pub fn try_local_pin(&self, addr: usize, len: usize) -> Option<LocalPin> {
        let bk = self.cfg.buckets(addr, len);
        let mut g = self.lock();
        let may_grow = g.local_queue.is_empty();
        match g.local.acquire(bk, false, may_grow, &*self.pinner, &self.stats) {
            Ok(LocalAcquire::Done { .. }) => {
                FirehoseStats::add(&self.stats.local_hits, 1);
                Some(LocalPin { region: Region::new(addr, len), bk })
            }
            _ => None,
        }
    }

    /// Takes the longest already pinned run of buckets inside the region; never waits.
    pub fn partial_local_pin(&self, addr: usize, len: usize) -> Option<LocalPin> {
        let whole = self.cfg.buckets(addr, len);
        let mut g = self.lock();
        let bk = g.local.longest_pinned_run(whole)?;
        let may_grow = g.local_queue.is_empty();
        match g.local.acquire(bk, false, may_grow, &*self.pinner, &self.stats) {
            Ok(LocalAcquire::Done { .. }) => {
                FirehoseStats::add(&self.stats.local_hits, 1);
                Some(LocalPin { region: bk.clip(Region::new(addr, len)), bk })
            }
            _ => None,
        }
    }

    pub fn release_local(&self, pin: LocalPin) -> Result<()> {
        let mut g = self.lock();
        g.local.release(pin.bk, &*self.pinner, &self.stats)?;
        self.changed(&mut g);
        Ok(())
    }

    // ---- remote pins -----------------------------------------------------------------------

    /// Pins `[addr, addr+len)` of `rank` for one-sided access and returns when it is pinned:
    /// at once on a hit; after the move's round trip on a miss.
    pub fn remote_pin(&self, rank: Rank, addr: usize, len: usize) -> Result<RemotePin> {
        self.remote_pin_with_target_arg(rank, addr, len, None)
    }

    /// As `remote_pin`; a move (if one is needed) also runs the target's callback with `arg`.
    pub fn remote_pin_with_target_arg(&self, rank: Rank, addr: usize, len: usize, arg: Option<u64>) -> Result<RemotePin> {
        let (id, send, ready, g) = self.gather(rank, addr, len, arg)?;
        drop(g);
        if let Some(pin) = ready {
            return Ok(pin);
        }
        if let Some(m) = send {
            self.send(rank, m);
        }
        let mut w = self.waiting();
        let mut g = self.lock();
        loop {
            let wt = g.waiters.get_mut(&id).expect("own waiter");
            if let Outcome::Sync(Some(_)) = &wt.outcome {
                let wt = g.waiters.remove(&id).unwrap();
                let Outcome::Sync(Some(result)) = wt.outcome else { unreachable!() };
                return result.map(|()| wt.pin);
            }
            if w.expired() {
                wt.outcome = Outcome::Abandoned;
                return Err(self.timeout(&format!("the reply to a firehose move from rank {rank}")));
            }
            g = self.wait(g, &mut w);
        }
    }

    /// Split-phase remote pin: `done` runs once the region is pinned (inline, before this
    /// returns, on a hit; else from whichever thread delivers the last reply). Gathering the
    /// firehoses may still wait for other requests to release some (f is a hard bound). On
    /// `Err` (bad arguments, timeout while gathering) `done` is not called.
    pub fn remote_pin_async(
        &self,
        rank: Rank,
        addr: usize,
        len: usize,
        target_arg: Option<u64>,
        done: impl FnOnce(Result<RemotePin>) + Send + 'static,
    ) -> Result<()> {
        let (id, send, ready, mut g) = self.gather(rank, addr, len, target_arg)?;
        if let Some(pin) = ready {
            drop(g);
            done(Ok(pin));
            return Ok(());
        }
        // Still under the lock that committed the request: no reply can have finished it.
        g.waiters.get_mut(&id).expect("own waiter").outcome = Outcome::Callback(Box::new(done) as DoneCallback);
        drop(g);
        if let Some(m) = send {
            self.send(rank, m);
        }
        Ok(())
    }

    /// Pins only if every bucket already has a committed firehose (a hit, no message).
    pub fn try_remote_pin(&self, rank: Rank, addr: usize, len: usize) -> Option<RemotePin> {
        self.check_remote(rank, 0).ok()?;
        let bk = self.cfg.buckets(addr, len);
        let mut g = self.lock();
        let rt = &mut g.remote[rank];
        if !rt.take_refs_if_committed(bk) {
            return None;
        }
        FirehoseStats::add(&self.stats.remote_hits, 1);
        Some(RemotePin { rank, region: Region::new(addr, len), bk, target_callback_ran: false })
    }

    /// Takes the longest run of committed firehoses inside the region; never sends anything.
    pub fn partial_remote_pin(&self, rank: Rank, addr: usize, len: usize) -> Option<RemotePin> {
        self.check_remote(rank, 0).ok()?;
        let whole = self.cfg.buckets(addr, len);
        let mut g = self.lock();
        let rt = &mut g.remote[rank];
        let bk = rt.longest_committed_run(whole)?;
        bk.iter().for_each(|b| rt.take_ref(b));
        FirehoseStats::add(&self.stats.remote_hits, 1);
        Some(RemotePin { rank, region: bk.clip(Region::new(addr, len)), bk, target_callback_ran: false })
    }

    pub fn release_remote(&self, pin: RemotePin) -> Result<()> {
        let mut g = self.lock();
        g.remote[pin.rank].release(pin.bk)?;
        self.changed(&mut g);
        Ok(())
    }

    // ---- active-message handlers -----------------------------------------------------------

    /// Target side of a move (the AM request handler): unpin what `origin` releases, pin what
    /// it asks for, run the target callback if asked. Never blocks beyond the table lock and
    /// the pin calls. Send the reply back to `origin`, whose handler calls `move_done`.
    pub fn serve_move(&self, origin: Rank, req: MoveRequest) -> MoveReply {
        let result = if req.bucket_bytes != self.cfg.bucket_bytes {
            Err(Error::InvalidArgument(format!(
                "firehose: rank {origin} uses {}-byte buckets, rank {} uses {}: every rank needs the same bucket size",
                req.bucket_bytes, self.cfg.rank, self.cfg.bucket_bytes
            )))
        } else {
            let mut g = self.lock();
            let mut first_err = None;
            for &b in &req.release {
                if let Err(e) = g.local.serve_release(origin, b) {
                    first_err.get_or_insert(e);
                }
            }
            // Released buckets beyond MAXVICTIM are unpinned now, in runs, before any pin.
            g.local.trim_victims(&*self.pinner, &self.stats);
            let r = match first_err {
                Some(e) => Err(e),
                None => g.local.serve_pin(origin, &req.pin, &*self.pinner, &self.stats),
            };
            FirehoseStats::add(&self.stats.moves_served, 1);
            self.changed(&mut g);
            r
        };
        let mut ran = false;
        if let (Ok(()), Some(arg), Some(cb)) = (&result, req.target_arg, &self.target_callback) {
            cb(origin, &req.pin, arg);
            ran = true;
        }
        MoveReply { move_id: req.move_id, result, target_callback_ran: ran }
    }

    /// Origin side of a move's reply (the AM reply handler).
    pub fn move_done(&self, target: Rank, reply: MoveReply) {
        let _ = target; // the move id identifies the move; the rank is for the AM layer's symmetry
        self.complete(reply, None);
    }

    // ---- invalidation ----------------------------------------------------------------------

    /// This rank's memory `[addr, addr+len)` is being freed or unexposed: unpin it, so no pin
    /// of it is reused. Call it before the memory is unmapped. Other ranks must drop their
    /// firehoses on it with `invalidate_remote` (the runtime tells them). Returns the buckets
    /// affected.
    pub fn invalidate_local(&self, addr: usize, len: usize) -> usize {
        let mut g = self.lock();
        let n = g.local.invalidate(Region::new(addr, len), &*self.pinner, &self.stats);
        FirehoseStats::add(&self.stats.invalidated_buckets, n as u64);
        self.changed(&mut g);
        n
    }

    /// `rank`'s memory `[addr, addr+len)` went away: none of our firehoses on it is a hit
    /// again; the next request for it moves a firehose afresh (the target pins it anew).
    pub fn invalidate_remote(&self, rank: Rank, addr: usize, len: usize) -> usize {
        let mut g = self.lock();
        let n = g.remote.get_mut(rank).map_or(0, |rt| rt.invalidate(Region::new(addr, len)));
        FirehoseStats::add(&self.stats.invalidated_buckets, n as u64);
        self.changed(&mut g);
        n
    }

    /// Recounts all tables and checks the bounds (M + MAXVICTIM pinned, f per rank); for tests
    /// and debugging.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let g = self.lock();
        g.local.check()?;
        for rt in g.remote.iter().filter(|rt| rt.rank != self.cfg.rank) {
            rt.check(self.cfg.firehoses_per_rank)?;
        }
        Ok(())
    }

    // ---- internals -------------------------------------------------------------------------

    #[cfg(test)]
    pub(crate) fn lock_for_tests(&self) -> MutexGuard<'_, Tables> {
        self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        // A panic under the lock (a bug) poisons it; the tables are still the best we have.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tables changed in a way a waiter may care about: wake sleepers, if any.
    fn changed(&self, g: &mut Tables) {
        g.epoch += 1;
        if g.sleepers > 0 {
            self.cv.notify_all();
        }
    }

    fn waiting(&self) -> Waiting {
        Waiting { deadline: self.cfg.wait_timeout.map(|d| Instant::now() + d), rounds: 0 }
    }

    fn timeout(&self, what: &str) -> Error {
        Error::Timeout { what: what.to_string(), secs: self.cfg.wait_timeout.map_or(0.0, |d| d.as_secs_f64()) }
    }

    /// One round of waiting, outside the lock: poll the network (replies, releases), and if
    /// that changed nothing for a while, sleep until the tables change (or a short nap ends,
    /// since a reply may arrive that only our own polling would deliver).
    fn wait<'a>(&'a self, g: MutexGuard<'a, Tables>, w: &mut Waiting) -> MutexGuard<'a, Tables> {
        let epoch = g.epoch;
        drop(g);
        self.transport.poll();
        let mut g = self.lock();
        if g.epoch != epoch {
            w.rounds = 0;
            return g;
        }
        w.rounds += 1;
        if w.rounds < POLL_ROUNDS {
            drop(g);
            std::thread::yield_now();
            return self.lock();
        }
        g.sleepers += 1;
        let (mut g, _) = self.cv.wait_timeout(g, NAP).unwrap_or_else(|p| p.into_inner());
        g.sleepers -= 1;
        g
    }

    fn check_remote(&self, rank: Rank, buckets: usize) -> Result<()> {
        if rank >= self.cfg.nranks {
            return Err(Error::InvalidRank { rank, size: self.cfg.nranks });
        }
        if rank == self.cfg.rank {
            return Err(Error::InvalidArgument(format!("firehose: remote pin of rank {rank}'s own memory; use local_pin")));
        }
        if buckets > self.cfg.firehoses_per_rank {
            return Err(Error::SizeLimit(format!(
                "firehose: the region needs {buckets} firehoses but f = {} per rank: split the transfer into \
                 pieces of at most {} bytes, or raise M",
                self.cfg.firehoses_per_rank,
                self.cfg.firehoses_per_rank * self.cfg.bucket_bytes
            )));
        }
        Ok(())
    }

    /// Runs the SMP request protocol until the request commits; returns the request id, the
    /// move to send, the pin if nothing is in flight, and the lock (still held).
    #[allow(clippy::type_complexity)]
    fn gather(
        &self,
        rank: Rank,
        addr: usize,
        len: usize,
        target_arg: Option<u64>,
    ) -> Result<(u64, Option<MoveRequest>, Option<RemotePin>, MutexGuard<'_, Tables>)> {
        let bk = self.cfg.buckets(addr, len);
        self.check_remote(rank, bk.count)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut req = Request::new(id, rank, bk, Region::new(addr, len), target_arg);
        let mut w = self.waiting();
        let mut g = self.lock();
        loop {
            match smp::step(&mut g, &mut req, &self.cfg, &self.stats) {
                Step::Committed { send, ready } => {
                    self.changed(&mut g);
                    return Ok((id, send, ready, g));
                }
                Step::Poll | Step::WaitToken => {
                    if w.expired() {
                        smp::abort(&mut g, &mut req);
                        self.changed(&mut g);
                        return Err(self.timeout(&format!("firehoses to rank {rank} to be released")));
                    }
                    // Rollbacks and token changes made in `step` must wake others too.
                    if g.sleepers > 0 {
                        self.cv.notify_all();
                    }
                    g = self.wait(g, &mut w);
                }
            }
        }
    }

    fn send(&self, rank: Rank, m: MoveRequest) {
        // Kept in case the send fails: those firehoses then stay mapped at the target.
        let (move_id, release) = (m.move_id, m.release.clone());
        if let Err(e) = self.transport.send_move(rank, m) {
            self.complete(MoveReply { move_id, result: Err(e), target_callback_ran: false }, Some(release));
        }
    }

    fn complete(&self, reply: MoveReply, unsent: Option<Vec<usize>>) {
        let callbacks = {
            let mut g = self.lock();
            let cbs = smp::move_done(&mut g, reply, unsent);
            self.changed(&mut g);
            cbs
        };
        for (cb, result) in callbacks {
            cb(result);
        }
    }

    fn leave_local_queue(&self, g: &mut Tables, ticket: Option<u64>) {
        if let Some(t) = ticket {
            g.local_queue.retain(|&x| x != t);
            self.changed(g);
        }
    }
}

impl Waiting {
    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}
