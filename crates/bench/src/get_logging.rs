//! `activerma bench get-logging`: the Active Access paper's Figure 9a — logging every get a
//! rank serves, for recovery by replay (section 4.4), four ways with the same semantics (the
//! target ends up holding origin, address, sequence number and the 8 bytes served):
//!
//! ```text
//! no-ft  plain 8-byte gets (the best case: nothing is logged)
//! aa     the served pages are marked R=1, RL=1, RLD=1: the get itself leaves a copy of the data
//!        in the target's access log (the paper's IOMMU; here the origin appends it, with the
//!        modelled 70 ns per entry); the log holds the round's records (`Notify::Hold`: the
//!        paper's log as a store, no CPU of the target's involved) until the check drains it
//! rma    the origin, after its get, claims a record in the target's log with a remote
//!        fetch-add and puts the record there (two more one-sided operations)
//! am     the origin, after its get, sends the record in an active message; the target's
//!        handler stores it (the target's CPU pays the modelled receive overhead)
//! ```
//! Every rank gets from random other ranks at random 8-byte words of their 1 MiB table; jobs of
//! 2, 3 and 4 ranks, on the raw conduit and with the paper's modelled platform (as `bench
//! dht`). Rate = all ranks' gets / the slowest rank's time, median of 3 rounds (variants take
//! turns). Every round checks that each target holds exactly the records of the gets it
//! served, with the bytes it served.
//!
//! To profile one design, start a job's worker by hand, e.g.
//! `ACTIVERMA_BENCH_GETLOG_NET=raw ACTIVERMA_BENCH_GETLOG_OUT=/tmp/rows ACTIVERMA_BENCH_GETLOG_ONLY=aa
//!  activerma run -n 2 -- activerma bench get-logging --rank-worker` (under `perf record`).

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::{Actions, AmCtx, LogEntry, LogOp, Notify};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const NET_ENV: &str = "ACTIVERMA_BENCH_GETLOG_NET";
const OUT_ENV: &str = "ACTIVERMA_BENCH_GETLOG_OUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_GETLOG_QUICK";
/// For profiling one design: the variants a worker runs (comma-separated; default all).
const ONLY_ENV: &str = "ACTIVERMA_BENCH_GETLOG_ONLY";
const VARIANTS: [&str; 4] = ["no-ft", "aa", "rma", "am"];
const RANKS: [u32; 3] = [2, 3, 4];
const TABLE: usize = 1 << 20;
/// The RMA variant's log at each target: a counter word, then 32-byte records (wrapping).
const RMA_LOG: usize = 1 << 20;
const RMA_RECORDS_AT: usize = 64;
const RECORD: usize = 32;
const DOMAIN: u16 = 9;
const LOG_AM: u16 = activerma::FIRST_USER_HANDLER + 9;
const AA_TARGET_NOFT: f64 = 0.9;
const AA_TARGET_OTHERS: f64 = 2.0;

pub fn is_worker() -> bool {
    std::env::var_os(NET_ENV).is_some()
}

fn networks() -> Vec<(&'static str, Vec<(String, String)>)> {
    vec![("raw", vec![]), ("modelled", super::apps::PAPER_MODEL.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect())]
}

/// The parent: a job per network and rank count, then the table, the rows and the checks.
pub fn get_logging(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("get-logging");
    let _ = std::fs::remove_file(&out);
    println!("activerma bench get-logging: 8-byte gets to random ranks, every served get logged at the target (AA, RMA, AM) or not (no-ft); load {}", super::load_avg());
    println!("{}", super::machine::header_line());
    for (name, settings) in networks() {
        for ranks in RANKS {
            let mut env = vec![
                (NET_ENV.to_string(), name.to_string()),
                (OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
                // Room for a round's records in the aa log (virtual: touched as they come).
                ("ACTIVERMA_LOG_ARENA".to_string(), "256M".to_string()),
            ];
            env.extend(settings.iter().cloned());
            if args.quick {
                env.push((QUICK_ENV.into(), "1".into()));
            }
            let code = super::jobs::run_with_env(ranks, &["bench", "get-logging", "--rank-worker"], &env, 600.0)?;
            if code != 0 {
                return Err(format!("the {name} job of {ranks} ranks failed (exit code {code})").into());
            }
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    // (network, ranks) -> (variant, median, min, max)
    type Rates = std::collections::BTreeMap<(String, u32), Vec<(String, f64, f64, f64)>>;
    let mut rates = Rates::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [net, ranks, variant, rate, min, max] = f[..] else { continue };
        rates.entry((net.to_string(), ranks.parse()?)).or_default().push((variant.to_string(), rate.parse()?, min.parse()?, max.parse()?));
    }
    println!("# gets/s of the whole job (millions), median of 3 rounds; AA's ratio to each other variant");
    println!(
        "# {:<8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "network", "ranks", "no-ft", "aa", "rma", "am", "aa/no-ft", "aa/rma", "aa/am"
    );
    for ((net, ranks), list) in &rates {
        let get = |v: &str| list.iter().find(|r| r.0 == v).map_or(f64::NAN, |r| r.1);
        let aa = get("aa");
        println!(
            "{net:<10} {ranks:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.2} {:>9.2} {:>9.2}",
            get("no-ft") / 1e6,
            aa / 1e6,
            get("rma") / 1e6,
            get("am") / 1e6,
            aa / get("no-ft"),
            aa / get("rma"),
            aa / get("am")
        );
        for (variant, rate, min, max) in list {
            let params = rows::params([("network", json!(net)), ("ranks", json!(ranks)), ("variant", json!(variant))]);
            let m = Measured { value: *rate, min: *min, median: *rate, max: *max, reps: 3 };
            rows::emit("get-logging", &format!("{net}-{ranks}-{variant}"), params, "gets/s", m, &[]);
        }
        if net == "modelled" {
            for (what, value, target) in [
                (format!("AA / no-FT gets/s, modelled, {ranks} ranks"), aa / get("no-ft"), AA_TARGET_NOFT),
                (format!("AA / RMA gets/s, modelled, {ranks} ranks"), aa / get("rma"), AA_TARGET_OTHERS),
                (format!("AA / AM gets/s, modelled, {ranks} ranks"), aa / get("am"), AA_TARGET_OTHERS),
            ] {
                let verdict = if value >= target { "PASS" } else { "MISS" };
                println!("# {what:<50} {value:>6.2}  >= {target:<4} {verdict}");
                let params = rows::params([("what", json!(what)), ("target", json!(format!(">= {target}")))]);
                rows::emit("get-logging-check", &what, params, "x", Measured::single(value), &[]);
            }
        }
    }
    Ok(())
}

/// What a target holds of the gets it served: records per origin, and served bytes that did
/// not match its table (must stay 0).
struct Served {
    per_origin: Vec<AtomicU64>,
    wrong: AtomicU64,
}

impl Served {
    /// One record: the get of `addr` (this rank's address) returned `data`.
    fn record(&self, base: usize, origin: usize, addr: usize, data: &[u8]) {
        self.per_origin[origin].fetch_add(1, Ordering::Relaxed);
        if data.len() != 8 || data != word_at(addr - base).to_le_bytes() {
            self.wrong.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn take(&self) -> Vec<u64> {
        self.per_origin.iter().map(|c| c.swap(0, Ordering::Relaxed)).collect()
    }
}

/// The word every rank's table holds at byte `off` (the same on every rank: a get's bytes
/// can be checked by whoever logged them).
fn word_at(off: usize) -> u64 {
    (off as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555
}

fn record_bytes(addr: u64, seq: u64, data: u64) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&addr.to_le_bytes());
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    r[16..].copy_from_slice(&data.to_le_bytes());
    r
}

/// One rank of a job.
pub fn worker() -> BResult<()> {
    let net = std::env::var(NET_ENV)?;
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let gets: usize = match (net.as_str(), quick) {
        ("raw", false) => 200_000,
        ("raw", true) => 20_000,
        (_, false) => 20_000,
        (_, true) => 2_000,
    };
    let table = w.alloc_segment(TABLE)?;
    let rma_log = w.alloc_segment(RMA_LOG)?;
    for off in (0..TABLE).step_by(8) {
        table.write_local(off, &word_at(off).to_le_bytes());
    }
    let base = table.as_ptr() as usize;
    let served = Arc::new(Served { per_origin: (0..n).map(|_| AtomicU64::new(0)).collect(), wrong: AtomicU64::new(0) });
    // A lane per origin holds a round's records: one 64-byte entry per 8-byte get.
    let lanes = n.clamp(1, 16).next_power_of_two();
    let log_bytes = (lanes * gets * 64 * 5 / 4).next_power_of_two();
    let s = served.clone();
    w.create_log(
        DOMAIN,
        log_bytes,
        Notify::Hold,
        Arc::new(move |e: &LogEntry| {
            if e.meta.op == LogOp::Get {
                s.record(base, e.meta.origin as usize, e.meta.addr as usize, e.data());
            }
        }),
    )?;
    let s = served.clone();
    w.register_handler(
        LOG_AM,
        Arc::new(move |ctx: &AmCtx, p: &[u8]| {
            let addr = u64::from_le_bytes(p[..8].try_into().unwrap()) as usize;
            s.record(base, ctx.src, addr, &p[16..24]);
        }),
    )?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(me as u64 * 7 + 1);
    let mut lines = String::new();
    let mut seq = 0u64;
    let mut results: Vec<(&str, Vec<f64>)> = VARIANTS.iter().map(|v| (*v, Vec::new())).collect();
    for round in 0..3 {
        for k in 0..VARIANTS.len() {
            let v = VARIANTS[(k + round) % VARIANTS.len()];
            if std::env::var(ONLY_ENV).is_ok_and(|only| !only.split(',').any(|o| o == v)) {
                continue;
            }
            if v == "aa" {
                w.assoc_pages(table.as_ptr(), TABLE, Actions::W | Actions::R | Actions::RL | Actions::RLD, Some(DOMAIN))?;
            }
            let mut sent = vec![0u64; n];
            w.barrier()?;
            let t0 = Instant::now();
            let mut word = [0u8; 8];
            for i in 0..gets {
                let t = (me + 1 + rng.gen_range(0..n - 1)) % n;
                let off = rng.gen_range(0..TABLE / 8) * 8;
                let at = table.remote(t, off);
                w.get(at, &mut word)?;
                sent[t] += 1;
                seq += 1;
                match v {
                    "rma" => {
                        let slot = w.fetch_add(rma_log.remote(t, 0), 1)? as usize;
                        let place = RMA_RECORDS_AT + (slot % ((RMA_LOG - RMA_RECORDS_AT) / RECORD)) * RECORD;
                        w.put(rma_log.remote(t, place), &record_bytes(at.addr as u64, seq, u64::from_le_bytes(word)))?;
                    }
                    "am" => w.send_am(t, LOG_AM, 0, &record_bytes(at.addr as u64, seq, u64::from_le_bytes(word)))?,
                    _ => {}
                }
                if i % 64 == 63 {
                    w.progress();
                }
            }
            w.flush_all()?;
            let took = t0.elapsed().as_secs_f64();
            w.barrier()?;
            // What each origin sent where; then every target takes what arrived (active
            // messages and log entries may still be on their way) until it holds exactly that.
            let all =
                w.allgather(&[sent.iter().flat_map(|c| c.to_le_bytes()).collect::<Vec<u8>>(), took.to_le_bytes().to_vec()].concat())?;
            let sent_to_me: Vec<u64> = all.iter().map(|b| u64::from_le_bytes(b[me * 8..me * 8 + 8].try_into().unwrap())).collect();
            let expect: u64 = sent_to_me.iter().sum();
            let logged = v == "aa" || v == "am";
            let deadline = Instant::now() + std::time::Duration::from_secs(30);
            while logged && served.per_origin.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>() < expect && Instant::now() < deadline {
                w.progress();
                w.drain_log(DOMAIN)?;
            }
            w.barrier()?;
            let held = served.take();
            let rma_count = rma_log.read_u64(0);
            rma_log.write_local(0, &0u64.to_le_bytes());
            let ok = match v {
                "aa" | "am" => held == sent_to_me,
                "rma" => rma_count == expect,
                _ => held.iter().all(|&c| c == 0),
            };
            if !ok || served.wrong.load(Ordering::Relaxed) != 0 {
                return Err(format!(
                    "rank {me}, {v}: holds {held:?} records (RMA log {rma_count}), {} with wrong bytes; the origins sent {sent_to_me:?}",
                    served.wrong.load(Ordering::Relaxed)
                )
                .into());
            }
            let slowest = all.iter().map(|b| f64::from_le_bytes(b[n * 8..n * 8 + 8].try_into().unwrap())).fold(0.0, f64::max);
            results.iter_mut().find(|r| r.0 == v).unwrap().1.push((gets * n) as f64 / slowest);
            if v == "aa" {
                w.assoc_pages(table.as_ptr(), TABLE, Actions::W | Actions::R, None)?;
            }
            w.barrier()?;
        }
    }
    for (v, mut r) in results.into_iter().filter(|r| !r.1.is_empty()) {
        r.sort_by(f64::total_cmp);
        lines.push_str(&format!("{net}\t{n}\t{v}\t{}\t{}\t{}\n", r[r.len() / 2], r[0], r[r.len() - 1]));
    }
    if me == 0 {
        let out = std::env::var(OUT_ENV)?;
        std::fs::OpenOptions::new().create(true).append(true).open(out)?.write_all(lines.as_bytes())?;
    }
    w.barrier()?;
    Ok(w.finalize()?)
}
