//! Output of the OSU-style set: tables on stdout as rows are measured, every row also as a
//! report row (`rows::emit`, for `--json`), and the ratio summary that checks the targets.

use super::rows;
use super::timing::{Measured, Stats};
use super::Config;
use activerma::World;
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `# Size  Latency(us)  Min(us)  Limit(us)  Ratio-to-limit` (ratio = time / limit time).
    Latency,
    /// `# Size  Bandwidth(MB/s)  Max(MB/s)  Limit(MB/s)  Ratio-to-limit` (ratio = bw / limit bw).
    Bandwidth,
    /// Title and notes only, no rows (a table that is n/a in this run).
    Note,
}

/// One measured row.
pub struct Row<'a> {
    pub bench: &'a str,
    pub target: Option<&'a str>,
    pub size: Option<usize>,
    pub stats: Stats,
    /// Bytes moved per timed operation (bandwidth rows), 0 otherwise.
    pub bytes: usize,
    /// The limit's time for the same operation, in ns.
    pub limit_ns: Option<f64>,
}

pub struct Report {
    results: HashMap<(String, String, usize), Stats>,
    style: Style,
    /// Rows of the current table are recorded but not printed.
    quiet: bool,
    load_start: String,
    /// The conduit measured (from `meta`): the summary's targets differ between smp and mpi.
    conduit: String,
    /// Limit rows, kept until the end of the run: each limit is measured at the start and at
    /// the end, and the better measurement (lower time) is the one judged and written.
    limits: Vec<(String, Option<usize>, Stats, usize)>,
    /// What every row of this run shares (conduit, progress mode, network model, binding,
    /// --quick): part of each row's params, so rows of different runs stay apart.
    run_params: serde_json::Map<String, serde_json::Value>,
}

fn fmt_size(s: usize) -> String {
    if s >= 1 << 20 && s.is_multiple_of(1 << 20) {
        format!("{} MiB", s >> 20)
    } else if s >= 1 << 10 && s.is_multiple_of(1 << 10) {
        format!("{} KiB", s >> 10)
    } else {
        format!("{s} B")
    }
}

fn fmt_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.4}")
    } else {
        format!("{us:.2}")
    }
}

impl Report {
    pub fn new() -> Report {
        Report {
            results: HashMap::new(),
            style: Style::Latency,
            quiet: false,
            load_start: String::new(),
            conduit: String::new(),
            run_params: serde_json::Map::new(),
            limits: Vec::new(),
        }
    }

    fn out(&self, line: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }

    /// The run's conditions, printed first (and the first JSON line).
    pub fn meta(&mut self, world: &World, cfg: &Config, cpus: [i64; 2], load: String) {
        // SAFETY: sysconf has no preconditions (the affinity mask of this thread is one CPU now).
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let net = world.net_model();
        let net_note = if net == "off" {
            " (off unless ACTIVERMA_NET_LATENCY_NS or ACTIVERMA_NET_BANDWIDTH_MBS is set)"
        } else {
            " (ACTIVERMA_NET_* set: every remote operation pays the modelled network)"
        };
        let bind =
            if cpus.iter().all(|&c| c >= 0) { format!("rank 0 -> cpu {}, rank 1 -> cpu {}", cpus[0], cpus[1]) } else { "none".into() };
        let (lo, hi) = (cfg.sizes.first().copied().unwrap_or(8), cfg.sizes.last().copied().unwrap_or(8));
        self.out("# activerma bench: OSU-style one-sided benchmarks, 2 ranks (rank 0 = origin, rank 1 = target)");
        self.out(&super::machine::header_line());
        self.out(&format!("# machine load (/proc/loadavg): {load}   ({ncpu} CPUs online)"));
        self.out(&format!(
            "# conduit: {}   progress mode: {}   modelled network: {net}{net_note}",
            world.conduit_name(),
            world.progress_mode().name()
        ));
        self.out(&format!("# binding: {bind}"));
        // Every setting given in the environment (the others have their defaults: activerma info).
        // The launcher grows the segment for the bandwidth window itself: that one is listed too.
        let set: Vec<(String, String)> =
            activerma_core::settings::TABLE.iter().filter_map(|s| std::env::var(s.name).ok().map(|v| (s.name.to_string(), v))).collect();
        if !set.is_empty() {
            let text: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            self.out(&format!("# settings from the environment: {}", text.join(" ")));
        }
        self.out(&format!(
            "# timing: median over {} (bandwidth: {}) repetitions of a timed batch; per-op time = batch time / ops in the batch; sizes {} .. {}{}",
            cfg.lat.reps,
            cfg.bw.reps,
            fmt_size(lo),
            fmt_size(hi),
            if cfg.quick { " (--quick)" } else { "" }
        ));
        self.load_start = load.clone();
        self.conduit = world.conduit_name().to_string();
        self.run_params = rows::params([
            ("conduit", json!(world.conduit_name())),
            ("progress", json!(world.progress_mode().name())),
            ("net_model", json!(net)),
            ("bind", json!(bind)),
            ("quick", json!(cfg.quick)),
        ]);
    }

    /// Starts a table (`print` false: measure and record silently).
    pub fn section(&mut self, title: &str, notes: &[String], style: Style, print: bool) {
        self.style = style;
        self.quiet = !print;
        if self.quiet {
            return;
        }
        self.out("");
        self.out(&format!("# {title}"));
        for n in notes {
            self.out(&format!("# {n}"));
        }
        match style {
            Style::Latency => {
                self.out(&format!("{:<12}{:>14}{:>12}{:>12}{:>16}", "# Size", "Latency(us)", "Min(us)", "Limit(us)", "Ratio-to-limit"))
            }
            Style::Bandwidth => self
                .out(&format!("{:<12}{:>16}{:>14}{:>14}{:>16}", "# Size", "Bandwidth(MB/s)", "Max(MB/s)", "Limit(MB/s)", "Ratio-to-limit")),
            Style::Note => {}
        }
    }

    /// Prints a row of the current table, records it for the summary and the JSON file.
    pub fn row(&mut self, r: Row) {
        self.print_row(&r);
        self.record(r);
    }

    /// A row whose one operation moves `size` bytes, reported as a bandwidth (MB/s) rather
    /// than a latency: contiguous transfers compared by bandwidth, as the ARMCI paper draws them.
    pub fn row_mbs(&mut self, r: Row) {
        self.print_row(&r);
        self.record_as(r, true);
    }

    fn print_row(&self, r: &Row) {
        if !self.quiet {
            let size_col = r.size.map_or("-".to_string(), |s| s.to_string());
            let ratio_col = self.ratio(r).map_or("-".to_string(), |x| format!("{x:.2}"));
            match self.style {
                Style::Latency | Style::Note => {
                    let limit_col = r.limit_ns.map_or("-".to_string(), |l| fmt_us(l / 1e3));
                    self.out(&format!(
                        "{:<12}{:>14}{:>12}{:>12}{:>16}",
                        size_col,
                        fmt_us(r.stats.median_us()),
                        fmt_us(r.stats.min_us()),
                        limit_col,
                        ratio_col
                    ));
                }
                Style::Bandwidth => {
                    let limit_col = r.limit_ns.map_or("-".to_string(), |l| format!("{:.2}", r.bytes as f64 / l * 1e3));
                    self.out(&format!(
                        "{:<12}{:>16.2}{:>14.2}{:>14}{:>16}",
                        size_col,
                        r.stats.mbs(r.bytes),
                        r.stats.max_mbs(r.bytes),
                        limit_col,
                        ratio_col
                    ));
                }
            }
        }
    }

    /// Latency rows: time / limit time; bandwidth rows: bandwidth / limit bandwidth.
    fn ratio(&self, r: &Row) -> Option<f64> {
        r.limit_ns.map(|l| if r.bytes > 0 { l / r.stats.median_ns } else { r.stats.median_ns / l })
    }

    /// Records a row for the summary and the JSON file without printing it. Rows that move
    /// `bytes` per operation carry a bandwidth; single operations carry a latency.
    pub fn record(&mut self, r: Row) {
        let bandwidth = r.bytes != 0 && r.size != Some(r.bytes);
        self.record_as(r, bandwidth)
    }

    fn record_as(&mut self, r: Row, bandwidth: bool) {
        let key = (r.bench.to_string(), r.target.unwrap_or("").to_string(), r.size.unwrap_or(0));
        if r.bench.starts_with("limit_") {
            // A limit is a best case: keep the faster of its measurements; written at the end.
            match self.limits.iter_mut().find(|(b, s, _, _)| *b == r.bench && *s == r.size) {
                Some(kept) if r.stats.median_ns < kept.2.median_ns => kept.2 = r.stats,
                Some(_) => {}
                None => self.limits.push((r.bench.to_string(), r.size, r.stats, r.bytes)),
            }
            let best = self.limits.iter().find(|(b, s, _, _)| *b == r.bench && *s == r.size).map(|l| l.2).unwrap_or(r.stats);
            self.results.insert(key, best);
            return;
        }
        self.emit(&r, bandwidth);
        self.results.insert(key, r.stats);
    }

    /// Writes the limits kept by `record` (the better of their measurements) as report rows.
    fn emit_limits(&mut self) {
        for (bench, size, stats, bytes) in std::mem::take(&mut self.limits) {
            let bandwidth = bytes != 0 && size != Some(bytes);
            self.emit(&Row { bench: &bench, target: None, size, stats, bytes, limit_ns: None }, bandwidth);
        }
    }

    /// One row as a report row (`rows::emit`).
    fn emit(&self, r: &Row, bandwidth: bool) {
        // Report names: "put_latency" -> benchmark "put-latency"; "limit_memcpy_window" ->
        // benchmark "limits", case "memcpy-window".
        let dashed = |t: &str| t.replace('_', "-");
        let (benchmark, case) = match r.bench.strip_prefix("limit_") {
            Some(limit) => ("limits".to_string(), dashed(limit)),
            None => (dashed(r.bench), dashed(r.target.unwrap_or("all"))),
        };
        let mut params = self.run_params.clone();
        if let Some(s) = r.size {
            params.insert("size".into(), json!(s));
        }
        if !bandwidth {
            rows::emit(&benchmark, &case, params, "us", Measured::latency_us(&r.stats), &[]);
        } else {
            rows::emit(&benchmark, &case, params, "MB/s", Measured::bandwidth_mbs(&r.stats, r.bytes), &[]);
        }
    }

    /// A line of text under the current table (nothing when the table is not printed).
    pub fn note(&self, text: &str) {
        if !self.quiet {
            self.out(&format!("# {text}"));
        }
    }

    pub fn get(&self, bench: &str, target: &str, size: usize) -> Option<Stats> {
        self.results.get(&(bench.to_string(), target.to_string(), size)).copied()
    }

    /// Per-op time in ns of a recorded row.
    pub fn ns(&self, bench: &str, target: &str, size: usize) -> Option<f64> {
        self.get(bench, target, size).map(|s| s.median_ns)
    }

    /// The final table: every target, its ratio and PASS / MISS (INFO: no target).
    pub fn summary(&mut self) {
        self.emit_limits();
        struct Check {
            id: String,
            what: String,
            ours: String,
            limit: String,
            ratio: f64,
            target: String,
            status: &'static str,
        }
        // A physical limit is a lower bound on time (an upper bound on bandwidth): ours beating
        // it by more than the measurement's own spread means the limit is mis-measured, and the
        // check says so instead of passing.
        const TOLERANCE: f64 = 0.02;
        let judged = |ratio: f64, time: bool, pass: bool| match (time, pass) {
            (true, _) if ratio < 1.0 - TOLERANCE => "LIMIT?",
            (false, _) if ratio > 1.0 + TOLERANCE => "LIMIT?",
            (_, true) => "PASS",
            (_, false) => "MISS",
        };
        let mut checks: Vec<Check> = Vec::new();
        let mut missing: Vec<String> = Vec::new();
        // Off smp, the hand-off and raw-system-call limits are not measured, and memcpy is not
        // what bounds a put through the MPI library: (a), (c), (d) are n/a and (b) is only
        // informational. That conduit's targets are against MPI itself (compare_mpi_conduit.sh).
        let host = self.conduit == "smp";
        let mut na: Vec<&str> = Vec::new();
        let us = |ns: f64| format!("{} us", fmt_us(ns / 1e3));
        let gbs = |bytes: usize, ns: f64| format!("{:.2} GB/s", bytes as f64 / ns);

        // (a) 8 B put / get to a segment vs one cache-line hand-off (informational).
        let oneway = self.ns("limit_handoff_oneway", "", 0);
        let ops: &[(&str, &str)] = if host {
            &[("put_latency", "put"), ("get_latency", "get")]
        } else {
            na.push("(a)");
            &[]
        };
        for &(bench, op) in ops {
            match (self.ns(bench, "segment", 8), oneway) {
                (Some(o), Some(l)) => checks.push(Check {
                    id: format!("a_{op}_8_segment_vs_handoff"),
                    what: format!("(a) 8 B {op} to segment vs hand-off one-way"),
                    ours: us(o),
                    limit: us(l),
                    ratio: o / l,
                    target: "info".into(),
                    status: "INFO",
                }),
                _ => missing.push(format!("(a) 8 B {op}")),
            }
        }
        // (b) 1 MiB put / get to a segment: bandwidth >= 90 % of memcpy at 1 MiB.
        let mib = 1 << 20;
        for (bench, op) in [("put_latency", "put"), ("get_latency", "get")] {
            match (self.ns(bench, "segment", mib), self.ns("limit_memcpy", "", mib)) {
                (Some(o), Some(l)) => {
                    let frac = l / o;
                    checks.push(Check {
                        id: format!("b_{op}_1m_segment_bw_vs_memcpy"),
                        what: format!("(b) 1 MiB {op} to segment, bandwidth vs memcpy"),
                        ours: gbs(mib, o),
                        limit: gbs(mib, l),
                        ratio: frac,
                        target: if host { ">= 0.90" } else { "info" }.into(),
                        status: if host { judged(frac, false, frac >= 0.90) } else { "INFO" },
                    })
                }
                _ => missing.push(format!("(b) 1 MiB {op}")),
            }
        }
        // (b') the same, without page-placement luck: into rank 0's own copy vs memcpy, same bytes.
        for (bench, op) in [("put_latency", "put"), ("get_latency", "get")] {
            if let (Some(o), Some(l)) = (self.ns(bench, "own_segment", mib), self.ns(&format!("limit_memcpy_same_bytes_{op}"), "", mib)) {
                checks.push(Check {
                    id: format!("b2_{op}_1m_same_bytes"),
                    what: format!("(b') 1 MiB {op}, own segment vs memcpy, same bytes"),
                    ours: gbs(mib, o),
                    limit: gbs(mib, l),
                    ratio: l / o,
                    target: "info".into(),
                    status: "INFO",
                });
            }
        }
        // (c) private memory vs one raw process_vm_writev / readv of the same size.
        let raw_calls: &[(&str, &str, &str, &str)] = if host {
            &[("put_latency", "put", "limit_cma_write", "process_vm_writev"), ("get_latency", "get", "limit_cma_read", "process_vm_readv")]
        } else {
            na.push("(c)");
            &[]
        };
        for &(bench, op, lim, call) in raw_calls {
            for size in [8usize, 4 << 10, 64 << 10, 1 << 20] {
                match (self.ns(bench, "private", size), self.ns(lim, "", size)) {
                    (Some(o), Some(l)) => checks.push(Check {
                        id: format!("c_{op}_{size}_private_vs_raw"),
                        what: format!("(c) {} {op} to private vs raw {call}", fmt_size(size)),
                        ours: us(o),
                        limit: us(l),
                        ratio: o / l,
                        target: "<= 1.20".into(),
                        status: judged(o / l, true, o / l <= 1.20),
                    }),
                    _ => missing.push(format!("(c) {} {op}", fmt_size(size))),
                }
            }
        }
        // (d) active-message round trip and (e) an 8 B active put until its handler ran (+ ack),
        // each vs the cache-line hand-off round trip.
        let round_trips = [
            ("(d)", "am_roundtrip", "d_am_roundtrip_vs_handoff", "AM round trip (8 B, polling)", "AM round trip"),
            ("(e)", "active_put_roundtrip", "e_active_put_vs_handoff", "active put (8 B, polling) + ack", "active put"),
        ];
        for (tag, bench, id, what, short) in round_trips {
            match (self.ns(bench, "", 8), self.ns("limit_handoff_roundtrip", "", 0)) {
                _ if !host => na.push(tag),
                (Some(o), Some(l)) => checks.push(Check {
                    id: id.into(),
                    what: format!("{tag} {what} vs hand-off round trip"),
                    ours: us(o),
                    limit: us(l),
                    ratio: o / l,
                    target: "<= 3.00".into(),
                    status: judged(o / l, true, o / l <= 3.0),
                }),
                _ => missing.push(format!("{tag} {short}")),
            }
        }

        self.out("");
        self.out(&format!("# Ratio summary (all numbers from this run; load at start {})", self.load_start));
        self.out("# (b), (b') ratio = our bandwidth / memcpy bandwidth; the others = our time / the limit's time");
        self.out("# limits are best cases (best batch, the better of a pass at the start and one at the end of the run): (b)-(e) are lower bounds on time; (a) and (b') are INFO: a put to a segment needs no hand-off, (b') copies the same bytes as its memcpy");
        self.out(&format!("{:<58}{:>14}{:>14}{:>9}{:>10}{:>8}", "# check", "ours", "limit", "ratio", "target", "status"));
        for c in &checks {
            self.out(&format!("{:<58}{:>14}{:>14}{:>9.2}{:>10}{:>8}", c.what, c.ours, c.limit, c.ratio, c.target, c.status));
            let mut params = self.run_params.clone();
            params.extend(rows::params([("what", json!(c.what)), ("status", json!(c.status))]));
            if c.target != "info" {
                params.insert("target".into(), json!(c.target));
            }
            params.insert("id".into(), json!(c.id));
            // The case is what the check measures, short enough for a plot's axis.
            let short = c.what.split(" vs ").next().unwrap_or(&c.what);
            rows::emit("core-check", short, params, "x", Measured::single(c.ratio), &[]);
        }
        if !missing.is_empty() {
            self.out(&format!("# not measured in this run (select the benchmark): {}", missing.join("; ")));
        }
        if !na.is_empty() {
            self.out(&format!(
                "# {}: n/a on the {} conduit (their limits need both ranks on one host); this conduit's targets are against plain MPI_Put/MPI_Get + flush on the same MPI: bench/compare_mpi_conduit.sh",
                na.join(", "),
                self.conduit
            ));
        }
        let count = |s: &str| checks.iter().filter(|c| c.status == s).count();
        let (pass, miss, beaten) = (count("PASS"), count("MISS"), count("LIMIT?"));
        if beaten > 0 {
            self.out(&format!(
                "# LIMIT?: ours beat a physical limit by more than {:.0} %: that limit is not a lower bound on this machine in this run (mis-measured), so the ratio proves nothing",
                TOLERANCE * 100.0
            ));
        }
        self.out(&format!("# {pass} PASS, {miss} MISS, {beaten} LIMIT?, {} INFO", checks.len() - pass - miss - beaten));
    }

    /// The registration strategy and every rank's non-zero registration counters.
    pub fn registration(&mut self, strategy: &str, per_rank: &[Vec<(&'static str, u64)>]) {
        for (rank, counters) in per_rank.iter().enumerate() {
            let words: Vec<String> = counters.iter().filter(|&&(_, v)| v != 0).map(|(k, v)| format!("{k}={v}")).collect();
            let text = if words.is_empty() { "all zero".to_string() } else { words.join(" ") };
            self.out(&format!("# registration (ACTIVERMA_REGISTRATION={strategy}), rank {rank}: {text}"));
        }
    }

    pub fn finish(&mut self, load_end: String) {
        self.out(&format!("# machine load at the end: {load_end}"));
    }
}
