//! Active messages for the runtime's own protocols (and for users and baselines): a handler
//! table, payloads of any length with transparent fragmentation, replies, and the progress
//! engine that runs handlers — from the application's calls, a polling thread, or a thread that
//! sleeps on a wake-up.

mod completion;
mod deferred;
mod frag;
mod parked;
mod progress_thread;

pub use completion::{Completion, Completions};
pub use progress_thread::{ProgressMode, ProgressThread};

use activerma_core::backoff::Backoff;
use activerma_core::clock::Deadline;
use activerma_core::counters::{bump, Counters};
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_transport::netmodel::NetModel;
use activerma_transport::{Conduit, PeerStatus};
use deferred::{Deferred, DeferredQueue};
use frag::{FragFlags, Reassembly};
use parked::{Parked, ParkedMsg};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub type HandlerId = u16;
/// Handler ids below this are the runtime's own; users register from here up.
pub const FIRST_USER_HANDLER: HandlerId = 64;
pub const MAX_HANDLERS: usize = 1024;
/// Progress hooks a rank can add (`add_poller`): the runtime's layers take a few.
pub const MAX_POLLERS: usize = 64;

/// What a handler gets besides the payload: who sent it, the sender's token, and a way to answer.
pub struct AmCtx<'a> {
    am: &'a Am,
    pub src: Rank,
    pub token: u64,
    /// Set by `retry_later` (Some(None): the same message; Some(Some(p)): with payload p).
    retry: RefCell<Option<Option<Vec<u8>>>>,
}

impl AmCtx<'_> {
    /// Sends a message back to the origin. Never blocks: if the queue is busy it is deferred and
    /// sent by the next progress call, so a handler cannot deadlock its own rank.
    pub fn reply(&self, handler: HandlerId, token: u64, payload: &[u8]) {
        self.am.send_or_defer(self.src, handler, token, payload);
    }
    /// Sends a message to any rank from inside a handler, never blocking (deferred like
    /// `reply` when the queue is busy): a handler that hands something on to a third rank (a
    /// lock passed to the next waiter) cannot deadlock its own rank either.
    pub fn forward(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) {
        self.am.send_or_defer(dst, handler, token, payload);
    }
    pub fn am(&self) -> &Am {
        self.am
    }

    /// The handler cannot finish now without waiting for this rank's own progress (a full
    /// access log): keep the message and run the handler on it again from a later progress
    /// step; later messages from the same source wait behind it. The handler must not have
    /// done any of its work yet (see parked.rs).
    pub fn retry_later(&self) {
        *self.retry.borrow_mut() = Some(None);
    }

    /// As `retry_later`, with `payload` in place of the message's own the next time: a
    /// handler that waits in steps keeps its state there (the active flush: its log marks).
    pub fn retry_later_with(&self, payload: Vec<u8>) {
        *self.retry.borrow_mut() = Some(Some(payload));
    }
}

pub type Handler = Arc<dyn Fn(&AmCtx, &[u8]) + Send + Sync>;

/// Extra work every progress step does after handling messages (the access layer's poll-mode
/// log handlers); returns how many items it handled.
pub type Poller = Arc<dyn Fn() -> usize + Send + Sync>;

pub struct Am {
    conduit: Arc<dyn Conduit>,
    net: Arc<NetModel>,
    counters: Arc<Counters>,
    /// Set once each, never removed: a message's dispatch reads its handler without a lock.
    handlers: Box<[OnceLock<Handler>]>,
    /// Serializes the fragments of one message per destination.
    send_locks: Vec<Mutex<()>>,
    deferred: DeferredQueue,
    reassembly: Mutex<Reassembly>,
    parked: Parked,
    /// Append-only (`add_poller` is rare, under `adding_poller`): the first `npollers` are
    /// set, and a progress step runs them without taking a lock.
    pollers: Box<[OnceLock<Poller>]>,
    npollers: AtomicUsize,
    adding_poller: Mutex<()>,
    timeout_s: f64,
    /// How handler threads woken by "interrupts" wait (the wake progress mode, wake-mode
    /// access logs): at most this long asleep, and one modelled interrupt per this many items.
    wake_interval_ns: u64,
    interrupt_every: u64,
    pub completions: Completions,
    /// Respawn jobs: requests to a rank that failed are refused (transport/liveness.rs).
    liveness: Option<Arc<activerma_transport::liveness::Liveness>>,
}

impl Am {
    pub fn new(conduit: Arc<dyn Conduit>, net: Arc<NetModel>, counters: Arc<Counters>, cfg: &Config) -> Result<Am> {
        let n = conduit.size();
        Ok(Am {
            net,
            counters,
            handlers: (0..MAX_HANDLERS).map(|_| OnceLock::new()).collect(),
            send_locks: (0..n).map(|_| Mutex::new(())).collect(),
            deferred: DeferredQueue::default(),
            reassembly: Mutex::new(Reassembly::new(n)),
            parked: Parked::new(n),
            pollers: (0..MAX_POLLERS).map(|_| OnceLock::new()).collect(),
            npollers: AtomicUsize::new(0),
            adding_poller: Mutex::new(()),
            timeout_s: cfg.get_f64(settings::TIMEOUT_S)?,
            wake_interval_ns: cfg.get_u64(settings::WAKE_INTERVAL_US)?.max(1) * 1000,
            interrupt_every: cfg.get_u64(settings::NET_INTERRUPT_EVERY)?,
            completions: Completions::new(4096),
            liveness: conduit.liveness(),
            conduit,
        })
    }

    pub fn conduit(&self) -> &Arc<dyn Conduit> {
        &self.conduit
    }

    /// Installs a handler; every rank must install the same ids before messages to them arrive.
    pub fn register(&self, id: HandlerId, h: Handler) -> Result<()> {
        let slot =
            self.handlers.get(id as usize).ok_or_else(|| Error::InvalidArgument(format!("handler id {id} is not below {MAX_HANDLERS}")))?;
        slot.set(h).map_err(|_| Error::InvalidArgument(format!("handler id {id} is already registered")))
    }

    fn check_rank(&self, dst: Rank) -> Result<()> {
        if dst >= self.conduit.size() {
            return Err(Error::InvalidRank { rank: dst, size: self.conduit.size() });
        }
        if let Some(l) = &self.liveness {
            l.check(dst)?;
        }
        Ok(())
    }

    /// Sends a message of any length; blocks (making progress) while the destination queue is
    /// full. Delivery from one origin to one target is in order.
    pub fn send(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        self.send_arriving(dst, handler, token, payload).map(drop)
    }

    /// `send`, then waits until the message has arrived at `dst` as the modelled network
    /// carries it (its last fragment's delivery time), as a blocking put waits for its remote
    /// completion; without the model it is in `dst`'s queue already when `send` returns (on
    /// one host; between hosts MPI holds it). For a sender whose next step relies on the
    /// message being at the target, such as a logged record (`activerma-recovery`).
    pub fn send_arrived(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        let at = self.send_arriving(dst, handler, token, payload)?;
        activerma_core::clock::spin_until(at);
        Ok(())
    }

    /// `send`, returning the modelled delivery time of the last fragment (0: no model).
    fn send_arriving(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) -> Result<u64> {
        self.check_rank(dst)?;
        if payload.len() > u32::MAX as usize {
            return Err(Error::SizeLimit(format!("an active message carries at most 4 GiB; got {} bytes (split it)", payload.len())));
        }
        let guard = self.send_locks[dst].lock().unwrap();
        self.flush_deferred_locked(dst)?;
        let r = self.send_fragments(dst, handler, token, payload, true, false);
        drop(guard);
        Ok(r?.expect("a blocking send sends"))
    }

    /// Sends without ever blocking: now if the destination's queue is free and has room,
    /// otherwise by a later progress step (still in order with this rank's other messages to
    /// `dst`). For progress hooks, which must not block; handlers have `AmCtx::forward`.
    pub fn post(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        self.check_rank(dst)?;
        self.send_or_defer(dst, handler, token, payload);
        Ok(())
    }

    /// Sends now if the queue is free and has room, otherwise queues for the next progress call.
    fn send_or_defer(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8]) {
        if let Ok(_g) = self.send_locks[dst].try_lock() {
            let nothing_waiting = !self.deferred.has_for(dst);
            if nothing_waiting && payload.len() <= self.conduit.am_fragment_capacity(dst) {
                if let Ok(Some(_)) = self.send_fragments(dst, handler, token, payload, false, true) {
                    return;
                }
            }
        }
        self.deferred.push(Deferred { dst, handler, token, payload: payload.to_vec() });
    }

    /// With the destination's send lock held: pushes every fragment, waiting for room when
    /// `block`, and returns the last one's modelled delivery time (0: no model); without
    /// `block`, returns `Ok(None)` if the first fragment does not fit. A `reply`
    /// goes to whoever asked, even a replacement rank still restoring (respawn jobs): while
    /// it waits for room it only gives up if the process is gone.
    fn send_fragments(&self, dst: Rank, handler: HandlerId, token: u64, payload: &[u8], block: bool, reply: bool) -> Result<Option<u64>> {
        let cap = self.conduit.am_fragment_capacity(dst);
        let total = payload.len();
        let mut off = 0;
        let mut deadline: Option<Deadline> = None;
        let mut backoff = Backoff::new();
        // The modelled network's delivery time of the fragment being sent, booked on the link
        // once: booking on every attempt against a full queue would push the link's free time
        // (and every later delivery) further out with each retry.
        let mut booked: Option<u64> = None;
        loop {
            let end = (off + cap).min(total);
            let flags = FragFlags { first: off == 0, last: end == total };
            let header = frag::encode(handler, flags, total as u32, token);
            let at = *booked.get_or_insert_with(|| self.net.completion_time(end - off + 64));
            if self.conduit.am_try_send(dst, header, &payload[off..end], at)? {
                booked = None;
                bump(&self.counters.am_fragments, 1);
                if flags.last {
                    bump(&self.counters.am_sent, 1);
                    return Ok(Some(at));
                }
                off = end;
                continue;
            }
            if !block && off == 0 {
                return Ok(None);
            }
            // Full queue: back-pressure. Drain our own inbox so the peer can drain its one.
            self.poll_inbox();
            if backoff.snooze() {
                if reply {
                    self.check_process(dst)?;
                } else {
                    self.check_peer(dst)?;
                }
                let d = deadline.get_or_insert_with(|| Deadline::after_secs(self.timeout_s));
                if d.expired() {
                    return Err(Error::Timeout { what: format!("room in the active-message queue to rank {dst}"), secs: d.secs() });
                }
            }
        }
    }

    fn flush_deferred_locked(&self, dst: Rank) -> Result<()> {
        while let Some(next) = self.deferred.take_for(dst) {
            self.send_fragments(next.dst, next.handler, next.token, &next.payload, true, true)?;
        }
        Ok(())
    }

    fn flush_deferred(&self) {
        for dst in self.deferred.destinations() {
            if let Ok(_g) = self.send_locks[dst].try_lock() {
                if let Err(e) = self.flush_deferred_locked(dst) {
                    eprintln!("activerma: rank {}: dropping replies to rank {dst}: {e}", self.conduit.rank());
                    self.deferred.drop_for(dst);
                }
            }
        }
    }

    /// Runs arrived handlers; returns how many messages were handled.
    pub fn poll_inbox(&self) -> usize {
        let mut done = 0;
        self.conduit.am_poll(64, &mut |src, header, payload| {
            let (handler, flags, total, token) = frag::decode(header);
            let mut run = |bytes: &[u8]| {
                done += 1;
                bump(&self.counters.am_received, 1);
                self.net.charge_receive(1);
                let retry = if self.parked.holds(src) { Some(None) } else { self.dispatch(src, handler, token, bytes) };
                if let Some(replaced) = retry {
                    self.parked.push(src, ParkedMsg { handler, token, payload: replaced.unwrap_or_else(|| bytes.to_vec()) });
                }
            };
            if flags.first && flags.last {
                run(payload); // zero-copy: the handler reads the slot in place
            } else {
                // Release the reassembly lock before the handler runs.
                let whole = self.reassembly.lock().unwrap().add(src, flags, total, payload);
                if let Some(whole) = whole {
                    run(&whole);
                }
            }
        });
        done
    }

    /// Runs `handler` on a message; Some if the handler asked to be retried later (with a
    /// replacement payload, or None for the same one).
    fn dispatch(&self, src: Rank, handler: HandlerId, token: u64, bytes: &[u8]) -> Option<Option<Vec<u8>>> {
        match self.handlers[handler as usize].get() {
            Some(h) => {
                let ctx = AmCtx { am: self, src, token, retry: RefCell::new(None) };
                h(&ctx, bytes);
                ctx.retry.into_inner()
            }
            None => {
                eprintln!("activerma: rank {}: message for unregistered handler {handler} from rank {src} dropped", self.conduit.rank());
                None
            }
        }
    }

    /// One step of progress: handlers, then deferred replies, then parked messages, then the
    /// pollers.
    pub fn progress(&self) -> usize {
        let n = self.poll_inbox();
        if !self.deferred.is_empty() {
            self.flush_deferred();
        }
        let retried = self.parked.retry(|src, m| self.dispatch(src, m.handler, m.token, &m.payload));
        n + retried + self.run_pollers()
    }

    /// Adds work to every progress step (a blocking call anywhere then runs it too, so a
    /// program that only makes blocking calls never starves it).
    pub fn add_poller(&self, p: Poller) -> Result<()> {
        let _adding = self.adding_poller.lock().unwrap();
        let n = self.npollers.load(Ordering::Relaxed);
        let slot = self.pollers.get(n).ok_or_else(|| Error::SizeLimit(format!("a rank runs at most {MAX_POLLERS} progress hooks")))?;
        let _ = slot.set(p);
        self.npollers.store(n + 1, Ordering::Release);
        Ok(())
    }

    pub fn run_pollers(&self) -> usize {
        // No lock is held while they run: a poller may itself wait and make progress.
        let n = self.npollers.load(Ordering::Acquire);
        self.pollers[..n].iter().filter_map(|p| p.get()).map(|p| p()).sum()
    }

    /// Errors if `rank` is gone, or (respawn jobs) failed since this process last agreed to
    /// its incarnation.
    pub fn check_peer(&self, rank: Rank) -> Result<()> {
        if let Some(l) = &self.liveness {
            l.check(rank)?;
        }
        self.check_process(rank)
    }

    /// Errors if `rank`'s process is gone.
    fn check_process(&self, rank: Rank) -> Result<()> {
        match self.conduit.peer_status(rank) {
            PeerStatus::Gone(how) => Err(Error::PeerGone { rank, how }),
            _ => Ok(()),
        }
    }

    /// Waits for a reply to arrive in `c`, making progress, watching `target` for death.
    pub fn wait_completion(&self, c: &Completion, target: Rank, what: &str) -> Result<()> {
        self.wait_until(|| c.is_done(), target, what)
    }

    /// Waits until `done()`, making progress, watching `target` for death and the time limit.
    pub fn wait_until(&self, mut done: impl FnMut() -> bool, target: Rank, what: &str) -> Result<()> {
        let mut w = Waiter::default();
        while !done() {
            w.step(self, target, what)?;
        }
        Ok(())
    }

    /// The network model the job runs under.
    pub fn net(&self) -> &NetModel {
        &self.net
    }

    /// The longest a woken handler thread sleeps before it looks anyway (ACTIVERMA_WAKE_INTERVAL_US).
    pub fn wake_interval_ns(&self) -> u64 {
        self.wake_interval_ns
    }

    /// Items per modelled interrupt of the wake progress mode (ACTIVERMA_NET_INTERRUPT_EVERY).
    pub fn interrupt_every(&self) -> u64 {
        self.interrupt_every
    }

    pub fn timeout_s(&self) -> f64 {
        self.timeout_s
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// One waiting loop's state: make progress, back off, and give up when `target` died or the
/// time limit passed. For loops whose condition lives elsewhere (a full log, a flush).
#[derive(Default)]
pub struct Waiter {
    backoff: Backoff,
    deadline: Option<Deadline>,
}

impl Waiter {
    pub fn step(&mut self, am: &Am, target: Rank, what: &str) -> Result<()> {
        am.progress();
        self.pause(am, target, what)
    }

    /// A step for a loop inside a message handler: runs the pollers only (handlers do not
    /// poll messages again from inside a handler).
    pub fn step_in_handler(&mut self, am: &Am, target: Rank, what: &str) -> Result<()> {
        am.run_pollers();
        self.pause(am, target, what)
    }

    fn pause(&mut self, am: &Am, target: Rank, what: &str) -> Result<()> {
        if self.backoff.snooze() {
            am.check_peer(target)?;
            let d = self.deadline.get_or_insert_with(|| Deadline::after_secs(am.timeout_s));
            if d.expired() {
                return Err(Error::Timeout { what: format!("{what} (rank {target})"), secs: d.secs() });
            }
        }
        Ok(())
    }
}
