//! `activerma bench part-latency`: a blocking 4 KiB put into another rank's exposed private
//! memory under PART — without a fault, with a real fault at the target resolved by ERR or
//! by a 100 µs / 1 ms time-out, with a fault in the origin's own source buffer (resolved on the
//! spot, or avoided by pre-touch) — and the same put into mlock-pinned memory (pin-all).
//!
//! Each configuration is a 2-rank job of its own (the settings are job-wide). Per iteration,
//! outside the timed region, the page is evicted (contents kept) by the rank that owns it
//! (`World::part_evict`), then rank 0 times one put. Rank 1 makes progress (app mode) while it
//! waits, so it serves the NACK at once, as a target's fault handler would.

use super::{BResult, BenchArgs};
use activerma::{Prot, RemotePtr};
use std::time::Instant;

const CASE_ENV: &str = "ACTIVERMA_BENCH_PART_CASE";
const OUT_ENV: &str = "ACTIVERMA_BENCH_PART_OUT";
const SIZE: usize = 4096;

#[derive(Clone, Copy, PartialEq)]
enum Evict {
    None,
    Target,
    Source,
}

struct Case {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    evict: Evict,
    iters: usize,
}

const PART: (&str, &str) = ("ACTIVERMA_REGISTRATION", "part");

const CASES: [Case; 7] = [
    Case { name: "no fault", env: &[PART], evict: Evict::None, iters: 4000 },
    Case { name: "fault at target, ERR", env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "err")], evict: Evict::Target, iters: 4000 },
    Case {
        name: "fault at target, time-out 100 us",
        env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "timeout:100us")],
        evict: Evict::Target,
        iters: 1000,
    },
    Case {
        name: "fault at target, time-out 1 ms",
        env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "timeout:1ms")],
        evict: Evict::Target,
        iters: 200,
    },
    Case { name: "fault at source, resolved by the origin", env: &[PART], evict: Evict::Source, iters: 4000 },
    Case { name: "fault at source, pretouch 4 KiB", env: &[PART, ("ACTIVERMA_PART_PRETOUCH", "4K")], evict: Evict::Source, iters: 4000 },
    Case {
        name: "mlock-pinned target (pin-all), no fault",
        env: &[("ACTIVERMA_REGISTRATION", "pin-all")],
        evict: Evict::None,
        iters: 4000,
    },
];

/// The parent: one job per configuration, then the table.
pub fn latency(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("part-latency");
    let _ = std::fs::remove_file(&out);
    println!("activerma bench part-latency: blocking {SIZE} B put to rank 1's exposed private memory, load {}", super::load_avg());
    for (i, c) in CASES.iter().enumerate() {
        let mut env = vec![(CASE_ENV.to_string(), i.to_string()), (OUT_ENV.to_string(), out.to_string_lossy().into_owned())];
        env.extend(c.env.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
        if args.quick {
            env.push(("ACTIVERMA_BENCH_PART_QUICK".into(), "1".into()));
        }
        let code = super::jobs::run_with_env(2, &["bench", "part-latency", "--rank-worker"], &env, 300.0)?;
        if code != 0 {
            return Err(format!("the job of \"{}\" failed (exit code {code})", c.name).into());
        }
    }
    let rows = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    println!("# {:<42} {:>12} {:>10} {:>10} {:>12} {:>10}", "case", "median(us)", "p90(us)", "min(us)", "faults/put", "resends");
    let mut medians = Vec::new();
    for line in rows.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, med, p90, min, faults, resends] = f[..] else { continue };
        println!("{:<44} {:>12} {:>10} {:>10} {:>12} {:>10}", name, med, p90, min, faults, resends);
        medians.push((name.to_string(), med.parse::<f64>().unwrap_or(f64::NAN)));
    }
    let m = |n: &str| medians.iter().find(|(k, _)| k == n).map_or(f64::NAN, |&(_, v)| v);
    let resolved = m("fault at target, ERR") - m("no fault");
    println!(
        "# fault resolved (fault at target with ERR minus no fault): {resolved:.2} us median; target <= 10 us: {}",
        if resolved <= 10.0 { "PASS" } else { "MISS" }
    );
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

pub(super) fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Joins a 2-rank PART job, each rank bound to its own CPU (as the other benchmarks).
pub(super) fn init_pair(bench: &str) -> BResult<activerma::World> {
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err(format!("{bench} runs on 2 ranks").into());
    }
    super::bind_to_cpu(w.rank());
    Ok(w)
}

/// True in a rank of one of this benchmark's jobs.
pub fn is_worker() -> bool {
    std::env::var_os(CASE_ENV).is_some()
}

/// One rank of a configuration's job.
pub fn worker() -> BResult<()> {
    let case: usize = std::env::var(CASE_ENV)?.parse()?;
    let c = &CASES[case];
    let quick = std::env::var_os("ACTIVERMA_BENCH_PART_QUICK").is_some();
    let iters = if quick { c.iters / 4 } else { c.iters };
    let w = init_pair("part-latency")?;
    let me = w.rank();
    let ps = activerma_core::page::page_size();
    // Resident memory (written), exposed; the timed page is a whole page inside it.
    let mut mem = vec![me as u8 + 1; 4 * ps];
    // SAFETY: `mem` outlives the exposure (dropped below, before `mem`).
    let exposed = unsafe { w.expose_raw(mem.as_mut_ptr(), mem.len(), Prot::ReadWrite)? };
    let page = activerma_core::page::page_ceil(exposed.addr());
    let all = w.allgather(&(page as u64).to_le_bytes())?;
    let peer_page = u64::from_le_bytes(all[1 - me][..8].try_into().unwrap()) as usize;
    let ctrl = w.alloc_segment(64)?;
    let flag = |off: usize| unsafe { std::ptr::read_volatile(ctrl.as_ptr().add(off) as *const u64) };
    let warm = 50;
    let mut times = Vec::with_capacity(iters);
    for i in 1..=(warm + iters) as u64 {
        if me == 1 {
            if c.evict == Evict::Target && w.part_evict(page, SIZE)? != 1 {
                return Err("rank 1: the page was not evicted".into());
            }
            w.put(ctrl.remote(0, 0), &i.to_le_bytes())?;
            while flag(8) != i {
                w.progress();
            }
        } else {
            if c.evict == Evict::Source && w.part_evict(page, SIZE)? != 1 {
                return Err("rank 0: the page was not evicted".into());
            }
            while flag(0) != i {
                w.progress();
            }
            // SAFETY: our own exposed page; nobody writes it meanwhile.
            let src = unsafe { std::slice::from_raw_parts(page as *const u8, SIZE) };
            let t0 = Instant::now();
            w.put(RemotePtr::new(1, peer_page), src)?;
            let t = t0.elapsed().as_secs_f64() * 1e6;
            if i > warm as u64 {
                times.push(t);
            }
            w.put(ctrl.remote(1, 8), &i.to_le_bytes())?;
        }
    }
    w.barrier()?;
    if me == 0 {
        times.sort_by(f64::total_cmp);
        let s = w.part_stats().snapshot();
        let get = |k: &str| s.iter().find(|&&(n, _)| n == k).map_or(0, |&(_, v)| v);
        let puts = (warm + iters) as f64;
        let row = format!(
            "{}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{}\n",
            c.name,
            pct(&times, 0.5),
            pct(&times, 0.9),
            times[0],
            (get("faults_dst") + get("faults_src")) as f64 / puts,
            get("retransmissions")
        );
        use std::io::Write;
        std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(OUT_ENV)?)?.write_all(row.as_bytes())?;
    }
    drop(exposed);
    drop(mem);
    w.barrier()?;
    w.finalize()?;
    Ok(())
}
