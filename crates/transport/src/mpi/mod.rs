//! The `mpi` conduit: ranks are MPI processes, possibly on many hosts, started by the
//! cluster's own `mpirun` / `srun`.
//!
//! - bootstrap: MPI (rank, size, non-blocking barrier and allgather, so handlers keep running)
//! - active messages: point-to-point, fragments of up to FRAGMENT bytes (`am.rs`)
//! - one-sided (`rma.rs`), in two windows, each under one `lock_all` epoch for the whole job:
//!   - the symmetric heap (segments) is one `MPI_Win_allocate` window, registered up front as
//!     a SHMEM symmetric heap is: MPI's fast path (on one host a shared mapping);
//!   - any other memory goes into a dynamic window, where attaching is this conduit's
//!     registration (the registration strategies manage it);
//!   - implicit puts up to 64 KiB go from copies kept until the flush (`bounce.rs`).
//! - when every rank runs on one host, heaps and tables are one shared window every rank maps
//!   (`Shared`), and the upper layers copy as on the smp conduit; otherwise no other rank's
//!   memory or table is reachable here: upper layers check segments against their own segment
//!   map and send private memory accesses to the target (large ones: a rendezvous, then the
//!   dynamic window).
//!
//! All MPI calls are serialized by one lock, so MPI_THREAD_SERIALIZED suffices.

mod am;
mod bounce;
mod ffi;
mod node;
mod owner_views;
mod rma;
mod started;

use crate::mapping::Mapping;
use crate::rma_calls::Chooser;
use crate::{AtomicOp, Conduit, FragHeader, PeerStatus, StartedGet, Window};
use activerma_core::clock::Deadline;
use activerma_core::page::page_size;
use activerma_core::{settings, Config, Error, Rank, Result};
pub use ffi::initialized_comm_size;
use ffi::Mpi;
/// An MPI communicator handle of the program's (`MpiConduit::init`, `activerma::init_mpi_comm`).
pub use mpi_sys::MPI_Comm as MpiComm;
use rma::Target;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

pub struct MpiConduit {
    rank: Rank,
    size: usize,
    mpi: Arc<Mutex<Mpi>>,
    /// Bumped by every MPI call of ours: the progress thread stays out of the way of a rank
    /// that is calling MPI anyway.
    calls: Arc<std::sync::atomic::AtomicU64>,
    /// Drives MPI's progress engine in the background (see `progress_pump`).
    pump: Mutex<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>>,
    /// The program's MPI thread level, if below MPI_THREAD_SERIALIZED (see `Mpi::init`).
    calling_thread_only: Option<&'static str>,
    /// The program's MPI is at MPI_THREAD_SINGLE: no helper thread unless the user asks.
    thread_single: bool,
    /// The heap window's memory (MPI owns it): page-aligned start here, and its length.
    heap_ptr: usize,
    heap_len: usize,
    /// This rank's translation table: a private mapping, or its part of the shared window.
    table_ptr: usize,
    table_len: usize,
    _table_map: Option<Mapping>,
    /// The heap's memory when it is neither MPI's nor in a node's shared window.
    _private_heap: Option<Mapping>,
    /// This node's heaps at the same addresses in each of its processes (owner_views.rs).
    _owner_views: Option<owner_views::OwnerViews>,
    /// The ranks of this node share their heaps and tables (ACTIVERMA_MPI_SHARED).
    shared: Option<Shared>,
    /// Every rank of the job is on this host and mapped here: the heap's window is the shared
    /// window, no one-sided operation ever goes through MPI.
    all_mapped: bool,
    /// Per rank, its node (see `Conduit::node_of`).
    nodes: Vec<usize>,
    /// Active messages to ranks of this node: their inboxes in the node's window.
    queues: node::NodeQueues,
    /// Our inbox's memory when our node shares none (messages to ourselves).
    own_queue: Option<Mapping>,
    /// Bytes of one rank's wake words and inbox (after its table in the node's window).
    queue_len: usize,
    /// What went through MPI, per target.
    traffic: crate::traffic::Traffic,
    /// Per rank: where its heap starts (page-aligned) and where its heap window starts (the
    /// displacement origin, which MPI may not have page-aligned).
    heap_bases: Vec<usize>,
    heap_win_bases: Vec<usize>,
    am: am::Endpoints,
    /// Per target, a bit per window (HEAP, DYNAMIC): puts not yet remotely complete (gets
    /// started by `rma_get_started` complete by their requests). MPI does not order a get or
    /// an atomic after a put, so those flush first — a get sees this origin's earlier puts, as
    /// on one host.
    unflushed: Vec<AtomicU8>,
    finalized: AtomicBool,
    /// See `Conduit::cpu_atomics_coherent`. Open MPI 4.1 applies one-sided atomics on a
    /// *dynamic* window with CPU atomics at the target, so a rank's own atomics stay local;
    /// on its allocated window under osc/rdma they lose updates against a CPU atomic, and a
    /// rank's atomics aimed at itself there crash the job (in the target's btl/vader fragment
    /// handling, seen only inside the runtime, not reproduced in a C program). So under
    /// osc/rdma every atomic goes through the dynamic window, where segments are attached too.
    /// Elsewhere — MPICH, and Open MPI's osc/ucx (its atomic on a dynamic window looks the
    /// attached region up remotely first: 52.8 us against 25.5 on the heap window over TCP)
    /// — every atomic, own ones included, goes through MPI on the heap window, which MPI
    /// serves in software or on the NIC that a CPU atomic does not take part in.
    cpu_atomics_coherent: bool,
    /// One poller at a time, from taking fragments to the end of their handlers: fragments of
    /// one message must be handled in order.
    poll_lock: AtomicBool,
    timeout_s: f64,
}

/// The heap and table of every rank of this node as mapped in this process (None for ranks of
/// other nodes), and every rank's pid (for cross-memory attach to private memory): what the
/// smp conduit has, over MPI's shared window of the node.
struct Shared {
    heaps: Vec<Option<usize>>,
    tables: Vec<Option<usize>>,
    pids: Vec<i32>,
}

impl MpiConduit {
    /// Initializes MPI and the job: heap, table, window, active-message endpoints. The job is
    /// MPI_COMM_WORLD, or `over` (a communicator of a program that initialized MPI itself).
    pub fn init(cfg: &Config, heap_size: usize, table_bytes: usize, over: Option<MpiComm>) -> Result<MpiConduit> {
        let mut mpi = Mpi::init(over)?;
        let calls = cfg.get_enum(settings::MPI_RMA_CALLS)?;
        (mpi.put_calls, mpi.started_gets.calls) = (Chooser::new(calls), Chooser::new(calls));
        let (rank, size) = (mpi.rank(), mpi.size());
        let ps = page_size();
        let leaders = mpi.node_layout()?;
        let my_node: Vec<Rank> = (0..size).filter(|&r| leaders[r] == leaders[rank]).collect();
        let whole_job = my_node.len() == size;
        let wanted = cfg.get_enum(settings::MPI_SHARED)? == "auto";
        let share = wanted && my_node.len() > 1;
        // Job-wide (the setting is the same everywhere): the heap's window over a job that
        // spans nodes is made on memory each rank has (MPI_Win_create), since MPI cannot
        // allocate a window that is shared within nodes only.
        let window_on_own_memory = wanted && !whole_job;
        let verbose = cfg.get_bool(settings::VERBOSE)?;
        // One shared window per node (the whole job's when it is on one host): per rank a spare
        // page (alignment), the heap, the table. An MPI whose one-sided component cannot make
        // shared windows (e.g. Open MPI with `--mca osc rdma`) fails on every rank of the node
        // alike: then its ranks keep their memory to themselves.
        let table_len = table_bytes.next_multiple_of(ps);
        // After the table: the rank's wake words and inbox, for messages inside the node.
        let queue_shape = node::shape(cfg)?;
        let queue_len = node::bytes(queue_shape);
        let node_bytes = (heap_size + ps + table_len + queue_len) * my_node.len();
        let fits = shm_room(node_bytes);
        if let Err(room) = fits {
            let need = format!(
                "{:.1} GB of /dev/shm for this node's windows, which has {:.1} GB free",
                node_bytes as f64 / 1e9,
                room as f64 / 1e9
            );
            if whole_job {
                // Every window of a one-host job lives in /dev/shm under Open MPI.
                return Err(Error::OutOfResources(format!(
                    "Open MPI would reserve {need}: lower ACTIVERMA_SEGMENT_SIZE (now {heap_size} bytes per rank)"
                )));
            }
            if rank == my_node[0] {
                eprintln!("activerma: a shared window would take {need}: this node's ranks share no memory (every access goes through MPI); lower ACTIVERMA_SEGMENT_SIZE to share");
            }
        }
        let parts = if share && fits.is_ok() {
            match mpi.allocate_shared_heap(heap_size + ps + table_len + queue_len, whole_job) {
                Ok(parts) => Some(parts),
                Err(e) => {
                    if verbose {
                        eprintln!("activerma: rank {rank}: no shared window ({e}); every access goes through MPI one-sided operations");
                    }
                    None
                }
            }
        } else {
            None
        };
        let mut private_heap = None;
        let (win_base, table_ptr, table_map) = if let Some(parts) = &parts {
            let win_base = parts[my_node.iter().position(|&r| r == rank).expect("we are on our node")] as usize;
            let table_ptr = win_base.next_multiple_of(ps) + heap_size;
            // SAFETY: our part of the window. The table must start zeroed (TargetTable::init),
            // and so must the inbox (an empty one), before the collectives below let anyone
            // in. Punched out, not written: ~25 MB per rank stay out of memory until used.
            unsafe { crate::mapping::zero_shared(table_ptr, table_len + queue_len) };
            (win_base, table_ptr, None)
        } else {
            // One spare page, so the heap itself can start on a page boundary.
            let win_base = if !window_on_own_memory {
                mpi.allocate_heap(heap_size + ps)? as usize
            } else {
                // A rank alone on its node, or a node whose shared window failed: its own
                // memory, in the same kind of window as every other node's (collective).
                let m = Mapping::anonymous(heap_size + ps, 0)?;
                let base = m.ptr as usize;
                private_heap = Some(m);
                base
            };
            let table = Mapping::anonymous(table_bytes, 0)?;
            (win_base, table.ptr as usize, Some(table))
        };
        if window_on_own_memory {
            mpi.create_heap_window(win_base as *mut u8, heap_size + ps)?;
        }
        let osc_rdma = mpi.heap_window_reports_locks()?;
        // Where the heap starts in its window part (page alignment): the same in every process
        // that maps the part.
        let slack = mpi.allgather_u64((win_base.next_multiple_of(ps) - win_base) as u64)?;
        // Collective: every rank takes part, whether or not its node shares memory.
        // Before the pid is published: the node's other ranks reach private memory by it.
        crate::smp::cma::allow_peer_attach();
        let pids = mpi.allgather_u64(std::process::id() as u64)?;
        // MPI's mapping here of each heap of the node, then views of them at the same address
        // in every process of the node where that can be had (owner_views.rs; collective too).
        let node_heaps: Vec<usize> = parts
            .as_ref()
            .map_or_else(Vec::new, |parts| my_node.iter().zip(parts).map(|(&r, &part)| part as usize + slack[r] as usize).collect());
        let views = owner_views::map(&mut mpi, &my_node, &node_heaps, heap_size, verbose)?;
        let seen_at = |i: usize| views.as_ref().map_or(node_heaps[i], |v| v.heap(i, heap_size));
        let me_in_node = my_node.iter().position(|&r| r == rank).expect("we are on our node");
        let heap_ptr = views.as_ref().map_or(win_base + slack[rank] as usize, |v| v.heap(me_in_node, heap_size));
        let bases = mpi.allgather_u64(heap_ptr as u64)?;
        // The heap window's displacements are offsets from the window's start in the owner's
        // MPI mapping: the same offset back from the heap, wherever it is seen.
        let win_bases: Vec<usize> = (0..size).map(|r| (bases[r] - slack[r]) as usize).collect();
        let shared = parts.map(|_| {
            let mut heaps = vec![None; size];
            let mut tables = vec![None; size];
            for (i, &r) in my_node.iter().enumerate() {
                heaps[r] = Some(seen_at(i));
                tables[r] = Some(node_heaps[i] + heap_size);
            }
            Shared { heaps, tables, pids: pids.into_iter().map(|p| p as i32).collect() }
        });
        let all_mapped = whole_job && shared.is_some();
        // A rank that shares no memory still has an inbox of its own, for its messages to itself.
        let own_queue = match &shared {
            Some(_) => None,
            None => Some(Mapping::anonymous(queue_len, 0)?),
        };
        let mut queue_at: Vec<Option<usize>> =
            (0..size).map(|r| shared.as_ref().and_then(|s| s.tables[r]).map(|t| t + table_len)).collect();
        if let Some(m) = &own_queue {
            queue_at[rank] = Some(m.ptr as usize);
        }
        let queues = node::NodeQueues::new(queue_at, queue_shape);
        // The nodes upper layers see are the groups that map each other: a rank whose memory is
        // not shared (ACTIVERMA_MPI_SHARED=off, alone on its host, no shared window) is a
        // node of its own.
        let group = if shared.is_some() { leaders[rank] } else { rank as u64 };
        let nodes = number_in_order(&mpi.allgather_u64(group)?);
        let am = am::Endpoints::new(&mut mpi, size)?;
        let (calling_thread_only, thread_single) = (mpi.calling_thread_only, mpi.thread_single);
        let mpi = Arc::new(Mutex::new(mpi));
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // On the one-host shared heap every one-sided access is a CPU load/store or a CMA call:
        // nothing waits for MPI's progress engine, and a pump's wake-ups only cost (1 MiB puts
        // ran 1.4x slower with it). Nor is there one when only the calling thread may call MPI.
        let pump_us = if all_mapped || calling_thread_only.is_some() { 0 } else { cfg.get_u64(settings::MPI_ASYNC_PROGRESS_US)? };
        let pump = progress_pump(mpi.clone(), calls.clone(), pump_us)?;
        Ok(MpiConduit {
            rank,
            size,
            heap_bases: bases.into_iter().map(|b| b as usize).collect(),
            heap_win_bases: win_bases,
            _owner_views: views,
            mpi,
            calls,
            pump: Mutex::new(pump),
            calling_thread_only,
            thread_single,
            heap_ptr,
            heap_len: heap_size,
            table_ptr,
            table_len: table_map.as_ref().map_or(table_bytes.next_multiple_of(ps), |m| m.len),
            _table_map: table_map,
            _private_heap: private_heap,
            am,
            unflushed: (0..size).map(|_| AtomicU8::new(0)).collect(),
            finalized: AtomicBool::new(false),
            // All mapped: every atomic is a CPU atomic on the shared heap. Open MPI's osc/rdma
            // is the component whose windows report the `no_locks` hint.
            cpu_atomics_coherent: all_mapped || (Mpi::library_version().starts_with("Open MPI") && osc_rdma),
            all_mapped,
            shared,
            nodes,
            queues,
            own_queue,
            queue_len,
            traffic: crate::traffic::Traffic::new(size),
            poll_lock: AtomicBool::new(false),
            timeout_s: cfg.get_f64(settings::TIMEOUT_S)?,
        })
    }

    fn in_heap(&self, rank: Rank, addr: usize) -> bool {
        addr.checked_sub(self.heap_bases[rank]).is_some_and(|off| off < self.heap_len)
    }

    /// The heap window for the rank's heap, the dynamic window (absolute addresses) otherwise.
    fn target(&self, mpi: &Mpi, rank: Rank, addr: usize) -> (Target, u8) {
        match mpi.heap_win {
            Some(win) if self.in_heap(rank, addr) => (Target { win, rank, disp: addr - self.heap_win_bases[rank] }, HEAP),
            _ => (Target { win: mpi.win, rank, disp: addr }, DYNAMIC),
        }
    }

    /// The one window every piece of a list lands in, with each piece's (displacement, length)
    /// there; None when they span both windows or a count would overflow MPI's `int`.
    fn list_target(
        &self,
        mpi: &Mpi,
        rank: Rank,
        pieces: impl Iterator<Item = (usize, usize)>,
    ) -> Option<(mpi_sys::MPI_Win, Vec<(usize, usize)>)> {
        let mut win = None;
        let mut disps = Vec::new();
        let mut total = 0usize;
        for (addr, len) in pieces {
            let (t, _) = self.target(mpi, rank, addr);
            if *win.get_or_insert(t.win) != t.win {
                return None;
            }
            total += len;
            disps.push((t.disp, len));
        }
        let fits = total <= i32::MAX as usize && disps.len() <= i32::MAX as usize;
        Some((win?, disps)).filter(|_| fits)
    }

    /// Whether our memory at `addr` belongs in the dynamic window: everything outside the heap,
    /// and segments too where atomics go through it (see `cpu_atomics_coherent`).
    fn in_dynamic_window(&self, addr: usize) -> bool {
        !self.in_heap(self.rank, addr) || (self.cpu_atomics_coherent && !self.all_mapped)
    }

    /// Where atomics go: see `cpu_atomics_coherent`.
    fn atomic_target(&self, mpi: &Mpi, rank: Rank, addr: usize) -> Target {
        if self.cpu_atomics_coherent {
            Target { win: mpi.win, rank, disp: addr }
        } else {
            self.target(mpi, rank, addr).0
        }
    }

    /// Where a get of `len` bytes at `rank`'s `addr` reads, once the puts still pending to
    /// the rank are complete (MPI does not order a get after a put); counts its traffic.
    fn get_target(&self, mpi: &mut Mpi, rank: Rank, addr: usize, len: usize) -> Result<Target> {
        self.flush_pending(mpi, Some(rank))?;
        let (t, _) = self.target(mpi, rank, addr);
        self.traffic.rma(rank, len);
        Ok(t)
    }

    /// Completes the puts still pending to `rank` (all ranks: None).
    fn flush_pending(&self, mpi: &mut Mpi, rank: Option<Rank>) -> Result<()> {
        let pending = match rank {
            Some(r) => self.unflushed[r].swap(0, Ordering::Relaxed),
            None => self.unflushed.iter().fold(0, |all, u| all | u.swap(0, Ordering::Relaxed)),
        };
        if pending & HEAP != 0 {
            let win = mpi.heap_win.expect("a heap put went through the heap window");
            mpi.flush(win, rank)?;
        }
        if pending & DYNAMIC != 0 {
            let win = mpi.win;
            mpi.flush(win, rank)?;
        }
        Ok(())
    }

    /// The process id of `rank` for cross-memory attach: ranks of this node's shared heap only.
    fn shared_pid(&self, rank: Rank) -> Result<i32> {
        match &self.shared {
            Some(s) if s.heaps[rank].is_some() => Ok(s.pids[rank]),
            _ => Err(Error::Unsupported(format!(
                "cross-memory attach to rank {rank}: the mpi conduit reaches private memory through the target"
            ))),
        }
    }

    fn live(&self) -> Result<std::sync::MutexGuard<'_, Mpi>> {
        if self.finalized.load(Ordering::Acquire) {
            return Err(Error::Finalized);
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(self.mpi.lock().unwrap())
    }

    /// Runs `start` once, then tests the request it returns until it completes, releasing the
    /// MPI lock and running `progress` between tests (so handlers run while we wait).
    fn wait_collective(&self, what: &str, progress: &mut dyn FnMut(), mut test: impl FnMut(&mut Mpi) -> Result<bool>) -> Result<()> {
        let deadline = Deadline::after_secs(self.timeout_s);
        let mut backoff = activerma_core::backoff::Backoff::new();
        loop {
            if test(&mut *self.live()?)? {
                return Ok(());
            }
            progress();
            if backoff.snooze() && deadline.expired() {
                return Err(Error::Timeout { what: what.into(), secs: deadline.secs() });
            }
        }
    }
}

/// Numbers the distinct values in increasing order: 0 for the smallest, and so on.
fn number_in_order(values: &[u64]) -> Vec<usize> {
    let mut order = values.to_vec();
    order.sort_unstable();
    order.dedup();
    values.iter().map(|v| order.binary_search(v).expect("every value is listed")).collect()
}

/// How far the progress pump backs off while the rank calls MPI itself (see `progress_pump`).
const PUMP_MAX_SLEEP_FACTOR: u64 = 32;

/// Bits of `MpiConduit::unflushed`: which window has puts pending.
const HEAP: u8 = 1;
const DYNAMIC: u8 = 2;

impl Conduit for MpiConduit {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self, progress: &mut dyn FnMut()) -> Result<()> {
        let mut req = self.live()?.ibarrier()?;
        self.wait_collective("a barrier", progress, |m| m.test(&mut req))
    }

    fn allgather(&self, mine: &[u8], progress: &mut dyn FnMut()) -> Result<Vec<Vec<u8>>> {
        let mut lens = vec![0u64; self.size];
        let my_len = mine.len() as u64;
        let mut req = self.live()?.iallgather_u64(&my_len, &mut lens)?;
        self.wait_collective("an allgather", progress, |m| m.test(&mut req))?;
        let total: u64 = lens.iter().sum();
        if total == 0 {
            return Ok(vec![Vec::new(); self.size]); // MPI refuses an allgatherv of nothing
        }
        if total > i32::MAX as u64 {
            return Err(Error::SizeLimit(format!("allgather of {total} bytes in all: at most 2 GiB")));
        }
        let mut out = vec![0u8; total as usize];
        // Counts and displacements must outlive the operation: they live here until it ends.
        let counts: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let displs: Vec<i32> = lens.iter().scan(0i32, |off, &l| Some(std::mem::replace(off, *off + l as i32))).collect();
        let mut req = self.live()?.iallgatherv(mine, &mut out, &counts, &displs)?;
        self.wait_collective("an allgather", progress, |m| m.test(&mut req))?;
        let mut parts = Vec::with_capacity(self.size);
        let mut off = 0;
        for l in lens {
            parts.push(out[off..off + l as usize].to_vec());
            off += l as usize;
        }
        Ok(parts)
    }

    fn am_fragment_capacity(&self, dst: Rank) -> usize {
        if self.queues.on_node(dst) {
            self.queues.capacity()
        } else {
            am::FRAGMENT - am::HEADER
        }
    }

    fn am_try_send(&self, dst: Rank, header: FragHeader, payload: &[u8], deliver_at_ns: u64) -> Result<bool> {
        if self.finalized.load(Ordering::Acquire) {
            return Err(Error::Finalized);
        }
        if let Some(sent) = self.queues.try_send(self.rank, dst, header, payload, deliver_at_ns) {
            return Ok(sent);
        }
        let mut mpi = self.live()?;
        let sent = self.am.try_send(&mut mpi, dst, header, payload, deliver_at_ns)?;
        if sent {
            self.traffic.am(dst, payload.len());
        }
        Ok(sent)
    }

    fn am_poll(&self, budget: usize, f: &mut dyn FnMut(Rank, FragHeader, &[u8])) -> usize {
        if self.poll_lock.swap(true, Ordering::Acquire) {
            return 0; // another thread of this rank is polling
        }
        // This node's inbox, then MPI's messages: taken out under the MPI lock, handled without
        // it (a handler may itself send).
        let mut n = self.queues.poll(self.rank, budget, &mut |frag| f(frag.src as Rank, frag.am, frag.payload));
        if !self.all_mapped && n < budget {
            let arrived = match self.live() {
                Ok(mut mpi) => self.am.poll(&mut mpi, budget - n),
                Err(_) => Vec::new(),
            };
            n += arrived.len();
            for (src, header, bytes) in arrived {
                f(src, header, &bytes);
            }
        }
        self.poll_lock.store(false, Ordering::Release);
        n
    }

    fn heap_window(&self, rank: Rank) -> Option<Window> {
        match self.shared.as_ref().and_then(|s| s.heaps[rank]) {
            Some(h) => Some(Window { local: h as *mut u8, remote_base: self.heap_bases[rank], len: self.heap_len }),
            None => {
                (rank == self.rank).then_some(Window { local: self.heap_ptr as *mut u8, remote_base: self.heap_ptr, len: self.heap_len })
            }
        }
    }

    fn heap_base(&self, rank: Rank) -> usize {
        self.heap_bases[rank]
    }

    fn table_window(&self, rank: Rank) -> Option<Window> {
        match self.shared.as_ref().and_then(|s| s.tables[rank]) {
            Some(t) => Some(Window { local: t as *mut u8, remote_base: 0, len: self.table_len }),
            None => (rank == self.rank).then_some(Window { local: self.table_ptr as *mut u8, remote_base: 0, len: self.table_len }),
        }
    }

    fn node_of(&self, rank: Rank) -> usize {
        self.nodes[rank]
    }

    /// This node's ranks' tables and inboxes (in the node's window, or our own mappings when
    /// we share none). MPI's own buffers are not ours to count.
    fn control_memory(&self) -> Option<crate::ControlMemory> {
        let parts: Vec<(usize, usize)> = match &self.shared {
            Some(s) => s.tables.iter().flatten().map(|&t| (t, self.table_len + self.queue_len)).collect(),
            None => {
                let queue = self.own_queue.as_ref().map(|m| (m.ptr as usize, m.len));
                std::iter::once((self.table_ptr, self.table_len)).chain(queue).collect()
            }
        };
        let resident = parts.iter().map(|&(p, l)| crate::mapping::resident_in(p, l)).sum::<Result<usize>>().ok()?;
        let ranks = self.shared.as_ref().map_or(1, |s| s.tables.iter().flatten().count());
        Some(crate::ControlMemory { bytes: parts.iter().map(|p| p.1).sum(), resident, ranks })
    }

    fn traffic(&self) -> Option<&crate::traffic::Traffic> {
        Some(&self.traffic)
    }

    /// The heap is in its window from the start; other memory is attached to the dynamic
    /// window, and so are segments where atomics go through it (see `cpu_atomics_coherent`).
    fn register(&self, addr: usize, len: usize) -> Result<()> {
        if !self.in_dynamic_window(addr) {
            return Ok(());
        }
        self.live()?.attach(addr, len)
    }

    fn deregister(&self, addr: usize, _len: usize) -> Result<()> {
        if !self.in_dynamic_window(addr) {
            return Ok(());
        }
        self.live()?.detach(addr)
    }

    fn rma_reaches_registered(&self) -> bool {
        true
    }

    fn rma_put(&self, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<()> {
        let mut mpi = self.live()?;
        let (t, window) = self.target(&mpi, rank, addr);
        self.traffic.rma(rank, src.len());
        rma::put(&mut mpi, t, src, complete)?;
        if !complete {
            self.unflushed[rank].fetch_or(window, Ordering::Relaxed);
        }
        Ok(())
    }

    fn rma_get(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        let mut mpi = self.live()?;
        let t = self.get_target(&mut mpi, rank, addr, dst.len())?;
        rma::get(&mut mpi, t, dst)
    }

    unsafe fn rma_get_started(&self, rank: Rank, addr: usize, dst: *mut u8, len: usize) -> Result<Option<StartedGet>> {
        let mut mpi = self.live()?;
        let t = self.get_target(&mut mpi, rank, addr, len)?;
        // SAFETY: the caller's contract (dst untouched until the get tested or waited complete).
        unsafe { mpi.started_gets.start(t, dst, len) }.map(Some)
    }

    unsafe fn rma_get_list_started(&self, rank: Rank, pieces: &[(usize, *mut u8, usize)]) -> Result<Option<StartedGet>> {
        let mut mpi = self.live()?;
        let Some((win, disps)) = self.list_target(&mpi, rank, pieces.iter().map(|p| (p.0, p.2))) else {
            return Ok(None);
        };
        self.flush_pending(&mut mpi, Some(rank))?;
        self.traffic.rma(rank, disps.iter().map(|d| d.1).sum());
        let local: Vec<(*mut u8, usize)> = pieces.iter().map(|p| (p.1, p.2)).collect();
        // SAFETY: the caller's contract (every buffer untouched until tested or waited).
        unsafe { mpi.started_gets.start_list(win, rank, &disps, &local) }.map(Some)
    }

    fn rma_test_get(&self, get: StartedGet) -> Result<bool> {
        self.live()?.started_gets.test(get)
    }

    fn rma_wait_get(&self, get: StartedGet) -> Result<()> {
        self.live()?.started_gets.wait(get)
    }

    fn rma_put_list(&self, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<bool> {
        let mut mpi = self.live()?;
        let Some((win, disps)) = self.list_target(&mpi, rank, pieces.iter().map(|p| (p.0, p.1.len()))) else {
            return Ok(false);
        };
        // Puts still pending to the rank go first: MPI does not order puts.
        self.flush_pending(&mut mpi, Some(rank))?;
        let from: Vec<(usize, usize)> = pieces.iter().map(|p| (p.1.as_ptr() as usize, p.1.len())).collect();
        self.traffic.rma(rank, from.iter().map(|p| p.1).sum());
        rma::put_list(&mut mpi, win, rank, &disps, &from)?;
        Ok(true)
    }

    fn rma_get_list(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<bool> {
        let mut mpi = self.live()?;
        let Some((win, disps)) = self.list_target(&mpi, rank, pieces.iter().map(|p| (p.0, p.1.len()))) else {
            return Ok(false);
        };
        self.flush_pending(&mut mpi, Some(rank))?;
        let into: Vec<(usize, usize)> = pieces.iter_mut().map(|p| (p.1.as_mut_ptr() as usize, p.1.len())).collect();
        self.traffic.rma(rank, into.iter().map(|p| p.1).sum());
        rma::get_list(&mut mpi, win, rank, &disps, &into)?;
        Ok(true)
    }

    fn rma_atomic(&self, rank: Rank, addr: usize, op: AtomicOp, width: crate::Width) -> Result<u64> {
        let mut mpi = self.live()?;
        self.flush_pending(&mut mpi, Some(rank))?;
        let t = self.atomic_target(&mpi, rank, addr);
        self.traffic.rma(rank, width.bytes());
        rma::atomic(&mut mpi, t, op, width)
    }

    /// Every accumulate of a job that spans nodes (or keeps its heaps apart) goes through MPI,
    /// those into our own segments too; a job whose every rank maps every heap adds in place.
    fn rma_accumulates(&self) -> bool {
        !self.all_mapped
    }

    fn rma_accumulate(&self, rank: Rank, elem: crate::Element, pieces: &[(usize, usize)], packed: &[u8]) -> Result<()> {
        let mut mpi = self.live()?;
        // MPI orders neither puts nor accumulates with each other: earlier puts land first.
        self.flush_pending(&mut mpi, Some(rank))?;
        self.traffic.rma(rank, packed.len());
        if let [(addr, _)] = pieces {
            let (t, _) = self.target(&mpi, rank, *addr);
            rma::accumulate(&mut mpi, t, elem, packed)?;
        } else if let Some((win, disps)) = self.list_target(&mpi, rank, pieces.iter().copied()) {
            rma::accumulate_list(&mut mpi, win, rank, elem, &disps, packed)?;
        } else {
            let mut at = 0;
            for &(addr, len) in pieces {
                let (t, _) = self.target(&mpi, rank, addr);
                rma::accumulate(&mut mpi, t, elem, &packed[at..at + len])?;
                at += len;
            }
        }
        Ok(())
    }

    fn rma_flush(&self, rank: Option<Rank>) -> Result<()> {
        self.flush_pending(&mut *self.live()?, rank)
    }

    fn cpu_atomics_coherent(&self) -> bool {
        self.cpu_atomics_coherent
    }
    fn threads_may_call(&self) -> Result<()> {
        match self.calling_thread_only {
            None => Ok(()),
            Some(level) => Err(Error::Unsupported(format!(
                "the program initialized MPI with {level}, so only its own calls may enter MPI: no progress thread (use ACTIVERMA_PROGRESS=app, or initialize MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE))"
            ))),
        }
    }

    fn helper_threads_allowed(&self) -> bool {
        !self.thread_single
    }

    fn rma_fence(&self) -> Result<()> {
        // MPI does not order puts: complete those still pending.
        self.flush_pending(&mut *self.live()?, None)
    }

    fn cma_write(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        crate::smp::cma::write(self.shared_pid(rank)?, rank, addr, src)
    }

    fn cma_read(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        crate::smp::cma::read(self.shared_pid(rank)?, rank, addr, dst)
    }

    fn cma_writev(&self, rank: Rank, pieces: &[(usize, &[u8])], max_iov: usize) -> Result<usize> {
        crate::smp::cma::writev(self.shared_pid(rank)?, rank, pieces, max_iov)
    }

    fn cma_readv(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])], max_iov: usize) -> Result<usize> {
        crate::smp::cma::readv(self.shared_pid(rank)?, rank, pieces, max_iov)
    }

    fn peer_pid(&self, rank: Rank) -> Option<i32> {
        self.shared_pid(rank).ok()
    }

    fn wake(&self, rank: Rank) {
        // Inside the node a futex; across nodes none: a sleeping progress thread naps (below).
        self.queues.wake(rank);
    }

    fn announce_serving(&self, on_its_own: bool) {
        self.queues.announce_serving(self.rank, on_its_own);
    }

    fn serves_on_its_own(&self, rank: Rank) -> bool {
        rank < self.size() && self.queues.serves_on_its_own(rank)
    }

    fn sleep(&self, timeout_ns: u64, still_idle: &mut dyn FnMut() -> bool) {
        // Short naps while MPI messages may come: MPI has no wake-up we can wait on without
        // holding the MPI lock. A job all on this node gets messages through inboxes only.
        let nap = if self.all_mapped { timeout_ns } else { timeout_ns.min(50_000) };
        if !self.queues.sleep(self.rank, nap, still_idle) && still_idle() {
            std::thread::sleep(std::time::Duration::from_nanos(nap));
        }
    }

    fn peer_status(&self, _rank: Rank) -> PeerStatus {
        // MPI reports failed processes by aborting the job (mpirun stops every rank).
        PeerStatus::Running
    }

    fn mark_finalized(&self) {
        if !self.finalized.swap(true, Ordering::AcqRel) {
            if let Some((stop, thread)) = self.pump.lock().unwrap().take() {
                stop.store(true, Ordering::Release);
                let _ = thread.join();
            }
            let mut mpi = self.mpi.lock().unwrap();
            self.am.cancel(&mut mpi);
            if let Err(e) = mpi.finalize() {
                eprintln!("activerma: rank {}: MPI finalize: {e}", self.rank);
            }
        }
    }
}

/// Some MPI libraries (MPICH over UCX among them) complete one-sided operations on a dynamic
/// window only while the *target* calls into MPI. A rank whose code computes, or spins on a
/// flag a put will set, would stall its origins. This thread drives MPI's progress engine
/// (an `MPI_Iprobe` that matches nothing) when the rank made no MPI call of its own since the
/// thread last looked, and only if the MPI lock is free. It runs no active-message handlers:
/// those follow ACTIVERMA_PROGRESS as on one host.
///
/// Every wake-up costs the rank a context switch on its core (on a 2-core VM with 2 ranks,
/// waking every 100 us made 4 KiB puts over TCP 1.35x slower), so while the rank calls MPI
/// itself the thread doubles its sleep, up to `PUMP_MAX_SLEEP_FACTOR` x `interval_us`; the
/// first look that finds the rank quiet pokes and drops back to `interval_us`. A target that
/// starts spinning is therefore first pumped within that longest sleep, then every
/// `interval_us`.
fn progress_pump(
    mpi: Arc<Mutex<Mpi>>,
    calls: Arc<std::sync::atomic::AtomicU64>,
    interval_us: u64,
) -> Result<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>> {
    if interval_us == 0 {
        return Ok(None);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("activerma-mpi-progress".into())
        .spawn(move || {
            let mut seen = calls.load(Ordering::Relaxed);
            let mut sleep_us = interval_us;
            while !s.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_micros(sleep_us));
                let now = calls.load(Ordering::Relaxed);
                if now == seen {
                    if let Ok(mut m) = mpi.try_lock() {
                        m.poke();
                    }
                    sleep_us = interval_us;
                } else {
                    sleep_us = (sleep_us * 2).min(interval_us * PUMP_MAX_SLEEP_FACTOR);
                }
                seen = now;
            }
        })
        .map_err(|e| Error::Os { call: "spawn the MPI progress thread", errno_text: e.to_string() })?;
    Ok(Some((stop, thread)))
}

/// Ok when /dev/shm can hold node windows of `bytes` where the MPI reserves them in full (Open
/// MPI's osc/sm and osc/rdma ask for the whole size up front and, refused, leave the job
/// hanging or fail later with an unrelated error; MPICH's windows are sparse); else Err with
/// the bytes free.
fn shm_room(bytes: usize) -> std::result::Result<(), u128> {
    if !Mpi::library_version().starts_with("Open MPI") {
        return Ok(());
    }
    // SAFETY: statvfs fills the struct we pass; a zeroed one is a valid start.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut st) } != 0 {
        return Ok(()); // no /dev/shm to ask: let the MPI decide
    }
    let room = st.f_bavail as u128 * st.f_frsize as u128;
    if room >= bytes as u128 {
        Ok(())
    } else {
        Err(room)
    }
}
