//! The one-line reading under each figure, made from the numbers alone: how many checks pass
//! and what the misses are ("2 of 3 checks pass; AA-Poll/RMA 2.10× against the paper's 3
//! (target >= 2.5): MISS"), or, for a figure without checks, where its series lie. It says
//! what the table says in words, so a reader who skims the page gets the verdict, not a
//! summary that a person would have to keep in step with the numbers.

use crate::data::{CheckLine, FigureData, SeriesData, X};
use crate::format;
use crate::spec::Kind;

/// At most this many misses spelled out; the table has the rest.
const DETAILS: usize = 3;

pub fn reading(d: &FigureData, quick: bool) -> String {
    let mut parts = Vec::new();
    if quick {
        parts.push("quick run, indicative only".to_string());
    }
    if d.checks.is_empty() {
        parts.extend(series_reading(d));
    } else {
        parts.extend(check_reading(&d.checks));
    }
    let empty: Vec<&str> = d.series.iter().filter(|s| s.points.is_empty()).map(|s| s.label.as_str()).collect();
    if !empty.is_empty() && d.has_plot() {
        parts.push(format!("no rows for {}", empty.join(", ")));
    }
    if parts.is_empty() {
        return "nothing to read: no rows".into();
    }
    parts.join("; ")
}

fn check_reading(checks: &[CheckLine]) -> Vec<String> {
    let mut parts = Vec::new();
    let judged: Vec<&CheckLine> = checks.iter().filter(|c| c.judged()).collect();
    let passed = judged.iter().filter(|c| c.passed()).count();
    if !judged.is_empty() {
        let (noun, verb) = if judged.len() == 1 { ("check", "passes") } else { ("checks", "pass") };
        parts.push(format!("{passed} of {} {noun} {verb}", judged.len()));
    }
    // Statuses that judge nothing (LIMIT?, INFO, …), counted by name.
    let mut others: Vec<(String, usize)> = Vec::new();
    for c in checks.iter().filter(|c| !c.judged()) {
        match others.iter_mut().find(|(s, _)| *s == c.status) {
            Some((_, n)) => *n += 1,
            None => others.push((c.status.clone(), 1)),
        }
    }
    parts.extend(others.iter().map(|(s, n)| format!("{n} {s}")));
    let misses: Vec<&&CheckLine> = judged.iter().filter(|c| !c.passed()).collect();
    for c in misses.iter().take(DETAILS) {
        let mut text = format!("{} {}", c.label, format::value(c.value, &c.unit));
        if let Some(p) = &c.paper {
            text += &format!(" against the paper's {p}");
        }
        if let Some(t) = &c.target {
            text += &format!(" (target {t})");
        }
        parts.push(format!("{text}: {}", c.status));
    }
    if misses.len() > DETAILS {
        parts.push(format!("and {} more", misses.len() - DETAILS));
    }
    parts
}

/// Where each series lies, for figures that have no checks: a line from its first to its last
/// point, a bar series by its extremes or, normalized, each category beside the paper's.
fn series_reading(d: &FigureData) -> Vec<String> {
    let f = d.figure;
    d.series
        .iter()
        .filter(|s| !s.points.is_empty())
        .map(|s| match f.kind {
            Kind::Lines => {
                let (a, b) = (&s.points[0], &s.points[s.points.len() - 1]);
                let at = |x: &X| format!("{} {}", x.text(), f.x.unit).trim_end().to_string();
                format!(
                    "{}: {} at {} to {} at {}",
                    s.label,
                    format::value(a.value, &a.unit),
                    at(&a.x),
                    format::value(b.value, &b.unit),
                    at(&b.x)
                )
            }
            Kind::Bars => match &f.normalize {
                Some(base) => normalized_reading(d, s, base),
                None => {
                    let hi = s.points.iter().max_by(|a, b| a.value.total_cmp(&b.value)).unwrap();
                    let lo = s.points.iter().min_by(|a, b| a.value.total_cmp(&b.value)).unwrap();
                    format!(
                        "{}: highest {} {}, lowest {} {}",
                        s.label,
                        hi.x.text(),
                        format::value(hi.value, &hi.unit),
                        lo.x.text(),
                        format::value(lo.value, &lo.unit)
                    )
                }
            },
        })
        .collect()
}

fn normalized_reading(d: &FigureData, s: &SeriesData, base: &str) -> String {
    let paper_at = |x: &X| d.paper.iter().flat_map(|p| p.points.iter()).find(|(px, _)| px == x).map(|(_, y)| *y);
    let items: Vec<String> = s
        .points
        .iter()
        .filter(|p| p.x != X::Cat(base.to_string()))
        .map(|p| {
            let paper = paper_at(&p.x).map(|y| format!(" (paper {})", format::value(y, "x"))).unwrap_or_default();
            format!("{} {}{paper}", p.x.text(), format::value(p.value, "x"))
        })
        .collect();
    format!("{}: {} of {base}", s.label, items.join(", "))
}
