//! Stacks of a job that hangs: a job killed at its time limit prints nothing of where it
//! stood, so shortly before the limit every rank still running is asked for its threads'
//! backtraces (gdb), and they go with the job's stderr into the failure report.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// When the dump is taken: before the 120 s limits the launchers and `timeout` apply.
pub const DUMP_AFTER: Duration = Duration::from_secs(110);

/// `cmd.output()`, but if the job still runs after `dump_after`, the stacks of its ranks
/// (processes below it running this test binary) are appended to its stderr.
pub fn output_with_stacks(cmd: &mut Command, dump_after: Duration) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the job starts");
    let root = child.id();
    let (finished, finished_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || match finished_rx.recv_timeout(dump_after) {
        Err(mpsc::RecvTimeoutError::Timeout) => Some(rank_stacks(root, dump_after)),
        _ => None,
    });
    let mut out = child.wait_with_output().expect("the job's output is read");
    drop(finished);
    if let Some(stacks) = watchdog.join().expect("the watchdog thread") {
        out.stderr.extend_from_slice(stacks.as_bytes());
    }
    out
}

fn rank_stacks(root: u32, after: Duration) -> String {
    let me = std::env::current_exe().ok();
    let ours = |pid: u32| {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        exe.as_deref().and_then(Path::file_name) == me.as_deref().and_then(Path::file_name)
    };
    let ranks: Vec<u32> = descendants(root).into_iter().filter(|&pid| ours(pid)).collect();
    let mut report = format!("\n--- still running after {} s: stacks of {} rank process(es) ---\n", after.as_secs(), ranks.len());
    for pid in ranks {
        let gdb = Command::new("timeout")
            .args(["-k", "2", "20", "gdb", "-p", &pid.to_string(), "-batch", "-nx", "-ex", "thread apply all bt"])
            .stdin(Stdio::null())
            .output();
        report.push_str(&format!("--- pid {pid} ---\n"));
        match gdb {
            Ok(out) => report.push_str(&String::from_utf8_lossy(&out.stdout)),
            Err(e) => report.push_str(&format!("(no stacks: gdb did not run: {e})\n")),
        }
    }
    report
}

/// Every process below `root`, by the parent links in /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The command name may hold spaces and parentheses: the fields start after the last ')'.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        if let Some(ppid) = after_name.split_whitespace().nth(1).and_then(|s| s.parse::<u32>().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            found.push(child);
            todo.push(child);
        }
    }
    found
}
