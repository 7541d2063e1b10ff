//! `activerma bench`: OSU-style benchmarks that report ratios measured side by side in one run.
//!
//! `activerma bench` starts a 2-rank job of its own binary through the launcher (the ranks run
//! `activerma bench --rank-worker ...`). Started as a rank of an MPI job instead (2 ranks of
//! `mpirun -n 2 activerma bench`, a build with the mpi conduit), it runs as that rank and measures
//! the mpi conduit. Rank 0 measures and prints; rank 1 owns the target
//! memory and, between measurements, calls `World::progress()` in a loop (app progress) until
//! rank 0 tells it what to do next through a command word in its segment, which it polls
//! locally. Every benchmark table carries a ratio to a physical limit measured in the same run
//! (memcpy, a cache-line hand-off between the two processes, one raw process_vm_writev/readv),
//! and a summary table checks the targets. On the mpi conduit the limits that need one shared-memory
//! host (the hand-off through a memfd opened via /proc, raw process_vm_writev/readv) are not
//! measured: there the limits are the MPI peers' numbers (`bench/compare_mpi_conduit.sh`).

mod apps;
mod checkpoint;
mod firehose;

mod dsm_apps;
mod dsm_micro;
mod firehose_threads;
mod ft_sort;
mod get_logging;
mod jobs;
mod limits;
mod machine;
mod node_latency;
mod osu_tables;
mod overlap;
mod page_buf;
mod part;
mod part_pair;
mod part_sweeps;
mod protocols;
mod quiet;
mod report_runner;
mod rma;
mod rows;
mod scale;
mod shm;
mod strided;
mod timing;

use activerma::{Actions, AmCtx, HandlerId, LogEntry, Notify, Prot, RemotePtr, Segment, World, FIRST_USER_HANDLER};
use activerma_core::settings;
use activerma_launcher::RunArgs;
use osu_tables::Report;
pub use report_runner::{main as report_main, ReportArgs};
use shm::SharedPage;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use timing::Plan;

type BResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Operations per window in the bandwidth tests (osu_put_bw's default).
pub const WINDOW: usize = 64;
/// Sizes at which memcpy is always measured (besides every benchmark size).
const MEMCPY_SIZES: [usize; 3] = [64 << 10, 1 << 20, 4 << 20];

const PING: HandlerId = FIRST_USER_HANDLER;
const PONG: HandlerId = FIRST_USER_HANDLER + 1;
/// Offsets in the control segment: the command word rank 1 polls, and (on its own cache lines)
/// the word the segment atomics hit.
const CMD_OFF: usize = 0;
const ATOMIC_OFF: usize = 2048;
/// Where rank 1's access-log handler acknowledges active puts, in rank 0's control segment.
const ACK_OFF: usize = 1024;
pub(crate) const CMD_SERVE: u64 = 0;
const CMD_ECHO: u64 = 1;
const CMD_EXIT: u64 = 2;
const CMD_PONG: u64 = 3;
/// Rank 1 computes (a busy target, the ARMCI paper's Figure 10): BUSY_SLICE_US of work that
/// never calls the runtime, then one progress call, again and again.
pub(crate) const CMD_BUSY: u64 = 4;
pub(crate) const BUSY_SLICE_US: u64 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Which {
    /// Blocking put, remote complete, to a segment and to exposed private memory.
    PutLatency,
    /// Blocking get, to a segment and to exposed private memory.
    GetLatency,
    /// Windows of 64 implicit non-blocking puts, then a flush (like osu_put_bw).
    PutBw,
    /// Windows of 64 implicit non-blocking gets, then a flush.
    GetBw,
    /// 8-byte fetch-add, to a segment and to private memory (served by the target).
    AtomicLatency,
    /// Short active message to rank 1 whose handler replies (rank 1 polls, app progress).
    AmRoundtrip,
    /// 8-byte active put (W=0, WL=1, WLD=1) into rank 1's access log; its poll-mode handler
    /// acknowledges with a put (one host only)
    ActivePut,
    /// A 2-D patch (256-1024 rows of 8 B - 8 KiB) to and from rank 1's segment and private
    /// memory by every ACTIVERMA_NONCONTIG method side by side: host-assisted scatter/gather,
    /// one operation per row, packed into one message (not part of the default set)
    Strided,
    /// The ARMCI paper's contiguous protocol study: registration cost against memcpy, put/get
    /// of 8 B - 4 MiB to rank 1's segment by every transfer protocol (zero-copy, buffered,
    /// pipelined, dynamic registration) against the raw core, gets with rank 1 idle and busy
    /// (not part of the default set)
    ArmciProtocols,
    /// The ARMCI paper's Figure 7(a): how much of a non-blocking contiguous get computation
    /// hides, zero-copy against buffered and pipelined, on the raw conduit and with the
    /// modelled network at the paper's InfiniBand numbers (a 2-rank job per network; not part
    /// of the default set)
    ArmciOverlap,
    /// Print the physical limits' tables (they are measured in every run: the ratios need them).
    Limits,
    /// The Active Access hash table: every variant (AA-Poll/Int/SP, RMA, AM, AM-Exp,
    /// AM-Onload, AM-Ints) on the raw conduit and the modelled network, and the IOTLB study
    /// (jobs of --ranks ranks; not part of the default set: minutes)
    Dht,
    /// The Active Access access counter against remote atomics, an active key-value design and
    /// counting at the source (jobs of --ranks ranks; not part of the default set)
    Counter,
    /// The PART paper's application run: a halo-exchange Jacobi stencil whose exchange buffers
    /// are exposed private memory, under ACTIVERMA_REGISTRATION=part with untouched buffers vs
    /// pre-touched ones (jobs of --ranks ranks; not part of the default set)
    Stencil,
    /// PART: 4 KiB put with no fault, a fault at the target resolved by ERR or a 100 us / 1 ms
    /// time-out, a fault in the origin's buffer (with and without pretouch), and into mlock-pinned
    /// memory (a 2-rank job per case; not part of the default set)
    PartLatency,
    /// PART, the paper's Figure 10: 4 KiB .. 1 MiB puts with every target page evicted (outside
    /// the timed put), PIO / PI4 / PIA / pre-touched vs no fault (not part of the default set)
    PartAllFaults,
    /// PART, the paper's Figure 11: 1 MiB puts, 0 .. 100 % of target pages evicted, PIO vs PIA
    /// (not part of the default set)
    PartFaultFreq,
    /// Firehose's figure 3: 64 KiB random puts over a working set growing past M and
    /// M + MAXVICTIM, firehose vs pin-all vs rendezvous vs rendezvous-unpin, with hit rates
    /// (a 2-rank job per strategy; not part of the default set)
    FirehoseWs,
    /// Active Access's incremental checkpointing (section 4.3): full, incremental (access log +
    /// MMU) and trap-first-write checkpoints of a stencil-like and a DHT-like workload, 1/10/50 %
    /// of pages modified per interval; bytes written, checkpoint time, the tracking's cost on
    /// puts (a 2-rank job per network; not part of the default set)
    Checkpoint,
    /// Active Access's logging of gets (section 4.4, Figure 9a): 8-byte gets to random ranks,
    /// each logged at the target by Active Access, by RMA (fetch-add + put of the record) or by
    /// an active message, against no logging (jobs of 2, 3, 4 ranks per network; not part of
    /// the default set)
    GetLogging,
    /// Active Access's fault-tolerant sort (section 5.2.4, Figure 9b): the exchange time of a
    /// parallel sort whose gets are logged by Active Access, RMA or active messages, against
    /// no logging (a job per network and size; --ranks sets the ranks, default 2; not part of
    /// the default set)
    FtSort,
    /// Firehose-SMP (figure 8, GUPS): 1, 2, 4, 8 threads of one rank sharing a Firehose (per-thread
    /// and aggregate put rate, deadlock-avoidance share), and shared vs separate tables' misses
    /// (jobs of 2 and T+1 ranks; not part of the default set)
    FirehoseThreads,
    /// The object DSM's micro-benchmarks (the Jackal paper's Table 1): locks/s, barriers/s,
    /// object-request latency with and without the RDMA reply, invalidation / in-place /
    /// diff-array update bandwidth; 1, 2, 4 ranks, a job per protocol and network (not part of
    /// the default set)
    Dsm,
    /// Water and LU on the object DSM (the Jackal paper's Table 2): wall time per protocol, 1,
    /// 2, 4 ranks, raw and modelled, each checked against its serial run (not part of the
    /// default set: minutes)
    DsmApps,
    /// One-host jobs of 2 to 256 ranks, on one host and over two emulated hosts: start-up time,
    /// control memory per rank (address space; resident after an all-to-all exchange of active
    /// messages), barrier latency, all-to-all message rate (ranks beyond the cores are
    /// oversubscribed; not part of the default set)
    Scale,
    /// 8-byte put and get latency from rank 0 to every rank of the job, same node or not (run
    /// under an MPI launcher it measures that job; alone, smp jobs on one and on two emulated
    /// hosts; bench/compare_nodes.sh; not part of the default set)
    NodeLatency,
}

const ALL: [Which; 8] = [
    Which::PutLatency,
    Which::GetLatency,
    Which::PutBw,
    Which::GetBw,
    Which::AtomicLatency,
    Which::AmRoundtrip,
    Which::ActivePut,
    Which::Limits,
];

fn parse_bytes(s: &str) -> Result<usize, String> {
    match settings::parse_size(s) {
        // A bandwidth window is 64 messages, and three buffers hold one: 16M -> 3 GiB.
        Some(v) if (8..=(16u64 << 20)).contains(&v) => Ok(v as usize),
        Some(_) => Err("must be between 8 bytes and 16M".into()),
        None => Err("expected a size such as 65536, 64K, 4M".into()),
    }
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Benchmarks to run (default: all).
    #[arg(value_enum, value_name = "WHICH")]
    pub which: Vec<Which>,
    /// Also write every measured row as a JSON line to FILE (the report's row schema:
    /// benchmark, case, params, value, unit, reps, min/median/max, machine, commit, settings).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Fewer sizes (8 B, 64 B, 512 B, 4K, 64K, 1M), repetitions and iterations: a few seconds.
    #[arg(long)]
    pub quick: bool,
    /// Largest message size, powers of 2 from 8 B up to it (default 4M; 1M with --quick).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_size: Option<usize>,
    /// Repetitions of every timed batch; the median is reported (default 9 for latency and 5
    /// for bandwidth; 5 and 3 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub reps: Option<u32>,
    /// Do not pin rank 0 and rank 1 to two different CPUs.
    #[arg(long)]
    pub no_bind: bool,
    /// dht, counter: ranks per job, e.g. 2,4 (default 2).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub ranks: Vec<u32>,
    /// dht: collision ratios in percent (default 5,25).
    #[arg(long, value_delimiter = ',')]
    pub collisions: Vec<f64>,
    /// dht: computation between inserts in ns, e.g. 0,1000 (default 0).
    #[arg(long, value_delimiter = ',')]
    pub comp_ns: Vec<u64>,
    /// dht, counter: operations per rank (default 100000; 30000 with --quick).
    #[arg(long)]
    pub ops: Option<usize>,
    /// Internal: run as one rank of the benchmark job (set by `activerma bench` itself).
    #[arg(long, hide = true)]
    pub rank_worker: bool,
    /// Internal: the application job this rank belongs to (set by `bench dht` / `bench counter`).
    #[arg(long, hide = true)]
    pub job: Option<String>,
}

/// What to measure, derived from the arguments (identically on every rank).
pub struct Config {
    pub which: Vec<Which>,
    pub sizes: Vec<usize>,
    pub max_size: usize,
    pub lat: Plan,
    pub bw: Plan,
    pub quick: bool,
}

impl Config {
    fn new(a: &BenchArgs) -> Config {
        let mut which = if a.which.is_empty() { ALL.to_vec() } else { a.which.clone() };
        which.sort();
        which.dedup();
        let max_size = a.max_size.unwrap_or(if a.quick { 1 << 20 } else { 4 << 20 });
        let sizes: Vec<usize> = if a.quick {
            [8, 64, 512, 4 << 10, 64 << 10, 1 << 20, 4 << 20].into_iter().filter(|&s| s <= max_size).collect()
        } else {
            std::iter::successors(Some(8usize), |s| Some(s * 2)).take_while(|&s| s <= max_size).collect()
        };
        let reps = a.reps.map(|r| r as usize).unwrap_or(if a.quick { 5 } else { 9 });
        let lat = Plan { reps, batch_ns: if a.quick { 1e6 } else { 4e6 }, min_iters: if a.quick { 3 } else { 10 }, max_iters: 200_000 };
        // A bandwidth operation is a whole window (up to 64 x 4 MiB): fewer, longer batches.
        let bw_reps = a.reps.map(|r| r as usize).unwrap_or(if a.quick { 3 } else { 5 });
        let bw =
            Plan { reps: bw_reps, batch_ns: if a.quick { 4e6 } else { 10e6 }, min_iters: if a.quick { 1 } else { 2 }, max_iters: 10_000 };
        Config { which, sizes, max_size, lat, bw, quick: a.quick }
    }

    pub fn wants(&self, w: Which) -> bool {
        self.which.contains(&w)
    }

    /// Bytes of the data segment, of rank 1's private buffer and of rank 0's buffer: a whole
    /// bandwidth window of the largest size (distinct offsets, like osu_put_bw), at least 4 MiB.
    pub fn window_bytes(&self) -> usize {
        (WINDOW * self.max_size).max(4 << 20)
    }

    /// Sizes at which the limits are measured.
    pub fn memcpy_sizes(&self) -> Vec<usize> {
        let mut v = self.sizes.clone();
        v.extend(MEMCPY_SIZES);
        v.sort_unstable();
        v.dedup();
        v
    }

    fn segment_bytes_needed(&self) -> u64 {
        (self.window_bytes() + (2 << 20)) as u64
    }
}

/// True when this process is a rank of a job that an MPI launcher started (and activerma will
/// use the mpi conduit for it): then it runs as that rank instead of starting a job of its own.
pub(crate) fn started_as_mpi_rank() -> bool {
    if std::env::var_os(activerma_transport::smp::ENV_RANK).is_some() {
        return false; // a rank of our own launcher
    }
    match settings::get_enum(settings::CONDUIT) {
        Ok("mpi") => true,
        Ok("smp") => false,
        Ok(_) => activerma_transport::started_by_mpi_launcher(),
        Err(_) => false, // the launcher reports the bad setting
    }
}

/// Entry point of `activerma bench`.
pub fn main(mut args: BenchArgs) -> i32 {
    if let Some(path) = &args.json {
        // The process the user started empties the file; its ranks and jobs append.
        let started_by_us = args.rank_worker || args.job.is_some() || std::env::var_os(activerma_transport::smp::ENV_RANK).is_some();
        if let Err(e) = rows::open(path, !started_by_us && !started_as_mpi_rank()) {
            eprintln!("activerma bench: {e}");
            return 2;
        }
    }
    if let Some(job) = &args.job {
        return report_exit(apps::worker(job));
    }
    // Benchmarks that run their own jobs, one per configuration (registration settings are
    // job-wide): (which, "am I one of its ranks?", the rank's work, the parent's work).
    type Check = fn() -> bool;
    type Step = fn() -> BResult<()>;
    type Run = fn(&BenchArgs) -> BResult<()>;
    let own_jobs: [(Which, Check, Step, Run); 13] = [
        (Which::Scale, scale::is_worker, scale::worker, scale::scale),
        (Which::NodeLatency, node_latency::is_worker, node_latency::worker, node_latency::node_latency),
        (Which::Dsm, dsm_micro::is_worker, dsm_micro::worker, dsm_micro::dsm),
        (Which::DsmApps, dsm_apps::is_worker, dsm_apps::worker, dsm_apps::dsm_apps),
        (Which::FtSort, ft_sort::is_worker, ft_sort::worker, ft_sort::ft_sort),
        (Which::GetLogging, get_logging::is_worker, get_logging::worker, get_logging::get_logging),
        (Which::Checkpoint, checkpoint::is_worker, checkpoint::worker, checkpoint::checkpoint),
        (Which::ArmciOverlap, overlap::is_worker, overlap::worker, overlap::overlap),
        (Which::PartLatency, part::is_worker, part::worker, part::latency),
        (Which::PartAllFaults, part_sweeps::is_sweep_worker, part_sweeps::sweep_worker, part_sweeps::all_faults),
        (Which::PartFaultFreq, part_sweeps::is_sweep_worker, part_sweeps::sweep_worker, part_sweeps::fault_freq),
        (Which::FirehoseThreads, firehose_threads::is_worker, firehose_threads::worker, firehose_threads::threads),
        (Which::FirehoseWs, firehose::is_worker, firehose::worker, firehose::working_set),
    ];
    for (which, is_worker, worker, run) in own_jobs {
        if !args.which.contains(&which) {
            continue;
        }
        if is_worker() {
            return report_exit(worker());
        }
        if !args.rank_worker {
            print_figures(Some(which));
            if report_exit(run(&args)) != 0 {
                return 1;
            }
        }
        args.which.retain(|w| *w != which);
        if args.which.is_empty() {
            return 0;
        }
    }
    let app_benches: Vec<Which> =
        args.which.iter().copied().filter(|w| matches!(w, Which::Dht | Which::Counter | Which::Stencil)).collect();
    if !app_benches.is_empty() {
        args.which.retain(|w| !app_benches.contains(w));
        for w in app_benches {
            print_figures(Some(w));
            let r = match w {
                Which::Dht => apps::dht(&args),
                Which::Stencil => apps::stencil(&args),
                _ => apps::counter(&args),
            };
            if report_exit(r) != 0 {
                return 1;
            }
        }
        if args.which.is_empty() {
            return 0;
        }
    }
    if args.rank_worker || std::env::var_os(activerma_transport::smp::ENV_RANK).is_some() || started_as_mpi_rank() {
        return match rank_main(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("activerma bench: {e}");
                1
            }
        };
    }
    launch(&args)
}

fn report_exit(r: BResult<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("activerma bench: {e}");
            1
        }
    }
}

/// Says which figures of the papers a benchmark stands for, from the registry `activerma
/// report` runs (`crates/report/figures.toml`): the OSU-style set is its benchmark "core".
fn print_figures(which: Option<Which>) {
    let name = which.and_then(|w| clap::ValueEnum::to_possible_value(&w)).map_or("core".to_string(), |v| v.get_name().to_string());
    let reg = activerma_report::Registry::builtin();
    let figures: Vec<String> =
        reg.figures_of(&name).map(|f| format!("{} {}", reg.paper.get(&f.paper).map_or("", |p| p.title.as_str()), f.label)).collect();
    if !figures.is_empty() {
        println!("# stands for: {} (`activerma report --only {name}` draws them)", figures.join(", "));
    }
}

/// Starts the 2-rank job: this binary, through the launcher.
fn launch(args: &BenchArgs) -> i32 {
    print_figures(None);
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("activerma bench: cannot find my own binary: {e}");
            return 2;
        }
    };
    let cfg = Config::new(args);
    // The data segment holds a whole bandwidth window; grow the symmetric heap if needed.
    // (A bad ACTIVERMA_SEGMENT_SIZE is left for the launcher to report.)
    let need = cfg.segment_bytes_needed();
    let segment_size = match settings::get_u64(settings::SEGMENT_SIZE) {
        Ok(have) if have < need => Some(need.next_multiple_of(1 << 20).to_string()),
        _ => None,
    };
    let mut program = vec![exe.to_string_lossy().into_owned(), "bench".to_string(), "--rank-worker".to_string()];
    program.extend(std::env::args_os().skip(2).map(|a| a.to_string_lossy().into_owned()));
    activerma_launcher::run(RunArgs {
        n: 2,
        label: false,
        timeout: None,
        segment_size,
        progress: None,
        restart_from: None,
        respawn: 0,
        program,
    })
}

/// Pins the calling thread to the `rank`-th CPU it may run on (if there are two or more),
/// as MPI launchers bind ranks to cores; returns the CPU. A process that may run on one CPU
/// only (an MPI launcher bound it already) stays there, and that CPU is returned.
fn bind_to_cpu(rank: usize) -> Option<usize> {
    // SAFETY: cpu_set_t is plain data; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        if cpus.len() < 2 {
            return cpus.first().copied();
        }
        let cpu = cpus[rank % cpus.len()];
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0).then_some(cpu)
    }
}

/// What each rank tells the other at start-up.
struct Hello {
    pid: u32,
    /// Rank 0: the benchmark's shared page descriptor (-1 if none); rank 1: unused.
    shm_fd: i32,
    /// Rank 1: the exposed private buffer.
    priv_addr: u64,
    priv_len: u64,
    cpu: i64,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(36);
        v.extend(self.pid.to_le_bytes());
        v.extend(self.shm_fd.to_le_bytes());
        v.extend(self.priv_addr.to_le_bytes());
        v.extend(self.priv_len.to_le_bytes());
        v.extend(self.cpu.to_le_bytes());
        v
    }
    fn decode(b: &[u8]) -> Hello {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Hello { pid: u32_at(0), shm_fd: u32_at(4) as i32, priv_addr: u64_at(8), priv_len: u64_at(16), cpu: u64_at(24) as i64 }
    }
}

/// Everything rank 0 measures with.
pub struct Origin<'a> {
    pub world: &'a World,
    pub cfg: &'a Config,
    pub ctrl: &'a Segment,
    pub data: &'a Segment,
    /// Rank 1's exposed private buffer.
    pub private: RemotePtr,
    pub peer_pid: i32,
    /// Rank 1 is a process on this host whose memory the kernel lets us reach (smp conduit):
    /// the raw process_vm_writev/readv and hand-off limits are measured. False on the mpi
    /// conduit, where the limits are the MPI peers' (bench/compare_mpi_conduit.sh).
    pub host_limits: bool,
    pub shm: Option<&'a SharedPage>,
    /// Source of puts and destination of gets: a whole window, touched.
    pub local: page_buf::PageBuf,
    /// Second buffer for memcpy and for checking transferred bytes.
    pub scratch: Vec<u8>,
    pub pongs: Arc<AtomicU64>,
    /// Rank 1's page marked for active puts (None where marks on segments are unsupported).
    pub active_page: Option<RemotePtr>,
    pub report: Report,
}

impl Origin<'_> {
    /// Tells rank 1 what to do next (an atomic swap on the command word in its segment).
    pub fn command(&self, cmd: u64) -> BResult<()> {
        self.world.swap(self.ctrl.remote(1, CMD_OFF), cmd)?;
        Ok(())
    }

    fn run(&mut self) -> BResult<()> {
        self.limits(self.cfg.wants(Which::Limits))?;
        for w in self.cfg.which.clone() {
            match w {
                Which::PutLatency => self.latency(true)?,
                Which::GetLatency => self.latency(false)?,
                Which::PutBw => self.bandwidth(true)?,
                Which::GetBw => self.bandwidth(false)?,
                Which::AtomicLatency => self.atomics()?,
                Which::AmRoundtrip => self.am_roundtrip()?,
                Which::ActivePut => self.active_put()?,
                Which::Strided => self.strided()?,
                Which::ArmciProtocols => self.armci_protocols()?,
                Which::Limits
                | Which::Dht
                | Which::Counter
                | Which::Stencil
                | Which::PartLatency
                | Which::PartAllFaults
                | Which::PartFaultFreq
                | Which::FirehoseWs
                | Which::ArmciOverlap
                | Which::Checkpoint
                | Which::GetLogging
                | Which::FtSort
                | Which::FirehoseThreads
                | Which::Dsm
                | Which::DsmApps
                | Which::Scale
                | Which::NodeLatency => {}
            }
        }
        // Again at the end, quietly: the summary judges against the better of both passes.
        self.limits(false)?;
        self.report.summary();
        Ok(())
    }
}

fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn rank_main(args: &BenchArgs) -> BResult<()> {
    let cfg = Config::new(args);
    let under_mpi = started_as_mpi_rank();
    if under_mpi {
        grow_segment_for_mpi(&cfg)?;
    }
    let world = activerma::init()?;
    if world.size() != 2 {
        let how = if under_mpi { "start it as `mpirun -n 2 activerma bench ...`" } else { "start it with `activerma bench`" };
        return Err(format!("the benchmarks run with exactly 2 ranks; this job has {} ({how})", world.size()).into());
    }
    // The limits that need both ranks on one host, reaching each other's memory through the
    // kernel, are measured on smp only; on the mpi conduit the ranks may be on two hosts.
    let host_limits = world.conduit_name() == "smp";
    let me = world.rank();
    let cpu = if args.no_bind { None } else { bind_to_cpu(me) };

    // Active-message round trip: rank 1's PING handler answers with a PONG, which counts.
    let pongs = Arc::new(AtomicU64::new(0));
    world.register_handler(PING, Arc::new(|ctx: &AmCtx, msg: &[u8]| ctx.reply(PONG, ctx.token, msg)))?;
    let counter = pongs.clone();
    world.register_handler(
        PONG,
        Arc::new(move |_: &AmCtx, _: &[u8]| {
            counter.fetch_add(1, Ordering::Release);
        }),
    )?;
    world.barrier()?; // handlers are in place everywhere before any message

    let ctrl = world.alloc_segment(4096)?;
    let data = world.alloc_segment(cfg.window_bytes())?;
    let aa = world.alloc_segment(4096)?;
    let active_page = if host_limits { Some(mark_active_page(&world, &ctrl, &aa)?) } else { None };
    // Rank 1's private memory: a whole window plus a page for the private atomic, touched.
    let mut private = if me == 1 { vec![0x5au8; cfg.window_bytes() + 4096] } else { Vec::new() };
    let exposed = if me == 1 { Some(world.expose(&mut private, Prot::ReadWrite)?) } else { None };
    let (shm, shm_fd) = if me == 0 && host_limits {
        match SharedPage::create() {
            Ok((p, fd)) => (Some(p), fd),
            Err(e) => {
                eprintln!("activerma bench: no raw shared page, hand-off limits will be missing: {e}");
                (None, -1)
            }
        }
    } else {
        (None, -1)
    };
    let hello = Hello {
        pid: std::process::id(),
        shm_fd,
        priv_addr: exposed.as_ref().map_or(0, |e| e.addr() as u64),
        priv_len: exposed.as_ref().map_or(0, |e| e.len() as u64),
        cpu: cpu.map_or(-1, |c| c as i64),
    };
    let all = world.allgather(&hello.encode())?;
    let peer = Hello::decode(&all[1 - me]);
    let shm = if me == 1 && peer.shm_fd >= 0 {
        match SharedPage::open(peer.pid, peer.shm_fd) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("activerma bench: rank 1 cannot open the raw shared page, hand-off limits will be missing: {e}");
                None
            }
        }
    } else {
        shm
    };
    let shm_ok = world.allgather(&[shm.is_some() as u8])?.iter().all(|v| v[0] == 1);
    world.barrier()?;

    if me == 1 {
        serve(&world, &ctrl, if shm_ok { shm.as_ref() } else { None });
        registration_counters(&world)?;
        world.barrier()?;
        drop(exposed);
        world.finalize()?;
        return Ok(());
    }

    let local_len = cfg.window_bytes();
    let mut report = Report::new();
    report.meta(&world, &cfg, [hello.cpu, peer.cpu], load_avg());
    let mut o = Origin {
        world: &world,
        cfg: &cfg,
        ctrl: &ctrl,
        data: &data,
        private: RemotePtr::new(1, peer.priv_addr as usize),
        peer_pid: peer.pid as i32,
        host_limits,
        shm: if shm_ok { shm.as_ref() } else { None },
        local: page_buf::PageBuf::filled(local_len, |i| (i % 251) as u8),
        scratch: vec![1u8; cfg.max_size.max(4 << 20)],
        pongs,
        active_page,
        report,
    };
    debug_assert!(peer.priv_len as usize >= cfg.window_bytes() + 4096);
    let result = o.run();
    let stop = o.command(CMD_EXIT);
    if stop.is_ok() {
        let both = registration_counters(&world)?;
        o.report.registration(world.registration_strategy().name(), &both);
    }
    o.report.finish(load_avg());
    drop(o);
    world.barrier()?;
    world.finalize()?;
    result?;
    stop?;
    Ok(())
}

/// Every rank's registration counters (name, value), in rank order: the origin counts hits and
/// misses, the target pins.
fn registration_counters(world: &World) -> BResult<Vec<Vec<(&'static str, u64)>>> {
    let mut mine = world.registration_stats().snapshot();
    if world.registration_strategy() == activerma::Strategy::Part {
        // PART keeps its own counters (faults, NACKs, ERRs, resends): printed beside these.
        mine.extend(world.part_stats().snapshot());
    }
    if let Some(s) = world.firehose_stats() {
        // Firehose keeps its own counters (moves, victims reused, ...), printed beside these.
        mine.extend(firehose_names().iter().zip(s.snapshot()).map(|(&k, (_, v))| (k, v)));
    }
    let bytes: Vec<u8> = mine.iter().flat_map(|&(_, v)| v.to_le_bytes()).collect();
    let all = world.allgather(&bytes)?;
    Ok(all
        .iter()
        .map(|b| mine.iter().zip(b.chunks_exact(8)).map(|(&(k, _), v)| (k, u64::from_le_bytes(v.try_into().unwrap()))).collect())
        .collect())
}

/// Firehose's counter names, prefixed `firehose_` (its pins and bytes would otherwise read as
/// the Registrar's); made once.
fn firehose_names() -> &'static [&'static str] {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        activerma::FirehoseStats::default()
            .snapshot()
            .into_iter()
            .map(|(k, _)| &*Box::leak(format!("firehose_{k}").into_boxed_str()))
            .collect()
    })
}

/// Under an MPI launcher nobody grows the symmetric heap for us (`activerma bench` asks its own
/// launcher to): do it here, before init, identically on every rank, if the data segment needs
/// more than ACTIVERMA_SEGMENT_SIZE.
fn grow_segment_for_mpi(cfg: &Config) -> BResult<()> {
    let need = cfg.segment_bytes_needed();
    let have = settings::get_u64(settings::SEGMENT_SIZE)?;
    if have < need {
        // Still single-threaded: MPI and activerma start their threads in init, below.
        std::env::set_var(settings::SEGMENT_SIZE, need.next_multiple_of(1 << 20).to_string());
    }
    Ok(())
}

/// Rank 1 marks its `aa` page W=0, WL=1, WLD=1 (active puts into domain 1's log, polled);
/// the handler acknowledges every entry by writing its sequence number + 1 into rank 0's
/// control segment at ACK_OFF.
fn mark_active_page(world: &World, ctrl: &Segment, aa: &Segment) -> BResult<RemotePtr> {
    if world.rank() == 1 {
        let (w, ack) = (world.clone(), ctrl.remote(0, ACK_OFF));
        world.create_log(
            1,
            1 << 16,
            Notify::Poll,
            Arc::new(move |e: &LogEntry| {
                let _ = w.put(ack, &(e.meta.seq + 1).to_le_bytes());
            }),
        )?;
        world.assoc_pages(aa.as_ptr(), 4096, Actions::WL | Actions::WLD, Some(1))?;
    }
    world.barrier()?;
    Ok(aa.remote(1, 0))
}

/// Rank 1: make progress (app mode) and follow rank 0's commands until told to exit.
/// Work that touches no runtime state: a dependent chain of multiplications for `us`.
fn compute_for_us(us: u64) {
    let end = activerma_core::clock::now_ns() + us * 1000;
    let mut x = 1u64;
    while activerma_core::clock::now_ns() < end {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn serve(world: &World, ctrl: &Segment, shm: Option<&SharedPage>) {
    // SAFETY: the command word is 8-aligned in our own segment; rank 0 changes it only with
    // remote atomics (atomic_direct), so an atomic view is the right one.
    let cmd = unsafe { &*(ctrl.as_ptr().add(CMD_OFF) as *const AtomicU64) };
    let mut buf = vec![0u8; shm::DATA_MAX];
    loop {
        match cmd.load(Ordering::Acquire) {
            CMD_EXIT => return,
            CMD_ECHO if shm.is_some() => shm.unwrap().echo(&mut buf, || cmd.load(Ordering::Relaxed) == CMD_ECHO),
            CMD_PONG if shm.is_some() => shm.unwrap().pong(|| cmd.load(Ordering::Relaxed) == CMD_PONG),
            CMD_BUSY => {
                compute_for_us(BUSY_SLICE_US);
                world.progress();
            }
            _ => {
                world.progress();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BenchArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }

    /// The figure registry names `activerma bench` invocations: each must be one this binary
    /// accepts, full and --quick, so `activerma report` never starts a benchmark that refuses
    /// its arguments.
    #[test]
    fn every_registered_benchmark_parses() {
        let reg = activerma_report::Registry::builtin();
        for b in reg.benchmark.iter().filter(|b| b.script.is_none()) {
            for args in [&b.args, &b.quick_args] {
                let argv = std::iter::once("bench".to_string()).chain(args.iter().cloned());
                if let Err(e) = Bench::try_parse_from(argv) {
                    panic!("benchmark {} of figures.toml: `activerma bench {}` is refused: {e}", b.name, args.join(" "));
                }
            }
        }
    }
}
