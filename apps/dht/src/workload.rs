//! The inserts, deletes and lookups of one rank, identical for every variant (same seed, same
//! keys, same targets), with an exact collision ratio.
//!
//! A *fresh* insert takes a table position that no rank has used at that target: positions
//! are striped by origin (`stripe * ranks + origin`, scrambled over the table so that they
//! spread over its pages). A *colliding* insert reuses a position this origin has filled at that
//! target before, so it always lands in the overflow heap, whatever the timing — the collision
//! ratio is exactly the share of colliding inserts.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub ranks: usize,
    pub inserts: usize,
    /// Share of inserts that collide (0.0..=1.0).
    pub collisions: f64,
    /// Table cells per volume (power of two).
    pub table: usize,
    pub seed: u64,
    /// Every `delete_every`-th insert of an origin is deleted again afterwards (0: none).
    pub delete_every: usize,
    /// Popularity of the table's pages for fresh inserts: 0 = uniform, else Zipf with this
    /// exponent (key-value workloads are skewed; YCSB's default is 0.99). Which pages are
    /// popular is the same at every target, and scattered over the table.
    pub skew: f64,
}

/// Cells of the table in one 4 KiB page (16-byte cells).
const CELLS_PER_PAGE: usize = 4096 / 16;

/// Draws table pages with Zipf popularity: page `order[i]` has weight 1 / (i+1)^skew.
struct PagePicker {
    cdf: Vec<f64>,
    order: Vec<usize>,
}

impl PagePicker {
    fn new(pages: usize, skew: f64, seed: u64) -> PagePicker {
        let mut acc = 0.0;
        let cdf = (0..pages)
            .map(|i| {
                acc += 1.0 / ((i + 1) as f64).powf(skew);
                acc
            })
            .collect();
        let mut order: Vec<usize> = (0..pages).collect();
        order.shuffle(&mut SmallRng::seed_from_u64(seed));
        PagePicker { cdf, order }
    }
    fn pick(&self, rng: &mut SmallRng) -> usize {
        let u = rng.gen::<f64>() * self.cdf[self.cdf.len() - 1];
        self.order[self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)]
    }
}

pub struct Op {
    pub target: usize,
    pub key: u64,
}

pub struct Workload {
    pub inserts: Vec<Op>,
    pub deletes: Vec<Op>,
    /// Inserts this origin sends to each rank, and deletes.
    pub inserts_to: Vec<u64>,
    pub deletes_to: Vec<u64>,
}

impl Mix {
    /// Heap cells each volume needs: the colliding inserts it can receive, with margin.
    pub fn heap_cells(&self) -> usize {
        ((self.inserts as f64 * self.ranks as f64 * self.collisions / self.ranks as f64) * 1.5) as usize + 1024
    }

    pub fn workload(&self, origin: usize) -> Result<Workload, String> {
        let p = self.ranks;
        let shift = self.table.trailing_zeros();
        let mut rng = SmallRng::seed_from_u64(self.seed ^ (origin as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut fresh = vec![0usize; p];
        let mut used: Vec<Vec<usize>> = vec![Vec::new(); p];
        let pages = (self.table / CELLS_PER_PAGE).max(1);
        let picker = (self.skew > 0.0).then(|| PagePicker::new(pages, self.skew, self.seed));
        // Skewed: per target and page, how many of this origin's stripe slots are taken.
        let mut in_page = vec![vec![0usize; if picker.is_some() { pages } else { 0 }]; p];
        let mut w =
            Workload { inserts: Vec::with_capacity(self.inserts), deletes: Vec::new(), inserts_to: vec![0; p], deletes_to: vec![0; p] };
        for i in 0..self.inserts {
            let target = rng.gen_range(0..p);
            let pos = if !used[target].is_empty() && rng.gen_bool(self.collisions) {
                used[target][rng.gen_range(0..used[target].len())]
            } else if let Some(picker) = &picker {
                // A fresh cell in a popular page: this origin's stripe of it, else the next page.
                let mut page = picker.pick(&mut rng);
                let mut tries = 0;
                while in_page[target][page] * p + origin >= CELLS_PER_PAGE.min(self.table) {
                    page = (page + 1) % pages;
                    tries += 1;
                    if tries > pages {
                        return Err(format!("{} table cells per volume are too few for {} inserts per rank", self.table, self.inserts));
                    }
                }
                let pos = page * CELLS_PER_PAGE + in_page[target][page] * p + origin;
                in_page[target][page] += 1;
                used[target].push(pos);
                pos
            } else {
                let stripe = fresh[target] * p + origin;
                if stripe >= self.table {
                    return Err(format!(
                        "{} table cells per volume are too few for {} inserts per rank: raise the table size",
                        self.table, self.inserts
                    ));
                }
                fresh[target] += 1;
                let pos = scramble(stripe, self.table);
                used[target].push(pos);
                pos
            };
            // Unique per (origin, insert); its low bits are the position.
            let unique = (origin * self.inserts + i + 1) as u64;
            let key = (unique << shift) | pos as u64;
            w.inserts_to[target] += 1;
            w.inserts.push(Op { target, key });
            if self.delete_every > 0 && i % self.delete_every == self.delete_every - 1 {
                w.deletes_to[target] += 1;
                w.deletes.push(Op { target, key });
            }
        }
        Ok(w)
    }
}

/// A bijection on [0, n) for n a power of two (odd multiplier): spreads consecutive stripes
/// over the whole table.
fn scramble(x: usize, n: usize) -> usize {
    let half = n.trailing_zeros() / 2 + 1;
    let y = x.wrapping_mul(0x9e37_79b1) & (n - 1);
    let y = y ^ (y >> half); // a right xorshift inside the word is invertible
    y.wrapping_mul(0x85eb_ca6b) & (n - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_bijection() {
        let n = 1 << 12;
        let mut seen = vec![false; n];
        for x in 0..n {
            let y = scramble(x, n);
            assert!(!seen[y], "{x} -> {y} twice");
            seen[y] = true;
        }
    }

    #[test]
    fn skewed_pages_keep_the_collision_ratio_and_favour_few_pages() {
        let m = Mix { ranks: 2, inserts: 20_000, collisions: 0.05, table: 1 << 16, seed: 7, delete_every: 0, skew: 0.99 };
        let mut filled = std::collections::HashSet::new();
        let (mut collided, mut per_page) = (0, vec![0u32; (1 << 16) / CELLS_PER_PAGE]);
        for o in 0..2 {
            for op in &m.workload(o).unwrap().inserts {
                let pos = (op.key & 0xffff) as usize;
                per_page[pos / CELLS_PER_PAGE] += 1;
                if !filled.insert((op.target, pos)) {
                    collided += 1;
                }
            }
        }
        let ratio = collided as f64 / 40_000.0;
        assert!((ratio - 0.05).abs() < 0.01, "{ratio}");
        per_page.sort_unstable();
        // Uniform would give the top 16 of 256 pages about 1/16 of the inserts; popular pages
        // fill their stripes and spill over, so the skew is damped but clear.
        let top: u32 = per_page.iter().rev().take(16).sum();
        assert!(top > 3 * 40_000 / 16, "the 16 most popular pages of 256 get {top} of 40000 inserts");
    }

    #[test]
    fn collision_ratio_is_exact_and_keys_unique() {
        let m = Mix { ranks: 4, inserts: 20_000, collisions: 0.25, table: 1 << 16, seed: 7, delete_every: 8, skew: 0.0 };
        let mut keys = std::collections::HashSet::new();
        let mut filled = std::collections::HashSet::new();
        let mut collided = 0;
        for o in 0..4 {
            let w = m.workload(o).unwrap();
            assert_eq!(w.inserts_to.iter().sum::<u64>() as usize, m.inserts);
            for op in &w.inserts {
                assert!(keys.insert(op.key));
                if !filled.insert((op.target, op.key & 0xffff)) {
                    collided += 1;
                }
            }
        }
        let ratio = collided as f64 / (4 * m.inserts) as f64;
        assert!((ratio - 0.25).abs() < 0.01, "{ratio}");
    }
}
