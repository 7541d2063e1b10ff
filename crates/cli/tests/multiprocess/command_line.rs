//! The `activerma` command line: `run` in mpirun's form and with `--`, rank counts it refuses.

use crate::driver::{show, Tally, LAUNCHER};
use std::process::{Command, Output};

fn activerma(args: &[&str]) -> Output {
    Command::new(LAUNCHER).args(args).output().expect("activerma runs")
}

pub fn checks(t: &mut Tally) {
    run_forms(t);
    bad_rank_counts(t);
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
