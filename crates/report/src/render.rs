//! Turns a report folder (`rows.jsonl`, `run.json`, `logs/`) into its plots, `index.html` and
//! `summary.md`. Reading and drawing only: it runs nothing, so a folder copied from another
//! machine can be re-drawn anywhere.

use crate::data::{figure_data, FigureData};
use crate::row::{read_rows, Machine};
use crate::run::{BenchmarkRun, RunInfo};
use crate::spec::{Figure, Registry};
use crate::{format, html, plot, png, summary};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `render` wrote and what the reader should know about it.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    /// Figures drawn (`figures/<id>.svg` and `.png`), in registry order.
    pub drawn: Vec<String>,
    /// Figures without rows: listed in the page as "not run", no plot.
    pub not_run: Vec<String>,
    /// Every file written, index.html and summary.md last.
    pub files: Vec<PathBuf>,
    /// Things that were drawn otherwise than asked: no font for the PNGs' text, a figure's
    /// rows that could not be placed (these also appear on the page).
    pub warnings: Vec<String>,
}

/// Everything the page and the summary are written from.
pub(crate) struct Report<'a> {
    pub dir: &'a Path,
    /// The folder's own name, to tell reports apart.
    pub name: String,
    pub reg: &'a Registry,
    pub run: &'a RunInfo,
    pub figures: Vec<FigureData<'a>>,
    /// Ids whose plot files exist.
    pub drawn: BTreeSet<String>,
    /// Report-wide warnings (per-figure ones live in `FigureData::warnings`).
    pub warnings: Vec<String>,
}

impl Report<'_> {
    pub fn run_of(&self, benchmark: &str) -> Option<&BenchmarkRun> {
        self.run.benchmarks.iter().find(|b| b.name == benchmark)
    }

    /// Papers in the order their first figure appears in the registry, each with its figures
    /// (the registry's papers table is keyed, so it has no order of its own).
    pub fn papers(&self) -> Vec<(&str, Vec<&FigureData<'_>>)> {
        let mut out: Vec<(&str, Vec<&FigureData>)> = Vec::new();
        for d in &self.figures {
            let key = d.figure.paper.as_str();
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(d),
                None => out.push((key, vec![d])),
            }
        }
        out
    }

    /// Why a figure has no rows, in words that start with "not run".
    pub fn not_run(&self, f: &Figure) -> String {
        match self.run_of(&f.benchmark) {
            None => format!("not run: benchmark {} was not part of this report", f.benchmark),
            Some(b) if b.exit_code != 0 => format!("not run: benchmark {} failed (exit code {}), see its log", f.benchmark, b.exit_code),
            Some(_) => format!("not run: benchmark {} wrote no rows for this figure", f.benchmark),
        }
    }

    /// The benchmark's log, relative to the folder, if it is a file inside the folder.
    pub fn log_of(&self, b: &BenchmarkRun) -> Option<String> {
        let log = if b.log.is_empty() { format!("logs/{}.txt", b.name) } else { b.log.clone() };
        let rel = Path::new(&log);
        let inside = rel.is_relative() && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        (inside && self.dir.join(rel).is_file()).then_some(log)
    }

    pub fn machine_line(&self) -> String {
        machine_line(&self.run.machine)
    }

    /// "full run" / "quick run", with the --only list when there was one.
    pub fn mode(&self) -> String {
        let mode = if self.run.quick { "quick run (--quick)" } else { "full run" };
        if self.run.only.is_empty() {
            mode.to_string()
        } else {
            format!("{mode}, only {}", self.run.only.join(", "))
        }
    }
}

pub(crate) fn machine_line(m: &Machine) -> String {
    format!("{}, {} CPUs, memcpy {} GB/s", m.cpu, m.cpus, format::num(m.memcpy_gbs))
}

/// Draws report folder `dir`: `figures/<id>.svg` + `.png` for every figure with rows,
/// `index.html` and `summary.md`.
pub fn render(dir: &Path, reg: &Registry) -> Result<Rendered, String> {
    let rows = read_rows(&dir.join("rows.jsonl"))?;
    let run = RunInfo::read(dir)?;
    let mut out = Rendered::default();
    let figures: Vec<FigureData> = reg.figure.iter().map(|f| figure_data(f, &rows)).collect();

    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir).map_err(|e| format!("cannot create {}: {e}", fig_dir.display()))?;
    let fonts = png::Fonts::system();
    if fonts.family.is_none() {
        out.warnings.push("no system font found: the PNGs are written without their text (the SVGs have it)".into());
    }
    let mut drawn = BTreeSet::new();
    for d in &figures {
        let id = &d.figure.id;
        let (svg_path, png_path) = (fig_dir.join(format!("{id}.svg")), fig_dir.join(format!("{id}.png")));
        out.warnings.extend(d.warnings.iter().map(|w| format!("{id}: {w}")));
        if !d.has_plot() {
            // A plot left from an earlier render of this folder would show rows that are gone.
            let _ = std::fs::remove_file(&svg_path);
            let _ = std::fs::remove_file(&png_path);
            if !d.has_rows() {
                out.not_run.push(id.clone());
            }
            continue;
        }
        let svg = plot::svg(d).map_err(|e| format!("{id}: {e}"))?;
        write(&svg_path, svg.as_bytes(), &mut out)?;
        let bytes = png::png(&svg, &fonts).map_err(|e| format!("{id}: {e}"))?;
        write(&png_path, &bytes, &mut out)?;
        drawn.insert(id.clone());
        out.drawn.push(id.clone());
    }

    let name = dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string());
    let report = Report { dir, name, reg, run: &run, figures, drawn, warnings: out.warnings.clone() };
    write(&dir.join("index.html"), html::page(&report).as_bytes(), &mut out)?;
    write(&dir.join("summary.md"), summary::markdown(&report).as_bytes(), &mut out)?;
    Ok(out)
}

fn write(path: &Path, bytes: &[u8], out: &mut Rendered) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    out.files.push(path.to_path_buf());
    Ok(())
}
