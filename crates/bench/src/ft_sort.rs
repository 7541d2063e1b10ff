//! `activerma bench ft-sort`: the Active Access paper's Figure 9b — the communication time of
//! a fault-tolerant parallel sort (apps/sort: Coral-style, every rank gets its bucket from
//! every other rank in 64 KiB gets) whose gets are logged at their targets for recovery by
//! replay, four ways: no-ft (nothing logged), aa (the get leaves its bytes in the target's
//! access log), rma (the origin puts them back: fetch-add + put), am (it sends them back).
//!
//! A job per network (raw shared memory; the paper's modelled platform with a link of
//! apps::MODEL_LINK_MBS) and total size; in each, after a warm-up round of each design, the four
//! designs take turns over 5 rounds on the same keys, and the exchange time is the slowest
//! rank's (median of the rounds). The checkpoint the sort takes before its exchange is left
//! out: it is the same for every design and outside the time measured. The sort checks its
//! output every time (sorted, every key).
//!
//! Sizes: 64 MiB and 256 MiB of keys in total (16 MiB with --quick); ACTIVERMA_BENCH_SORT_TOTAL
//! (e.g. 1G, or 64M,1G) replaces them.

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma_sort::{Sorter, Variant};
use serde_json::json;
use std::io::Write;

const NET_ENV: &str = "ACTIVERMA_BENCH_SORT_NET";
const OUT_ENV: &str = "ACTIVERMA_BENCH_SORT_OUT";
const KEYS_ENV: &str = "ACTIVERMA_BENCH_SORT_KEYS";
const TOTAL_ENV: &str = "ACTIVERMA_BENCH_SORT_TOTAL";
const CHUNK: usize = 64 << 10;
const ROUNDS: usize = 5;
const AM_SLOT_SIZE: &str = "16K";
/// AA within 1 % of no-FT (the paper: < 1 %).
const AA_TARGET: f64 = 1.01;

pub fn is_worker() -> bool {
    std::env::var_os(NET_ENV).is_some()
}

fn networks() -> Vec<(&'static str, Vec<(String, String)>)> {
    let mut model: Vec<(String, String)> = super::apps::PAPER_MODEL.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
    model.push(("ACTIVERMA_NET_BANDWIDTH_MBS".into(), super::apps::MODEL_LINK_MBS.into()));
    vec![("raw", vec![]), ("modelled", model)]
}

fn totals(quick: bool) -> BResult<Vec<u64>> {
    if let Ok(text) = std::env::var(TOTAL_ENV) {
        return text
            .split(',')
            .map(|t| {
                activerma::settings::parse_size(t.trim()).ok_or_else(|| format!("{TOTAL_ENV}={text}: expected sizes such as 64M,1G").into())
            })
            .collect();
    }
    Ok(if quick { vec![16 << 20] } else { vec![64 << 20, 256 << 20] })
}

/// The parent: a job per network and size, then the table, the rows and the checks.
pub fn ft_sort(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("ft-sort");
    let _ = std::fs::remove_file(&out);
    let ranks = args.ranks.first().copied().unwrap_or(2);
    println!(
        "activerma bench ft-sort: parallel sort of 64-bit keys over {ranks} ranks, buckets fetched in {} KiB gets, each get logged (aa, rma, am) or not (no-ft); load {}",
        CHUNK >> 10,
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    for total in totals(args.quick)? {
        let keys = (total / 8 / ranks as u64) as usize;
        // The keys, and the rma design's log of as many bytes beside them.
        let segment = format!("{}", (2 * keys * 8 + (64 << 20)).next_power_of_two());
        for (name, settings) in networks() {
            let mut env = vec![
                (NET_ENV.to_string(), name.to_string()),
                (OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
                (KEYS_ENV.to_string(), keys.to_string()),
                ("ACTIVERMA_SEGMENT_SIZE".to_string(), segment.clone()),
                // The am design sends 64 KiB records: slots for bulk messages (4 fragments
                // each) rather than the default 256-byte ones made for short requests.
                ("ACTIVERMA_AM_SLOT_SIZE".to_string(), AM_SLOT_SIZE.to_string()),
                ("ACTIVERMA_AM_SLOTS".to_string(), "64".to_string()),
                // The aa design's log holds every record of an exchange (Notify::Hold: the
                // paper's log as a store); virtual memory, touched only as records arrive.
                ("ACTIVERMA_LOG_ARENA".to_string(), format!("{}", (4 * keys * 8).next_power_of_two().max(16 << 20))),
            ];
            env.extend(settings.iter().cloned());
            let code = super::jobs::run_with_env(ranks, &["bench", "ft-sort", "--rank-worker"], &env, 1800.0)?;
            if code != 0 {
                return Err(format!("the {name} job of {} MiB failed (exit code {code})", total >> 20).into());
            }
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    // (total MiB, network) -> (variant, median s, min, max, bytes sent back per rank)
    type Times = std::collections::BTreeMap<(u64, String), Vec<(String, f64, f64, f64, f64)>>;
    let mut times = Times::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [mib, net, variant, med, min, max, back] = f[..] else { continue };
        times.entry((mib.parse()?, net.to_string())).or_default().push((
            variant.to_string(),
            med.parse()?,
            min.parse()?,
            max.parse()?,
            back.parse()?,
        ));
    }
    println!("# exchange time of the whole job (ms), median of {ROUNDS} rounds after a warm-up round; each design's time / no-ft's; MiB each rank sent back to log its gets");
    println!(
        "# {:>5} {:<9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "MiB", "network", "no-ft", "aa", "rma", "am", "aa/noft", "rma/noft", "am/noft", "rma back", "am back"
    );
    for ((mib, net), list) in &times {
        let get = |v: &str| list.iter().find(|r| r.0 == v).cloned().unwrap_or((v.into(), f64::NAN, f64::NAN, f64::NAN, f64::NAN));
        let (noft, aa, rma, am) = (get("no-ft"), get("aa"), get("rma"), get("am"));
        println!(
            "{mib:>7} {net:<9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.3} {:>8.2} {:>8.2} {:>8.1} {:>8.1}",
            noft.1 * 1e3,
            aa.1 * 1e3,
            rma.1 * 1e3,
            am.1 * 1e3,
            aa.1 / noft.1,
            rma.1 / noft.1,
            am.1 / noft.1,
            rma.4 / 1048576.0,
            am.4 / 1048576.0
        );
        for (variant, med, min, max, back) in list {
            let params = rows::params([
                ("network", json!(net)),
                ("total_mib", json!(mib)),
                ("variant", json!(variant)),
                ("sent_back_bytes", json!(back)),
            ]);
            let m = Measured { value: *med, min: *min, median: *med, max: *max, reps: ROUNDS as u32 };
            rows::emit("ft-sort", &format!("{net}-{mib}M-{variant}"), params, "s", m, &[]);
        }
        if net == "modelled" {
            let what = format!("AA / no-FT exchange time, modelled, {mib} MiB");
            let value = aa.1 / noft.1;
            let verdict = if value <= AA_TARGET { "PASS" } else { "MISS" };
            println!("# {what:<50} {value:>6.3}  <= {AA_TARGET:<4} {verdict}");
            let params = rows::params([("what", json!(what)), ("target", json!(format!("<= {AA_TARGET}")))]);
            rows::emit("ft-sort-check", &what, params, "x", Measured::single(value), &[]);
            for (name, v) in [("RMA", &rma), ("AM", &am)] {
                let what = format!("{name} / AA exchange time, modelled, {mib} MiB");
                let value = v.1 / aa.1;
                let verdict = if value > 1.0 { "PASS" } else { "MISS" };
                println!("# {what:<50} {value:>6.3}  > 1 (sends its gets' bytes back) {verdict}");
                let params = rows::params([("what", json!(what)), ("target", json!("> 1"))]);
                rows::emit("ft-sort-check", &what, params, "x", Measured::single(value), &[]);
            }
        }
    }
    Ok(())
}

/// One rank of a job: the four designs take turns, ROUNDS times, on the same keys.
pub fn worker() -> BResult<()> {
    let net = std::env::var(NET_ENV)?;
    let keys: usize = std::env::var(KEYS_ENV)?.parse()?;
    let w = activerma::init()?;
    let mut sorter = Sorter::new(&w, keys, CHUNK, None)?;
    let mut results: Vec<(Variant, Vec<f64>, f64)> = Variant::ALL.iter().map(|&v| (v, Vec::new(), 0.0)).collect();
    // A warm-up round of every design first, not counted: what a design sets up once (the aa
    // design's log, made and mapped on its first exchange) is not part of its exchange time.
    for &v in Variant::ALL.iter() {
        sorter.run(v, 1, None)?;
    }
    for round in 0..ROUNDS {
        for k in 0..Variant::ALL.len() {
            let v = Variant::ALL[(k + round) % Variant::ALL.len()];
            // The same keys every round: the rounds repeat one measurement.
            let o = sorter.run(v, 1, None)?;
            let r = results.iter_mut().find(|r| r.0 == v).unwrap();
            r.1.push(o.slowest_exchange_seconds);
            r.2 = o.bytes_sent_back as f64;
        }
    }
    if w.rank() == 0 {
        let mib = (keys * 8 * w.size()) >> 20;
        let mut lines = String::new();
        for (v, mut t, back) in results {
            t.sort_by(f64::total_cmp);
            lines.push_str(&format!("{mib}\t{net}\t{}\t{}\t{}\t{}\t{back}\n", v.name(), t[t.len() / 2], t[0], t[t.len() - 1]));
        }
        let out = std::env::var(OUT_ENV)?;
        std::fs::OpenOptions::new().create(true).append(true).open(out)?.write_all(lines.as_bytes())?;
    }
    w.barrier()?;
    Ok(w.finalize()?)
}
