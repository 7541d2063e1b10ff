//! Benchmarks whose configurations differ in settings read at init (the registration
//! strategy, the modelled network, the IOTLB) run one job of this binary per configuration.

use super::BResult;
use activerma_launcher::{self as launcher, RunArgs};

/// Runs this binary with `args` as an `n`-rank job through the launcher, with `env` set for
/// the job (the ranks inherit it) and restored afterwards; returns the job's exit code.
/// Call it while this process is single-threaded (it changes the environment).
pub fn run_with_env(n: u32, args: &[&str], env: &[(String, String)], timeout_s: f64) -> BResult<i32> {
    let exe = std::env::current_exe()?;
    let mut program = vec![exe.to_string_lossy().into_owned()];
    program.extend(args.iter().map(|a| a.to_string()));
    let saved: Vec<(String, Option<String>)> = env.iter().map(|(k, _)| (k.clone(), std::env::var(k).ok())).collect();
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    let code = match std::env::var(LAUNCH_ENV).ok().filter(|v| !v.trim().is_empty()) {
        Some(prefix) => run_under(&prefix.replace("{n}", &n.to_string()), &program, timeout_s),
        None => Ok(launcher::run(RunArgs {
            n,
            label: false,
            timeout: Some(timeout_s),
            segment_size: None,
            progress: None,
            restart_from: None,
            respawn: 0,
            program,
        })),
    };
    for (k, v) in saved {
        match v {
            Some(v) => std::env::set_var(&k, v),
            None => std::env::remove_var(&k),
        }
    }
    code
}

/// A command that starts the jobs in place of `activerma run` (split at white space; the
/// program and its arguments follow it; `{n}` in it becomes the job's rank count), e.g.
/// `bash scripts/emulated-hosts.sh mpirun openmpi -n {n} --` for jobs across emulated hosts
/// with a binary built for that MPI. It decides where the ranks run and how many start (a
/// job's workers check their count).
pub const LAUNCH_ENV: &str = "ACTIVERMA_BENCH_LAUNCH";

/// Runs `program` under the launch command `prefix`; kills it after `timeout_s`.
fn run_under(prefix: &str, program: &[String], timeout_s: f64) -> BResult<i32> {
    let words: Vec<&str> = prefix.split_whitespace().collect();
    let mut child = std::process::Command::new(words[0])
        .args(&words[1..])
        .args(program)
        .spawn()
        .map_err(|e| format!("{LAUNCH_ENV}={prefix}: cannot start {}: {e}", words[0]))?;
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.code().unwrap_or(128));
        }
        if started.elapsed().as_secs_f64() > timeout_s {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{LAUNCH_ENV}={prefix}: the job ran past {timeout_s} s and was killed").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Where the jobs of benchmark `bench` leave their rows (rank 0 writes, this process reads).
pub fn rows_file(bench: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("activerma-bench-{bench}-{}.tsv", std::process::id()))
}
