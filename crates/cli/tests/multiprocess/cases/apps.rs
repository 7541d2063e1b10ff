//! The Active Access applications: every variant of one application ends with the same result
//! (the apps check it themselves and fail otherwise).

use activerma::{Error, Result};
use activerma_dht::{Dht, Layout, Mix, Variant};

/// All eight DHT variants on the same inserts, deletes and lookups (25 % collisions, a small
/// log so that back-pressure happens): same contents everywhere, nothing lost.
pub fn dht_variants_agree() -> Result<()> {
    let w = activerma::init()?;
    // Across hosts every active put is a request to the target and back: fewer of them.
    let inserts = if super::spans_hosts(&w) { 600 } else { 4000 };
    let mix = Mix { ranks: w.size(), inserts, collisions: 0.25, table: 1 << 14, seed: 3, delete_every: 5, skew: 0.0 };
    let load = mix.workload(w.rank()).map_err(Error::InvalidArgument)?;
    let mut dht = Dht::new(&w, Layout::new(mix.table, mix.heap_cells()))?;
    let out = activerma_dht::run_all(&mut dht, &Variant::ALL, &load, 0, 1)?;
    let keys: u64 = out[0].contents.iter().map(|c| c.keys).sum();
    let expected = (inserts * w.size()) as u64 - (inserts / 5 * w.size()) as u64;
    if keys != expected {
        return Err(Error::InvalidArgument(format!("{keys} keys in the table, expected {expected}")));
    }
    w.finalize()
}

/// The access counter: AA-Poll, RMA, A-KV and Allreduce count exactly the same puts and gets
/// per page at every rank (equal to what the origins sent), and every word read or left in the
/// arrays was written by a put to exactly that word (the app checks both and fails otherwise).
pub fn counter_variants_agree() -> Result<()> {
    let w = activerma::init()?;
    let accesses = if super::spans_hosts(&w) { 600 } else { 5000 };
    let mix = activerma_counter::Mix { ranks: w.size(), accesses, puts: 0.5, pages: 64, seed: 5 };
    let load = mix.workload(w.rank()).map_err(Error::InvalidArgument)?;
    let mut c = activerma_counter::Counter::new(&w, mix)?;
    let out = activerma_counter::run_all(&mut c, &activerma_counter::Variant::ALL, &load)?;
    if out.len() != activerma_counter::Variant::ALL.len() {
        return Err(Error::InvalidArgument(format!("{} outcomes for {} variants", out.len(), activerma_counter::Variant::ALL.len())));
    }
    w.finalize()
}

/// The stencil computes the same grid on untouched buffers (under PART: faults on the first
/// halo exchange) as on pre-touched ones.
pub fn stencil_untouched_equals_pretouched() -> Result<()> {
    let w = activerma::init()?;
    let n = 64 * w.size();
    let a = activerma_stencil::run(&w, n, 20, false, true)?;
    let b = activerma_stencil::run(&w, n, 20, true, false)?;
    if a.checksum.to_bits() != b.checksum.to_bits() {
        return Err(Error::InvalidArgument(format!("untouched buffers gave {}, pre-touched {}", a.checksum, b.checksum)));
    }
    w.finalize()
}
