//! What one figure shows, taken from the rows once: its series' points (normalized where the
//! figure asks), the paper's points, its check lines with their verdicts, and the settings its
//! rows ran with. The plot, the page, the summary and the comparison all read this, so they
//! cannot disagree about which row is which point or what a check says.

use crate::format;
use crate::row::Row;
use crate::spec::{Check, Figure, Kind, Repeated, Target};
use std::collections::{BTreeMap, BTreeSet};

/// Where a point sits on the x axis: a number on a lines figure, a category on a bars figure.
#[derive(Clone, Debug, PartialEq)]
pub enum X {
    Num(f64),
    Cat(String),
}

impl X {
    /// The x as a person reads it (also the key that matches points of two runs).
    pub fn text(&self) -> String {
        match self {
            // Coordinates are mostly whole (sizes, ranks, percentages): "8", not "8.00".
            X::Num(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
            X::Num(v) => format::num(*v),
            X::Cat(c) => c.clone(),
        }
    }
}

/// One plotted point: a row's value, with its min and max, normalized when the figure is.
#[derive(Clone, Debug)]
pub struct Point {
    pub x: X,
    pub value: f64,
    pub min: f64,
    pub max: f64,
    /// The row's own run-to-run spread, (max − min) / median (0 for one repetition): how far
    /// the next run may move this point by chance. Normalizing does not change it.
    pub spread: f64,
    /// The row's unit, or "x" once normalized.
    pub unit: String,
}

#[derive(Clone, Debug)]
pub struct SeriesData {
    pub label: String,
    pub points: Vec<Point>,
}

#[derive(Clone, Debug)]
pub struct PaperData {
    pub label: String,
    pub points: Vec<(X, f64)>,
    pub source: String,
}

/// One line of a figure's ratio table.
#[derive(Clone, Debug)]
pub struct CheckLine {
    pub label: String,
    pub value: f64,
    pub unit: String,
    pub spread: f64,
    pub paper: Option<String>,
    pub target: Option<String>,
    /// The row's own `status` param if it has one, else PASS / MISS from the target, else INFO.
    pub status: String,
}

impl CheckLine {
    /// PASS and MISS (and a benchmark's own FAIL) judge a target; LIMIT?, INFO and the like
    /// do not count as passed or missed.
    pub fn judged(&self) -> bool {
        matches!(self.status.as_str(), "PASS" | "MISS" | "FAIL")
    }

    pub fn passed(&self) -> bool {
        self.status == "PASS"
    }
}

/// A figure with everything its rows say.
#[derive(Clone, Debug)]
pub struct FigureData<'a> {
    pub figure: &'a Figure,
    pub series: Vec<SeriesData>,
    pub paper: Vec<PaperData>,
    /// Bars: the x categories in drawing order (ours by first appearance, then the paper's
    /// that we did not measure). Empty on a lines figure.
    pub categories: Vec<String>,
    pub checks: Vec<CheckLine>,
    /// Union of the `settings` of every row the figure uses; a setting that differed between
    /// rows lists every value.
    pub settings: BTreeMap<String, BTreeSet<String>>,
    /// Rows the figure uses (series and checks).
    pub rows: usize,
    /// What could not be drawn as asked (a row without the x parameter, two rows on one point,
    /// a series without the normalizing category).
    pub warnings: Vec<String>,
}

impl FigureData<'_> {
    /// Whether any row belongs to the figure; one without is "not run".
    pub fn has_rows(&self) -> bool {
        self.rows > 0
    }

    /// Whether there is anything of ours to plot.
    pub fn has_plot(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }
}

/// The params a check row carries about itself rather than where it was measured.
const CHECK_META: [&str; 9] = ["target", "paper", "status", "what", "id", "ours", "theirs", "c_api", "ratio_to_c_api"];

/// Gathers figure `fig` from `rows`.
pub fn figure_data<'a>(fig: &'a Figure, rows: &[Row]) -> FigureData<'a> {
    let mut warnings = Vec::new();
    let mut used = BTreeSet::new();
    let mut series = Vec::new();
    for s in &fig.series {
        let mut points: Vec<Point> = Vec::new();
        for (i, row) in rows.iter().enumerate().filter(|(_, r)| s.select.matches(r, &fig.benchmark)) {
            used.insert(i);
            let x = match fig.kind {
                Kind::Lines => match row.param_f64(&fig.x.param) {
                    Some(v) => X::Num(v),
                    None => {
                        warnings.push(format!("series {:?}: a {} row has no number {:?}, not drawn", s.label, row.case, fig.x.param));
                        continue;
                    }
                },
                Kind::Bars if fig.x.param == "case" => X::Cat(row.case.clone()),
                Kind::Bars => match row.param_text(&fig.x.param) {
                    Some(t) => X::Cat(t),
                    None => {
                        warnings.push(format!("series {:?}: a {} row has no {:?}, not drawn", s.label, row.case, fig.x.param));
                        continue;
                    }
                },
            };
            // One row per point: a second one would draw a zigzag (see `Series::repeated`).
            let point = Point { x, value: row.value, min: row.min, max: row.max, spread: spread(row), unit: row.unit.clone() };
            if let Some(kept) = points.iter_mut().find(|p| p.x == point.x) {
                match s.repeated {
                    Repeated::Lowest if point.value < kept.value => *kept = point,
                    Repeated::Lowest => {}
                    Repeated::First => warnings.push(format!(
                        "series {:?}: several rows at {} {}, drawing the first",
                        s.label,
                        fig.x.param,
                        point.x.text()
                    )),
                }
                continue;
            }
            points.push(point);
        }
        if fig.kind == Kind::Lines {
            points.sort_by(|a, b| num_x(&a.x).total_cmp(&num_x(&b.x)));
        }
        if let Some(base) = &fig.normalize {
            points = normalize(points, base, &s.label, &mut warnings);
        }
        series.push(SeriesData { label: s.label.clone(), points });
    }

    let paper: Vec<PaperData> = fig
        .paper_series
        .iter()
        .map(|p| PaperData {
            label: p.label.clone(),
            points: p.points.iter().map(|(x, y)| (paper_x(x, fig.kind), *y)).collect(),
            source: p.source.clone(),
        })
        .collect();

    let mut categories: Vec<String> = Vec::new();
    if fig.kind == Kind::Bars {
        let ours = series.iter().flat_map(|s| s.points.iter().map(|p| &p.x));
        for x in ours.chain(paper.iter().flat_map(|p| p.points.iter().map(|(x, _)| x))) {
            if let X::Cat(c) = x {
                if !categories.contains(c) {
                    categories.push(c.clone());
                }
            }
        }
    }

    let mut checks = Vec::new();
    for c in &fig.check {
        let matched: Vec<usize> = (0..rows.len()).filter(|&i| c.select.matches(&rows[i], &fig.benchmark)).collect();
        used.extend(&matched);
        checks.extend(check_lines(c, &matched.iter().map(|&i| &rows[i]).collect::<Vec<_>>()));
    }

    let mut settings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &i in &used {
        for (k, v) in &rows[i].settings {
            settings.entry(k.clone()).or_default().insert(v.clone());
        }
    }

    FigureData { figure: fig, series, paper, categories, checks, settings, rows: used.len(), warnings }
}

fn spread(row: &Row) -> f64 {
    if row.median.abs() > 0.0 {
        (row.max - row.min) / row.median.abs()
    } else {
        0.0
    }
}

fn num_x(x: &X) -> f64 {
    match x {
        X::Num(v) => *v,
        X::Cat(_) => 0.0,
    }
}

/// A paper point's x from figures.toml: a number on a lines figure (the registry checked it),
/// a category's text on a bars figure.
fn paper_x(x: &toml::Value, kind: Kind) -> X {
    match (kind, x) {
        (Kind::Lines, toml::Value::Integer(i)) => X::Num(*i as f64),
        (Kind::Lines, toml::Value::Float(f)) => X::Num(*f),
        (_, toml::Value::String(s)) => X::Cat(s.clone()),
        (_, other) => X::Cat(other.to_string()),
    }
}

/// Divides a series' values by its own value at category `base`, as the paper reports ratios
/// to its best scheme. A series that lacks `base` cannot be put on that scale: it is dropped
/// (drawing raw numbers on a ratio axis would mislead) and the page says why.
fn normalize(points: Vec<Point>, base: &str, label: &str, warnings: &mut Vec<String>) -> Vec<Point> {
    if points.is_empty() {
        return points;
    }
    let Some(b) = points.iter().find(|p| p.x == X::Cat(base.to_string())).map(|p| p.value).filter(|v| *v != 0.0) else {
        warnings.push(format!("series {label:?} has no (non-zero) {base}, which this figure divides by: not drawn"));
        return Vec::new();
    };
    points.into_iter().map(|p| Point { value: p.value / b, min: p.min / b, max: p.max / b, unit: "x".into(), ..p }).collect()
}

/// The lines one check contributes: one per matched row, labelled by the check, else by the
/// row's own description (`params.what`, which the benchmark's table prints), else its case.
/// Rows that would read the same label (one ratio measured under two models) are told apart
/// by the params in which they differ.
fn check_lines(c: &Check, rows: &[&Row]) -> Vec<CheckLine> {
    let base = |r: &Row| match (c.label.is_empty(), r.param_text("what")) {
        (false, _) => c.label.clone(),
        (true, Some(what)) => what,
        (true, None) => r.case.clone(),
    };
    rows.iter()
        .map(|r| {
            let mut label = base(r);
            let twins: Vec<&&Row> = rows.iter().filter(|o| base(o) == label).collect();
            if twins.len() > 1 {
                let differing: Vec<String> = r
                    .params
                    .keys()
                    .filter(|k| !CHECK_META.contains(&k.as_str()))
                    .filter(|k| twins.iter().any(|o| o.params.get(*k) != r.params.get(*k)))
                    .map(|k| format!("{k}={}", r.param_text(k).unwrap_or_default()))
                    .collect();
                if !differing.is_empty() {
                    label = format!("{label} ({})", differing.join(", "));
                }
            }
            let paper = c.paper.as_ref().map(toml_text).or_else(|| r.param_text("paper"));
            let target = c.target.clone().or_else(|| r.param_text("target"));
            let status = match (r.param_text("status"), &target) {
                (Some(s), _) => s,
                (None, Some(t)) => match Target::parse(t) {
                    Ok(t) if t.met_by(r.value) => "PASS".into(),
                    Ok(_) => "MISS".into(),
                    Err(_) => "TARGET?".into(),
                },
                (None, None) => "INFO".into(),
            };
            CheckLine { label, value: r.value, unit: r.unit.clone(), spread: spread(r), paper, target, status }
        })
        .collect()
}

/// A paper value from figures.toml as text: strings as written, numbers as numbers.
fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => format::num(*f),
        other => other.to_string(),
    }
}
