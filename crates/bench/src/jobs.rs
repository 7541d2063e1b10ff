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
    let code = launcher::run(RunArgs {
        n,
        label: false,
        timeout: Some(timeout_s),
        segment_size: None,
        progress: None,
        restart_from: None,
        respawn: 0,
        program,
    });
    for (k, v) in saved {
        match v {
            Some(v) => std::env::set_var(&k, v),
            None => std::env::remove_var(&k),
        }
    }
    Ok(code)
}

/// Where the jobs of benchmark `bench` leave their rows (rank 0 writes, this process reads).
pub fn rows_file(bench: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("activerma-bench-{bench}-{}.tsv", std::process::id()))
}
