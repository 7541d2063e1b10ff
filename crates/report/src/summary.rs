//! `summary.md`: the check tables of the page in Markdown, per paper and figure, headed by the
//! machine and the folder's name, so a README section can be pasted from it as it is.

use crate::data::FigureData;
use crate::format;
use crate::reading::reading;
use crate::render::Report;
use std::fmt::Write;

pub(crate) fn markdown(r: &Report) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# activerma report `{}`\n", r.name);
    let _ = writeln!(m, "{} · commit {} · {} · {}\n", r.machine_line(), r.run.commit, r.run.started, r.mode());
    for b in r.run.benchmarks.iter().filter(|b| !b.quiet) {
        let _ = writeln!(m, "> {}: {}\n", b.name, b.warning.as_deref().unwrap_or("the machine was not quiet"));
    }
    for (paper, figures) in r.papers() {
        let _ = writeln!(m, "## {}\n", r.reg.paper[paper].title);
        for d in figures {
            figure(&mut m, r, d);
        }
    }
    m
}

fn figure(m: &mut String, r: &Report, d: &FigureData) {
    let f = d.figure;
    let _ = writeln!(m, "### {}: {}\n", f.label, f.title);
    if !d.has_rows() {
        let _ = writeln!(m, "_{}_\n", r.not_run(f));
        return;
    }
    let _ = writeln!(m, "{}\n", reading(d, r.run.quick));
    if d.checks.is_empty() {
        return;
    }
    m.push_str("| check | ours | paper | target | status |\n| --- | ---: | --- | --- | --- |\n");
    for c in &d.checks {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} |",
            cell(&c.label),
            cell(&format::value(c.value, &c.unit)),
            cell(c.paper.as_deref().unwrap_or("–")),
            cell(c.target.as_deref().unwrap_or("–")),
            cell(&c.status)
        );
    }
    m.push('\n');
}

/// A table cell: a '|' would end it, a line break would end the row, and a '<' could open an
/// HTML tag where the Markdown is shown; "<=" and ">=" (targets) read as ≤ and ≥.
pub(crate) fn cell(s: &str) -> String {
    s.replace("<=", "≤").replace(">=", "≥").replace('|', "\\|").replace('\n', " ").replace('<', "&lt;")
}
