//! The distributed hash table over activerma: one volume per rank, and insert / delete /
//! lookup in each of the eight designs.
//!
//! - Active Access (AA-*): the target marks its table cells `R=1, W=0, WL=1, WLD=1` and its
//!   delete page `W=0, WL=1, WLD=1`, both logging into one access log. An insert is a plain
//!   8-byte put of the key to the key's cell: it becomes a log entry, and the handler inserts
//!   it locally (Listing 3). A delete is a put of the key to the delete page. Lookups are plain
//!   gets (R=1, not logged). Only the notification differs between AA-Poll, AA-Int and AA-SP.
//! - RMA: Listing 2 with remote compare-and-swap, fetch-and-add, swap, puts and flushes.
//! - AM-*: an insert or delete is an active message whose handler does the local operation;
//!   only who runs the handlers differs.

use crate::variant::Variant;
use crate::volume::{Layout, Volume, TOMBSTONE};
use activerma::{Actions, AmCtx, Error, HandlerId, LogEntry, Notify, ProgressMode, Result, World, FIRST_USER_HANDLER};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const INSERT_AM: HandlerId = FIRST_USER_HANDLER + 40;
const DELETE_AM: HandlerId = FIRST_USER_HANDLER + 41;
/// The access-log domain of the table's pages under AA-Poll and AA-Int, and its log's size:
/// the same queue memory per target as the active-message variants' ring (256 slots of 256 B),
/// which polled or woken handlers drain long before it fills, and which stays in the cache
/// beside the table (a 1 MiB log streams through the 2 MiB L2 and evicts table lines).
pub const DOMAIN: u16 = 1;
const LOG_BYTES: usize = 64 << 10;
/// AA-SP's domain and log: its handler is a thread that here shares a CPU with the ranks, so
/// the log must hold what arrives while that thread waits for its turn (a time slice).
pub const DOMAIN_SP: u16 = 3;
const LOG_BYTES_SP: usize = 1 << 20;
/// Inserts between two polls in AA-Poll and AM (AM-Exp starts there and adapts).
pub const POLL_EVERY: u32 = 16;
const MAX_POLL_INTERVAL: u32 = 1024;
/// AA-Int: the handler thread is woken every this many entries (the paper's 10).
pub const WAKE_EVERY: u64 = 10;
const COMPLETE_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Dht {
    pub world: World,
    pub vol: Arc<Volume>,
    /// Inserts and deletes that this rank's handlers applied (AA and AM variants).
    applied: Arc<AtomicU64>,
    /// Inserts that found their volume's heap full (the run is then invalid).
    pub full: Arc<AtomicU64>,
    poll_every: u32,
    poll_left: u32,
}

impl Dht {
    /// Collective: allocates the volumes, installs the handlers and the access log.
    pub fn new(world: &World, layout: Layout) -> Result<Dht> {
        let vol = Arc::new(Volume::alloc(world, layout)?);
        let applied = Arc::new(AtomicU64::new(0));
        let full = Arc::new(AtomicU64::new(0));
        {
            let (v, a, f) = (vol.clone(), applied.clone(), full.clone());
            world.register_handler(
                INSERT_AM,
                Arc::new(move |_: &AmCtx, msg: &[u8]| {
                    if v.local_insert(key_of(msg)).is_err() {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                    a.fetch_add(1, Ordering::Release);
                }),
            )?;
            let (v, a) = (vol.clone(), applied.clone());
            world.register_handler(
                DELETE_AM,
                Arc::new(move |_: &AmCtx, msg: &[u8]| {
                    v.local_delete(key_of(msg));
                    a.fetch_add(1, Ordering::Release);
                }),
            )?;
        }
        for (domain, bytes) in [(DOMAIN, LOG_BYTES), (DOMAIN_SP, LOG_BYTES_SP)] {
            let (v, a, f) = (vol.clone(), applied.clone(), full.clone());
            world.create_log(
                domain,
                bytes,
                Notify::Poll,
                Arc::new(move |e: &LogEntry| {
                    let key = key_of(e.data());
                    if v.is_delete_addr(e.meta.addr) {
                        v.local_delete(key);
                    } else if v.local_insert(key).is_err() {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                    a.fetch_add(1, Ordering::Release);
                }),
            )?;
        }
        world.barrier()?;
        Ok(Dht { world: world.clone(), vol, applied, full, poll_every: POLL_EVERY, poll_left: POLL_EVERY })
    }

    /// Collective: empties the volumes and sets up `v` (page marks, who runs handlers).
    pub fn begin(&mut self, v: Variant) -> Result<()> {
        self.world.barrier()?;
        self.vol.reset();
        self.applied.store(0, Ordering::Relaxed);
        self.full.store(0, Ordering::Relaxed);
        (self.poll_every, self.poll_left) = (POLL_EVERY, POLL_EVERY);
        if v.is_aa() {
            let l = self.vol.layout;
            let base = self.vol.seg.as_ptr();
            let domain = Self::domain(v);
            self.world.assoc_pages(base, l.cells_bytes(), Actions::R | Actions::WL | Actions::WLD, Some(domain))?;
            // SAFETY: the delete page is inside our segment.
            self.world.assoc_pages(unsafe { base.add(l.delete_off) }, 4096, Actions::WL | Actions::WLD, Some(domain))?;
            let notify = match v {
                Variant::AaInt => Notify::Wake { threshold: WAKE_EVERY },
                Variant::AaSp => Notify::Thread,
                _ => Notify::Poll,
            };
            self.world.set_log_notify(Some(domain), notify)?;
        }
        match v {
            Variant::AmOnload => self.world.set_progress_mode(ProgressMode::Thread)?,
            Variant::AmInts => self.world.set_progress_mode(ProgressMode::Wake)?,
            _ => {}
        }
        self.world.barrier()
    }

    /// The log an Active Access variant's inserts go to.
    fn domain(v: Variant) -> u16 {
        if v == Variant::AaSp {
            DOMAIN_SP
        } else {
            DOMAIN
        }
    }

    /// Collective: back to plain pages and application progress.
    pub fn end(&mut self, v: Variant) -> Result<()> {
        self.world.barrier()?;
        if v.is_aa() {
            self.world.set_log_notify(Some(Self::domain(v)), Notify::Poll)?;
            self.world.assoc_pages(self.vol.seg.as_ptr(), self.vol.layout.bytes, Actions::W | Actions::R, None)?;
        }
        self.world.set_progress_mode(ProgressMode::App)?;
        self.world.barrier()
    }

    pub fn insert(&mut self, v: Variant, target: usize, key: u64) -> Result<()> {
        let pos = self.vol.layout.position(key);
        match v {
            Variant::Rma => return self.rma_insert(target, pos, key),
            _ if v.is_aa() => self.world.put_nbi(self.vol.elem_at(target, pos), &key.to_le_bytes())?,
            _ => self.world.send_am(target, INSERT_AM, 0, &key.to_le_bytes())?,
        }
        self.tick(v);
        Ok(())
    }

    pub fn delete(&mut self, v: Variant, target: usize, key: u64) -> Result<()> {
        match v {
            Variant::Rma => return self.rma_delete(target, key),
            _ if v.is_aa() => self.world.put_nbi(self.vol.delete_page_at(target), &key.to_le_bytes())?,
            _ => self.world.send_am(target, DELETE_AM, 0, &key.to_le_bytes())?,
        }
        self.tick(v);
        Ok(())
    }

    /// The application's polling in AA-Poll, AM and AM-Exp (the other variants have a thread).
    fn tick(&mut self, v: Variant) {
        if !matches!(v, Variant::AaPoll | Variant::Am | Variant::AmExp) {
            return;
        }
        self.poll_left -= 1;
        if self.poll_left > 0 {
            return;
        }
        let ran = self.world.progress();
        if v == Variant::AmExp {
            // Exponential back-off: poll half as often each time the inbox was empty.
            self.poll_every = if ran == 0 { (self.poll_every * 2).min(MAX_POLL_INTERVAL) } else { 1 };
        }
        self.poll_left = self.poll_every;
    }

    /// Returns when every operation this rank issued has been applied at its target and this
    /// rank's handlers applied the `expected` operations others (and it) sent here; then all
    /// ranks meet in a barrier. Returns what this rank's handlers had applied before the
    /// barrier (after it, others may already send the next phase's operations).
    pub fn complete(&self, v: Variant, expected: u64) -> Result<u64> {
        match v {
            Variant::Rma => self.world.flush_all()?,
            _ if v.is_aa() => {
                for t in 0..self.world.size() {
                    self.world.active_flush(t)?;
                }
            }
            _ => {}
        }
        let deadline = Instant::now() + COMPLETE_TIMEOUT;
        while v != Variant::Rma && self.applied.load(Ordering::Acquire) < expected {
            if self.world.progress() == 0 {
                std::hint::spin_loop();
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{}: {} of {expected} inserts/deletes applied at rank {}",
                        v.name(),
                        self.applied.load(Ordering::Acquire),
                        self.world.rank()
                    ),
                    secs: COMPLETE_TIMEOUT.as_secs_f64(),
                });
            }
        }
        let applied = self.applied.load(Ordering::Acquire);
        self.world.barrier()?;
        Ok(applied)
    }

    /// Listing 2, with one correction: the predecessor of a new heap cell comes from the swap
    /// of `last_ptr` (the table cell itself when there was none), so that two concurrent
    /// colliders never both link behind the table cell.
    fn rma_insert(&self, t: usize, pos: usize, key: u64) -> Result<()> {
        let w = &self.world;
        let v = &self.vol;
        if w.compare_swap(v.elem_at(t, pos), 0, key)? == 0 {
            return Ok(());
        }
        let free = w.fetch_add(v.next_free_at(t), 1)? as usize;
        if free >= v.layout.table + v.layout.heap {
            self.full.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        w.put_nbi(v.elem_at(t, free), &key.to_le_bytes())?;
        w.flush(t)?;
        let prev = w.swap(v.last_ptr_at(t, pos), free as u64)? as usize;
        let link = if prev == 0 { v.ptr_at(t, pos) } else { v.ptr_at(t, prev) };
        w.put_nbi(link, &(free as u64).to_le_bytes())?;
        w.flush(t)
    }

    /// Walks the key's chain with gets and swaps the key for a tombstone.
    fn rma_delete(&self, t: usize, key: u64) -> Result<()> {
        let mut cell = self.vol.layout.position(key);
        loop {
            let (elem, next) = self.read_cell(t, cell)?;
            if elem == key && self.world.compare_swap(self.vol.elem_at(t, cell), key, TOMBSTONE)? == key {
                return Ok(());
            }
            if next == 0 {
                return Ok(());
            }
            cell = next as usize;
        }
    }

    /// A lookup: plain gets of the key's table cell, then of its chain (the paper's lookups
    /// are one RMA get of the cell; following the chain covers collided keys too).
    pub fn lookup(&self, t: usize, key: u64) -> Result<bool> {
        let mut cell = self.vol.layout.position(key);
        loop {
            let (elem, next) = self.read_cell(t, cell)?;
            if elem == key {
                return Ok(true);
            }
            if next == 0 {
                return Ok(false);
            }
            cell = next as usize;
        }
    }

    fn read_cell(&self, t: usize, cell: usize) -> Result<(u64, u64)> {
        let mut b = [0u8; 16];
        self.world.get(self.vol.elem_at(t, cell), &mut b)?;
        Ok((u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..].try_into().unwrap())))
    }
}

fn key_of(b: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k.copy_from_slice(&b[..8]);
    u64::from_le_bytes(k)
}
