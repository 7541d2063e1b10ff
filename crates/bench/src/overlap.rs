//! `activerma bench armci-overlap`: the ARMCI paper's Figure 7, the share of a non-blocking
//! get's time that computation can hide, by transfer protocol (zero-copy, buffered, pipelined),
//! for contiguous gets (7a: `World::get_nb_by`, what ARMCI_NbGet calls) and 2-D patches (7b:
//! `World::get_strided_nb_by`, what ARMCI_NbGetS calls; rows of 1 KiB, every other row of
//! rank 1's matrix, into a contiguous buffer).
//!
//! ```text
//! comm  = median time of a blocking get by the protocol (started and waited at once)
//! total = median time of { start the get; compute for `comm` without calling the runtime; wait }
//! overlap = (comm + comm - total) / comm, in [0, 1]      (1: the transfer hid entirely)
//! issue = median time the non-blocking call took to return (in total; never hidden)
//! ```
//!
//! Two 2-rank jobs (the network model is read at init): the raw conduit, where a zero-copy get
//! is a copy by the origin's own CPU at issue (nothing left to overlap: the CPU *is* the
//! engine) while a buffered one leaves the copies to rank 1, and the modelled network at the
//! paper's InfiniBand numbers (7 us, 730 MB/s: its Table 1 and Figure 3), where a zero-copy
//! get is on the wire after issue like an RDMA read and a buffered one still copies its answer
//! in the wait. Rank 1 sits in its progress loop.
//!
//! Shape "vec" is the 2-D patch's rows as a vector (`World::get_vector_nb`, what ARMCI_NbGetV
//! calls), zero-copy only and not judged (the paper has no such figure), in every job that runs
//! 2-D gets.
//!
//! Each network runs a second job with ACTIVERMA_NONCONTIG=target-assisted, for 2-D zero-copy
//! gets only (row "target-assisted"): the paper's host-assisted design, where the target's
//! helper (here rank 1's progress loop) moves the rows into the origin's buffer by
//! scatter/gather calls while the origin computes, instead of the origin's CPU copying them at
//! issue. A third job runs the run's default with ACTIVERMA_PROGRESS=wake (row
//! "zero-copy-wake"): a progress engine of their own makes the ranks' non-blocking 2-D gets
//! target-assisted from ACTIVERMA_NB_TARGET_FROM bytes on, smaller ones stay the origin's
//! copies — what a program that asks for a progress thread gets, and what ARMCI programs get
//! by default wherever ARMCI_Init can start its data server (the same wake thread). A fourth
//! job runs with ACTIVERMA_COPY_ENGINE=on (rows "zero-copy-engine", 1-D and 2-D): no data
//! server, and the origin's copy engine copies its gets from ACTIVERMA_NB_TARGET_FROM bytes on
//! while it computes — what a program without a data server (MPI_THREAD_FUNNELED, SERIALIZED) gets
//! where its node has a CPU to spare. Rank 1 sleeps in that job instead of serving (it has
//! nothing to serve): its CPU is the spare one.

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma::{Noncontig, RemotePtr, StridedPattern, Transfer};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

const NET_ENV: &str = "ACTIVERMA_BENCH_OVERLAP_NET";
const OUT_ENV: &str = "ACTIVERMA_BENCH_OVERLAP_OUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_OVERLAP_QUICK";
const SIZES: [usize; 6] = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20];
/// A 2-D patch's row, and the distance between its rows at rank 1 (a patch of a wider matrix).
const ROW: usize = 1 << 10;
const ROW_STRIDE: usize = 2 * ROW;
/// The shapes: a contiguous get (Fig. 7a), a 2-D patch of the same bytes (Fig. 7b), and the
/// patch's rows as a vector (ours: what ARMCI_NbGetV calls; zero-copy only, not judged).
const SHAPES: [&str; 3] = ["1-D", "2-D", VECTOR];
const VECTOR: &str = "vec";
const PROTOCOLS: [Transfer; 3] = [Transfer::ZeroCopy, Transfer::Buffered, Transfer::Pipelined];
/// The networks: name, settings.
const NETWORKS: [(&str, &[(&str, &str)]); 2] =
    [("raw", &[]), ("modelled", &[("ACTIVERMA_NET_LATENCY_NS", "7000"), ("ACTIVERMA_NET_BANDWIDTH_MBS", "730")])];
const METHOD_ENV: &str = "ACTIVERMA_BENCH_OVERLAP_METHOD";
/// The rows of the target-assisted and the wake-mode jobs' 2-D zero-copy gets.
const TARGET_ASSISTED: &str = "target-assisted";
const ZERO_COPY_WAKE: &str = "zero-copy-wake";
const ZERO_COPY_ENGINE: &str = "zero-copy-engine";
/// The jobs of a network: the run's default (every shape and protocol), then 2-D zero-copy
/// gets only, moved by the target, under the default with progress threads that sleep
/// until a message comes, and copied by the origin's copy engine.
const METHODS: [(&str, &[(&str, &str)]); 4] = [
    ("", &[]),
    (TARGET_ASSISTED, &[("ACTIVERMA_NONCONTIG", "target-assisted")]),
    (ZERO_COPY_WAKE, &[("ACTIVERMA_PROGRESS", "wake")]),
    (ZERO_COPY_ENGINE, &[("ACTIVERMA_PROGRESS", "app"), ("ACTIVERMA_COPY_ENGINE", "on")]),
];
/// Overlap a zero-copy get keeps from this size on with the modelled network (issue 16's target).
const OVERLAP_TARGET: f64 = 0.95;
const TARGET_FROM: usize = 64 << 10;

pub fn is_worker() -> bool {
    std::env::var_os(NET_ENV).is_some()
}

/// The parent: one job per network, then the table, the rows and the checks.
pub fn overlap(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("armci-overlap");
    let _ = std::fs::remove_file(&out);
    println!(
        "activerma bench armci-overlap: non-blocking contiguous, 2-D and vector gets from rank 1's segment overlapped with computation; load {}",
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    for (name, settings) in NETWORKS {
        for (method, method_settings) in METHODS {
            let mut env = vec![
                (NET_ENV.to_string(), name.to_string()),
                (OUT_ENV.to_string(), out.to_string_lossy().into_owned()),
                (METHOD_ENV.to_string(), method.to_string()),
            ];
            env.extend(settings.iter().chain(method_settings).map(|&(k, v)| (k.to_string(), v.to_string())));
            if args.quick {
                env.push((QUICK_ENV.into(), "1".into()));
            }
            let code = super::jobs::run_with_env(2, &["bench", "armci-overlap", "--rank-worker"], &env, 600.0)?;
            if code != 0 {
                return Err(format!("the {name} job {method:?} failed (exit code {code})").into());
            }
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    println!("# overlap = share of a blocking get's time hidden behind as much computation; comm/total: us");
    println!("# issue: the median time the origin's CPU spends starting the non-blocking get (never hidden)");
    println!(
        "# {:<9} {:<5} {:<11} {:>9} {:>10} {:>10} {:>8} {:>9}",
        "network", "shape", "protocol", "size", "comm", "total", "overlap", "issue"
    );
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [net, shape, protocol, size, comm, total, issue] = f[..] else { continue };
        let (size, comm, total, issue): (usize, f64, f64, f64) = (size.parse()?, comm.parse()?, total.parse()?, issue.parse()?);
        let overlap = ((2.0 * comm - total) / comm).clamp(0.0, 1.0);
        println!(
            "{net:<11} {shape:<5} {protocol:<11} {size:>9} {:>10.2} {:>10.2} {:>7.0} % {:>9.2}",
            comm / 1e3,
            total / 1e3,
            100.0 * overlap,
            issue / 1e3
        );
        let params = rows::params([
            ("size", json!(size)),
            ("comm_us", json!(comm / 1e3)),
            ("total_us", json!(total / 1e3)),
            ("issue_us", json!(issue / 1e3)),
        ]);
        // 1-D rows keep their names of Fig. 7a; the others say their shape.
        let case = match shape {
            "1-D" => format!("{net}-{protocol}"),
            "2-D" => format!("{net}-2d-{protocol}"),
            _ => format!("{net}-{shape}-{protocol}"),
        };
        rows::emit("armci-overlap", &case, params, "%", Measured::single(100.0 * overlap), &[]);
        if net == "modelled" && size >= TARGET_FROM && shape != VECTOR {
            let judged = [Transfer::ZeroCopy.name(), TARGET_ASSISTED, ZERO_COPY_WAKE, ZERO_COPY_ENGINE].contains(&protocol);
            let what = format!("overlap of a non-blocking {shape} {protocol} get of {size} B, modelled network");
            let mut params = rows::params([("what", json!(what)), ("size", json!(size))]);
            let verdict = match (judged, overlap >= OVERLAP_TARGET) {
                (false, _) => "info",
                (true, true) => "PASS",
                (true, false) => "MISS",
            };
            if judged {
                params.insert("target".into(), json!(format!(">= {OVERLAP_TARGET}")));
                params.insert("paper".into(), json!("~0.99"));
            }
            println!("# {what:<72} {overlap:>5.2}  {verdict}");
            let check = if shape == "1-D" { "armci-overlap-check" } else { "armci-overlap-2d-check" };
            rows::emit(check, &format!("{protocol} {size} B"), params, "x", Measured::single(overlap), &[]);
        }
    }
    Ok(())
}

/// One rank of a network's job: rank 1 serves until rank 0 is done; rank 0 measures.
pub fn worker() -> BResult<()> {
    let net = std::env::var(NET_ENV)?;
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err("armci-overlap runs on 2 ranks".into());
    }
    let max = *SIZES.iter().max().unwrap();
    // Room for a 2-D patch of `max` bytes (every other row), then the stop word.
    let extent = max / ROW * ROW_STRIDE;
    let seg = w.alloc_segment(extent + 4096)?;
    let stop = seg.remote(1, extent);
    let method = std::env::var(METHOD_ENV)?;
    if w.rank() == 1 {
        // SAFETY: our own segment, as long as its length.
        unsafe { std::ptr::write_bytes(seg.as_ptr(), 0x3c, extent) };
        w.barrier()?;
        while w.fetch(stop)? == 0 {
            if method == ZERO_COPY_ENGINE {
                // Nothing to serve: leave the CPU to rank 0's engine.
                std::thread::sleep(Duration::from_millis(1));
            } else {
                w.progress();
            }
        }
        w.barrier()?;
        return Ok(w.finalize()?);
    }
    w.barrier()?;
    let reps = if quick { 7 } else { 31 };
    let mut lines = String::new();
    let mut dst = vec![0u8; max];
    let at = RemotePtr::new(1, seg.remote(1, 0).addr);
    if method == TARGET_ASSISTED && w.noncontig()? != Noncontig::TargetAssisted {
        return Err("the target-assisted job runs under ACTIVERMA_NONCONTIG=target-assisted".into());
    }
    if method == ZERO_COPY_ENGINE && !w.has_copy_engine()? {
        return Err("the zero-copy-engine job runs under ACTIVERMA_COPY_ENGINE=on".into());
    }
    // The default job runs every shape and protocol; the copy engine's, zero-copy gets of both
    // shapes (it copies contiguous gets too); the others, 2-D zero-copy gets.
    let (shapes, protocols) = match method.as_str() {
        "" => (&SHAPES[..], &PROTOCOLS[..]),
        ZERO_COPY_ENGINE => (&SHAPES[..], &PROTOCOLS[..1]),
        _ => (&SHAPES[1..], &PROTOCOLS[..1]),
    };
    for &shape in shapes {
        // A vector get has no protocol to choose: the run moves it as it moves lists.
        for &protocol in protocols.iter().filter(|&&p| shape != VECTOR || p == Transfer::ZeroCopy) {
            for &size in SIZES.iter().filter(|&&s| !quick || s >= 4 << 10) {
                let patch = StridedPattern::new(ROW, vec![size / ROW], vec![ROW_STRIDE], vec![ROW])?;
                let comm = median(reps, || {
                    let t = Instant::now();
                    match shape {
                        "1-D" => drop(w.get_by(protocol, at, &mut dst[..size])?),
                        _ => drop(start(&w, shape, protocol, at, &patch, &mut dst[..size])?.wait()?),
                    }
                    Ok(t.elapsed())
                })?;
                let mut issues = Vec::with_capacity(reps + 1);
                let total = median(reps, || {
                    let t = Instant::now();
                    let pending = start(&w, shape, protocol, at, &patch, &mut dst[..size])?;
                    issues.push(t.elapsed());
                    compute_for(comm);
                    pending.wait()?;
                    Ok(t.elapsed())
                })?;
                if dst[..size].iter().any(|&b| b != 0x3c) {
                    return Err(format!("a {shape} {} get of {size} B brought wrong bytes", protocol.name()).into());
                }
                let label = if method.is_empty() { protocol.name() } else { method.as_str() };
                issues.sort();
                let issue = issues[issues.len() / 2];
                lines.push_str(&format!(
                    "{net}\t{shape}\t{label}\t{size}\t{:.0}\t{:.0}\t{:.0}\n",
                    comm.as_nanos(),
                    total.as_nanos(),
                    issue.as_nanos()
                ));
                dst.fill(0);
            }
        }
    }
    w.swap(stop, 1)?;
    w.barrier()?;
    std::fs::OpenOptions::new().append(true).create(true).open(std::env::var(OUT_ENV)?)?.write_all(lines.as_bytes())?;
    Ok(w.finalize()?)
}

/// Starts a non-blocking get of `dst.len()` bytes from `at` in `shape`: contiguous, the 2-D
/// patch, or the patch's rows as a vector.
fn start<'a>(
    w: &'a activerma::World,
    shape: &str,
    protocol: Transfer,
    at: RemotePtr,
    patch: &StridedPattern,
    dst: &'a mut [u8],
) -> BResult<activerma::PendingTransfer<'a>> {
    Ok(match shape {
        "1-D" => w.get_nb_by(protocol, at, dst)?,
        "2-D" => w.get_strided_nb_by(protocol, at, patch, dst)?,
        _ => w.get_vector_nb(at.rank, dst.chunks_mut(ROW).enumerate().map(|(i, row)| (at.addr + i * ROW_STRIDE, row)).collect())?,
    })
}

/// The median of `reps` timings.
fn median(reps: usize, mut once: impl FnMut() -> BResult<Duration>) -> BResult<Duration> {
    once()?; // warm-up
    let mut t: Vec<Duration> = (0..reps).map(|_| once()).collect::<BResult<_>>()?;
    t.sort();
    Ok(t[reps / 2])
}

/// Computation that never enters the runtime: spins on the clock for `d`.
fn compute_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
