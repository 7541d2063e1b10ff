//! `activerma report`: runs every benchmark the figure registry lists (or those `--only`
//! names), each as a child `activerma bench … --json`, and collects their rows, logs and run
//! facts into one folder, which `activerma_report::render` turns into plots and pages.
//!
//! ```text
//! plan   = registry benchmarks ∩ --only; say the expected minutes up front
//! for b in plan:
//!     quiet = machine_check()            # load average, other busy processes: warn, record
//!     run `activerma bench <b.args> --json raw/<b>.jsonl` > logs/<b>.txt
//!         bar: rows written / rows expected; time left = rest of the plan's expected minutes,
//!              scaled by how far the finished benchmarks ran over or under theirs
//!     rows.jsonl += raw/<b>.jsonl (then removed); run.json += { seconds, exit code, rows, load,
//!     busy, quiet }
//! render(folder)
//! ```
//!
//! Why child processes: every benchmark already starts its own jobs through the launcher and
//! owns the process while it does (environment, CPU binding); a child per benchmark keeps one
//! benchmark's failure (or crash) from ending the report, and its output from the terminal.

use super::machine;
use activerma_report::{read_rows, BenchmarkRun, Registry, RunInfo};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Fewer sizes, repetitions and operations: the whole report in about 3 minutes.
    #[arg(long)]
    pub quick: bool,
    /// Only these benchmarks or figures (names from --list), comma separated.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub only: Vec<String>,
    /// The report folder (default: report/<date>-<commit>/ under the current directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// List the benchmarks and the figures they stand for, with their expected durations.
    #[arg(long)]
    pub list: bool,
    /// Compare two report folders: every figure's change, flagged where it moved more than its
    /// own run-to-run noise.
    #[arg(long, num_args = 2, value_names = ["OLD_DIR", "NEW_DIR"], conflicts_with_all = ["quick", "only", "out", "list", "redraw"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Draw the plots and pages of an existing report folder again (no benchmark runs).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["quick", "only", "out", "list"])]
    pub redraw: Option<PathBuf>,
}

pub fn main(args: ReportArgs) -> i32 {
    let reg = Registry::builtin();
    let result = if args.list {
        list(&reg);
        Ok(())
    } else if let Some(dirs) = &args.compare {
        activerma_report::compare(&dirs[0], &dirs[1], &reg).map(|text| print!("{text}"))
    } else if let Some(dir) = &args.redraw {
        draw(dir, &reg)
    } else {
        run(&args, &reg)
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("activerma report: {e}");
            1
        }
    }
}

fn list(reg: &Registry) {
    println!("{:<18} {:>8} {:>8}  figures", "benchmark", "full", "--quick");
    for b in &reg.benchmark {
        let figs: Vec<&str> = reg.figures_of(&b.name).map(|f| f.id.as_str()).collect();
        println!("{:<18} {:>6.1} m {:>6.1} m  {}", b.name, b.minutes, b.quick_minutes, figs.join(", "));
    }
    let (full, quick): (f64, f64) =
        reg.benchmark.iter().map(|b| (b.minutes, b.quick_minutes)).fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!("all: about {full:.0} minutes; --quick: about {quick:.1} minutes (expected on a 2-core machine)");
}

/// The benchmarks to run: all, or those `only` names directly or through one of their figures.
fn plan<'r>(reg: &'r Registry, only: &[String]) -> Result<Vec<&'r activerma_report::Benchmark>, String> {
    if only.is_empty() {
        return Ok(reg.benchmark.iter().collect());
    }
    let mut names = Vec::new();
    for want in only {
        let name = match (reg.benchmark(want), reg.figure.iter().find(|f| f.id == *want)) {
            (Some(b), _) => b.name.as_str(),
            (None, Some(f)) => f.benchmark.as_str(),
            (None, None) => {
                let known: Vec<&str> = reg.benchmark.iter().map(|b| b.name.as_str()).collect();
                return Err(format!(
                    "--only {want}: no such benchmark or figure (benchmarks: {}; figures: activerma report --list)",
                    known.join(", ")
                ));
            }
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(reg.benchmark.iter().filter(|b| names.contains(&b.name.as_str())).collect())
}

fn commit() -> &'static str {
    env!("ACTIVERMA_COMMIT")
}

/// report/<UTC date>-<commit>, with the time added if that folder is taken.
fn default_folder() -> PathBuf {
    let now = utc_now();
    let base = PathBuf::from("report").join(format!("{}-{}", &now[..10], commit()));
    if !base.exists() {
        return base;
    }
    PathBuf::from("report").join(format!("{}-{}-{}", &now[..10], now[11..19].replace(':', ""), commit()))
}

/// The current UTC time as RFC 3339 (seconds), from the system clock.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: gmtime_r writes the broken-down time into our struct only.
    unsafe { libc::gmtime_r(&secs, &mut tm) };
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
}

fn run(args: &ReportArgs, reg: &Registry) -> Result<(), String> {
    let benches = plan(reg, &args.only)?;
    let dir = args.out.clone().unwrap_or_else(default_folder);
    for sub in ["logs", "raw"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| format!("cannot create {}: {e}", dir.join(sub).display()))?;
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own binary: {e}"))?;
    let expected = |b: &activerma_report::Benchmark| if args.quick { b.quick_minutes } else { b.minutes } * 60.0;
    let total: f64 = benches.iter().map(|b| expected(b)).sum();
    let names: Vec<&str> = benches.iter().map(|b| b.name.as_str()).collect();
    println!(
        "activerma report{}: {} benchmarks ({}), about {} on a 2-core machine",
        if args.quick { " --quick" } else { "" },
        benches.len(),
        names.join(", "),
        minutes(total)
    );
    println!("{}", machine::header_line());
    println!("writing to {}", dir.display());

    let mut info = RunInfo {
        started: utc_now(),
        commit: commit().to_string(),
        quick: args.quick,
        only: args.only.clone(),
        machine: machine::current(),
        benchmarks: Vec::new(),
    };
    let all_rows = dir.join("rows.jsonl");
    std::fs::write(&all_rows, "").map_err(|e| format!("cannot write {}: {e}", all_rows.display()))?;

    let bars = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4));
    let overall = bars.add(ProgressBar::new(benches.len() as u64));
    overall
        .set_style(ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} benchmarks, {msg}").unwrap().progress_chars("=> "));
    overall.set_prefix("report");
    let (mut spent, mut planned_done) = (0.0f64, 0.0f64);
    let mut failed = Vec::new();
    for (i, b) in benches.iter().enumerate() {
        // Time left: what remains of the plan, scaled by how the finished part ran against it.
        let left: f64 = benches[i..].iter().map(|b| expected(b)).sum::<f64>() * if planned_done > 0.0 { spent / planned_done } else { 1.0 };
        overall.set_message(format!("about {} left", minutes(left)));
        let quiet = super::quiet::check();
        if let Some(w) = &quiet.warning {
            bars.suspend(|| eprintln!("activerma report: {}: {w} (recorded in the report)", b.name));
        }
        let bench_args = if args.quick { &b.quick_args } else { &b.args };
        let raw = dir.join("raw").join(format!("{}.jsonl", b.name));
        let log = PathBuf::from("logs").join(format!("{}.txt", b.name));
        let bar = bars.insert_before(&overall, ProgressBar::new(if args.quick { b.quick_rows } else { b.rows } as u64));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} rows, {elapsed} of ~{msg}").unwrap().progress_chars("=> "),
        );
        bar.set_prefix(b.name.clone());
        bar.set_message(minutes(expected(b)));
        if bars.is_hidden() {
            println!("[{}/{}] {} (about {}) ...", i + 1, benches.len(), b.name, minutes(expected(b)));
        }
        let started = Instant::now();
        let exit_code = run_one(&exe, b.script.as_deref(), bench_args, &raw, &dir.join(&log), &bar)?;
        let seconds = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let rows = if raw.exists() { read_rows(&raw)? } else { Vec::new() };
        append(&all_rows, &raw)?;
        // Its rows are in rows.jsonl now: the folder keeps one copy.
        let _ = std::fs::remove_file(&raw);
        if exit_code != 0 {
            failed.push(format!("{} (exit code {exit_code}, see {})", b.name, dir.join(&log).display()));
        }
        let line = format!("{} done in {}: {} rows, exit code {exit_code}", b.name, minutes(seconds), rows.len());
        bars.suspend(|| println!("{line}"));
        info.benchmarks.push(BenchmarkRun {
            name: b.name.clone(),
            args: bench_args.clone(),
            seconds: (seconds * 10.0).round() / 10.0,
            exit_code,
            rows: rows.len() as u32,
            loadavg_before: quiet.loadavg,
            busy: quiet.busy,
            quiet: quiet.warning.is_none(),
            warning: quiet.warning,
            log: log.to_string_lossy().into_owned(),
        });
        info.write(&dir)?;
        spent += seconds;
        planned_done += expected(b);
        overall.inc(1);
    }
    overall.finish_and_clear();
    let _ = std::fs::remove_dir(dir.join("raw"));
    draw(&dir, reg)?;
    if !failed.is_empty() {
        return Err(format!("benchmarks that failed (their figures show what they wrote): {}", failed.join("; ")));
    }
    Ok(())
}

/// The source tree this binary was built from (where registered scripts live).
fn source_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs one benchmark as a child, its output into `log`, while the bar counts the rows it
/// writes: `activerma bench ARGS`, or a registered script of the source tree.
fn run_one(exe: &Path, script: Option<&str>, bench_args: &[String], raw: &Path, log: &Path, bar: &ProgressBar) -> Result<i32, String> {
    use std::io::Write;
    let mut out = std::fs::File::create(log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = match script {
        None => {
            let mut c = Command::new(exe);
            c.arg("bench");
            c
        }
        Some(path) => {
            let file = source_root().join(path);
            if !file.is_file() {
                // An installed binary far from its sources: say so in the log; the page shows it.
                let _ = writeln!(out, "activerma report: {path} is not at {}: this benchmark runs from a source checkout", file.display());
                return Ok(127);
            }
            let mut c = Command::new("bash");
            c.arg(file).env("ACTIVERMA_BIN", exe);
            c
        }
    };
    let mut child = cmd
        .args(bench_args)
        .arg("--json")
        .arg(raw)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(status.code().unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)));
        }
        if let Ok(text) = std::fs::read_to_string(raw) {
            bar.set_position(text.lines().count() as u64);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn append(all: &Path, raw: &Path) -> Result<(), String> {
    use std::io::Write;
    let Ok(text) = std::fs::read_to_string(raw) else { return Ok(()) };
    let mut f = std::fs::OpenOptions::new().append(true).open(all).map_err(|e| format!("cannot write {}: {e}", all.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", all.display()))
}

fn draw(dir: &Path, reg: &Registry) -> Result<(), String> {
    let drawn = activerma_report::render(dir, reg)?;
    for w in &drawn.warnings {
        eprintln!("activerma report: {w}");
    }
    println!("report: {} (open it in a browser); summary: {}", dir.join("index.html").display(), dir.join("summary.md").display());
    Ok(())
}

fn minutes(secs: f64) -> String {
    if secs < 90.0 {
        format!("{:.0} s", secs)
    } else {
        format!("{:.1} min", secs / 60.0)
    }
}
