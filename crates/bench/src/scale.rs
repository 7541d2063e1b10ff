//! `activerma bench scale`: how a one-host job grows with its ranks — start-up time, the job's
//! control memory (address space, and what is resident after every rank has sent active
//! messages to every other rank), barrier latency and the all-to-all active-message rate — for
//! 2 … 256 ranks, on one host and split over two hosts emulated by the smp conduit
//! (`ACTIVERMA_SMP_RANKS_PER_HOST` = half the ranks) — or, with ACTIVERMA_BENCH_LAUNCH, as
//! that launcher places them (`bench/over_hosts.sh scale`: the mpi conduit over two emulated
//! hosts, MPI over TCP between them). Beyond the machine's cores the ranks are
//! oversubscribed: the header and every line say so, and the barrier and message rates then
//! measure the scheduler as much as the runtime.
//!
//! Control memory (`World::control_memory`) is, on smp, the job's control memfd: every rank's
//! inbox and translation table, the barrier and exchange areas; on mpi, the tables and inboxes
//! of rank 0's node (MPI's own buffers are not counted). Per rank: divided by the ranks it
//! serves. Its size is address space; its pages in memory (mincore) are what the job made
//! resident. A rank's access-log arena is not in it: a file the rank makes when it first logs
//! (ACTIVERMA_LOG_ARENA bytes), as its segments are memory it asked for; these jobs log nothing.

use super::dsm_micro::check;
use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::{AmCtx, FIRST_USER_HANDLER};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const WORKER_ENV: &str = "ACTIVERMA_BENCH_SCALE";
const OUT_ENV: &str = "ACTIVERMA_BENCH_SCALE_OUT";
const START_ENV: &str = "ACTIVERMA_BENCH_SCALE_T0";
const LAYOUT_ENV: &str = "ACTIVERMA_BENCH_SCALE_LAYOUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_SCALE_QUICK";
const COUNT: u16 = FIRST_USER_HANDLER;

/// The targets at 256 ranks.
const STARTUP_TARGET_S: f64 = 2.0;
const CONTROL_TARGET_MB: f64 = 16.0;

/// Segment size per rank in jobs another launcher starts: Open MPI reserves every rank's heap
/// in /dev/shm when the window is made (256 ranks x 1 GiB would not fit).
const LAUNCHED_SEGMENT: &str = "32M";

pub fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

fn rank_counts(quick: bool) -> Vec<u32> {
    if quick {
        vec![2, 8, 32]
    } else {
        vec![2, 4, 8, 16, 32, 64, 128, 256]
    }
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// The parent: a job per layout and rank count, then the table and the checks.
pub fn scale(args: &BenchArgs) -> BResult<()> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("activerma bench scale: one-host jobs of 2 to 256 ranks (this machine: {cores} cores; more ranks than cores are oversubscribed); load {}", super::load_avg());
    println!("{}", super::machine::header_line());
    let out = super::jobs::rows_file("scale");
    let _ = std::fs::remove_file(&out);
    let counts = rank_counts(args.quick);
    // Started by another launcher (ACTIVERMA_BENCH_LAUNCH, e.g. MPI over the emulated hosts:
    // bench/over_hosts.sh), the jobs are that launcher's layout alone.
    let launched = std::env::var(super::jobs::LAUNCH_ENV).ok().filter(|l| !l.trim().is_empty());
    let layouts: Vec<String> = match &launched {
        Some(l) => {
            println!("# jobs started by {}={l}; ACTIVERMA_SEGMENT_SIZE={LAUNCHED_SEGMENT} per rank", super::jobs::LAUNCH_ENV);
            vec!["launched".into()]
        }
        None => vec!["one host".into(), "2 emulated hosts".into()],
    };
    for layout in &layouts {
        for &n in &counts {
            let mut env = vec![
                (WORKER_ENV.to_string(), "1".to_string()),
                (OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
                (LAYOUT_ENV.to_string(), layout.clone()),
                (START_ENV.to_string(), now_ns().to_string()),
            ];
            if layout == "launched" {
                // An MPI may reserve every rank's heap in /dev/shm up front (Open MPI does).
                env.push(("ACTIVERMA_SEGMENT_SIZE".to_string(), LAUNCHED_SEGMENT.to_string()));
            }
            if layout == "2 emulated hosts" {
                env.push(("ACTIVERMA_SMP_RANKS_PER_HOST".to_string(), (n / 2).max(1).to_string()));
            }
            if args.quick {
                env.push((QUICK_ENV.to_string(), "1".to_string()));
            }
            let code = super::jobs::run_with_env(n, &["bench", "scale", "--rank-worker"], &env, 900.0)?;
            if code != 0 {
                return Err(format!("the {layout} job of {n} ranks failed (exit code {code})").into());
            }
        }
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    let lines: Vec<(String, u32, String, f64)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((f.first()?.to_string(), f.get(1)?.parse().ok()?, f.get(2)?.to_string(), f.get(3)?.parse().ok()?))
        })
        .collect();
    let find = |layout: &str, n: u32, metric: &str| lines.iter().find(|l| l.0 == layout && l.1 == n && l.2 == metric).map(|l| l.3);
    let metrics = [
        ("startup_s", "start-up (s)", "s"),
        ("control_virtual_mb", "control memory / rank (MB, address space)", "MB"),
        ("control_resident_mb", "control memory / rank (MB, resident after all-to-all)", "MB"),
        ("inbox_kb", "of which its inbox (KiB)", "KiB"),
        ("barrier_us", "barrier (us)", "us"),
        ("am_rate_m", "all-to-all AM rate (M msg/s, whole job)", "M/s"),
    ];
    for layout in layouts.iter().map(String::as_str) {
        println!(
            "# {layout}: ranks {}",
            counts.iter().map(|n| format!("{n:>9}{}", if *n as usize > cores { "*" } else { " " })).collect::<String>()
        );
        for (metric, label, unit) in metrics {
            let cells: String =
                counts.iter().map(|&n| find(layout, n, metric).map_or(format!("{:>10}", "—"), |v| format!("{v:>10.3}"))).collect();
            println!("  {label:<56}{cells}");
            for &n in &counts {
                if let Some(v) = find(layout, n, metric) {
                    let params = rows::params([
                        ("layout", json!(layout)),
                        ("ranks", json!(n)),
                        ("metric", json!(metric)),
                        ("oversubscribed", json!(n as usize > cores)),
                    ]);
                    rows::emit("scale", &format!("{layout}-{n}-{metric}"), params, unit, Measured::single(v), &[]);
                }
            }
        }
    }
    println!("# * more ranks than cores: oversubscribed");
    let top = *counts.last().unwrap();
    for layout in layouts.iter().map(String::as_str) {
        // (The start-up target is the one-host job's; another launcher's start-up is its own.)
        if let Some(s) = find(layout, top, "startup_s").filter(|_| layout != "launched") {
            check("scale-check", &format!("start-up, {top} ranks, {layout} (s)"), s, "<= 2", s <= STARTUP_TARGET_S);
        }
        for (metric, what) in [("control_virtual_mb", "address space"), ("control_resident_mb", "resident")] {
            if let Some(mb) = find(layout, top, metric) {
                let label = format!("control memory per rank, {top} ranks, {layout} (MB {what})");
                check("scale-check", &label, mb, "<= 16", mb <= CONTROL_TARGET_MB);
            }
        }
    }
    Ok(())
}

/// One rank: init (timed from the parent's start), all-to-all messages, barriers.
pub fn worker() -> BResult<()> {
    let t0: u128 = std::env::var(START_ENV)?.parse()?;
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    w.register_handler(
        COUNT,
        Arc::new(move |_: &AmCtx, _: &[u8]| {
            g.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    w.barrier()?;
    let started_s = (now_ns().saturating_sub(t0)) as f64 / 1e9;
    // Every rank's time to be up, the slowest decides.
    let startup = w.allgather(&started_s.to_le_bytes())?.iter().map(|b| f64::from_le_bytes(b[..8].try_into().unwrap())).fold(0.0, f64::max);

    // All-to-all: every rank sends `per_pair` short messages to every other rank, round robin.
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let per_pair = ((if quick { 20_000 } else { 100_000 }) / (n * n)).clamp(4, 1000) as u64;
    let expected = per_pair * (n as u64 - 1);
    let t = Instant::now();
    for k in 0..per_pair {
        for d in 1..n {
            w.send_am((me + d) % n, COUNT, k, &[0u8; 8])?;
        }
    }
    while got.load(Ordering::Relaxed) < expected {
        w.progress();
        std::thread::yield_now();
    }
    w.barrier()?;
    let secs = t.elapsed().as_secs_f64();
    let rate = (expected * n as u64) as f64 / secs / 1e6;
    let control = w.control_memory().ok_or("the conduit does not report its control memory")?;

    let rounds = if quick { 50 } else { 200 };
    w.barrier()?;
    let t = Instant::now();
    for _ in 0..rounds {
        w.barrier()?;
    }
    let barrier_us = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    if me == 0 {
        let layout = std::env::var(LAYOUT_ENV)?;
        let slots = w.config().get_u64(activerma::settings::AM_SLOTS)? as f64;
        let slot_size = w.config().get_u64(activerma::settings::AM_SLOT_SIZE)? as f64;
        let mb = |b: usize| b as f64 / control.ranks as f64 / 1e6;
        let mut text = String::new();
        for (metric, v) in [
            ("startup_s", startup),
            ("control_virtual_mb", mb(control.bytes)),
            ("control_resident_mb", mb(control.resident)),
            ("inbox_kb", slots * slot_size / 1024.0),
            ("barrier_us", barrier_us),
            ("am_rate_m", rate),
        ] {
            text.push_str(&format!("{layout}\t{n}\t{metric}\t{v}\n"));
        }
        std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(OUT_ENV)?)?.write_all(text.as_bytes())?;
    }
    Ok(w.finalize()?)
}
