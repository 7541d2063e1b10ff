//! Active Access (Besta & Hoefler, ICS'15), in one place: the access log (`log_ring`: entries
//! in shared memory, many producers, one consumer), the access-log table of a rank's logs and
//! domains (`log_table`), what an access does with a marked page's bits (`log_append`: write,
//! log, with or without data), an origin's view of a target's logs (`ActiveTable`), and the
//! programming model: a target associates pages with actions and a domain (`assoc_pages`),
//! creates an access log per domain with a handler, and chooses how the handler is notified.
//! The protocol layer above (`proto`: put_active, get_active, remote_marks) calls into this one
//! when its put or get meets a marked page.
//!
//! Notification modes (the paper's section 3.5), per log:
//! - `Poll`: the application's `progress()` (and every blocking call) drains the log;
//! - `Wake`: a thread sleeps on the log's futex word and is woken by the origin that brings the
//!   log to `threshold` entries, or after `WAKE_INTERVAL_US` at the latest (the "interrupt");
//! - `Thread`: a dedicated thread spins on the log (the scratchpad / onload core).

mod actions;
mod active_table;
pub mod log_append;
pub mod log_ring;
pub mod log_table;
mod notify;

pub use actions::Actions;
pub use active_table::ActiveTable;
pub use log_append::Logged;
pub use log_ring::{Entry as LogEntry, EntryMeta, LogOp, LogRing};
pub use log_table::{LogArena, LogSlot, LogTable, FAULT_SLOT, MAX_DOMAINS, MAX_LOGS};
pub use notify::Notify;

use activerma_am::Am;
use activerma_core::counters::{bump, Counters};
use activerma_core::{Error, Result};
use activerma_mem::{Entry, TargetTable};
use notify::LogThread;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Runs for every log entry; entries of one log never run concurrently. One origin's entries
/// run in the order it made its accesses; different origins' interleave (a lane each).
pub type LogHandler = Arc<dyn Fn(&LogEntry) + Send + Sync>;

/// A log with a handler: its ring (a view made once: the ring lives until the job ends) and
/// the handler. Set once per slot, read by every poll without a lock.
struct Log {
    ring: LogRing,
    handler: LogHandler,
}

/// The Active Access state of one rank.
pub struct Access {
    /// The rank's access-log table (it makes the arena on first need and creates logs).
    table: LogTable,
    logs: Box<[std::sync::OnceLock<Log>]>,
    /// Slots handled by `poll` (mode Poll), as a bit mask (shared with the progress hook).
    polled: Arc<AtomicU64>,
    threads: Mutex<Vec<LogThread>>,
    counters: Arc<Counters>,
    stopped: AtomicBool,
    /// How wake-mode threads wait (the job's ACTIVERMA_WAKE_INTERVAL_US) and what an interrupt
    /// costs under the modelled network (0: off), from `am` at start.
    wake_interval_ns: u64,
    interrupt_ns: u64,
}

impl Access {
    /// Takes over the rank's access-log table (`LogTable::new`, publishing into its
    /// translation table) and hooks `poll` into every progress step of `am`.
    pub fn new(table: LogTable, am: &Am, counters: Arc<Counters>) -> Result<Arc<Access>> {
        let polled = Arc::new(AtomicU64::new(0));
        let a = Arc::new(Access {
            table,
            logs: (0..MAX_LOGS).map(|_| std::sync::OnceLock::new()).collect(),
            polled: polled.clone(),
            threads: Mutex::new(Vec::new()),
            counters,
            stopped: AtomicBool::new(false),
            wake_interval_ns: am.wake_interval_ns(),
            interrupt_ns: am.net().interrupt_ns,
        });
        // The hook holds the mask too, so that a step with no poll-mode log costs one load
        // (upgrading the weak reference is two locked instructions).
        let weak = Arc::downgrade(&a);
        am.add_poller(Arc::new(move || if polled.load(Ordering::Acquire) == 0 { 0 } else { weak.upgrade().map_or(0, |a| a.poll()) }))?;
        Ok(a)
    }

    /// Creates the access log of `domain` (`capacity` bytes, a power of two) whose entries run
    /// through `handler`, notified as `notify` says. From now on pages marked with this domain
    /// and E=1 log here.
    pub fn create_log(self: &Arc<Self>, domain: u16, capacity: usize, notify: Notify, handler: LogHandler) -> Result<()> {
        let slot = self.table.create(domain, capacity, notify.threshold())?;
        self.install(slot, notify, handler)
    }

    /// Sets the handler of the default fault log (pages marked with no domain: E=0).
    pub fn set_fault_handler(self: &Arc<Self>, notify: Notify, handler: LogHandler) -> Result<()> {
        if self.logs[FAULT_SLOT].get().is_some() {
            return Err(Error::InvalidArgument("the fault log has a handler already".into()));
        }
        self.table.ensure()?;
        self.install(FAULT_SLOT, notify, handler)
    }

    /// `assoc_pages`: sets the Active Access bits and domain of every page of `[addr, addr+len)`
    /// (our segment memory or exposed private memory), making the log arena first if the bits
    /// log (E = 0 pages log to its fault log). Safe while accesses are in flight: each access
    /// reads a page's entry once, so it sees the old bits or the new ones for that page; an
    /// access that read the old bits may still complete after this returns (use
    /// `active_flush` or a barrier to order). Returns the number of pages changed.
    pub fn assoc_pages(&self, table: &TargetTable, addr: usize, len: usize, actions: Actions, domain: Option<u16>) -> Result<usize> {
        if actions.bits() & (Entry::WL | Entry::WLD | Entry::RL | Entry::RLD) != 0 {
            self.table.ensure()?;
        }
        mark_pages(table, addr, len, actions, domain)
    }

    fn install(self: &Arc<Self>, slot: usize, notify: Notify, handler: LogHandler) -> Result<()> {
        let ring = self.table.arena().and_then(|a| a.ring(slot));
        let ring = ring.ok_or_else(|| Error::InvalidArgument(format!("access log {slot} is not set up")))?;
        if self.logs[slot].set(Log { ring, handler }).is_err() {
            return Err(Error::InvalidArgument(format!("access log {slot} has a handler already")));
        }
        self.start_notify(slot, notify)
    }

    /// Changes how the handler of `domain`'s log is notified (None: the fault log). The old
    /// thread, if any, drains the log and stops before the new mode starts; entries appended
    /// meanwhile wait in the log (nothing is lost, and handlers of one log never overlap).
    pub fn set_notify(self: &Arc<Self>, me: activerma_core::Rank, domain: Option<u16>, notify: Notify) -> Result<()> {
        let slot = self.slot_of(domain, me)?;
        if self.logs[slot].get().is_none() {
            return Err(Error::InvalidArgument("set_notify on a log without a handler".into()));
        }
        self.polled.fetch_and(!(1 << slot), Ordering::AcqRel);
        let mine: Vec<LogThread> = {
            let mut threads = self.threads.lock().unwrap();
            let (mine, others) = std::mem::take(&mut *threads).into_iter().partition(|t| t.slot == slot);
            *threads = others;
            mine
        };
        drop(mine);
        self.start_notify(slot, notify)
    }

    fn start_notify(self: &Arc<Self>, slot: usize, notify: Notify) -> Result<()> {
        self.arena().slot(slot).set_notification(notify.threshold(), notify == Notify::Thread, matches!(notify, Notify::Wake { .. }));
        match notify {
            Notify::Poll => {
                self.polled.fetch_or(1 << slot, Ordering::AcqRel);
            }
            Notify::Wake { .. } | Notify::Thread => {
                let t = LogThread::start(self.clone(), slot, notify)?;
                self.threads.lock().unwrap().push(t);
            }
            Notify::Hold => {}
        }
        Ok(())
    }

    /// Runs `domain`'s log handler over everything the log holds now (any notification mode;
    /// a Hold log is drained only so); returns how many entries ran.
    pub fn drain_log(&self, me: activerma_core::Rank, domain: u16) -> Result<usize> {
        let slot = self.slot_of(Some(domain), me)?;
        if self.logs[slot].get().is_none() {
            return Err(Error::InvalidArgument(format!("drain_log: domain {domain} has no log")));
        }
        let mut n = 0;
        loop {
            let k = self.drain(slot);
            n += k;
            if k == 0 && !self.logs[slot].get().is_some_and(|l| l.ring.has_entry()) {
                return Ok(n);
            }
            if k == 0 {
                std::thread::yield_now(); // another thread is handling an entry
            }
        }
    }

    /// Runs the handlers of the poll-mode logs over everything they hold; returns how many
    /// entries ran. Called by every progress step.
    pub fn poll(&self) -> usize {
        let mut mask = self.polled.load(Ordering::Acquire);
        let mut n = 0;
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            n += self.drain(slot);
        }
        n
    }

    /// `poll` until every poll-mode log is empty: an entry another thread is handling (a
    /// progress thread's poll) counts until its handler has returned.
    pub fn drain_polled(&self) -> usize {
        let mut n = 0;
        loop {
            n += self.poll();
            let mut mask = self.polled.load(Ordering::Acquire);
            let mut busy = false;
            while mask != 0 {
                let slot = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                busy |= self.logs[slot].get().is_some_and(|l| l.ring.has_entry());
            }
            if !busy {
                return n;
            }
            std::thread::yield_now();
        }
    }

    /// Runs the slot's handler over every complete entry at the head of its log. One consumer
    /// at a time: if another thread is draining it, returns 0.
    pub(crate) fn drain(&self, slot: usize) -> usize {
        let Some(log) = self.logs[slot].get() else { return 0 };
        // Polling an empty log must stay cheap: a look at each lane's tail, no lock.
        if !log.ring.has_entry() {
            return 0;
        }
        let n = log.ring.drain(|e| (log.handler)(e));
        if n > 0 {
            bump(&self.counters.log_entries_handled, n as u64);
        }
        n
    }

    /// Entries waiting in the slot's log, counted up to `limit`.
    pub(crate) fn pending(&self, slot: usize, limit: u64) -> u64 {
        self.table.arena().and_then(|a| a.ring(slot)).map_or(0, |r| r.pending_up_to(limit))
    }

    /// The slot `domain` logs to (None: the fault log); an error if it has no log.
    fn slot_of(&self, domain: Option<u16>, me: activerma_core::Rank) -> Result<usize> {
        match self.table.arena() {
            Some(a) => a.slot_of(domain, me),
            None => Err(Error::InvalidArgument(format!("rank {me} has no access logs yet (create_log or set_fault_handler first)"))),
        }
    }

    /// The arena; only for slots that have a log (which made it).
    pub(crate) fn arena(&self) -> &LogArena {
        self.table.arena().expect("a log exists, so its arena does")
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops the notification threads (after a last drain); the logs stay.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        drop(threads);
    }
}

/// The marks of every page of `[addr, addr+len)` of this rank's own memory (heap or exposed):
/// the actions it permits and logs, and its log's domain (None: E=0, the fault log).
pub fn page_marks(table: &TargetTable, addr: usize, len: usize) -> Result<Vec<(Actions, Option<u16>)>> {
    if len == 0 {
        return Err(Error::InvalidArgument("page_marks of 0 bytes".into()));
    }
    let marks = |e: u64| {
        let bits = e as u32;
        let actions = Actions::from_bits(bits & Actions::ALL.bits()).expect("masked to the action bits");
        (actions, (bits & Entry::E != 0).then(|| Entry::domain(e)))
    };
    Ok(table.entries(addr, len)?.into_iter().map(marks).collect())
}

/// The bits of `Access::assoc_pages`, written into the translation table.
fn mark_pages(table: &TargetTable, addr: usize, len: usize, actions: Actions, domain: Option<u16>) -> Result<usize> {
    if len == 0 {
        return Err(Error::InvalidArgument("assoc_pages of 0 bytes".into()));
    }
    let mut set = actions.bits();
    if let Some(d) = domain {
        if d as usize >= MAX_DOMAINS {
            return Err(Error::InvalidArgument(format!("domain {d} is out of range: domains are 0..{MAX_DOMAINS}")));
        }
        set |= Entry::E | (d as u32) << Entry::DOMAIN_SHIFT;
    }
    let clear = Actions::ALL.bits() | Entry::E | 0xffff << Entry::DOMAIN_SHIFT;
    table.update_bits(addr, len, set, clear & !set)
}
