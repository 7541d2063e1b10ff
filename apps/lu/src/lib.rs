//! LU on the object DSM (the Jackal paper's second application): SPLASH-2's blocked dense LU
//! factorization without pivoting, of an n x n matrix of doubles kept as one flattened DSM
//! array (the paper: "a single flattened array of doubles"), block-contiguous — block (I, J)
//! is B x B doubles in a chunk of its own (B = 16: 2 KiB chunks, the paper's "2 KByte array
//! segments") — homed at rank 0. Blocks are owned in a 2-D scatter over a pr x pc grid of
//! ranks, and only a block's owner writes it.
//!
//! ```text
//! for K in 0..nb:
//!   owner of (K, K): factor it in place (L unit lower, U upper)
//!   barrier
//!   owners of (K, J > K): A[K][J] = L_KK^-1 A[K][J];  owners of (I > K, K): A[I][K] = A[I][K] U_KK^-1
//!   barrier
//!   owners of (I > K, J > K): A[I][J] -= A[I][K] A[K][J]
//!   barrier
//! ```
//! `serial` runs the same blocked algorithm on one process (same operations per block, same
//! order within a block), so the DSM run must agree to rounding.

use activerma::{Error, Result};
use activerma_dsm::{ArrayRef, Dsm};
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub n: usize,
    pub block: usize,
}

impl Params {
    fn blocks(&self) -> usize {
        self.n / self.block
    }
    fn check(&self) -> Result<()> {
        if self.block == 0 || !self.n.is_multiple_of(self.block) {
            return Err(Error::InvalidArgument(format!("lu: n = {} is not a multiple of the block size {}", self.n, self.block)));
        }
        Ok(())
    }
}

pub struct Outcome {
    /// The factored matrix, row-major (L below the diagonal, U on and above it), read by this
    /// rank through the DSM.
    pub matrix: Vec<f64>,
    pub seconds: f64,
}

/// The matrix to factor: diagonally dominant (no pivoting needed), deterministic.
pub fn element(i: usize, j: usize, n: usize) -> f64 {
    let x = ((i * 31 + j * 17) % 97) as f64 / 97.0 - 0.5;
    if i == j {
        x + n as f64
    } else {
        x
    }
}

/// The owner of block (bi, bj) among `ranks`: a 2-D scatter over the squarest grid.
fn owner(bi: usize, bj: usize, ranks: usize) -> usize {
    let pr = (1..=ranks).rev().find(|d| ranks.is_multiple_of(*d) && d * d <= ranks).unwrap_or(1);
    let pc = ranks / pr;
    (bi % pr) * pc + (bj % pc)
}

type Block = Vec<f64>;

fn factor_diagonal(a: &mut [f64], b: usize) {
    for k in 0..b {
        for i in k + 1..b {
            a[i * b + k] /= a[k * b + k];
            let l = a[i * b + k];
            for j in k + 1..b {
                a[i * b + j] -= l * a[k * b + j];
            }
        }
    }
}

/// A[K][J] = L^-1 A[K][J] (L: the unit lower triangle of the diagonal block).
fn solve_row(diag: &[f64], a: &mut [f64], b: usize) {
    for k in 0..b {
        for i in k + 1..b {
            let l = diag[i * b + k];
            for j in 0..b {
                a[i * b + j] -= l * a[k * b + j];
            }
        }
    }
}

/// A[I][K] = A[I][K] U^-1 (U: the upper triangle of the diagonal block).
fn solve_column(diag: &[f64], a: &mut [f64], b: usize) {
    for k in 0..b {
        for i in 0..b {
            a[i * b + k] /= diag[k * b + k];
            let x = a[i * b + k];
            for j in k + 1..b {
                a[i * b + j] -= x * diag[k * b + j];
            }
        }
    }
}

/// A[I][J] -= A[I][K] A[K][J].
fn update_interior(l: &[f64], u: &[f64], a: &mut [f64], b: usize) {
    for i in 0..b {
        for k in 0..b {
            let x = l[i * b + k];
            for j in 0..b {
                a[i * b + j] -= x * u[k * b + j];
            }
        }
    }
}

fn initial_block(bi: usize, bj: usize, p: Params) -> Block {
    let b = p.block;
    (0..b * b).map(|e| element(bi * b + e / b, bj * b + e % b, p.n)).collect()
}

/// Block-contiguous blocks to a row-major matrix.
fn assemble(blocks: &[Block], p: Params) -> Vec<f64> {
    let (b, nb) = (p.block, p.blocks());
    let mut out = vec![0.0; p.n * p.n];
    for (k, blk) in blocks.iter().enumerate() {
        let (bi, bj) = (k / nb, k % nb);
        for e in 0..b * b {
            out[(bi * b + e / b) * p.n + bj * b + e % b] = blk[e];
        }
    }
    out
}

/// The same blocked algorithm on one process.
pub fn serial(p: Params) -> Result<Vec<f64>> {
    p.check()?;
    let (b, nb) = (p.block, p.blocks());
    let mut a: Vec<Block> = (0..nb * nb).map(|k| initial_block(k / nb, k % nb, p)).collect();
    for k in 0..nb {
        factor_diagonal(&mut a[k * nb + k], b);
        let diag = a[k * nb + k].clone();
        for j in k + 1..nb {
            solve_row(&diag, &mut a[k * nb + j], b);
        }
        for i in k + 1..nb {
            solve_column(&diag, &mut a[i * nb + k], b);
        }
        for i in k + 1..nb {
            for j in k + 1..nb {
                let (l, u) = (a[i * nb + k].clone(), a[k * nb + j].clone());
                update_interior(&l, &u, &mut a[i * nb + j], b);
            }
        }
    }
    Ok(assemble(&a, p))
}

fn read_block(dsm: &Dsm, m: &ArrayRef, k: usize) -> Result<Block> {
    let v = dsm.read(m.chunk_ref(k as u64)?)?;
    Ok(v.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect())
}

fn write_block(dsm: &Dsm, m: &ArrayRef, k: usize, blk: &[f64]) -> Result<()> {
    let mut v = dsm.write(m.chunk_ref(k as u64)?)?;
    for (dst, x) in v.chunks_exact_mut(8).zip(blk) {
        dst.copy_from_slice(&x.to_le_bytes());
    }
    Ok(())
}

/// Factors the matrix on the DSM (collective) and reads the result.
pub fn run(dsm: &mut Dsm, p: Params) -> Result<Outcome> {
    p.check()?;
    let (me, ranks) = (dsm.world().rank(), dsm.world().size());
    let (b, nb) = (p.block, p.blocks());
    // One array at rank 0, one chunk per block.
    let m = dsm.share_array(0, if me == 0 { Some(dsm.alloc_array_chunked(p.n * p.n * 8, b * b * 8)?) } else { None })?;
    let mine = |bi: usize, bj: usize| owner(bi, bj, ranks) == me;
    for k in 0..nb * nb {
        if mine(k / nb, k % nb) {
            write_block(dsm, &m, k, &initial_block(k / nb, k % nb, p))?;
        }
    }
    dsm.barrier()?;
    let t0 = Instant::now();
    for k in 0..nb {
        if mine(k, k) {
            let mut d = read_block(dsm, &m, k * nb + k)?;
            factor_diagonal(&mut d, b);
            write_block(dsm, &m, k * nb + k, &d)?;
        }
        dsm.barrier()?;
        let perimeter = (k + 1..nb).map(|j| (k, j, true)).chain((k + 1..nb).map(|i| (i, k, false)));
        let mut diag: Option<Block> = None;
        for (bi, bj, row) in perimeter.filter(|&(bi, bj, _)| mine(bi, bj)) {
            let d = match &diag {
                Some(d) => d,
                None => diag.insert(read_block(dsm, &m, k * nb + k)?),
            };
            let mut a = read_block(dsm, &m, bi * nb + bj)?;
            if row {
                solve_row(d, &mut a, b);
            } else {
                solve_column(d, &mut a, b);
            }
            write_block(dsm, &m, bi * nb + bj, &a)?;
        }
        dsm.barrier()?;
        for i in k + 1..nb {
            for j in (k + 1..nb).filter(|&j| mine(i, j)) {
                let (l, u) = (read_block(dsm, &m, i * nb + k)?, read_block(dsm, &m, k * nb + j)?);
                let mut a = read_block(dsm, &m, i * nb + j)?;
                update_interior(&l, &u, &mut a, b);
                write_block(dsm, &m, i * nb + j, &a)?;
            }
        }
        dsm.barrier()?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let blocks = (0..nb * nb).map(|k| read_block(dsm, &m, k)).collect::<Result<Vec<_>>>()?;
    dsm.barrier()?;
    Ok(Outcome { matrix: assemble(&blocks, p), seconds })
}

/// The largest difference between two factored matrices, relative to the largest element.
pub fn deviation(a: &[f64], b: &[f64]) -> f64 {
    let scale = a.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serial_factors_multiply_back_to_the_matrix() {
        let p = Params { n: 48, block: 8 };
        let lu = serial(p).unwrap();
        let n = p.n;
        for i in 0..n {
            for j in 0..n {
                let mut s = 0.0;
                for k in 0..=i.min(j) {
                    let l = if k == i { 1.0 } else { lu[i * n + k] };
                    s += l * lu[k * n + j];
                }
                assert!((s - element(i, j, n)).abs() < 1e-9, "({i}, {j}): {s} vs {}", element(i, j, n));
            }
        }
    }

    #[test]
    fn owners_cover_the_grid() {
        for ranks in 1..=8 {
            let used: std::collections::BTreeSet<usize> = (0..8).flat_map(|i| (0..8).map(move |j| owner(i, j, ranks))).collect();
            assert_eq!(used.len(), ranks, "{ranks} ranks");
        }
    }
}
