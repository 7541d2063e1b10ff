//! The target's exposures that other hosts' one-sided engines reach: each one registered with
//! the conduit (MPI: attached to the dynamic window) once, on first use, and taken back when
//! it is unexposed. Two users: a rendezvous (rendezvous_rma.rs) holds an exposure for the
//! length of one move; a key (keyed_rma.rs) lets an origin reach it until the
//! target revokes the key.
//!
//! ```text
//! hold(addr, len)          the exposure of the range, registered if it is not yet; holds += 1
//! release(addr)            holds -= 1
//! grant(origin, addr, len) the exposure of the range, registered; origin joins its key holders
//! close(addr)              no new hold or key from now on; returns the key holders (to revoke)
//! keyed(addr, len)         the key holders of every exposure overlapping a range, forgotten
//!                          (the caller revokes their keys: the pages' bits changed)
//! finish(addr)             wait until holds = 0, deregister, the table's own unexpose, forget
//! ```
//! Attaching whole exposures, once, keeps the conduit's registrations as few as the exposures
//! (Open MPI's one-sided components allow 32 attached regions per window by default; a refused
//! attach is a resource limit: the origin's data goes through the target instead) and never
//! overlapping; the holds and keys are what keep an unexpose from detaching under an origin.

use activerma_core::{Error, Rank, Result};
use activerma_mem::TargetTable;
use activerma_transport::Conduit;
use std::sync::{Arc, Mutex};

/// How long an unexpose waits for origins still moving data in or out (an origin that died
/// never releases; its job is being torn down by the launcher).
const CLOSE_WAIT_S: u64 = 10;

/// One exposure some origin on another host has registered or holds a key to.
struct Held {
    base: usize,
    len: usize,
    holds: u32,
    registered: bool,
    closing: bool,
    /// Origins holding a key to it (sorted, no repeats).
    keyed: Vec<Rank>,
}

/// What `grant` gave: the exposure, and its protection bits when the key is direct.
pub(crate) struct Grant {
    pub base: usize,
    pub len: usize,
    pub bits: Option<u32>,
}

pub struct RmaExposures {
    conduit: Arc<dyn Conduit>,
    table: Arc<TargetTable>,
    held: Mutex<Vec<Held>>,
}

impl RmaExposures {
    pub(crate) fn new(conduit: Arc<dyn Conduit>, table: Arc<TargetTable>) -> RmaExposures {
        RmaExposures { conduit, table, held: Mutex::new(Vec::new()) }
    }

    /// The entry of the exposure holding `[addr, addr+len)` (made on first use) and its
    /// generation; NotExposed when there is none or it is being unexposed.
    fn open<'h>(&self, held: &'h mut Vec<Held>, addr: usize, len: usize) -> Result<(&'h mut Held, u64)> {
        let (base, elen, generation) = self.table.exposure_of(addr, len).ok_or(Error::NotExposed { rank: usize::MAX, addr, len })?;
        let i = match held.iter().position(|h| h.base == base) {
            Some(i) => i,
            None => {
                held.push(Held { base, len: elen, holds: 0, registered: false, closing: false, keyed: Vec::new() });
                held.len() - 1
            }
        };
        let h = &mut held[i];
        if h.closing {
            return Err(Error::NotExposed { rank: usize::MAX, addr, len });
        }
        Ok((h, generation))
    }

    /// Registers the exposure with the conduit, once. A refusal (e.g. too many attached
    /// regions) is a resource limit: the origin's data goes through us instead.
    fn register(&self, h: &mut Held) -> Result<()> {
        if !h.registered {
            self.conduit
                .register(h.base, h.len)
                .map_err(|e| Error::OutOfResources(format!("registering {:#x}+{} with the conduit: {e}", h.base, h.len)))?;
            h.registered = true;
        }
        Ok(())
    }

    /// One more origin inside the exposure holding `[addr, addr+len)`; returns its generation.
    pub(crate) fn hold(&self, addr: usize, len: usize) -> Result<u64> {
        let mut held = self.held.lock().unwrap();
        let (h, generation) = self.open(&mut held, addr, len)?;
        self.register(h)?;
        h.holds += 1;
        Ok(generation)
    }

    pub(crate) fn release(&self, addr: usize) {
        let mut held = self.held.lock().unwrap();
        if let Some(h) = held.iter_mut().find(|h| addr >= h.base && addr < h.base + h.len) {
            h.holds = h.holds.saturating_sub(1);
        }
    }

    /// A key for `origin` to the exposure holding `[addr, addr+len)`. Direct (its R/W bits
    /// given) when every page of it is plain and alike and the conduit registered it; else the
    /// origin's accesses go through us. The origin is asked to give it back (`close`, `keyed`)
    /// before the exposure goes or its pages change: the pages are looked at under the same
    /// lock `keyed` takes, so a change of bits either comes before (and is seen here) or
    /// revokes this key.
    pub(crate) fn grant(&self, origin: Rank, addr: usize, len: usize) -> Result<Grant> {
        let mut held = self.held.lock().unwrap();
        let (h, _) = self.open(&mut held, addr, len)?;
        let mut bits = self.table.uniform_protection(h.base, h.len);
        if bits.is_some() && self.register(h).is_err() {
            bits = None;
        }
        if let Err(i) = h.keyed.binary_search(&origin) {
            h.keyed.insert(i, origin);
        }
        Ok(Grant { base: h.base, len: h.len, bits })
    }

    /// Starts unexposing the exposure at `addr`: from now on no hold or key is given for it.
    /// Returns its length and the origins holding keys to it, which must give them back
    /// before `finish`.
    pub(crate) fn close(&self, addr: usize) -> (usize, Vec<Rank>) {
        // Closing from here to the end, even if no other host registered it yet: a request
        // arriving before the table forgets the exposure must not register it anew.
        let mut held = self.held.lock().unwrap();
        match held.iter_mut().find(|h| h.base == addr) {
            Some(h) => {
                h.closing = true;
                (h.len, std::mem::take(&mut h.keyed))
            }
            None => {
                held.push(Held { base: addr, len: 0, holds: 0, registered: false, closing: true, keyed: Vec::new() });
                (0, Vec::new())
            }
        }
    }

    /// The origins holding keys to exposures overlapping `[addr, addr+len)` (forgotten here:
    /// the caller revokes them, and they ask anew).
    pub(crate) fn keyed(&self, addr: usize, len: usize) -> Vec<Rank> {
        let mut held = self.held.lock().unwrap();
        let mut all: Vec<Rank> = Vec::new();
        for h in held.iter_mut().filter(|h| h.base < addr + len && addr < h.base + h.len) {
            all.append(&mut h.keyed);
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Ends an unexpose `close` began: waits (running handlers, which receive the releases)
    /// until no rendezvous is inside, takes the conduit registration back and runs the table's
    /// own unexpose.
    pub(crate) fn finish(&self, addr: usize, progress: &mut dyn FnMut(), table_unexpose: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let started = std::time::Instant::now();
        while self.held.lock().unwrap().iter().any(|h| h.base == addr && h.holds > 0) {
            if started.elapsed().as_secs() >= CLOSE_WAIT_S {
                eprintln!("activerma: unexpose of {addr:#x}: an origin on another host stayed inside for {CLOSE_WAIT_S} s; proceeding");
                break;
            }
            progress();
            std::thread::yield_now();
        }
        let (registered, len) = {
            let held = self.held.lock().unwrap();
            let h = held.iter().find(|h| h.base == addr).expect("closed before");
            (h.registered, h.len)
        };
        let deregistered = if registered { self.conduit.deregister(addr, len) } else { Ok(()) };
        let unexposed = table_unexpose();
        self.held.lock().unwrap().retain(|h| h.base != addr);
        unexposed.and(deregistered)
    }
}
