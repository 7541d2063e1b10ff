//! `activerma bench get-logging`: the Active Access paper's Figure 9a — logging every get a
//! rank serves, for recovery by replay (section 4.4), four ways with the same semantics (the
//! target ends up holding origin, address, length and the 8 bytes served, in the origin's
//! order) — the designs of `activerma_recovery::GetLog`, which the sort and the replay tests
//! use too:
//!
//! ```text
//! no-ft  plain 8-byte gets (the best case: nothing is logged)
//! aa     the served pages are marked R=1, RL=1, RLD=1: the get itself leaves a copy of the data
//!        in the target's access log (the paper's IOMMU; here the origin appends it, with the
//!        modelled 70 ns per entry); the log holds the round's records (`Notify::Hold`: the
//!        paper's log as a store, no CPU of the target's involved) until the check drains it
//! rma    the origin, after its get, claims a record in the target's log with a remote
//!        fetch-add and puts the record there (two more one-sided operations)
//! am     the origin, after its get, sends the record in an active message and waits until it
//!        has arrived (as rma's put completes remotely); the target's handler stores it (the
//!        target's CPU pays the modelled receive overhead)
//! ```
//! Every rank gets from random other ranks at random 8-byte words of their 1 MiB table; jobs of
//! 2, 3 and 4 ranks, on the raw conduit and with the paper's modelled platform (as `bench
//! dht`). Rate = all ranks' gets / the slowest rank's time, median of 3 rounds (variants take
//! turns). After every round each rank reads its records back from every target, as a
//! replacement would, and checks them against the gets it made (every one, in order, with the
//! bytes served); then the logs are trimmed, as at a checkpoint (a round is one interval).
//!
//! To profile one design, start a job's worker by hand, e.g.
//! `ACTIVERMA_BENCH_GETLOG_NET=raw ACTIVERMA_BENCH_GETLOG_OUT=/tmp/rows ACTIVERMA_BENCH_GETLOG_ONLY=aa
//!  activerma run -n 2 -- activerma bench get-logging --rank-worker` (under `perf record`).

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma_recovery::{AaLog, GetLog, Variant};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::time::Instant;

const NET_ENV: &str = "ACTIVERMA_BENCH_GETLOG_NET";
const OUT_ENV: &str = "ACTIVERMA_BENCH_GETLOG_OUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_GETLOG_QUICK";
/// For profiling one design: the variants a worker runs (comma-separated; default all).
const ONLY_ENV: &str = "ACTIVERMA_BENCH_GETLOG_ONLY";
const RANKS: [u32; 3] = [2, 3, 4];
const TABLE: usize = 1 << 20;
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

/// The word every rank's table holds at byte `off`.
fn word_at(off: usize) -> u64 {
    (off as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555
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
    for off in (0..TABLE).step_by(8) {
        table.write_local(off, &word_at(off).to_le_bytes());
    }
    // Between two trims (a round) a rank serves at most every other rank's gets.
    let served = gets * (n - 1);
    let mut log = GetLog::new(&w, served, served * 8, AaLog::Hold)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(me as u64 * 7 + 1);
    let mut results: Vec<(Variant, Vec<f64>)> = Variant::ALL.iter().map(|&v| (v, Vec::new())).collect();
    // This round's gets, per target: (address, the word it returned), in order.
    let mut made: Vec<Vec<(u64, u64)>> = vec![Vec::with_capacity(gets); n];
    for round in 0..3 {
        for k in 0..Variant::ALL.len() {
            let v = Variant::ALL[(k + round) % Variant::ALL.len()];
            if std::env::var(ONLY_ENV).is_ok_and(|only| !only.split(',').any(|o| o == v.name())) {
                continue;
            }
            log.arm(v, &table, gets * 8, 8)?;
            made.iter_mut().for_each(Vec::clear);
            w.barrier()?;
            let t0 = Instant::now();
            let mut word = [0u8; 8];
            for i in 0..gets {
                let t = (me + 1 + rng.gen_range(0..n - 1)) % n;
                let at = table.remote(t, rng.gen_range(0..TABLE / 8) * 8);
                w.get(at, &mut word)?;
                log.after_get(v, at, &word)?;
                made[t].push((at.addr as u64, u64::from_le_bytes(word)));
                if i % 64 == 63 {
                    w.progress();
                }
            }
            w.flush_all()?;
            let took = t0.elapsed().as_secs_f64();
            w.barrier()?; // every record in place before anyone reads the logs
                          // Each rank checks its own gets' records at their targets (what a replacement
                          // would replay): every one, in order, with the bytes served; then the logs are
                          // trimmed, as at a checkpoint.
            let records = log.my_records(v)?;
            for (t, (mine, logged)) in made.iter().zip(&records).enumerate() {
                let expect: Vec<(u64, u64)> = if v == Variant::NoFt { Vec::new() } else { mine.clone() };
                let got: Vec<(u64, u64)> =
                    logged.iter().map(|r| (r.addr, r.data.as_slice().try_into().map_or(u64::MAX, u64::from_le_bytes))).collect();
                if got != expect {
                    let wrong = got.iter().zip(&expect).filter(|(a, b)| a != b).count();
                    return Err(format!(
                        "rank {me}, {}: rank {t} holds {} records of its gets, {wrong} of them not as made; it made {}",
                        v.name(),
                        got.len(),
                        expect.len()
                    )
                    .into());
                }
                if mine.iter().any(|&(addr, data)| data != word_at(addr as usize - table.remote(t, 0).addr)) {
                    return Err(format!("rank {me}, {}: a get from rank {t} returned bytes its table does not hold", v.name()).into());
                }
            }
            log.trim()?;
            let all = w.allgather(&took.to_le_bytes())?;
            let slowest = all.iter().map(|b| f64::from_le_bytes(b[..8].try_into().unwrap())).fold(0.0, f64::max);
            results.iter_mut().find(|r| r.0 == v).unwrap().1.push((gets * n) as f64 / slowest);
        }
    }
    let mut lines = String::new();
    for (v, mut r) in results.into_iter().filter(|r| !r.1.is_empty()) {
        r.sort_by(f64::total_cmp);
        lines.push_str(&format!("{net}\t{n}\t{}\t{}\t{}\t{}\n", v.name(), r[r.len() / 2], r[0], r[r.len() - 1]));
    }
    if me == 0 {
        let out = std::env::var(OUT_ENV)?;
        std::fs::OpenOptions::new().create(true).append(true).open(out)?.write_all(lines.as_bytes())?;
    }
    w.barrier()?;
    Ok(w.finalize()?)
}
