//! One measured run of a variant (collective): inserts timed, then deletes timed, then lookups
//! and the contents check.

use crate::dht::Dht;
use crate::variant::Variant;
use crate::volume::Contents;
use crate::workload::Workload;
use activerma::{Error, Result};
use std::time::{Duration, Instant};

/// What every rank of the job measured and found, gathered at rank 0.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub variant: Variant,
    pub ranks: usize,
    /// Inserts per second over the job (all ranks' inserts / rank 0's wall time); with several
    /// rounds, the rounds' median.
    pub inserts_per_s: f64,
    /// The slowest and the fastest round's inserts per second (equal to `inserts_per_s` for one
    /// round): the spread a report shows.
    pub inserts_per_s_min: f64,
    pub inserts_per_s_max: f64,
    pub deletes_per_s: f64,
    /// Share of the insert phase spent in the computation between inserts (rank 0).
    pub comp_ratio: f64,
    /// The volumes' contents after the deletes, per rank.
    pub contents: Vec<Contents>,
    pub iotlb_misses: u64,
    pub iotlb_hits: u64,
}

/// Busy work between inserts, standing for the application's computation.
fn compute(ns: u64) -> Duration {
    if ns == 0 {
        return Duration::ZERO;
    }
    let t = Instant::now();
    let until = Duration::from_nanos(ns);
    while t.elapsed() < until {
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// Sum over ranks of `mine[i]` for `i` = this rank: how many operations others send here.
fn incoming(dht: &Dht, per_target: &[u64]) -> Result<u64> {
    let mut b = Vec::with_capacity(per_target.len() * 8);
    for v in per_target {
        b.extend(v.to_le_bytes());
    }
    let me = dht.world.rank();
    Ok(dht.world.allgather(&b)?.iter().map(|r| u64::from_le_bytes(r[me * 8..me * 8 + 8].try_into().unwrap())).sum())
}

pub fn run_variant(dht: &mut Dht, v: Variant, w: &Workload, comp_ns: u64) -> Result<Outcome> {
    let world = dht.world.clone();
    let (me, p) = (world.rank(), world.size());
    let in_inserts = incoming(dht, &w.inserts_to)?;
    let in_deletes = incoming(dht, &w.deletes_to)?;
    dht.begin(v)?;
    world.reset_iotlb_stats();

    let t0 = Instant::now();
    let mut comp = Duration::ZERO;
    for op in &w.inserts {
        dht.insert(v, op.target, op.key)?;
        comp += compute(comp_ns);
    }
    let applied = dht.complete(v, in_inserts)?;
    let insert_s = t0.elapsed().as_secs_f64();
    let (iotlb, _) = world.iotlb();
    if v != Variant::Rma && applied != in_inserts {
        return Err(Error::InvalidArgument(format!("{}: rank {me} applied {applied} inserts, {in_inserts} were sent here", v.name())));
    }

    let t1 = Instant::now();
    for op in &w.deletes {
        dht.delete(v, op.target, op.key)?;
    }
    dht.complete(v, in_inserts + in_deletes)?;
    let delete_s = t1.elapsed().as_secs_f64();

    // Lookups (plain gets, in every variant): every 7th key of this origin, deleted or not.
    let deleted_keys: std::collections::HashSet<u64> = w.deletes.iter().map(|d| d.key).collect();
    for op in w.inserts.iter().step_by(7) {
        let deleted = deleted_keys.contains(&op.key);
        if dht.lookup(op.target, op.key)? == deleted {
            return Err(Error::InvalidArgument(format!(
                "{}: lookup of key {:#x} at rank {} says {}, but it was {}",
                v.name(),
                op.key,
                op.target,
                if deleted { "present" } else { "absent" },
                if deleted { "deleted" } else { "inserted" }
            )));
        }
    }
    world.barrier()?;
    let full = dht.full.load(std::sync::atomic::Ordering::Relaxed);
    let mine = dht.vol.contents().map_err(|e| Error::InvalidArgument(format!("{} at rank {me}: {e}", v.name())))?;
    if full > 0 || mine.keys != in_inserts - in_deletes || mine.tombstones != in_deletes {
        return Err(Error::InvalidArgument(format!(
            "{} at rank {me}: volume holds {} keys and {} deleted ones, expected {} and {in_deletes} ({full} inserts found the heap full)",
            v.name(),
            mine.keys,
            mine.tombstones,
            in_inserts - in_deletes
        )));
    }
    let mut b = Vec::new();
    for x in [mine.keys, mine.tombstones, mine.digest, iotlb.hits, iotlb.misses, w.inserts.len() as u64] {
        b.extend(x.to_le_bytes());
    }
    let all = world.allgather(&b)?;
    let word = |r: &[u8], i: usize| u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap());
    dht.end(v)?;
    let total_inserts: u64 = all.iter().map(|r| word(r, 5)).sum();
    let total_deletes: u64 = all.iter().map(|r| word(r, 1)).sum();
    Ok(Outcome {
        variant: v,
        ranks: p,
        inserts_per_s: total_inserts as f64 / insert_s,
        inserts_per_s_min: total_inserts as f64 / insert_s,
        inserts_per_s_max: total_inserts as f64 / insert_s,
        deletes_per_s: total_deletes as f64 / delete_s,
        comp_ratio: comp.as_secs_f64() / insert_s,
        contents: all.iter().map(|r| Contents { keys: word(r, 0), tombstones: word(r, 1), digest: word(r, 2) }).collect(),
        iotlb_hits: all.iter().map(|r| word(r, 3)).sum(),
        iotlb_misses: all.iter().map(|r| word(r, 4)).sum(),
    })
}

/// Runs `variants` one after the other on the same workload, `reps` rounds (interleaved, so
/// that a change in the machine's load hits every variant alike), and checks that every run of
/// every variant ends with the same contents in every volume. Rates are the rounds' medians.
pub fn run_all(dht: &mut Dht, variants: &[Variant], w: &Workload, comp_ns: u64, reps: usize) -> Result<Vec<Outcome>> {
    let mut runs: Vec<Vec<Outcome>> = vec![Vec::new(); variants.len()];
    let mut reference: Option<Outcome> = None;
    for _ in 0..reps.max(1) {
        for (i, &v) in variants.iter().enumerate() {
            let o = run_variant(dht, v, w, comp_ns)?;
            match &reference {
                Some(first) if first.contents != o.contents => {
                    return Err(Error::InvalidArgument(format!(
                        "{} ends with different contents than {}: {:?} vs {:?}",
                        o.variant.name(),
                        first.variant.name(),
                        o.contents,
                        first.contents
                    )))
                }
                Some(_) => {}
                None => reference = Some(o.clone()),
            }
            runs[i].push(o);
        }
    }
    Ok(runs.into_iter().map(median).collect())
}

fn median(mut runs: Vec<Outcome>) -> Outcome {
    let mid = runs.len() / 2;
    runs.sort_by(|a, b| a.inserts_per_s.total_cmp(&b.inserts_per_s));
    let mut m = runs[mid].clone();
    m.inserts_per_s_min = runs[0].inserts_per_s;
    m.inserts_per_s_max = runs[runs.len() - 1].inserts_per_s;
    runs.sort_by(|a, b| a.deletes_per_s.total_cmp(&b.deletes_per_s));
    m.deletes_per_s = runs[mid].deletes_per_s;
    m
}
