//! Registration: which pages the zero-copy data path may touch, and what it costs to get there.
//!
//! A page is *registered* when it is pinned (mlock) and marked `Entry::REGISTERED` in its rank's
//! translation table. The zero-copy path to private memory (put_cma / get_cma, the on-host
//! stand-in for a NIC's DMA) accepts only registered pages, as a pinning-based NIC would; an
//! access that finds an unregistered page is a *miss* and runs the strategy's slow path.
//! Pseudo-code: `docs/design/registration.md`.
//!
//! ```text
//! strategy.rs   Strategy (ACTIVERMA_REGISTRATION): none, pin-all, bounce, rendezvous,
//!               rendezvous-unpin, firehose (`crate::firehose`), part
//! pin.rs        trait Pinner, MlockPinner (mlock/munlock), CountingPinner (tests), pin_error
//! stats.rs      RegistrationStats: pins, unpins, bytes, hits, misses, per-strategy counters
//! mod.rs        Registrar: the target's pinned pages with a hold count each, the pin budget
//! ```
//! Scope: strategies govern *exposed private memory* (`World::expose`: any virtual address).
//! Segments are allocated by the runtime and registered at allocation, like a NIC's
//! pre-registered segment; they are pinned (and counted) only under pin-all. The translation
//! table (`table.rs`) owns the per-exposure state and calls the Registrar; the origin side of
//! every strategy lives in `activerma-proto` (select.rs, rendezvous.rs).

pub mod pin;
mod stats;
mod strategy;

pub use pin::{pin_error, CountingPinner, MlockPinner, Pinner};
pub use stats::RegistrationStats;
pub use strategy::Strategy;

use activerma_core::page::{page_ceil, page_floor, page_size};
use activerma_core::{settings, Config, Error, Result};
use rustc_hash::FxHashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The target side of registration: pins pages through a `Pinner`, keeps how many holders each
/// pinned page has (two exposures may share a page, and mlock is not reference counted), and
/// enforces the runtime's own pin budget (ACTIVERMA_PIN_LIMIT) before the kernel's
/// RLIMIT_MEMLOCK. Every pin and unpin is real and counted.
pub struct Registrar {
    strategy: Strategy,
    pinner: Arc<dyn Pinner>,
    /// Bytes this rank may keep pinned; 0 = no budget of our own (RLIMIT_MEMLOCK still holds).
    budget: u64,
    stats: Arc<RegistrationStats>,
    /// Page address -> holders. A page is pinned exactly while it is in the map.
    pages: Mutex<FxHashMap<usize, u32>>,
}

impl Registrar {
    pub fn new(strategy: Strategy, pinner: Arc<dyn Pinner>, budget: u64, stats: Arc<RegistrationStats>) -> Registrar {
        Registrar { strategy, pinner, budget, stats, pages: Mutex::new(FxHashMap::default()) }
    }

    /// The job's strategy with the real pinner and ACTIVERMA_PIN_LIMIT.
    pub fn from_config(cfg: &Config, stats: Arc<RegistrationStats>) -> Result<Registrar> {
        let budget = cfg.get_u64(settings::PIN_LIMIT)?;
        Ok(Registrar::new(Strategy::from_config(cfg)?, Arc::new(MlockPinner), budget, stats))
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    pub fn stats(&self) -> &Arc<RegistrationStats> {
        &self.stats
    }

    /// Bytes pinned now (pages held by anyone).
    pub fn pinned_bytes(&self) -> usize {
        self.pages.lock().unwrap().len() * page_size()
    }

    /// Takes one hold on every page `[addr, addr+len)` touches, pinning the pages nobody held.
    /// All or nothing: on an error no hold is taken and nothing stays pinned.
    pub fn hold(&self, addr: usize, len: usize) -> Result<()> {
        let ps = page_size();
        let (first, end) = (page_floor(addr), page_ceil(addr + len.max(1)));
        let mut pages = self.pages.lock().unwrap();
        let runs = runs(first, end, |p| !pages.contains_key(&p));
        let new_bytes: usize = runs.iter().map(|&(s, e)| e - s).sum();
        let now = pages.len() * ps;
        if self.budget != 0 && (now + new_bytes) as u64 > self.budget {
            RegistrationStats::add(&self.stats.pin_failures, 1);
            return Err(Error::OutOfResources(format!(
                "cannot pin {new_bytes} more bytes at {first:#x} ({now} pinned already): the pin budget {}={} would be exceeded; \
                 raise {} (0 = no budget of our own, only the kernel's RLIMIT_MEMLOCK, see `ulimit -l`), \
                 or pin less (ACTIVERMA_REGISTRATION=rendezvous-unpin or bounce instead of pin-all, smaller exposures)",
                settings::PIN_LIMIT,
                self.budget,
                settings::PIN_LIMIT
            )));
        }
        for (i, &(s, e)) in runs.iter().enumerate() {
            if let Err(err) = self.pinner.pin(s, e - s) {
                for &(s, e) in &runs[..i] {
                    let _ = self.pinner.unpin(s, e - s);
                }
                RegistrationStats::add(&self.stats.pin_failures, 1);
                return Err(err);
            }
        }
        for p in (first..end).step_by(ps) {
            *pages.entry(p).or_insert(0) += 1;
        }
        let st = &self.stats;
        RegistrationStats::add(&st.pins, runs.len() as u64);
        RegistrationStats::add(&st.bytes_pinned, new_bytes as u64);
        st.pinned_peak.fetch_max((pages.len() * ps) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Drops one hold on every page `[addr, addr+len)` touches (each must be held); unpins the
    /// pages nobody holds any more.
    pub fn release(&self, addr: usize, len: usize) -> Result<()> {
        let ps = page_size();
        let (first, end) = (page_floor(addr), page_ceil(addr + len.max(1)));
        let mut pages = self.pages.lock().unwrap();
        let mut freed = Vec::new();
        for p in (first..end).step_by(ps) {
            match pages.get_mut(&p) {
                Some(n) if *n > 1 => *n -= 1,
                Some(_) => {
                    pages.remove(&p);
                    freed.push(p);
                }
                None => return Err(Error::InvalidArgument(format!("registration: page {p:#x} released but not held"))),
            }
        }
        let runs = runs(first, end, |p| freed.binary_search(&p).is_ok());
        let mut result = Ok(());
        for &(s, e) in &runs {
            if let Err(err) = self.pinner.unpin(s, e - s) {
                result = Err(err);
            }
        }
        RegistrationStats::add(&self.stats.unpins, runs.len() as u64);
        RegistrationStats::add(&self.stats.bytes_unpinned, (freed.len() * ps) as u64);
        result
    }
}

/// Maximal runs `[start, end)` of pages in `[first, end)` for which `pick(page)` holds.
fn runs(first: usize, end: usize, pick: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let ps = page_size();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for p in (first..end).step_by(ps) {
        if !pick(p) {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == p => last.1 = p + ps,
            _ => out.push((p, p + ps)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
