//! The job as seen from one rank: init, collectives, remote operations, finalize.

use crate::{Exposed, Prot, RemotePtr, Segment};
use activerma_am::{Am, Handler, HandlerId, ProgressMode, ProgressThread, FIRST_USER_HANDLER};
use activerma_core::counters::Counters;
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::symheap::SymHeap;
use activerma_mem::{AccessKind, Registrar, RegistrationStats, Strategy, TableLayout, TargetTable};
use activerma_proto::{
    AtomicOp, AtomicPath, Element, Noncontig, OpHandle, PendingTransfer, Proto, Protocol, StridedPattern, Transfer, Width,
};
use activerma_transport::netmodel::NetModel;
use activerma_transport::smp::SmpConduit;
use activerma_transport::traffic::TrafficTo;
use activerma_transport::Conduit;
use activerma_transport::ControlMemory;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) struct Inner {
    pub(crate) access: Arc<activerma_access::Access>,
    pub(crate) conduit: Arc<dyn Conduit>,
    pub(crate) am: Arc<Am>,
    pub(crate) proto: Proto,
    pub(crate) table: Arc<TargetTable>,
    heap: Mutex<SymHeap>,
    heap_bases: Vec<usize>,
    /// This rank and the job's size, the conduit's (fixed for the job: a replacement rank
    /// keeps both), read once: every call from C checks its rank against the size, and the
    /// conduit's answer is a dynamic call.
    rank: Rank,
    size: usize,
    net: Arc<NetModel>,
    counters: Arc<Counters>,
    /// The progress mode and its thread (None in app mode), changed together.
    progress_thread: Mutex<(ProgressMode, Option<ProgressThread>)>,
    finalized: AtomicBool,
    /// ACTIVERMA_COUNTERS: print the counters at finalize.
    print_counters: bool,
    /// The settings the job was started with (read once, at init).
    config: Config,
    /// A replacement rank (respawn.rs) that has not rejoined yet: collectives are refused and
    /// segments are found again rather than allocated.
    pub(crate) recovering: AtomicBool,
}

/// Handle to the job; cheap to clone, shared by every thread of the rank.
#[derive(Clone)]
pub struct World {
    inner: Arc<Inner>,
}

/// Joins the job (collective: every rank calls it). A program started without the launcher
/// becomes a one-rank job. The settings are the environment's (`ACTIVERMA_*`), read once here.
pub fn init() -> Result<World> {
    init_over(Config::from_env()?, None)
}

/// `init` with settings the program chose (`Config::defaults()` or `Config::from_env()`, then
/// `set`), not read from the environment: what a test or an embedding program uses. Every rank
/// must pass the same settings, as it would have the same environment. (The variables the
/// launcher gives each rank, ACTIVERMA_RANK and the job's memory, still come from it.)
pub fn init_with(config: Config) -> Result<World> {
    init_over(config, None)
}

/// Joins a job made of the ranks of `comm`, an MPI communicator of a program that initialized
/// MPI itself (collective over `comm`): the mpi conduit runs over a duplicate of it, ranks
/// are `comm`'s, and MPI stays the program's to finalize. What ARMCI_Init_mpi_comm needs.
#[cfg(feature = "mpi")]
pub fn init_mpi_comm(comm: activerma_transport::mpi::MpiComm) -> Result<World> {
    init_over(Config::from_env()?, Some(comm))
}

/// The communicator a job runs over when the program names one (never in a build without MPI).
#[cfg(feature = "mpi")]
type JobComm = activerma_transport::mpi::MpiComm;
#[cfg(not(feature = "mpi"))]
type JobComm = std::convert::Infallible;

fn init_over(cfg: Config, comm: Option<JobComm>) -> Result<World> {
    let heap_size = cfg.heap_bytes()?;
    let table_bytes = TableLayout::from_config(&cfg, heap_size)?.bytes();
    let use_mpi = comm.is_some()
        || match cfg.get_enum(settings::CONDUIT)? {
            "mpi" => true,
            "smp" => false,
            _ => std::env::var_os(activerma_transport::smp::ENV_RANK).is_none() && activerma_transport::started_by_mpi_launcher(),
        };
    let conduit: Arc<dyn Conduit> = if use_mpi && !one_rank_mpi_job(comm)? {
        mpi_conduit(&cfg, heap_size, table_bytes, comm)?
    } else {
        match SmpConduit::from_env(&cfg)? {
            Some(c) => Arc::new(c),
            None => Arc::new(SmpConduit::standalone(&cfg, table_bytes as u64)?),
        }
    };
    let counters = Arc::new(Counters::default());
    let net = Arc::new(NetModel::from_config(&cfg)?);
    let am = Arc::new(Am::new(conduit.clone(), net.clone(), counters.clone(), &cfg)?);
    let handlers = Proto::register_handlers(&am, &cfg)?;

    let me = conduit.rank();
    let recovering = conduit.incarnation() > 0;
    let heap = conduit.heap_window(me).ok_or_else(|| Error::Unsupported("conduit without a local heap".into()))?;
    let table_window = conduit.table_window(me).ok_or_else(|| Error::Unsupported("conduit without a table window".into()))?;
    let max_regions = cfg.get_u64(settings::MAX_REGIONS)?.max(2) as usize;
    let fault_log = cfg.get_u64(settings::FAULT_LOG_SIZE)? as usize;
    let origins = conduit.size();
    if recovering {
        // The dead process's table described memory that died with it (private exposures,
        // marks, logs drained into its memory): the replacement starts from an empty one, and
        // nobody reads it meanwhile (it is down: liveness.rs).
        // SAFETY: our own table window; no other process accesses it while we are down.
        unsafe { std::ptr::write_bytes(table_window.local, 0, table_window.len) };
    }
    let mut table = TargetTable::init(table_window, heap.remote_base, heap.len, max_regions)?;
    // The registration strategy (a reserved or unknown one is refused here, at init).
    let reg_stats = Arc::new(RegistrationStats::default());
    table.set_registrar(Registrar::from_config(&cfg, reg_stats.clone())?);
    // The landing zone of buffered transfers (proto's landing.rs), above the segments' part of
    // the heap, is segment memory of every rank from the start.
    let segment_heap = cfg.segment_heap_bytes()?;
    if heap.len > segment_heap {
        table.map_segment(segment_heap, heap.len - segment_heap);
    }
    let table = Arc::new(table);
    // The access-log arena is made when this rank first logs, and named in the table then.
    let log_bytes = cfg.get_u64(settings::LOG_ARENA)? as usize;
    let log_table = activerma_access::LogTable::new(log_bytes, fault_log, origins, {
        let table = table.clone();
        move |home| table.publish_log_arena(home)
    })?;
    let table_handlers = Proto::register_table_handlers(&am, table.clone(), &cfg)?;
    // Everyone's table and heap base must be in place before anyone looks at them (a
    // replacement's peers are past this point; it rejoins later: respawn.rs).
    if !recovering {
        conduit.barrier(&mut || {
            am.progress();
        })?;
    }
    let proto = Proto::new(conduit.clone(), am.clone(), net.clone(), counters.clone(), handlers, reg_stats, &cfg)?
        .with_table_handlers(table_handlers);
    let heap_bases = (0..conduit.size()).map(|r| conduit.heap_base(r)).collect();
    let mode = ProgressMode::from_config(&cfg)?;
    let access = activerma_access::Access::new(log_table, &am, counters.clone())?;
    let world = World {
        inner: Arc::new(Inner {
            access,
            heap: Mutex::new(SymHeap::new(segment_heap)),
            heap_bases,
            rank: conduit.rank(),
            size: conduit.size(),
            proto,
            table,
            net,
            counters,
            progress_thread: Mutex::new((mode, None)),
            finalized: AtomicBool::new(false),
            print_counters: cfg.get_bool(settings::COUNTERS)?,
            config: cfg,
            recovering: AtomicBool::new(recovering),
            am: am.clone(),
            conduit,
        }),
    };
    world.inner.progress_thread.lock().unwrap().1 = ProgressThread::start(am, mode)?;
    if recovering {
        // Entries the dead process claimed in others' access logs and never published.
        let holes = world.inner.proto.cover_log_holes()?;
        if holes > 0 && world.inner.config.get_bool(settings::VERBOSE).unwrap_or(false) {
            eprintln!("activerma: rank {me}: covered {holes} unfinished log entries of its dead predecessor");
        }
        // The others' Active Access marks, which a rank that started with the job learnt as
        // they were made (other hosts only).
        world.inner.proto.learn_marks()?;
    }
    Ok(world)
}

/// A job over an MPI communicator of one rank that the program initialized itself: it runs
/// on the smp conduit alone (it has no one to talk to, and Open MPI 4.1's osc/ucx refuses to
/// make a window over a single process).
#[cfg(feature = "mpi")]
fn one_rank_mpi_job(comm: Option<JobComm>) -> Result<bool> {
    Ok(activerma_transport::mpi::initialized_comm_size(comm)? == Some(1))
}

#[cfg(not(feature = "mpi"))]
fn one_rank_mpi_job(_comm: Option<JobComm>) -> Result<bool> {
    Ok(false)
}

#[cfg(feature = "mpi")]
fn mpi_conduit(cfg: &Config, heap_size: usize, table_bytes: usize, comm: Option<JobComm>) -> Result<Arc<dyn Conduit>> {
    Ok(Arc::new(activerma_transport::mpi::MpiConduit::init(cfg, heap_size, table_bytes, comm)?))
}

#[cfg(not(feature = "mpi"))]
fn mpi_conduit(_cfg: &Config, _heap_size: usize, _table_bytes: usize, _comm: Option<JobComm>) -> Result<Arc<dyn Conduit>> {
    Err(Error::Unsupported(format!(
        "this program was started by an MPI launcher (or {}=mpi) but built without the mpi conduit: build it with `scripts/build-mpi.sh openmpi|mpich` (cargo feature \"mpi\"), or start it with `activerma run`",
        settings::CONDUIT
    )))
}

impl World {
    /// The settings this job runs with (read once, at init).
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn live_inner(&self) -> Result<&Inner> {
        self.live()
    }

    pub(crate) fn inner_ref(&self) -> &Inner {
        &self.inner
    }

    /// True if `addr` lies in this rank's symmetric heap.
    pub(crate) fn in_own_heap(&self, addr: usize) -> bool {
        let me = self.rank();
        addr.checked_sub(self.inner.heap_bases[me]).is_some_and(|off| off < self.inner.conduit.heap_window(me).map_or(0, |w| w.len))
    }

    #[inline]
    fn live(&self) -> Result<&Inner> {
        if self.inner.finalized.load(Ordering::Relaxed) {
            return Err(Error::Finalized);
        }
        Ok(&self.inner)
    }

    /// True once `finalize` was called (every operation then fails with `Error::Finalized`).
    #[inline]
    pub fn is_finalized(&self) -> bool {
        self.inner.finalized.load(Ordering::Relaxed)
    }

    pub fn rank(&self) -> Rank {
        self.inner.rank
    }
    pub fn size(&self) -> usize {
        self.inner.size
    }
    pub fn conduit_name(&self) -> &'static str {
        self.inner.conduit.name()
    }
    /// The node (host) `rank` runs on, numbered from 0 in the order of each node's lowest rank.
    /// Ranks of one node reach each other's memory with the CPU (copies, cross-memory attach,
    /// Active Access at the origin); others through the network. `InvalidRank` past the job.
    pub fn node_of(&self, rank: Rank) -> Result<usize> {
        self.inner.proto.check_rank(rank)?;
        Ok(self.inner.conduit.node_of(rank))
    }
    /// Whether `rank`'s segments are mapped in this process at the addresses their owner
    /// uses, so that a program may load and store through an address `rank` handed out (the
    /// smp conduit maps every heap at the same address in every process; MPI's shared
    /// windows map them where MPI chooses, and other hosts' not at all). Always true for
    /// this rank. `InvalidRank` past the job.
    pub fn segments_at_owner_addresses(&self, rank: Rank) -> Result<bool> {
        self.inner.proto.check_rank(rank)?;
        Ok(rank == self.rank() || self.inner.proto.heap_at_owner_address(rank))
    }
    /// The job's control memory on this host (every rank's queue, translation table and logs;
    /// on smp the collectives' areas) and the ranks it serves; None where the conduit cannot
    /// say.
    pub fn control_memory(&self) -> Option<ControlMemory> {
        self.inner.conduit.control_memory()
    }
    /// Whether atomics on memory this rank maps (segments of its node) run as CPU atomics.
    /// False where the conduit's own atomics are not atomic with respect to CPU atomics
    /// (MPICH in a job that spans nodes): then every atomic goes through MPI, this node's too.
    pub fn cpu_atomics(&self) -> bool {
        self.inner.conduit.cpu_atomics_coherent()
    }
    /// What this rank sent to `rank` through the network path so far (one-sided operations
    /// and message fragments that left the node, with their bytes); zero for ranks of this
    /// node, and on a conduit without a network.
    pub fn traffic_to(&self, rank: Rank) -> Result<TrafficTo> {
        self.inner.proto.check_rank(rank)?;
        Ok(self.inner.conduit.traffic().map(|t| t.to(rank)).unwrap_or_default())
    }
    pub fn progress_mode(&self) -> ProgressMode {
        self.inner.progress_thread.lock().unwrap().0
    }
    /// Switches who runs this rank's handlers from now on (ACTIVERMA_PROGRESS sets the mode
    /// at init): the old progress thread, if any, finishes the handler it is in and stops
    /// before the new one starts, so handlers never run in two progress threads at once.
    pub fn set_progress_mode(&self, mode: ProgressMode) -> Result<()> {
        let i = self.live()?;
        let mut slot = i.progress_thread.lock().unwrap();
        if slot.0 == mode {
            return Ok(());
        }
        drop(slot.1.take());
        slot.1 = ProgressThread::start(i.am.clone(), mode)?;
        slot.0 = mode;
        Ok(())
    }
    pub fn net_model(&self) -> String {
        self.inner.net.describe()
    }
    /// Waits until this rank's modelled link has delivered everything booked on it — posted
    /// active messages and implicit operations included (returns at once without a modelled
    /// network). For benchmarks: a phase that posted messages is over only then, and the next
    /// one starts on an idle link.
    pub fn wait_link_idle(&self) {
        activerma_core::clock::spin_until(self.inner.net.idle_at());
    }
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }
    /// This rank's registration counters (as a target: pins; as an origin: hits and misses).
    pub fn registration_stats(&self) -> &RegistrationStats {
        self.inner.table.registrar().stats()
    }
    /// This rank's Firehose counters (as an origin: hits, misses, moves sent; as a target:
    /// moves served, pins, victims reused); None unless ACTIVERMA_REGISTRATION=firehose.
    pub fn firehose_stats(&self) -> Option<&activerma_mem::firehose::FirehoseStats> {
        self.inner.proto.firehose().map(|f| f.stats())
    }
    /// Firehose's configuration on this rank (M, MAXVICTIM, f, bucket) under firehose.
    pub fn firehose_config(&self) -> Option<&activerma_mem::firehose::Config> {
        self.inner.proto.firehose().map(|f| f.config())
    }
    /// This rank's PART counters (as an origin: transfers, NACKs sent, retransmissions; as a
    /// target: regions registered, faults resolved, ERRs sent); all zero unless
    /// ACTIVERMA_REGISTRATION=part.
    pub fn part_stats(&self) -> &activerma_mem::part::PartStats {
        self.inner.table.part_stats()
    }
    /// Under PART, for benchmarks and tests: evicts (contents kept) every whole page inside
    /// `[addr, addr+len)` of this rank's exposed memory, so that the next remote access there
    /// meets real faults (and this rank's own touch a SIGBUS it resolves); returns how many
    /// pages were evicted (0 under other strategies). No write to those pages may run meanwhile.
    pub fn part_evict(&self, addr: usize, len: usize) -> Result<u64> {
        self.live()?.table.part_evict(addr, len)
    }
    /// Under PART: the page-in policy (PIO / PI4 / PIA / PIA with an early ERR) that this
    /// rank's transfers started from now on ask for; ACTIVERMA_PART_PAGEIN sets the first one.
    /// An error under other strategies.
    pub fn set_part_page_in(&self, p: activerma_mem::part::PageIn) -> Result<()> {
        self.live()?.proto.set_part_page_in(p)
    }
    /// The job's registration strategy (ACTIVERMA_REGISTRATION).
    pub fn registration_strategy(&self) -> Strategy {
        self.inner.table.registrar().strategy()
    }
    pub(crate) fn heap_base(&self, rank: Rank) -> usize {
        self.inner.heap_bases[rank]
    }
    pub(crate) fn table(&self) -> &TargetTable {
        &self.inner.table
    }
    /// Withdraws exposure `id` of `[addr, addr+len)`: the table waits for copies in flight and
    /// unpins; under firehose no bucket of it stays pinned and other ranks drop their firehoses.
    /// Other hosts' one-sided engines are let out of it first (the conduit's registration goes
    /// with them); after finalize the conduit has dropped every registration itself.
    pub(crate) fn unexpose_id(&self, id: activerma_mem::table::ExposureId, addr: usize, len: usize) -> Result<()> {
        if self.is_finalized() {
            return self.table().unexpose(id);
        }
        let r = self.inner.proto.unexpose_private(addr, &mut || self.table().unexpose(id));
        self.inner.proto.firehose_unexposed(addr, len);
        r
    }

    /// Runs pending active-message handlers (needed in `app` progress mode when this rank is
    /// a target of atomics on private memory or of user messages and makes no blocking call).
    pub fn progress(&self) -> usize {
        self.inner.am.progress()
    }

    /// Makes progress until `done()` (something a handler delivers: a user message's reply),
    /// as the runtime's own waits do: backing off, failing with `Error::RankFailed` / `PeerGone`
    /// if `rank` dies and with `Error::Timeout` (naming `what`) after ACTIVERMA_TIMEOUT_S.
    pub fn wait_until(&self, done: impl FnMut() -> bool, rank: Rank, what: &str) -> Result<()> {
        self.live()?.am.wait_until(done, rank, what)
    }

    /// Adds work to every progress step of this rank — the application's own calls, the
    /// progress thread's loop, every wait — for layers that poll memory others write by RMA
    /// (the object DSM's diff-arrays). Returns how many items it handled; it may run on the
    /// progress thread and must not block.
    pub fn add_progress_hook(&self, hook: std::sync::Arc<dyn Fn() -> usize + Send + Sync>) -> Result<()> {
        self.live()?.am.add_poller(hook)
    }

    /// All ranks arrive before any leaves; also completes this rank's implicit operations.
    pub fn barrier(&self) -> Result<()> {
        let i = self.live()?;
        self.not_recovering("barrier")?;
        i.proto.flush_all()?;
        i.conduit.barrier(&mut || {
            i.am.progress();
        })
    }

    /// Every rank contributes bytes; everyone gets all contributions, in rank order.
    pub fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let i = self.live()?;
        self.not_recovering("allgather")?;
        i.conduit.allgather(mine, &mut || {
            i.am.progress();
        })
    }

    /// Allocates a segment of `len` bytes on every rank (collective; every rank passes the
    /// same length). Its bytes read as zero on every rank.
    pub fn alloc_segment(&self, len: usize) -> Result<Segment> {
        self.alloc_segment_with(len, true)
    }

    /// As `alloc_segment`, but the bytes are whatever the heap held there (zero if never used,
    /// else what a freed segment left): for a caller that clears what it hands out, such as a
    /// pool carved later. Spares writing every page at allocation, which makes the whole
    /// block resident on conduits that cannot punch pages out (`Conduit::zero_heap`).
    pub fn alloc_segment_unzeroed(&self, len: usize) -> Result<Segment> {
        self.alloc_segment_with(len, false)
    }

    fn alloc_segment_with(&self, len: usize, zeroed: bool) -> Result<Segment> {
        let i = self.live()?;
        let recovering = self.is_recovering();
        // A replacement finds its segments again, alone: the same allocations in the same
        // order give the same offsets, and the memory keeps what the dead process left.
        let all = if recovering { Vec::new() } else { self.allgather(&(len as u64).to_le_bytes())? };
        if let Some((r, l)) = all.iter().enumerate().find(|(_, b)| b.as_slice() != (len as u64).to_le_bytes()) {
            return Err(Error::CollectiveMismatch(format!(
                "alloc_segment: rank {} asked for {len} bytes but rank {r} for {}",
                self.rank(),
                u64::from_le_bytes(l[..8].try_into().unwrap())
            )));
        }
        let offset = i.heap.lock().unwrap().alloc(len)?;
        let local = i.conduit.heap_window(self.rank()).expect("own heap").local;
        // SAFETY: offset + len lies inside our heap mapping (the allocator checked).
        let local = unsafe { local.add(offset) };
        // Registration with the conduit (MPI: attach to the window) before anyone may use it.
        if let Err(e) = i.conduit.register(local as usize, len) {
            i.heap.lock().unwrap().free(offset, len);
            return Err(e);
        }
        // pin-all pins segments too (other strategies leave them registered, unpinned: the
        // runtime allocated them, like a NIC's pre-registered segment).
        if i.table.registrar().strategy().pins_segments() {
            if let Err(e) = i.table.registrar().hold(local as usize, len) {
                let _ = i.conduit.deregister(local as usize, len);
                i.heap.lock().unwrap().free(offset, len);
                return Err(e);
            }
        }
        i.table.map_segment(offset, len);
        if recovering {
            return Ok(Segment { world: self.clone(), offset, len, local });
        }
        if zeroed {
            // Fresh memory reads as zero on every rank, even after a free and a new allocation.
            // SAFETY: the block is ours and nobody else writes it before the barrier below.
            unsafe { i.conduit.zero_heap(local, len) };
        }
        self.barrier()?;
        Ok(Segment { world: self.clone(), offset, len, local })
    }

    pub(crate) fn free_segment(&self, offset: usize, len: usize) -> Result<()> {
        let i = self.live()?;
        self.barrier()?; // nobody is still accessing it
        i.table.unmap_segment(offset, len);
        let local = i.conduit.heap_window(self.rank()).expect("own heap").local as usize + offset;
        let mut r = i.conduit.deregister(local, len);
        if i.table.registrar().strategy().pins_segments() {
            r = r.and(i.table.registrar().release(local, len));
        }
        i.heap.lock().unwrap().free(offset, len);
        r
    }

    /// Exposes a buffer of this rank's own memory (heap, stack, anything) to remote access.
    pub fn expose<'a>(&self, buf: &'a mut [u8], prot: Prot) -> Result<Exposed<'a>> {
        // SAFETY: the exclusive borrow keeps the buffer alive and unaliased while exposed.
        unsafe { self.expose_raw(buf.as_mut_ptr(), buf.len(), prot) }
    }

    /// Exposes a buffer read-only.
    pub fn expose_read_only<'a>(&self, buf: &'a [u8]) -> Result<Exposed<'a>> {
        // SAFETY: read-only exposure: remote ranks never write it.
        unsafe { self.expose_raw(buf.as_ptr() as *mut u8, buf.len(), Prot::ReadOnly) }
    }

    /// # Safety
    /// `[ptr, ptr+len)` must stay valid memory of this process until the exposure is dropped.
    pub unsafe fn expose_raw<'a>(&self, ptr: *mut u8, len: usize, prot: Prot) -> Result<Exposed<'a>> {
        let i = self.live()?;
        i.proto.firehose_exposing(ptr as usize, len);
        let id = i.table.expose(ptr as usize, len, prot)?;
        Ok(Exposed { world: self.clone(), id: Some(id), addr: ptr as usize, len, _borrow: PhantomData })
    }

    /// Blocking put: returns when the bytes are in the target's memory.
    #[inline]
    pub fn put(&self, dst: RemotePtr, src: &[u8]) -> Result<()> {
        self.live()?.proto.put(dst.rank, dst.addr, src)
    }
    /// Blocking get.
    #[inline]
    pub fn get(&self, src: RemotePtr, dst: &mut [u8]) -> Result<()> {
        self.live()?.proto.get(src.rank, src.addr, dst)
    }
    /// Blocking strided get: the pieces of `pattern` from `src`'s rank, starting at its
    /// address, into `dst` laid out by the pattern's local strides. To a segment of a rank on
    /// this host, one check of the whole pattern and a CPU copy per piece.
    pub fn get_strided(&self, src: RemotePtr, pattern: &StridedPattern, dst: &mut [u8]) -> Result<()> {
        self.live()?.proto.get_strided(src.rank, src.addr, pattern, dst)
    }
    /// Blocking strided put: `src` laid out by the pattern's local strides, to the pieces of
    /// `pattern` at `dst`.
    pub fn put_strided(&self, dst: RemotePtr, pattern: &StridedPattern, src: &[u8]) -> Result<()> {
        self.live()?.proto.put_strided(dst.rank, dst.addr, pattern, src)
    }
    /// Blocking vector put: every `(address, bytes)` piece to `rank`, returning once all are
    /// written. The whole list is checked before anything moves; how it moves is
    /// ACTIVERMA_NONCONTIG's choice (host-assisted: CPU copies to a segment on this host, a
    /// scatter/gather list of process_vm_writev calls to private memory on this host, one
    /// flush for the pieces' one-sided operations to another host; per piece; or packed into
    /// one active message).
    pub fn put_vector(&self, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        self.live()?.proto.put_pieces(rank, pieces)
    }
    /// Blocking vector get: every `(address, buffer)` piece from `rank` (see `put_vector`).
    pub fn get_vector(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        self.live()?.proto.get_pieces(rank, pieces)
    }
    /// Non-blocking vector put: the pieces' bytes are the transfer's until its `wait` (or
    /// drop) returns. Moved while the caller computes when the target's progress thread moves
    /// large lists (see `get_strided_nb_by`); otherwise moved before this returns.
    pub fn put_vector_nb<'a>(&'a self, rank: Rank, pieces: Vec<(usize, &'a [u8])>) -> Result<PendingTransfer<'a>> {
        self.live()?.proto.put_pieces_nb(rank, pieces)
    }
    /// Non-blocking vector get: every buffer holds its piece once the transfer's `wait`
    /// returns, and is the transfer's until then. Moved while the caller computes by the
    /// target's progress thread (large lists, a rank of this host) or by the conduit's
    /// one-sided engine (a rank of another host); otherwise before this returns.
    pub fn get_vector_nb<'a>(&'a self, rank: Rank, pieces: Vec<(usize, &'a mut [u8])>) -> Result<PendingTransfer<'a>> {
        self.live()?.proto.get_pieces_nb(rank, pieces)
    }
    /// `put_vector` by the given method, whatever ACTIVERMA_NONCONTIG says (to compare them).
    pub fn put_vector_by(&self, method: Noncontig, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        self.live()?.proto.put_pieces_by(method, rank, pieces)
    }
    /// `get_vector` by the given method.
    pub fn get_vector_by(&self, method: Noncontig, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        self.live()?.proto.get_pieces_by(method, rank, pieces)
    }
    /// How this run moves strided and vector transfers (ACTIVERMA_NONCONTIG).
    pub fn noncontig(&self) -> Result<Noncontig> {
        Ok(self.live()?.proto.noncontig())
    }
    /// Whether this process has a copy engine (ACTIVERMA_COPY_ENGINE: `auto` decides per
    /// process), which copies large non-blocking strided transfers into segments of this node
    /// while the program computes.
    pub fn has_copy_engine(&self) -> Result<bool> {
        Ok(self.live()?.proto.has_copy_engine())
    }
    /// Blocking put by a contiguous transfer protocol (zero-copy, buffered, pipelined, dynamic
    /// registration; `Transfer::Auto` chooses per call from the target memory's registration
    /// state and the size). Returns the protocol that moved the bytes, which the
    /// `transfer_*` counters also count. Errors as `put`.
    #[inline]
    pub fn put_by(&self, protocol: Transfer, dst: RemotePtr, src: &[u8]) -> Result<Transfer> {
        self.live()?.proto.put_by(protocol, dst.rank, dst.addr, src)
    }
    /// Blocking get by a contiguous transfer protocol (see `put_by`).
    #[inline]
    pub fn get_by(&self, protocol: Transfer, src: RemotePtr, dst: &mut [u8]) -> Result<Transfer> {
        self.live()?.proto.get_by(protocol, src.rank, src.addr, dst)
    }
    /// The allocation-free common case of `put_by`, for layers that run their own checks
    /// first and call this on every small put (ARMCI): true when `src` was put zero-copy into
    /// plain segment pages of `dst`'s rank mapped here (complete and counted, as `put_by`
    /// would have); false when it moved nothing, for any reason — then call `put_by`, which
    /// moves it another way or says what is wrong.
    #[inline]
    pub fn put_plain(&self, dst: RemotePtr, src: &[u8]) -> bool {
        !self.is_finalized() && self.inner.proto.put_plain(dst.rank, dst.addr, src)
    }
    /// The get of `put_plain`.
    #[inline]
    pub fn get_plain(&self, src: RemotePtr, dst: &mut [u8]) -> bool {
        !self.is_finalized() && self.inner.proto.get_plain(src.rank, src.addr, dst)
    }
    /// An accumulate's read-modify-write in place on plain segment pages mapped here (see
    /// `put_plain`): true when `update` ran on `dst`'s `len` bytes; false when it did not run,
    /// for any reason — then get, combine and put. Excluding concurrent updates is the caller's.
    #[inline]
    pub fn update_plain(&self, dst: RemotePtr, len: usize, update: impl FnOnce(&mut [u8])) -> bool {
        !self.is_finalized() && self.inner.proto.update_plain(dst.rank, dst.addr, len, update)
    }
    /// Adds `packed` — whole elements of `elem`, the pieces' back to back — into the pieces
    /// (address, bytes) of `rank`'s segment memory by the conduit's one-sided accumulate
    /// (MPI_Accumulate with MPI_SUM; many pieces as one operation), complete at the target on
    /// return: element-wise atomic among such accumulates only. Ok(false) when it added nothing
    /// because the conduit adds nothing in this job (one host with every segment mapped; the
    /// smp conduit) or a piece is not plain segment memory — the same answer on every rank, so
    /// a layer that then adds by its own means (ARMCI: get, combine and put under a lock) does
    /// so everywhere.
    pub fn accumulate(&self, rank: Rank, elem: Element, pieces: &[(usize, usize)], packed: &[u8]) -> Result<bool> {
        self.live()?.proto.accumulate(rank, elem, pieces, packed)
    }
    /// Whether `accumulate` adds by the conduit in this job (MPI across hosts): a layer that
    /// must prepare its data first (ARMCI scales it) asks before it does.
    pub fn accumulates_by_conduit(&self) -> bool {
        !self.is_finalized() && self.inner.proto.accumulates_by_conduit()
    }
    /// Non-blocking `put_by`: `src` may be reused at once; the handle's `wait` returns when
    /// the bytes are at the target (and names the protocol). Buffered and pipelined puts
    /// complete when the target acknowledged their messages, so they overlap its copies.
    pub fn put_nb_by(&self, protocol: Transfer, dst: RemotePtr, src: &[u8]) -> Result<PendingTransfer<'_>> {
        self.live()?.proto.put_nb_by(protocol, dst.rank, dst.addr, src)
    }
    /// Non-blocking `get_by`: `dst` holds the bytes once the handle's `wait` returns (the
    /// handle borrows it until then; do not `mem::forget` it). Buffered and pipelined gets
    /// send their requests now and copy the answers out in `test` / `wait`; a zero-copy get
    /// from a segment of another host moves on MPI meanwhile (MPI_Rget): `test` asks whether
    /// it landed without waiting, `wait` waits for it.
    pub fn get_nb_by<'a>(&'a self, protocol: Transfer, src: RemotePtr, dst: &'a mut [u8]) -> Result<PendingTransfer<'a>> {
        self.live()?.proto.get_nb_by(protocol, src.rank, src.addr, dst)
    }
    /// Non-blocking strided get by protocol: `dst` (laid out by the pattern's local strides)
    /// holds the pieces once the handle's `wait` returns. Buffered gets ask the target for
    /// every piece in one packed message, pipelined ones in packed messages of
    /// ACTIVERMA_PIPELINE_CHUNK bytes; zero-copy moves the data now (see proto's strided_nb.rs).
    pub fn get_strided_nb_by<'a>(
        &'a self,
        protocol: Transfer,
        src: RemotePtr,
        pattern: &StridedPattern,
        dst: &'a mut [u8],
    ) -> Result<PendingTransfer<'a>> {
        self.live()?.proto.get_strided_nb_by(protocol, src.rank, src.addr, pattern, dst)
    }
    /// Non-blocking strided put by protocol: `src` (laid out by the pattern's local strides) is
    /// the transfer's until the handle's `wait` returns; as `get_strided_nb_by`, the pieces
    /// travel in packed messages under buffered and pipelined protocols.
    pub fn put_strided_nb_by<'a>(
        &'a self,
        protocol: Transfer,
        dst: RemotePtr,
        pattern: &StridedPattern,
        src: &'a [u8],
    ) -> Result<PendingTransfer<'a>> {
        self.live()?.proto.put_strided_nb_by(protocol, dst.rank, dst.addr, pattern, src)
    }
    /// The protocol this run's `put_by`/`get_by` callers use by default (ACTIVERMA_TRANSFER).
    pub fn transfer(&self) -> Result<Transfer> {
        Ok(self.live()?.proto.transfer())
    }
    /// Non-blocking put: the source may be reused when this returns; the handle says when the
    /// data is remotely visible.
    #[inline]
    pub fn put_nb(&self, dst: RemotePtr, src: &[u8]) -> Result<OpHandle> {
        self.live()?.proto.put_nb(dst.rank, dst.addr, src)
    }
    /// Non-blocking get: `dst` holds the data once the handle completes.
    #[inline]
    pub fn get_nb(&self, src: RemotePtr, dst: &mut [u8]) -> Result<OpHandle> {
        self.live()?.proto.get_nb(src.rank, src.addr, dst)
    }
    /// Implicit non-blocking put, completed by `flush(rank)`, `flush_all()` or `barrier()`.
    #[inline]
    pub fn put_nbi(&self, dst: RemotePtr, src: &[u8]) -> Result<()> {
        self.live()?.proto.put_nbi(dst.rank, dst.addr, src)
    }
    #[inline]
    pub fn get_nbi(&self, src: RemotePtr, dst: &mut [u8]) -> Result<()> {
        self.live()?.proto.get_nbi(src.rank, src.addr, dst)
    }
    pub fn flush(&self, rank: Rank) -> Result<()> {
        self.live()?.proto.flush(rank)
    }
    pub fn flush_all(&self) -> Result<()> {
        self.live()?.proto.flush_all()
    }
    pub fn fence(&self) -> Result<()> {
        self.live()?.proto.fence()
    }

    /// A 64-bit atomic on an 8-byte aligned word; returns the previous value. `Fetch` is a read
    /// and needs read permission only (as MPI_Fetch_and_op with MPI_NO_OP); every other op
    /// writes and needs read-write (`Error::Protection`). On pages marked for Active Access a
    /// writing atomic is logged as a put of its word without data where the page logs puts
    /// that way (W, WL, no WLD: what incremental checkpoints track); a `Fetch` is not logged;
    /// pages that log put data or gets refuse them (`Error::Unsupported`).
    #[inline]
    pub fn atomic(&self, at: RemotePtr, op: AtomicOp) -> Result<u64> {
        self.live()?.proto.atomic(at.rank, at.addr, op)
    }
    #[inline]
    pub fn fetch_add(&self, at: RemotePtr, v: u64) -> Result<u64> {
        self.atomic(at, AtomicOp::FetchAdd(v))
    }
    #[inline]
    pub fn add(&self, at: RemotePtr, v: u64) -> Result<()> {
        self.atomic(at, AtomicOp::FetchAdd(v)).map(drop)
    }
    #[inline]
    pub fn swap(&self, at: RemotePtr, v: u64) -> Result<u64> {
        self.atomic(at, AtomicOp::Swap(v))
    }
    #[inline]
    pub fn compare_swap(&self, at: RemotePtr, expected: u64, new: u64) -> Result<u64> {
        self.atomic(at, AtomicOp::CompareSwap { expected, new })
    }
    /// Atomic read of the word at `at`: read permission suffices (see `atomic`).
    #[inline]
    pub fn fetch(&self, at: RemotePtr) -> Result<u64> {
        self.atomic(at, AtomicOp::Fetch)
    }
    /// `atomic` run by the given path whatever ACTIVERMA_ATOMICS says: the origin (one-sided)
    /// or the target's CPU (server-based), to compare them in one run.
    pub fn atomic_by(&self, path: AtomicPath, at: RemotePtr, op: AtomicOp) -> Result<u64> {
        self.live()?.proto.atomic_by(path, at.rank, at.addr, op, Width::W64)
    }
    /// A 32-bit atomic on a 4-byte aligned word (an `int`): operands are truncated to 32 bits,
    /// the neighbouring bytes are never touched; rules as for `atomic`.
    #[inline]
    pub fn atomic32(&self, at: RemotePtr, op: AtomicOp) -> Result<u32> {
        self.live()?.proto.atomic_sized(at.rank, at.addr, op, Width::W32).map(|v| v as u32)
    }
    #[inline]
    pub fn fetch_add_u32(&self, at: RemotePtr, v: u32) -> Result<u32> {
        self.atomic32(at, AtomicOp::FetchAdd(v as u64))
    }
    #[inline]
    pub fn swap_u32(&self, at: RemotePtr, v: u32) -> Result<u32> {
        self.atomic32(at, AtomicOp::Swap(v as u64))
    }
    #[inline]
    pub fn compare_swap_u32(&self, at: RemotePtr, expected: u32, new: u32) -> Result<u32> {
        self.atomic32(at, AtomicOp::CompareSwap { expected: expected as u64, new: new as u64 })
    }
    #[inline]
    pub fn fetch_u32(&self, at: RemotePtr) -> Result<u32> {
        self.atomic32(at, AtomicOp::Fetch)
    }

    /// The protocol a put/get/atomic to `at` would use, and why.
    pub fn explain(&self, at: RemotePtr, len: usize, op: &str) -> Result<(Protocol, &'static str)> {
        let kind = match op {
            "put" => AccessKind::Put,
            "get" => AccessKind::Get,
            "atomic" => AccessKind::Atomic,
            _ => return Err(Error::InvalidArgument(format!("explain: op {op} is not put, get or atomic"))),
        };
        self.live()?.proto.explain(at.rank, at.addr, len, kind)
    }

    /// Installs a user active-message handler (id >= FIRST_USER_HANDLER) on this rank.
    pub fn register_handler(&self, id: HandlerId, h: Handler) -> Result<()> {
        if id < FIRST_USER_HANDLER {
            return Err(Error::InvalidArgument(format!("handler ids below {FIRST_USER_HANDLER} are the runtime's")));
        }
        self.live()?.am.register(id, h)
    }

    /// Sends an active message of any length to `dst`'s handler `id`.
    pub fn send_am(&self, dst: Rank, id: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        self.live()?.am.send(dst, id, token, payload)
    }

    /// `send_am` that returns once the message has arrived at `dst`: under the modelled
    /// network at its modelled delivery time, as a blocking `put` returns at its remote
    /// completion (on one host it is in `dst`'s queue as soon as it is sent; between hosts, MPI
    /// holds it until then). For a message the sender's next step relies on being at the
    /// target, such as a logged record.
    pub fn send_am_arrived(&self, dst: Rank, id: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        self.live()?.am.send_arrived(dst, id, token, payload)
    }

    /// `send_am` that never blocks: a busy or full queue to `dst` defers the message to a
    /// later progress step of this rank (in order with its other messages to `dst`). For
    /// progress hooks (`add_progress_hook`), which must not block.
    pub fn post_am(&self, dst: Rank, id: HandlerId, token: u64, payload: &[u8]) -> Result<()> {
        self.live()?.am.post(dst, id, token, payload)
    }

    /// Leaves the job (collective): completes outstanding operations, waits for every rank,
    /// stops the progress thread. Any later operation fails with `Error::Finalized`.
    pub fn finalize(&self) -> Result<()> {
        let i = self.live()?;
        self.not_recovering("finalize")?;
        let r = self.barrier();
        if i.print_counters {
            let set: Vec<String> = i.counters.snapshot().into_iter().filter(|&(_, v)| v != 0).map(|(k, v)| format!("{k}={v}")).collect();
            eprintln!("activerma: rank {} counters: {}", i.conduit.rank(), set.join(" "));
            if let Some(t) = i.conduit.traffic() {
                let to: Vec<String> = (0..i.conduit.size())
                    .map(|r| (r, t.to(r)))
                    .filter(|(_, t)| *t != TrafficTo::default())
                    .map(|(r, t)| format!("{r}:{}/{}B+{}am/{}B", t.rma_ops, t.rma_bytes, t.am_fragments, t.am_bytes))
                    .collect();
                if !to.is_empty() {
                    eprintln!(
                        "activerma: rank {} network traffic (to rank: one-sided ops/bytes + message fragments/bytes): {}",
                        i.conduit.rank(),
                        to.join(" ")
                    );
                }
            }
        }
        i.finalized.store(true, Ordering::Release);
        i.access.stop();
        drop(i.progress_thread.lock().unwrap().1.take());
        i.conduit.mark_finalized();
        r
    }
}
