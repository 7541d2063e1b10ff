//! The driver side: which cases run with how many ranks, under which settings, and what the
//! launcher must report.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::hang_stacks::{output_with_stacks, DUMP_AFTER};

pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_activerma");

/// The cases every conduit runs with 2, 3 and 4 ranks.
const CORE_CASES: [&str; 12] = [
    "put_get_segment",
    "nonblocking_and_flush",
    "passive_target_spins",
    "private_memory",
    "private_large_transfers",
    "atomics",
    "active_messages",
    "bad_input",
    "randomized",
    "lists_of_pieces",
    "transfer_protocols",
    "landing_zone",
];

/// Every value of ACTIVERMA_NONCONTIG: how strided and vector transfers move.
const NONCONTIG_METHODS: [&str; 4] = ["host-assisted", "per-piece", "packed", "target-assisted"];

/// Every value of ACTIVERMA_REGISTRATION: contract tests that a strategy can break run under each.
const REGISTRATION_STRATEGIES: [&str; 7] = ["none", "pin-all", "bounce", "rendezvous", "rendezvous-unpin", "firehose", "part"];

pub struct Job<'a> {
    pub case: &'a str,
    pub ranks: u32,
    pub env: Vec<(&'a str, &'a str)>,
}

/// The MPI launcher to run the cases under (ACTIVERMA_TEST_MPI=openmpi|mpich), if any; the
/// test binary must then be built with the `mpi` feature against that MPI.
fn mpi_launcher() -> Option<&'static str> {
    match std::env::var("ACTIVERMA_TEST_MPI").ok()?.as_str() {
        "openmpi" => Some("openmpi"),
        "mpich" => Some("mpich"),
        other => panic!("ACTIVERMA_TEST_MPI={other}: expected openmpi or mpich"),
    }
}

/// With ACTIVERMA_TEST_MPI_TCP=1, the MPI's settings that send all traffic (two-sided and
/// one-sided) through TCP sockets, so that it crosses the kernel's network stack.
fn tcp_settings(mpi: &str) -> Vec<(&'static str, &'static str)> {
    if !std::env::var("ACTIVERMA_TEST_MPI_TCP").is_ok_and(|v| v == "1") {
        return vec![];
    }
    match mpi {
        // ob1 + the tcp BTL for messages; osc/rdma cannot make dynamic windows over tcp, so
        // one-sided goes through osc/ucx, whose UCX is limited to tcp too.
        // ACTIVERMA_MPI_SHARED=off: the ranks must not map each other's memory either.
        "openmpi" => vec![
            ("OMPI_MCA_pml", "ob1"),
            ("OMPI_MCA_btl", "tcp,self"),
            ("OMPI_MCA_osc", "ucx"),
            ("UCX_TLS", "tcp,self"),
            ("ACTIVERMA_MPI_SHARED", "off"),
        ],
        _ => vec![("UCX_TLS", "tcp,self"), ("ACTIVERMA_MPI_SHARED", "off")],
    }
}

/// With ACTIVERMA_TEST_MPI_HOSTS=N, every job runs over N emulated hosts (network namespaces
/// joined by veth links, scripts/emulated-hosts.sh, brought up by the caller): its ranks split
/// evenly over them, rounded up, so ranks of one host share memory and the others talk through
/// TCP.
fn emulated_hosts() -> Option<u32> {
    let v = std::env::var("ACTIVERMA_TEST_MPI_HOSTS").ok()?;
    Some(v.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| panic!("ACTIVERMA_TEST_MPI_HOSTS={v}: expected a number of hosts")))
}

fn mpi_label(mpi: &str) -> String {
    match (emulated_hosts(), tcp_settings(mpi).is_empty()) {
        (Some(h), _) => format!("{mpi} over {h} emulated hosts"),
        (None, true) => mpi.to_string(),
        (None, false) => format!("{mpi} over tcp"),
    }
}

/// `mpirun`/`mpiexec` with the job's settings passed to every rank; bounded by `timeout`.
fn launch_mpi(mpi: &str, job: &Job) -> (Output, Duration) {
    launch_mpi_with(mpi, job, &[])
}

/// `launch_mpi` with more settings for every rank.
pub fn launch_mpi_with(mpi: &str, job: &Job, more: &[(&str, &str)]) -> (Output, Duration) {
    let me = std::env::current_exe().unwrap();
    let started = Instant::now();
    let env: Vec<(&str, &str)> = job.env.iter().copied().chain(tcp_settings(mpi)).chain(more.iter().copied()).collect();
    if let Some(hosts) = emulated_hosts() {
        let per_host = job.ranks.div_ceil(hosts);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/emulated-hosts.sh");
        let mut cmd = Command::new("bash");
        cmd.args([script, "mpirun", mpi, &per_host.to_string(), "--"]).arg(&me).args(["--rank", job.case]);
        cmd.env("ACTIVERMA_CONDUIT", "mpi").env("ACTIVERMA_TEST_RANKS_PER_NODE", per_host.to_string()).env("EMULATED_HOSTS_TIMEOUT", "120");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = output_with_stacks(cmd.stdin(Stdio::null()), DUMP_AFTER);
        return (out, started.elapsed());
    }
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "120"]);
    match mpi {
        // Open MPI: root and more ranks than cores need saying; settings travel with -x.
        "openmpi" => {
            cmd.args(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-x", "ACTIVERMA_CONDUIT"]);
            for (k, _) in &env {
                cmd.args(["-x", k]);
            }
        }
        _ => {
            cmd.arg("mpiexec.mpich");
        }
    }
    cmd.args(["-n", &job.ranks.to_string()]).arg(&me).args(["--rank", job.case]).env("ACTIVERMA_CONDUIT", "mpi");
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let out = output_with_stacks(cmd.stdin(Stdio::null()), DUMP_AFTER);
    (out, started.elapsed())
}

pub fn launch(job: &Job, extra: &[&str]) -> (Output, Duration) {
    if let Some(mpi) = mpi_launcher() {
        return launch_mpi(mpi, job);
    }
    let me = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["run", "-n", &job.ranks.to_string()]);
    if !extra.contains(&"--timeout") {
        cmd.args(["--timeout", "120"]);
    }
    cmd.args(extra).arg("--").arg(&me).arg(job.case);
    for (k, v) in &job.env {
        cmd.env(k, v);
    }
    let out = output_with_stacks(cmd.stdin(Stdio::null()), DUMP_AFTER);
    (out, started.elapsed())
}

/// Entries in /dev/shm that could be ours (other software, MPI among it, keeps files there).
fn our_shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains("activerma")).collect()
        })
        .unwrap_or_default()
}

pub struct Tally {
    passed: u32,
    failed: Vec<String>,
}

impl Tally {
    pub fn check(&mut self, name: String, ok: bool, detail: impl FnOnce() -> String) {
        if ok {
            println!("PASS {name}");
            self.passed += 1;
        } else {
            println!("FAIL {name}\n{}", detail());
            self.failed.push(name);
        }
    }
}

pub fn show(out: &Output) -> String {
    format!(
        "  status: {}\n  stdout:\n{}\n  stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The object DSM's protocols (ACTIVERMA_DSM_PROTOCOL), each run through the same contract.
const DSM_PROTOCOLS: [&str; 4] = ["invalidate", "invalidate-rdma", "update-in-place", "update-diff"];

pub fn main() -> i32 {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let mut t = Tally { passed: 0, failed: vec![] };

    if let Some(mpi) = mpi_launcher() {
        return run_under_mpi(mpi, filter.as_deref(), &mut t);
    }

    // Cases that must succeed on every rank.
    let mut jobs: Vec<Job> = Vec::new();
    for case in CORE_CASES {
        for ranks in [2, 3, 4] {
            jobs.push(Job { case, ranks, env: vec![] });
        }
    }
    for mode in ["thread", "wake"] {
        jobs.push(Job { case: "progress_without_target_calls", ranks: 2, env: vec![("ACTIVERMA_PROGRESS", mode)] });
        jobs.push(Job { case: "randomized", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", mode)] });
        jobs.push(Job { case: "active_messages", ranks: 2, env: vec![("ACTIVERMA_PROGRESS", mode)] });
    }
    jobs.push(Job {
        case: "modelled_network",
        ranks: 2,
        env: vec![("ACTIVERMA_NET_LATENCY_NS", "20000"), ("ACTIVERMA_NET_BANDWIDTH_MBS", "100"), ("ACTIVERMA_NET_LOG_NS", "20000")],
    });
    jobs.push(Job { case: "small_queues", ranks: 3, env: vec![("ACTIVERMA_AM_SLOTS", "4"), ("ACTIVERMA_AM_SLOT_SIZE", "128")] });
    jobs.push(Job { case: "peer_exits_early", ranks: 2, env: vec![] });
    for ranks in [2, 3] {
        jobs.push(Job { case: "settings_without_environment", ranks, env: vec![("ACTIVERMA_TRANSFER", "pipelined")] });
    }
    // Implicit puts with non-temporal stores from the first byte of a window (unaligned
    // offsets and lengths in both cases; randomized checks every byte).
    for (case, ranks) in [("nonblocking_and_flush", 2), ("nonblocking_and_flush", 3), ("randomized", 3)] {
        jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_PUT_STREAM_AFTER", "1K")] });
    }
    // The cross-host paths (one-sided engine for segments, the target for private memory),
    // exercised on one host by hiding every peer's mappings (active messages do not change).
    for case in CORE_CASES.into_iter().filter(|&c| c != "active_messages") {
        for ranks in [2, 3] {
            jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1")] });
        }
    }
    // A job over emulated nodes of two ranks each: same-node ranks map each other, the others
    // take the cross-host paths, in one job (ranks 0,1 | 2,3). Every core case, the layout and
    // the paths each kind of traffic took, and Active Access across both.
    for case in CORE_CASES.into_iter().chain(["node_paths", "aa_bit_combinations", "aa_active_flush_orders", "dht_variants_agree"]) {
        jobs.push(Job { case, ranks: 4, env: vec![("ACTIVERMA_SMP_RANKS_PER_HOST", "2")] });
    }
    jobs.push(Job { case: "node_paths", ranks: 3, env: vec![("ACTIVERMA_SMP_RANKS_PER_HOST", "2")] });
    jobs.push(Job { case: "node_paths", ranks: 3, env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1")] });
    jobs.push(Job { case: "node_paths", ranks: 2, env: vec![] });
    // The program's memory where the runtime prefers to put heaps: left alone, and worked around.
    jobs.push(Job { case: "hint_range_taken", ranks: 3, env: vec![] });
    jobs.push(Job { case: "hint_range_taken", ranks: 4, env: vec![("ACTIVERMA_SMP_RANKS_PER_HOST", "2")] });
    // Large private transfers across hosts under the strategies that change their path:
    // per-operation pins (released after the one-sided move), and no registration at all.
    for strategy in ["rendezvous-unpin", "bounce"] {
        jobs.push(Job {
            case: "private_large_transfers",
            ranks: 3,
            env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1"), ("ACTIVERMA_REGISTRATION", strategy)],
        });
    }
    // Every private put/get from 1 KiB on a rendezvous: holds and releases under random load.
    jobs.push(Job {
        case: "randomized",
        ranks: 3,
        env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1"), ("ACTIVERMA_RMA_RENDEZVOUS_MIN", "1K")],
    });
    jobs.push(Job { case: "randomized", ranks: 4, env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1"), ("ACTIVERMA_PROGRESS", "thread")] });
    // Active Access: every notification mode of the log under test.
    for notify in ["poll", "wake", "thread"] {
        jobs.push(Job { case: "aa_bit_combinations", ranks: 2, env: vec![("ACTIVERMA_AA_NOTIFY", notify)] });
        for ranks in [2, 4] {
            jobs.push(Job { case: "aa_many_origins_tiny_log", ranks, env: vec![("ACTIVERMA_AA_NOTIFY", notify)] });
        }
    }
    jobs.push(Job { case: "aa_bits_change_under_load", ranks: 3, env: vec![] });
    // Checkpoint tracking beside the application's own marks, every tracking scheme, one host
    // and emulated other hosts (marks published to origins that cannot read the table).
    for scheme in ["incremental", "trap-first-write"] {
        for ranks in [2, 3] {
            jobs.push(Job { case: "checkpoint_with_app_marks", ranks, env: vec![("CKPT_SCHEME", scheme)] });
        }
        jobs.push(Job {
            case: "checkpoint_with_app_marks",
            ranks: 3,
            env: vec![("CKPT_SCHEME", scheme), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")],
        });
    }
    for notify in ["poll", "wake", "thread"] {
        jobs.push(Job { case: "aa_active_flush_orders", ranks: 3, env: vec![("ACTIVERMA_AA_NOTIFY", notify)] });
        jobs.push(Job { case: "aa_handler_replies", ranks: 3, env: vec![("ACTIVERMA_AA_NOTIFY", notify)] });
    }
    // Marks on segments reach origins that cannot read the target's table (other hosts).
    for case in [
        "aa_bit_combinations",
        "aa_many_origins_tiny_log",
        "aa_active_flush_orders",
        "aa_handler_replies",
        "dht_variants_agree",
        "counter_variants_agree",
    ] {
        jobs.push(Job { case, ranks: 3, env: vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1")] });
    }
    // The applications: every variant agrees, on the raw conduit and with the modelled network.
    jobs.push(Job { case: "dht_variants_agree", ranks: 3, env: vec![] });
    jobs.push(Job { case: "counter_variants_agree", ranks: 3, env: vec![] });
    // The object DSM's contract under every protocol and job shape.
    for protocol in DSM_PROTOCOLS {
        for ranks in [2, 3, 4] {
            jobs.push(Job { case: "dsm_contract", ranks, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol)] });
            jobs.push(Job { case: "dsm_apps", ranks, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol)] });
        }
        jobs.push(Job {
            case: "dsm_contract",
            ranks: 3,
            env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")],
        });
        for mode in ["thread", "wake"] {
            jobs.push(Job {
                case: "dsm_contract",
                ranks: 3,
                env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol), ("ACTIVERMA_PROGRESS", mode)],
            });
        }
    }
    // The page-granular mode (first accesses by the MMU) under both invalidation protocols,
    // every job shape, emulated hosts (pages by RMA between "hosts") and progress threads.
    for protocol in ["invalidate", "invalidate-rdma"] {
        let mmu = |more: &[(&'static str, &'static str)]| {
            [&[("ACTIVERMA_DSM_ACCESS", "mmu"), ("ACTIVERMA_DSM_PROTOCOL", protocol)], more].concat()
        };
        for ranks in [2, 3, 4] {
            jobs.push(Job { case: "dsm_contract", ranks, env: mmu(&[]) });
        }
        jobs.push(Job { case: "dsm_apps", ranks: 3, env: mmu(&[]) });
        jobs.push(Job { case: "dsm_contract", ranks: 3, env: mmu(&[("ACTIVERMA_SMP_EMULATE_REMOTE", "1")]) });
        for mode in ["thread", "wake"] {
            jobs.push(Job { case: "dsm_contract", ranks: 3, env: mmu(&[("ACTIVERMA_PROGRESS", mode)]) });
        }
    }
    jobs.push(Job { case: "dsm_apps", ranks: 4, env: vec![("ACTIVERMA_DSM_ACCESS", "mmu")] });
    // Lock caching: a kept lock handed on when its keeper stops taking it, in every progress
    // mode (a 10 s lease the case must not wait out).
    for protocol in DSM_PROTOCOLS {
        for mode in ["app", "thread", "wake"] {
            jobs.push(Job {
                case: "dsm_lock_handover",
                ranks: 2,
                env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol), ("ACTIVERMA_PROGRESS", mode), ("ACTIVERMA_DSM_LOCK_LEASE_US", "10000000")],
            });
        }
    }
    // Diff-arrays of the smallest size: every release is many arrays, each slot reused after
    // its acknowledgement, thousands of times.
    jobs.push(Job {
        case: "dsm_contract",
        ranks: 3,
        env: vec![("ACTIVERMA_DSM_PROTOCOL", "update-diff"), ("ACTIVERMA_DSM_DIFF_ARRAY", "128")],
    });
    for reg in ["none", "part"] {
        jobs.push(Job { case: "stencil_untouched_equals_pretouched", ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", reg)] });
    }
    jobs.push(Job {
        case: "dht_variants_agree",
        ranks: 2,
        env: vec![
            ("ACTIVERMA_NET_LATENCY_NS", "1500"),
            ("ACTIVERMA_NET_RECV_NS", "1000"),
            ("ACTIVERMA_NET_LOG_NS", "70"),
            ("ACTIVERMA_NET_SCRATCHPAD_NS", "15"),
            ("ACTIVERMA_NET_INTERRUPT_NS", "3000"),
        ],
    });
    // The modelled interrupt replaces the futex sleep of wake-mode handler threads: nothing may
    // be lost or left waiting (a log below its threshold is drained after the interval).
    let modelled_interrupt =
        [("ACTIVERMA_AA_NOTIFY", "wake"), ("ACTIVERMA_NET_INTERRUPT_NS", "3000"), ("ACTIVERMA_AA_WAKE_THRESHOLD", "10")];
    for case in ["aa_many_origins_tiny_log", "aa_active_flush_orders"] {
        jobs.push(Job { case, ranks: 3, env: modelled_interrupt.to_vec() });
    }
    jobs.push(Job { case: "active_messages", ranks: 2, env: vec![("ACTIVERMA_PROGRESS", "wake"), ("ACTIVERMA_NET_INTERRUPT_NS", "3000")] });
    // Server-based atomics (ACTIVERMA_ATOMICS=target): every atomic run by the target's CPU,
    // on one host and across emulated hosts; the randomized test mixes them with puts and gets.
    for (case, ranks, remote) in [("atomics", 2, "0"), ("atomics", 3, "0"), ("atomics", 3, "1"), ("randomized", 3, "0")] {
        jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_ATOMICS", "target"), ("ACTIVERMA_SMP_EMULATE_REMOTE", remote)] });
    }
    // Lists of pieces: every method, on one host and across emulated hosts, with a small
    // scatter/gather limit (many kernel calls per list), under every registration strategy.
    for method in NONCONTIG_METHODS {
        for remote in ["0", "1"] {
            jobs.push(Job {
                case: "lists_of_pieces",
                ranks: 3,
                env: vec![("ACTIVERMA_NONCONTIG", method), ("ACTIVERMA_SMP_EMULATE_REMOTE", remote)],
            });
        }
    }
    jobs.push(Job { case: "lists_of_pieces", ranks: 2, env: vec![("ACTIVERMA_SGE_MAX", "7")] });
    jobs.push(Job { case: "lists_of_pieces", ranks: 3, env: vec![("ACTIVERMA_NONCONTIG", "packed"), ("ACTIVERMA_PROGRESS", "thread")] });
    for strategy in REGISTRATION_STRATEGIES {
        jobs.push(Job { case: "lists_of_pieces", ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
        // The target moves the pieces between its memory and the origin's buffers itself.
        let env = vec![("ACTIVERMA_REGISTRATION", strategy), ("ACTIVERMA_NONCONTIG", "target-assisted")];
        jobs.push(Job { case: "lists_of_pieces", ranks: 3, env });
    }
    // Target-assisted lists served by every kind of target progress, and as the non-blocking
    // strided transfers of every protocol (zero-copy ones are then the target's moves), at
    // the modelled network's time too.
    for progress in ["thread", "wake"] {
        let env = vec![("ACTIVERMA_NONCONTIG", "target-assisted"), ("ACTIVERMA_PROGRESS", progress)];
        jobs.push(Job { case: "lists_of_pieces", ranks: 3, env: env.clone() });
        jobs.push(Job { case: "transfer_protocols", ranks: 2, env });
    }
    jobs.push(Job { case: "transfer_protocols", ranks: 3, env: vec![("ACTIVERMA_NONCONTIG", "target-assisted")] });
    // Non-blocking strided transfers under host-assisted go through the target's CPU from
    // ACTIVERMA_NB_TARGET_FROM on when its progress runs on its own, and only then: by
    // progress mode, threshold, registration strategy, and towards emulated hosts.
    for progress in ["app", "thread", "wake"] {
        jobs.push(Job { case: "nb_strided_by_target", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", progress)] });
    }
    for from in ["0", "16K", "1M"] {
        jobs.push(Job {
            case: "nb_strided_by_target",
            ranks: 2,
            env: vec![("ACTIVERMA_PROGRESS", "wake"), ("ACTIVERMA_NB_TARGET_FROM", from)],
        });
    }
    for strategy in REGISTRATION_STRATEGIES {
        let env = vec![("ACTIVERMA_PROGRESS", "thread"), ("ACTIVERMA_REGISTRATION", strategy)];
        jobs.push(Job { case: "nb_strided_by_target", ranks: 2, env });
    }
    let env = vec![("ACTIVERMA_PROGRESS", "thread"), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")];
    jobs.push(Job { case: "nb_strided_by_target", ranks: 4, env });
    // Without a target that moves them, the copy engine copies them (ACTIVERMA_COPY_ENGINE=on),
    // under every registration strategy, beside targets that do (thread), towards emulated
    // hosts (the origin copies), and never when it is off.
    for strategy in REGISTRATION_STRATEGIES {
        let env = vec![("ACTIVERMA_PROGRESS", "app"), ("ACTIVERMA_COPY_ENGINE", "on"), ("ACTIVERMA_REGISTRATION", strategy)];
        jobs.push(Job { case: "nb_strided_by_target", ranks: 2, env });
    }
    for (progress, engine) in [("app", "off"), ("thread", "on"), ("wake", "on")] {
        jobs.push(Job {
            case: "nb_strided_by_target",
            ranks: 3,
            env: vec![("ACTIVERMA_PROGRESS", progress), ("ACTIVERMA_COPY_ENGINE", engine), ("ACTIVERMA_NB_TARGET_FROM", "16K")],
        });
    }
    let env = vec![("ACTIVERMA_PROGRESS", "app"), ("ACTIVERMA_COPY_ENGINE", "on"), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")];
    jobs.push(Job { case: "nb_strided_by_target", ranks: 4, env });
    jobs.push(Job {
        case: "transfer_protocols",
        ranks: 2,
        env: vec![
            ("ACTIVERMA_NONCONTIG", "target-assisted"),
            ("ACTIVERMA_NET_LATENCY_NS", "2000"),
            ("ACTIVERMA_NET_BANDWIDTH_MBS", "20000"),
        ],
    });
    jobs.push(Job {
        case: "transfer_protocols",
        ranks: 3,
        env: vec![("ACTIVERMA_NONCONTIG", "target-assisted"), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")],
    });
    // Contiguous transfer protocols: every protocol under every registration strategy (each
    // changes what auto picks for private memory and what a dynamic registration pins), with
    // target progress by a thread, and small pipeline chunks (many in flight).
    for strategy in REGISTRATION_STRATEGIES {
        jobs.push(Job { case: "transfer_protocols", ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
    }
    jobs.push(Job { case: "transfer_protocols", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", "thread")] });
    jobs.push(Job {
        case: "transfer_protocols",
        ranks: 2,
        env: vec![("ACTIVERMA_PIPELINE_CHUNK", "1000"), ("ACTIVERMA_PIPELINE_MIN", "1")],
    });
    // The landing zone: none (buffered transfers inside active messages), one so small that an
    // origin has a page per slot (every transfer crosses many slots), with target progress by a
    // thread and between emulated hosts.
    for zone in ["0", "64K"] {
        for ranks in [2, 4] {
            jobs.push(Job { case: "landing_zone", ranks, env: vec![("ACTIVERMA_LANDING_ZONE", zone)] });
        }
        jobs.push(Job { case: "transfer_protocols", ranks: 3, env: vec![("ACTIVERMA_LANDING_ZONE", zone)] });
    }
    jobs.push(Job { case: "landing_zone", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", "thread")] });
    jobs.push(Job { case: "landing_zone", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", "wake"), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")] });
    // Completion at the modelled network's time (non-blocking zero-copy handles wait for it).
    jobs.push(Job {
        case: "transfer_protocols",
        ranks: 2,
        env: vec![("ACTIVERMA_NET_LATENCY_NS", "2000"), ("ACTIVERMA_NET_BANDWIDTH_MBS", "20000")],
    });
    // Registration strategies: the same programs, unchanged, under each of them.
    // Active flush on marked private memory takes each strategy's path (bounce and part go
    // through the target): its guarantee must hold on every one.
    for strategy in REGISTRATION_STRATEGIES {
        for notify in ["poll", "wake", "thread"] {
            for ranks in [2, 4] {
                let env = vec![("ACTIVERMA_REGISTRATION", strategy), ("ACTIVERMA_AA_NOTIFY", notify)];
                jobs.push(Job { case: "aa_active_flush_orders", ranks, env });
            }
        }
    }
    for strategy in ["pin-all", "bounce", "rendezvous", "rendezvous-unpin", "firehose"] {
        for case in ["randomized", "private_memory", "bad_input"] {
            for ranks in [2, 3] {
                jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
            }
        }
    }
    for strategy in ["rendezvous", "rendezvous-unpin", "firehose"] {
        for ranks in [2, 3] {
            jobs.push(Job { case: "reexpose_no_stale", ranks, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
        }
    }
    // Firehose with a tiny M (32 pages) and MAXVICTIM (16 pages): firehoses move and released
    // ones come back from the victim FIFO during `randomized`; `firehose_bound_holds` also
    // checks that no target ever had more than M + MAXVICTIM pinned. Page-based, the region
    // flavour (4-page buckets), and with progress threads serving the moves.
    let tiny = [("ACTIVERMA_REGISTRATION", "firehose"), ("ACTIVERMA_FIREHOSE_M", "128K"), ("ACTIVERMA_FIREHOSE_MAXVICTIM", "64K")];
    for ranks in [2, 3] {
        for case in ["randomized", "firehose_bound_holds"] {
            jobs.push(Job { case, ranks, env: tiny.to_vec() });
        }
    }
    jobs.push(Job { case: "firehose_bound_holds", ranks: 3, env: [&tiny[..], &[("ACTIVERMA_FIREHOSE_BUCKET", "4")]].concat() });
    jobs.push(Job { case: "randomized", ranks: 3, env: [&tiny[..], &[("ACTIVERMA_FIREHOSE_BUCKET", "4")]].concat() });
    jobs.push(Job { case: "firehose_bound_holds", ranks: 3, env: [&tiny[..], &[("ACTIVERMA_PROGRESS", "thread")]].concat() });
    // Firehose and pin-all between hosts (every peer on a host of its own, and two hosts of two
    // ranks): keys, one-sided hits, moves, revocation at unexpose and when bits change, bad input.
    for remote in [("ACTIVERMA_SMP_EMULATE_REMOTE", "1"), ("ACTIVERMA_SMP_RANKS_PER_HOST", "2")] {
        let ranks = if remote.0 == "ACTIVERMA_SMP_EMULATE_REMOTE" { 3 } else { 4 };
        for case in ["randomized", "firehose_bound_holds", "keyed_rma_across_hosts"] {
            jobs.push(Job { case, ranks, env: [&tiny[..], &[remote]].concat() });
        }
        jobs.push(Job { case: "keyed_rma_across_hosts", ranks, env: [&tiny[..], &[remote, ("ACTIVERMA_PROGRESS", "thread")]].concat() });
        for case in ["private_memory", "bad_input", "reexpose_no_stale", "aa_bit_combinations"] {
            jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_REGISTRATION", "firehose"), remote] });
        }
        for case in ["keyed_rma_across_hosts", "randomized", "private_memory", "bad_input"] {
            jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_REGISTRATION", "pin-all"), remote] });
        }
    }
    // PART: the same programs, unchanged; then with injected faults (30 % of the pages of each
    // access evicted at the target first) under each page-in policy and both ways to resend:
    // `randomized` checks every byte, `part_faults_counted` that every fault is counted.
    for case in ["randomized", "private_memory", "bad_input"] {
        for ranks in [2, 3] {
            jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_REGISTRATION", "part")] });
        }
    }
    for pagein in ["pio", "pi4", "pia", "pia-early"] {
        for retransmit in ["err", "timeout:100us"] {
            if pagein == "pia-early" && retransmit != "err" {
                continue; // its early ERR is the point; under time-outs it is PIA's page-in
            }
            for (case, ranks) in [("randomized", 2), ("randomized", 3), ("part_faults_counted", 2), ("part_faults_counted", 3)] {
                jobs.push(Job {
                    case,
                    ranks,
                    env: vec![
                        ("ACTIVERMA_REGISTRATION", "part"),
                        ("ACTIVERMA_PART_FAULT_PROB", "0.3"),
                        ("ACTIVERMA_PART_PAGEIN", pagein),
                        ("ACTIVERMA_PART_RETRANSMIT", retransmit),
                    ],
                });
            }
        }
    }
    jobs.push(Job { case: "part_faults_counted", ranks: 2, env: vec![("ACTIVERMA_REGISTRATION", "part")] });
    // Over the modelled network: blocks and resends paced by the link; faults still counted
    // exactly and every byte checked.
    let net = [("ACTIVERMA_NET_BANDWIDTH_MBS", "200"), ("ACTIVERMA_NET_LATENCY_NS", "5000")];
    jobs.push(Job {
        case: "part_modelled_link",
        ranks: 2,
        env: [&net[..], &[("ACTIVERMA_REGISTRATION", "part"), ("ACTIVERMA_PART_PAGEIN", "pio")]].concat(),
    });
    for (case, pagein) in [("part_faults_counted", "pia"), ("randomized", "pia-early")] {
        let part = [("ACTIVERMA_REGISTRATION", "part"), ("ACTIVERMA_PART_FAULT_PROB", "0.3"), ("ACTIVERMA_PART_PAGEIN", pagein)];
        jobs.push(Job { case, ranks: 2, env: [&net[..], &part[..]].concat() });
    }
    jobs.push(Job {
        case: "randomized",
        ranks: 3,
        env: vec![("ACTIVERMA_REGISTRATION", "part"), ("ACTIVERMA_PART_FAULT_PROB", "0.3"), ("ACTIVERMA_PROGRESS", "thread")],
    });
    // A real 256 KiB RLIMIT_MEMLOCK (the rank drops CAP_IPC_LOCK), then the runtime's own budget.
    for strategy in ["pin-all", "rendezvous", "rendezvous-unpin", "firehose"] {
        jobs.push(Job { case: "memlock_exhaustion", ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
    }
    jobs.push(Job {
        case: "memlock_exhaustion",
        ranks: 2,
        env: vec![("ACTIVERMA_REGISTRATION", "pin-all"), ("ACTIVERMA_PIN_LIMIT", "128K")],
    });

    for job in &jobs {
        let name = format!("{} ({} ranks{})", job.case, job.ranks, job.env.iter().map(|(k, v)| format!(", {k}={v}")).collect::<String>());
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let (out, took) = launch(job, &[]);
        t.check(format!("{name} [{:.1} s]", took.as_secs_f64()), out.status.success(), || show(&out));
    }

    if filter.as_deref().is_none_or(|f| "dsm_lock_holder_dies".contains(f)) {
        for protocol in DSM_PROTOCOLS {
            let job = Job { case: "dsm_lock_holder_dies", ranks: 3, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol)] };
            let (out, took) = launch(&job, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            t.check(
                format!("dsm_lock_holder_dies ({protocol}): the job ends, naming the dead rank [{:.1} s]", took.as_secs_f64()),
                !out.status.success() && err.contains("rank 1 was killed by signal 9") && took < Duration::from_secs(30),
                || show(&out),
            );
        }
    }
    crate::restart::checks(&mut t, None, "smp", filter.as_deref());
    crate::respawn::checks(&mut t, filter.as_deref());
    crate::respawn::ft_sort_checks(&mut t, filter.as_deref());
    crate::respawn::ft_sort_random_kill_checks(&mut t, filter.as_deref());
    crate::respawn::ft_sort_claim_hole_checks(&mut t, filter.as_deref());
    crate::respawn::replay_checks(&mut t, filter.as_deref());
    crate::respawn::replay_hole_checks(&mut t, filter.as_deref());
    crate::respawn::trim_death_checks(&mut t, filter.as_deref());
    crate::respawn::checkpoint_retry_checks(&mut t, filter.as_deref());
    crate::respawn::dht_replay_checks(&mut t, filter.as_deref());

    // `report` as the filter runs `activerma report`'s checks alone.
    if filter.as_deref().is_none_or(|f| f == "report") {
        crate::report::checks(&mut t);
    }
    // `launcher` as the filter runs the launcher's own checks alone.
    if filter.as_deref().is_none_or(|f| f == "launcher") {
        launcher_checks(&mut t);
        let left = our_shm_entries();
        t.check("no shared-memory files of ours in /dev/shm".into(), left.is_empty(), || format!("left behind: {left:?}"));
    }

    println!("multiprocess: {} passed, {} failed", t.passed, t.failed.len());
    if t.failed.is_empty() {
        0
    } else {
        for f in &t.failed {
            println!("failed: {f}");
        }
        1
    }
}

/// The same cases under an MPI's own launcher (the `mpi` conduit), then a rank that dies.
fn run_under_mpi(mpi: &str, filter: Option<&str>, t: &mut Tally) -> i32 {
    let mut jobs: Vec<Job> = Vec::new();
    for case in CORE_CASES {
        for ranks in [2, 3, 4] {
            jobs.push(Job { case, ranks, env: vec![] });
        }
    }
    jobs.push(Job { case: "progress_without_target_calls", ranks: 2, env: vec![("ACTIVERMA_PROGRESS", "thread")] });
    jobs.push(Job { case: "randomized", ranks: 3, env: vec![("ACTIVERMA_PROGRESS", "thread")] });
    jobs.push(Job { case: "active_messages", ranks: 2, env: vec![("ACTIVERMA_PROGRESS", "wake")] });
    jobs.push(Job { case: "settings_without_environment", ranks: 2, env: vec![("ACTIVERMA_TRANSFER", "pipelined")] });
    jobs.push(Job {
        case: "modelled_network",
        ranks: 2,
        env: vec![("ACTIVERMA_NET_LATENCY_NS", "20000"), ("ACTIVERMA_NET_BANDWIDTH_MBS", "100"), ("ACTIVERMA_NET_LOG_NS", "20000")],
    });
    // The one-sided MPI path on one host too (by default the ranks of a one-host job map each
    // other's heaps and tables through an MPI shared window and copy with the CPU).
    for case in ["put_get_segment", "nonblocking_and_flush", "atomics", "private_memory", "private_large_transfers", "randomized"] {
        for ranks in [2, 3] {
            jobs.push(Job { case, ranks, env: vec![("ACTIVERMA_MPI_SHARED", "off")] });
        }
    }
    // Each MPI call a contiguous put or get may be moved by (ACTIVERMA_MPI_RMA_CALLS; the
    // default measures both and so alternates them on its first transfers of each size).
    for calls in ["native", "accumulate"] {
        for case in ["put_get_segment", "nonblocking_and_flush", "lists_of_pieces", "randomized"] {
            jobs.push(Job { case, ranks: 3, env: vec![("ACTIVERMA_MPI_SHARED", "off"), ("ACTIVERMA_MPI_RMA_CALLS", calls)] });
        }
    }
    jobs.push(Job {
        case: "private_large_transfers",
        ranks: 3,
        env: vec![("ACTIVERMA_MPI_SHARED", "off"), ("ACTIVERMA_REGISTRATION", "rendezvous-unpin")],
    });
    jobs.push(Job { case: "randomized", ranks: 3, env: vec![("ACTIVERMA_MPI_SHARED", "off"), ("ACTIVERMA_RMA_RENDEZVOUS_MIN", "1K")] });
    jobs.push(Job { case: "randomized", ranks: 3, env: vec![("ACTIVERMA_PUT_STREAM_AFTER", "1K")] });
    // Which ranks share a node, and that only traffic between nodes goes through MPI.
    for shared in ["auto", "off"] {
        jobs.push(Job { case: "node_paths", ranks: 3, env: vec![("ACTIVERMA_MPI_SHARED", shared)] });
    }
    // The program's memory inside the range of the node's owner views (an MPI window at a
    // random address, MPICH's, lands there at times): left alone, and the job works.
    for ranks in [2, 3] {
        jobs.push(Job { case: "hint_range_taken", ranks, env: vec![] });
    }
    // Active Access across hosts: marks on segments and private memory, through the target.
    jobs.push(Job { case: "aa_bit_combinations", ranks: 2, env: vec![] });
    for scheme in ["incremental", "trap-first-write"] {
        jobs.push(Job { case: "checkpoint_with_app_marks", ranks: 2, env: vec![("CKPT_SCHEME", scheme)] });
        jobs.push(Job { case: "checkpoint_with_app_marks", ranks: 3, env: vec![("CKPT_SCHEME", scheme), ("ACTIVERMA_MPI_SHARED", "off")] });
    }
    jobs.push(Job { case: "aa_many_origins_tiny_log", ranks: 3, env: vec![] });
    jobs.push(Job { case: "aa_active_flush_orders", ranks: 3, env: vec![] });
    jobs.push(Job { case: "aa_handler_replies", ranks: 3, env: vec![("ACTIVERMA_MPI_SHARED", "off")] });
    jobs.push(Job { case: "aa_active_flush_orders", ranks: 2, env: vec![("ACTIVERMA_MPI_SHARED", "off")] });
    for strategy in REGISTRATION_STRATEGIES {
        let env = vec![("ACTIVERMA_REGISTRATION", strategy), ("ACTIVERMA_AA_NOTIFY", "thread")];
        jobs.push(Job { case: "aa_active_flush_orders", ranks: 3, env });
    }
    // Private memory of the node's other ranks under every registration strategy: each one's
    // slow path (through the target, a pin on request, a firehose move, PART's page-in).
    for strategy in REGISTRATION_STRATEGIES {
        jobs.push(Job { case: "private_memory", ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", strategy)] });
    }
    jobs.push(Job { case: "dht_variants_agree", ranks: 2, env: vec![] });
    jobs.push(Job { case: "counter_variants_agree", ranks: 2, env: vec![] });
    for protocol in DSM_PROTOCOLS {
        for ranks in [2, 4] {
            jobs.push(Job { case: "dsm_contract", ranks, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol)] });
        }
        jobs.push(Job { case: "dsm_apps", ranks: 3, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol)] });
        jobs.push(Job { case: "dsm_contract", ranks: 3, env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol), ("ACTIVERMA_MPI_SHARED", "off")] });
        jobs.push(Job {
            case: "dsm_lock_handover",
            ranks: 2,
            env: vec![("ACTIVERMA_DSM_PROTOCOL", protocol), ("ACTIVERMA_DSM_LOCK_LEASE_US", "10000000")],
        });
    }
    // The page-granular mode: pages by MPI_Get when the heaps are not shared.
    for shared in ["auto", "off"] {
        let env = vec![("ACTIVERMA_DSM_ACCESS", "mmu"), ("ACTIVERMA_MPI_SHARED", shared)];
        jobs.push(Job { case: "dsm_contract", ranks: 3, env: env.clone() });
        jobs.push(Job { case: "dsm_apps", ranks: 2, env });
    }
    for method in NONCONTIG_METHODS {
        jobs.push(Job { case: "lists_of_pieces", ranks: 3, env: vec![("ACTIVERMA_NONCONTIG", method), ("ACTIVERMA_MPI_SHARED", "off")] });
    }
    // Target-assisted between ranks of the node's shared memory (cross-memory attach by the
    // target), lists and non-blocking strided transfers.
    for case in ["lists_of_pieces", "transfer_protocols"] {
        jobs.push(Job { case, ranks: 3, env: vec![("ACTIVERMA_NONCONTIG", "target-assisted")] });
    }
    // Non-blocking strided transfers moved by a target whose progress runs on its own (node's
    // shared memory) and copied by the origin (without it, or over MPI).
    for (progress, shared) in [("app", "auto"), ("thread", "auto"), ("wake", "auto"), ("thread", "off")] {
        jobs.push(Job {
            case: "nb_strided_by_target",
            ranks: 3,
            env: vec![("ACTIVERMA_PROGRESS", progress), ("ACTIVERMA_MPI_SHARED", shared)],
        });
    }
    // The copy engine on the MPI conduit: it copies into the node's mapped heaps, and leaves
    // ranks that map nothing to the origin's copy.
    for shared in ["auto", "off"] {
        jobs.push(Job {
            case: "nb_strided_by_target",
            ranks: 3,
            env: vec![("ACTIVERMA_PROGRESS", "app"), ("ACTIVERMA_COPY_ENGINE", "on"), ("ACTIVERMA_MPI_SHARED", shared)],
        });
    }
    for shared in ["auto", "off"] {
        jobs.push(Job { case: "atomics", ranks: 3, env: vec![("ACTIVERMA_ATOMICS", "target"), ("ACTIVERMA_MPI_SHARED", shared)] });
    }
    // Transfer protocols with the one-sided MPI path between the ranks (zero-copy is MPI_Put/
    // MPI_Get; auto pipelines large private transfers or takes the rendezvous), and with
    // registration on demand.
    for strategy in ["none", "rendezvous-unpin"] {
        jobs.push(Job {
            case: "transfer_protocols",
            ranks: 3,
            env: vec![("ACTIVERMA_MPI_SHARED", "off"), ("ACTIVERMA_REGISTRATION", strategy)],
        });
    }
    // The landing zone reached by MPI_Put / MPI_Get, with slots of a page.
    for zone in ["4M", "64K"] {
        jobs.push(Job { case: "landing_zone", ranks: 3, env: vec![("ACTIVERMA_MPI_SHARED", "off"), ("ACTIVERMA_LANDING_ZONE", zone)] });
    }
    // Firehose between hosts (MPI's dynamic window: a key per exposure, the firehoses' moves as
    // messages, hits one-sided), with a small M and MAXVICTIM; with the node's shared memory
    // too (over emulated hosts: both paths in one job).
    let tiny = [("ACTIVERMA_REGISTRATION", "firehose"), ("ACTIVERMA_FIREHOSE_M", "128K"), ("ACTIVERMA_FIREHOSE_MAXVICTIM", "64K")];
    // (`firehose_bound_holds` with the node's memory only: with ACTIVERMA_MPI_SHARED=off over
    // the emulated hosts its 4 ranks on 2 cores take about 50 s, against 1 s with one rank per
    // host — Firehose's waits nap, and UCX over TCP needs the target in MPI: docs/NOTES.md.)
    for shared in ["off", "auto"] {
        jobs.push(Job { case: "keyed_rma_across_hosts", ranks: 3, env: [&tiny[..], &[("ACTIVERMA_MPI_SHARED", shared)]].concat() });
    }
    jobs.push(Job { case: "firehose_bound_holds", ranks: 3, env: tiny.to_vec() });
    for case in ["randomized", "private_memory", "reexpose_no_stale"] {
        jobs.push(Job { case, ranks: 3, env: [&tiny[..], &[("ACTIVERMA_MPI_SHARED", "off")]].concat() });
    }
    for case in ["keyed_rma_across_hosts", "randomized"] {
        jobs.push(Job { case, ranks: 3, env: vec![("ACTIVERMA_REGISTRATION", "pin-all"), ("ACTIVERMA_MPI_SHARED", "off")] });
    }
    for job in &jobs {
        let name = format!(
            "{}: {} ({} ranks{})",
            mpi_label(mpi),
            job.case,
            job.ranks,
            job.env.iter().map(|(k, v)| format!(", {k}={v}")).collect::<String>()
        );
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let (out, took) = launch_mpi(mpi, job);
        t.check(format!("{name} [{:.1} s]", took.as_secs_f64()), out.status.success(), || show(&out));
    }
    crate::restart::checks(t, Some(mpi), &mpi_label(mpi), filter);
    // Open MPI reserves a one-host job's windows in /dev/shm in full: heaps too large for it are
    // refused at init, naming the setting (not a hang, not an unrelated MPI error later).
    let too_big = format!("{}: segments larger than /dev/shm refused at init", mpi_label(mpi));
    if mpi == "openmpi" && emulated_hosts().is_none() && filter.is_none_or(|f| too_big.contains(f)) {
        let (out, took) = launch_mpi(mpi, &Job { case: "put_get_segment", ranks: 2, env: vec![("ACTIVERMA_SEGMENT_SIZE", "4T")] });
        let said = String::from_utf8_lossy(&out.stderr).contains("lower ACTIVERMA_SEGMENT_SIZE");
        t.check(
            format!("{too_big} [{:.1} s]", took.as_secs_f64()),
            !out.status.success() && said && took < Duration::from_secs(60),
            || show(&out),
        );
    }
    if filter.is_none() {
        let (out, took) = launch_mpi(mpi, &Job { case: "rank_crashes", ranks: 3, env: vec![] });
        t.check(
            format!("{}: a crashing rank ends the job, not hangs it [{:.1} s]", mpi_label(mpi), took.as_secs_f64()),
            !out.status.success() && took < Duration::from_secs(60),
            || show(&out),
        );
    }
    println!("multiprocess ({}): {} passed, {} failed", mpi_label(mpi), t.passed, t.failed.len());
    for f in &t.failed {
        println!("failed: {f}");
    }
    i32::from(!t.failed.is_empty())
}

/// The launcher's own contract: crashes and error exits stop the job with a clear message,
/// output is forwarded line by line (and labelled on request), a killed launcher takes its
/// ranks with it, a program started alone is a one-rank job; its command line and `info`.
fn launcher_checks(t: &mut Tally) {
    let (out, took) = launch(&Job { case: "rank_crashes", ranks: 3, env: vec![] }, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    t.check(
        "a crashing rank stops the job and is named".into(),
        !out.status.success() && err.contains("rank 1 was killed by signal 6") && took < Duration::from_secs(30),
        || show(&out),
    );

    let (out, _) = launch(&Job { case: "rank_fails", ranks: 4, env: vec![] }, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    t.check(
        "an error exit stops the job with that status".into(),
        out.status.code() == Some(3) && err.contains("rank 2 exited with status 3"),
        || show(&out),
    );

    let (out, _) = launch(&Job { case: "hello", ranks: 3, env: vec![] }, &["--label"]);
    let so = String::from_utf8_lossy(&out.stdout);
    t.check(
        "--label prefixes each line with its rank".into(),
        out.status.success() && (0..3).all(|r| so.contains(&format!("[{r}] hello from {r} of 3"))),
        || show(&out),
    );

    let (out, took) = launch(&Job { case: "sleep_forever", ranks: 2, env: vec![] }, &["--timeout", "1"]);
    t.check("--timeout stops a hung job (exit 124)".into(), out.status.code() == Some(124) && took < Duration::from_secs(10), || {
        show(&out)
    });

    // A job still running near its limit leaves its ranks' stacks in the failure report.
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(["run", "-n", "2", "--timeout", "8", "--"]).arg(std::env::current_exe().unwrap()).arg("sleep_forever");
    let out = output_with_stacks(cmd.stdin(Stdio::null()), Duration::from_secs(1));
    let err = String::from_utf8_lossy(&out.stderr);
    t.check(
        "a job near its time limit is dumped: every rank's stacks".into(),
        out.status.code() == Some(124) && err.contains("stacks of 2 rank process(es)") && err.matches("sleep_forever").count() >= 2,
        || show(&out),
    );

    // Without the launcher: a one-rank job.
    let out = Command::new(std::env::current_exe().unwrap()).args(["--rank", "single_rank_job"]).output().unwrap();
    t.check("a program started without the launcher is a one-rank job".into(), out.status.success(), || show(&out));
    // ...and launcher variables in its environment are refused, not silently ignored.
    for (var, value, ok) in [
        ("ACTIVERMA_SIZE", "abc", false),
        ("ACTIVERMA_SIZE", "4", false),
        ("ACTIVERMA_SIZE", "1", true),
        ("ACTIVERMA_SMP_CTRL_FD", "7", false),
    ] {
        let out = Command::new(std::env::current_exe().unwrap()).args(["--rank", "single_rank_job"]).env(var, value).output().unwrap();
        let named = String::from_utf8_lossy(&out.stderr).contains(&format!("{var}={value}"));
        t.check(
            format!("without the launcher, {var}={value} is {}", if ok { "accepted" } else { "refused by name" }),
            out.status.success() == ok && (ok || named),
            || show(&out),
        );
    }

    let out = Command::new(LAUNCHER).args(["run", "-n", "2", "--", "/nonexistent/program"]).output().unwrap();
    t.check(
        "a program that cannot start is reported".into(),
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("cannot start rank 0"),
        || show(&out),
    );

    // An unknown registration strategy is refused at init, by name, not silently replaced
    // (every strategy of the setting's list is available).
    let (out, _) = launch(&Job { case: "hello", ranks: 2, env: vec![("ACTIVERMA_REGISTRATION", "pin-some")] }, &[]);
    t.check(
        "ACTIVERMA_REGISTRATION=pin-some is refused by name".into(),
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("ACTIVERMA_REGISTRATION"),
        || show(&out),
    );

    let out = Command::new(LAUNCHER).args(["run", "-n", "2", "--", "true"]).env("ACTIVERMA_PROGRESS", "sometimes").output().unwrap();
    t.check(
        "a bad setting is refused with its name".into(),
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("ACTIVERMA_PROGRESS"),
        || show(&out),
    );

    killed_launcher_takes_ranks_along(t);
    crate::forwarding::checks(t);
    crate::command_line::checks(t);
}

fn killed_launcher_takes_ranks_along(t: &mut Tally) {
    for (signal, name) in [(9, "SIGKILLed"), (15, "SIGTERMed")] {
        let (pids, status) = start_then_signal_launcher(signal);
        let gone = |pid: i32| {
            // A zombie is gone too: it waits only for its reaper.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.contains(") Z ")).unwrap_or(true)
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids.iter().any(|&p| !gone(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let status_ok = signal != 15 || status.code() == Some(128 + 15);
        t.check(
            format!("a {name} launcher takes its ranks with it"),
            pids.len() == 3 && pids.iter().all(|&p| gone(p)) && status_ok,
            || format!("rank pids {pids:?}, launcher {status}"),
        );
    }
}

/// Starts a 3-rank job that sleeps, waits until every rank printed its pid, sends `signal`
/// to the launcher and returns the rank pids and the launcher's exit status.
fn start_then_signal_launcher(signal: i32) -> (Vec<i32>, std::process::ExitStatus) {
    let me = std::env::current_exe().unwrap();
    let mut launcher =
        Command::new(LAUNCHER).args(["run", "-n", "3", "--"]).arg(&me).arg("sleep_forever").stdout(Stdio::piped()).spawn().unwrap();
    let stdout = launcher.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("pid ").and_then(|p| p.parse::<i32>().ok()))
            .take(3)
            .collect::<Vec<_>>()
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reader.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = if reader.is_finished() { reader.join().unwrap() } else { vec![] };
    for &pid in &pids {
        // The job's shared memory lives in memfds, which no file system path reaches.
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        assert!(maps.contains("memfd:activerma-ctrl") && maps.contains("memfd:activerma-heaps"), "rank {pid} maps the job's memfds");
        assert!(!maps.contains("/dev/shm/"), "rank {pid} maps nothing from /dev/shm");
    }
    Command::new("kill").arg(format!("-{signal}")).arg(launcher.id().to_string()).status().unwrap();
    let status = launcher.wait().unwrap();
    (pids, status)
}
