//! The inserts, deletes and lookups of one rank, identical for every variant (same seed, same
//! keys, same targets), with an exact collision ratio.
//!
//! A *fresh* insert takes a table position that no rank has used at that target: positions
//! are striped by origin (`stripe * ranks + origin`, scrambled over the table so that they
//! spread over its pages). A *colliding* insert reuses a position this origin has filled at that
//! target before, so it always lands in the overflow heap, whatever the timing — the collision
//! ratio is exactly the share of colliding inserts.

use rand::rngs::SmallRng;
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
        let mut w =
            Workload { inserts: Vec::with_capacity(self.inserts), deletes: Vec::new(), inserts_to: vec![0; p], deletes_to: vec![0; p] };
        for i in 0..self.inserts {
            let target = rng.gen_range(0..p);
            let pos = if !used[target].is_empty() && rng.gen_bool(self.collisions) {
                used[target][rng.gen_range(0..used[target].len())]
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
    fn collision_ratio_is_exact_and_keys_unique() {
        let m = Mix { ranks: 4, inserts: 20_000, collisions: 0.25, table: 1 << 16, seed: 7, delete_every: 8 };
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
