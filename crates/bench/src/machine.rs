//! The machine a benchmark ran on, printed in every benchmark's header: numbers from two
//! machines must never be compared, and a reader can only tell them apart if each run names
//! its CPU and how fast that CPU copies memory right now.

use super::timing::{measure_limit, Plan};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::OnceLock;

/// The CPU model as /proc/cpuinfo names it ("unknown CPU" where it does not).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// memcpy bandwidth of 1 MiB copies between two pre-touched buffers in this process, in GB/s
/// (10^9 B/s): measured as a limit (best of 9 batches of ~2 ms), once per process (~20 ms).
pub fn memcpy_gbs() -> f64 {
    static GBS: OnceLock<f64> = OnceLock::new();
    *GBS.get_or_init(|| {
        const SIZE: usize = 1 << 20;
        let (src, mut dst) = (vec![1u8; SIZE], vec![0u8; SIZE]);
        let plan = Plan { reps: 3, batch_ns: 2e6, min_iters: 1, max_iters: 1 << 12 };
        let st = measure_limit::<Infallible>(&plan, |n| {
            for _ in 0..n {
                // SAFETY: two distinct buffers of SIZE bytes.
                unsafe { std::ptr::copy_nonoverlapping(black_box(src.as_ptr()), black_box(dst.as_mut_ptr()), SIZE) };
            }
            Ok(())
        })
        .unwrap_or_else(|e| match e {});
        SIZE as f64 / st.median_ns
    })
}

/// The header line: `# machine: <CPU model>, <n> CPUs online; memcpy 1 MiB: <x> GB/s (...)`.
pub fn header_line() -> String {
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    format!(
        "# machine: {}, {ncpu} CPUs online; memcpy 1 MiB: {:.1} GB/s (best batch, measured in this run); compare ratios, not absolute numbers, across machines",
        cpu_model(),
        memcpy_gbs()
    )
}

/// This machine as every report row and `run.json` name it, read once per process (the CPU
/// model from /proc/cpuinfo, the CPUs online, memcpy GB/s rounded to 0.01).
pub fn current() -> activerma_report::Machine {
    static MACHINE: OnceLock<activerma_report::Machine> = OnceLock::new();
    MACHINE
        .get_or_init(|| activerma_report::Machine {
            cpu: cpu_model(),
            // SAFETY: sysconf has no preconditions.
            cpus: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32,
            memcpy_gbs: (memcpy_gbs() * 100.0).round() / 100.0,
        })
        .clone()
}
