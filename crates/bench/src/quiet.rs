//! Is the machine quiet enough to measure? Benchmarks report ratios measured side by side, which
//! survive a steady background load, but a process that burns a CPU while one variant runs and
//! stops before the next skews them. So before each benchmark the report samples every
//! process's CPU time for half a second and names the busy ones; it warns and records, it does
//! not refuse (a busy CI machine still gets its report, with the warning beside the figures).
//!
//! The load average is recorded too but not judged: the benchmark before this one leaves it
//! high for a minute (it is a decaying average), so it would warn about ourselves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A process using more than this share of one CPU during the sample is busy.
const BUSY_SHARE: f64 = 0.25;
const SAMPLE: Duration = Duration::from_millis(500);

pub struct Quiet {
    /// /proc/loadavg's three averages.
    pub loadavg: String,
    /// "name (pid): 97 % CPU" for every other busy process.
    pub busy: Vec<String>,
    /// Why the machine does not look quiet (None: it does).
    pub warning: Option<String>,
}

pub fn check() -> Quiet {
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    let before = cpu_ticks();
    let t = Instant::now();
    std::thread::sleep(SAMPLE);
    let after = cpu_ticks();
    let secs = t.elapsed().as_secs_f64();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let me = std::process::id();
    let mut busy: Vec<(f64, String)> = after
        .iter()
        .filter(|(pid, _)| **pid != me)
        .filter_map(|(pid, (name, ticks))| {
            let share = (ticks.saturating_sub(before.get(pid).map_or(*ticks, |b| b.1))) as f64 / hz / secs;
            (share > BUSY_SHARE).then(|| (share, format!("{name} ({pid}): {:.0} % CPU", share * 100.0)))
        })
        .collect();
    busy.sort_by(|a, b| b.0.total_cmp(&a.0));
    let busy: Vec<String> = busy.into_iter().map(|(_, s)| s).collect();
    let warning = (!busy.is_empty()).then(|| format!("the machine is not quiet: {}", busy.join(", ")));
    Quiet { loadavg, busy, warning }
}

/// Every process's name and user + system CPU ticks so far.
fn cpu_ticks() -> HashMap<u32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: split at the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // After the comm: state is field 3 of stat(5); utime and stime are fields 14 and 15.
        let (Some(u), Some(s)) = (fields.get(11).and_then(|v| v.parse::<u64>().ok()), fields.get(12).and_then(|v| v.parse::<u64>().ok()))
        else {
            continue;
        };
        out.insert(pid, (stat[open + 1..close].to_string(), u + s));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_process_is_named() {
        let mut spinner = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let q = check();
        spinner.kill().unwrap();
        let _ = spinner.wait();
        let pid = spinner.id().to_string();
        assert!(q.busy.iter().any(|b| b.contains(&pid)), "{:?}", q.busy);
        assert!(q.warning.unwrap().contains("not quiet"));
        assert_eq!(q.loadavg.split_whitespace().count(), 3);
    }
}
