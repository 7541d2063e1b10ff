//! `activerma bench part-all-faults` (the paper's Figure 10) and `part-fault-freq` (Figure 11).
//!
//! Large blocking puts into rank 1's exposed private memory with a given share of the target
//! pages missing. The eviction is NOT inside the timed interval: per put, rank 1 (the owner)
//! evicts the chosen pages itself (`World::part_evict`, contents kept) and only then tells
//! rank 0 to go; rank 0 times the put alone. (ACTIVERMA_PART_FAULT_PROB is not used here: its
//! INJECT request is a round trip inside the put — plus the eviction's copy to the shadow —
//! and would be counted in the time.) "pre-touched" (the paper's Touch-NoPres-Pgs): every page
//! evicted, then rank 1 touches each page (a SIGBUS page-in per page, timed at rank 1), then
//! the put; its time is touch + put.
//!
//! All cases of a benchmark run in ONE 2-rank job, interleaved in short runs of `CHUNK` puts
//! (rank 0 switches the page-in policy with `World::set_part_page_in`), so every ratio
//! compares puts measured side by side: with one job per case a noisy neighbour's phase
//! shifts a whole case (identical configurations differed by 1.4x that way). The first put of
//! each run is not counted: it meets the memory the previous case left (pages it just paged
//! in, lines in rank 1's cache), which would make "no fault" look like "after a page-in".
//!
//! Each benchmark runs its job twice: at memory speed (the put is a CPU copy at ~17 GB/s, so a
//! fault's fixed cost weighs against a ~60 µs transfer), and over the modelled network at the
//! paper's link (10 Gb/s HSS links, 4 µs base latency; ACTIVERMA_NET_*), where the origin
//! sends each block, and each resend, at the link's rate, as the paper's RDMA engine does.

use super::part_pair::{self, Pair};
use super::rows;
use super::timing::{percentile, Measured};
use super::{BResult, BenchArgs};
use activerma::RemotePtr;
use activerma::{PageIn, PartStats};
use serde_json::json;
use std::time::Instant;

const SWEEP_ENV: &str = "ACTIVERMA_BENCH_PART_SWEEP";
const SWEEP_OUT_ENV: &str = "ACTIVERMA_BENCH_PART_SWEEP_OUT";
const ALL_SIZES: [usize; 5] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20];
const FREQ_PROBS: [u32; 6] = [0, 5, 10, 25, 50, 100];
/// Puts per case in a row; the first only settles the memory into this case's state.
const CHUNK: usize = 8;

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
    page_in: PageIn,
    /// Fault probability per page in percent (all-faults: 0 or 100; None: the point's).
    prob: Option<u32>,
    pretouch: PreTouch,
    /// No eviction, but rank 1 rewrites the target range before each put (untimed): a resident
    /// target whose lines are dirty in rank 1's cache, as after a page-in.
    dirty: bool,
}

const fn sweep(name: &'static str, page_in: PageIn, prob: Option<u32>) -> Sweep {
    Sweep { name, page_in, prob, pretouch: PreTouch::No, dirty: false }
}

static ALL_FAULTS: [Sweep; 7] = [
    sweep("no fault", PageIn::One, Some(0)),
    Sweep { dirty: true, ..sweep("no fault, dirty", PageIn::One, Some(0)) },
    sweep("PIO", PageIn::One, Some(100)),
    sweep("PI4", PageIn::Block, Some(100)),
    sweep("PIA", PageIn::All, Some(100)),
    sweep("PIA early ERR", PageIn::AllEarlyErr, Some(100)),
    Sweep { pretouch: PreTouch::Counted, ..sweep("pre-touched", PageIn::One, Some(100)) },
];

static FAULT_FREQ: [Sweep; 5] = [
    // The reference of each point, measured beside it (its row carries the point's
    // probability, though it evicts nothing).
    sweep("no fault", PageIn::One, Some(0)),
    sweep("PIO", PageIn::One, None),
    sweep("PIA", PageIn::All, None),
    sweep("PIA early ERR", PageIn::AllEarlyErr, None),
    Sweep { pretouch: PreTouch::Untimed, ..sweep("paged in first", PageIn::All, None) },
];

fn sweeps_of(bench: &str) -> &'static [Sweep] {
    if bench == "part-all-faults" {
        &ALL_FAULTS
    } else {
        &FAULT_FREQ
    }
}

/// Rows of one sweep's jobs: (case, size, prob %, median µs and the spread of the puts,
/// faults/put, evicted pages/put).
struct Row {
    case: String,
    size: usize,
    prob: u32,
    med: f64,
    time: Measured,
    faults: f64,
    evicted: f64,
}

/// What the sweep's puts cross.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    /// No modelled network: a put is the origin's CPU copy (process_vm_writev).
    MemorySpeed,
    /// The modelled network at the paper's figures: 10 Gb/s links between its boards, and a
    /// base RDMA latency of about 4 µs (its Section V).
    PaperLink,
}

impl Link {
    const BOTH: [Link; 2] = [Link::MemorySpeed, Link::PaperLink];
    const PAPER_MBS: u64 = 1250;
    const PAPER_LATENCY_NS: u64 = 4000;

    fn title(self) -> String {
        match self {
            Link::MemorySpeed => "at memory speed (no modelled network)".into(),
            Link::PaperLink => format!(
                "over the paper's link (modelled network: ACTIVERMA_NET_BANDWIDTH_MBS={} (10 Gb/s), \
                 ACTIVERMA_NET_LATENCY_NS={}; each block and each resend goes out at the link's rate)",
                Link::PAPER_MBS,
                Link::PAPER_LATENCY_NS
            ),
        }
    }

    /// The report rows' name of the link.
    fn tag(self) -> &'static str {
        match self {
            Link::MemorySpeed => "memory",
            Link::PaperLink => "paper",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Link::MemorySpeed => "memory speed",
            Link::PaperLink => "paper's link",
        }
    }

    /// The job's network settings (set either way, so a caller's own ACTIVERMA_NET_* cannot
    /// leak into the memory-speed run).
    fn env(self) -> [(String, String); 2] {
        let (mbs, lat) = match self {
            Link::MemorySpeed => (0, 0),
            Link::PaperLink => (Link::PAPER_MBS, Link::PAPER_LATENCY_NS),
        };
        [("ACTIVERMA_NET_BANDWIDTH_MBS".into(), mbs.to_string()), ("ACTIVERMA_NET_LATENCY_NS".into(), lat.to_string())]
    }
}

fn run_sweeps(bench: &str, args: &BenchArgs, link: Link) -> BResult<Vec<Row>> {
    let out = super::jobs::rows_file(bench);
    let _ = std::fs::remove_file(&out);
    let mut env = vec![
        (SWEEP_ENV.to_string(), bench.to_string()),
        (SWEEP_OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
        ("ACTIVERMA_REGISTRATION".into(), "part".into()),
        ("ACTIVERMA_PART_RETRANSMIT".into(), "err".into()),
    ];
    env.extend(link.env());
    if args.quick {
        env.push(("ACTIVERMA_BENCH_PART_QUICK".into(), "1".into()));
    }
    let code = super::jobs::run_with_env(2, &["bench", bench, "--rank-worker"], &env, 900.0)?;
    if code != 0 {
        return Err(format!("the job of {bench} failed (exit code {code})").into());
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    let mut rows = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [case, size, prob, med, min, max, puts, faults, evicted] = f[..] else {
            return Err(format!("malformed {bench} row {line:?}").into());
        };
        let med: f64 = med.parse()?;
        rows.push(Row {
            case: case.to_string(),
            size: size.parse()?,
            prob: prob.parse()?,
            med,
            time: Measured { value: med, min: min.parse()?, median: med, max: max.parse()?, reps: puts.parse()? },
            faults: faults.parse()?,
            evicted: evicted.parse()?,
        });
    }
    emit_rows(bench, &rows, link, &env);
    Ok(rows)
}

/// Every row as a report row of `bench` (µs), and as a ratio to the no-fault puts measured
/// beside it (benchmark `<bench>/no-fault`, ×), as the paper's figures compare them.
fn emit_rows(bench: &str, rows: &[Row], link: Link, env: &[(String, String)]) {
    for r in rows {
        let params = rows::params([("size", json!(r.size)), ("faults", json!(r.prob)), ("link", json!(link.tag()))]);
        rows::emit(bench, &r.case, params.clone(), "us", r.time, env);
        // all-faults' reference is the size's 0 % row; fault-freq's is the point's.
        let reference = rows.iter().find(|b| b.case == "no fault" && b.size == r.size && (b.prob == 0 || b.prob == r.prob));
        if let Some(b) = reference.filter(|b| b.med > 0.0) {
            let t = &b.time;
            let ratio = Measured {
                value: r.med / b.med,
                min: (r.time.min / t.max).min(r.med / b.med),
                median: r.med / b.med,
                max: (r.time.max / t.min).max(r.med / b.med),
                reps: r.time.reps.min(t.reps),
            };
            rows::emit(&format!("{bench}/no-fault"), &r.case, params, "x", ratio, env);
        }
    }
}

fn find(rows: &[Row], case: &str, size: usize, prob: u32) -> f64 {
    rows.iter().find(|r| r.case == case && r.size == size && r.prob == prob).map_or(f64::NAN, |r| r.med)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// Runs `bench`'s job on each link, printing its table (`table` returns PIA's and PIA early's
/// ratio at the target's point), then the target's verdict per link.
/// Each verdict is also a `<bench>-check` report row with the paper's ratio.
/// `point` says where the ratio is taken ("1 MiB, 100 % faults").
#[allow(clippy::too_many_arguments)] // the target's text, limit, the paper's value and the point travel together
fn both_links(
    bench: &str,
    args: &BenchArgs,
    table: fn(&[Row]) -> (f64, f64),
    target: &str,
    limit: f64,
    paper: f64,
    point: &str,
) -> BResult<()> {
    let mut verdicts = Vec::new();
    for link in Link::BOTH {
        println!("## {}", link.title());
        verdicts.push((link, table(&run_sweeps(bench, args, link)?)));
    }
    println!("# target: {target}:");
    for (link, (pia, early)) in verdicts {
        println!(
            "#   {:<13} {pia:.2}x {}   (PIA's early ERR, not the paper's order: {early:.2}x {})",
            link.short(),
            verdict(pia <= limit),
            verdict(early <= limit)
        );
        for (case, ratio) in [("PIA/no-fault", pia), ("PIA early ERR/no-fault", early)] {
            let params = rows::params([
                ("link", json!(link.tag())),
                ("target", json!(format!("<= {limit}"))),
                ("paper", if case == "PIA/no-fault" { json!(paper) } else { json!("- (ours)") }),
                ("what", json!(format!("{} / no fault, {point}; {}", case.trim_end_matches("/no-fault"), link.short()))),
            ]);
            rows::emit(&format!("{bench}-check"), case, params, "x", Measured::single(ratio), &[]);
        }
    }
    Ok(())
}

/// The parent of `bench part-all-faults`.
pub fn all_faults(args: &BenchArgs) -> BResult<()> {
    println!(
        "activerma bench part-all-faults: blocking put to rank 1's exposed private memory, every target page evicted \
         (outside the timed put) before each put; cases interleaved in runs of {CHUNK} puts in one job; load {}",
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    let target = "PIA at 100 % faults <= 2x no fault for 1 MiB (paper 2.6x)";
    both_links("part-all-faults", args, all_faults_table, target, 2.0, 2.6, "1 MiB, 100 % faults")?;
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// Prints one link's rows of `part-all-faults`; returns PIA's and PIA early's ratio at 1 MiB.
fn all_faults_table(rows: &[Row]) -> (f64, f64) {
    println!("# {:<15} {:>8} {:>12} {:>9} {:>11} {:>12}", "case", "size", "median(us)", "x no-flt", "faults/put", "evicted/put");
    for r in rows {
        let base = find(rows, "no fault", r.size, 0);
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
    let base = find(rows, "no fault", mb, 0);
    println!("# 1 MiB, ratio to no fault ({base:.1} us): measured vs paper (Fig. 10)");
    println!(
        "#   {:<15} {:>6.2}x   (the target's lines dirty in rank 1's cache, as after a page-in)",
        "no fault, dirty",
        find(rows, "no fault, dirty", mb, 0) / base
    );
    for (case, paper) in
        [("PIO", "-"), ("PI4", "-"), ("PIA", "2.6"), ("PIA early ERR", "- (ours)"), ("pre-touched", "2.0 (Touch-NoPres-Pgs)")]
    {
        println!("#   {:<15} {:>6.2}x   paper {}", case, find(rows, case, mb, 100) / base, paper);
    }
    println!(
        "# pre-touched = the owner's CPU touching every evicted page first (here each touch is a SIGBUS resolved by \
         PART's handler, not a kernel minor fault as in the paper), timed at rank 1, plus the put"
    );
    (find(rows, "PIA", mb, 100) / base, find(rows, "PIA early ERR", mb, 100) / base)
}

/// The parent of `bench part-fault-freq`.
pub fn fault_freq(args: &BenchArgs) -> BResult<()> {
    println!(
        "activerma bench part-fault-freq: 1 MiB blocking put to rank 1's exposed private memory, each target page \
         evicted with the probability (outside the timed put) before each put; cases interleaved in runs of {CHUNK} \
         puts in one job; load {}",
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    both_links(
        "part-fault-freq",
        args,
        fault_freq_table,
        "PIA at 5 % faults <= 1.1x no fault (paper 1.15x)",
        1.1,
        1.15,
        "1 MiB, 5 % faults",
    )?;
    println!(
        "# at memory speed a fault's fixed cost (NACK, ~13 scattered page-ins, ERR, resend) weighs against a ~60 us \
         CPU copy; over the paper's link the same cost weighs against the wire time of 1 MiB (docs/design/part.md)"
    );
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// Prints one link's rows of `part-fault-freq`; returns PIA's and PIA early's ratio at 5 %.
fn fault_freq_table(rows: &[Row]) -> (f64, f64) {
    let mb = 1 << 20;
    // Each point's ratios are to the no-fault puts interleaved with it.
    let base_at = |p: u32| find(rows, "no fault", mb, p);
    println!(
        "# no fault, per point: {}",
        FREQ_PROBS.iter().map(|&p| format!("{p} %: {:.1} us", base_at(p))).collect::<Vec<_>>().join(", ")
    );
    println!(
        "# paged in first: the same pages evicted, then paged in by rank 1's own touch of each (untimed): no fault, but \
         the memory state a page-in leaves; paged-in / no fault = that state's cost, PIA / paged-in = the fault \
         protocol's own cost"
    );
    println!(
        "# {:>6} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9} {:>8} {:>14} {:>11} {:>14} {:>10} {:>9} {:>9}",
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
        "PIA/paged-in",
        "early(us)",
        "x no-flt",
        "flt/put"
    );
    let paper_ratio = |p: u32| match p {
        5 => "1.3",
        100 => "6.7",
        _ => "-",
    };
    for &p in &FREQ_PROBS {
        let base = base_at(p);
        let row = |c: &str| rows.iter().find(|r| r.case == c && r.prob == p);
        let (Some(o), Some(a)) = (row("PIO"), row("PIA")) else { continue };
        let (paged, protocol) = match row("paged in first") {
            Some(t) => (format!("{:.1}", t.med), format!("{:.2}", a.med / t.med)),
            None => ("-".into(), "-".into()),
        };
        let (early, early_x, early_f) = match row("PIA early ERR") {
            Some(e) => (format!("{:.1}", e.med), format!("{:.2}", e.med / base), format!("{:.1}", e.faults)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:>7}% {:>10.1} {:>9.2} {:>9.1} {:>10.1} {:>9.2} {:>9.1} {:>8.2} {:>14} {:>11} {:>14} {:>10} {:>9} {:>9}",
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
            protocol,
            early,
            early_x,
            early_f
        );
    }
    println!("# paper (Fig. 11): PIO/PIA 1.3 at 5 %, 2.2 at 20 %, 3.6 at 40 %, 5.7 at 80 %, 6.7 at 100 %; PIA 1.15x at 5 %, 1.56x at 40 %, 2.6x at 100 %");
    let base = base_at(5);
    let paged5 = find(rows, "paged in first", mb, 5);
    println!(
        "# at 5 %: the memory after a page-in (paged in first / no fault) {:.2}x; the fault protocol (PIA / paged in first) {:.2}x",
        paged5 / base,
        find(rows, "PIA", mb, 5) / paged5
    );
    (find(rows, "PIA", mb, 5) / base, find(rows, "PIA early ERR", mb, 5) / base)
}

/// True in a rank of one of the sweep benchmarks' jobs.
pub fn is_sweep_worker() -> bool {
    std::env::var_os(SWEEP_ENV).is_some()
}

/// Rank 1's preparation of one put (untimed by rank 0): evicts each target page with `prob`
/// percent, dirties or touches the range as the case says; returns (pages evicted, touch µs).
struct Owner {
    base: usize,
    ps: usize,
    rng: u64,
}

impl Owner {
    fn draw(&mut self, prob: u32) -> bool {
        let r = &mut self.rng;
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        (*r % 100) < prob as u64
    }

    fn prepare(&mut self, w: &activerma::World, s: &Sweep, size: usize, prob: u32) -> BResult<(u64, Option<f64>)> {
        let (base, ps) = (self.base, self.ps);
        let mut n = 0;
        // Evicted runs (first page, pages): a touch reads only those, so the other pages'
        // lines do not end up shared with rank 1's cache (a cost no page-in would cause).
        let mut runs: Vec<(usize, usize)> = Vec::new();
        if prob >= 100 {
            n = w.part_evict(base, size)?;
            runs.push((0, size / ps));
        } else if prob > 0 {
            let pages = size / ps;
            let mut p = 0;
            while p < pages {
                if !self.draw(prob) {
                    p += 1;
                    continue;
                }
                let mut q = p + 1;
                while q < pages && self.draw(prob) {
                    q += 1;
                }
                n += w.part_evict(base + p * ps, (q - p) * ps)?;
                runs.push((p, q - p));
                // The page that ended the run (q) was drawn as "no fault".
                p = q + 1;
            }
        }
        if s.dirty {
            // SAFETY: our own exposed, resident memory; rank 0 does not access it now.
            unsafe { std::ptr::write_bytes(base as *mut u8, 7, size) };
        }
        let mut touch = None;
        if s.pretouch != PreTouch::No {
            let t0 = Instant::now();
            let mut x = 0u8;
            for a in runs.iter().flat_map(|&(p, k)| (p..p + k).map(|i| base + i * ps)) {
                // SAFETY: our own exposed memory; a read of a missing page is resolved by the
                // SIGBUS handler (a page-in per page, as the CPU's own faults).
                x ^= unsafe { std::ptr::read_volatile(a as *const u8) };
            }
            std::hint::black_box(x);
            if s.pretouch == PreTouch::Counted {
                touch = Some(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
        Ok((n, touch))
    }
}

/// Per case of one point: put times (rank 0), touch times and evicted pages (rank 1), faults.
#[derive(Default)]
struct Tally {
    times: Vec<f64>,
    touch: Vec<f64>,
    evicted: u64,
    faults: u64,
}

/// One rank of a sweep job: for each (size, probability) point, rounds in which every case,
/// in an order that rotates, makes `CHUNK` puts, each preceded by the owner's (untimed)
/// preparation; round 0 and the first put of each run are warm-up.
pub fn sweep_worker() -> BResult<()> {
    let bench = std::env::var(SWEEP_ENV)?;
    let sweeps = sweeps_of(&bench);
    let freq = bench != "part-all-faults";
    let points: Vec<(usize, u32)> =
        if freq { FREQ_PROBS.iter().map(|&p| (1 << 20, p)).collect() } else { ALL_SIZES.iter().map(|&z| (z, 0)).collect() };
    let quick = std::env::var_os("ACTIVERMA_BENCH_PART_QUICK").is_some();
    let ps = activerma_core::page::page_size();
    let max = ALL_SIZES[ALL_SIZES.len() - 1];
    let world = part_pair::join(&bench)?;
    let pair = Pair::expose(&world, max)?;
    let (w, me) = (pair.w, pair.me);
    let src = vec![7u8; max];
    let mut owner = Owner { base: pair.base, ps, rng: 0x9E37_79B9_7F4A_7C15u64 ^ (me as u64 + 1) };
    let faults_dst = || PartStats::get(&w.part_stats().faults_dst);
    let mut seq = 0u64;
    for &(size, point_prob) in &points {
        let mut iters = (200 * (max / size)).clamp(100, 2000);
        if quick {
            iters /= 4;
        }
        let rounds = 1 + iters.div_ceil(CHUNK - 1);
        let mut tally: Vec<Tally> = sweeps.iter().map(|_| Tally::default()).collect();
        for round in 0..rounds {
            for k in 0..sweeps.len() {
                let c = (round + k) % sweeps.len();
                for j in 0..CHUNK {
                    let s = &sweeps[c];
                    let prob = s.prob.unwrap_or(point_prob);
                    let t = &mut tally[c];
                    let counted = round > 0 && j > 0;
                    seq += 1;
                    if me == 1 {
                        let (n, touch) = owner.prepare(w, s, size, prob)?;
                        if counted {
                            t.evicted += n;
                            t.touch.extend(touch);
                        }
                        pair.owner_go(seq)?;
                    } else {
                        w.set_part_page_in(s.page_in)?;
                        pair.origin_wait(seq);
                        let f0 = faults_dst();
                        let t0 = Instant::now();
                        w.put(RemotePtr::new(1, pair.peer_base), &src[..size])?;
                        let dt = t0.elapsed().as_secs_f64() * 1e6;
                        if counted {
                            t.times.push(dt);
                            t.faults += faults_dst() - f0;
                        }
                        pair.origin_done(seq)?;
                    }
                }
            }
        }
        // Rank 1 hands its per-case figures (evicted pages, touch median) to rank 0.
        let mine: Vec<u8> = tally
            .iter_mut()
            .flat_map(|t| {
                t.touch.sort_by(f64::total_cmp);
                let tm = if t.touch.is_empty() { 0.0 } else { percentile(&t.touch, 0.5) };
                [t.evicted.to_le_bytes(), tm.to_bits().to_le_bytes()].concat()
            })
            .collect();
        let owners = w.allgather(&mine)?;
        if me == 0 {
            let mut rows = String::new();
            for (c, (s, t)) in sweeps.iter().zip(&mut tally).enumerate() {
                let word = |j: usize| u64::from_le_bytes(owners[1][c * 16 + j * 8..c * 16 + j * 8 + 8].try_into().unwrap());
                let n = t.times.len().max(1) as f64;
                let (ev, tm) = (word(0) as f64 / n, f64::from_bits(word(1)));
                t.times.sort_by(f64::total_cmp);
                // Fault-frequency rows are keyed by the point (the no-fault reference too).
                let prob = if freq { point_prob } else { s.prob.unwrap_or(point_prob) };
                let faults = t.faults as f64 / n;
                let (min, max) = (t.times.first().map_or(0.0, |v| v + tm), t.times.last().map_or(0.0, |v| v + tm));
                rows += &format!(
                    "{}\t{}\t{}\t{:.2}\t{min:.2}\t{max:.2}\t{}\t{:.2}\t{:.2}\n",
                    s.name,
                    size,
                    prob,
                    percentile(&t.times, 0.5) + tm,
                    t.times.len(),
                    faults,
                    ev
                );
            }
            pair.append_rows(SWEEP_OUT_ENV, &rows)?;
        }
        w.barrier()?;
    }
    pair.finish()
}
