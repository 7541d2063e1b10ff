//! The launcher: creates the job's shared memory (two memfds, so no file is ever left behind),
//! starts N rank processes that inherit it, forwards their output line by line, watches them,
//! and tears the job down as soon as one rank fails — saying which rank died and how.

mod channel;
mod forward;
mod merge;

use activerma_core::settings;
use activerma_transport::smp::{self, JobControl, JobFiles};
use forward::{Forwarder, Source, Stream};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
#[command(after_help = run_help())]
pub struct RunArgs {
    /// Number of ranks (a whole number, at least 1).
    // Negative numbers are taken as the value so that `-n -1` is refused as a rank count
    // rather than mistaken for an option.
    #[arg(short = 'n', long = "np", value_name = "N", allow_negative_numbers = true, value_parser = rank_count)]
    pub n: u32,
    /// Prefix every output line with the rank that printed it.
    #[arg(long)]
    pub label: bool,
    /// Stop the job after this many seconds (exit code 124).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Symmetric heap per rank (sets ACTIVERMA_SEGMENT_SIZE), e.g. 256M.
    #[arg(long)]
    pub segment_size: Option<String>,
    /// Progress mode of every rank (sets ACTIVERMA_PROGRESS): app, thread or wake.
    #[arg(long)]
    pub progress: Option<String>,
    /// Restart a job from the newest complete checkpoint in DIR (sets ACTIVERMA_RESTART_FROM:
    /// the program's checkpointer loads it when it restores; activerma-checkpoint).
    #[arg(long, value_name = "DIR")]
    pub restart_from: Option<std::path::PathBuf>,
    /// Replace a rank that dies (signal, abort, non-zero exit) by a new process with the same
    /// rank number, up to N times in the job; the others see it fail and wait for it
    /// (World::wait_for_rank, arma_wait_for_rank). Without it a rank's death ends the job.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub respawn: u32,
    /// The program and its arguments, passed on verbatim (`--` before them is optional).
    // trailing_var_arg: as with mpirun, everything after the program belongs to the program,
    // options included, so `run -n 2 ./prog --label` passes --label to ./prog.
    #[arg(required = true, trailing_var_arg = true, num_args = 1..)]
    pub program: Vec<String>,
}

/// What `run --help` says after the options: the two forms, how output is forwarded, exit codes.
fn run_help() -> String {
    let window = merge::WINDOW.as_millis();
    let piece = forward::MAX_PIECE / 1024;
    format!(
        "Forms:
  activerma run -n 4 ./prog args      as with mpirun: everything after PROGRAM is the program's,
  activerma run -n 4 -- ./prog args   options included (`--` before PROGRAM is optional)

Output: every rank's stdout and stderr pass through the launcher line by line, so lines of
different ranks never mix; stdout stays stdout, stderr stays stderr, bytes unchanged (--label
puts \"[r] \" before each line). A line unfinished after {window} ms (a prompt) or longer than
{piece} KiB goes out as it stands, and what a rank printed last is written when it ends, newline
or not. A stderr line that several ranks print alike within {window} ms is written once, with
the ranks it came from:
  [ranks 0-3] activerma: bad setting ACTIVERMA_PROGRESS=sometimes: expected one of app, ...
so stderr lines may wait up to {window} ms (a little more behind a rank's earlier lines); stdout
is never merged. When the launcher's stdout or stderr is a terminal, ranks write to a
pseudo-terminal, so they still see one (and C's stdio stays line-buffered). Rank 0 reads the
launcher's stdin; the other ranks read /dev/null.

Exit status: the first failing rank's (128+N if signal N killed it); 124 after --timeout;
128+N when the launcher gets signal N; 2 for a bad command line or a rank that cannot start."
    )
}

/// The rank count: a clap value parser, so a bad count is a usage error (exit 2) that says what
/// is accepted instead of clap's generic "invalid digit".
fn rank_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n >= 1 => u32::try_from(n).map_err(|_| format!("{n} ranks are more than this launcher can start")),
        Ok(_) => Err("the rank count must be at least 1".into()),
        Err(_) => Err("the rank count must be a whole number of ranks, at least 1".into()),
    }
}

static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("activerma run: {msg}");
    2
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (_, Some(s)) => {
            // SAFETY: strsignal returns a static string.
            let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(s)) }.to_string_lossy().into_owned();
            format!("was killed by signal {s} ({name})")
        }
        _ => "ended".into(),
    }
}

fn exit_info(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| -status.signal().unwrap_or(0))
}

/// Starts rank `rank`, with its stdout and stderr on channels to the launcher.
fn spawn_rank(args: &RunArgs, files: &JobFiles, rank: u32, incarnation: u32) -> std::io::Result<(Child, [Source; 2])> {
    let out = channel::for_stream(Stream::Stdout.fd())?;
    let err = channel::for_stream(Stream::Stderr.fd())?;
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..])
        .env(smp::ENV_RANK, rank.to_string())
        .env(smp::ENV_SIZE, args.n.to_string())
        .env(smp::ENV_CTRL_FD, files.ctrl.as_raw_fd().to_string())
        .env(smp::ENV_HEAP_FD, files.heaps.as_raw_fd().to_string())
        .env_remove(smp::ENV_INCARNATION)
        .stdin(if rank == 0 { Stdio::inherit() } else { Stdio::null() })
        .stdout(out.rank_end)
        .stderr(err.rank_end);
    if incarnation > 0 {
        cmd.env(smp::ENV_INCARNATION, incarnation.to_string());
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // A rank must not outlive its launcher, however the launcher ends.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() == 1 {
                libc::_exit(1); // the launcher died before prctl took effect
            }
            // Own process group: teardown reaches whatever the rank started too.
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    // `cmd` goes at return, and with it the launcher's copies of the rank ends: the rank then
    // holds the only ones, so its streams end when it does.
    let child = cmd.spawn()?;
    Ok((
        child,
        [Source { rank, stream: Stream::Stdout, fd: out.launcher_end }, Source { rank, stream: Stream::Stderr, fd: err.launcher_end }],
    ))
}

/// Stops every rank still running: SIGTERM, then SIGKILL after a grace period.
fn stop_all(children: &mut [Option<Child>], control: &JobControl) {
    for c in children.iter().flatten() {
        // SAFETY: signalling the process group of our own child.
        unsafe { libc::kill(-(c.id() as i32), libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        for (r, slot) in children.iter_mut().enumerate() {
            if let Some(c) = slot {
                if let Ok(Some(st)) = c.try_wait() {
                    control.set_exited(r, exit_info(st));
                    *slot = None;
                }
            }
        }
        if children.iter().all(Option::is_none) {
            return;
        }
        if Instant::now() >= deadline {
            for (r, slot) in children.iter_mut().enumerate() {
                if let Some(c) = slot.take() {
                    // SAFETY: as above.
                    unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                    let mut c = c;
                    let st = c.wait();
                    control.set_exited(r, st.map(exit_info).unwrap_or(-9));
                }
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn run(args: RunArgs) -> i32 {
    if let Some(s) = &args.segment_size {
        std::env::set_var(settings::SEGMENT_SIZE, s);
    }
    if let Some(p) = &args.progress {
        std::env::set_var(settings::PROGRESS, p);
    }
    if let Some(dir) = &args.restart_from {
        // Absolute, so that a rank that changes its directory still finds it.
        match std::fs::canonicalize(dir) {
            Ok(d) if d.is_dir() => std::env::set_var(settings::RESTART_FROM, d),
            _ => return fail(format!("--restart-from {}: not a directory (a checkpoint store)", dir.display())),
        }
    }
    // The job's settings, as its ranks will read them from the environment we pass on.
    let cfg = match activerma_core::Config::from_env() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let files = match (|| {
        let heap = cfg.heap_bytes()?;
        let mut params = JobFiles::params_from_config(&cfg, args.n, activerma::table_bytes(&cfg, heap)?)?;
        params.respawn = args.respawn > 0;
        JobFiles::create(params, true)
    })() {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let control = match files.control() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    install_signal_handlers();
    let verbose = cfg.get_bool(settings::VERBOSE).unwrap_or(false);

    let mut children: Vec<Option<Child>> = Vec::new();
    let mut sources = Vec::new();
    let mut start_error = None;
    for r in 0..args.n {
        match spawn_rank(&args, &files, r, 0) {
            Ok((c, streams)) => {
                control.set_pid(r as usize, c.id());
                children.push(Some(c));
                sources.extend(streams);
            }
            Err(e) => {
                start_error = Some(format!("cannot start rank {r} ({}): {e}", args.program[0]));
                break;
            }
        }
    }
    let output = match Forwarder::start(sources, args.n, args.label) {
        Ok(f) => f,
        Err(e) => {
            stop_all(&mut children, &control);
            return fail(format!("cannot forward the ranks' output: {e}"));
        }
    };
    if let Some(msg) = start_error {
        output.say(msg);
        stop_all(&mut children, &control);
        output.finish();
        return 2;
    }
    if verbose {
        output.say(format!("started {} ranks of {}", args.n, args.program[0]));
    }

    let started = Instant::now();
    let mut result = 0;
    let mut remaining = args.n as usize;
    let mut respawned = 0;
    while remaining > 0 {
        let mut progressed = false;
        for (r, slot) in children.iter_mut().enumerate() {
            let Some(c) = slot else { continue };
            match c.try_wait() {
                Ok(Some(st)) if !st.success() && result == 0 && respawned < args.respawn => {
                    respawned += 1;
                    progressed = true;
                    let incarnation = control.mark_failed(r, exit_info(st));
                    output.say(format!(
                        "rank {r} {}; starting its replacement (incarnation {incarnation}, respawn {respawned} of {})",
                        describe(st),
                        args.respawn
                    ));
                    match spawn_rank(&args, &files, r as u32, incarnation) {
                        Ok((c, streams)) => {
                            control.set_pid(r, c.id());
                            *slot = Some(c);
                            output.add(streams.into());
                        }
                        Err(e) => {
                            output.say(format!("cannot start rank {r}'s replacement: {e}; stopping the other ranks"));
                            *slot = None;
                            remaining -= 1;
                            result = 2;
                        }
                    }
                }
                Ok(Some(st)) => {
                    control.set_exited(r, exit_info(st));
                    *slot = None;
                    remaining -= 1;
                    progressed = true;
                    if !st.success() && result == 0 {
                        output.say(format!("rank {r} {}; stopping the other ranks", describe(st)));
                        result = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
                        if result == 0 {
                            result = 1;
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    output.say(format!("cannot wait for rank {r}: {e}"));
                    result = 1;
                }
            }
        }
        if result != 0 {
            stop_all(&mut children, &control);
            break;
        }
        let sig = SIGNALLED.load(Ordering::SeqCst);
        if sig != 0 {
            output.say(format!("received signal {sig}; stopping the job"));
            stop_all(&mut children, &control);
            result = 128 + sig;
            break;
        }
        if let Some(t) = args.timeout {
            if started.elapsed().as_secs_f64() > t {
                output.say(format!("the job ran past --timeout {t} s; stopping it"));
                stop_all(&mut children, &control);
                result = 124;
                break;
            }
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    output.finish();
    result
}
