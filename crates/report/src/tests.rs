//! Renders and compares report folders made up here: the builtin registry's "core-latency"
//! (lines) and "aa-fig7a" (bars, normalized, with checks) with rows, "aa-fig7d" without.

use crate::data::figure_data;
use crate::run::{BenchmarkRun, RunInfo};
use crate::{compare, render, Machine, Registry, Row};
use serde_json::{json, Value};
use std::path::Path;

fn machine(memcpy_gbs: f64) -> Machine {
    Machine { cpu: "Test CPU 9000".into(), cpus: 2, memcpy_gbs }
}

/// A row whose min and max lie 5 % below and 10 % above its value (a spread of 15 %).
fn row(benchmark: &str, case: &str, params: Value, value: f64, unit: &str) -> Row {
    Row {
        benchmark: benchmark.into(),
        case: case.into(),
        params: serde_json::from_value(params).unwrap(),
        value,
        unit: unit.into(),
        reps: 5,
        min: value * 0.95,
        median: value,
        max: value * 1.1,
        machine: machine(40.0),
        commit: "abc1234".into(),
        settings: [("ACTIVERMA_REGISTRATION".to_string(), "part".to_string())].into_iter().collect(),
    }
}

const SIZES: [u64; 6] = [8, 64, 512, 4096, 65536, 1048576];

fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (bench, case, factor) in [("put-latency", "segment", 1.0), ("put-latency", "private", 1.3), ("get-latency", "segment", 1.6)] {
        for s in SIZES {
            rows.push(row(bench, case, json!({ "size": s }), factor * (0.06 + s as f64 / 9000.0), "us"));
        }
    }
    for s in SIZES {
        rows.push(row("limits", "memcpy", json!({ "size": s }), 0.01 + s as f64 / 20000.0, "us"));
    }
    for (model, scale) in [("paper", 1.0e6), ("raw", 4.0e6)] {
        for (case, rel) in [("AA-Poll", 1.0), ("AM", 0.52), ("RMA", 0.45), ("AA-SP", 0.97)] {
            rows.push(row("dht", case, json!({ "model": model, "ranks": 2, "collisions": 5 }), rel * scale, "inserts/s"));
        }
    }
    let check = |case: &str, model: &str, extra: Value, value: f64| {
        let mut params = json!({ "model": model, "ranks": 2, "collisions": 5 });
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        row("dht-check", case, params, value, "x")
    };
    rows.push(check("AA-Poll/RMA", "paper", json!({ "target": ">= 2.5", "paper": 3 }), 2.22));
    rows.push(check("AA-Poll/RMA", "raw", json!({ "target": ">= 2.5", "paper": 3 }), 3.33));
    rows.push(check("AA-Poll/AM", "paper", json!({ "target": ">= 1.5", "paper": "~2" }), 1.92));
    rows.push(check("AA-SP/AA-Poll", "paper", json!({ "target": ">= 0.9", "status": "LIMIT?" }), 0.97));
    rows.push(check("x<y & z", "paper", json!({}), 1.0));
    rows
}

fn run_info(memcpy_gbs: f64) -> RunInfo {
    let bench = |name: &str, quiet: bool| BenchmarkRun {
        name: name.into(),
        args: vec![name.into()],
        seconds: 61.5,
        exit_code: 0,
        rows: 10,
        loadavg_before: "0.12 0.30 0.25".into(),
        busy: if quiet { vec![] } else { vec!["cargo: 97 % CPU".into()] },
        quiet,
        warning: (!quiet).then(|| "load 1.9 before start".into()),
        log: format!("logs/{name}.txt"),
    };
    RunInfo {
        started: "2026-05-01T10:00:00Z".into(),
        commit: "abc1234".into(),
        quick: false,
        only: vec![],
        machine: machine(memcpy_gbs),
        benchmarks: vec![bench("core", true), bench("dht", false)],
    }
}

/// Writes a report folder as the runner would: rows.jsonl, run.json, and the core log only
/// (dht's log is missing, so the page must not link it).
fn folder(dir: &Path, rows: &[Row], run: &RunInfo) {
    let text: String = rows.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
    std::fs::write(dir.join("rows.jsonl"), text).unwrap();
    run.write(dir).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("logs/core.txt"), "core's output\n").unwrap();
}

/// Every `src="…"` / `href="…"` value of a page.
fn references(page: &str) -> Vec<String> {
    let mut refs = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for (i, _) in page.match_indices(attr) {
            let rest = &page[i + attr.len()..];
            refs.push(rest[..rest.find('"').unwrap()].to_string());
        }
    }
    refs
}

#[test]
fn render_writes_plots_page_and_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dir = &std::env::var("ACTIVERMA_REPORT_TEST_DIR").map(std::path::PathBuf::from).unwrap_or(dir.to_path_buf());
    std::fs::create_dir_all(dir).unwrap();
    folder(dir, &rows(), &run_info(40.0));
    let reg = Registry::builtin();
    let out = render(dir, &reg).unwrap();

    for id in ["core-latency", "aa-fig7a", "aa-fig6c"] {
        assert!(out.drawn.contains(&id.to_string()), "{id} drawn: {out:?}");
    }
    for id in ["aa-fig7d", "core-bandwidth", "aa-fig7b"] {
        assert!(out.not_run.contains(&id.to_string()), "{id} not run: {out:?}");
        assert!(!dir.join(format!("figures/{id}.svg")).exists());
    }

    let labels = [
        ("core-latency", vec!["put, segment", "put, exposed private memory", "get, segment", "limit: memcpy", "message size (B)"]),
        ("aa-fig7a", vec!["ours, modelled network", "ours, raw shared memory", "paper", "AA-Poll", "RMA", "AM-Exp"]),
    ];
    for (id, want) in labels {
        let svg = std::fs::read_to_string(dir.join(format!("figures/{id}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{id}: {}", &svg[..40]);
        assert!(svg.len() > 2048, "{id}: only {} bytes", svg.len());
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{id}.svg is not XML: {e}"));
        for label in want {
            assert!(svg.contains(label), "{id}.svg lacks {label:?}");
        }

        let png = std::fs::read(dir.join(format!("figures/{id}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{id}.png signature");
        let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
        assert_eq!((pixmap.width(), pixmap.height()), (900, 520), "{id}.png size");
        let first = pixmap.pixels()[0];
        assert!(pixmap.pixels().iter().any(|p| *p != first), "{id}.png is one colour");
        if crate::png::Fonts::system().family.is_some() {
            // The title's text: dark pixels in the top 30 rows, where nothing else is drawn.
            let dark = pixmap.pixels()[..900 * 30].iter().filter(|p| p.red() < 100 && p.alpha() > 0).count();
            assert!(dark > 200, "{id}.png has no title text ({dark} dark pixels)");
        } else {
            assert!(out.warnings.iter().any(|w| w.contains("no system font")));
        }
    }

    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for r in references(&page) {
        if let Some(anchor) = r.strip_prefix('#') {
            assert!(page.contains(&format!("id=\"{anchor}\"")), "anchor {r}");
        } else {
            assert!(!r.contains(':') && !r.starts_with('/'), "{r} is not a file of the folder");
            assert!(dir.join(&r).is_file(), "index.html references {r}, which does not exist");
        }
    }
    assert!(page.contains("<img src=\"figures/core-latency.svg\""));
    assert!(page.contains("href=\"figures/aa-fig7a.png\""));
    assert!(page.contains("href=\"logs/core.txt\"") && !page.contains("logs/dht.txt"));
    assert!(page.contains("not run: benchmark counter was not part of this report"));
    assert!(page.contains("not run: benchmark core wrote no rows for this figure"));
    assert!(page.contains("x&lt;y &amp; z") && !page.contains("x<y & z"), "row text is escaped");
    assert!(page.contains("load 1.9 before start"), "the quiet-machine warning is shown");
    assert!(page.contains("Test CPU 9000, 2 CPUs, memcpy 40.0 GB/s"));
    assert!(page.contains("2 of 3 checks pass; 1 LIMIT?; 1 INFO"), "the reading counts PASS and MISS only");
    assert!(page.contains("AA-Poll/RMA (model=paper) 2.22× against the paper's 3 (target &gt;= 2.5): MISS"));
    assert!(page.contains("0 of 1 check passes; AA-Poll/RMA 2.22×"), "aa-fig6c's reading");
    assert!(page.contains("ACTIVERMA_REGISTRATION=part"), "settings are listed");
    assert!(!page.contains("http"), "the page fetches nothing");

    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let folder_name = dir.canonicalize().unwrap().file_name().unwrap().to_string_lossy().into_owned();
    assert!(md.starts_with(&format!("# activerma report `{folder_name}`")));
    assert!(md.contains("Test CPU 9000, 2 CPUs, memcpy 40.0 GB/s"));
    assert!(md.contains("| AA-Poll/RMA (model=paper) | 2.22× | 3 | ≥ 2.5 | MISS |"), "{md}");
    assert!(md.contains("| AA-Poll/RMA (model=raw) | 3.33× | 3 | ≥ 2.5 | PASS |"));
    assert!(md.contains("| AA-Poll/AM | 1.92× | ~2 | ≥ 1.5 | PASS |"));
    assert!(md.contains("| AA-SP/AA-Poll | 0.970× | – | ≥ 0.9 | LIMIT? |"));
    assert!(md.contains("| x&lt;y & z | 1.00× | – | – | INFO |"), "a cell opens no HTML tag");
    assert!(md.contains("_not run: benchmark counter was not part of this report_"));

    // Drawing again over the same folder gives the same files (plots of runs now gone go).
    let again = render(dir, &reg).unwrap();
    assert_eq!(again.drawn, out.drawn);
}

#[test]
fn bars_are_normalized_per_series_and_a_series_without_the_base_is_dropped() {
    let reg = Registry::builtin();
    let fig = reg.figure.iter().find(|f| f.id == "aa-fig7a").unwrap();
    let d = figure_data(fig, &rows());
    let modelled = &d.series[0];
    let at = |case: &str| modelled.points.iter().find(|p| p.x.text() == case).unwrap();
    assert_eq!(at("AA-Poll").value, 1.0);
    assert!((at("RMA").value - 0.45).abs() < 1e-12 && (at("RMA").max - 0.495).abs() < 1e-12);
    assert_eq!(at("RMA").unit, "x");
    assert_eq!(d.categories, ["AA-Poll", "AM", "RMA", "AA-SP", "AM-Exp"], "ours first, then the paper's");
    assert_eq!(d.checks.len(), 5);

    let without_base: Vec<Row> =
        rows().into_iter().filter(|r| !(r.case == "AA-Poll" && r.param_text("model").as_deref() == Some("raw"))).collect();
    let d = figure_data(fig, &without_base);
    assert!(d.series[1].points.is_empty());
    assert!(d.warnings.iter().any(|w| w.contains("AA-Poll")), "{:?}", d.warnings);
}

#[test]
fn compare_flags_what_moved_beyond_its_noise() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = rows();
    let new: Vec<Row> = old
        .iter()
        .cloned()
        .map(|mut r| {
            let factor = match (r.benchmark.as_str(), r.case.as_str(), r.param_f64("size")) {
                ("put-latency", "segment", Some(8.0)) => 1.5,
                ("put-latency", "segment", Some(64.0)) => 1.01,
                _ => 1.0,
            };
            r.value *= factor;
            r.min *= factor;
            r.median *= factor;
            r.max *= factor;
            r
        })
        .collect();
    folder(a.path(), &old, &run_info(40.0));
    folder(b.path(), &new, &run_info(42.0));
    let reg = Registry::builtin();
    let md = compare(a.path(), b.path(), &reg).unwrap();
    if std::env::var("ACTIVERMA_REPORT_TEST_DIR").is_ok() {
        eprintln!("{md}");
    }
    let line = |series: &str, x: &str| {
        md.lines().find(|l| l.starts_with(&format!("| {series} | {x} |"))).unwrap_or_else(|| panic!("no line {series} {x} in\n{md}"))
    };
    assert!(line("put, segment", "8").ends_with("| MOVED |"), "{}", line("put, segment", "8"));
    assert!(line("put, segment", "8").contains("+50.0 %"));
    assert!(!line("put, segment", "64").contains("MOVED"), "{}", line("put, segment", "64"));
    assert!(line("put, segment", "64").contains("+1.0 %"));
    assert!(md.contains("1 MOVED"), "{md}");
    assert!(!md.contains("Different machines"), "42 vs 40 GB/s is the same machine");

    // Another machine: only ratios are compared, and the reader is told first.
    folder(b.path(), &new, &run_info(20.0));
    let md = compare(a.path(), b.path(), &reg).unwrap();
    assert!(md.contains("**Different machines**"));
    assert!(!md.contains("put, segment"), "absolute latencies left out:\n{md}");
    assert!(md.contains("| AA-Poll/RMA (model=paper) |"), "ratios stay");
}

#[test]
fn moved_uses_the_larger_spread_and_at_least_two_percent() {
    assert!(crate::compare::moved(1.0, 0.0, 1.03, 0.0));
    assert!(!crate::compare::moved(1.0, 0.0, 1.019, 0.0));
    assert!(!crate::compare::moved(1.0, 0.01, 1.09, 0.10));
    assert!(crate::compare::moved(1.0, 0.10, 1.11, 0.01));
}

#[test]
fn a_limit_measured_in_several_passes_draws_its_lowest_and_a_repeated_series_warns() {
    let reg = Registry::builtin();
    let fig = reg.figure.iter().find(|f| f.id == "core-latency").unwrap();
    let mut rows = rows();
    // A second pass of the memcpy limit (the end of the run), faster at 8 B and slower at
    // 64 B, and a put row measured twice.
    rows.push(row("limits", "memcpy", json!({ "size": 8 }), 0.001, "us"));
    rows.push(row("limits", "memcpy", json!({ "size": 64 }), 1.0, "us"));
    rows.push(row("put-latency", "segment", json!({ "size": 8 }), 5.0, "us"));
    let d = figure_data(fig, &rows);
    let series = |label: &str| d.series.iter().find(|s| s.label.starts_with(label)).unwrap();
    let at = |label: &str, size: f64| series(label).points.iter().find(|p| p.x.text() == format!("{size}")).unwrap().value;
    assert_eq!(at("limit", 8.0), 0.001, "the faster pass is drawn");
    assert!((at("limit", 64.0) - (0.01 + 64.0 / 20000.0)).abs() < 1e-12, "the slower pass is not");
    assert_eq!(series("limit").points.len(), SIZES.len());
    assert!((at("put, segment", 8.0) - (0.06 + 8.0 / 9000.0)).abs() < 1e-12, "a repeated series keeps its first row");
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(d.warnings[0].contains("put, segment"), "{:?}", d.warnings);
}
