//! The copy engine (ACTIVERMA_COPY_ENGINE): one helper thread per process that stands in for a
//! NIC's DMA engine, so that a non-blocking strided or vector transfer into a segment of this node can
//! move while the program computes even where no target runs a data server (an MPI program at
//! MPI_THREAD_FUNNELED or SERIALIZED, or any program under ACTIVERMA_PROGRESS=app). The
//! origin checks and books the transfer at issue, exactly as the copy it would make then; the
//! engine only runs the copies. It never calls MPI or the runtime: it touches the origin's
//! buffer and the target's segment, both mapped in this process. Design and measurements:
//! docs/design/armci.md, "The copy engine".
//!
//! ```text
//! start:         the engine thread, at init (when the run has an engine)
//! submit(job):   queue.push(job); unpark the thread
//! engine thread: loop { job = queue.pop()
//!                       job? claim it (QUEUED -> RUNNING), copy every piece, DONE (release)
//!                       none: poll for POLL, then park until the next submit }
//! complete(job): DONE? return
//!                claim it ourselves (QUEUED -> RUNNING: the engine has not started it) and
//!                copy here: never wait behind a busy or descheduled engine
//!                otherwise the engine is copying it: spin (with the runtime's backoff) to DONE
//! ```
//!
//! Poll, then sleep: with a spare CPU a polling engine hides 92-97 % of a 2-D get, while one
//! woken by a futex per job hides either 90 % or nothing (waking an idle vCPU costs what the
//! copy does); with every CPU busy a polling engine steals the program's time slices
//! (bench/copy_engine_probe.c, bench/README.md). So it polls for a while after each job and
//! then parks, and `auto` starts it only where the process has a CPU to spare.

use crate::strided::{copy_pieces, Direction, StridedPattern};
use crate::Proto;
use activerma_core::backoff::Backoff;
use activerma_core::counters::bump;
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast};
use activerma_transport::Conduit;
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the engine polls for the next job after the last one before it parks: longer than
/// a typical compute phase between a program's non-blocking transfers, short enough that an
/// idle engine gives its CPU back soon.
const POLL: Duration = Duration::from_micros(200);

const QUEUED: u32 = 0;
const RUNNING: u32 = 1;
const DONE: u32 = 2;

/// One transfer to copy, between the target's segment (mapped here) and the origin's buffer.
pub(crate) struct Job {
    state: AtomicU32,
    work: Work,
    direction: Direction,
}

enum Work {
    /// A strided transfer: the pattern's pieces at `remote + r` and `local + l`, for every
    /// (r, l) of the pattern.
    Strided { remote: *mut u8, local: *mut u8, pattern: StridedPattern },
    /// A list (a vector transfer): (the piece in the segment, mapped here; in the buffer; bytes).
    Pieces(Vec<(*mut u8, *mut u8, usize)>),
}

// SAFETY: the pointers are into a segment mapped for the life of the job and into the buffer
// the submitting transfer borrows until `complete` returns (PendingTransfer's wait and drop
// call it); only the thread that claimed the job (QUEUED -> RUNNING) dereferences them, and
// nobody does after DONE.
unsafe impl Send for Job {}
unsafe impl Sync for Job {}

impl Job {
    /// # Safety
    /// Every piece of `pattern` lies inside `remote`'s mapping and inside the buffer at
    /// `local`, and both stay valid and otherwise untouched until `complete` returns for it.
    pub(crate) unsafe fn new(remote: *mut u8, local: *mut u8, pattern: StridedPattern, direction: Direction) -> Job {
        Job { state: AtomicU32::new(QUEUED), work: Work::Strided { remote, local, pattern }, direction }
    }

    /// # Safety
    /// As `new`, for every piece (in the segment mapped here, in the buffer, bytes).
    pub(crate) unsafe fn pieces(pieces: Vec<(*mut u8, *mut u8, usize)>, direction: Direction) -> Job {
        Job { state: AtomicU32::new(QUEUED), work: Work::Pieces(pieces), direction }
    }

    /// Whether the bytes are in place (acquire: the copies are visible to the caller).
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Copies the job if nobody has claimed it yet; returns whether this call did.
    fn run_if_unclaimed(&self) -> bool {
        if self.state.compare_exchange(QUEUED, RUNNING, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        // Orders the reads after whatever the submitter saw (as the origin's own copy would).
        fence(Ordering::Acquire);
        // SAFETY: the contract of `Job::new` / `Job::pieces`; this thread claimed the job.
        unsafe {
            match &self.work {
                Work::Strided { remote, local, pattern } => pattern.copy_mapped(*remote, *local, self.direction),
                Work::Pieces(pieces) => copy_pieces(pieces, self.direction),
            }
        }
        self.state.store(DONE, Ordering::Release);
        true
    }
}

/// Waits until `job`'s bytes are in place, copying them here if the engine has not started
/// on them; returns whether this thread copied them (counted as taken back).
pub(crate) fn complete(job: &Job) -> bool {
    if job.is_done() {
        return false;
    }
    if job.run_if_unclaimed() {
        return true;
    }
    let mut backoff = Backoff::new();
    while !job.is_done() {
        backoff.snooze();
    }
    false
}

impl Proto {
    /// A non-blocking transfer handed to this process's copy engine, checked, booked and
    /// counted now as the copy at issue it replaces (the strided shortcut of
    /// `get_strided_moved`, or `get_start`'s direct path for a contiguous get, a pattern of
    /// one piece): when the run has an engine, the transfer is of ACTIVERMA_NB_TARGET_FROM
    /// bytes or more, and all of it is plain segment memory mapped here. Returns the job and
    /// the modelled time the transfer completes at; None with nothing done otherwise (the
    /// caller moves it).
    ///
    /// # Safety
    /// `local` (`local_len` bytes) is the caller's buffer, left to the job until its transfer
    /// completes it (`complete`, from the wait or the drop).
    pub(crate) unsafe fn copy_engine_job(
        &self,
        rank: Rank,
        addr: usize,
        pattern: &StridedPattern,
        local: *mut u8,
        local_len: usize,
        direction: Direction,
    ) -> Result<Option<(Arc<Job>, u64)>> {
        let bytes = pattern.bytes();
        if !self.engine_takes(bytes) {
            return Ok(None);
        }
        pattern.check_local(local_len)?;
        let kind = if direction == Direction::Get { AccessKind::Get } else { AccessKind::Put };
        let contiguous = pattern.counts.is_empty();
        let extent = pattern.remote_extent()?;
        let found = if contiguous { self.segment_fast(rank, addr, extent, kind) } else { self.shortcut(rank, addr, extent, kind) };
        let Some((remote, HeapFast::Plain)) = found else { return Ok(None) };
        let at = self.net.completion_time(bytes);
        // SAFETY: the pattern lies inside the checked mapping at `remote` and inside `local`
        // (check_local), which the caller leaves to the job.
        let job = self.submit(unsafe { Job::new(remote, local, pattern.clone(), direction) });
        if !contiguous {
            self.count_shortcut(pattern);
        }
        self.count_direct(direction, bytes);
        Ok(Some((job, at)))
    }

    /// Whether this run's copy engine takes a transfer of `bytes`: there is one, and the
    /// transfer holds ACTIVERMA_NB_TARGET_FROM bytes or more.
    pub(crate) fn engine_takes(&self, bytes: usize) -> bool {
        self.copy_engine.is_some() && self.noncontig.nb_target_from.is_some_and(|from| bytes >= from)
    }

    /// Hands `job` to this run's copy engine (`engine_takes` said yes) and counts it.
    pub(crate) fn submit(&self, job: Job) -> Arc<Job> {
        let job = Arc::new(job);
        self.copy_engine.as_ref().expect("engine_takes said there is an engine").submit(job.clone());
        bump(&self.counters.copy_engine_jobs, 1);
        job
    }
}

/// The engine this run gets, if any (ACTIVERMA_COPY_ENGINE): `auto` where the conduit allows
/// a thread beside the program's and this process may run on more CPUs than its node has
/// ranks (where it has not, an engine only takes time slices from the ranks: see the module
/// comment).
pub(crate) fn for_run(cfg: &Config, conduit: &dyn Conduit) -> Result<Option<CopyEngine>> {
    let node = conduit.node_of(conduit.rank());
    let node_ranks = (0..conduit.size()).filter(|&r| conduit.node_of(r) == node).count();
    // The CPUs this process may run on: its affinity mask and cgroup quota, so a rank bound
    // to one core has none to spare.
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    wanted(cfg.get_enum(settings::COPY_ENGINE)?, conduit.helper_threads_allowed(), cpus, node_ranks).then(CopyEngine::start).transpose()
}

/// The rule of `for_run`: `setting` is ACTIVERMA_COPY_ENGINE's word.
fn wanted(setting: &str, helper_threads_allowed: bool, cpus: usize, node_ranks: usize) -> bool {
    match setting {
        "on" => true,
        "off" => false,
        _ => helper_threads_allowed && cpus > node_ranks,
    }
}

/// The engine of one process: its queue and its thread.
pub(crate) struct CopyEngine {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    queue: Mutex<VecDeque<Arc<Job>>>,
    /// Jobs in the queue: what the polling engine reads, so that it never holds the queue's
    /// lock while a submitter wants it (a contended std Mutex puts its waiter to sleep, and
    /// waking it costs what a 64 KiB copy does).
    queued: AtomicUsize,
    stop: AtomicBool,
}

impl CopyEngine {
    /// Starts the engine's thread. At init, not at the first job: a thread takes longer to
    /// start than a 64 KiB copy, so a lazily started engine missed a program's first jobs
    /// (every one of the first 16 in a loop of 64 KiB gets was taken back).
    pub(crate) fn start() -> Result<CopyEngine> {
        let shared = Arc::new(Shared { queue: Mutex::new(VecDeque::new()), queued: AtomicUsize::new(0), stop: AtomicBool::new(false) });
        let serving = shared.clone();
        let thread = std::thread::Builder::new().name("activerma-copy".into()).spawn(move || serve(&serving)).map_err(|e| {
            Error::OutOfResources(format!("cannot start the copy engine's thread ({e}); ACTIVERMA_COPY_ENGINE=off runs without it"))
        })?;
        Ok(CopyEngine { shared, thread: Some(thread) })
    }

    /// Hands `job` to the engine thread.
    pub(crate) fn submit(&self, job: Arc<Job>) {
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner()).push_back(job);
        self.shared.queued.fetch_add(1, Ordering::Release);
        // Cheap when the engine is polling (a flag), a futex wake when it is parked.
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for CopyEngine {
    fn drop(&mut self) {
        // Every job was completed by its transfer (they borrow the runtime that owns us).
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The engine thread: copies queued jobs in order, polls for POLL after the last, then parks.
fn serve(shared: &Shared) {
    let mut idle_since = Instant::now();
    // Polls as a waiting rank does: spinning, then yielding the CPU now and then. Where the
    // scheduler put the engine on the program's CPU, a plain spin held that CPU for a time
    // slice at a time, and the program's wait stood behind it (2-D get overlap 0.42 instead
    // of 0.97 in some runs of `bench armci-overlap --quick`).
    let mut backoff = Backoff::new();
    loop {
        let job = if shared.queued.load(Ordering::Acquire) > 0 {
            let job = shared.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            shared.queued.fetch_sub(job.is_some() as usize, Ordering::Relaxed);
            job
        } else {
            None
        };
        match job {
            Some(job) => {
                job.run_if_unclaimed();
                (idle_since, backoff) = (Instant::now(), Backoff::new());
            }
            None if shared.stop.load(Ordering::Acquire) => return,
            None if idle_since.elapsed() < POLL => {
                backoff.snooze();
            }
            // A submit between the pop and here left an unpark token: park returns at once.
            None => {
                std::thread::park();
                (idle_since, backoff) = (Instant::now(), Backoff::new());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, row: usize) -> StridedPattern {
        StridedPattern::new(row, vec![n], vec![2 * row], vec![row]).unwrap()
    }

    #[test]
    fn jobs_are_copied_by_the_engine_or_taken_back_and_land_intact() {
        let engine = CopyEngine::start().unwrap();
        let (n, row) = (64, 256);
        let mut segment: Vec<u8> = (0..2 * n * row).map(|i| (i % 251) as u8).collect();
        let mut taken_back = 0;
        for round in 0..200 {
            let mut dst = vec![0u8; n * row];
            // SAFETY: the pattern's remote extent is 2 * n * row - row, inside `segment`; `dst`
            // holds n * row; both outlive `complete`.
            let job = Arc::new(unsafe { Job::new(segment.as_mut_ptr(), dst.as_mut_ptr(), rows(n, row), Direction::Get) });
            engine.submit(job.clone());
            if round % 2 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
            taken_back += complete(&job) as usize;
            assert!(job.is_done());
            for i in 0..n {
                assert_eq!(&dst[i * row..(i + 1) * row], &segment[2 * i * row..(2 * i + 1) * row], "round {round}, row {i}");
            }
        }
        assert!(taken_back < 200, "the engine copied none of 200 jobs");
    }

    #[test]
    fn list_jobs_land_intact_both_ways() {
        let engine = CopyEngine::start().unwrap();
        let (n, piece) = (40, 100);
        let mut segment: Vec<u8> = (0..3 * n * piece).map(|i| (i % 253) as u8).collect();
        let mut buffer = vec![0u8; n * piece];
        // Every third piece of the segment into the buffer in reverse order, then back into the
        // pieces after them.
        let seg = segment.as_mut_ptr();
        let buf = buffer.as_mut_ptr();
        // SAFETY: every piece lies inside `segment` and `buffer`, which outlive `complete`.
        let list =
            |skip: usize| (0..n).map(|i| unsafe { (seg.add((3 * i + skip) * piece), buf.add((n - 1 - i) * piece), piece) }).collect();
        let get = Arc::new(unsafe { Job::pieces(list(0), Direction::Get) });
        engine.submit(get.clone());
        complete(&get);
        for i in 0..n {
            let at = 3 * i * piece;
            assert_eq!(&buffer[(n - 1 - i) * piece..(n - i) * piece], &segment[at..at + piece], "get, piece {i}");
        }
        // SAFETY: as above.
        let put = Arc::new(unsafe { Job::pieces(list(1), Direction::Put) });
        engine.submit(put.clone());
        complete(&put);
        for i in 0..n {
            let (from, to) = (3 * i * piece, (3 * i + 1) * piece);
            assert_eq!(segment[from..from + piece], segment[to..to + piece], "put, piece {i}");
        }
    }

    #[test]
    fn auto_wants_a_spare_cpu_and_a_thread_the_conduit_allows() {
        assert!(wanted("auto", true, 8, 4));
        assert!(!wanted("auto", true, 4, 4), "every CPU runs a rank");
        assert!(!wanted("auto", true, 1, 2), "a rank bound to one core");
        assert!(!wanted("auto", false, 8, 1), "MPI_THREAD_SINGLE");
        assert!(wanted("on", false, 1, 8), "on is the user's call");
        assert!(!wanted("off", true, 64, 1));
    }

    #[test]
    fn puts_scatter_into_the_segment() {
        let engine = CopyEngine::start().unwrap();
        let (n, row) = (16, 64);
        let mut segment = vec![0u8; 2 * n * row];
        let mut src: Vec<u8> = (0..n * row).map(|i| (i % 13) as u8 + 1).collect();
        let job = Arc::new(unsafe { Job::new(segment.as_mut_ptr(), src.as_mut_ptr(), rows(n, row), Direction::Put) });
        engine.submit(job.clone());
        complete(&job);
        for i in 0..n {
            assert_eq!(&segment[2 * i * row..(2 * i + 1) * row], &src[i * row..(i + 1) * row]);
            assert!(segment[(2 * i + 1) * row..(2 * i + 2) * row].iter().all(|&b| b == 0), "a gap was written");
        }
        drop(engine); // joins the thread
    }
}
