//! Notification of a log's handler: who runs it, and when (see the crate doc).

use crate::Access;
use activerma_core::backoff::IdlePoll;
use activerma_core::interrupt_model::ModelledInterrupt;
use activerma_core::{clock, futex, settings, Config, Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// The application's `progress()` and blocking calls run the handler.
    Poll,
    /// A thread sleeps until the log holds `threshold` entries (woken by the origin that
    /// appends the threshold-th) or `WAKE_INTERVAL_US` passed.
    Wake { threshold: u64 },
    /// A dedicated thread spins on the log.
    Thread,
    /// Nobody: the entries stay in the log until the program runs its handler over them
    /// (`World::drain_log`) — the paper's log as a store (section 4.4: the IOMMU leaves what a
    /// get read in memory until a recovery fetches it). A full log holds origins back until
    /// then, so it must be sized for what arrives between drains.
    Hold,
}

impl Notify {
    /// The mode ACTIVERMA_AA_NOTIFY names (with ACTIVERMA_AA_WAKE_THRESHOLD).
    pub fn from_config(cfg: &Config) -> Result<Notify> {
        Ok(match cfg.get_enum(settings::AA_NOTIFY)? {
            "wake" => Notify::Wake { threshold: cfg.get_u64(settings::AA_WAKE_THRESHOLD)?.max(1) },
            "thread" => Notify::Thread,
            _ => Notify::Poll,
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Notify::Poll => "poll",
            Notify::Wake { .. } => "wake",
            Notify::Thread => "thread",
            Notify::Hold => "hold",
        }
    }

    pub(crate) fn threshold(&self) -> u64 {
        match self {
            Notify::Wake { threshold } => (*threshold).max(1),
            _ => 1,
        }
    }
}

/// The thread of a Wake or Thread log; stopped (after a last drain) on drop.
pub(crate) struct LogThread {
    handle: Option<JoinHandle<()>>,
    /// This thread's own stop (set_notify replaces one log's thread while the rank runs on).
    stop: Arc<AtomicBool>,
    access: Arc<Access>,
    pub(crate) slot: usize,
}

impl LogThread {
    pub fn start(access: Arc<Access>, slot: usize, notify: Notify) -> Result<LogThread> {
        let interval_ns = access.wake_interval_ns;
        let a = access.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name(format!("activerma-log-{slot}"))
            .spawn(move || {
                let stopped = || s.load(Ordering::Acquire) || a.stopped();
                match notify {
                    Notify::Wake { threshold } => sleep_loop(&a, slot, threshold, interval_ns, &stopped),
                    _ => spin_loop(&a, slot, &stopped),
                }
            })
            .map_err(|e| Error::Os { call: "spawn an access-log thread", errno_text: e.to_string() })?;
        Ok(LogThread { handle: Some(handle), stop, access, slot })
    }
}

impl Drop for LogThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let s = self.access.arena().slot(self.slot);
        s.wake_word.fetch_add(1, Ordering::SeqCst);
        futex::wake_all(&s.wake_word);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.access.drain(self.slot);
    }
}

fn spin_loop(a: &Access, slot: usize, stopped: &dyn Fn() -> bool) {
    let mut poll = IdlePoll::default();
    while !stopped() {
        if a.drain(slot) > 0 {
            poll.busy();
        } else {
            poll.idle();
        }
    }
}

fn sleep_loop(a: &Access, slot: usize, threshold: u64, interval_ns: u64, stopped: &dyn Fn() -> bool) {
    if let Some(interrupt) = ModelledInterrupt::new(a.interrupt_ns, threshold) {
        return modelled_interrupt_loop(a, slot, threshold, interval_ns, interrupt, stopped);
    }
    let s = a.arena().slot(slot);
    while !stopped() {
        a.drain(slot);
        let seen = s.wake_word.load(Ordering::SeqCst);
        s.sleeping.store(1, Ordering::SeqCst);
        // Re-check after announcing the sleep: an origin that appended before it saw no sleeper.
        if a.pending(slot, threshold) < threshold && !s.take_origin_blocked() && !stopped() {
            futex::wait(&s.wake_word, seen, interval_ns);
        }
        s.sleeping.store(0, Ordering::SeqCst);
    }
}

/// Wake mode under the modelled interrupt (activerma_core::interrupt_model): the thread polls
/// for `threshold` entries (or an origin blocked on the full log, or any entry once
/// `interval_ns` passed), drains, and takes one interrupt per `threshold` entries handled.
fn modelled_interrupt_loop(
    a: &Access,
    slot: usize,
    threshold: u64,
    interval_ns: u64,
    mut interrupt: ModelledInterrupt,
    stopped: &dyn Fn() -> bool,
) {
    let s = a.arena().slot(slot);
    let mut poll = IdlePoll::default();
    let mut idle_since = clock::now_ns();
    while !stopped() {
        let pending = a.pending(slot, threshold);
        if pending >= threshold || s.take_origin_blocked() || (pending > 0 && clock::now_ns() >= idle_since + interval_ns) {
            interrupt.handled(a.drain(slot) as u64);
            poll.busy();
            idle_since = clock::now_ns();
        } else {
            poll.idle();
        }
    }
}
