//! The process-global state: the World, init/finalize, and the registry of ARMCI allocations
//! that every remote address is checked against.

use crate::errors::{entry, R};
use activerma::{RemotePtr, Segment, World};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock};

/// Set once by ARMCI_Init.
pub(crate) static WORLD: OnceLock<World> = OnceLock::new();
/// Set by ARMCI_Finalize: later calls fail with a clear message instead of a runtime error.
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// Serializes ARMCI_Init (two threads racing must not both join the job).
static INIT: Mutex<()> = Mutex::new(());
/// One ticket lock per rank, used by the accumulate calls (accumulate.rs says why).
pub(crate) static ACC_LOCKS: OnceLock<Segment> = OnceLock::new();

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

/// Bumped by every change of the registry, so that each thread's copy of the allocation
/// ranges (`inside_allocation`) is rebuilt only after one.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The registry, locked for a change; the generation moves on when the change is done (still
/// under the lock, so a thread that sees the new generation and then reads, waits for it).
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
        GENERATION.fetch_add(1, Ordering::Release);
    }
}

/// Every rank's allocation ranges [base, end), sorted by base, as of a registry generation.
type RangesAt = (u64, Vec<Vec<(usize, usize)>>);

thread_local! {
    /// This thread's copy of the ranges: the check of every remote address takes no lock.
    static RANGES: std::cell::RefCell<RangesAt> = const { std::cell::RefCell::new((0, Vec::new())) };
}

/// Whether rank `proc`'s [addr, addr + len) lies inside one of its ARMCI allocations.
fn inside_allocation(proc: usize, addr: usize, len: usize) -> bool {
    let generation = GENERATION.load(Ordering::Acquire);
    RANGES.with(|cell| {
        let mut c = cell.borrow_mut();
        if c.0 != generation {
            let reg = registry();
            let ranks = reg.allocs.first().map_or(0, |a| a.bases.len());
            let mut ranges = vec![Vec::new(); ranks];
            for a in &reg.allocs {
                for (r, list) in ranges.iter_mut().enumerate() {
                    if a.sizes[r] > 0 {
                        list.push((a.bases[r], a.bases[r] + a.sizes[r]));
                    }
                }
            }
            for list in &mut ranges {
                list.sort_unstable();
            }
            *c = (generation, ranges);
        }
        let Some(list) = c.1.get(proc) else { return false };
        let i = list.partition_point(|&(base, _)| base <= addr);
        i > 0 && addr.checked_add(len).is_some_and(|e| e <= list[i - 1].1)
    })
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

/// An activerma error as the text of an ARMCI failure.
pub(crate) fn rt(e: activerma::Error) -> String {
    e.to_string()
}

/// A rank argument checked against the job.
pub(crate) fn proc_arg(w: &World, proc: c_int, arg: &str) -> R<usize> {
    match usize::try_from(proc) {
        Ok(p) if p < w.size() => Ok(p),
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
pub(crate) fn remote_arg(proc: usize, addr: usize, len: usize, arg: &str) -> R<RemotePtr> {
    if len == 0 {
        return Ok(RemotePtr::new(proc, addr));
    }
    if inside_allocation(proc, addr, len) {
        return Ok(RemotePtr::new(proc, addr));
    }
    let reg = registry();
    let ranges: Vec<String> = reg
        .allocs
        .iter()
        .filter(|a| a.sizes[proc] > 0)
        .take(4)
        .map(|a| format!("[{:#x}, {:#x})", a.bases[proc], a.bases[proc] + a.sizes[proc]))
        .collect();
    Err(format!(
        "argument {arg} = {addr:#x} ({len} bytes) is not inside an ARMCI_Malloc allocation of rank {proc} (its allocations: {})",
        if ranges.is_empty() { "none".to_string() } else { ranges.join(", ") + if reg.allocs.len() > 4 { ", ..." } else { "" } }
    ))
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
        // ARMCI allows nested initialisation; a second call is a no-op, but a finalized
        // runtime cannot join the job again.
        return if FINALIZED.load(Ordering::Acquire) {
            Err("ARMCI cannot be initialised again after ARMCI_Finalize".into())
        } else {
            Ok(())
        };
    }
    let w = join().map_err(rt)?;
    crate::point_to_point::install(&w)?;
    // One 16-byte ticket lock per rank for accumulates (collective, so at init: after it, every
    // rank can receive armci_msg_snd's messages).
    let locks = w.alloc_segment(16).map_err(rt)?;
    let _ = ACC_LOCKS.set(locks);
    let _ = WORLD.set(w);
    Ok(())
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
        w.finalize().map_err(rt)?;
        FINALIZED.store(true, Ordering::Release);
        Ok(())
    });
    0
}

/// Nothing to release beyond what the launcher cleans up when the job ends.
#[no_mangle]
pub extern "C" fn ARMCI_Cleanup() {}
