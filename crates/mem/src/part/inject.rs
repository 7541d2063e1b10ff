//! Fault injection for tests and benchmarks: before a transfer, evict each page of a range
//! with a given probability (contents are kept, see `UffdRegion::evict`), so the transfer meets
//! real faults at those pages.

use super::uffd_region::UffdRegion;
use activerma_core::page::page_size;
use activerma_core::{Error, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub struct FaultInjector {
    prob: f64,
    rng: SmallRng,
}

impl FaultInjector {
    /// `prob` is the per-page probability of a fault, 0.0 to 1.0; `seed` makes runs repeatable.
    pub fn new(prob: f64, seed: u64) -> Result<FaultInjector> {
        if !(0.0..=1.0).contains(&prob) {
            return Err(Error::InvalidArgument(format!("fault probability {prob}: must be within 0.0..=1.0")));
        }
        Ok(FaultInjector { prob, rng: SmallRng::seed_from_u64(seed) })
    }

    /// Evicts each page of `[addr, addr+len)` (inside `region`) with the probability; returns
    /// the addresses of the pages chosen — after this call every one of them is missing.
    pub fn inject(&mut self, region: &UffdRegion, addr: usize, len: usize) -> Result<Vec<usize>> {
        let ps = page_size();
        let first = activerma_core::page::page_floor(addr);
        let end = addr + len;
        let mut chosen = Vec::new();
        let mut p = first;
        while p < end {
            if self.rng.gen_bool(self.prob) {
                chosen.push(p);
            }
            p += ps;
        }
        // Evict runs of adjacent pages with one call each.
        let mut i = 0;
        while i < chosen.len() {
            let mut j = i + 1;
            while j < chosen.len() && chosen[j] == chosen[j - 1] + ps {
                j += 1;
            }
            region.evict(chosen[i], (j - i) * ps)?;
            i = j;
        }
        Ok(chosen)
    }
}
