//! Timing: batches of operations between two `Instant` readings, repeated; the reported time
//! per operation is the median over the repetitions of (batch time / operations in the batch).
//!
//! The number of operations per batch is calibrated first (doubling until a batch takes an
//! eighth of the target batch time), so that fast operations run in batches long enough for
//! the clock, and slow ones do not take forever. Calibration and one extra batch of a tenth of
//! the size warm up caches, page tables and the target.

use std::time::Instant;

/// Most repetitions a measurement keeps (a fixed array: no allocation while timing).
pub const MAX_REPS: usize = 64;

/// How to measure one row.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub reps: usize,
    /// Target duration of one timed batch, in ns.
    pub batch_ns: f64,
    pub min_iters: u64,
    pub max_iters: u64,
}

/// Per-operation time of one row, in ns.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub median_ns: f64,
    pub min_ns: f64,
    /// The slowest repetition (the spread the report draws).
    pub max_ns: f64,
    pub iters: u64,
    pub reps: usize,
}

impl Stats {
    pub fn median_us(&self) -> f64 {
        self.median_ns / 1e3
    }
    pub fn min_us(&self) -> f64 {
        self.min_ns / 1e3
    }
    /// Bandwidth in MB/s (10^6 B/s, like OSU) for `bytes` moved per operation.
    pub fn mbs(&self, bytes: usize) -> f64 {
        bytes as f64 / self.median_ns * 1e3
    }
    /// Best repetition's bandwidth.
    pub fn max_mbs(&self, bytes: usize) -> f64 {
        bytes as f64 / self.min_ns * 1e3
    }
}

#[inline]
fn time_batch<E>(batch: &mut impl FnMut(u64) -> Result<(), E>, n: u64) -> Result<f64, E> {
    let t = Instant::now();
    batch(n)?;
    Ok(t.elapsed().as_nanos() as f64)
}

/// Runs `batch(n)` (which must perform exactly `n` operations) as the plan says.
/// A physical limit must be a lower bound on what any code can do: it is measured with three
/// times the repetitions and reported as its best batch (median = min), so that a noisy
/// moment cannot make it look slower than it is.
pub fn measure_limit<E>(plan: &Plan, batch: impl FnMut(u64) -> Result<(), E>) -> Result<Stats, E> {
    let best = Plan { reps: (plan.reps * 3).min(MAX_REPS), ..*plan };
    let st = measure(&best, batch)?;
    Ok(Stats { median_ns: st.min_ns, ..st })
}

pub fn measure<E>(plan: &Plan, mut batch: impl FnMut(u64) -> Result<(), E>) -> Result<Stats, E> {
    let reps = plan.reps.clamp(1, MAX_REPS);
    let mut n = 1u64;
    let per_op = loop {
        let t = time_batch(&mut batch, n)?;
        if t >= plan.batch_ns / 8.0 || n >= plan.max_iters {
            break t / n as f64;
        }
        n = (n * 2).min(plan.max_iters);
    };
    let iters = ((plan.batch_ns / per_op.max(0.1)) as u64).clamp(plan.min_iters.max(1), plan.max_iters.max(1));
    time_batch(&mut batch, (iters / 10).max(1))?; // warm-up at the final batch size's pace
    let mut per = [0f64; MAX_REPS];
    for p in per.iter_mut().take(reps) {
        *p = time_batch(&mut batch, iters)? / iters as f64;
    }
    let per = &mut per[..reps];
    per.sort_by(|a, b| a.total_cmp(b));
    let median = if reps % 2 == 1 { per[reps / 2] } else { 0.5 * (per[reps / 2 - 1] + per[reps / 2]) };
    Ok(Stats { median_ns: median, min_ns: per[0], max_ns: per[reps - 1], iters, reps })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_operations_and_orders_stats() {
        let plan = Plan { reps: 5, batch_ns: 200_000.0, min_iters: 3, max_iters: 1000 };
        let mut ops = 0u64;
        let s = measure::<()>(&plan, |n| {
            for _ in 0..n {
                ops += 1;
                std::hint::black_box(ops);
            }
            Ok(())
        })
        .unwrap();
        assert!(s.iters >= 3 && s.iters <= 1000);
        assert!(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns);
        assert!(ops >= s.iters * 5);
    }
}
