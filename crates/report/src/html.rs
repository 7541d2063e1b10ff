//! `index.html`: one self-contained page (inline CSS, no script, nothing fetched), so it opens
//! from a copied folder, an artifact download or a mail attachment alike. The only files it
//! references are the folder's own plots and logs, each checked to exist before it is linked.
//! Every text from rows, run.json or the registry is escaped.

use crate::data::FigureData;
use crate::format;
use crate::reading::reading;
use crate::render::Report;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use std::fmt::Write;

const STYLE: &str = "
body { font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; color: #222; margin: 0 auto; max-width: 960px; padding: 0 16px 48px; }
header { border-bottom: 2px solid #ddd; padding-bottom: 8px; }
h1 { font-size: 24px; margin: 18px 0 6px; } h1 small { color: #777; font-weight: normal; }
h2 { font-size: 21px; margin-top: 40px; border-bottom: 1px solid #ddd; }
h3 { font-size: 17px; margin-top: 30px; }
.facts td { padding: 1px 12px 1px 0; } .facts td:first-child { color: #666; }
.cite, .note, .run, .settings, .source { color: #555; font-size: 14px; margin: 4px 0; }
.reading { font-weight: 600; margin: 6px 0; }
.warn { background: #fff4e0; border-left: 4px solid #e8a33c; padding: 6px 10px; margin: 8px 0; }
.notrun { color: #777; font-style: italic; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
table.checks { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
table.checks th, table.checks td { border-bottom: 1px solid #e4e4e4; padding: 3px 10px; text-align: left; }
table.checks td.num { text-align: right; font-variant-numeric: tabular-nums; }
.PASS { color: #17752e; font-weight: 700; } .MISS, .FAIL { color: #b3261e; font-weight: 700; } .other { color: #8a5a00; font-weight: 700; }
nav ul { margin: 4px 0; padding-left: 20px; } nav li { margin: 1px 0; }
code { font-size: 13px; }
";

pub(crate) fn page(r: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>activerma report {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        text(&r.name)
    );
    header(&mut h, r);
    for (paper, figures) in r.papers() {
        let p = &r.reg.paper[paper];
        let _ =
            writeln!(h, "<section id=\"paper-{}\">\n<h2>{}</h2>\n<p class=\"cite\">{}</p>", attr(paper), text(&p.title), text(&p.citation));
        for d in figures {
            figure(&mut h, r, d);
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn header(h: &mut String, r: &Report) {
    let run = r.run;
    let _ = writeln!(h, "<header>\n<h1>activerma report <small>{}</small></h1>\n<table class=\"facts\">", text(&r.name));
    for (k, v) in [("machine", r.machine_line()), ("commit", run.commit.clone()), ("started", run.started.clone()), ("mode", r.mode())] {
        let _ = writeln!(h, "<tr><td>{k}</td><td>{}</td></tr>", text(&v));
    }
    h.push_str("</table>\n");
    for b in run.benchmarks.iter().filter(|b| !b.quiet) {
        let why = b.warning.clone().unwrap_or_else(|| "the machine was not quiet".into());
        let busy = if b.busy.is_empty() { String::new() } else { format!(" (busy: {})", b.busy.join(", ")) };
        let _ = writeln!(h, "<p class=\"warn\">{}: {}{}</p>", text(&b.name), text(&why), text(&busy));
    }
    for w in &r.warnings {
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", text(w));
    }
    h.push_str("<nav><ul>\n");
    for (paper, figures) in r.papers() {
        let _ = write!(h, "<li>{}: ", text(&r.reg.paper[paper].title));
        let links: Vec<String> = figures
            .iter()
            .map(|d| {
                let f = d.figure;
                let mark = if d.has_rows() { "" } else { " (not run)" };
                format!("<a href=\"#fig-{}\">{}</a>{mark}", attr(&f.id), text(&f.label))
            })
            .collect();
        let _ = writeln!(h, "{}</li>", links.join(", "));
    }
    h.push_str("</ul></nav>\n</header>\n");
}

fn figure(h: &mut String, r: &Report, d: &FigureData) {
    let f = d.figure;
    let _ = writeln!(h, "<article id=\"fig-{}\">\n<h3>{}: {}</h3>", attr(&f.id), text(&f.label), text(&f.title));
    if !d.has_rows() {
        let _ = writeln!(h, "<p class=\"notrun\">{}</p>", text(&r.not_run(f)));
        note(h, d);
        h.push_str("</article>\n");
        return;
    }
    let _ = writeln!(h, "<p class=\"reading\">{}</p>", text(&reading(d, r.run.quick)));
    if r.drawn.contains(&f.id) {
        let alt = format!("{}: {}", f.label, f.title);
        let _ = writeln!(
            h,
            "<a href=\"figures/{id}.png\"><img src=\"figures/{id}.svg\" width=\"900\" height=\"520\" alt=\"{}\"></a>",
            attr(&alt),
            id = attr(&f.id)
        );
    } else {
        h.push_str("<p class=\"notrun\">no plotted rows: only the checks below</p>\n");
    }
    for w in &d.warnings {
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", text(w));
    }
    checks(h, d);
    note(h, d);
    for p in &d.paper {
        let _ = writeln!(h, "<p class=\"source\">{}: {}</p>", text(&p.label), text(&p.source));
    }
    if !d.settings.is_empty() {
        let list: Vec<String> =
            d.settings.iter().map(|(k, v)| format!("{k}={}", v.iter().cloned().collect::<Vec<_>>().join(" | "))).collect();
        let _ = writeln!(h, "<p class=\"settings\">settings: <code>{}</code></p>", text(&list.join(" ")));
    } else {
        h.push_str("<p class=\"settings\">settings: all defaults</p>\n");
    }
    run_facts(h, r, &f.benchmark);
    h.push_str("</article>\n");
}

fn note(h: &mut String, d: &FigureData) {
    if !d.figure.note.is_empty() {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", text(&d.figure.note));
    }
}

fn checks(h: &mut String, d: &FigureData) {
    if d.checks.is_empty() {
        return;
    }
    h.push_str("<table class=\"checks\">\n<tr><th>check</th><th>ours</th><th>paper</th><th>target</th><th>status</th></tr>\n");
    for c in &d.checks {
        let class = match c.status.as_str() {
            s @ ("PASS" | "MISS" | "FAIL") => s,
            _ => "other",
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td></tr>",
            text(&c.label),
            text(&format::value(c.value, &c.unit)),
            text(c.paper.as_deref().unwrap_or("–")),
            text(c.target.as_deref().unwrap_or("–")),
            text(&c.status)
        );
    }
    h.push_str("</table>\n");
}

/// How the benchmark behind the figure ran: seconds, exit code, load before, its log.
fn run_facts(h: &mut String, r: &Report, benchmark: &str) {
    let Some(b) = r.run_of(benchmark) else {
        let _ = writeln!(h, "<p class=\"run\">benchmark {}: not in run.json</p>", text(benchmark));
        return;
    };
    let facts = format!("benchmark {}: {} s, exit code {}, load before {}", b.name, format::num(b.seconds), b.exit_code, b.loadavg_before);
    let _ = write!(h, "<p class=\"run\">{}", text(&facts));
    if let Some(log) = r.log_of(b) {
        let _ = write!(h, ", <a href=\"{}\">log</a>", attr(&log));
    }
    h.push_str("</p>\n");
    if !b.quiet {
        let why = b.warning.clone().unwrap_or_else(|| "the machine was not quiet".into());
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", text(&why));
    }
}
