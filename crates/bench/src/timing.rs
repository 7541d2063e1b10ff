//! The benchmarks' one statistics module. Timing: batches of operations between two `Instant`
//! readings, repeated; the reported time per operation is the median over the repetitions of
//! (batch time / operations in the batch). Samples measured elsewhere (a job's rounds, single
//! puts) are summarized by `Measured::of_samples` and `percentile`.
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

/// A measured quantity: the reported value and its spread over the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub value: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub reps: u32,
}

impl Measured {
    /// One measurement: no spread to show.
    pub fn single(v: f64) -> Measured {
        Measured { value: v, min: v, median: v, max: v, reps: 1 }
    }

    /// The median of `samples` (the mean of the middle two for an even count), with their
    /// extremes; `single(NaN)` for none.
    pub fn of_samples(samples: &[f64]) -> Measured {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        if s.is_empty() {
            return Measured::single(f64::NAN);
        }
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) };
        Measured { value: median, min: s[0], median, max: s[n - 1], reps: n as u32 }
    }

    /// A time per operation in µs.
    pub fn latency_us(st: &Stats) -> Measured {
        Measured { value: st.median_ns / 1e3, min: st.min_ns / 1e3, median: st.median_ns / 1e3, max: st.max_ns / 1e3, reps: st.reps as u32 }
    }

    /// A bandwidth in MB/s (10^6 B/s) for `bytes` per operation: the slowest repetition is the
    /// minimum.
    pub fn bandwidth_mbs(st: &Stats, bytes: usize) -> Measured {
        let mbs = |ns: f64| bytes as f64 / ns * 1e3;
        Measured { value: mbs(st.median_ns), min: mbs(st.max_ns), median: mbs(st.median_ns), max: mbs(st.min_ns), reps: st.reps as u32 }
    }
}

/// The value at fraction `p` (0..=1) of `sorted` (nearest rank; `sorted` ascending, not empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    fn samples_and_percentiles() {
        let m = Measured::of_samples(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((m.value, m.min, m.max, m.reps), (2.5, 1.0, 10.0, 4));
        assert!(Measured::of_samples(&[]).value.is_nan());
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.5), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], 1.0), 2.0);
    }

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
