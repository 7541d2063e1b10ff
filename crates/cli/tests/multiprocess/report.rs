//! `activerma report` as a user runs it: two cheap benchmarks with --quick into a folder of our
//! own, then everything the folder promises — rows in the one schema, a valid SVG and PNG of
//! real size per figure that has rows, an index.html whose every reference exists, the summary,
//! a comparison of the run with itself, and a redraw. Bad --only names are refused.

use crate::driver::{show, Tally, LAUNCHER};
use activerma_report::{read_rows, Registry, RunInfo};
use std::path::Path;
use std::process::{Command, Output};

/// Cheap, and between them the two kinds of benchmark: the OSU-style set (rank 0 writes its
/// rows) and an application whose parent process collects its jobs' rows.
const BENCHMARKS: [&str; 2] = ["core", "counter"];

fn activerma(args: &[&str]) -> Output {
    Command::new(LAUNCHER).args(args).output().expect("activerma runs")
}

pub fn checks(t: &mut Tally) {
    let out = activerma(&["report", "--list"]);
    let so = String::from_utf8_lossy(&out.stdout);
    let reg = Registry::builtin();
    t.check(
        "report --list names every registered benchmark and figure".into(),
        out.status.success() && reg.benchmark.iter().all(|b| so.contains(&b.name)) && reg.figure.iter().all(|f| so.contains(&f.id)),
        || show(&out),
    );
    let out = activerma(&["report", "--only", "core,nope", "--out", "/nonexistent/never"]);
    t.check(
        "report --only with an unknown name is refused by name, before anything runs".into(),
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--only nope: no such benchmark or figure"),
        || show(&out),
    );

    let base = std::env::temp_dir().join(format!("activerma-report-test-{}", std::process::id()));
    let dir = base.join("run");
    let started = std::time::Instant::now();
    let out = activerma(&["report", "--quick", "--only", &BENCHMARKS.join(","), "--out", dir.to_str().unwrap()]);
    let took = started.elapsed().as_secs_f64();
    t.check(format!("report --quick --only {} runs [{took:.1} s]", BENCHMARKS.join(",")), out.status.success(), || show(&out));
    if out.status.success() {
        folder_checks(t, &dir, &reg);
        let out = activerma(&["report", "--compare", dir.to_str().unwrap(), dir.to_str().unwrap()]);
        let so = String::from_utf8_lossy(&out.stdout);
        t.check(
            "report --compare of a run with itself moves nothing".into(),
            out.status.success()
                && so.contains(" 0 MOVED")
                && !so.lines().any(|l| l.starts_with('|') && l.contains("MOVED"))
                && so.contains("Blocking put and get latency"),
            || show(&out),
        );
        std::fs::remove_file(dir.join("index.html")).unwrap();
        let out = activerma(&["report", "--redraw", dir.to_str().unwrap()]);
        t.check("report --redraw draws a folder again".into(), out.status.success() && dir.join("index.html").exists(), || show(&out));
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn folder_checks(t: &mut Tally, dir: &Path, reg: &Registry) {
    let rows = read_rows(&dir.join("rows.jsonl"));
    let rows_ok = match &rows {
        Ok(rows) => {
            let of = |bench: &str| rows.iter().filter(|r| r.benchmark == bench).count();
            of("put-latency") > 0
                && of("limits") > 0
                && of("core-check") > 0
                && of("counter") > 0
                && of("counter-check") > 0
                && rows.iter().all(|r| !r.commit.is_empty() && r.machine.cpus >= 1 && r.machine.memcpy_gbs > 0.0)
        }
        Err(_) => false,
    };
    t.check("report rows: every line is a valid row of the one schema, from both benchmarks".into(), rows_ok, || {
        format!("{rows:?}").chars().take(2000).collect()
    });
    let rows = rows.unwrap_or_default();

    let info = RunInfo::read(dir);
    let info_ok = info.as_ref().is_ok_and(|i| {
        i.quick
            && i.benchmarks.len() == BENCHMARKS.len()
            && i.benchmarks.iter().all(|b| b.exit_code == 0 && b.rows > 0 && dir.join(&b.log).is_file() && !b.loadavg_before.is_empty())
    });
    t.check("report run.json: each benchmark's exit code, rows, log and load".into(), info_ok, || format!("{info:?}"));

    // Every figure of the two benchmarks that has rows has a real SVG and PNG.
    let mut bad = Vec::new();
    let mut drawn = 0;
    for f in reg.figure.iter().filter(|f| BENCHMARKS.contains(&f.benchmark.as_str())) {
        if !f.series.iter().any(|s| rows.iter().any(|r| s.select.matches(r, &f.benchmark))) {
            continue;
        }
        drawn += 1;
        let svg = std::fs::read(dir.join("figures").join(format!("{}.svg", f.id))).unwrap_or_default();
        let text = String::from_utf8_lossy(&svg);
        if svg.len() < 2048 || !(text.starts_with("<svg") || text.starts_with("<?xml")) || !text.trim_end().ends_with("</svg>") {
            bad.push(format!("{}.svg ({} bytes)", f.id, svg.len()));
        }
        let png = std::fs::read(dir.join("figures").join(format!("{}.png", f.id))).unwrap_or_default();
        let (w, h) = png_size(&png);
        if png.len() < 2048 || w < 300 || h < 200 {
            bad.push(format!("{}.png ({} bytes, {w}x{h})", f.id, png.len()));
        }
    }
    t.check(format!("report plots: {drawn} figures, each a valid SVG and PNG of real size"), drawn >= 3 && bad.is_empty(), || {
        format!("bad: {bad:?}")
    });

    let html = std::fs::read_to_string(dir.join("index.html")).unwrap_or_default();
    let refs = local_references(&html);
    let missing: Vec<&String> = refs.iter().filter(|r| !dir.join(r).exists()).collect();
    t.check(
        format!("report index.html: {} local references, all exist; no network", refs.len()),
        !html.is_empty() && !refs.is_empty() && missing.is_empty() && !html.contains("http://") && !html.contains("https://"),
        || format!("missing: {missing:?}"),
    );
    let not_run = reg.figure.iter().filter(|f| !BENCHMARKS.contains(&f.benchmark.as_str())).all(|f| html.contains(&f.id));
    t.check("report index.html lists the figures whose benchmarks did not run".into(), not_run && html.contains("not run"), || "".into());
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default();
    t.check(
        "report summary.md has the check tables".into(),
        summary.contains('|') && (summary.contains("PASS") || summary.contains("MISS")) && summary.contains("Access counter"),
        || summary.chars().take(2000).collect(),
    );
}

/// Width and height from a PNG's IHDR chunk (0, 0 if it is not a PNG).
fn png_size(b: &[u8]) -> (u32, u32) {
    const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    if b.len() < 24 || b[..8] != SIGNATURE || &b[12..16] != b"IHDR" {
        return (0, 0);
    }
    (u32::from_be_bytes(b[16..20].try_into().unwrap()), u32::from_be_bytes(b[20..24].try_into().unwrap()))
}

/// The values of every src="…" and href="…" that point into the folder (not #fragments).
fn local_references(html: &str) -> Vec<String> {
    let mut refs = Vec::new();
    for attr in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            rest = &rest[i + attr.len()..];
            let Some(end) = rest.find('"') else { break };
            let v = &rest[..end];
            if !v.starts_with('#') && !v.starts_with("data:") && !v.is_empty() {
                refs.push(v.split('#').next().unwrap_or(v).to_string());
            }
        }
    }
    refs
}
