//! The `activerma` command line: `run` in mpirun's form and with `--`, rank counts it refuses,
//! and `info` for people (100 columns) and for tools (JSON).

use crate::driver::{show, Tally, LAUNCHER};
use activerma_core::settings::TABLE;
use std::process::{Command, Output};

fn activerma(args: &[&str]) -> Output {
    Command::new(LAUNCHER).args(args).output().expect("activerma runs")
}

pub fn checks(t: &mut Tally) {
    run_forms(t);
    bad_rank_counts(t);
    info_fits(t);
    info_json(t);
}

fn run_forms(t: &mut Tally) {
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    // As with mpirun: the program is the first operand, and what follows it is its own,
    // launcher options included.
    let passed = ["--flag", "-x", "--", "y", "--label", "-n", "3"];
    let out = activerma(&[&["run", "-n", "2", "--timeout", "60", me, "echo_args"], &passed[..]].concat());
    let so = String::from_utf8_lossy(&out.stdout);
    t.check(
        "run -n 2 PROGRAM ARGS (no --): arguments that look like options reach the program".into(),
        out.status.success() && (0..2).all(|r| so.lines().any(|l| l == format!("rank {r} args {passed:?}"))),
        || show(&out),
    );
    let out = activerma(&["run", "-n", "2", "--", me, "echo_args", "--", "z"]);
    let so = String::from_utf8_lossy(&out.stdout);
    t.check(
        "run -n 2 -- PROGRAM ARGS still works".into(),
        out.status.success() && (0..2).all(|r| so.lines().any(|l| l == format!("rank {r} args {:?}", ["--", "z"]))),
        || show(&out),
    );
}

fn bad_rank_counts(t: &mut Tally) {
    for n in ["-1", "0", "abc"] {
        let out = activerma(&["run", "-n", n, "true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        t.check(
            format!("run -n {n} is refused as a rank count (exit 2)"),
            out.status.code() == Some(2) && err.contains("rank count must be") && !err.contains("tip:"),
            || show(&out),
        );
    }
}

fn info_fits(t: &mut Tally) {
    let out = activerma(&["info"]);
    let so = String::from_utf8_lossy(&out.stdout);
    let wide: Vec<&str> = so.lines().filter(|l| l.chars().count() > 100).collect();
    let missing: Vec<&str> = TABLE.iter().map(|s| s.name).filter(|n| !so.contains(n)).collect();
    t.check("info fits 100 columns and lists every setting".into(), out.status.success() && wide.is_empty() && missing.is_empty(), || {
        format!("lines over 100 columns: {wide:#?}\nmissing settings: {missing:?}\n{}", show(&out))
    });
}

fn info_json(t: &mut Tally) {
    let out = activerma(&["info", "--json"]);
    let doc: Result<serde_json::Value, _> = serde_json::from_slice(&out.stdout);
    let problems: Vec<String> = match &doc {
        Err(e) => vec![format!("not JSON: {e}")],
        Ok(doc) => {
            let settings = doc["settings"].as_array().cloned().unwrap_or_default();
            let mut p: Vec<String> = TABLE
                .iter()
                .filter_map(|s| {
                    let Some(j) = settings.iter().find(|j| j["name"] == s.name) else { return Some(format!("{} missing", s.name)) };
                    let fields_ok = j["default"] == s.default
                        && j["description"] == s.description
                        && j["type"] == s.kind.name()
                        && j["group"].is_string()
                        && j["value"].is_string();
                    (!fields_ok).then(|| format!("{} has wrong fields: {j}", s.name))
                })
                .collect();
            if settings.len() != TABLE.len() {
                p.push(format!("{} settings, the table has {}", settings.len(), TABLE.len()));
            }
            for fact in ["version", "conduit", "page_size", "memlock_limit", "progress", "registration", "network", "protocols"] {
                if doc.get(fact).is_none() {
                    p.push(format!("no {fact}"));
                }
            }
            p
        }
    };
    t.check(
        "info --json is one JSON document with every setting and the facts info prints".into(),
        out.status.success() && problems.is_empty(),
        || format!("{problems:#?}\n{}", show(&out)),
    );
}
