//! How the launcher forwards rank output: whole lines whatever the ranks do at once, nothing
//! lost at the end, bytes unchanged, a stderr line every rank prints shown once, and ranks that
//! still see a terminal when the launcher writes to one.

use crate::cases::output::{binary_bytes, long_line_fill, LONG_LINES, LONG_LINE_LEN};
use crate::driver::{launch, show, Job, Tally, LAUNCHER};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

pub fn checks(t: &mut Tally) {
    lines_stay_whole(t);
    same_stderr_line_shown_once(t);
    last_words_kept(t);
    binary_unchanged(t);
    terminal_stays_a_terminal(t);
}

/// Why `line` is not one whole line of the `long_lines` case, if it is not; else its rank and
/// line number.
fn parse_long_line(line: &str) -> Result<(usize, usize), String> {
    let short = || line.chars().take(120).collect::<String>();
    let mut words = line.splitn(5, ' ');
    let (Some("rank"), Some(r), Some("line"), Some(i)) = (words.next(), words.next(), words.next(), words.next()) else {
        return Err(format!("not a line of the case: {}", short()));
    };
    let (Ok(r), Ok(i)) = (r.parse::<usize>(), i.parse::<usize>()) else { return Err(format!("bad rank or line number: {}", short())) };
    let fill = long_line_fill(r) as char;
    let body = words.next().unwrap_or("");
    if line.len() != LONG_LINE_LEN || body.chars().any(|c| c != fill) {
        return Err(format!("rank {r} line {i} is {} bytes, or holds another rank's text: {}…", line.len(), short()));
    }
    Ok((r, i))
}

fn lines_stay_whole(t: &mut Tally) {
    let ranks = 4;
    let (out, _) = launch(&Job { case: "long_lines", ranks, env: vec![] }, &[]);
    let so = String::from_utf8_lossy(&out.stdout);
    let mut next = vec![0; ranks as usize];
    let mut problem = None;
    for line in so.lines() {
        match parse_long_line(line) {
            Ok((r, i)) if r < next.len() && next[r] == i => next[r] += 1,
            Ok((r, i)) => problem = problem.or(Some(format!("rank {r} line {i} out of order"))),
            Err(e) => problem = problem.or(Some(e)),
        }
    }
    t.check(
        format!("{ranks} ranks writing {LONG_LINES} lines of {LONG_LINE_LEN} B in pieces at once: every line arrives whole, in order"),
        out.status.success() && problem.is_none() && next.iter().all(|&n| n == LONG_LINES),
        || {
            format!(
                "{}\n  lines per rank: {next:?}\n  status: {}\n  stderr:\n{}",
                problem.unwrap_or_default(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        },
    );
}

fn same_stderr_line_shown_once(t: &mut Tally) {
    let (out, _) = launch(&Job { case: "same_stderr", ranks: 4, env: vec![] }, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let at = |text: &str| lines.iter().position(|l| *l == text);
    let count = |text: &str| lines.iter().filter(|l| **l == text).count();
    let first = "[ranks 0-3] activerma test: every rank says this";
    let last = "[ranks 0-3] activerma test: every rank ends with this";
    let own_in_order = (0..4).all(|r| {
        let own = format!("activerma test: rank {r} alone says this");
        count(&own) == 1 && at(first) < at(&own) && at(&own) < at(last)
    });
    let stdout_each = String::from_utf8_lossy(&out.stdout).lines().filter(|l| *l == "stdout every rank prints").count();
    t.check(
        "a stderr line every rank prints appears once with its ranks; other lines and stdout are not merged".into(),
        out.status.success() && count(first) == 1 && count(last) == 1 && own_in_order && stdout_each == 4,
        || show(&out),
    );
}

fn last_words_kept(t: &mut Tally) {
    let (out, _) = launch(&Job { case: "no_final_newline", ranks: 3, env: vec![] }, &[]);
    let so = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let errs: Vec<&str> = err.lines().collect();
    let whole = (0..3).all(|r| {
        so.lines().any(|l| l == format!("last words of rank {r}")) && errs.iter().any(|l| *l == format!("last stderr words of rank {r}"))
    });
    let words_then_report = errs.iter().position(|l| *l == "last stderr words of rank 1")
        < errs.iter().position(|l| l.starts_with("activerma run: rank 1 was killed by signal 6"));
    t.check(
        "output without a final newline is kept, on lines of its own, and a crashing rank's comes before its report".into(),
        out.status.code() == Some(128 + 6) && whole && words_then_report,
        || show(&out),
    );
}

fn binary_unchanged(t: &mut Tally) {
    let (out, _) = launch(&Job { case: "binary_out", ranks: 1, env: vec![] }, &[]);
    t.check("binary output passes through unchanged".into(), out.status.success() && out.stdout == binary_bytes(), || show(&out));
}

/// The launcher's stdout on a raw pseudo-terminal: the ranks see a terminal too (so C's stdio
/// line-buffers), and CR passes unchanged.
fn terminal_stays_a_terminal(t: &mut Tally) {
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty writes two descriptors; name, settings and size may be null.
    let rc = unsafe { libc::openpty(&mut leader, &mut follower, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: fresh descriptors, ours alone; termios is filled by tcgetattr before use.
    let (leader, follower) = unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        libc::tcgetattr(follower, &mut tio);
        libc::cfmakeraw(&mut tio);
        libc::tcsetattr(follower, libc::TCSANOW, &tio);
        (std::fs::File::from(OwnedFd::from_raw_fd(leader)), OwnedFd::from_raw_fd(follower))
    };
    let me = std::env::current_exe().unwrap();
    let mut launcher = Command::new(LAUNCHER)
        .args(["run", "-n", "2", "--timeout", "60"])
        .arg(&me)
        .arg("terminal_out")
        .stdin(Stdio::null())
        .stdout(Stdio::from(follower))
        .stderr(Stdio::piped())
        .spawn()
        .expect("launcher runs");
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        // The read ends with EIO once the launcher, the last holder of the terminal, exits.
        let _ = (&leader).read_to_end(&mut got);
        got
    });
    let status = launcher.wait().unwrap();
    let got = reader.join().unwrap();
    let mut err = String::new();
    let _ = launcher.stderr.take().unwrap().read_to_string(&mut err);
    let line = b"stdout is a terminal: true\rraw\n";
    let both = got.len() == 2 * line.len() && got.chunks(line.len()).all(|c| c == line);
    t.check("on a terminal, ranks write to a terminal too, bytes unchanged".into(), status.success() && both, || {
        format!("  status: {status}\n  terminal got: {:?}\n  stderr:\n{err}", String::from_utf8_lossy(&got))
    });
}
