//! Protocols: how each remote operation is carried out, chosen per call from the target's
//! translation table (segment or private memory) and the target's place (this process or
//! another). Files are named by mechanism so a reader sees which paths exist:
//!
//! | file          | mechanism                                                        |
//! |---------------|------------------------------------------------------------------|
//! | put_direct    | copy into the target's segment mapped here                       |
//! | get_direct    | copy out of the target's segment mapped here                     |
//! | put_cma       | process_vm_writev into the target's exposed private memory       |
//! | get_cma       | process_vm_readv out of it                                       |
//! | atomic_direct | CPU atomics on the target's segment mapped here                  |
//! | atomic_am     | request to the target, which runs the atomic on its private memory |
//! | rma_conduit   | put_rma/get_rma/atomic_rma: the conduit's one-sided engine (segment on another host) |
//! | put_am/get_am | the data travels in an active message; the target checks and copies |
//! | landing       | buffered/pipelined transfers: the data waits in the target's landing zone; the target checks and copies |
//! | put_active/get_active | Active Access pages: write/read and log per the page bits (log_append) |
//! | rendezvous    | registration miss: the target pins the pages, then put_cma/get_cma   |
//! | part          | PART (nothing pinned): cross-memory attach block by block; NACK, page-in, ERR, resend |
//! | firehose      | registration miss: move this origin's firehoses (pinned buckets), then put_cma/get_cma |
//! | keyed_rma     | private memory on another host (firehose, pin-all): a key per exposure, (firehoses,) then the one-sided engine |
//! | strided       | strided patterns: one check of the whole extent, CPU copies to a mapped segment  |
//! | noncontig     | lists of pieces: host-assisted (scatter/gather lists), per piece, or packed     |
//!
//! Registration misses under the bounce strategy take put_am/get_am's code, named put_bounce /
//! get_bounce so that `explain` and the verbose log say why.
//!
//! Completion (`smp`): a blocking put or get returns when the data is in the target's memory
//! (remote completion); non-blocking and implicit operations are started and their data moved
//! before the call returns, and complete (modelled network included) by `wait` / `flush`.

mod active_origin;
mod am_request;
mod atomic_active;
mod atomic_am;
mod atomic_direct;
mod completion;
mod copy_engine;
mod firehose;
mod get_active;
mod get_am;
mod get_cma;
mod get_direct;
mod keyed_rma;
mod landing;
mod noncontig;
mod noncontig_target;
mod part;
mod pieces_nb;
mod put_active;
mod put_am;
mod put_cma;
mod put_direct;
mod registered_move;
mod remote_marks;
mod rendezvous;
mod rendezvous_rma;
mod rma_conduit;
mod rma_exposures;
mod select;
mod strided;
mod strided_nb;
mod transfer;

pub use atomic_am::AtomicPath;
pub use completion::OpHandle;
pub use noncontig::Noncontig;
pub use remote_marks::RemoteMarks;
pub use select::{Choice, Protocol};
pub use strided::StridedPattern;
pub use transfer::{PendingTransfer, Transfer};

use activerma_access::ActiveTable;
use activerma_am::Am;
use activerma_core::counters::{bump, Counters};
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast, Iotlb, IotlbConfig, OriginTable, RegistrationStats, Strategy, TargetTable};
use activerma_transport::netmodel::NetModel;
use activerma_transport::{Conduit, Window};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

pub use activerma_transport::{AtomicOp, Element, Width};

pub struct Proto {
    conduit: Arc<dyn Conduit>,
    am: Arc<Am>,
    net: Arc<NetModel>,
    counters: Arc<Counters>,
    /// Per rank: its table, if this process can read it (same host).
    tables: Vec<Option<ActiveTable>>,
    /// Per rank: its heap, where the segment fast path may be taken (select.rs): mapped here,
    /// described by its table exactly, and nothing watching accesses (see `new`).
    segment_views: Vec<Option<Window>>,
    /// Respawn jobs: an access to a rank that failed is refused, never written into its memory
    /// (transport/liveness.rs). None otherwise, and the fast path pays one predicted branch.
    liveness: Option<Arc<activerma_transport::liveness::Liveness>>,
    heaps: Vec<Option<Window>>,
    /// Bytes in every rank's symmetric heap.
    heap_len: usize,
    /// CPU atomics on mapped segments mix safely with the conduit's one-sided atomics.
    cpu_atomics_coherent: bool,
    /// Per target: when the last implicit operation completes under the modelled network.
    pending_until: Vec<AtomicU64>,
    /// Per target: the window of implicit puts (bytes since its last flush), and whether the
    /// previous window outgrew ACTIVERMA_PUT_STREAM_AFTER (`stream_after`, 0 = never stream).
    window: Vec<ImplicitWindow>,
    stream_after: u64,
    verbose: bool,
    seen: std::sync::Mutex<std::collections::HashSet<(Protocol, Rank)>>,
    /// Per target: sequence number of this origin's next active access there.
    seq: Vec<AtomicU64>,
    /// Per target: the log slots this origin appended to since its last active flush there.
    touched: Vec<AtomicU64>,
    /// Per target on this host: active accesses since the last active flush there went through
    /// the target (a registration miss bounced them), which appended them to its logs itself,
    /// so `touched` does not name those logs: the active flush asks the target.
    active_via_target: Vec<std::sync::atomic::AtomicBool>,
    /// The modelled IOTLB in front of every translation lookup this rank makes.
    pub iotlb: Iotlb,
    /// Segment ranges other-host targets marked for Active Access (routed through them).
    marks: Arc<RemoteMarks>,
    /// Implicit puts sent through targets and not acknowledged yet (put_am.rs).
    posted: Arc<put_am::PostedPuts>,
    /// The landing zone of buffered and pipelined transfers, if the job has one (landing.rs).
    landing: Option<Arc<landing::Landing>>,
    /// The job's registration strategy: which slow path a registration miss takes.
    strategy: Strategy,
    /// Registration counters of this rank (shared with its table's Registrar).
    reg_stats: Arc<RegistrationStats>,
    /// PART's origin engine and message state (only under ACTIVERMA_REGISTRATION=part).
    part: Option<Arc<part::PartRt>>,
    /// This rank's Firehose, under ACTIVERMA_REGISTRATION=firehose.
    firehose: Option<Arc<activerma_mem::firehose::Firehose>>,
    /// Our keys to other hosts' exposures (keyed_rma.rs): under firehose and pin-all, on
    /// conduits whose engine reaches registered memory.
    rma_keys: Option<Arc<keyed_rma::RmaKeys>>,
    /// Our exposures other hosts' one-sided engines may reach (rma_exposures.rs), on conduits
    /// whose engine reaches registered memory.
    rma_exposures: Option<Arc<rma_exposures::RmaExposures>>,
    /// Smallest private transfer to another host that takes the rendezvous (0 = none).
    rma_rendezvous_min: usize,
    /// How lists of pieces (strided, vector) move: ACTIVERMA_NONCONTIG, ACTIVERMA_SGE_MAX.
    noncontig: noncontig::NoncontigSettings,
    /// Who runs atomics on other ranks' words (ACTIVERMA_ATOMICS).
    atomic_path: AtomicPath,
    /// How contiguous transfers of the protocol API move (ACTIVERMA_TRANSFER, transfer.rs).
    transfer: transfer::TransferSettings,
    /// This rank's own table (`with_table_handlers`): its Registrar pins user buffers for
    /// dynamic registration.
    own_table: Option<Arc<TargetTable>>,
    /// This process's copy engine, if the run has one (ACTIVERMA_COPY_ENGINE, copy_engine.rs).
    copy_engine: Option<copy_engine::CopyEngine>,
}

/// The implicit puts to one target since its last flush, for the choice to stream them.
#[derive(Default)]
struct ImplicitWindow {
    bytes: AtomicU64,
    previous_was_large: std::sync::atomic::AtomicBool,
}

/// State the protocol handlers share with the origin side (`register_handlers`).
pub struct ProtoHandlers {
    marks: Arc<RemoteMarks>,
    posted: Arc<put_am::PostedPuts>,
    landing: Option<Arc<landing::Landing>>,
}

/// State the table's handlers share with the origin side, made before the job's first
/// barrier (handlers must exist by then) and handed to the `Proto` made after it.
pub struct TableHandlers {
    table: Arc<TargetTable>,
    part: Option<Arc<part::PartRt>>,
    rma_exposures: Option<Arc<rma_exposures::RmaExposures>>,
    firehose: Option<Arc<activerma_mem::firehose::Firehose>>,
    rma_keys: Option<Arc<keyed_rma::RmaKeys>>,
}

impl Proto {
    /// Registers the protocol handlers; call before the job's first barrier.
    pub fn register_handlers(am: &Am, cfg: &Config) -> Result<ProtoHandlers> {
        let n = am.conduit().size();
        let (marks, posted) = (Arc::new(RemoteMarks::new(n)), Arc::new(put_am::PostedPuts::new(n)));
        remote_marks::register(am, marks.clone())?;
        am_request::register_response(am)?;
        atomic_am::register(am)?;
        put_am::register(am, posted.clone())?;
        am_request::register_active_flush(am)?;
        get_am::register(am)?;
        noncontig::register(am)?;
        let landing = landing::Landing::from_config(cfg, am)?;
        if let Some(l) = &landing {
            landing::register(am, l.clone(), posted.clone())?;
        }
        Ok(ProtoHandlers { marks, posted, landing })
    }

    /// Registers the handlers that need this rank's own table (rendezvous registration; under
    /// ACTIVERMA_REGISTRATION=firehose this rank's Firehose, with M, MAXVICTIM and the bucket
    /// size from the settings, and its moves and keys); call after the table exists and before
    /// the job's first barrier.
    pub fn register_table_handlers(am: &Arc<Am>, table: Arc<TargetTable>, cfg: &Config) -> Result<TableHandlers> {
        let strategy = table.registrar().strategy();
        let part = if strategy == Strategy::Part { Some(part::register(am, table.clone(), cfg)?) } else { None };
        rendezvous::register(am, table.clone())?;
        noncontig_target::register(am, noncontig::NoncontigSettings::from_config(cfg)?.sge_max)?;
        let rma_exposures = if am.conduit().rma_reaches_registered() { Some(rendezvous_rma::register(am, table.clone())?) } else { None };
        let firehose = if strategy == Strategy::Firehose { Some(firehose::setup(am, table.clone(), cfg)?) } else { None };
        let rma_keys = match &rma_exposures {
            Some(x) if matches!(strategy, Strategy::Firehose | Strategy::PinAll) => {
                Some(keyed_rma::register(am, firehose.clone(), x.clone())?)
            }
            _ => None,
        };
        Ok(TableHandlers { table, part, rma_exposures, firehose, rma_keys })
    }

    /// Withdraws our exposure at `addr` with `table_unexpose`; first, where other hosts'
    /// one-sided engines may reach it, waits until none is inside and deregisters it from the
    /// conduit (rendezvous_rma.rs).
    pub fn unexpose_private(&self, addr: usize, table_unexpose: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let Some(x) = &self.rma_exposures else { return table_unexpose() };
        // Key holders give their keys back (and finish their moves) before it is detached.
        let (len, keyed) = x.close(addr);
        let revoked = self.revoke_keys(&keyed, addr, len, false);
        let unexposed = x.finish(
            addr,
            &mut || {
                self.am.progress();
            },
            table_unexpose,
        );
        unexposed.and(revoked)
    }

    /// Installs what `register_table_handlers` made (the PART runtime under that strategy).
    pub fn with_table_handlers(mut self, h: TableHandlers) -> Proto {
        self.part = h.part;
        self.rma_exposures = h.rma_exposures;
        self.firehose = h.firehose;
        self.rma_keys = h.rma_keys;
        self.own_table = Some(h.table);
        self
    }

    /// Attaches to every rank's table; call after the barrier that follows table init.
    pub fn new(
        conduit: Arc<dyn Conduit>,
        am: Arc<Am>,
        net: Arc<NetModel>,
        counters: Arc<Counters>,
        handlers: ProtoHandlers,
        reg_stats: Arc<RegistrationStats>,
        cfg: &Config,
    ) -> Result<Proto> {
        let n = conduit.size();
        let mut tables = Vec::with_capacity(n);
        let mut heaps = Vec::with_capacity(n);
        let liveness = conduit.liveness();
        let me = Some(conduit.rank() as u32);
        for r in 0..n {
            let table = match conduit.table_window(r) {
                Some(w) => {
                    activerma_transport::mapping::ensure_mapped(w.local as usize, &format!("rank {r}'s translation table"))?;
                    Some(ActiveTable::attach(OriginTable::attach(w, r)?, me, liveness.clone()))
                }
                None => None,
            };
            tables.push(table);
            heaps.push(conduit.heap_window(r));
        }
        let heap_len = heaps[conduit.rank()].ok_or_else(|| Error::Unsupported("conduit without a local heap".into()))?.len;
        let conduit_atomics = conduit.cpu_atomics_coherent();
        if tables[conduit.rank()].is_none() {
            return Err(Error::Unsupported("conduit without a table window of our own".into()));
        }
        use activerma_core::settings as s;
        let iotlb =
            IotlbConfig::parse(cfg.raw(s::IOTLB_ENTRIES), cfg.raw(s::IOTLB_WAYS), cfg.raw(s::IOTLB_EVICTION), cfg.raw(s::IOTLB_MISS_NS))?;
        let iotlb = Iotlb::new(iotlb);
        let verbose = cfg.get_bool(settings::VERBOSE)?;
        // Every access must pass the modelled IOTLB, and the verbose log names each first use
        // of a protocol: then there is no shortcut.
        let described = |r: usize, h: &Window| tables[r].as_ref().is_some_and(|t| t.heap_range() == (h.remote_base, h.len));
        let segment_views = (0..n).map(|r| heaps[r].filter(|h| !(iotlb.enabled() || verbose) && described(r, h))).collect();
        Ok(Proto {
            seq: (0..n).map(|_| AtomicU64::new(0)).collect(),
            touched: (0..n).map(|_| AtomicU64::new(0)).collect(),
            active_via_target: (0..n).map(|_| Default::default()).collect(),
            iotlb,
            segment_views,
            liveness: conduit.liveness(),
            marks: handlers.marks,
            posted: handlers.posted,
            landing: handlers.landing,
            strategy: Strategy::from_config(cfg)?,
            reg_stats,
            part: None,
            firehose: None,
            rma_keys: None,
            rma_exposures: None,
            pending_until: (0..n).map(|_| AtomicU64::new(0)).collect(),
            window: (0..n).map(|_| ImplicitWindow::default()).collect(),
            stream_after: cfg.get_u64(settings::PUT_STREAM_AFTER)?,
            verbose,
            rma_rendezvous_min: cfg.get_u64(settings::RMA_RENDEZVOUS_MIN)? as usize,
            noncontig: noncontig::NoncontigSettings::from_config(cfg)?,
            atomic_path: AtomicPath::from_config(cfg)?,
            transfer: transfer::TransferSettings::from_config(cfg)?,
            own_table: None,
            copy_engine: copy_engine::for_run(cfg, &*conduit)?,
            seen: Default::default(),
            conduit,
            am,
            net,
            counters,
            tables,
            heaps,
            heap_len,
            cpu_atomics_coherent: conduit_atomics,
        })
    }

    #[inline]
    /// `Ok` when `rank` is a valid rank and (in a respawn job) the incarnation this process
    /// talks to is up; `Error::RankFailed` once it died. For waits on something only that rank
    /// can send, so they fail at once instead of running into their deadline.
    pub fn check_rank(&self, rank: Rank) -> Result<()> {
        if rank >= self.tables.len() {
            return Err(Error::InvalidRank { rank, size: self.tables.len() });
        }
        if let Some(l) = &self.liveness {
            l.check(rank)?;
        }
        Ok(())
    }

    /// Whether `rank`'s heap is mapped here at the address its owner uses
    /// (`World::segments_at_owner_addresses`).
    pub fn heap_at_owner_address(&self, rank: Rank) -> bool {
        self.heaps.get(rank).copied().flatten().is_some_and(|h| h.local as usize == h.remote_base)
    }

    /// Blocking put: returns when `src` is in the target's memory.
    #[inline]
    pub fn put(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        let at = self.put_start(rank, addr, src, true)?;
        completion::spin_until(at);
        Ok(())
    }

    /// Blocking get: returns when `dst` holds the target's bytes.
    #[inline]
    pub fn get(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        let at = self.get_start(rank, addr, dst)?;
        completion::spin_until(at);
        Ok(())
    }

    /// Non-blocking put; the handle completes when the data is remotely visible.
    pub fn put_nb(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<OpHandle> {
        Ok(OpHandle::new(self.put_start(rank, addr, src, true)?))
    }

    pub fn get_nb(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<OpHandle> {
        Ok(OpHandle::new(self.get_start(rank, addr, dst)?))
    }

    /// Implicit non-blocking put, completed by `flush(rank)` / `flush_all()`.
    pub fn put_nbi(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        let at = self.put_start(rank, addr, src, false)?;
        self.note_pending(rank, at);
        Ok(())
    }

    pub fn get_nbi(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        let at = self.get_start(rank, addr, dst)?;
        self.note_pending(rank, at);
        Ok(())
    }

    /// Whether an implicit put of `src` to `local` in `rank`'s segment should stream: it is 4 KiB
    /// or more, does not overlap its source, and the window of such puts to `rank` (since its
    /// last flush, this one included) has passed ACTIVERMA_PUT_STREAM_AFTER, or the previous
    /// window did — then the lines it writes would be evicted before anyone reads them, and a
    /// program that sends such windows keeps sending them. The count is a plain load and
    /// store: threads racing on it only move the moment streaming starts.
    #[inline]
    fn streams(&self, rank: Rank, local: *mut u8, src: &[u8]) -> bool {
        const STREAM_MIN: usize = 4096;
        if self.stream_after == 0 || src.len() < STREAM_MIN {
            return false;
        }
        let w = &self.window[rank];
        let total = w.bytes.load(Ordering::Relaxed) + src.len() as u64;
        w.bytes.store(total, Ordering::Relaxed);
        let (d, s) = (local as usize, src.as_ptr() as usize);
        let apart = s + src.len() <= d || d + src.len() <= s;
        apart && (total > self.stream_after || w.previous_was_large.load(Ordering::Relaxed))
    }

    /// A flush of `rank` closes its window of implicit puts.
    #[inline]
    fn close_window(&self, rank: Rank) {
        let w = &self.window[rank];
        let bytes = w.bytes.load(Ordering::Relaxed);
        if bytes != 0 || w.previous_was_large.load(Ordering::Relaxed) {
            w.previous_was_large.store(self.stream_after != 0 && bytes > self.stream_after, Ordering::Relaxed);
            w.bytes.store(0, Ordering::Relaxed);
        }
    }

    /// Records when an implicit operation completes; nothing to record (and no locked
    /// instruction) when the modelled network is off.
    #[inline]
    fn note_pending(&self, rank: Rank, at: u64) {
        if at != 0 {
            self.pending_until[rank].fetch_max(at, Ordering::AcqRel);
        }
    }

    /// A replacement rank, before its first access: the entries its dead predecessor claimed
    /// in the access logs of ranks on this host but never published become padding, so that
    /// their consumers do not wait on them for good. Returns the holes covered.
    pub fn cover_log_holes(&self) -> Result<usize> {
        let me = self.conduit.rank();
        let alive = |o: u32| self.usable(o as Rank).unwrap_or(true);
        self.tables
            .iter()
            .enumerate()
            .filter(|&(t, _)| t != me)
            .filter_map(|(_, t)| t.as_ref())
            .map(|t| t.cover_holes_of(me as u32, &alive))
            .sum()
    }

    /// In a respawn job, whether `rank` is the incarnation this process talks to and up;
    /// None in other jobs.
    pub fn usable(&self, rank: Rank) -> Option<bool> {
        self.liveness.as_ref().filter(|_| rank < self.tables.len()).map(|l| l.usable(rank))
    }

    /// `rank` died and its replacement is up (respawn jobs): what this origin had in flight to
    /// the dead process — posted puts waiting for acknowledgements, bounced active accesses,
    /// the modelled completion of implicit operations — is forgotten, so that flushes and
    /// active flushes to the replacement do not wait for answers that never come.
    pub fn forget_rank(&self, rank: Rank) {
        if rank >= self.tables.len() {
            return;
        }
        self.posted.forget(rank);
        if let Some(l) = &self.landing {
            l.forget(rank);
        }
        self.pending_until[rank].store(0, Ordering::Release);
        self.touched[rank].store(0, Ordering::Release);
        self.active_via_target[rank].store(false, Ordering::Release);
        if let Some(t) = &self.tables[rank] {
            t.forget_logs(); // the replacement makes an arena of its own
        }
        if let Some(k) = &self.rma_keys {
            k.forget(rank); // its keys named the dead process's exposures
        }
    }

    /// Returns when every implicit operation this origin issued to `rank` is remotely complete.
    pub fn flush(&self, rank: Rank) -> Result<()> {
        self.check_rank(rank)?;
        self.close_window(rank);
        self.conduit.rma_flush(Some(rank))?;
        completion::spin_until(self.pending_until[rank].load(Ordering::Acquire));
        fence(Ordering::SeqCst);
        put_am::wait_acknowledged(self, Some(rank))
    }

    pub fn flush_all(&self) -> Result<()> {
        (0..self.window.len()).for_each(|r| self.close_window(r));
        self.conduit.rma_flush(None)?;
        let last = self.pending_until.iter().map(|p| p.load(Ordering::Acquire)).max().unwrap_or(0);
        completion::spin_until(last);
        fence(Ordering::SeqCst);
        put_am::wait_acknowledged(self, None)
    }

    /// Orders: operations issued before the fence are visible at their targets before any
    /// issued after it. On one host they are moved in issue order, so a memory fence suffices;
    /// a conduit whose engine reorders (MPI does not order puts) completes what is pending.
    pub fn fence(&self) -> Result<()> {
        self.conduit.rma_fence()?;
        fence(Ordering::SeqCst);
        // Posted puts (put_am.rs) are ordered among themselves, not with one-sided operations.
        put_am::wait_acknowledged(self, None)
    }

    /// Adds `packed` — whole elements of `elem`, the pieces' back to back — into the pieces
    /// (address, bytes) of `rank`'s segment memory by the conduit's one-sided accumulate
    /// (MPI_Accumulate; many pieces as one), complete at the target on return. Ok(false) adds
    /// nothing: the conduit does not add in this job (one host, every segment mapped: an add
    /// in place is cheaper), or a piece is not plain segment memory (pages marked for Active
    /// Access, private memory); the caller adds by its own means, the same way on every rank.
    /// Errors: a bad rank, a piece the target does not expose readable and writable, pieces
    /// that are not whole elements or do not add up to `packed`.
    pub fn accumulate(&self, rank: Rank, elem: Element, pieces: &[(usize, usize)], packed: &[u8]) -> Result<bool> {
        rma_conduit::accumulate(self, rank, elem, pieces, packed)
    }

    /// Whether `accumulate` adds by the conduit in this job (see `Conduit::rma_accumulates`):
    /// a layer that must scale its data first asks before it does.
    pub fn accumulates_by_conduit(&self) -> bool {
        self.conduit.rma_accumulates()
    }

    /// 64-bit atomic on the target; returns the previous value (for `Fetch`: the value).
    #[inline]
    pub fn atomic(&self, rank: Rank, addr: usize, op: AtomicOp) -> Result<u64> {
        self.atomic_sized(rank, addr, op, Width::W64)
    }

    /// An atomic on a word of `width` at the target (aligned to it); returns the previous
    /// value, zero-extended (32-bit operands are truncated). Run where ACTIVERMA_ATOMICS says.
    #[inline(always)]
    pub fn atomic_sized(&self, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
        if self.atomic_path == AtomicPath::Target {
            return self.atomic_by(AtomicPath::Target, rank, addr, op, width);
        }
        self.atomic_one_sided(rank, addr, op, width)
    }

    /// `atomic_sized` run by the given path, whatever the setting says (benchmarks compare
    /// them in one run; a job must not mix them on one word across hosts: MPI's atomics and
    /// the target's CPU atomics are not atomic with respect to each other everywhere).
    pub fn atomic_by(&self, path: AtomicPath, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
        if path == AtomicPath::OneSided {
            return self.atomic_one_sided(rank, addr, op, width);
        }
        self.check_rank(rank)?;
        if !addr.is_multiple_of(width.bytes()) {
            return Err(Error::Misaligned { rank, addr });
        }
        if rank == self.conduit.rank() {
            // Our own word: checked like any access, then run by our CPU (we are its target).
            let checked = self.choose(rank, addr, width.bytes(), atomic_am::kind(op))?;
            if checked.lookup().active {
                // A logged atomic (atomic_active.rs): the same paths as another rank's.
                drop(checked);
                return self.atomic_chosen(rank, addr, op, width);
            }
            bump(&self.counters.atomic_direct, 1);
            // SAFETY: our own memory, exposed with the rights this atomic needs, aligned.
            let old = unsafe { activerma_transport::apply_atomic_at(addr as *mut u8, op, width) };
            drop(checked);
            return Ok(old);
        }
        atomic_am::run(self, rank, addr, op, width)
    }

    #[inline(always)]
    fn atomic_one_sided(&self, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
        if self.cpu_atomics_coherent && addr.is_multiple_of(width.bytes()) {
            if let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, width.bytes(), atomic_am::kind(op)) {
                let old = atomic_direct::run(self, local, op, width);
                completion::spin_until(self.net.completion_time(width.bytes()));
                return Ok(old);
            }
        }
        self.atomic_chosen(rank, addr, op, width)
    }

    #[inline(never)]
    fn atomic_chosen(&self, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
        self.check_rank(rank)?;
        if !addr.is_multiple_of(width.bytes()) {
            return Err(Error::Misaligned { rank, addr });
        }
        let choice = self.choose(rank, addr, width.bytes(), atomic_am::kind(op))?;
        let old = match choice.protocol {
            Protocol::AtomicDirect => atomic_direct::run(self, choice.local, op, width),
            Protocol::AtomicActive => atomic_active::run(self, rank, addr, op, width, choice.lookup(), choice.local)?,
            Protocol::AtomicRma => rma_conduit::atomic(self, rank, addr, op, width)?,
            Protocol::AtomicAm => {
                drop(choice);
                atomic_am::run(self, rank, addr, op, width)?
            }
            _ => unreachable!("atomics choose an atomic protocol"),
        };
        completion::spin_until(self.net.completion_time(width.bytes()));
        Ok(old)
    }

    #[inline(always)]
    fn put_start(&self, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<u64> {
        // Under the modelled network a put's transfer starts when it is issued, as a get's does:
        // the copy (the NIC's DMA, done by this CPU) and the claim of an active put's log entry
        // happen within its wire time. The entry's modelled write is owed after it: the
        // target's IOMMU writes the entry once the data has landed.
        match self.segment_fast(rank, addr, src.len(), AccessKind::Put) {
            Some((local, HeapFast::Plain)) => {
                let at = self.net.completion_time(src.len());
                if !complete && self.streams(rank, local, src) {
                    put_direct::run_streaming(self, local, src)
                } else {
                    put_direct::run(self, local, src)
                }
                Ok(at)
            }
            Some((local, HeapFast::Active(lookup))) => {
                let at = self.net.completion_time(src.len());
                let owed = put_active::run(self, rank, addr, src, &lookup, local)?;
                Ok(completion::plus_target_work(at, owed))
            }
            None => self.put_chosen(rank, addr, src, complete),
        }
    }

    #[inline(never)]
    fn put_chosen(&self, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<u64> {
        self.check_rank(rank)?;
        if src.is_empty() {
            return Ok(0);
        }
        let c = self.choose(rank, addr, src.len(), AccessKind::Put)?;
        match c.protocol {
            Protocol::PutDirect => put_direct::run(self, c.local, src),
            Protocol::PutCma => put_cma::run(self, rank, addr, src)?,
            Protocol::PutRma => rma_conduit::put(self, rank, addr, src, complete)?,
            Protocol::PutAm if complete => put_am::run(self, rank, addr, src)?,
            Protocol::PutAm => put_am::post(self, rank, addr, src)?,
            // Booked after the move (below), so the entries' modelled time, which the append
            // waited for, already comes before the completion: nothing owed on top.
            Protocol::PutActive => {
                put_active::run(self, rank, addr, src, c.lookup(), c.local)?;
            }
            // The slow paths wait for the target: give back the lookup first (see rendezvous.rs).
            Protocol::PutBounce => {
                self.note_bounced(rank);
                drop(c);
                bump(&self.reg_stats.bounce_ops, 1);
                put_am::run(self, rank, addr, src)?
            }
            Protocol::PutRendezvous => {
                drop(c);
                rendezvous::put(self, rank, addr, src)?
            }
            Protocol::PutPart => {
                drop(c);
                // Its blocks were booked on the modelled link one by one, resends included.
                return part::put(self, rank, addr, src);
            }
            Protocol::PutFirehose => match firehose::try_hit(self, &c, rank, addr, src.len(), || put_cma::run(self, rank, addr, src)) {
                Some(moved) => moved?,
                None => {
                    drop(c);
                    firehose::put(self, rank, addr, src)?
                }
            },
            Protocol::PutRmaRendezvous => rendezvous_rma::put(self, rank, addr, src)?,
            Protocol::PutKeyedRma => keyed_rma::put(self, rank, addr, src)?,
            _ => unreachable!("puts choose a put protocol"),
        }
        Ok(self.net.completion_time(src.len()))
    }

    #[inline(always)]
    fn get_start(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<u64> {
        // Under the modelled network the transfer starts when the get is issued: the copy below
        // (the NIC's DMA, done by this CPU) and an active get's log entry (written by the
        // target's IOMMU while the reply travels, section 4.4) happen within its wire time, not
        // after it.
        match self.segment_fast(rank, addr, dst.len(), AccessKind::Get) {
            Some((local, HeapFast::Plain)) => {
                let at = self.net.completion_time(dst.len());
                get_direct::run(self, local, dst);
                Ok(at)
            }
            Some((local, HeapFast::Active(lookup))) => {
                let at = self.net.completion_time(dst.len());
                get_active::run(self, rank, addr, dst, &lookup, local)?;
                Ok(at)
            }
            None => self.get_chosen(rank, addr, dst),
        }
    }

    #[inline(never)]
    fn get_chosen(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<u64> {
        self.check_rank(rank)?;
        if dst.is_empty() {
            return Ok(0);
        }
        let c = self.choose(rank, addr, dst.len(), AccessKind::Get)?;
        match c.protocol {
            Protocol::GetDirect => get_direct::run(self, c.local, dst),
            Protocol::GetCma => get_cma::run(self, rank, addr, dst)?,
            Protocol::GetRma => rma_conduit::get(self, rank, addr, dst)?,
            Protocol::GetAm => get_am::run(self, rank, addr, dst)?,
            Protocol::GetActive => get_active::run(self, rank, addr, dst, c.lookup(), c.local)?,
            Protocol::GetBounce => {
                self.note_bounced(rank);
                drop(c);
                bump(&self.reg_stats.bounce_ops, 1);
                get_am::run(self, rank, addr, dst)?
            }
            Protocol::GetRendezvous => {
                drop(c);
                rendezvous::get(self, rank, addr, dst)?
            }
            Protocol::GetPart => {
                drop(c);
                return part::get(self, rank, addr, dst);
            }
            Protocol::GetFirehose => {
                let len = dst.len();
                match firehose::try_hit(self, &c, rank, addr, len, || get_cma::run(self, rank, addr, dst)) {
                    Some(moved) => moved?,
                    None => {
                        drop(c);
                        firehose::get(self, rank, addr, dst)?
                    }
                }
            }
            Protocol::GetRmaRendezvous => rendezvous_rma::get(self, rank, addr, dst)?,
            Protocol::GetKeyedRma => keyed_rma::get(self, rank, addr, dst)?,
            _ => unreachable!("gets choose a get protocol"),
        }
        Ok(self.net.completion_time(dst.len()))
    }

    pub fn conduit(&self) -> &Arc<dyn Conduit> {
        &self.conduit
    }

    /// True when this process reads every rank's table (one host, not emulating remote).
    pub fn all_tables_visible(&self) -> bool {
        self.tables.iter().all(|t| t.is_some())
    }

    pub(crate) fn next_seq(&self, rank: Rank) -> u64 {
        self.seq[rank].fetch_add(1, Ordering::Relaxed)
    }

    /// Records the log slots an active access appended to (for `active_flush`). Usually they
    /// are recorded already: then no locked instruction, which would wait for the entry's stores.
    #[inline]
    pub(crate) fn note_touched(&self, rank: Rank, slots: u64) {
        let t = &self.touched[rank];
        if t.load(Ordering::Relaxed) & slots != slots {
            t.fetch_or(slots, Ordering::Relaxed);
        }
    }

    /// A bounced access (registration miss) goes through the target, which logs it itself if a
    /// page is marked for Active Access: the next active flush there asks the target.
    #[inline]
    pub(crate) fn note_bounced(&self, rank: Rank) {
        self.active_via_target[rank].store(true, Ordering::Release);
    }

    /// Active flush: returns once `rank` has processed (run through their handlers) every
    /// active access this origin made there — the paper's `flush(target)` for active
    /// accesses, independent of the RMA `flush`. Every log we appended to is drained past the
    /// position it had reached when this call began; if the target appended some of ours
    /// itself (another host, or bounced accesses on this host), it is asked to do the same
    /// with every one of its logs.
    pub fn active_flush(&self, rank: Rank) -> Result<()> {
        self.check_rank(rank)?;
        bump(&self.counters.active_flushes, 1);
        let Some(table) = &self.tables[rank] else {
            // Posted active puts are in the target's logs once acknowledged.
            put_am::wait_acknowledged(self, Some(rank))?;
            return am_request::active_flush_remote(self, rank);
        };
        if self.active_via_target[rank].swap(false, Ordering::AcqRel) {
            // Bounced accesses are blocking requests: each was in a log when its answer came.
            am_request::active_flush_remote(self, rank)?;
        }
        let mut touched = self.touched[rank].swap(0, Ordering::AcqRel);
        while touched != 0 {
            let slot = touched.trailing_zeros() as usize;
            touched &= touched - 1;
            if let Some(ring) = table.log_ring(slot)? {
                // Our entries went to our lane of the log only.
                let lane = ring.lane_of(self.conduit.rank() as u32);
                let upto = ring.reserved(lane);
                self.am.wait_until(|| ring.tail(lane) >= upto, rank, "an active flush")?;
            }
        }
        Ok(())
    }
}
