//! `run.json`: what a report run did, beside its rows: when, from which commit, on which
//! machine, and for every benchmark how long it took, whether the machine was quiet before it
//! and where its text output is.
//!
//! A report folder holds:
//! ```text
//! rows.jsonl            every row of every benchmark (the schema of row.rs)
//! run.json              this file
//! logs/<benchmark>.txt  each benchmark's own text output (tables, notes)
//! figures/<id>.svg/.png one plot per figure               (written by the renderer)
//! index.html            one self-contained page           (written by the renderer)
//! summary.md            the ratio tables in Markdown      (written by the renderer)
//! ```

use crate::row::Machine;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// UTC start time, RFC 3339.
    pub started: String,
    pub commit: String,
    pub quick: bool,
    /// The benchmarks asked for with --only (empty: all).
    pub only: Vec<String>,
    pub machine: Machine,
    pub benchmarks: Vec<BenchmarkRun>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkRun {
    pub name: String,
    /// The `activerma bench` arguments it ran with.
    pub args: Vec<String>,
    pub seconds: f64,
    /// 0 when it succeeded.
    pub exit_code: i32,
    /// Rows it wrote.
    pub rows: u32,
    /// /proc/loadavg's three averages just before it started.
    pub loadavg_before: String,
    /// Other processes that were busy just before it started ("cargo: 97 % CPU").
    pub busy: Vec<String>,
    /// Whether the machine looked quiet before it started; when not, `warning` says why and the
    /// report shows it beside the benchmark's figures.
    pub quiet: bool,
    pub warning: Option<String>,
    /// Its text output, relative to the report folder.
    pub log: String,
}

impl RunInfo {
    pub fn read(dir: &Path) -> Result<RunInfo, String> {
        let path = dir.join("run.json");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join("run.json");
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}
