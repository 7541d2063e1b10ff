//! One measured run of a variant (collective): the accesses timed, then the checks — the counts
//! against what the origins sent, the values gets read and the arrays' contents.

use crate::counter::Counter;
use crate::variant::Variant;
use crate::workload::{legal, Kind, Workload};
use activerma::{Error, Result, World};
use std::time::Instant;

/// The counts one rank ended with, in a form that two runs can compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub puts: u64,
    pub gets: u64,
    /// Over (page, puts, gets) of every page.
    pub digest: u64,
}

impl Tally {
    pub fn of(puts: &[u64], gets: &[u64]) -> Tally {
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for (pg, (p, g)) in puts.iter().zip(gets).enumerate() {
            for x in [pg as u64, *p, *g] {
                digest = (digest ^ x).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Tally { puts: puts.iter().sum(), gets: gets.iter().sum(), digest }
    }
}

/// What every rank of the job measured and found, gathered at rank 0.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub variant: Variant,
    pub ranks: usize,
    pub pages: usize,
    /// Accesses per second over the job (all ranks' accesses / rank 0's wall time).
    pub accesses_per_s: f64,
    /// The counts every rank ended with (None: No-Cnt does not count).
    pub tallies: Option<Vec<Tally>>,
    /// Gets whose value was checked, and words found overwritten by puts, over all ranks.
    pub reads_checked: u64,
    pub words_written: u64,
    /// The modelled IOTLB (ACTIVERMA_IOTLB_ENTRIES; 0 when off), over all ranks' accesses.
    pub iotlb_hits: u64,
    pub iotlb_misses: u64,
}

/// The per-page (puts, gets) the origins say they sent to this rank.
fn incoming(world: &World, w: &Workload) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut b = Vec::with_capacity(w.puts_to.len() * 16);
    for v in w.puts_to.iter().chain(&w.gets_to) {
        b.extend(v.to_le_bytes());
    }
    let (me, pages, n) = (world.rank(), w.pages, w.puts_to.len());
    let (mut puts, mut gets) = (vec![0u64; pages], vec![0u64; pages]);
    for r in world.allgather(&b)? {
        for pg in 0..pages {
            puts[pg] += word(&r, me * pages + pg);
            gets[pg] += word(&r, n + me * pages + pg);
        }
    }
    Ok((puts, gets))
}

fn word(r: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap())
}

fn invalid(v: Variant, me: usize, what: String) -> Error {
    Error::InvalidArgument(format!("{} at rank {me}: {what}", v.name()))
}

pub fn run_variant(c: &mut Counter, v: Variant, w: &Workload) -> Result<Outcome> {
    let world = c.world.clone();
    let (me, p) = (world.rank(), world.size());
    if w.origin != me || w.pages != c.pages() {
        return Err(invalid(v, me, format!("the workload is rank {}'s over {} pages", w.origin, w.pages)));
    }
    let (in_puts, in_gets) = incoming(&world, w)?;
    let in_total = in_puts.iter().sum::<u64>() + in_gets.iter().sum::<u64>();
    let mut read = Vec::with_capacity(w.gets() as usize);
    c.begin(v)?;
    world.reset_iotlb_stats();

    let t0 = Instant::now();
    for (i, a) in w.accesses.iter().enumerate() {
        if let Some(x) = c.access(v, i, a)? {
            read.push((i, x));
        }
    }
    c.complete(v, in_total)?;
    let secs = t0.elapsed().as_secs_f64();
    let (iotlb, _) = world.iotlb();

    // Every get read its word's initial value or one a put to that word wrote.
    for &(i, x) in &read {
        let a = &w.accesses[i];
        debug_assert_eq!(a.kind, Kind::Get);
        if !legal(&c.writers, a.target(), a.word as usize, x) {
            return Err(invalid(
                v,
                me,
                format!("get {i} read {x:#x} from word {} of rank {}, which no put to it wrote", a.word, a.target()),
            ));
        }
    }
    let written = c.arr.check(me, &c.writers).map_err(|e| invalid(v, me, e))?;
    let stray = c.stray.load(std::sync::atomic::Ordering::Relaxed);
    if stray > 0 {
        return Err(invalid(v, me, format!("{stray} log entries or messages named no word of the array or carried data")));
    }
    let counted = c.page_counts(v);
    if let Some((puts, gets)) = &counted {
        if let Some(pg) = (0..c.pages()).find(|&pg| puts[pg] != in_puts[pg] || gets[pg] != in_gets[pg]) {
            return Err(invalid(
                v,
                me,
                format!(
                    "page {pg} counted {} puts and {} gets, the origins sent {} and {} (totals: {} and {} counted, {} and {} sent)",
                    puts[pg],
                    gets[pg],
                    in_puts[pg],
                    in_gets[pg],
                    puts.iter().sum::<u64>(),
                    gets.iter().sum::<u64>(),
                    in_puts.iter().sum::<u64>(),
                    in_gets.iter().sum::<u64>()
                ),
            ));
        }
    }
    let t = counted.as_ref().map_or(Tally::default(), |(puts, gets)| Tally::of(puts, gets));
    let mut b = Vec::new();
    for x in [t.puts, t.gets, t.digest, read.len() as u64, written, w.accesses.len() as u64, iotlb.hits, iotlb.misses] {
        b.extend(x.to_le_bytes());
    }
    let all = world.allgather(&b)?;
    c.end(v)?;
    let total: u64 = all.iter().map(|r| word(r, 5)).sum();
    Ok(Outcome {
        variant: v,
        ranks: p,
        pages: c.pages(),
        accesses_per_s: total as f64 / secs,
        tallies: counted.is_some().then(|| all.iter().map(|r| Tally { puts: word(r, 0), gets: word(r, 1), digest: word(r, 2) }).collect()),
        reads_checked: all.iter().map(|r| word(r, 3)).sum(),
        words_written: all.iter().map(|r| word(r, 4)).sum(),
        iotlb_hits: all.iter().map(|r| word(r, 6)).sum(),
        iotlb_misses: all.iter().map(|r| word(r, 7)).sum(),
    })
}

/// Runs `variants` one after the other on the same workload and checks that every counting
/// variant ends with the same per-page counts at every rank.
pub fn run_all(c: &mut Counter, variants: &[Variant], w: &Workload) -> Result<Vec<Outcome>> {
    let mut out: Vec<Outcome> = Vec::new();
    for &v in variants {
        let o = run_variant(c, v, w)?;
        if let (Some(first), Some(mine)) = (out.iter().find(|o| o.tallies.is_some()), &o.tallies) {
            if first.tallies.as_ref() != Some(mine) {
                return Err(Error::InvalidArgument(format!(
                    "{} counts differently than {}: {:?} vs {:?}",
                    o.variant.name(),
                    first.variant.name(),
                    mine,
                    first.tallies
                )));
            }
        }
        out.push(o);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn tally_sees_which_page_counted() {
        assert_eq!(Tally::of(&[1, 2], &[3, 4]), Tally::of(&[1, 2], &[3, 4]));
        assert_ne!(Tally::of(&[1, 2], &[3, 4]).digest, Tally::of(&[2, 1], &[3, 4]).digest);
        assert_ne!(Tally::of(&[1, 2], &[3, 4]).digest, Tally::of(&[1, 2], &[4, 3]).digest);
        assert_eq!(Tally::of(&[1, 2], &[3, 4]).puts, 3);
    }
}
