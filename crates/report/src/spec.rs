//! The registry of paper figures: which benchmark stands for which figure or table of which
//! paper, how to draw it, the paper's own numbers beside ours, and the ratio checks with their
//! targets. It is a data file, `figures.toml` next to this crate's sources, compiled into the
//! binary: `activerma bench` lists its benchmarks from it and `activerma report` runs and draws
//! them, so a benchmark added later registers by adding its entries there.
//!
//! ```text
//! [paper.aa]                      title, citation
//! [[benchmark]]                   name (an `activerma bench` benchmark), args, quick_args,
//!                                 minutes / quick_minutes (expected), rows / quick_rows (expected)
//! [[figure]]                      id, paper, label ("Fig. 7a"), title, benchmark, kind,
//!                                 x { param, label, unit, log }, y { label, unit, log },
//!   [[figure.series]]             label, select { benchmark?, case?, params }  (our rows)
//!   [[figure.paper_series]]       label, points = [[x, y], …], source       (the paper's numbers)
//!   [[figure.check]]              label, select, paper, target (">= 1.0")    (ratio table)
//! ```

use crate::row::Row;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The figures file, as compiled into the binary.
pub const FIGURES_TOML: &str = include_str!("../figures.toml");

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub paper: BTreeMap<String, Paper>,
    pub benchmark: Vec<Benchmark>,
    #[serde(default)]
    pub figure: Vec<Figure>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    /// Short name for headings ("Active Access").
    pub title: String,
    /// Authors, title, venue.
    pub citation: String,
}

/// One run of `activerma bench` that some figures are drawn from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmark {
    /// The `activerma bench` benchmark name; `--only` takes it.
    pub name: String,
    /// One line: what it measures.
    pub about: String,
    /// A script of the source tree to run instead of `activerma bench` (a path from the
    /// repository's root, run with bash; it gets `--json FILE` like the benchmarks and finds
    /// this binary in ACTIVERMA_BIN): for comparisons with peers built outside the runtime.
    #[serde(default)]
    pub script: Option<String>,
    /// Arguments after `activerma bench` (or the script) for the full and the `--quick` report.
    pub args: Vec<String>,
    pub quick_args: Vec<String>,
    /// Expected duration on a 2-core machine, for the plan and the time-left estimate.
    pub minutes: f64,
    pub quick_minutes: f64,
    /// Rows a full / quick run writes (for its progress bar; a run may write a few more or less).
    pub rows: u32,
    pub quick_rows: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// x numeric (a parameter), one line per series with its min–max band.
    Lines,
    /// x categorical (a parameter's values or the row's case), grouped bars with min–max whiskers.
    Bars,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// The row parameter on this axis ("size"), or "case" for the row's case (x only). Unused
    /// on y, which always shows the rows' values.
    #[serde(default)]
    pub param: String,
    pub label: String,
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub log: bool,
}

/// One figure (or table) of a paper.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// File-name-safe id, unique ("aa-fig7a"); plots are `<id>.svg` / `<id>.png`.
    pub id: String,
    /// Key into the papers table.
    pub paper: String,
    /// The paper's own label ("Fig. 7a", "Table II").
    pub label: String,
    pub title: String,
    /// The benchmark (by name) whose rows this figure draws.
    pub benchmark: String,
    pub kind: Kind,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    #[serde(default)]
    pub paper_series: Vec<PaperSeries>,
    #[serde(default)]
    pub check: Vec<Check>,
    /// Bars only: show every series' values divided by that series' value at this category
    /// (e.g. "AA-Poll"), as the paper reports ratios to its best scheme.
    #[serde(default)]
    pub normalize: Option<String>,
    /// What differs between the paper's setting and ours, in one or two sentences.
    #[serde(default)]
    pub note: String,
}

/// Our rows that make one series of a figure.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    pub label: String,
    pub select: Select,
    /// What to draw where several rows fall on one point. Default: the first, and the page
    /// warns (a repeated benchmark, a param the select does not pin). `Lowest`: the lowest
    /// value, silently — for a limit measured in several passes, where the best pass counts.
    #[serde(default)]
    pub repeated: Repeated,
}

/// See `Series::repeated`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Repeated {
    #[default]
    First,
    Lowest,
}

/// The paper's numbers for one series, transcribed once, with where they come from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperSeries {
    pub label: String,
    /// [x, y] pairs; x is a number on a `lines` figure, a category (text) on a `bars` figure.
    pub points: Vec<(toml::Value, f64)>,
    /// "Fig. 7a, read off the plot", "Table II".
    pub source: String,
}

/// Lines of a figure's ratio table: our value, the paper's, the target, PASS / MISS. The
/// select may match several rows (a benchmark's whole summary): each is one line, labelled
/// with `label` or else the row's case. A benchmark that judges its own checks puts `target`
/// (">= 2"), `paper` (a number or text) and, where it knows better than the target alone
/// (a limit beaten: "LIMIT?", "INFO"), `status` into the row's params; `paper` and `target`
/// given here take precedence.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    #[serde(default)]
    pub label: String,
    pub select: Select,
    /// The paper's value of the same ratio (a number, or text such as "~2").
    #[serde(default)]
    pub paper: Option<toml::Value>,
    /// The target as "<= X" or ">= X"; none for a check reported for information only.
    #[serde(default)]
    pub target: Option<String>,
}

/// Which rows: all of `benchmark` (default: the figure's), of `case` if given, whose params
/// include every `params` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    #[serde(default)]
    pub benchmark: Option<String>,
    #[serde(default)]
    pub case: Option<String>,
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
}

/// A parsed target: our value must be at most / at least / below / above this.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    AtMost(f64),
    AtLeast(f64),
    Below(f64),
    Above(f64),
}

impl Target {
    pub fn parse(text: &str) -> Result<Target, String> {
        let t = text.trim();
        let (ctor, rest): (fn(f64) -> Target, &str) = if let Some(r) = t.strip_prefix("<=") {
            (Target::AtMost, r)
        } else if let Some(r) = t.strip_prefix(">=") {
            (Target::AtLeast, r)
        } else if let Some(r) = t.strip_prefix('<') {
            (Target::Below, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (Target::Above, r)
        } else {
            return Err(format!("target {text:?} must be \"<= X\", \">= X\", \"< X\" or \"> X\""));
        };
        rest.trim().parse::<f64>().map(ctor).map_err(|_| format!("target {text:?}: {rest:?} is not a number"))
    }

    pub fn met_by(&self, ours: f64) -> bool {
        match *self {
            Target::AtMost(x) => ours <= x,
            Target::AtLeast(x) => ours >= x,
            Target::Below(x) => ours < x,
            Target::Above(x) => ours > x,
        }
    }
}

impl Select {
    /// Whether `row` is one of the selected rows; `default_benchmark` is the figure's.
    pub fn matches(&self, row: &Row, default_benchmark: &str) -> bool {
        let benchmark = self.benchmark.as_deref().unwrap_or(default_benchmark);
        row.benchmark == benchmark
            && self.case.as_ref().is_none_or(|c| *c == row.case)
            && self.params.iter().all(|(k, want)| row.params.get(k).is_some_and(|have| same_value(want, have)))
    }
}

/// A TOML value from the figures file equals a JSON value from a row (numbers by value, so 5
/// matches 5.0).
fn same_value(want: &toml::Value, have: &serde_json::Value) -> bool {
    match (want, have) {
        (toml::Value::String(a), serde_json::Value::String(b)) => a == b,
        (toml::Value::Boolean(a), serde_json::Value::Bool(b)) => a == b,
        (toml::Value::Integer(a), b) => b.as_f64() == Some(*a as f64),
        (toml::Value::Float(a), b) => b.as_f64() == Some(*a),
        _ => false,
    }
}

impl Registry {
    /// The registry compiled into this binary.
    pub fn builtin() -> Registry {
        Registry::parse(FIGURES_TOML).unwrap_or_else(|e| panic!("figures.toml compiled into this binary is invalid: {e}"))
    }

    /// Parses and checks a figures file: unique names and ids, every figure's paper and
    /// benchmark known, targets well-formed, x axes that suit their kind.
    pub fn parse(text: &str) -> Result<Registry, String> {
        let reg: Registry = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut names = std::collections::BTreeSet::new();
        for b in &reg.benchmark {
            if !names.insert(b.name.as_str()) {
                return Err(format!("benchmark {} is listed twice", b.name));
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for f in &reg.figure {
            let what = format!("figure {}", f.id);
            if f.id.is_empty() || !f.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') || !ids.insert(f.id.as_str()) {
                return Err(format!("{what}: ids must be unique and made of letters, digits and '-'"));
            }
            if !reg.paper.contains_key(&f.paper) {
                return Err(format!("{what}: unknown paper {:?}", f.paper));
            }
            if !names.contains(f.benchmark.as_str()) {
                return Err(format!("{what}: unknown benchmark {:?}", f.benchmark));
            }
            if f.x.param.is_empty() {
                return Err(format!("{what}: x.param names a row parameter or \"case\""));
            }
            if f.series.is_empty() {
                return Err(format!("{what}: no series"));
            }
            for c in &f.check {
                if let Some(t) = &c.target {
                    Target::parse(t).map_err(|e| format!("{what}, check {:?}: {e}", c.label))?;
                }
            }
            for p in &f.paper_series {
                let numeric = p.points.iter().all(|(x, _)| x.is_integer() || x.is_float());
                if f.kind == Kind::Lines && !numeric {
                    return Err(format!("{what}, paper series {:?}: a lines figure needs numeric x", p.label));
                }
            }
        }
        Ok(reg)
    }

    pub fn benchmark(&self, name: &str) -> Option<&Benchmark> {
        self.benchmark.iter().find(|b| b.name == name)
    }

    /// The figures drawn from benchmark `name`.
    pub fn figures_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Figure> + 'a {
        self.figure.iter().filter(move |f| f.benchmark == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Machine;

    #[test]
    fn builtin_registry_parses_and_is_consistent() {
        let reg = Registry::builtin();
        assert!(!reg.benchmark.is_empty() && !reg.figure.is_empty());
        for f in &reg.figure {
            assert!(reg.benchmark(&f.benchmark).is_some());
        }
    }

    #[test]
    fn targets_and_selection() {
        assert_eq!(Target::parse(">= 1.0"), Ok(Target::AtLeast(1.0)));
        assert_eq!(Target::parse("<=0.5"), Ok(Target::AtMost(0.5)));
        assert!(Target::parse("about 1").is_err());
        assert!(Target::AtLeast(1.0).met_by(1.0) && !Target::AtMost(1.0).met_by(1.01));
        // Strict targets (bench ft-sort's "RMA / AA > 1"): the bound itself does not meet them.
        assert_eq!(Target::parse("> 1"), Ok(Target::Above(1.0)));
        assert_eq!(Target::parse("<0.5"), Ok(Target::Below(0.5)));
        assert!(Target::Above(1.0).met_by(1.01) && !Target::Above(1.0).met_by(1.0) && !Target::Below(0.5).met_by(0.5));

        let row = Row {
            benchmark: "dht".into(),
            case: "AA-Poll".into(),
            params: [("collisions".to_string(), serde_json::json!(5.0)), ("model".to_string(), serde_json::json!("raw"))]
                .into_iter()
                .collect(),
            value: 1.0,
            unit: "inserts/s".into(),
            reps: 1,
            min: 1.0,
            median: 1.0,
            max: 1.0,
            machine: Machine { cpu: "x".into(), cpus: 2, memcpy_gbs: 1.0 },
            commit: "c".into(),
            settings: Default::default(),
        };
        let sel: Select = toml::from_str("case = \"AA-Poll\"\nparams = { collisions = 5, model = \"raw\" }").unwrap();
        assert!(sel.matches(&row, "dht"));
        assert!(!sel.matches(&row, "counter"), "the figure's benchmark is the default");
        let other: Select = toml::from_str("params = { model = \"paper\" }").unwrap();
        assert!(!other.matches(&row, "dht"));
    }

    #[test]
    fn bad_registries_are_refused_with_the_reason() {
        let base = "[paper.aa]\ntitle = \"AA\"\ncitation = \"c\"\n[[benchmark]]\nname = \"dht\"\nabout = \"a\"\nargs = []\nquick_args = []\nminutes = 1.0\nquick_minutes = 0.1\nrows = 1\nquick_rows = 1\n";
        let fig = |extra: &str| {
            format!("{base}[[figure]]\nid = \"f\"\npaper = \"aa\"\nlabel = \"Fig. 1\"\ntitle = \"t\"\nbenchmark = \"dht\"\nkind = \"lines\"\nx = {{ param = \"size\", label = \"s\" }}\ny = {{ label = \"v\" }}\n[[figure.series]]\nlabel = \"ours\"\nselect = {{ case = \"a\" }}\n{extra}")
        };
        assert!(Registry::parse(&fig("")).is_ok());
        assert!(Registry::parse(&fig("[[figure.check]]\nlabel = \"r\"\nselect = {}\ntarget = \"~1\"\n")).unwrap_err().contains("target"));
        assert!(Registry::parse(&fig("[[figure.paper_series]]\nlabel = \"p\"\nsource = \"s\"\npoints = [[\"AA\", 1.0]]\n"))
            .unwrap_err()
            .contains("numeric x"));
        assert!(Registry::parse(&fig("").replace("benchmark = \"dht\"\nkind", "benchmark = \"nope\"\nkind"))
            .unwrap_err()
            .contains("unknown benchmark"));
    }
}
