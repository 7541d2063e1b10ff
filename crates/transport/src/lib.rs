//! The transport layer ("conduit"): everything that differs between one host and many.
//!
//! The contract is deliberately small, so that an MPI conduit can implement it next:
//! bootstrap (rank, size, barrier, allgather), active-message fragment delivery, direct data
//! movement on registered memory, cross-memory access to private memory, wake-ups, and peer
//! liveness. Everything above (active messages, translation table, protocols) is written once.

pub mod inbox;
pub mod liveness;
pub mod mapping;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod nest;
pub mod netmodel;
pub mod rma_calls;
pub mod smp;
pub mod traffic;

use activerma_core::{Rank, Result};

/// `wait_for_rank` in a job without respawn: a rank that died stays gone, any other is the
/// one the job started with (incarnation 0).
pub fn never_replaced(status: PeerStatus, rank: Rank) -> Result<u32> {
    match status {
        PeerStatus::Gone(how) => Err(activerma_core::Error::PeerGone { rank, how }),
        _ => Ok(0),
    }
}

/// True when this process looks like it was started by an MPI launcher (mpirun, mpiexec, srun).
pub fn started_by_mpi_launcher() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS"].iter().any(|v| std::env::var_os(v).is_some())
}

/// A 64-bit remote atomic, as conduits with one-sided atomics execute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    Fetch,
    FetchAdd(u64),
    Swap(u64),
    CompareSwap { expected: u64, new: u64 },
}

/// The size of the word an atomic works on: 64 bits (activerma's words), or 32 (an `int`, as
/// ARMCI's `Rmw` and SHMEM's `_int` atomics use). Values of a 32-bit atomic are truncated to 32
/// bits; the old value comes back zero-extended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    W32,
    W64,
}

impl Width {
    pub fn bytes(self) -> usize {
        match self {
            Width::W32 => 4,
            Width::W64 => 8,
        }
    }
}

/// The element type of a one-sided accumulate (`Conduit::rma_accumulate`): dst[i] += src[i],
/// integers wrapping. Complex numbers add as pairs of their reals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    I32,
    I64,
    F32,
    F64,
}

impl Element {
    pub fn bytes(self) -> usize {
        match self {
            Element::I32 | Element::F32 => 4,
            Element::I64 | Element::F64 => 8,
        }
    }
}

/// Applies `op` to the word of `width` at `p`; returns the previous value.
///
/// # Safety
/// `p` must be a live word of that width, aligned to it, that is only touched atomically while
/// others may access it.
#[inline]
pub unsafe fn apply_atomic_at(p: *mut u8, op: AtomicOp, width: Width) -> u64 {
    match width {
        // SAFETY: the caller's promise.
        Width::W64 => apply_atomic(unsafe { &*(p as *const std::sync::atomic::AtomicU64) }, op),
        // SAFETY: the caller's promise.
        Width::W32 => apply_atomic32(unsafe { &*(p as *const std::sync::atomic::AtomicU32) }, op) as u64,
    }
}

/// `apply_atomic` on a 32-bit word (operands truncated to 32 bits).
#[inline]
pub fn apply_atomic32(word: &std::sync::atomic::AtomicU32, op: AtomicOp) -> u32 {
    use std::sync::atomic::Ordering::SeqCst;
    match op {
        AtomicOp::Fetch => word.load(SeqCst),
        AtomicOp::FetchAdd(v) => word.fetch_add(v as u32, SeqCst),
        AtomicOp::Swap(v) => word.swap(v as u32, SeqCst),
        AtomicOp::CompareSwap { expected, new } => match word.compare_exchange(expected as u32, new as u32, SeqCst, SeqCst) {
            Ok(v) | Err(v) => v,
        },
    }
}

/// Applies `op` to a word this process can reach; returns the previous value.
#[inline]
pub fn apply_atomic(word: &std::sync::atomic::AtomicU64, op: AtomicOp) -> u64 {
    use std::sync::atomic::Ordering::SeqCst;
    match op {
        AtomicOp::Fetch => word.load(SeqCst),
        AtomicOp::FetchAdd(v) => word.fetch_add(v, SeqCst),
        AtomicOp::Swap(v) => word.swap(v, SeqCst),
        AtomicOp::CompareSwap { expected, new } => match word.compare_exchange(expected, new, SeqCst, SeqCst) {
            Ok(v) | Err(v) => v,
        },
    }
}

/// The 16-byte header an active-message fragment carries; its meaning belongs to the `am` layer.
pub type FragHeader = [u64; 2];

/// A window of a rank's shared memory mapped into this process.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Where the window starts in this process.
    pub local: *mut u8,
    /// Where the same bytes start in the owning rank's address space.
    pub remote_base: usize,
    pub len: usize,
}

// SAFETY: a Window is a description of shared memory; synchronisation is the user's business.
unsafe impl Send for Window {}
unsafe impl Sync for Window {}

impl Window {
    /// Translates the owner's virtual address range into a local pointer, if it lies inside.
    #[inline]
    pub fn translate(&self, addr: usize, len: usize) -> Option<*mut u8> {
        let off = addr.checked_sub(self.remote_base)?;
        if off.checked_add(len)? <= self.len {
            // SAFETY: off + len is inside the mapping.
            Some(unsafe { self.local.add(off) })
        } else {
            None
        }
    }
}

/// The ticket of a get `Conduit::rma_get_started` started, for `rma_test_get` / `rma_wait_get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartedGet(pub u64);

/// What a peer is doing, as far as the job knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerStatus {
    Running,
    Finalized,
    /// Gone: the text says how (exit status or signal).
    Gone(String),
}

/// Control memory of the ranks of one host (`Conduit::control_memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlMemory {
    /// Bytes of address space.
    pub bytes: usize,
    /// Bytes of it in memory (mincore), whoever touched them.
    pub resident: usize,
    /// The ranks it serves (per rank: `bytes / ranks`).
    pub ranks: usize,
}

pub trait Conduit: Send + Sync {
    fn name(&self) -> &'static str;
    fn rank(&self) -> Rank;
    fn size(&self) -> usize;

    /// Blocks until every rank arrived, running `progress` while it waits.
    fn barrier(&self, progress: &mut dyn FnMut()) -> Result<()>;
    /// Every rank contributes bytes; everyone gets all contributions, in rank order.
    fn allgather(&self, mine: &[u8], progress: &mut dyn FnMut()) -> Result<Vec<Vec<u8>>>;

    /// Payload bytes one fragment to `dst` carries (a slot of a shared-memory inbox inside a
    /// host, an MPI message between nodes).
    fn am_fragment_capacity(&self, dst: Rank) -> usize;
    /// Sends one fragment if the queue to `dst` has room; `Ok(false)` means full (back-pressure).
    /// `deliver_at_ns` (0 = now) lets the modelled network delay delivery.
    fn am_try_send(&self, dst: Rank, header: FragHeader, payload: &[u8], deliver_at_ns: u64) -> Result<bool>;
    /// Hands every arrived fragment (up to `budget`) to `f`; returns how many.
    fn am_poll(&self, budget: usize, f: &mut dyn FnMut(Rank, FragHeader, &[u8])) -> usize;

    /// The rank's symmetric heap (segments live here), if it is mapped in this process.
    fn heap_window(&self, rank: Rank) -> Option<Window>;
    /// Where the rank's symmetric heap starts in the rank's own address space.
    fn heap_base(&self, rank: Rank) -> usize {
        self.heap_window(rank).map(|w| w.remote_base).unwrap_or(0)
    }
    /// The rank's translation-table window, if origins here can read it (the software IOMMU).
    /// Always `Some` for our own rank.
    fn table_window(&self, rank: Rank) -> Option<Window>;

    /// Makes `[ptr, ptr+len)` of this rank's heap read as zero on every rank (a fresh segment
    /// block). Writes every byte; a conduit whose heap is a shared file that no device has
    /// registered punches the whole pages out instead, so that they take no memory (and no
    /// time at allocation) until used.
    ///
    /// # Safety
    /// `[ptr, ptr+len)` must lie in this rank's heap, and nobody may use it meanwhile.
    unsafe fn zero_heap(&self, ptr: *mut u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::write_bytes(ptr, 0, len) }
    }
    /// Makes `[addr, addr+len)` of our memory a target of one-sided `rma_*` operations
    /// (MPI: attach to the dynamic window, unless it is in the heap's window already).
    /// Conduits that map memory directly need nothing.
    fn register(&self, _addr: usize, _len: usize) -> Result<()> {
        Ok(())
    }
    fn deregister(&self, _addr: usize, _len: usize) -> Result<()> {
        Ok(())
    }
    /// Whether `rma_put` / `rma_get` also reach memory a rank registered outside its heap
    /// (MPI: attached to the dynamic window). Then a large transfer to private memory of a
    /// rank on another host can be a rendezvous and one one-sided move instead of copies by
    /// the target's CPU (proto's rendezvous_rma.rs).
    fn rma_reaches_registered(&self) -> bool {
        false
    }
    /// One-sided put into registered memory of a rank whose heap is not mapped here; with
    /// `complete`, returns once the data is in the target's memory, otherwise at the next
    /// `rma_flush`.
    fn rma_put(&self, _rank: Rank, _addr: usize, _src: &[u8], _complete: bool) -> Result<()> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} has no one-sided put", self.name())))
    }
    /// One-sided put of many pieces — (address, bytes) — to `rank` as one operation (MPI: one
    /// MPI_Put whose target side is an hindexed datatype of the pieces), complete at the
    /// target on return. Ok(false): the conduit has no such operation, or these pieces do not
    /// fit one (different windows, more than `int` counts); the caller moves them one by one.
    fn rma_put_list(&self, _rank: Rank, _pieces: &[(usize, &[u8])]) -> Result<bool> {
        Ok(false)
    }
    /// One-sided get of many pieces as one operation (see `rma_put_list`).
    fn rma_get_list(&self, _rank: Rank, _pieces: &mut [(usize, &mut [u8])]) -> Result<bool> {
        Ok(false)
    }
    /// One-sided get; `dst` holds the data on return.
    fn rma_get(&self, _rank: Rank, _addr: usize, _dst: &mut [u8]) -> Result<()> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} has no one-sided get", self.name())))
    }
    /// Starts a one-sided get of `len` bytes at `rank`'s `addr` into `dst` that moves while
    /// the caller computes (MPI: MPI_Rget) and completes when `rma_test_get` said true or
    /// `rma_wait_get` returned. Ok(None): the conduit has no such operation; nothing started.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes, and nothing reads or writes it, nor frees it, until
    /// the get completed that way (successfully or not).
    unsafe fn rma_get_started(&self, _rank: Rank, _addr: usize, _dst: *mut u8, _len: usize) -> Result<Option<StartedGet>> {
        Ok(None)
    }
    /// Starts a one-sided get of many pieces as one operation (`rma_get_list`) that moves while
    /// the caller computes, into each piece's own buffer (`(addr at rank, buffer, bytes)`);
    /// completes as `rma_get_started`'s does. Ok(None): the conduit cannot take these pieces
    /// as one operation; nothing started.
    ///
    /// # Safety
    /// Every buffer is writable for its bytes, and nothing reads or writes it, nor frees it,
    /// until `rma_test_get` said true or `rma_wait_get` returned.
    unsafe fn rma_get_list_started(&self, _rank: Rank, _pieces: &[(usize, *mut u8, usize)]) -> Result<Option<StartedGet>> {
        Ok(None)
    }
    /// Whether a started get has landed in its destination, without waiting for it; true
    /// (or an error) spends the ticket.
    fn rma_test_get(&self, get: StartedGet) -> Result<bool> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} started no get {}", self.name(), get.0)))
    }
    /// Waits until a started get has landed in its destination; spends the ticket, also when
    /// it fails.
    fn rma_wait_get(&self, get: StartedGet) -> Result<()> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} started no get {}", self.name(), get.0)))
    }
    /// One-sided atomic on a word of `width` (addr aligned to it); returns the previous value.
    fn rma_atomic(&self, _rank: Rank, _addr: usize, _op: AtomicOp, _width: Width) -> Result<u64> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} has no one-sided atomics", self.name())))
    }
    /// Whether accumulates of this job go through `rma_accumulate` — the same answer on every
    /// rank. False: the conduit has no such operation, or every rank maps every segment, so an
    /// add in place by the origin's CPU is cheaper; the caller adds by its own means.
    fn rma_accumulates(&self) -> bool {
        false
    }
    /// Adds `packed` — elements of `elem`, the pieces' back to back — into the pieces
    /// (address, bytes: whole elements) of `rank`'s segment memory (MPI: one MPI_Accumulate
    /// with MPI_SUM, an hindexed target datatype for many pieces), complete at the target on
    /// return. Element-wise atomic with respect to every other `rma_accumulate` of the same
    /// element type, and only to those: a job that adds this way (`rma_accumulates`) must add
    /// every such element this way, from every rank, its own included.
    fn rma_accumulate(&self, _rank: Rank, _elem: Element, _pieces: &[(usize, usize)], _packed: &[u8]) -> Result<()> {
        Err(activerma_core::Error::Unsupported(format!("conduit {} has no one-sided accumulate", self.name())))
    }
    /// Completes every `rma_put` issued without `complete` to `rank` (all ranks: `None`).
    fn rma_flush(&self, _rank: Option<Rank>) -> Result<()> {
        Ok(())
    }
    /// Whether a CPU atomic on mapped memory is atomic with respect to this conduit's
    /// `rma_atomic` from other ranks. MPI atomics are only atomic among MPI atomics (MPICH runs
    /// them in software at the target), so on such a conduit a rank's atomics on its own
    /// segment go through the engine too.
    fn cpu_atomics_coherent(&self) -> bool {
        true
    }
    /// Whether threads other than the caller's (progress threads) may use the conduit; an
    /// error that says why not otherwise (an MPI the program initialized below
    /// MPI_THREAD_SERIALIZED).
    fn threads_may_call(&self) -> Result<()> {
        Ok(())
    }
    /// Whether this process may run a helper thread that never enters the conduit (the copy
    /// engine, which only copies between memory mapped here): not where the program told MPI
    /// it has one thread (MPI_THREAD_SINGLE), by the standard's letter, though no MPI library
    /// can see a thread that never calls it.
    fn helper_threads_allowed(&self) -> bool {
        true
    }
    /// Orders: one-sided operations issued before are visible before any issued after.
    fn rma_fence(&self) -> Result<()> {
        self.rma_flush(None)
    }
    /// Copies into / out of a range of another process's private memory.
    fn cma_write(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()>;
    fn cma_read(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()>;
    /// Copies many pieces — (remote address, bytes) — into another process's private memory
    /// with as few kernel calls as `max_iov` descriptors per call allow (one scatter/gather
    /// list, the paper's host-assisted zero-copy); returns the calls made. The default moves
    /// one piece per call.
    fn cma_writev(&self, rank: Rank, pieces: &[(usize, &[u8])], _max_iov: usize) -> Result<usize> {
        for &(addr, src) in pieces {
            self.cma_write(rank, addr, src)?;
        }
        Ok(pieces.len())
    }
    /// Reads many pieces out of another process's private memory (see `cma_writev`).
    fn cma_readv(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])], _max_iov: usize) -> Result<usize> {
        for (addr, dst) in pieces.iter_mut() {
            self.cma_read(rank, *addr, dst)?;
        }
        Ok(pieces.len())
    }
    /// The process id of `rank`, when it runs on this host and cross-memory attach can reach it
    /// (PART moves data with its own process_vm_writev/readv calls, to see where a copy stopped).
    fn peer_pid(&self, _rank: Rank) -> Option<i32> {
        None
    }

    /// Wakes `rank`'s progress thread if it sleeps.
    fn wake(&self, rank: Rank);
    /// Announces whether this rank's progress engine runs on its own (a progress thread,
    /// polling or woken by messages): ranks of this host may then hand it work that needs its
    /// CPU without waiting for the program's next call into the runtime.
    fn announce_serving(&self, _on_its_own: bool) {}
    /// Whether `rank`, a rank of this host, announced a progress engine of its own; false for
    /// other hosts' ranks and where the conduit cannot tell.
    fn serves_on_its_own(&self, _rank: Rank) -> bool {
        false
    }
    /// Sleeps this rank's progress thread until woken or `timeout_ns`; `still_idle` is rechecked
    /// after announcing the sleep so that no wake-up is lost.
    fn sleep(&self, timeout_ns: u64, still_idle: &mut dyn FnMut() -> bool);

    fn peer_status(&self, rank: Rank) -> PeerStatus;

    /// The node (host) `rank` runs on, numbered from 0 in the order of each node's lowest
    /// rank. Ranks of one node map each other's heaps and tables; others are reached through
    /// the network. One node unless the job spans hosts (or emulates them).
    fn node_of(&self, _rank: Rank) -> usize {
        0
    }
    /// The job's control memory on this host — queues, tables, logs, collectives' areas — and
    /// how many ranks it serves; None where the conduit cannot say.
    fn control_memory(&self) -> Option<ControlMemory> {
        None
    }
    /// What this rank sent through the network path, per target (see traffic.rs); None on a
    /// conduit that has none.
    fn traffic(&self) -> Option<&traffic::Traffic> {
        None
    }

    /// In a job whose launcher replaces ranks that die (`activerma run --respawn N`): which
    /// incarnation of each peer this process talks to (see liveness.rs). None otherwise.
    fn liveness(&self) -> Option<std::sync::Arc<liveness::Liveness>> {
        None
    }
    /// This process's incarnation of its rank: 0, or how many times the rank was replaced.
    fn incarnation(&self) -> u32 {
        0
    }
    /// A replacement (incarnation > 0) announces it is back, once it has restored its memory:
    /// waits until every other rank has seen the failure (so none is inside a collective),
    /// resets the collectives and marks itself up. Nothing to do for an original rank.
    fn rejoin(&self, _progress: &mut dyn FnMut()) -> Result<()> {
        Ok(())
    }
    /// Waits until `rank` is up again after a failure and adopts its new incarnation (returned);
    /// returns at once if it did not fail. Without respawn a rank that died stays gone.
    fn wait_for_rank(&self, rank: Rank, _progress: &mut dyn FnMut()) -> Result<u32> {
        never_replaced(self.peer_status(rank), rank)
    }

    /// Marks this rank finalized (others may still read its memory until they finalize too).
    fn mark_finalized(&self);
}
