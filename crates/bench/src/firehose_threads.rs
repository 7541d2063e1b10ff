//! `activerma bench firehose-threads`: Firehose-SMP with many threads of one rank (Bell &
//! Nishtala 2004, figure 8 and the GUPS discussion).
//!
//! 1. Rate: a 2-rank job; rank 0 runs T = 1, 2, 4, 8 threads through the same `World` (one
//!    Firehose table), each putting 32 KiB at random 32 KiB-aligned places of a working set of
//!    rank 1's exposed private memory far above M (f = one put's worth of firehoses, so misses and
//!    contention for firehoses are the common case, as in the paper). Per thread and aggregate
//!    puts/s, registration hit rate, moves, and how often the remote requests went past the
//!    easy path (FirehoseStats: easy_path, da_retries, da_claims, rollbacks).
//! 2. GUPS-like: the same N random 8 B - 4 KiB puts (the same sequence, dealt out round robin)
//!    issued (a) by T threads of one rank sharing one Firehose (a 2-rank job) and (b) by T ranks
//!    with a Firehose each (a T+1-rank job); the target is the last rank, M (hence the total f of
//!    its origins: f = M / (ranks - 1)) and the working set are the same. Misses compared.
//!
//! Checked and printed: every thread completed its operations, and the target never had more
//! than M + MAXVICTIM pinned (RegistrationStats::pinned_peak).

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::{Prot, RemotePtr, World};
use serde_json::json;
use std::time::Instant;

const MODE_ENV: &str = "ACTIVERMA_BENCH_FHT_MODE";
const T_ENV: &str = "ACTIVERMA_BENCH_FHT_T";
const OUT_ENV: &str = "ACTIVERMA_BENCH_FHT_OUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_FHT_QUICK";

/// Rate test: 32 KiB puts (8 pages, the paper's size), M = 32 KiB (f = 8 pages: one put, as in
/// the paper: every miss must move firehoses another thread may be waiting for),
/// MAXVICTIM = 256 KiB, working set 16 MiB.
const RATE_PUT: usize = 32 << 10;
const RATE_M: usize = 32 << 10;
const RATE_V: usize = 256 << 10;
const RATE_WS: usize = 16 << 20;
const RATE_THREADS: [usize; 4] = [1, 2, 4, 8];

/// GUPS: M = 4 MiB, MAXVICTIM = 1 MiB, 8 B - 4 KiB puts, tables (working sets) of 6 to
/// 32 MiB: the paper's figure varies the GUPS table size, and the shared table's advantage is
/// largest when the working set is near what the target may pin.
const GUPS_M: usize = 4 << 20;
const GUPS_V: usize = 1 << 20;
const GUPS_WS: [usize; 3] = [6 << 20, 12 << 20, 32 << 20];
const WS_ENV: &str = "ACTIVERMA_BENCH_FHT_WS";
const GUPS_T: [usize; 2] = [2, 4];

fn mib(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn fh_env(m: usize, v: usize) -> Vec<(String, String)> {
    vec![
        ("ACTIVERMA_REGISTRATION".into(), "firehose".into()),
        ("ACTIVERMA_FIREHOSE_M".into(), m.to_string()),
        ("ACTIVERMA_FIREHOSE_MAXVICTIM".into(), v.to_string()),
        ("ACTIVERMA_FIREHOSE_BUCKET".into(), "1".into()),
    ]
}

/// The parent: the rate job, then a shared and a separate job per T, then the comparison.
pub fn threads(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("firehose-threads");
    let _ = std::fs::remove_file(&out);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("activerma bench firehose-threads: {cores} cores, load {}", super::load_avg());
    println!("{}", super::machine::header_line());
    if cores <= 2 {
        println!(
            "# NOTE: {cores} cores only. Rank 1 (the target) polls on one of them, so rank 0's threads share the other(s): \
             with T > {} threads they time-share a core, and per-thread rates show scheduling as much as Firehose.",
            cores.saturating_sub(1).max(1)
        );
    }
    let base = |mode: &str| {
        let mut env = vec![(MODE_ENV.to_string(), mode.to_string()), (OUT_ENV.to_string(), out.to_string_lossy().into_owned())];
        if args.quick {
            env.push((QUICK_ENV.into(), "1".into()));
        }
        env
    };
    let argv = ["bench", "firehose-threads", "--rank-worker"];
    // 1. Rate (rank 0 of the job prints its table).
    println!(
        "\n## 1. Figure 8: {} puts to random places of {} of rank 1's exposed memory; M = {} (f = {} pages), MAXVICTIM = {}, page-based; T threads of rank 0 share one Firehose",
        mib(RATE_PUT),
        mib(RATE_WS),
        mib(RATE_M),
        RATE_M / activerma_core::page::page_size(),
        mib(RATE_V)
    );
    let mut env = base("rate");
    env.extend(fh_env(RATE_M, RATE_V));
    // The rate job's rank 0 measures, so it writes the report rows itself.
    let json = args.json.as_ref().map(|p| p.to_string_lossy().into_owned());
    let mut rate_argv = argv.to_vec();
    if let Some(j) = &json {
        rate_argv.extend(["--json", j.as_str()]);
    }
    let code = super::jobs::run_with_env(2, &rate_argv, &env, 600.0)?;
    if code != 0 {
        return Err(format!("the rate job failed (exit code {code})").into());
    }
    // 2. GUPS.
    println!(
        "\n## 2. GUPS-like: the same random 8 B - 4 KiB puts into a table (working set) of the last rank's memory, M = {}, MAXVICTIM = {}, page-based; \
         (a) shared: T threads of one rank, one Firehose, f = M; (b) separate: T ranks, one Firehose each, f = M / T. \
         A hit is a put whose pages all have firehoses of its own rank",
        mib(GUPS_M),
        mib(GUPS_V)
    );
    for &ws in &GUPS_WS {
        for &t in &GUPS_T {
            for (layout, ranks) in [("shared", 2u32), ("separate", t as u32 + 1)] {
                let mut env = base(layout);
                env.push((T_ENV.into(), t.to_string()));
                env.push((WS_ENV.into(), ws.to_string()));
                env.extend(fh_env(GUPS_M, GUPS_V));
                let code = super::jobs::run_with_env(ranks, &argv, &env, 600.0)?;
                if code != 0 {
                    return Err(format!("the GUPS job ({layout}, T = {t}, table {}) failed (exit code {code})", mib(ws)).into());
                }
            }
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    // layout, T, ops, completed, all_threads_ok, table hits, table misses, moves, firehoses moved,
    // da_retries, seconds, target peak, bound, table bytes
    let rows: Vec<Vec<String>> =
        text.lines().map(|l| l.split('\t').map(String::from).collect()).filter(|f: &Vec<String>| f.len() == 14).collect();
    let num = |r: &Vec<String>, i: usize| r[i].parse::<f64>().unwrap_or(f64::NAN);
    println!(
        "# {:>6} {:>2} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8} {:>10} {:>8} {:>9} {:>11}",
        "table", "T", "layout", "puts", "done", "tbl miss", "hit rate", "moves", "fh moved", "da_retr", "seconds", "peak pinned"
    );
    for r in &rows {
        let (h, m) = (num(r, 5), num(r, 6));
        println!(
            "{:>8} {:>2} {:>9} {:>7} {:>9} {:>9} {:>8.1}% {:>8} {:>10} {:>8} {:>9.2} {:>7.2} MiB",
            mib(r[13].parse().unwrap_or(0)),
            r[1],
            r[0],
            r[2],
            format!("{}{}", r[3], if r[4] == "1" { "" } else { "!" }),
            r[6],
            100.0 * h / (h + m).max(1.0),
            r[7],
            r[8],
            r[9],
            num(r, 10),
            num(r, 11) / (1 << 20) as f64
        );
    }
    for r in &rows {
        let params =
            rows::params([("table_mib", json!(num(r, 13) / (1 << 20) as f64)), ("threads", json!(r[1].parse::<u64>().unwrap_or(0)))]);
        rows::emit("firehose-gups", &r[0], params, "misses", Measured::single(num(r, 6)), &fh_env(GUPS_M, GUPS_V));
    }
    let mut fewer = true;
    for &ws in &GUPS_WS {
        for &t in &GUPS_T {
            let find = |l: &str| rows.iter().find(|r| r[0] == l && r[1] == t.to_string() && r[13] == ws.to_string());
            if let (Some(s), Some(p)) = (find("shared"), find("separate")) {
                let ratio = num(s, 6) / num(p, 6).max(1.0);
                fewer &= ratio < 1.0;
                let params = rows::params([
                    ("table_mib", json!(ws as f64 / (1 << 20) as f64)),
                    ("threads", json!(t)),
                    ("target", json!("<= 1")),
                    ("paper", json!(0.65)),
                    ("what", json!(format!("table misses, shared / separate, table {}, T = {t} (paper: 256 MB table)", mib(ws)))),
                ]);
                rows::emit("firehose-gups-check", "misses shared/separate", params, "x", Measured::single(ratio), &[]);
                println!(
                    "# table {:>6}, T = {t}: misses shared / separate {ratio:.3}, moves {:.3}, firehoses moved {:.3}",
                    mib(ws),
                    num(s, 7) / num(p, 7).max(1.0),
                    num(s, 8) / num(p, 8).max(1.0)
                );
            } else {
                fewer = false;
            }
        }
    }
    println!(
        "# GUPS: fewer misses with a shared table than with separate ranks at every table size and T: {} \
         (paper: 35 % fewer, i.e. 0.65, at a 256 MB table; the gap shrinks as the table outgrows M)",
        if fewer { "PASS" } else { "MISS" }
    );
    let all_done = rows.len() == 2 * GUPS_T.len() * GUPS_WS.len() && rows.iter().all(|r| r[4] == "1" && r[2] == r[3]);
    println!("# GUPS: every thread / rank completed its puts: {}", if all_done { "PASS" } else { "MISS" });
    let bound_ok = rows.iter().all(|r| num(r, 11) <= num(r, 12));
    println!(
        "# GUPS: target pinned at most {:.2} MiB (bound M + MAXVICTIM = {}): {}",
        rows.iter().map(|r| num(r, 11)).fold(0.0, f64::max) / (1 << 20) as f64,
        mib(GUPS_M + GUPS_V),
        if bound_ok && !rows.is_empty() { "PASS" } else { "MISS" }
    );
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// splitmix64 of a counter: the k-th random value of a stream, the same in every job.
fn mix(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// True in a rank of one of this benchmark's jobs.
pub fn is_worker() -> bool {
    std::env::var_os(MODE_ENV).is_some()
}

fn reg(w: &World, name: &str) -> u64 {
    w.registration_stats().snapshot().into_iter().find(|&(k, _)| k == name).map_or(0, |(_, v)| v)
}

fn fh(w: &World) -> Vec<(&'static str, u64)> {
    w.firehose_stats().map(|s| s.snapshot()).unwrap_or_default()
}

fn delta(before: &[(&'static str, u64)], after: &[(&'static str, u64)], name: &str) -> u64 {
    let get = |v: &[(&'static str, u64)]| v.iter().find(|&&(k, _)| k == name).map_or(0, |&(_, x)| x);
    get(after) - get(before)
}

fn gather_u64(w: &World, mine: &[u64]) -> BResult<Vec<Vec<u64>>> {
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(w.allgather(&bytes)?.iter().map(|b| b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()).collect())
}

/// The last rank exposes `ws` bytes (resident, `align`-aligned); everyone learns the address.
struct Target {
    _mem: Vec<u8>,
    exposed: Option<activerma::Exposed<'static>>,
    base: usize,
}

fn expose_target(w: &World, ws: usize, align: usize) -> BResult<Target> {
    let tgt = w.size() - 1;
    let mut mem = vec![0u8; if w.rank() == tgt { ws + align } else { 0 }];
    mem.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let skip = if w.rank() == tgt { (mem.as_ptr() as usize).next_multiple_of(align) - mem.as_ptr() as usize } else { 0 };
    let exposed = if w.rank() == tgt {
        // SAFETY: `mem` lives in the Target next to the exposure, which is dropped first.
        Some(unsafe { w.expose_raw(mem.as_mut_ptr().add(skip), ws, Prot::ReadWrite)? })
    } else {
        None
    };
    let addr = exposed.as_ref().map_or(0, |e| e.addr() as u64);
    let all = gather_u64(w, &[addr])?;
    Ok(Target { _mem: mem, exposed, base: all[tgt][0] as usize })
}

/// One rank of a job.
pub fn worker() -> BResult<()> {
    let mode = std::env::var(MODE_ENV)?;
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let w = activerma::init()?;
    let r = if mode == "rate" { rate(&w, quick) } else { gups(&w, &mode, quick) };
    w.finalize()?;
    r
}

/// Rank 0's threads put; rank 1 polls in a barrier.
fn rate(w: &World, quick: bool) -> BResult<()> {
    if w.size() != 2 {
        return Err("the rate test runs on 2 ranks".into());
    }
    let mut tg = expose_target(w, RATE_WS, RATE_PUT)?;
    let blocks = RATE_WS / RATE_PUT;
    let n = if quick { 100 } else { 300 };
    let bound = (RATE_M + RATE_V) as u64;
    let mut all_ok = true;
    let mut peak_seen = 0u64;
    if w.rank() == 0 {
        println!(
            "# {:>2} {:>8} {:>32} {:>10} {:>7} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}",
            "T",
            "puts/thr",
            "per thread puts/s min/med/max",
            "aggr put/s",
            "MB/s",
            "hit %",
            "moves",
            "DA path%",
            "retry/ms",
            "claim/ms",
            "tokwt/ms",
            "rb/ms",
            "done"
        );
    }
    for &t in &RATE_THREADS {
        if w.rank() == 0 {
            let before = fh(w);
            let (h0, m0) = (reg(w, "hits"), reg(w, "misses"));
            let start = std::sync::Barrier::new(t);
            let base = tg.base;
            let t0 = Instant::now();
            let res: Vec<Result<(usize, f64), String>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..t)
                    .map(|i| {
                        let (w, start) = (w.clone(), &start);
                        s.spawn(move || -> Result<(usize, f64), String> {
                            let src: Vec<u8> = (0..RATE_PUT).map(|j| (j * 7 + i) as u8).collect();
                            start.wait();
                            let t1 = Instant::now();
                            let mut done = 0;
                            for k in 0..n {
                                let b = (mix(0x5eed_0000 + (t * 16 + i) as u64, k as u64) % blocks as u64) as usize;
                                w.put(RemotePtr::new(1, base + b * RATE_PUT), &src).map_err(|e| format!("thread {i}, put {k}: {e}"))?;
                                done += 1;
                            }
                            Ok((done, t1.elapsed().as_secs_f64()))
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".to_string()))).collect()
            });
            let wall = t0.elapsed().as_secs_f64();
            let mut per: Vec<(usize, f64)> = Vec::new();
            for r in res {
                per.push(r.map_err(|e| -> Box<dyn std::error::Error> { e.into() })?);
            }
            let after = fh(w);
            let (h, m) = (reg(w, "hits") - h0, reg(w, "misses") - m0);
            let ok = per.iter().all(|&(d, _)| d == n);
            all_ok &= ok;
            let mut rates: Vec<f64> = per.iter().map(|&(d, s)| d as f64 / s).collect();
            rates.sort_by(f64::total_cmp);
            let aggr = (t * n) as f64 / wall;
            let moves = delta(&before, &after, "remote_misses");
            let reqs = moves + delta(&before, &after, "remote_hits") + delta(&before, &after, "remote_pending_hits");
            let easy = delta(&before, &after, "easy_path") + delta(&before, &after, "remote_hits");
            let da_share = 100.0 * reqs.saturating_sub(easy) as f64 / reqs.max(1) as f64;
            let per_miss = |k: &str| delta(&before, &after, k) as f64 / moves.max(1) as f64;
            let params = rows::params([("threads", json!(t)), ("put_kib", json!(RATE_PUT >> 10))]);
            let env = fh_env(RATE_M, RATE_V);
            rows::emit("firehose-rate", "per thread", params.clone(), "puts/s", Measured::of_samples(&rates), &env);
            rows::emit("firehose-rate", "aggregate", params, "puts/s", Measured::single(aggr), &env);
            println!(
                "{:>4} {:>8} {:>32} {:>10.0} {:>7.0} {:>6.1} {:>8} {:>9.1} {:>9.2} {:>9.3} {:>9.3} {:>8.3} {:>6}",
                t,
                n,
                format!("{:.0} / {:.0} / {:.0}", rates[0], rates[rates.len() / 2], rates[rates.len() - 1]),
                aggr,
                aggr * RATE_PUT as f64 / 1e6,
                100.0 * h as f64 / (h + m).max(1) as f64,
                moves,
                da_share,
                per_miss("da_retries"),
                per_miss("da_claims"),
                per_miss("token_waits"),
                per_miss("rollbacks"),
                if ok { "all" } else { "NO" }
            );
            println!(
                "#    T = {t}: per thread puts/s {}; easy_path {}, da_retries {}, da_claims {}, token_waits {}, rollbacks {}, wall {:.3} s",
                rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(" "),
                delta(&before, &after, "easy_path"),
                delta(&before, &after, "da_retries"),
                delta(&before, &after, "da_claims"),
                delta(&before, &after, "token_waits"),
                delta(&before, &after, "rollbacks"),
                wall
            );
        }
        w.barrier()?; // rank 1 polls here: serves the moves
        let p = gather_u64(w, &[w.registration_stats().pinned_now(), reg(w, "pinned_peak")])?;
        peak_seen = peak_seen.max(p[1][1]);
    }
    if w.rank() == 0 {
        println!(
            "# DA path% = remote pin requests (firehose misses) that did not complete on their first attempt (not easy_path, not a firehose hit: they retried or queued for another request's token); \
             retry/claim/tokwt/rb per miss = da_retries / da_claims / token_waits / rollbacks divided by moves (paper: DA path taken 75-85 % of the time)"
        );
        println!("# every thread completed its {n} puts in every round: {}", if all_ok { "PASS" } else { "MISS" });
        println!(
            "# rank 1 pinned at most {:.0} KiB (bound M + MAXVICTIM = {} KiB): {}",
            peak_seen as f64 / 1024.0,
            bound >> 10,
            if peak_seen <= bound { "PASS" } else { "MISS" }
        );
    }
    w.barrier()?;
    drop(tg.exposed.take());
    w.barrier()?;
    Ok(())
}

/// GUPS: origins are ranks 0..size-1, each with T / (size - 1) threads; access k of the total
/// sequence goes to global thread k % T.
fn gups(w: &World, layout: &str, quick: bool) -> BResult<()> {
    let t: usize = std::env::var(T_ENV)?.parse()?;
    let origins = w.size() - 1;
    if origins == 0 || !t.is_multiple_of(origins) {
        return Err(format!("GUPS: {t} threads over {origins} origin ranks").into());
    }
    let tpo = t / origins;
    let total: usize = if quick { 4000 } else { 16000 };
    let per_thread = total / t;
    let total = per_thread * t;
    let ws: usize = std::env::var(WS_ENV)?.parse()?;
    let mut tg = expose_target(w, ws, 4096)?;
    let tgt = w.size() - 1;
    let me = w.rank();
    w.barrier()?;
    let mut mine = vec![0u64; 8];
    if me != tgt {
        let before = fh(w);
        let (h0, m0) = (reg(w, "hits"), reg(w, "misses"));
        let base = tg.base;
        let t0 = Instant::now();
        let res: Vec<Result<usize, String>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..tpo)
                .map(|i| {
                    let w = w.clone();
                    let g = me * tpo + i; // global thread number
                    s.spawn(move || -> Result<usize, String> {
                        let src = vec![0xa5u8; 4096];
                        let mut done = 0;
                        for j in 0..per_thread {
                            let k = (j * t + g) as u64;
                            let r = mix(0x6a9_5eed, k);
                            let len = 8 * (1 + (r % 512) as usize); // 8 B .. 4 KiB
                            let off = 8 * ((r >> 16) as usize % ((ws - len) / 8 + 1));
                            w.put(RemotePtr::new(tgt, base + off), &src[..len]).map_err(|e| format!("thread {g}, put {j}: {e}"))?;
                            done += 1;
                        }
                        Ok(done)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".to_string()))).collect()
        });
        let secs = t0.elapsed().as_secs_f64();
        let mut done = 0;
        let mut ok = true;
        for r in res {
            let d = r.map_err(|e| -> Box<dyn std::error::Error> { e.into() })?;
            ok &= d == per_thread;
            done += d;
        }
        let after = fh(w);
        mine = vec![
            done as u64,
            ok as u64,
            reg(w, "hits") - h0,
            reg(w, "misses") - m0,
            delta(&before, &after, "remote_misses"),
            delta(&before, &after, "firehoses_moved"),
            delta(&before, &after, "da_retries"),
            (secs * 1e6) as u64,
        ];
    }
    w.barrier()?; // the target polls here
    mine.push(reg(w, "pinned_peak"));
    let all = gather_u64(w, &mine)?;
    if me == 0 {
        let o = &all[..origins];
        let sum = |i: usize| o.iter().map(|v| v[i]).sum::<u64>();
        let line = format!(
            "{layout}\t{t}\t{total}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.4}\t{}\t{}\t{ws}\n",
            sum(0),
            o.iter().all(|v| v[1] == 1) as u8,
            sum(2),
            sum(3),
            sum(4),
            sum(5),
            sum(6),
            o.iter().map(|v| v[7]).max().unwrap_or(0) as f64 / 1e6,
            all[tgt][8],
            GUPS_M + GUPS_V
        );
        use std::io::Write;
        std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(OUT_ENV)?)?.write_all(line.as_bytes())?;
    }
    w.barrier()?;
    drop(tg.exposed.take());
    w.barrier()?;
    Ok(())
}
