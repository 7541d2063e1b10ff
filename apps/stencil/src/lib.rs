//! A 5-point Jacobi stencil on an `n x n` grid split into row slabs, one per rank. Every
//! iteration each rank puts its first and last rows into its neighbours' halo rows (private
//! memory they exposed: under ACTIVERMA_REGISTRATION=part, unpinned), then all meet in a
//! barrier and sweep. The buffers are reused, so only the first exchange meets missing pages:
//! the PART paper's application result is that such a code runs as fast unpinned as with
//! pre-touched buffers.

mod grid;

pub use grid::Slab;

use activerma::{Prot, RemotePtr, Result, World};
use std::time::Instant;

pub struct Outcome {
    pub seconds: f64,
    /// Sum over the whole grid after the last iteration (the same in every configuration).
    pub checksum: f64,
}

/// Collective: `iters` iterations on an `n x n` grid (rows split evenly; `n` divisible by the
/// ranks). Timed from the first exchange to the last barrier, on rank 0.
pub fn run(world: &World, n: usize, iters: usize, pretouch: bool, huge_pages: bool) -> Result<Outcome> {
    let (me, p) = (world.rank(), world.size());
    if !n.is_multiple_of(p) {
        return Err(activerma::Error::InvalidArgument(format!("{n} rows do not split evenly over {p} ranks")));
    }
    let rows = n / p;
    let slab = Slab::new(rows, n, pretouch, huge_pages)?;
    // SAFETY: the slab outlives the exposure (dropped at the end of this function, after it).
    let exposed = unsafe { world.expose_raw(slab.addr(), slab.bytes(), Prot::ReadWrite)? };
    let bases: Vec<u64> =
        world.allgather(&(exposed.addr() as u64).to_le_bytes())?.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap())).collect();
    // Initial values of the owned rows (a fixed hot row at the global top). The halo rows are
    // left untouched: the neighbours' first puts are what fills them (under PART, a fault).
    for c in 0..2 {
        for r in 1..=rows {
            let global = (me * rows + r) as f64;
            for (j, v) in slab.row_mut(c, r).iter_mut().enumerate() {
                *v = if me == 0 && r == 1 { 100.0 } else { ((global * 7.0 + j as f64) % 13.0) * 0.01 };
            }
        }
    }
    world.barrier()?;
    let t = Instant::now();
    let bytes = |row: &[f64]| -> Vec<u8> { row.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let mut cur = 0;
    for _ in 0..iters {
        // Halo exchange into the copy the next sweep reads.
        if me > 0 {
            let at = RemotePtr::new(me - 1, bases[me - 1] as usize + slab.row_off(cur, rows + 1));
            world.put_nbi(at, &bytes(slab.row(cur, 1)))?;
        }
        if me + 1 < p {
            let at = RemotePtr::new(me + 1, bases[me + 1] as usize + slab.row_off(cur, 0));
            world.put_nbi(at, &bytes(slab.row(cur, rows)))?;
        }
        world.flush_all()?;
        world.barrier()?;
        // Sweep interior rows; the global top and bottom rows stay fixed (boundary).
        let next = 1 - cur;
        for r in 1..=rows {
            let fixed = (me == 0 && r == 1) || (me + 1 == p && r == rows);
            let (up, mid, down) = (slab.row(cur, r - 1), slab.row(cur, r), slab.row(cur, r + 1));
            let out = slab.row_mut(next, r);
            for j in 0..n {
                out[j] = if fixed || j == 0 || j + 1 == n { mid[j] } else { 0.25 * (up[j] + down[j] + mid[j - 1] + mid[j + 1]) };
            }
        }
        cur = next;
        world.barrier()?;
    }
    let seconds = t.elapsed().as_secs_f64();
    let mine: f64 = (1..=rows).map(|r| slab.row(cur, r).iter().sum::<f64>()).sum();
    let all = world.allgather(&mine.to_le_bytes())?;
    let checksum = all.iter().map(|b| f64::from_le_bytes(b[..8].try_into().unwrap())).sum();
    drop(exposed);
    drop(slab);
    Ok(Outcome { seconds, checksum })
}
