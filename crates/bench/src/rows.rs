//! Where every benchmark's results go besides its printed tables: rows of the report's one
//! schema (`activerma_report::Row`), appended as JSON lines to the file `--json` names.
//!
//! Which process writes: the one that has the numbers. The OSU set's rank 0 measures and
//! writes; the application, PART and Firehose benchmarks collect their jobs' results in the
//! process that started the jobs and write there. `activerma bench --json FILE` empties FILE
//! once, in the process the user started; every process then appends whole lines (one
//! `write` each, O_APPEND), so rows from several processes never interleave mid-line.

use super::machine;
use super::timing::Measured;
use activerma_report::Row;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file rows go to (None: `--json` not given, rows are not kept).
static SINK: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sends this process's rows to `path`; `truncate` empties it first (the process the user
/// started), otherwise rows are appended (ranks and jobs it started).
pub fn open(path: &Path, truncate: bool) -> Result<(), String> {
    if truncate {
        std::fs::write(path, "").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.to_path_buf());
    Ok(())
}

/// Params as a JSON object: `params([("size", json!(8))])`.
pub fn params<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The row that `emit` would write: the machine, the commit and the settings filled in. The
/// settings are every ACTIVERMA_* variable of this process plus `job_env` (the settings of a
/// job this process started, which are no longer in its environment when it writes).
pub fn row(benchmark: &str, case: &str, params: Map<String, Value>, unit: &str, m: Measured, job_env: &[(String, String)]) -> Row {
    let mut settings: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| is_setting(k)).collect();
    settings.extend(job_env.iter().cloned());
    // Rounded so that the files stay readable; 6 significant digits are beyond any run's noise.
    let r = |v: f64| if v == 0.0 || !v.is_finite() { v } else { round_sig(v, 6) };
    Row {
        benchmark: benchmark.to_string(),
        case: case.to_string(),
        params: params.into_iter().collect(),
        value: r(m.value),
        unit: unit.to_string(),
        reps: m.reps.max(1),
        min: r(m.min),
        median: r(m.median),
        max: r(m.max),
        machine: machine::current(),
        commit: env!("ACTIVERMA_COMMIT").to_string(),
        settings,
    }
}

/// Writes one row to the file `--json` named (nothing without `--json`). A value that is not
/// finite (a variant that did not run) is not written: the report shows it as missing.
pub fn emit(benchmark: &str, case: &str, params: Map<String, Value>, unit: &str, m: Measured, job_env: &[(String, String)]) {
    let Some(path) = SINK.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    if !m.value.is_finite() {
        return;
    }
    let row = row(benchmark, case, params, unit, m, job_env);
    let mut line = serde_json::to_string(&row).expect("a row serializes");
    line.push('\n');
    let written = std::fs::OpenOptions::new().append(true).create(true).open(&path).and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("activerma bench: cannot append a row to {}: {e}", path.display());
    }
}

/// A runtime setting (not the launcher's per-rank plumbing, which differs by rank and job).
fn is_setting(name: &str) -> bool {
    name.starts_with("ACTIVERMA_") && activerma_core::settings::TABLE.iter().any(|s| s.name == name)
}

fn round_sig(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_filled_in_fields() {
        let m = Measured::of_samples(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(round_sig(123456789.0, 6), 123457000.0);
        assert_eq!(round_sig(0.000123456789, 3), 0.000123);
        let row = row(
            "dht",
            "AA-Poll",
            params([("ranks", Value::from(2))]),
            "inserts/s",
            m,
            &[("ACTIVERMA_NET_LATENCY_NS".into(), "1500".into())],
        );
        assert!(row.validate().is_ok());
        assert_eq!(row.settings.get("ACTIVERMA_NET_LATENCY_NS").map(String::as_str), Some("1500"));
        assert!(!row.commit.is_empty() && row.machine.cpus >= 1);
    }
}
