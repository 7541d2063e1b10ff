//! The process-global state: the World, init/finalize, and the registry of ARMCI allocations
//! that every remote address is checked against.

use crate::errors::{entry, R};
use activerma::{RemotePtr, Segment, World};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock};

/// Set once by ARMCI_Init.
pub(crate) static WORLD: OnceLock<World> = OnceLock::new();
/// The World's size, set with it.
static JOB_SIZE: AtomicUsize = AtomicUsize::new(0);
/// Set by ARMCI_Finalize: later calls fail with a clear message instead of a runtime error.
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// ARMCI_Init calls not yet matched by an ARMCI_Finalize: initialisation nests (Global Arrays'
/// own test programs call both twice), and only the last finalize ends the runtime.
static INITS: AtomicUsize = AtomicUsize::new(0);
/// Serializes ARMCI_Init (two threads racing must not both join the job).
static INIT: Mutex<()> = Mutex::new(());
/// The run's contiguous transfer protocol (ACTIVERMA_TRANSFER), read once at init: every
/// Put/Get passes it to the core, which chooses per call under `auto`.
pub(crate) static TRANSFER: OnceLock<activerma::Transfer> = OnceLock::new();
/// ARMCI's own words in every rank's memory, one segment made at init: the accumulate ticket
/// lock at ACC_LOCK (accumulate.rs says why), the memory lock of armci_lockmem at MEM_LOCK
/// (mutexes.rs), then one notification counter per rank from NOTIFY_FROM (notify.rs).
pub(crate) static RANK_WORDS: OnceLock<Segment> = OnceLock::new();
/// Offset of the accumulate lock (16 bytes) in RANK_WORDS.
pub(crate) const ACC_LOCK: usize = 0;
/// Offset of armci_lockmem's lock (16 bytes) in RANK_WORDS.
pub(crate) const MEM_LOCK: usize = 16;
/// Offset of the notification counters in RANK_WORDS: 8 bytes per sending rank.
pub(crate) const NOTIFY_FROM: usize = 32;

/// The word at `offset` of rank p's RANK_WORDS.
pub(crate) fn rank_word(p: usize, offset: usize) -> R<RemotePtr> {
    Ok(RANK_WORDS.get().ok_or("ARMCI_Init has not been called")?.remote(p, offset))
}

/// One ARMCI_Malloc: the segment (None when every rank asked for 0 bytes, or over a group
/// smaller than the job) and every rank's
/// [base, base + size) so remote addresses can be checked without asking the target.
pub(crate) struct Alloc {
    /// Collective sequence number: equal on every rank for the same ARMCI_Malloc, so a rank
    /// that got NULL (size 0) can still name the allocation in ARMCI_Free.
    pub seq: u64,
    pub seg: Option<Segment>,
    pub bases: Vec<usize>,
    pub sizes: Vec<usize>,
    /// An allocation over part of the job (group_memory.rs): its members and this rank's
    /// block; None for the job's own (a segment, or nothing when every size was 0).
    pub group: Option<crate::group_memory::GroupBlock>,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub allocs: Vec<Alloc>,
    pub next_seq: u64,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry { allocs: Vec::new(), next_seq: 0 });

/// A poisoned lock only means a panic was caught mid-call elsewhere; each update is a single
/// push or remove, so the registry stays consistent.
pub(crate) fn registry() -> std::sync::RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|p| p.into_inner())
}
pub(crate) fn registry_mut() -> RegistryWrite {
    RegistryWrite(REGISTRY.write().unwrap_or_else(|p| p.into_inner()))
}

/// Bumped by every change of the registry (see `LastHits`).
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The registry, locked for a change; when the change is done (still under the lock) the
/// generation moves on and every last hit is forgotten.
pub(crate) struct RegistryWrite(std::sync::RwLockWriteGuard<'static, Registry>);

impl std::ops::Deref for RegistryWrite {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.0
    }
}
impl std::ops::DerefMut for RegistryWrite {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.0
    }
}
impl Drop for RegistryWrite {
    fn drop(&mut self) {
        GENERATION.fetch_add(1, Ordering::SeqCst);
        LastHits::forget_all();
    }
}

/// Per rank, the whole pages of the last allocation a check found there, packed in one word:
/// the check of a remote address is then one load and two compares (no lock, no locked
/// instruction, no thread-local lookup — in a shared library that is a call into the dynamic
/// linker). For a loop of 8-byte puts, ARMCI's own checks were a third of the call; the
/// sequence-locked (generation, base, end) slot this replaces cost about 1 ns of an 8-byte
/// get's 10.
///
/// ```text
/// word = first page << LEN_BITS | pages     (0: nothing recorded; the pages lie inside the
///                                            allocation, so an access at its unaligned ends
///                                            takes the registry's search)
/// record(g = generation read before the search):  store word; if generation != g: take it back
/// a registry change:                               generation += 1; store 0 in every slot
/// ```
///
/// A recorder whose second read still sees g stored before the change's bump, so the change's
/// clearing comes after its store: a stale range never outlives the change that ended it.
struct LastHits;

/// Bits of the page count (2^28 pages of 4 KiB: 1 TiB; a larger allocation is not recorded).
const LEN_BITS: u32 = 28;
const PAGE_SHIFT: u32 = 12;

/// One slot per rank, made (and leaked: one per process) at ARMCI_Init; JOB_SIZE slots.
static LAST_HITS: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

impl LastHits {
    fn make(ranks: usize) {
        let slots: Box<[AtomicU64]> = (0..ranks).map(|_| AtomicU64::new(0)).collect();
        let _ = LAST_HITS.compare_exchange(std::ptr::null_mut(), Box::leak(slots).as_mut_ptr(), Ordering::AcqRel, Ordering::Acquire);
    }

    /// Rank `proc`'s slot (proc < JOB_SIZE, checked by the caller), if made.
    #[inline(always)]
    fn slot(proc: usize) -> Option<&'static AtomicU64> {
        let all = LAST_HITS.load(Ordering::Acquire);
        // SAFETY: made with JOB_SIZE slots and never freed; proc < JOB_SIZE.
        (!all.is_null()).then(|| unsafe { &*all.add(proc) })
    }

    #[inline(always)]
    fn covers(word: u64, addr: usize, len: usize) -> bool {
        let first = ((word >> LEN_BITS) << PAGE_SHIFT) as usize;
        let bytes = ((word & ((1 << LEN_BITS) - 1)) << PAGE_SHIFT) as usize;
        word != 0 && addr >= first && addr - first <= bytes && len <= bytes - (addr - first)
    }

    /// Records the whole pages of [base, end), found at `generation`.
    fn record(slot: &AtomicU64, generation: u64, base: usize, end: usize) {
        let page = 1usize << PAGE_SHIFT;
        let first = base.div_ceil(page);
        let pages = (end / page).saturating_sub(first);
        if pages == 0 || pages >= 1 << LEN_BITS || first >= 1 << (64 - LEN_BITS) {
            return;
        }
        let word = (first as u64) << LEN_BITS | pages as u64;
        slot.store(word, Ordering::SeqCst);
        if GENERATION.load(Ordering::SeqCst) != generation {
            let _ = slot.compare_exchange(word, 0, Ordering::SeqCst, Ordering::Relaxed);
        }
    }

    fn forget_all() {
        let all = LAST_HITS.load(Ordering::Acquire);
        if all.is_null() {
            return;
        }
        for p in 0..JOB_SIZE.load(Ordering::Relaxed) {
            // SAFETY: as in `slot`.
            unsafe { &*all.add(p) }.store(0, Ordering::SeqCst);
        }
    }
}

/// Whether rank `proc`'s [addr, addr + len) lies inside one of its ARMCI allocations.
#[inline(always)]
pub(crate) fn inside_allocation(proc: usize, addr: usize, len: usize) -> bool {
    let slot = LastHits::slot(proc);
    if slot.is_some_and(|h| LastHits::covers(h.load(Ordering::Relaxed), addr, len)) {
        return true;
    }
    inside_allocation_searched(proc, addr, len, slot)
}

/// `inside_allocation` past the last hit: the registry's search (kept out of line, so the
/// check of a put to the same allocation as the last one is a few inlined instructions).
#[inline(never)]
fn inside_allocation_searched(proc: usize, addr: usize, len: usize, slot: Option<&AtomicU64>) -> bool {
    // Read before the registry: a change after it moves the generation on (LastHits).
    let generation = GENERATION.load(Ordering::SeqCst);
    let found = registry().allocs.iter().find_map(|a| {
        let (b, s) = (a.bases[proc], a.sizes[proc]);
        (s > 0 && addr >= b && addr.checked_add(len).is_some_and(|e| e <= b + s)).then_some((b, b + s))
    });
    match (found, slot) {
        (Some((base, end)), Some(h)) => {
            LastHits::record(h, generation, base, end);
            true
        }
        (found, _) => found.is_some(),
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The World, or why there is none.
pub(crate) fn world() -> R<&'static World> {
    let w = WORLD.get().ok_or("ARMCI_Init has not been called (or it failed)")?;
    if FINALIZED.load(Ordering::Acquire) {
        return Err("called after ARMCI_Finalize".into());
    }
    Ok(w)
}

/// Whether `proc` is a rank of a live job, with no error path: the calls that only check
/// their argument (ARMCI_Fence) answer from it and take the full path (with its message) only
/// when it says no.
#[inline]
pub(crate) fn is_live_rank(proc: c_int) -> bool {
    live_world(proc).is_some()
}

/// The World and `proc` as a rank, when `proc` is a rank of a live job (`is_live_rank`).
#[inline]
pub(crate) fn live_world(proc: c_int) -> Option<(&'static World, usize)> {
    let w = WORLD.get()?;
    let p = usize::try_from(proc).ok()?;
    (!FINALIZED.load(Ordering::Relaxed) && p < JOB_SIZE.load(Ordering::Relaxed)).then_some((w, p))
}

/// An activerma error as the text of an ARMCI failure.
pub(crate) fn rt(e: activerma::Error) -> String {
    e.to_string()
}

/// A rank argument checked against the job.
pub(crate) fn proc_arg(w: &World, proc: c_int, arg: &str) -> R<usize> {
    // The job's size, read once at init (JOB_SIZE, which the fast path of live_world reads
    // without going through the World; World::size is a field since session 35 and would
    // serve here as well).
    match usize::try_from(proc) {
        Ok(p) if p < JOB_SIZE.load(Ordering::Relaxed) => Ok(p),
        _ => Err(format!("argument {arg} = {proc} is not a rank of this job ({} ranks, 0 to {})", w.size(), w.size() - 1)),
    }
}

/// A size or count argument that must not be negative.
pub(crate) fn nonneg(v: i64, arg: &str) -> R<usize> {
    usize::try_from(v).map_err(|_| format!("argument {arg} = {v} is negative"))
}

/// A local buffer: NULL is only allowed when nothing is read or written through it.
pub(crate) fn local_arg(p: *const c_void, len: usize, arg: &str) -> R<()> {
    if p.is_null() && len > 0 {
        return Err(format!("argument {arg} is NULL but {len} bytes were to be accessed through it"));
    }
    Ok(())
}

/// Checks that rank `proc`'s bytes [addr, addr + len) lie inside one of its ARMCI
/// allocations; a remote write anywhere else would corrupt memory the program does not know
/// is shared (or fault in the runtime).
#[inline]
pub(crate) fn remote_arg(proc: usize, addr: usize, len: usize, arg: &str) -> R<RemotePtr> {
    // Every call that touches rank proc's memory passes here first: what this rank's NbPut /
    // NbGet left in flight to proc completes before it (in_flight.rs: location consistency).
    crate::in_flight::before_access(proc)?;
    if len == 0 || inside_allocation(proc, addr, len) {
        return Ok(RemotePtr::new(proc, addr));
    }
    Err(outside_allocations(proc, addr, len, arg))
}

/// The refusal of `remote_arg`, naming the rank's allocations (built only on this path).
#[cold]
#[inline(never)]
pub(crate) fn outside_allocations(proc: usize, addr: usize, len: usize, arg: &str) -> String {
    let reg = registry();
    let ranges: Vec<String> = reg
        .allocs
        .iter()
        .filter(|a| a.sizes[proc] > 0)
        .take(4)
        .map(|a| format!("[{:#x}, {:#x})", a.bases[proc], a.bases[proc] + a.sizes[proc]))
        .collect();
    format!(
        "argument {arg} = {addr:#x} ({len} bytes) is not inside an ARMCI_Malloc allocation of rank {proc} (its allocations: {})",
        if ranges.is_empty() { "none".to_string() } else { ranges.join(", ") + if reg.allocs.len() > 4 { ", ..." } else { "" } }
    )
}

fn init() -> R<()> {
    #[cfg(feature = "mpi")]
    return init_with(None);
    #[cfg(not(feature = "mpi"))]
    init_job_default()
}

/// ARMCI_Init over the job, then ARMCI's world communicator over `comm` (MPI_COMM_WORLD when
/// None): see mpi_comm.rs.
#[cfg(feature = "mpi")]
pub(crate) fn init_with(comm: Option<mpi_sys::MPI_Comm>) -> R<()> {
    init_job(|| match comm {
        Some(c) => activerma::init_mpi_comm(c),
        None => activerma::init(),
    })?;
    crate::mpi_comm::setup(world()?, comm)
}

#[cfg(not(feature = "mpi"))]
fn init_job_default() -> R<()> {
    init_job(activerma::init)
}

/// Joins the job through `join` (once: later calls return at once) and sets up ARMCI's state.
fn init_job(join: impl FnOnce() -> activerma::Result<activerma::World>) -> R<()> {
    let _g = lock(&INIT);
    if WORLD.get().is_some() {
        // ARMCI allows nested initialisation: a later call only counts, but a finalized
        // runtime cannot join the job again.
        return if FINALIZED.load(Ordering::Acquire) {
            Err("ARMCI cannot be initialised again after ARMCI_Finalize".into())
        } else {
            INITS.fetch_add(1, Ordering::AcqRel);
            Ok(())
        };
    }
    let w = join().map_err(rt)?;
    crate::point_to_point::install(&w)?;
    // ARMCI's own words (collective, so at init: after it, every rank can receive
    // armci_msg_snd's messages).
    let words = w.alloc_segment(NOTIFY_FROM + 8 * w.size()).map_err(rt)?;
    let _ = RANK_WORDS.set(words);
    crate::group_pool::setup(&w)?;
    JOB_SIZE.store(w.size(), Ordering::Relaxed);
    let transfer = w.transfer().map_err(rt)?;
    let _ = TRANSFER.set(transfer);
    start_data_server(&w, transfer);
    if w.config().get_enum(activerma::settings::ARMCI_ACC).map_err(rt)? == "active" {
        crate::acc_active::setup(&w)?;
    }
    LastHits::make(w.size());
    let _ = WORLD.set(w);
    INITS.store(1, Ordering::Release);
    Ok(())
}

/// ARMCI has always had a data server: a helper on every node that serves other ranks while
/// the program computes. Ours is the `wake` progress thread, which sleeps on a futex until a
/// message comes, started here unless the user chose a progress mode (ACTIVERMA_PROGRESS).
/// Under buffered and pipelined protocols it serves every transfer to this rank; under
/// zero-copy it moves the non-blocking strided transfers other ranks of this host hand it
/// (ACTIVERMA_NB_TARGET_FROM), so that they overlap their computation (docs/design/armci.md).
/// Where the conduit refuses a thread (a program that initialized MPI below
/// MPI_THREAD_MULTIPLE) the run goes on without one: transfers through this rank's CPU then
/// wait for its next ARMCI call, and zero-copy strided ones are copied by their origins at
/// issue. Only the protocols that need the server say so.
fn start_data_server(w: &World, transfer: activerma::Transfer) {
    if w.config().is_set(activerma::settings::PROGRESS) {
        return;
    }
    if let Err(e) = w.set_progress_mode(activerma::ProgressMode::Wake) {
        if matches!(transfer, activerma::Transfer::Buffered | activerma::Transfer::Pipelined) {
            eprintln!("ARMCI [rank {}]: no data server thread for ACTIVERMA_TRANSFER={}: {e}", w.rank(), transfer.name());
        }
    }
}

#[no_mangle]
pub extern "C" fn ARMCI_Init() -> c_int {
    entry("ARMCI_Init", init);
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_Init_args(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    entry("ARMCI_Init_args", init);
    0
}

/// ARMCI_Init; the thread level is the one MPI (or the smp conduit) provides.
#[no_mangle]
pub extern "C" fn ARMCI_Init_thread(_armci_requested: c_int) -> c_int {
    entry("ARMCI_Init_thread", init);
    0
}

/// 1 between ARMCI_Init and ARMCI_Finalize, else 0.
#[no_mangle]
pub extern "C" fn ARMCI_Initialized() -> c_int {
    (WORLD.get().is_some() && !FINALIZED.load(Ordering::Acquire)) as c_int
}

#[no_mangle]
pub extern "C" fn ARMCI_Finalize() -> c_int {
    entry("ARMCI_Finalize", || {
        let w = world()?;
        // The finalize of a nested ARMCI_Init: the runtime stays up for the outer one.
        if INITS.fetch_sub(1, Ordering::AcqRel) > 1 {
            return Ok(());
        }
        crate::in_flight::complete_all()?;
        w.finalize().map_err(rt)?;
        FINALIZED.store(true, Ordering::Release);
        Ok(())
    });
    0
}

/// Nothing to release beyond what the launcher cleans up when the job ends.
#[no_mangle]
pub extern "C" fn ARMCI_Cleanup() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_hit_covers_the_whole_pages_inside_its_allocation() {
        let slot = AtomicU64::new(0);
        assert!(!LastHits::covers(0, 0, 1), "an empty slot covers nothing, not even address 0");
        let g = GENERATION.load(Ordering::SeqCst);
        // An allocation of 3 pages and a bit, starting 16 bytes into a page: whole pages
        // 0x..1000 to 0x..3000 lie inside it.
        let (base, end) = (0x7f00_0000_0010usize, 0x7f00_0000_0010 + 3 * 4096 + 100);
        LastHits::record(&slot, g, base, end);
        let w = slot.load(Ordering::Relaxed);
        let (first, last) = (0x7f00_0000_1000usize, 0x7f00_0000_3000usize);
        assert!(LastHits::covers(w, first, 8) && LastHits::covers(w, last - 8, 8) && LastHits::covers(w, first, last - first));
        // The unaligned ends, and past them: not covered (the registry's search decides).
        assert!(!LastHits::covers(w, base, 8) && !LastHits::covers(w, last - 8, 16) && !LastHits::covers(w, first - 1, 2));
        assert!(!LastHits::covers(w, last, 1) && !LastHits::covers(w, usize::MAX - 3, 8));
        // Less than a whole page inside: nothing recorded.
        let small = AtomicU64::new(0);
        LastHits::record(&small, g, base, base + 4000);
        assert_eq!(small.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_hit_found_before_a_registry_change_is_not_kept() {
        let slot = AtomicU64::new(0);
        let before = GENERATION.load(Ordering::SeqCst);
        drop(registry_mut()); // a change while the search ran
        LastHits::record(&slot, before, 0x10_0000, 0x20_0000);
        assert_eq!(slot.load(Ordering::Relaxed), 0, "a range of an older generation was recorded");
    }
}
