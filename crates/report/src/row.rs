//! The one schema of a measured row. Every benchmark writes its results as JSON lines of this
//! shape (`activerma bench … --json FILE`), whatever it measures, so that the report, the
//! comparison of two runs and any outside tool read one format.
//!
//! ```text
//! {"benchmark":"put-latency","case":"segment","params":{"size":8},"value":0.061,"unit":"us",
//!  "reps":9,"min":0.058,"median":0.061,"max":0.07,
//!  "machine":{"cpu":"AMD EPYC 7B13","cpus":2,"memcpy_gbs":47.9},
//!  "commit":"db2a628","settings":{"ACTIVERMA_REGISTRATION":"part"}}
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

/// One measured quantity: a latency, a rate, a ratio measured side by side, a count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The benchmark that measured it, as `activerma bench` names it ("put-latency", "dht").
    pub benchmark: String,
    /// What was measured within the benchmark: a target, a variant, a ratio's name ("segment",
    /// "AA-Poll", "AA-Poll/AM").
    pub case: String,
    /// The sweep's coordinates: message size, ranks, collision ratio, model, fault share, …
    /// Numbers stay numbers (the plots' x axes read them).
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// The reported value: the median over the repetitions unless the benchmark says otherwise.
    pub value: f64,
    /// "us", "MB/s", "inserts/s", "x" (a ratio), "count", …
    pub unit: String,
    /// Repetitions behind min / median / max (1: a single measurement, min = median = max).
    pub reps: u32,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub machine: Machine,
    /// The source the binary was built from (`git describe`-style short hash; "unknown" outside
    /// a git checkout).
    pub commit: String,
    /// Every `ACTIVERMA_*` setting that differed from its default for this row's job.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

/// The machine a row was measured on: numbers from two machines are never compared, and this
/// is how a reader tells them apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU model as /proc/cpuinfo names it.
    pub cpu: String,
    /// CPUs online.
    pub cpus: u32,
    /// memcpy bandwidth of 1 MiB copies measured in the same run (GB/s, best batch).
    pub memcpy_gbs: f64,
}

impl Row {
    /// The value of parameter `name` as a number, if it is one.
    pub fn param_f64(&self, name: &str) -> Option<f64> {
        self.params.get(name).and_then(|v| v.as_f64())
    }

    /// The value of parameter `name` as text (numbers formatted as JSON writes them).
    pub fn param_text(&self, name: &str) -> Option<String> {
        self.params.get(name).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    /// Checks what the schema cannot say: finite numbers, min ≤ median ≤ max, at least one
    /// repetition, names present.
    pub fn validate(&self) -> Result<(), String> {
        let what = format!("row {}/{}", self.benchmark, self.case);
        if self.benchmark.is_empty() || self.case.is_empty() || self.unit.is_empty() {
            return Err(format!("{what}: benchmark, case and unit must not be empty"));
        }
        if ![self.value, self.min, self.median, self.max, self.machine.memcpy_gbs].iter().all(|v| v.is_finite()) {
            return Err(format!("{what}: every number must be finite"));
        }
        if self.reps == 0 {
            return Err(format!("{what}: reps must be at least 1"));
        }
        // A little slack: min/median/max are rounded when written.
        let slack = 1e-9 * self.max.abs().max(1.0);
        if self.min > self.median + slack || self.median > self.max + slack {
            return Err(format!("{what}: needs min <= median <= max, got {} / {} / {}", self.min, self.median, self.max));
        }
        Ok(())
    }
}

/// Reads a JSON-lines file of rows (blank lines skipped); an error names the file and line.
pub fn read_rows(path: &Path) -> Result<Vec<Row>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(&line).map_err(|e| format!("{}:{}: not a row: {e}", path.display(), i + 1))?;
        row.validate().map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            benchmark: "put-latency".into(),
            case: "segment".into(),
            params: [("size".to_string(), serde_json::json!(8))].into_iter().collect(),
            value: 0.061,
            unit: "us".into(),
            reps: 9,
            min: 0.058,
            median: 0.061,
            max: 0.07,
            machine: Machine { cpu: "AMD EPYC".into(), cpus: 2, memcpy_gbs: 47.9 },
            commit: "db2a628".into(),
            settings: BTreeMap::new(),
        }
    }

    #[test]
    fn rows_round_trip_and_validate() {
        let r = row();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with("{\"benchmark\":\"put-latency\",\"case\":\"segment\""));
        let back: Row = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert!(back.validate().is_ok());
        assert_eq!(back.param_f64("size"), Some(8.0));
        assert_eq!(back.param_text("size").as_deref(), Some("8"));
        let bad = Row { min: 1.0, ..row() };
        assert!(bad.validate().unwrap_err().contains("min <= median <= max"));
        let nan = Row { value: f64::NAN, ..row() };
        assert!(nan.validate().is_err());
        assert!(serde_json::from_str::<Row>("{\"benchmark\":\"x\"}").is_err(), "missing fields are refused");
    }
}
