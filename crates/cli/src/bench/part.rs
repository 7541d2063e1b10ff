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

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err("part-latency runs on 2 ranks".into());
    }
    let me = w.rank();
    // As the other benchmarks: rank 0 and rank 1 on two different CPUs.
    super::bind_to_cpu(me);
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

// ---------------------------------------------------------------------------------------------
// `activerma bench part-all-faults` (the paper's Figure 10) and `part-fault-freq` (Figure 11).
//
// Large blocking puts into rank 1's exposed private memory with a given share of the target
// pages missing. The eviction is NOT inside the timed interval: per put, rank 1 (the owner)
// evicts the chosen pages itself (`World::part_evict`, contents kept) and only then tells
// rank 0 to go; rank 0 times the put alone. (ACTIVERMA_PART_FAULT_PROB is not used here: its
// INJECT request is a round trip inside the put — plus the eviction's copy to the shadow —
// and would be counted in the time.) One job per page-in policy; sizes / probabilities loop
// inside the job. "pre-touched" (the paper's Touch-NoPres-Pgs): every page evicted, then rank 1
// touches each page (a SIGBUS page-in per page, timed at rank 1), then the put; its time is
// touch + put.

const SWEEP_ENV: &str = "ACTIVERMA_BENCH_PART_SWEEP";
const SWEEP_OUT_ENV: &str = "ACTIVERMA_BENCH_PART_SWEEP_OUT";
const ALL_SIZES: [usize; 5] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20];
const FREQ_PROBS: [u32; 6] = [0, 5, 10, 25, 50, 100];

/// Whether the owner touches the evicted pages itself before the put (each touch a SIGBUS
/// page-in), and whether that time counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PreTouch {
    No,
    /// Touch time + put time: the paper's Touch-NoPres-Pgs.
    Counted,
    /// Put time only: the put meets no fault but the memory a page-in leaves (new pages, their
    /// lines in the owner's cache) — the fault protocol's cost is PIA's time over this one.
    Untimed,
}

struct Sweep {
    name: &'static str,
    pagein: &'static str,
    /// Fault probability per page in percent (all-faults: 0 or 100).
    prob: Option<u32>,
    pretouch: PreTouch,
    /// No eviction, but rank 1 rewrites the target range before each put (untimed): a resident
    /// target whose lines are dirty in rank 1's cache, as after a page-in.
    dirty: bool,
}

const ALL_FAULTS: [Sweep; 6] = [
    Sweep { name: "no fault", pagein: "pio", prob: Some(0), pretouch: PreTouch::No, dirty: false },
    Sweep { name: "no fault, dirty", pagein: "pio", prob: Some(0), pretouch: PreTouch::No, dirty: true },
    Sweep { name: "PIO", pagein: "pio", prob: Some(100), pretouch: PreTouch::No, dirty: false },
    Sweep { name: "PI4", pagein: "pi4", prob: Some(100), pretouch: PreTouch::No, dirty: false },
    Sweep { name: "PIA", pagein: "pia", prob: Some(100), pretouch: PreTouch::No, dirty: false },
    Sweep { name: "pre-touched", pagein: "pio", prob: Some(100), pretouch: PreTouch::Counted, dirty: false },
];

const FAULT_FREQ: [Sweep; 3] = [
    Sweep { name: "PIO", pagein: "pio", prob: None, pretouch: PreTouch::No, dirty: false },
    Sweep { name: "PIA", pagein: "pia", prob: None, pretouch: PreTouch::No, dirty: false },
    Sweep { name: "paged in first", pagein: "pia", prob: None, pretouch: PreTouch::Untimed, dirty: false },
];

/// Rows of one sweep's jobs: (case, size, prob %, median µs, faults/put, evicted pages/put).
struct Row {
    case: String,
    size: usize,
    prob: u32,
    med: f64,
    faults: f64,
    evicted: f64,
}

fn run_sweeps(bench: &str, sweeps: &[Sweep], args: &BenchArgs) -> BResult<Vec<Row>> {
    let out = super::jobs::rows_file(bench);
    let _ = std::fs::remove_file(&out);
    for (i, s) in sweeps.iter().enumerate() {
        let mut env = vec![
            (SWEEP_ENV.to_string(), format!("{bench}:{i}")),
            (SWEEP_OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
            ("ACTIVERMA_REGISTRATION".into(), "part".into()),
            ("ACTIVERMA_PART_PAGEIN".into(), s.pagein.into()),
            ("ACTIVERMA_PART_RETRANSMIT".into(), "err".into()),
        ];
        if args.quick {
            env.push(("ACTIVERMA_BENCH_PART_QUICK".into(), "1".into()));
        }
        let code = super::jobs::run_with_env(2, &["bench", bench, "--rank-worker"], &env, 600.0)?;
        if code != 0 {
            return Err(format!("the job of \"{}\" failed (exit code {code})", s.name).into());
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    let mut rows = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [case, size, prob, med, faults, evicted] = f[..] else { continue };
        rows.push(Row {
            case: case.to_string(),
            size: size.parse()?,
            prob: prob.parse()?,
            med: med.parse()?,
            faults: faults.parse()?,
            evicted: evicted.parse()?,
        });
    }
    Ok(rows)
}

fn find(rows: &[Row], case: &str, size: usize, prob: u32) -> f64 {
    rows.iter().find(|r| r.case == case && r.size == size && r.prob == prob).map_or(f64::NAN, |r| r.med)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// The parent of `bench part-all-faults`.
pub fn all_faults(args: &BenchArgs) -> BResult<()> {
    println!(
        "activerma bench part-all-faults: blocking put to rank 1's exposed private memory, every target page evicted \
         (outside the timed put) before each put; load {}",
        super::load_avg()
    );
    let rows = run_sweeps("part-all-faults", &ALL_FAULTS, args)?;
    println!("# {:<15} {:>8} {:>12} {:>9} {:>11} {:>12}", "case", "size", "median(us)", "x no-flt", "faults/put", "evicted/put");
    for r in &rows {
        let base = find(&rows, "no fault", r.size, 0);
        println!(
            "{:<17} {:>8} {:>12.1} {:>9.2} {:>11.1} {:>12.1}",
            r.case,
            format!("{} KiB", r.size >> 10),
            r.med,
            r.med / base,
            r.faults,
            r.evicted
        );
    }
    let mb = 1 << 20;
    let base = find(&rows, "no fault", mb, 0);
    println!("# 1 MiB, ratio to no fault ({base:.1} us): measured vs paper (Fig. 10)");
    println!(
        "#   {:<15} {:>6.2}x   (the target's lines dirty in rank 1's cache, as after a page-in)",
        "no fault, dirty",
        find(&rows, "no fault, dirty", mb, 0) / base
    );
    for (case, paper) in [("PIO", "-"), ("PI4", "-"), ("PIA", "2.6"), ("pre-touched", "2.0 (Touch-NoPres-Pgs)")] {
        println!("#   {:<15} {:>6.2}x   paper {}", case, find(&rows, case, mb, 100) / base, paper);
    }
    println!(
        "# pre-touched = the owner's CPU touching every evicted page first (here each touch is a SIGBUS resolved by \
         PART's handler, not a kernel minor fault as in the paper), timed at rank 1, plus the put"
    );
    let pia = find(&rows, "PIA", mb, 100) / base;
    println!("# target: PIA at 100 % faults <= 2x no fault for 1 MiB: {pia:.2}x {}", verdict(pia <= 2.0));
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// The parent of `bench part-fault-freq`.
pub fn fault_freq(args: &BenchArgs) -> BResult<()> {
    println!(
        "activerma bench part-fault-freq: 1 MiB blocking put to rank 1's exposed private memory, each target page \
         evicted with the probability (outside the timed put) before each put; load {}",
        super::load_avg()
    );
    let rows = run_sweeps("part-fault-freq", &FAULT_FREQ, args)?;
    let mb = 1 << 20;
    // The no-fault reference: the lower of the two jobs' 0 % medians (same configuration).
    let base = find(&rows, "PIO", mb, 0).min(find(&rows, "PIA", mb, 0));
    println!("# no fault: {base:.1} us");
    println!(
        "# paged in first: the same pages evicted, then paged in by rank 1's own touch before the put (untimed): no fault, \
         but the memory a page-in leaves (fresh pages whose lines sit in rank 1's cache, which rank 0's CPU copy must \
         fetch; a NIC's DMA would not); PIA / paged-in = the fault protocol's own cost"
    );
    println!(
        "# {:>6} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9} {:>8} {:>14} {:>11} {:>14}",
        "faults",
        "PIO(us)",
        "x no-flt",
        "flt/put",
        "PIA(us)",
        "x no-flt",
        "flt/put",
        "PIO/PIA",
        "paper PIO/PIA",
        "paged-in",
        "PIA/paged-in"
    );
    let paper_ratio = |p: u32| match p {
        5 => "1.3",
        100 => "6.7",
        _ => "-",
    };
    for &p in &FREQ_PROBS {
        let row = |c: &str| rows.iter().find(|r| r.case == c && r.prob == p);
        let (Some(o), Some(a)) = (row("PIO"), row("PIA")) else { continue };
        let (paged, protocol) = match row("paged in first") {
            Some(t) => (format!("{:.1}", t.med), format!("{:.2}", a.med / t.med)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:>7}% {:>10.1} {:>9.2} {:>9.1} {:>10.1} {:>9.2} {:>9.1} {:>8.2} {:>14} {:>11} {:>14}",
            p,
            o.med,
            o.med / base,
            o.faults,
            a.med,
            a.med / base,
            a.faults,
            o.med / a.med,
            paper_ratio(p),
            paged,
            protocol
        );
    }
    println!("# paper (Fig. 11): PIO/PIA 1.3 at 5 %, 2.2 at 20 %, 3.6 at 40 %, 5.7 at 80 %, 6.7 at 100 %; PIA 1.15x at 5 %, 1.56x at 40 %, 2.6x at 100 %");
    let pia5 = find(&rows, "PIA", mb, 5) / base;
    println!("# target: PIA at 5 % faults <= 1.1x no fault: {pia5:.2}x {}", verdict(pia5 <= 1.1));
    let paged5 = find(&rows, "paged in first", mb, 5);
    println!(
        "# of which the memory after a page-in (paged in first / no fault): {:.2}x; the fault protocol (PIA / paged in first): {:.2}x",
        paged5 / base,
        find(&rows, "PIA", mb, 5) / paged5
    );
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// True in a rank of one of the sweep benchmarks' jobs.
pub fn is_sweep_worker() -> bool {
    std::env::var_os(SWEEP_ENV).is_some()
}

/// One rank of a sweep job: for each (size, probability) point, `iters` puts, each preceded by
/// the owner's (untimed) eviction.
pub fn sweep_worker() -> BResult<()> {
    let spec = std::env::var(SWEEP_ENV)?;
    let (bench, idx) = spec.split_once(':').ok_or("bad sweep spec")?;
    let idx: usize = idx.parse()?;
    let s = if bench == "part-all-faults" { &ALL_FAULTS[idx] } else { &FAULT_FREQ[idx] };
    let points: Vec<(usize, u32)> = match s.prob {
        Some(p) => ALL_SIZES.iter().map(|&z| (z, p)).collect(),
        None => FREQ_PROBS.iter().map(|&p| (1 << 20, p)).collect(),
    };
    let quick = std::env::var_os("ACTIVERMA_BENCH_PART_QUICK").is_some();
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err("the PART sweeps run on 2 ranks".into());
    }
    let me = w.rank();
    super::bind_to_cpu(me);
    let ps = activerma_core::page::page_size();
    let max = ALL_SIZES[ALL_SIZES.len() - 1];
    let mut mem = vec![me as u8 + 1; max + 2 * ps];
    // SAFETY: `mem` outlives the exposure (dropped below, before `mem`).
    let exposed = unsafe { w.expose_raw(mem.as_mut_ptr(), mem.len(), Prot::ReadWrite)? };
    let base = activerma_core::page::page_ceil(exposed.addr());
    let all = w.allgather(&(base as u64).to_le_bytes())?;
    let peer_base = u64::from_le_bytes(all[1 - me][..8].try_into().unwrap()) as usize;
    let src = vec![7u8; max];
    let ctrl = w.alloc_segment(64)?;
    let flag = |off: usize| unsafe { std::ptr::read_volatile(ctrl.as_ptr().add(off) as *const u64) };
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (me as u64 + 1);
    let mut seq = 0u64;
    for &(size, prob) in &points {
        let mut iters = (200 * (max / size)).clamp(100, 2000);
        if quick {
            iters /= 4;
        }
        let warm = 10;
        let mut times = Vec::with_capacity(iters);
        let mut touch = Vec::with_capacity(iters);
        let mut evicted = 0u64;
        let stats0 = w.part_stats().snapshot();
        for i in 0..warm + iters {
            seq += 1;
            if me == 1 {
                // Untimed by rank 0: the eviction happens before rank 0 is told to go.
                let mut n = 0;
                if prob >= 100 {
                    n = w.part_evict(base, size)?;
                } else if prob > 0 {
                    let pages = size / ps;
                    let mut p = 0;
                    while p < pages {
                        let hit = |r: &mut u64| {
                            *r ^= *r << 13;
                            *r ^= *r >> 7;
                            *r ^= *r << 17;
                            (*r % 100) < prob as u64
                        };
                        if !hit(&mut rng) {
                            p += 1;
                            continue;
                        }
                        let mut q = p + 1;
                        while q < pages && hit(&mut rng) {
                            q += 1;
                        }
                        n += w.part_evict(base + p * ps, (q - p) * ps)?;
                        // The page that ended the run (q) was drawn as "no fault".
                        p = q + 1;
                    }
                }
                if s.dirty {
                    // SAFETY: our own exposed, resident memory; rank 0 does not access it now.
                    unsafe { std::ptr::write_bytes(base as *mut u8, 7, size) };
                }
                if s.pretouch != PreTouch::No {
                    let t0 = Instant::now();
                    let mut x = 0u8;
                    for a in (base..base + size).step_by(ps) {
                        // SAFETY: our own exposed memory; a read of a missing page is resolved
                        // by the SIGBUS handler (a page-in per page, as the CPU's own faults).
                        x ^= unsafe { std::ptr::read_volatile(a as *const u8) };
                    }
                    std::hint::black_box(x);
                    if i >= warm && s.pretouch == PreTouch::Counted {
                        touch.push(t0.elapsed().as_secs_f64() * 1e6);
                    }
                }
                if i >= warm {
                    evicted += n;
                }
                w.put(ctrl.remote(0, 0), &seq.to_le_bytes())?;
                while flag(8) != seq {
                    w.progress();
                }
            } else {
                while flag(0) != seq {
                    w.progress();
                }
                let t0 = Instant::now();
                w.put(RemotePtr::new(1, peer_base), &src[..size])?;
                let t = t0.elapsed().as_secs_f64() * 1e6;
                if i >= warm {
                    times.push(t);
                }
                w.put(ctrl.remote(1, 8), &seq.to_le_bytes())?;
            }
        }
        // Rank 1 hands its per-point figures (evicted pages, touch median) to rank 0.
        if me == 1 {
            touch.sort_by(f64::total_cmp);
            let tm = if touch.is_empty() { 0.0 } else { pct(&touch, 0.5) };
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&evicted.to_le_bytes());
            b[8..].copy_from_slice(&tm.to_bits().to_le_bytes());
            w.put(ctrl.remote(0, 16), &b)?;
        }
        w.barrier()?;
        if me == 0 {
            let ev = flag(16) as f64 / iters as f64;
            let tm = f64::from_bits(flag(24));
            times.sort_by(f64::total_cmp);
            let s1 = w.part_stats().snapshot();
            let get = |v: &[(&str, u64)], k: &str| v.iter().find(|&&(n, _)| n == k).map_or(0, |&(_, x)| x);
            let faults = (get(&s1, "faults_dst") - get(&stats0, "faults_dst")) as f64 / (warm + iters) as f64;
            let row = format!("{}\t{}\t{}\t{:.2}\t{:.2}\t{:.2}\n", s.name, size, prob, pct(&times, 0.5) + tm, faults, ev);
            use std::io::Write;
            std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(SWEEP_OUT_ENV)?)?.write_all(row.as_bytes())?;
        }
        w.barrier()?;
    }
    drop(exposed);
    drop(mem);
    w.barrier()?;
    w.finalize()?;
    Ok(())
}
