//! `activerma bench dsm`: the Jackal paper's Table 1 — the object DSM's micro-benchmarks, for
//! 1, 2 and 4 ranks, on the raw conduit and on the modelled platform, a job per protocol:
//!
//! ```text
//! locks/s        every rank: synchronized (one object homed at rank 0) { }, in a loop
//! barriers/s     the paper's barrier: an object with a count; lock; count += 1; the last
//!                notify_all()s, the others wait(); unlock
//! object request rank 1 walks a fresh linked list of 64-byte nodes homed at rank 0: one
//!   latency      fetch per node (the paper's traversal), time per node
//! bandwidth      every rank changes every 8th double of a 32 KiB array homed at the next
//!                rank, then an empty synchronized block on its own object publishes it;
//!                32 KiB x iterations / time, per rank
//! ```
//! The paper's rows map to protocols: invalidation flush bandwidth and the RDMA object request
//! under invalidate-rdma, the plain request under invalidate, in-place and diff-array update
//! bandwidth under update-in-place and update-diff; locks and barriers under invalidate-rdma.

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::Result;
use activerma_dsm::{Dsm, GlobalRef, Protocol};
use serde_json::json;
use std::io::Write;
use std::time::Instant;

const NET_ENV: &str = "ACTIVERMA_BENCH_DSM_NET";
const OUT_ENV: &str = "ACTIVERMA_BENCH_DSM_OUT";
pub(crate) const QUICK_ENV: &str = "ACTIVERMA_BENCH_DSM_QUICK";

/// The paper's platform (10 Gb/s InfiniBand of 2005, Jackal's own verbs layer): 1 GB/s of
/// data (SDR 4x signals 10 Gb/s, 8 Gb/s after its 8b/10b coding), 3 us per remote operation
/// (the RDMA write latency of SDR-era verbs; the paper's 24.6 us object request is that plus
/// Jackal's protocol), and the 1 us receive overhead of a message the CPU takes in.
pub(crate) const JACKAL_MODEL: [(&str, &str); 3] =
    [("ACTIVERMA_NET_LATENCY_NS", "3000"), ("ACTIVERMA_NET_BANDWIDTH_MBS", "1000"), ("ACTIVERMA_NET_RECV_NS", "1000")];

pub(crate) fn networks() -> Vec<(&'static str, Vec<(String, String)>)> {
    let model = JACKAL_MODEL.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
    vec![("raw", vec![]), ("modelled", model)]
}

pub fn is_worker() -> bool {
    std::env::var_os(NET_ENV).is_some() && std::env::var_os(super::dsm_apps::APP_ENV).is_none()
}

/// Ranks of every job: 1, 2 and 4 (the paper's 1, 2 and 8 machines; this VM has 2 CPUs, so
/// 4 ranks share them).
pub(crate) fn rank_counts(args: &BenchArgs) -> Vec<u32> {
    if args.ranks.is_empty() {
        vec![1, 2, 4]
    } else {
        args.ranks.clone()
    }
}

/// One line of results: (network, ranks, protocol, metric, value).
type Line = (String, u32, String, String, f64);

pub(crate) fn read_lines(path: &std::path::Path) -> BResult<Vec<Line>> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [net, ranks, protocol, metric, value] = f[..] else { continue };
        out.push((net.into(), ranks.parse()?, protocol.into(), metric.into(), value.parse()?));
    }
    Ok(out)
}

pub(crate) fn find(lines: &[Line], net: &str, ranks: u32, protocol: &str, metric: &str) -> Option<f64> {
    lines.iter().find(|l| l.0 == net && l.1 == ranks && l.2 == protocol && l.3 == metric).map(|l| l.4)
}

/// The parent: a job per network, rank count and protocol; then Table 1 and the checks.
pub fn dsm(args: &BenchArgs) -> BResult<()> {
    println!("activerma bench dsm: the object DSM's micro-benchmarks (the Jackal paper's Table 1); load {}", super::load_avg());
    println!("{}", super::machine::header_line());
    println!("modelled platform: {}", JACKAL_MODEL.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
    let ranks = rank_counts(args);
    let lines = run_jobs(args, "dsm", &ranks, &[], false, 1200.0)?;
    table(&lines, &ranks);
    Ok(())
}

/// The page-granular mode's row label: the protocol it runs, with the MMU for access checks.
pub(crate) const MMU_VARIANT: &str = "invalidate-rdma+mmu";

/// What a job's lines are labelled with: its protocol, or `MMU_VARIANT`.
pub(crate) fn variant(dsm: &Dsm) -> &'static str {
    if dsm.page_granular() {
        MMU_VARIANT
    } else {
        dsm.protocol().name()
    }
}

/// A job of `bench <which> --rank-worker` per network, rank count and protocol (the
/// protocol and the network are job-wide settings), and with `mmu` one more under the
/// page-granular mode (`MMU_VARIANT`); the lines their rank 0s wrote.
pub(crate) fn run_jobs(
    args: &BenchArgs,
    which: &str,
    ranks: &[u32],
    extra: &[(&str, &str)],
    mmu: bool,
    timeout_s: f64,
) -> BResult<Vec<Line>> {
    let out = super::jobs::rows_file(which);
    let _ = std::fs::remove_file(&out);
    let mut variants: Vec<(Protocol, &str)> = Protocol::ALL.iter().map(|&p| (p, "checks")).collect();
    if mmu {
        variants.push((Protocol::InvalidateRdma, "mmu"));
    }
    for (name, settings) in networks() {
        for &n in ranks {
            for &(p, access) in &variants {
                let mut env = vec![
                    ("ACTIVERMA_DSM_ACCESS".to_string(), access.to_string()),
                    (NET_ENV.to_string(), name.to_string()),
                    (OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
                    ("ACTIVERMA_DSM_PROTOCOL".to_string(), p.name().to_string()),
                    // The paper's Jackal: an upcall thread asleep until a message comes.
                    ("ACTIVERMA_PROGRESS".to_string(), "wake".to_string()),
                ];
                if args.quick {
                    env.push((QUICK_ENV.to_string(), "1".to_string()));
                }
                env.extend(extra.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
                env.extend(settings.iter().cloned());
                let code = super::jobs::run_with_env(n, &["bench", which, "--rank-worker"], &env, timeout_s)?;
                if code != 0 {
                    return Err(format!("the {name} job of {n} ranks under {} ({access}) failed (exit code {code})", p.name()).into());
                }
            }
        }
    }
    let lines = read_lines(&out);
    let _ = std::fs::remove_file(&out);
    lines
}

/// Table 1, ours beside the paper's, and the checks.
fn table(lines: &[Line], ranks: &[u32]) {
    // (label, protocol, metric, unit, the paper's 1 / 2 / 8 machines)
    type Row<'a> = (&'a str, &'a str, &'a str, &'a str, [Option<f64>; 3]);
    let rows: [Row; 10] = [
        ("access check, hit (ns)", "invalidate-rdma", "hit_ns", "ns", [None, None, None]),
        ("plain load, same pattern (ns)", "invalidate-rdma", "plain_ns", "ns", [None, None, None]),
        ("locks/s", "invalidate-rdma", "locks_per_s", "/s", [Some(568181.0), Some(566051.0), Some(1768.0)]),
        ("lock lease, fitted (us)", "invalidate-rdma", "lease_us", "us", [None, None, None]),
        ("barriers/s", "invalidate-rdma", "barriers_per_s", "/s", [None, Some(15015.0), Some(9174.0)]),
        ("object request, no RDMA (us)", "invalidate", "request_us", "us", [None, Some(49.9), Some(49.9)]),
        ("object request, RDMA (us)", "invalidate-rdma", "request_us", "us", [None, Some(24.6), Some(24.6)]),
        ("invalidation flush bandwidth (MB/s)", "invalidate-rdma", "bandwidth_mbs", "MB/s", [Some(1000.0), Some(64.0), Some(13.3)]),
        ("in-place update bandwidth (MB/s)", "update-in-place", "bandwidth_mbs", "MB/s", [Some(1200.0), Some(91.0), Some(9.6)]),
        ("diff-array update bandwidth (MB/s)", "update-diff", "bandwidth_mbs", "MB/s", [Some(1200.0), Some(84.0), Some(7.7)]),
    ];
    for (net, _) in networks() {
        println!(
            "# Table 1, {net}: ours at {} ranks | the paper at 1, 2, 8 machines",
            ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
        );
        for (label, protocol, metric, unit, paper) in rows {
            let ours: Vec<String> =
                ranks.iter().map(|&n| find(lines, net, n, protocol, metric).map_or("—".into(), |v| format!("{v:.4}"))).collect();
            let theirs: Vec<String> = paper.iter().map(|v| v.map_or("—".into(), |v| format!("{v}"))).collect();
            println!("  {label:<38} {:>40} | {}", ours.join("  "), theirs.join("  "));
            for &n in ranks {
                if let Some(v) = find(lines, net, n, protocol, metric) {
                    let params = rows::params([
                        ("network", json!(net)),
                        ("ranks", json!(n)),
                        ("protocol", json!(protocol)),
                        ("metric", json!(metric)),
                    ]);
                    rows::emit("dsm", &format!("{net}-{n}-{protocol}-{metric}"), params, unit, Measured::single(v), &[]);
                }
            }
        }
    }
    // The issue's targets, judged on the numbers above.
    if let (Some(hit), Some(plain)) =
        (find(lines, "raw", 1, "invalidate-rdma", "hit_ns"), find(lines, "raw", 1, "invalidate-rdma", "plain_ns"))
    {
        println!("# access check that hits / plain load: {:.1} (info: {hit:.2} ns against {plain:.2} ns)", hit / plain);
    }
    for net in ["raw", "modelled"] {
        if let (Some(rdma), Some(msg)) =
            (find(lines, net, 2, "invalidate-rdma", "request_us"), find(lines, net, 2, "invalidate", "request_us"))
        {
            check("dsm-check", &format!("object request RDMA / message reply, {net}, 2 ranks"), rdma / msg, "<= 0.6", rdma / msg <= 0.6);
        }
        if let (Some(two), Some(one)) =
            (find(lines, net, 2, "invalidate-rdma", "locks_per_s"), find(lines, net, 1, "invalidate-rdma", "locks_per_s"))
        {
            check("dsm-check", &format!("locks/s 2 ranks / 1 rank, {net}"), two / one, ">= 0.9", two / one >= 0.9);
        }
    }
}

/// One of the issue's targets: printed, and a row of `bench` (the report shows our verdict).
pub(crate) fn check(bench: &str, what: &str, value: f64, target: &str, ok: bool) {
    let verdict = if ok { "PASS" } else { "MISS" };
    println!("# {what:<58} {value:>8.3}  {target:<6} {verdict}");
    let params = rows::params([("what", json!(what)), ("target", json!(target)), ("status", json!(verdict))]);
    rows::emit(bench, what, params, "x", Measured::single(value), &[]);
}

/// The parent's file: one line per result, written by rank 0.
pub(crate) fn report(lines: &[(String, f64)], label: &str, ranks: usize) -> BResult<()> {
    let net = std::env::var(NET_ENV)?;
    let mut text = String::new();
    for (metric, value) in lines {
        text.push_str(&format!("{net}\t{ranks}\t{label}\t{metric}\t{value}\n"));
    }
    let out = std::env::var(OUT_ENV)?;
    std::fs::OpenOptions::new().create(true).append(true).open(out)?.write_all(text.as_bytes())?;
    Ok(())
}

/// One rank of a job: every micro-benchmark under the job's protocol.
pub fn worker() -> BResult<()> {
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let (me, n) = (w.rank(), w.size());
    let mut results: Vec<(String, f64)> = Vec::new();
    // An access check that hits against a plain load of the same word (every rank; rank 0's
    // numbers are reported).
    let (hit_ns, plain_ns) = hit_cost(&dsm, if quick { 2_000_000 } else { 20_000_000 })?;
    results.push(("hit_ns".into(), hit_ns));
    results.push(("plain_ns".into(), plain_ns));
    // Locks: one object at rank 0, every rank in a loop; long enough (about 20 ms of locks
    // per rank) that the lock changing hands every lease (ACTIVERMA_DSM_LOCK_LEASE_US) is
    // averaged over many leases, not one or two.
    let iterations = if quick { 20_000 } else { 200_000 };
    let obj = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    dsm.barrier()?;
    let t = Instant::now();
    for _ in 0..iterations {
        dsm.lock(obj)?;
        dsm.unlock(obj)?;
    }
    dsm.barrier()?;
    results.push(("locks_per_s".into(), (iterations * n) as f64 / t.elapsed().as_secs_f64()));
    results.push(("lease_us".into(), dsm.lock_lease().as_secs_f64() * 1e6));
    // The paper's barrier: count and generation in one object, wait / notify_all.
    if n > 1 {
        let rounds = if quick { 200 } else { 2_000 };
        let b = dsm.share(0, (me == 0).then(|| dsm.alloc(16)).transpose()?)?;
        dsm.barrier()?;
        let t = Instant::now();
        for _ in 0..rounds {
            monitor_barrier(&mut dsm, b, n)?;
        }
        results.push(("barriers_per_s".into(), rounds as f64 / t.elapsed().as_secs_f64()));
        dsm.barrier()?;
    }
    // Object requests: rank 1 walks fresh lists of nodes at rank 0.
    if n > 1 {
        let nodes = if quick { 200 } else { 2_000 };
        let mut per_node = Vec::new();
        for _ in 0..3 {
            let head = if me == 0 {
                let mut next = GlobalRef::NULL;
                for i in 0..nodes {
                    let node = dsm.alloc(64)?;
                    let mut v = dsm.write(node)?;
                    v.set(0, i as u64)?;
                    v.set(1, next.to_bits())?;
                    drop(v);
                    next = node;
                }
                Some(next)
            } else {
                None
            };
            let head = dsm.share(0, head)?;
            dsm.barrier()?;
            if me == 1 {
                let t = Instant::now();
                let (mut at, mut seen) = (head, 0);
                while !at.is_null() {
                    at = GlobalRef::from_bits(dsm.read(at)?.get(1)?);
                    seen += 1;
                }
                per_node.push(t.elapsed().as_secs_f64() * 1e6 / seen as f64);
            }
            dsm.barrier()?;
        }
        per_node.sort_by(f64::total_cmp);
        let median = per_node.get(per_node.len() / 2).copied().unwrap_or(0.0);
        let all = w.allgather(&median.to_le_bytes())?;
        results.push(("request_us".into(), f64::from_le_bytes(all[1][..8].try_into().unwrap())));
    }
    // Bandwidth: every 8th double of a 32 KiB array at the next rank, then an empty
    // synchronized block on an object of one's own.
    const ARRAY: usize = 32 << 10;
    let iterations = if quick { 300 } else { 3_000 };
    let mine = dsm.alloc_array_at((me + 1) % n, ARRAY)?;
    let sync = dsm.alloc(8)?;
    dsm.barrier()?;
    let t = Instant::now();
    for it in 0..iterations {
        for k in (0..ARRAY / 8).step_by(8) {
            let (chunk, at) = mine.locate((k * 8) as u64)?;
            dsm.write(chunk)?.set(at / 8, (it + k) as f64)?;
        }
        dsm.lock(sync)?;
        dsm.unlock(sync)?;
    }
    let mine_bw = (ARRAY * iterations) as f64 / t.elapsed().as_secs_f64() / 1e6;
    dsm.barrier()?;
    let all = w.allgather(&mine_bw.to_le_bytes())?;
    let mean = all.iter().map(|b| f64::from_le_bytes(b[..8].try_into().unwrap())).sum::<f64>() / n as f64;
    results.push(("bandwidth_mbs".into(), mean));
    if me == 0 {
        report(&results, variant(&dsm), n)?;
    }
    dsm.barrier()?;
    Ok(w.finalize()?)
}

/// ns per element read through `read(r)?.get(i)` on a valid copy (the access check, the
/// view, the bounds check), and per element read from a plain slice, same pattern.
fn hit_cost(dsm: &Dsm, reads: usize) -> Result<(f64, f64)> {
    use std::hint::black_box;
    const WORDS: usize = 512;
    let r = dsm.alloc_at((dsm.world().rank() + 1) % dsm.world().size(), WORDS * 8)?;
    dsm.read(r)?; // the copy is fetched once, outside the timing
    let plain: Vec<u64> = (0..WORDS as u64).collect();
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let t = Instant::now();
        let mut sum = 0u64;
        for i in 0..reads {
            sum = sum.wrapping_add(dsm.read(black_box(r))?.get::<u64>(i % WORDS)?);
        }
        black_box(sum);
        best.0 = best.0.min(t.elapsed().as_secs_f64() * 1e9 / reads as f64);
        let t = Instant::now();
        let mut sum = 0u64;
        for i in 0..reads {
            sum = sum.wrapping_add(black_box(&plain)[i % WORDS]);
        }
        black_box(sum);
        best.1 = best.1.min(t.elapsed().as_secs_f64() * 1e9 / reads as f64);
    }
    Ok(best)
}

/// The paper's barrier over a monitor.
fn monitor_barrier(dsm: &mut Dsm, b: GlobalRef, n: usize) -> Result<()> {
    dsm.lock(b)?;
    let (count, generation): (u64, u64) = {
        let v = dsm.read(b)?;
        (v.get(0)?, v.get(1)?)
    };
    if count + 1 == n as u64 {
        let mut v = dsm.write(b)?;
        v.set(0, 0u64)?;
        v.set(1, generation + 1)?;
        drop(v);
        dsm.notify_all(b)?;
    } else {
        dsm.write(b)?.set(0, count + 1)?;
        while dsm.read(b)?.get::<u64>(1)? == generation {
            dsm.wait(b)?;
        }
    }
    dsm.unlock(b)
}
