//! `activerma bench firehose-ws`: Bell & Bonachea's figure 3, on one host (the jobs run under
//! `activerma run`) or across hosts (ACTIVERMA_BENCH_LAUNCH starts them, e.g. over the emulated
//! hosts: bench/over_hosts.sh; there firehose and pin-all reach rank 1's memory with a
//! key and one-sided MPI_Put, and the rendezvous strategies register per put with
//! ACTIVERMA_RMA_RENDEZVOUS_MIN=1, which changes nothing on one host). Rank 0 puts 64 KiB
//! at random 64 KiB-aligned places of a working set W of rank 1's exposed private memory; W
//! grows past M and past M + MAXVICTIM of Firehose. Side by side: firehose, pin-all (everything
//! pinned at expose: the upper bound), rendezvous (a registration cache without eviction: pins
//! all of W) and rendezvous-unpin (pin and unpin around every put: the lower bound).
//!
//! Each strategy is a 2-rank job of its own (the strategy is read at init); the strategies take
//! turns for 9 rounds (3 with --quick) and each point is the median over them. Per working set,
//! rank 1 exposes a fresh W bytes (so no registration carries over), rank 0 first touches every
//! block once in random order (warm-up, not timed), then times random puts; rank 1 makes
//! progress meanwhile (it waits in a barrier, which polls). Reported per W: time per put,
//! bandwidth, the registration hit rate of the timed puts (all pages REGISTERED at lookup:
//! one-sided, no message), firehose moves per put, and the most memory rank 1 had pinned.

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::{Prot, RemotePtr, World};
use serde_json::json;
use std::time::Instant;

const CASE_ENV: &str = "ACTIVERMA_BENCH_FH_CASE";
const OUT_ENV: &str = "ACTIVERMA_BENCH_FH_OUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_FH_QUICK";
const PUT: usize = 64 << 10;
/// Firehose's M and MAXVICTIM in this benchmark (small enough that W passes both).
const M_MIB: usize = 8;
const V_MIB: usize = 4;
const SETS_MIB: [usize; 11] = [1, 2, 4, 6, 8, 10, 12, 14, 16, 24, 32];
const QUICK_SETS_MIB: [usize; 6] = [2, 6, 10, 12, 16, 32];
/// Rounds of all strategies (a full round takes about 1.3 s here; with 5, the W <= M ratio
/// still moved 0.96-1.08 between runs).
const ROUNDS: usize = 9;
const QUICK_ROUNDS: usize = 3;

struct Case {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const CASES: [Case; 5] = [
    Case {
        name: "firehose",
        env: &[("ACTIVERMA_REGISTRATION", "firehose"), ("ACTIVERMA_FIREHOSE_M", "8M"), ("ACTIVERMA_FIREHOSE_MAXVICTIM", "4M")],
    },
    // The region flavour: one 64 KiB bucket per put (one pin, one victim unpin per miss).
    Case {
        name: "firehose-64K",
        env: &[
            ("ACTIVERMA_REGISTRATION", "firehose"),
            ("ACTIVERMA_FIREHOSE_M", "8M"),
            ("ACTIVERMA_FIREHOSE_MAXVICTIM", "4M"),
            ("ACTIVERMA_FIREHOSE_BUCKET", "16"),
        ],
    },
    Case { name: "pin-all", env: &[("ACTIVERMA_REGISTRATION", "pin-all")] },
    Case { name: "rendezvous", env: &[("ACTIVERMA_REGISTRATION", "rendezvous"), ("ACTIVERMA_RMA_RENDEZVOUS_MIN", "1")] },
    Case { name: "rendezvous-unpin", env: &[("ACTIVERMA_REGISTRATION", "rendezvous-unpin"), ("ACTIVERMA_RMA_RENDEZVOUS_MIN", "1")] },
];

/// One measured point, as the jobs write it (tab separated).
struct Row {
    strategy: String,
    ws_mib: usize,
    us_per_put: f64,
    hit_rate: f64,
    moves_per_put: f64,
    /// Rank 1's pinned memory after the timed puts, and the most it ever had pinned (so far in
    /// the job: W grows, so this is the peak up to this W).
    now_mib: f64,
    peak_mib: f64,
}

/// The parent: one job per strategy, then the table.
pub fn working_set(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("firehose-ws");
    let _ = std::fs::remove_file(&out);
    println!(
        "activerma bench firehose-ws: {} KiB puts at random places of a working set W of rank 1's exposed private memory; firehose M = {M_MIB} MiB, MAXVICTIM = {V_MIB} MiB, page-based and with 64 KiB buckets; load {}",
        PUT >> 10,
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    match std::env::var(super::jobs::LAUNCH_ENV) {
        Ok(l) if !l.trim().is_empty() => {
            println!("# jobs started by {}={l} (rank 0 -> rank 1 as that command places them)", super::jobs::LAUNCH_ENV)
        }
        _ => println!("# jobs started by activerma run: both ranks on this host"),
    }
    // Every strategy is a job of its own on freshly exposed memory, and where its pages land
    // moves a job's times by up to 30 % (pin-all and rendezvous, identical once warm, differed
    // so in one run): the strategies take turns, round after round, and each point is the
    // median over the rounds.
    let rounds = if args.quick { QUICK_ROUNDS } else { ROUNDS };
    for _ in 0..rounds {
        for (i, c) in CASES.iter().enumerate() {
            let mut env = vec![(CASE_ENV.to_string(), i.to_string()), (OUT_ENV.to_string(), out.to_string_lossy().into_owned())];
            env.extend(c.env.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
            if args.quick {
                env.push((QUICK_ENV.into(), "1".into()));
            }
            let code = super::jobs::run_with_env(2, &["bench", "firehose-ws", "--rank-worker"], &env, 600.0)?;
            if code != 0 {
                return Err(format!("the job of \"{}\" failed (exit code {code})", c.name).into());
            }
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    let rounds_rows: Vec<Row> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [s, w, us, hit, mv, now, peak] = f[..] else { return None };
            Some(Row {
                strategy: s.into(),
                ws_mib: w.parse().ok()?,
                us_per_put: us.parse().ok()?,
                hit_rate: hit.parse().ok()?,
                moves_per_put: mv.parse().ok()?,
                now_mib: now.parse().ok()?,
                peak_mib: peak.parse().ok()?,
            })
        })
        .collect();
    emit_rows(&rounds_rows);
    let rows = median_over_rounds(rounds_rows);
    let get = |s: &str, w: usize| rows.iter().find(|r| r.strategy == s && r.ws_mib == w);
    let mut sets: Vec<usize> = rows.iter().map(|r| r.ws_mib).collect();
    sets.sort_unstable();
    sets.dedup();
    println!(
        "# time per put: mean over the timed puts, us, median over {rounds} rounds of the strategies taking turns (registration hit rate of the timed puts); pinned: rank 1's pinned memory after them"
    );
    print!("# {:>6}", "W(MiB)");
    for c in &CASES {
        print!(" {:>24}", c.name);
    }
    println!(" {:>12} {:>10} {:>12}", "fh moves/put", "fh pinned", "fh/pin-all");
    for &w in &sets {
        print!("{:>8}", w);
        for c in &CASES {
            match get(c.name, w) {
                Some(r) => print!(" {:>10.2} us ({:>5.1} %)", r.us_per_put, 100.0 * r.hit_rate),
                None => print!(" {:>24}", "-"),
            }
        }
        let fh = get("firehose", w);
        let ratio = match (fh, get("pin-all", w)) {
            (Some(f), Some(p)) => format!("{:.2}", f.us_per_put / p.us_per_put),
            _ => "-".into(),
        };
        match fh {
            Some(f) => println!(" {:>12.3} {:>7.1} MiB {:>12}", f.moves_per_put, f.now_mib, ratio),
            None => println!(" {:>12} {:>10} {:>12}", "-", "-", ratio),
        }
    }
    for r in &rows {
        println!(
            "# row strategy={} W={}MiB us_per_put={:.3} MB/s={:.0} hit_rate={:.4} moves_per_put={:.4} pinned_MiB={:.2} pinned_peak_MiB={:.2}",
            r.strategy,
            r.ws_mib,
            r.us_per_put,
            PUT as f64 / r.us_per_put,
            r.hit_rate,
            r.moves_per_put,
            r.now_mib,
            r.peak_mib
        );
    }
    // The paper's claims, as ratios from this run.
    let mean = |s: &str, pick: &dyn Fn(usize) -> bool| {
        let v: Vec<f64> = rows.iter().filter(|r| r.strategy == s && pick(r.ws_mib)).map(|r| r.us_per_put).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let within = |w: usize| w <= M_MIB;
    let beyond = |w: usize| w > M_MIB + V_MIB;
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    if let (Some(f), Some(p)) = (mean("firehose", &within), mean("pin-all", &within)) {
        println!(
            "# W <= M: firehose / pin-all time per put = {:.2} (paper: close to 1, every put a hit after warm-up; target <= 1.05): {}",
            f / p,
            verdict(f / p <= 1.05)
        );
        check("firehose/pin-all, W <= M", f / p, "<= 1.05", json!("~1"), "time per put, mean over W <= M");
    }
    for fh in ["firehose", "firehose-64K"] {
        if let (Some(f), Some(u)) = (mean(fh, &beyond), mean("rendezvous-unpin", &beyond)) {
            println!(
                "# W > M + MAXVICTIM: {fh} / rendezvous-unpin time per put = {:.2} (paper: below 1, misses cost one move and reuse victims; target <= 1): {}",
                f / u,
                verdict(f / u <= 1.0)
            );
            check(
                &format!("{fh}/rendezvous-unpin, W > M + MAXVICTIM"),
                f / u,
                "<= 1",
                json!("< 1"),
                "time per put, mean over W > M + MAXVICTIM",
            );
        }
    }
    if let Some(max) = rows.iter().filter(|r| r.strategy.starts_with("firehose")).map(|r| r.peak_mib).reduce(f64::max) {
        println!(
            "# firehose pinned at most {max:.2} MiB at rank 1 (bound M + MAXVICTIM = {} MiB): {}",
            M_MIB + V_MIB,
            if max <= (M_MIB + V_MIB) as f64 { "PASS" } else { "MISS" }
        );
        let bound = (M_MIB + V_MIB) as f64;
        check(
            "firehose pinned peak / (M + MAXVICTIM)",
            max / bound,
            "<= 1",
            json!("<= 1 (by design)"),
            "rank 1's most pinned memory over the bound",
        );
    }
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// Report rows: each (strategy, W)'s put bandwidth (MB/s, median over the rounds with their
/// spread, as the paper's figure 3 plots bandwidth) and registration hit rate.
fn emit_rows(rounds: &[Row]) {
    let mut keys: Vec<(&str, usize)> = rounds.iter().map(|r| (r.strategy.as_str(), r.ws_mib)).collect();
    keys.sort_unstable();
    keys.dedup();
    for (strategy, w) in keys {
        let of =
            |f: &dyn Fn(&Row) -> f64| -> Vec<f64> { rounds.iter().filter(|r| r.strategy == strategy && r.ws_mib == w).map(f).collect() };
        let env: Vec<(String, String)> = CASES
            .iter()
            .find(|c| c.name == strategy)
            .map_or(Vec::new(), |c| c.env.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect());
        let params = rows::params([("ws_mib", json!(w)), ("put_kib", json!(PUT >> 10))]);
        rows::emit("firehose-ws", strategy, params.clone(), "MB/s", Measured::of_samples(&of(&|r| PUT as f64 / r.us_per_put)), &env);
        rows::emit("firehose-ws-hits", strategy, params, "%", Measured::of_samples(&of(&|r| 100.0 * r.hit_rate)), &env);
    }
}

/// A claim of the paper checked in this run, as a `firehose-ws-check` report row.
fn check(case: &str, ours: f64, target: &str, paper: serde_json::Value, what: &str) {
    let params = rows::params([("target", json!(target)), ("paper", paper), ("what", json!(format!("{case}: {what}")))]);
    rows::emit("firehose-ws-check", case, params, "x", Measured::single(ours), &[]);
}

/// One row per (strategy, W): the round with the median time per put (its hit rate, moves and
/// pinned memory with it), and the highest pinned peak of any round.
fn median_over_rounds(rows: Vec<Row>) -> Vec<Row> {
    let mut keys: Vec<(String, usize)> = rows.iter().map(|r| (r.strategy.clone(), r.ws_mib)).collect();
    keys.sort_by_key(|(s, w)| (CASES.iter().position(|c| c.name == s), *w));
    keys.dedup();
    keys.into_iter()
        .map(|(strategy, ws_mib)| {
            let mut same: Vec<&Row> = rows.iter().filter(|r| r.strategy == strategy && r.ws_mib == ws_mib).collect();
            let peak_mib = same.iter().map(|r| r.peak_mib).fold(0.0, f64::max);
            same.sort_by(|a, b| a.us_per_put.total_cmp(&b.us_per_put));
            let mid = same[same.len() / 2];
            Row { strategy, ws_mib, peak_mib, ..*mid }
        })
        .collect()
}

/// splitmix64: random block numbers without a dependency (the same sequence in every job).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// True in a rank of one of this benchmark's jobs.
pub fn is_worker() -> bool {
    std::env::var_os(CASE_ENV).is_some()
}

fn stat(w: &World, name: &str) -> u64 {
    w.registration_stats().snapshot().into_iter().find(|&(k, _)| k == name).map_or(0, |(_, v)| v)
}

fn moves(w: &World) -> u64 {
    w.firehose_stats().map_or(0, |s| s.moves_sent.load(std::sync::atomic::Ordering::Relaxed))
}

/// One rank of a strategy's job.
pub fn worker() -> BResult<()> {
    let case: usize = std::env::var(CASE_ENV)?.parse()?;
    let c = &CASES[case];
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let sets: &[usize] = if quick { &QUICK_SETS_MIB } else { &SETS_MIB };
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err("firehose-ws runs on 2 ranks".into());
    }
    let me = w.rank();
    let max = sets.iter().max().unwrap() << 20;
    // Rank 1: the target memory, resident (written) before any measurement.
    // 64 KiB aligned, so that every put covers exactly one 64 KiB block (16 pages, one bucket
    // of the region flavour).
    let mut mem = vec![0u8; if me == 1 { max + PUT } else { 0 }];
    mem.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let skip = if me == 1 { (mem.as_ptr() as usize).next_multiple_of(PUT) - mem.as_ptr() as usize } else { 0 };
    let src: Vec<u8> = (0..PUT).map(|i| (i * 7) as u8).collect();
    let mut rng = Rng(0xf1e_4053);
    for &ws_mib in sets {
        let ws = ws_mib << 20;
        let blocks = ws / PUT;
        let exposed = if me == 1 {
            // SAFETY: `mem` outlives the exposure, which ends at the end of this round.
            Some(unsafe { w.expose_raw(mem.as_mut_ptr().add(skip), ws, Prot::ReadWrite)? })
        } else {
            None
        };
        let addr = exposed.as_ref().map_or(0, |e| e.addr() as u64);
        let all = w.allgather(&addr.to_le_bytes())?;
        let base = u64::from_le_bytes(all[1][..8].try_into().unwrap()) as usize;
        if me == 0 {
            let at = |b: usize| RemotePtr::new(1, base + b * PUT);
            let mut order: Vec<usize> = (0..blocks).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            for &b in &order {
                w.put(at(b), &src)?; // warm-up: every block once
            }
            let n = if quick { 400.max(blocks) } else { 2000.max(4 * blocks) };
            let (h0, m0, mv0) = (stat(&w, "hits"), stat(&w, "misses"), moves(&w));
            let t0 = Instant::now();
            for _ in 0..n {
                w.put(at(rng.below(blocks)), &src)?;
            }
            let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
            let (h, m) = (stat(&w, "hits") - h0, stat(&w, "misses") - m0);
            let row = (us, h as f64 / (h + m).max(1) as f64, (moves(&w) - mv0) as f64 / n as f64);
            w.barrier()?;
            let got = w.allgather(&[0u8; 16])?;
            let word = |i: usize| u64::from_le_bytes(got[1][i * 8..i * 8 + 8].try_into().unwrap()) as f64 / (1 << 20) as f64;
            let line = format!("{}\t{ws_mib}\t{:.4}\t{:.5}\t{:.5}\t{:.3}\t{:.3}\n", c.name, row.0, row.1, row.2, word(0), word(1));
            use std::io::Write;
            std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(OUT_ENV)?)?.write_all(line.as_bytes())?;
        } else {
            w.barrier()?; // polls: serves rendezvous requests and firehose moves meanwhile
            let mut both = w.registration_stats().pinned_now().to_le_bytes().to_vec();
            both.extend(stat(&w, "pinned_peak").to_le_bytes());
            w.allgather(&both)?;
        }
        w.barrier()?;
        drop(exposed);
        w.barrier()?;
    }
    drop(mem);
    w.finalize()?;
    Ok(())
}
