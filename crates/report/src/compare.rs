//! Compares two report folders: for every figure present in both, every series point and
//! check line with its old and new value, the change, and "MOVED" when the change is larger
//! than that point's own run-to-run noise, so a reader sees what a change of code did and
//! not what a busy machine did.
//!
//! Noise of a point: the larger of the two runs' (max − min) / median, at least 2 %. Numbers
//! of two machines are not comparable: when the CPU model differs or memcpy bandwidth differs
//! by more than 20 %, only ratios (unit "x", normalized bars) are compared, and the output
//! says so first.

use crate::data::{figure_data, FigureData};
use crate::format;
use crate::render::machine_line;
use crate::row::{read_rows, Machine};
use crate::run::RunInfo;
use crate::spec::Registry;
use crate::summary::cell;
use std::fmt::Write;
use std::path::Path;

/// Below this a change is never called MOVED: timers and caches move any number that much.
pub const MIN_NOISE: f64 = 0.02;
/// memcpy bandwidths further apart than this mean another machine (or another state of it).
pub const MACHINE_MEMCPY: f64 = 0.20;

/// One measured number as compared.
#[derive(Clone, Debug)]
struct Value {
    value: f64,
    spread: f64,
    unit: String,
}

/// A point or a check line in one or both runs.
struct Line {
    /// The columns that name it (series and x, or the check's label).
    key: Vec<String>,
    old: Option<Value>,
    new: Option<Value>,
    /// Check lines: old and new status.
    status: Option<(Option<String>, Option<String>)>,
}

/// Whether `change` (new vs old) exceeds the noise of both measurements.
pub fn moved(old: f64, old_spread: f64, new: f64, new_spread: f64) -> bool {
    let noise = old_spread.max(new_spread).max(MIN_NOISE);
    if old == 0.0 {
        return new != 0.0;
    }
    ((new - old) / old.abs()).abs() > noise
}

/// Whether two runs' machines differ enough that only ratios may be compared.
pub fn machines_differ(a: &Machine, b: &Machine) -> bool {
    let (x, y) = (a.memcpy_gbs, b.memcpy_gbs);
    a.cpu != b.cpu || (x - y).abs() > MACHINE_MEMCPY * x.min(y).max(f64::MIN_POSITIVE)
}

fn folder_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}

/// The comparison of report folders `old` and `new` as Markdown.
pub fn compare(old: &Path, new: &Path, reg: &Registry) -> Result<String, String> {
    let (old_rows, new_rows) = (read_rows(&old.join("rows.jsonl"))?, read_rows(&new.join("rows.jsonl"))?);
    let (old_run, new_run) = (RunInfo::read(old)?, RunInfo::read(new)?);
    let ratios_only = machines_differ(&old_run.machine, &new_run.machine);

    let mut body = String::new();
    let (mut compared, mut moved_count, mut status_changes, mut left_out) = (0, 0, 0, 0);
    let (mut only_old, mut only_new) = (Vec::new(), Vec::new());
    for f in &reg.figure {
        let (a, b) = (figure_data(f, &old_rows), figure_data(f, &new_rows));
        match (a.has_rows(), b.has_rows()) {
            (true, true) => {}
            (true, false) => {
                only_old.push(f.id.clone());
                continue;
            }
            (false, true) => {
                only_new.push(f.id.clone());
                continue;
            }
            (false, false) => continue,
        }
        let mut lines = pair(point_lines(&a), point_lines(&b));
        let mut checks = pair(check_lines(&a), check_lines(&b));
        if ratios_only {
            let before = lines.len() + checks.len();
            let is_ratio = |l: &Line| l.old.iter().chain(l.new.iter()).all(|v| v.unit == "x");
            lines.retain(is_ratio);
            checks.retain(is_ratio);
            left_out += before - lines.len() - checks.len();
        }
        if lines.is_empty() && checks.is_empty() {
            continue;
        }
        let _ =
            writeln!(body, "## {} · {}: {}\n", reg.paper.get(&f.paper).map_or(f.paper.as_str(), |p| p.title.as_str()), f.label, f.title);
        for (table, head) in [(&lines, ["series", "x"].as_slice()), (&checks, ["check"].as_slice())] {
            if table.is_empty() {
                continue;
            }
            let status_col = table.iter().any(|l| l.status.is_some());
            let mut cols: Vec<&str> = head.to_vec();
            cols.extend(["old", "new", "change", "noise"]);
            if status_col {
                cols.push("status");
            }
            cols.push("");
            let _ = writeln!(body, "| {} |", cols.join(" | "));
            let _ = writeln!(
                body,
                "|{}",
                cols.iter().map(|c| if ["old", "new", "change", "noise"].contains(c) { " ---: |" } else { " --- |" }).collect::<String>()
            );
            for l in table.iter() {
                compared += 1;
                let (text, flag) = describe(l);
                if flag == "MOVED" {
                    moved_count += 1;
                }
                let mut cells: Vec<String> = l.key.iter().map(|k| cell(k)).collect();
                cells.extend(text);
                if status_col {
                    let s = match &l.status {
                        Some((Some(o), Some(n))) if o != n => {
                            status_changes += 1;
                            format!("{o} → {n}")
                        }
                        Some((o, n)) => n.clone().or(o.clone()).unwrap_or_default(),
                        None => String::new(),
                    };
                    cells.push(cell(&s));
                }
                cells.push(flag.to_string());
                let _ = writeln!(body, "| {} |", cells.join(" | "));
            }
            body.push('\n');
        }
    }

    let mut out = String::new();
    let _ = writeln!(out, "# Comparison: `{}` → `{}`\n", folder_name(old), folder_name(new));
    if ratios_only {
        let _ = writeln!(
            out,
            "> **Different machines** ({} vs {}): absolute numbers are not comparable, only ratios are listed ({left_out} other points left out).\n",
            machine_line(&old_run.machine),
            machine_line(&new_run.machine)
        );
    }
    if old_run.quick != new_run.quick {
        out.push_str("> One run is `--quick`, the other full: the quick one's numbers are noisier and its runs shorter.\n\n");
    }
    out.push_str("| | old | new |\n| --- | --- | --- |\n");
    for (k, a, b) in [
        ("commit", old_run.commit.clone(), new_run.commit.clone()),
        ("started", old_run.started.clone(), new_run.started.clone()),
        ("machine", machine_line(&old_run.machine), machine_line(&new_run.machine)),
        ("mode", mode(&old_run), mode(&new_run)),
    ] {
        let _ = writeln!(out, "| {k} | {} | {} |", cell(&a), cell(&b));
    }
    let _ = writeln!(
        out,
        "\n{compared} points and check lines compared: {moved_count} MOVED beyond their noise (the larger of the two runs' (max − min) / median, at least {} %), {status_changes} check statuses changed.\n",
        MIN_NOISE * 100.0
    );
    if !only_old.is_empty() {
        let _ = writeln!(out, "Only in old: {}\n", only_old.join(", "));
    }
    if !only_new.is_empty() {
        let _ = writeln!(out, "Only in new: {}\n", only_new.join(", "));
    }
    Ok(out + &body)
}

fn mode(run: &RunInfo) -> String {
    if run.quick { "quick" } else { "full" }.to_string()
}

/// The old, new, change and noise cells of a line, and its flag.
fn describe(l: &Line) -> (Vec<String>, &'static str) {
    let show = |v: &Option<Value>| v.as_ref().map_or("–".to_string(), |v| format::value(v.value, &v.unit));
    match (&l.old, &l.new) {
        (Some(a), Some(b)) => {
            let noise = a.spread.max(b.spread).max(MIN_NOISE);
            let flag = if moved(a.value, a.spread, b.value, b.spread) { "MOVED" } else { "" };
            (vec![show(&l.old), show(&l.new), format::change(a.value, b.value), format!("{:.1} %", noise * 100.0)], flag)
        }
        (Some(_), None) => (vec![show(&l.old), show(&l.new), "–".into(), "–".into()], "only old"),
        _ => (vec![show(&l.old), show(&l.new), "–".into(), "–".into()], "only new"),
    }
}

/// Matches lines of two runs by key, in the old run's order, then the new run's extra ones.
fn pair(old: Vec<(Vec<String>, Value, Option<String>)>, new: Vec<(Vec<String>, Value, Option<String>)>) -> Vec<Line> {
    let mut lines: Vec<Line> =
        old.into_iter().map(|(key, v, s)| Line { status: s.map(|s| (Some(s), None)), key, old: Some(v), new: None }).collect();
    for (key, v, s) in new {
        match lines.iter_mut().find(|l| l.key == key && l.new.is_none()) {
            Some(l) => {
                l.new = Some(v);
                if let Some(s) = s {
                    l.status = Some((l.status.take().and_then(|(o, _)| o), Some(s)));
                }
            }
            None => lines.push(Line { status: s.map(|s| (None, Some(s))), key, old: None, new: Some(v) }),
        }
    }
    lines
}

fn point_lines(d: &FigureData) -> Vec<(Vec<String>, Value, Option<String>)> {
    d.series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| (vec![s.label.clone(), p.x.text()], Value { value: p.value, spread: p.spread, unit: p.unit.clone() }, None))
        })
        .collect()
}

fn check_lines(d: &FigureData) -> Vec<(Vec<String>, Value, Option<String>)> {
    d.checks
        .iter()
        .map(|c| (vec![c.label.clone()], Value { value: c.value, spread: c.spread, unit: c.unit.clone() }, Some(c.status.clone())))
        .collect()
}
