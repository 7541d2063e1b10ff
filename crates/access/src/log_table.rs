//! The access-log table: where a rank's access logs live and which domain logs where (the
//! paper's access log table of (IUID, base, head, tail, size) tuples, and its default fault
//! log). It sits in the rank's log arena, a file of shared memory the rank makes when it first
//! needs a log and names in its translation table's header, so an origin on the same host maps
//! it, finds a log and appends to it without the target's CPU, as the IOMMU would.
//!
//! ```text
//! ArenaHeader      magic, bytes, domain -> slot map (u8 per domain, NONE = no log)
//! LogSlot[MAX_LOGS] state, domain, ring offset and size, wake-up word, sleeping flag, threshold
//! rings...          each a log_ring region; slot 0 is the default fault log (E = 0)
//! ```
//! Logs are created by their owner at any time and live until the job ends: an origin may hold
//! a view of a ring at any moment, and nothing tells it the ring went away.

use crate::log_ring::{lanes_for, ring_bytes, LogRing, MIN_CAPACITY};
use activerma_core::{futex, Error, Rank, Result};
use activerma_mem::LogArenaHome;
use activerma_transport::mapping::SharedFile;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// Domains a rank can use (the paper's 10-bit IUID).
pub const MAX_DOMAINS: usize = 1024;
/// Logs a rank can have, the fault log included.
pub const MAX_LOGS: usize = 64;
/// Slot of the default fault log: pages marked E = 0 log here.
pub const FAULT_SLOT: usize = 0;

const MAGIC: u64 = 0x6c6f_6774_6162_6c65; // "logtable"
const NONE: u8 = u8::MAX;
const FREE: u32 = 0;
const ACTIVE: u32 = 1;

#[repr(C)]
struct ArenaHeader {
    magic: AtomicU64,
    bytes: u64,
    domain_slot: [AtomicU8; MAX_DOMAINS],
}

/// One log of the table; what an origin needs to append and to wake the log's handler.
#[repr(C, align(64))]
pub struct LogSlot {
    state: AtomicU32,
    domain: AtomicU32,
    ring_off: AtomicU64,
    /// Bumped and futex-woken when a sleeping handler thread should look (the "interrupt").
    pub wake_word: AtomicU32,
    /// Set by a handler thread that is about to sleep on `wake_word`.
    pub sleeping: AtomicU32,
    /// Pending entries at which a sleeping handler thread is woken.
    pub threshold: AtomicU64,
    /// 1 when the log's handler thread may sleep (Notify::Wake): appends then pay a fence to
    /// see its `sleeping` flag right.
    may_sleep: AtomicU32,
    /// 1 when a dedicated thread spins on this log: the modelled IOMMU then writes its entries
    /// to the CPU's scratchpad (NET_SCRATCHPAD_NS) instead of memory (NET_LOG_NS).
    scratchpad: AtomicU32,
    /// Set by an origin that found the log full: its handler must run even below the
    /// threshold (a log smaller than `threshold` entries would otherwise wait for the interval).
    origin_blocked: AtomicU32,
}

impl LogSlot {
    /// How the log's handler is told: woken at `threshold` pending entries; `scratchpad` when a
    /// dedicated thread polls it.
    pub fn set_notification(&self, threshold: u64, scratchpad: bool, may_sleep: bool) {
        self.threshold.store(threshold.max(1), Ordering::Relaxed);
        self.may_sleep.store(may_sleep as u32, Ordering::SeqCst);
        self.scratchpad.store(scratchpad as u32, Ordering::Relaxed);
    }

    /// An origin found the log full and waits for room: wakes the log's thread if it sleeps.
    #[cold]
    pub fn origin_blocked(&self) {
        self.origin_blocked.store(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) != 0 {
            self.wake_word.fetch_add(1, Ordering::SeqCst);
            futex::wake_all(&self.wake_word);
        }
    }

    /// Whether an origin waited for room since the last call (and clears it).
    #[inline]
    pub fn take_origin_blocked(&self) -> bool {
        self.origin_blocked.load(Ordering::Relaxed) != 0 && self.origin_blocked.swap(0, Ordering::AcqRel) != 0
    }

    /// Whether the log lives in the modelled scratchpad (see `set_notification`).
    #[inline]
    pub fn in_scratchpad(&self) -> bool {
        self.scratchpad.load(Ordering::Relaxed) != 0
    }

    /// After an append: wakes the log's thread if it sleeps and the log reached its threshold.
    /// The thread and the append race like Dekker's pair: it announces its sleep, then counts
    /// the published entries; we publish, then look for the announcement. Each side needs a
    /// full fence between its store and its load, else both may miss the other (the thread
    /// would sleep until its interval). Only logs whose thread may sleep pay that fence.
    #[inline]
    pub fn notify(&self, ring: &LogRing) {
        if self.may_sleep.load(Ordering::Relaxed) == 0 {
            return;
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        let threshold = self.threshold.load(Ordering::Relaxed);
        if self.sleeping.load(Ordering::SeqCst) != 0 && ring.pending_up_to(threshold) >= threshold {
            self.wake_word.fetch_add(1, Ordering::SeqCst);
            futex::wake_all(&self.wake_word);
        }
    }
}

fn slots_off() -> usize {
    std::mem::size_of::<ArenaHeader>().next_multiple_of(64)
}

fn rings_off() -> usize {
    (slots_off() + MAX_LOGS * std::mem::size_of::<LogSlot>()).next_multiple_of(64)
}

/// Bytes the arena needs at least, for a fault log of `fault_capacity` bytes that `origins`
/// ranks append to.
pub fn arena_min_bytes(fault_capacity: usize, origins: usize) -> usize {
    rings_off() + ring_bytes(fault_capacity, lanes_for(fault_capacity, origins), origins)
}

/// A view of a rank's log arena (origin and owner alike).
#[derive(Clone, Copy)]
pub struct LogArena {
    base: *mut u8,
    bytes: usize,
}

// SAFETY: the arena holds atomics and log rings, which are built for concurrent use by many
// threads and processes; the view is only a pointer and a length.
unsafe impl Send for LogArena {}
unsafe impl Sync for LogArena {}

impl LogArena {
    /// Views an arena its owner formatted.
    ///
    /// # Safety
    /// `[base, base+bytes)` stays mapped while the view is used.
    pub unsafe fn attach(base: *mut u8, bytes: usize, rank: Rank) -> Result<LogArena> {
        if bytes < rings_off() {
            return Err(Error::InvalidArgument(format!("rank {rank} has no access-log arena")));
        }
        let a = LogArena { base, bytes };
        if a.header().magic.load(Ordering::Acquire) != MAGIC {
            return Err(Error::InvalidArgument(format!("rank {rank} has not initialized its access-log table")));
        }
        Ok(a)
    }

    fn header(&self) -> &ArenaHeader {
        // SAFETY: the arena is at least a header long (checked by attach / init).
        unsafe { &*(self.base as *const ArenaHeader) }
    }

    pub fn slot(&self, i: usize) -> &LogSlot {
        assert!(i < MAX_LOGS);
        // SAFETY: i < MAX_LOGS, inside the arena.
        unsafe { &*(self.base.add(slots_off()) as *const LogSlot).add(i) }
    }

    /// The ring of an active slot.
    pub fn ring(&self, i: usize) -> Option<LogRing> {
        let s = self.slot(i);
        if s.state.load(Ordering::Acquire) != ACTIVE {
            return None;
        }
        let off = s.ring_off.load(Ordering::Acquire) as usize;
        if off < rings_off() || off >= self.bytes {
            return None; // a corrupt slot: never read outside the arena
        }
        // SAFETY: the owner formatted a ring at `off`, inside the arena, before marking ACTIVE.
        unsafe { LogRing::attach(self.base.add(off)).ok() }
    }

    /// The slot a domain logs to (E = 1), or the fault log (E = 0: `domain` None).
    #[inline]
    pub fn slot_of(&self, domain: Option<u16>, rank: Rank) -> Result<usize> {
        let Some(d) = domain else { return Ok(FAULT_SLOT) };
        let s = self.header().domain_slot.get(d as usize).map(|s| s.load(Ordering::Acquire)).unwrap_or(NONE);
        if s == NONE {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} marked a page to log into domain {d}'s access log, but has no log for domain {d} (create_log first)"
            )));
        }
        Ok(s as usize)
    }

    /// Domain of an active slot (None for the fault log or a free slot).
    pub fn domain_of(&self, slot: usize) -> Option<u16> {
        let s = self.slot(slot);
        (slot != FAULT_SLOT && s.state.load(Ordering::Acquire) == ACTIVE).then(|| s.domain.load(Ordering::Relaxed) as u16)
    }
}

/// The owner's side: makes the arena when the rank first needs a log (a file of its own,
/// published in the translation table's header for origins of this host to map), and
/// creates logs in it. A rank that never logs reserves no room for logs: at 256 ranks the
/// arenas of a job made at start were 4 GiB of the job's shared memory (issue 19).
pub struct LogTable {
    /// Bytes an arena has (ACTIVERMA_LOG_ARENA), the fault log's and how many ranks append.
    bytes: usize,
    fault_capacity: usize,
    origins: usize,
    /// The arena once made; `making` serialises the making.
    made: OnceLock<Made>,
    making: Mutex<()>,
    publish: Publish,
}

/// Tells origins where the arena is.
type Publish = Box<dyn Fn(LogArenaHome) + Send + Sync>;

/// A made arena: its file, the view, the free byte ranges of its ring area (offset, length).
struct Made {
    file: SharedFile,
    arena: LogArena,
    free: Mutex<Vec<(usize, usize)>>,
}

impl LogTable {
    /// The log table of a rank of a job of `origins` ranks: an arena of `bytes` with a fault
    /// log of `fault_capacity` bytes, made on first need; `publish` tells origins where. The
    /// sizes are checked now, so that a bad setting fails at init.
    pub fn new(
        bytes: usize,
        fault_capacity: usize,
        origins: usize,
        publish: impl Fn(LogArenaHome) + Send + Sync + 'static,
    ) -> Result<LogTable> {
        if !fault_capacity.is_power_of_two() || fault_capacity < MIN_CAPACITY {
            return Err(Error::BadSetting {
                name: activerma_core::settings::FAULT_LOG_SIZE.into(),
                value: fault_capacity.to_string(),
                why: format!("a power of two of at least {MIN_CAPACITY} bytes"),
            });
        }
        if bytes < arena_min_bytes(fault_capacity, origins) {
            return Err(Error::BadSetting {
                name: activerma_core::settings::LOG_ARENA.into(),
                value: bytes.to_string(),
                why: format!("the access-log arena must hold at least the fault log: {} bytes", arena_min_bytes(fault_capacity, origins)),
            });
        }
        let bytes = activerma_core::page::page_ceil(bytes);
        Ok(LogTable { bytes, fault_capacity, origins, made: OnceLock::new(), making: Mutex::new(()), publish: Box::new(publish) })
    }

    /// The arena, if the rank has made it.
    pub fn arena(&self) -> Option<&LogArena> {
        self.made.get().map(|m| &m.arena)
    }

    /// The arena, made (with its fault log) and published if this is the first need.
    pub fn ensure(&self) -> Result<&LogArena> {
        if let Some(m) = self.made.get() {
            return Ok(&m.arena);
        }
        let _making = self.making.lock().unwrap();
        if let Some(m) = self.made.get() {
            return Ok(&m.arena);
        }
        let made = Made::format(SharedFile::create("activerma-access-logs", self.bytes)?, self.fault_capacity, self.origins)?;
        let fd = made.file.fd().expect("the maker keeps its file open");
        (self.publish)(LogArenaHome { pid: std::process::id(), fd: fd as u32, bytes: self.bytes });
        Ok(&self.made.get_or_init(|| made).arena)
    }

    /// Creates the access log of `domain` with `capacity` bytes (a power of two): from now on,
    /// pages marked E = 1 with this domain log into it.
    pub fn create(&self, domain: u16, capacity: usize, threshold: u64) -> Result<usize> {
        if domain as usize >= MAX_DOMAINS {
            return Err(Error::InvalidArgument(format!("domain {domain} is out of range: domains are 0..{MAX_DOMAINS}")));
        }
        if !capacity.is_power_of_two() || capacity < MIN_CAPACITY {
            return Err(Error::InvalidArgument(format!(
                "an access log holds a power of two of at least {MIN_CAPACITY} bytes, not {capacity}"
            )));
        }
        self.ensure()?;
        let made = self.made.get().expect("made above");
        let map = &made.arena.header().domain_slot[domain as usize];
        if map.load(Ordering::Acquire) != NONE {
            return Err(Error::InvalidArgument(format!("domain {domain} has an access log already")));
        }
        let slot = (1..MAX_LOGS)
            .find(|&i| made.arena.slot(i).state.load(Ordering::Acquire) == FREE)
            .ok_or_else(|| Error::OutOfResources(format!("all {} access logs of this rank are in use", MAX_LOGS - 1)))?;
        made.place(slot, domain as u32, capacity, threshold, self.origins)?;
        map.store(slot as u8, Ordering::Release);
        Ok(slot)
    }
}

impl Made {
    /// Formats a fresh (zeroed) file and places the fault log in it.
    fn format(file: SharedFile, fault_capacity: usize, origins: usize) -> Result<Made> {
        let (base, bytes) = (file.map.ptr, file.map.len);
        let arena = LogArena { base, bytes };
        let h = arena.header();
        for d in &h.domain_slot {
            d.store(NONE, Ordering::Relaxed);
        }
        // SAFETY: the file is ours and mapped while `Made` lives; bytes is read by nobody
        // before the magic.
        unsafe { std::ptr::write(std::ptr::addr_of_mut!((*(base as *mut ArenaHeader)).bytes), bytes as u64) };
        let made = Made { file, arena, free: Mutex::new(vec![(rings_off(), bytes - rings_off())]) };
        made.place(FAULT_SLOT, u32::MAX, fault_capacity, 1, origins)?;
        h.magic.store(MAGIC, Ordering::Release);
        Ok(made)
    }

    fn place(&self, slot: usize, domain: u32, capacity: usize, threshold: u64, origins: usize) -> Result<()> {
        let lanes = lanes_for(capacity, origins);
        let need = ring_bytes(capacity, lanes, origins).next_multiple_of(64);
        let mut free = self.free.lock().unwrap();
        let i = free.iter().position(|&(_, l)| l >= need).ok_or_else(|| {
            Error::OutOfResources(format!(
                "no room for an access log of {capacity} bytes in the log arena; raise {}",
                activerma_core::settings::LOG_ARENA
            ))
        })?;
        let (off, len) = free[i];
        if len == need {
            free.remove(i);
        } else {
            free[i] = (off + need, len - need);
        }
        // SAFETY: [off, off+need) lies in our arena and no view uses it yet.
        unsafe { LogRing::init(self.arena.base.add(off), capacity, lanes, origins) };
        // A log is memory the NIC / IOMMU writes (pinned and mapped in the paper): made
        // resident now, so that appends do not pay first-touch faults of the job's shared
        // memory (a Hold log of a whole exchange: one per 4 KiB of records). Best effort: on a
        // kernel without MADV_POPULATE_WRITE (before 5.14) pages come on first touch.
        // SAFETY: the range lies in our arena mapping.
        unsafe { activerma_core::page::populate_for_write(self.arena.base.add(off), need) };
        let s = self.arena.slot(slot);
        s.domain.store(domain, Ordering::Relaxed);
        s.threshold.store(threshold.max(1), Ordering::Relaxed);
        s.ring_off.store(off as u64, Ordering::Relaxed);
        s.state.store(ACTIVE, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_ring::{EntryMeta, LogOp};

    #[test]
    fn domains_map_to_their_logs_and_the_fault_log_exists() {
        let bytes = 1 << 20;
        let published = std::sync::Arc::new(Mutex::new(None));
        let p = published.clone();
        let t = LogTable::new(bytes, 4096, 2, move |home| *p.lock().unwrap() = Some(home)).unwrap();
        assert!(t.arena().is_none() && published.lock().unwrap().is_none(), "no arena before the first need");
        assert!(LogTable::new(1024, 4096, 2, |_| {}).is_err(), "an arena too small for the fault log is refused at once");
        let s = t.create(7, 1024, 1).unwrap();
        let home = published.lock().unwrap().expect("published when made");
        assert_eq!((home.pid, home.bytes), (std::process::id(), bytes));
        // An origin maps the arena through the published file, as another process would.
        let file = SharedFile::open(home.pid, home.fd, bytes).unwrap();
        let origin = unsafe { LogArena::attach(file.map.ptr, bytes, 0) }.unwrap();
        assert_eq!(origin.slot_of(None, 0).unwrap(), FAULT_SLOT);
        assert!(origin.slot_of(Some(8), 0).is_err(), "no log for domain 8");
        assert_eq!(origin.slot_of(Some(7), 0).unwrap(), s);
        assert_eq!(origin.domain_of(s), Some(7));
        assert!(t.create(7, 1024, 1).is_err(), "one log per domain");
        assert!(t.create(8, 1000, 1).is_err(), "power of two");
        assert!(t.create(MAX_DOMAINS as u16, 1024, 1).is_err());
        let ring = origin.ring(s).unwrap();
        let m = EntryMeta { op: LogOp::Put, origin: 1, seq: 0, addr: 64, total_len: 8, offset: 0, last: true };
        assert!(ring.try_append(&m, &[1; 8]).unwrap());
        let owner_ring = t.arena().unwrap().ring(s).unwrap();
        let e = owner_ring.peek().unwrap();
        assert_eq!(e.data(), &[1; 8]);
        owner_ring.consume(e);
        assert!(t.create(9, 1 << 30, 1).is_err(), "does not fit the arena");
    }
}
