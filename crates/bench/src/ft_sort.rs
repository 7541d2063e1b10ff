//! `activerma bench ft-sort`: the Active Access paper's Figure 9b — the communication time of
//! a fault-tolerant parallel sort (apps/sort: Coral-style, every rank gets its bucket from
//! every other rank in 64 KiB gets) whose gets are logged at their targets for recovery by
//! replay, four ways: no-ft (nothing logged), aa (the get leaves its bytes in the target's
//! access log), rma (the origin puts them back: fetch-add + put), am (it sends them back).
//!
//! A job per network (raw shared memory; the paper's modelled platform with a link of
//! apps::MODEL_LINK_MBS) and total size; in each, after a warm-up round of each design, the
//! four designs take turns over 15 rounds (raw: 5) on the same keys, and the exchange time is
//! the slowest rank's (median of the rounds). A ratio between two designs is the median of the
//! rounds' ratios: a round's designs run seconds apart, while the machine's speed drifts over
//! the run, and a ratio of two medians could take them from rounds far apart. The checkpoint
//! the sort takes before its exchange is left out: it is the same for every design and
//! outside the time measured. The sort checks its
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
/// Rounds per job: the modelled network's, whose AA / no-FT is judged against 1 %, more (a
/// round's ratio moves by a few per cent: the slowest rank's time includes its wait at the
/// closing barrier); the raw conduit's are shown for information.
const ROUNDS_MODELLED: usize = 15;
const ROUNDS_RAW: usize = 5;

fn rounds(net: &str) -> usize {
    if net == "modelled" {
        ROUNDS_MODELLED
    } else {
        ROUNDS_RAW
    }
}
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
    // (total MiB, network) -> (variant, bytes sent back per rank, every round's s in round order)
    type Times = std::collections::BTreeMap<(u64, String), Vec<(String, f64, Vec<f64>)>>;
    let mut times = Times::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [mib, net, variant, back, rounds] = f[..] else { continue };
        let rounds: Vec<f64> = rounds.split(',').map(str::parse).collect::<Result<_, _>>()?;
        times.entry((mib.parse()?, net.to_string())).or_default().push((variant.to_string(), back.parse()?, rounds));
    }
    println!("# exchange time of the whole job (ms), median of {ROUNDS_MODELLED} rounds (raw: {ROUNDS_RAW}) after a warm-up round; a ratio is the median of the rounds' ratios; MiB each rank sent back to log its gets");
    println!(
        "# {:>5} {:<9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "MiB", "network", "no-ft", "aa", "rma", "am", "aa/noft", "rma/noft", "am/noft", "rma back", "am back"
    );
    for ((mib, net), list) in &times {
        // A design's rounds and bytes sent back (none and NaN when it is missing).
        let get = |v: &str| list.iter().find(|r| r.0 == v).map(|r| (r.2.as_slice(), r.1)).unwrap_or((&[], f64::NAN));
        let median = |rounds: &[f64]| Measured::of_samples(rounds).value;
        // The median of the rounds' ratios a / b (NaN when a design is missing).
        let ratio = |a: &[f64], b: &[f64]| Measured::of_samples(&a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>()).value;
        let (noft, aa, rma, am) = (get("no-ft"), get("aa"), get("rma"), get("am"));
        println!(
            "{mib:>7} {net:<9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.3} {:>8.2} {:>8.2} {:>8.1} {:>8.1}",
            median(noft.0) * 1e3,
            median(aa.0) * 1e3,
            median(rma.0) * 1e3,
            median(am.0) * 1e3,
            ratio(aa.0, noft.0),
            ratio(rma.0, noft.0),
            ratio(am.0, noft.0),
            rma.1 / 1048576.0,
            am.1 / 1048576.0
        );
        for (variant, back, rounds) in list {
            let params = rows::params([
                ("network", json!(net)),
                ("total_mib", json!(mib)),
                ("variant", json!(variant)),
                ("sent_back_bytes", json!(back)),
            ]);
            rows::emit("ft-sort", &format!("{net}-{mib}M-{variant}"), params, "s", Measured::of_samples(rounds), &[]);
        }
        if net == "modelled" {
            let what = format!("AA / no-FT exchange time, modelled, {mib} MiB");
            let value = ratio(aa.0, noft.0);
            let verdict = if value <= AA_TARGET { "PASS" } else { "MISS" };
            println!("# {what:<50} {value:>6.3}  <= {AA_TARGET:<4} {verdict}");
            let params = rows::params([("what", json!(what)), ("target", json!(format!("<= {AA_TARGET}")))]);
            rows::emit("ft-sort-check", &what, params, "x", Measured::single(value), &[]);
            for (name, v) in [("RMA", &rma), ("AM", &am)] {
                let what = format!("{name} / AA exchange time, modelled, {mib} MiB");
                let value = ratio(v.0, aa.0);
                let verdict = if value > 1.0 { "PASS" } else { "MISS" };
                println!("# {what:<50} {value:>6.3}  > 1 (sends its gets' bytes back) {verdict}");
                let params = rows::params([("what", json!(what)), ("target", json!("> 1"))]);
                rows::emit("ft-sort-check", &what, params, "x", Measured::single(value), &[]);
            }
        }
    }
    Ok(())
}

/// One rank of a job: the four designs take turns, `rounds(net)` times, on the same keys.
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
    for round in 0..rounds(&net) {
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
        for (v, t, back) in results {
            let rounds: Vec<String> = t.iter().map(f64::to_string).collect();
            lines.push_str(&format!("{mib}\t{net}\t{}\t{back}\t{}\n", v.name(), rounds.join(",")));
        }
        let out = std::env::var(OUT_ENV)?;
        std::fs::OpenOptions::new().create(true).append(true).open(out)?.write_all(lines.as_bytes())?;
    }
    w.barrier()?;
    Ok(w.finalize()?)
}
