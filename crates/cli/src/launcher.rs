//! The launcher: creates the job's shared memory (two memfds, so no file is ever left behind),
//! starts N rank processes that inherit it, labels their output, watches them, and tears the
//! job down as soon as one rank fails — saying which rank died and how.

use activerma_core::settings;
use activerma_transport::smp::{self, JobControl, JobFiles};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "np")]
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
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub program: Vec<String>,
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

fn spawn_rank(args: &RunArgs, files: &JobFiles, rank: u32) -> std::io::Result<Child> {
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..])
        .env(smp::ENV_RANK, rank.to_string())
        .env(smp::ENV_SIZE, args.n.to_string())
        .env(smp::ENV_CTRL_FD, files.ctrl.as_raw_fd().to_string())
        .env(smp::ENV_HEAP_FD, files.heaps.as_raw_fd().to_string())
        .stdin(if rank == 0 { Stdio::inherit() } else { Stdio::null() });
    if args.label {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
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
    cmd.spawn()
}

fn forward_labelled(rank: u32, stream: impl std::io::Read + Send + 'static, to_stderr: bool) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).split(b'\n').map_while(Result::ok) {
            let text = String::from_utf8_lossy(&line);
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "[{rank}] {text}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "[{rank}] {text}");
            }
        }
    })
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
    if args.n == 0 {
        return fail("-n must be at least 1");
    }
    if let Some(s) = &args.segment_size {
        std::env::set_var(settings::SEGMENT_SIZE, s);
    }
    if let Some(p) = &args.progress {
        std::env::set_var(settings::PROGRESS, p);
    }
    if let Err(e) = settings::validate_all() {
        return fail(e);
    }
    let files = match (|| {
        let heap = activerma_core::page::page_ceil(settings::get_u64(settings::SEGMENT_SIZE)? as usize);
        let params = JobFiles::params_from_settings(args.n, activerma::table_bytes(heap)?)?;
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
    let verbose = settings::get_bool(settings::VERBOSE).unwrap_or(false);

    let mut children: Vec<Option<Child>> = Vec::new();
    let mut forwarders = Vec::new();
    for r in 0..args.n {
        match spawn_rank(&args, &files, r) {
            Ok(mut c) => {
                control.set_pid(r as usize, c.id());
                if args.label {
                    forwarders.push(forward_labelled(r, c.stdout.take().unwrap(), false));
                    forwarders.push(forward_labelled(r, c.stderr.take().unwrap(), true));
                }
                children.push(Some(c));
            }
            Err(e) => {
                let code = fail(format!("cannot start rank {r} ({}): {e}", args.program[0]));
                stop_all(&mut children, &control);
                return code;
            }
        }
    }
    if verbose {
        eprintln!("activerma run: started {} ranks of {}", args.n, args.program[0]);
    }

    let started = Instant::now();
    let mut result = 0;
    let mut remaining = args.n as usize;
    while remaining > 0 {
        let mut progressed = false;
        for (r, slot) in children.iter_mut().enumerate() {
            let Some(c) = slot else { continue };
            match c.try_wait() {
                Ok(Some(st)) => {
                    control.set_exited(r, exit_info(st));
                    *slot = None;
                    remaining -= 1;
                    progressed = true;
                    if !st.success() && result == 0 {
                        eprintln!("activerma run: rank {r} {}; stopping the other ranks", describe(st));
                        result = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
                        if result == 0 {
                            result = 1;
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    eprintln!("activerma run: cannot wait for rank {r}: {e}");
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
            eprintln!("activerma run: received signal {sig}; stopping the job");
            stop_all(&mut children, &control);
            result = 128 + sig;
            break;
        }
        if let Some(t) = args.timeout {
            if started.elapsed().as_secs_f64() > t {
                eprintln!("activerma run: the job ran past --timeout {t} s; stopping it");
                stop_all(&mut children, &control);
                result = 124;
                break;
            }
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for f in forwarders {
        let _ = f.join();
    }
    result
}
