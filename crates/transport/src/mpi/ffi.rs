//! The MPI calls the conduit makes, over the `mpi-sys` bindings, with every return code
//! checked and turned into an error that names the call and MPI's own message. `Mpi` is only
//! ever used under the conduit's lock.

use super::bounce::Bounced;
use super::started::StartedGets;
use crate::rma_calls::{Chooser, PutsSinceFlush};
use activerma_core::{Error, Rank, Result};
use mpi_sys::*;
use std::os::raw::c_int;

// MPI_REPLACE and MPI_NO_OP, which the bindings lack: src/mpi/ops.c, compiled by build.rs.
extern "C" {
    static ARMA_MPI_REPLACE: MPI_Op;
    static ARMA_MPI_NO_OP: MPI_Op;
}

/// MPI_REPLACE: an accumulate that writes its data, as a put does.
pub fn replace_op() -> MPI_Op {
    // SAFETY: a constant initialized by the C compiler from mpi.h.
    unsafe { ARMA_MPI_REPLACE }
}

/// MPI_NO_OP: a get-accumulate that only reads, as a get does.
pub fn no_op() -> MPI_Op {
    // SAFETY: as above.
    unsafe { ARMA_MPI_NO_OP }
}

pub fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut buf = vec![0u8; MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING bytes as the call requires.
    unsafe { MPI_Error_string(code, buf.as_mut_ptr() as *mut _, &mut len) };
    buf.truncate(len.max(0) as usize);
    Err(Error::Os { call, errno_text: format!("MPI error {code}: {}", String::from_utf8_lossy(&buf)) })
}

fn thread_level_name(l: c_int) -> &'static str {
    // SAFETY: reading MPI's constants.
    unsafe {
        if l == RSMPI_THREAD_SINGLE {
            "MPI_THREAD_SINGLE"
        } else if l == RSMPI_THREAD_FUNNELED {
            "MPI_THREAD_FUNNELED"
        } else if l == RSMPI_THREAD_SERIALIZED {
            "MPI_THREAD_SERIALIZED"
        } else {
            "MPI_THREAD_MULTIPLE"
        }
    }
}

/// The size of `comm` (MPI_COMM_WORLD when None) if the program has initialized MPI; None if
/// MPI is not initialized yet.
pub fn initialized_comm_size(comm: Option<MPI_Comm>) -> Result<Option<usize>> {
    // SAFETY: MPI_Initialized may be called at any time; the size query needs MPI up, checked.
    unsafe {
        let mut initialized: c_int = 0;
        MPI_Initialized(&mut initialized);
        if initialized == 0 {
            return Ok(None);
        }
        let mut n: c_int = 0;
        check("MPI_Comm_size", MPI_Comm_size(comm.unwrap_or(RSMPI_COMM_WORLD), &mut n))?;
        Ok(Some(n as usize))
    }
}

pub struct Mpi {
    pub comm: MPI_Comm,
    /// The dynamic window: memory outside the heap, attached on registration.
    pub win: MPI_Win,
    /// The window MPI allocated for the symmetric heap (see `allocate_heap`).
    pub heap_win: Option<MPI_Win>,
    /// This node's ranks (`node_layout`), and their shared window when the job spans nodes
    /// (`allocate_shared_heap`): memory every rank of the node maps, no RMA epoch.
    node: Option<MPI_Comm>,
    node_win: Option<MPI_Win>,
    rank: Rank,
    size: usize,
    /// Ranges attached to the window: detached before it is freed (Open MPI 4.1's osc/ucx
    /// crashes freeing a dynamic window that still has regions attached).
    attached: Vec<usize>,
    /// Open MPI: a page attached above every other region for the window's lifetime (see
    /// `attach_sentinel`).
    sentinel: Option<usize>,
    /// Copies of implicit puts' sources (see `rma::put`), completed by `flush`.
    pub bounced: Bounced,
    /// Gets started with a request each, completed by testing or waiting it (`started.rs`).
    pub started_gets: StartedGets,
    /// Which call moves a contiguous put (crate::rma_calls; `rma::put`), and the puts it is
    /// timing: a blocking put is an implicit one and a flush.
    pub put_calls: Chooser,
    pub puts_since_flush: PutsSinceFlush,
    /// We called MPI_Init_thread, so we call MPI_Finalize; MPI the program initialized
    /// itself is the program's to finalize (after its own last MPI call).
    owns_mpi: bool,
    /// The thread level the program initialized MPI with, when it is below
    /// MPI_THREAD_SERIALIZED: then only the thread calling activerma may call MPI.
    pub calling_thread_only: Option<&'static str>,
    /// The program initialized MPI with MPI_THREAD_SINGLE (`Conduit::helper_threads_allowed`).
    pub thread_single: bool,
}

// SAFETY: MPI handles are plain values; every use is serialized by the conduit's lock and the
// library provides at least MPI_THREAD_SERIALIZED (checked in init).
unsafe impl Send for Mpi {}

/// A pending non-blocking MPI operation (one MPI_Request: arrays of them go to MPI as such).
#[repr(transparent)]
pub struct Request(pub MPI_Request);

unsafe impl Send for Request {}

impl Mpi {
    /// Starts MPI unless the program did, and makes our communicator: a duplicate of
    /// MPI_COMM_WORLD, or of `over` (the program's; MPI must then be initialized).
    pub fn init(over: Option<MPI_Comm>) -> Result<Mpi> {
        // SAFETY: straightforward MPI initialization; out-parameters are ours.
        unsafe {
            let mut initialized: c_int = 0;
            MPI_Initialized(&mut initialized);
            if over.is_some() && initialized == 0 {
                return Err(Error::InvalidArgument(
                    "a job over an MPI communicator needs MPI initialized first (MPI_Init before the communicator)".into(),
                ));
            }
            let mut provided: c_int = 0;
            if initialized == 0 {
                check(
                    "MPI_Init_thread",
                    MPI_Init_thread(std::ptr::null_mut(), std::ptr::null_mut(), RSMPI_THREAD_MULTIPLE, &mut provided),
                )?;
            } else {
                check("MPI_Query_thread", MPI_Query_thread(&mut provided))?;
            }
            let owns_mpi = initialized == 0;
            // MPI we started must let our threads call it (the progress pump, progress
            // threads). MPI the program started at a lower level (plain MPI_Init gives
            // MPI_THREAD_SINGLE on Open MPI) is used from the calling thread only: no pump,
            // and progress threads are refused (`Conduit::threads_may_call`).
            if owns_mpi && provided < RSMPI_THREAD_SERIALIZED {
                return Err(Error::Unsupported(format!(
                    "the MPI library provides only {}; activerma's mpi conduit needs MPI_THREAD_SERIALIZED or better (rebuild or reconfigure MPI with thread support)",
                    thread_level_name(provided)
                )));
            }
            let calling_thread_only = (provided < RSMPI_THREAD_SERIALIZED).then(|| thread_level_name(provided));
            let thread_single = provided == RSMPI_THREAD_SINGLE;
            let mut comm: MPI_Comm = std::mem::zeroed();
            check("MPI_Comm_dup", MPI_Comm_dup(over.unwrap_or(RSMPI_COMM_WORLD), &mut comm))?;
            check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm, RSMPI_ERRORS_RETURN))?;
            let (mut r, mut s) = (0, 0);
            MPI_Comm_rank(comm, &mut r);
            MPI_Comm_size(comm, &mut s);
            let mut win: MPI_Win = std::mem::zeroed();
            check("MPI_Win_create_dynamic", MPI_Win_create_dynamic(RSMPI_INFO_NULL, comm, &mut win))?;
            open_epoch(win, s)?;
            let mut mpi = Mpi {
                comm,
                win,
                heap_win: None,
                node: None,
                node_win: None,
                rank: r as Rank,
                size: s as usize,
                attached: Vec::new(),
                sentinel: None,
                bounced: Bounced::default(),
                started_gets: StartedGets::default(),
                put_calls: Chooser::default(),
                puts_since_flush: PutsSinceFlush::default(),
                owns_mpi,
                calling_thread_only,
                thread_single,
            };
            if Mpi::library_version().starts_with("Open MPI") {
                mpi.attach_sentinel()?;
            }
            Ok(mpi)
        }
    }

    /// Collectively allocates `len` bytes per rank as one window (displacement unit 1) and
    /// returns where they are here. MPI's allocated windows are its fast path (on one host, a
    /// shared mapping the origin copies into), dynamic windows its slow one.
    pub fn allocate_heap(&mut self, len: usize) -> Result<*mut u8> {
        // SAFETY: out-parameters are ours; MPI owns the memory until MPI_Win_free.
        unsafe {
            let mut base: *mut u8 = std::ptr::null_mut();
            let mut win: MPI_Win = std::mem::zeroed();
            check(
                "MPI_Win_allocate (the symmetric heap; ACTIVERMA_SEGMENT_SIZE sets its size)",
                MPI_Win_allocate(len as MPI_Aint, 1, RSMPI_INFO_NULL, self.comm, &mut base as *mut *mut u8 as *mut _, &mut win),
            )?;
            open_epoch(win, self.size as c_int)?;
            self.heap_win = Some(win);
            Ok(base)
        }
    }

    /// Whether the heap's window reports the `no_locks` hint among the hints it uses. Open
    /// MPI 4.1's osc/rdma (and osc/sm) do; osc/ucx and osc/pt2pt report none: the one way a
    /// program can tell the one-sided component that serves the window (see
    /// `MpiConduit::cpu_atomics_coherent`).
    pub fn heap_window_reports_locks(&self) -> Result<bool> {
        let Some(win) = self.heap_win else { return Ok(false) };
        // SAFETY: our window; the info object is ours to free.
        unsafe {
            let mut info: MPI_Info = std::mem::zeroed();
            check("MPI_Win_get_info", MPI_Win_get_info(win, &mut info))?;
            let (mut len, mut found): (c_int, c_int) = (0, 0);
            let r = MPI_Info_get_valuelen(info, c"no_locks".as_ptr() as *mut _, &mut len, &mut found);
            MPI_Info_free(&mut info);
            check("MPI_Info_get_valuelen", r)?;
            Ok(found != 0)
        }
    }

    /// The job's nodes: per rank, the lowest rank of its node (from MPI's shared-memory
    /// communicator, which this keeps as `node` for the node's shared window).
    pub fn node_layout(&mut self) -> Result<Vec<u64>> {
        // SAFETY: out-parameters are ours; the communicator is freed in finalize.
        let leader = unsafe {
            let mut node: MPI_Comm = std::mem::zeroed();
            check("MPI_Comm_split_type", MPI_Comm_split_type(self.comm, RSMPI_COMM_TYPE_SHARED, 0, RSMPI_INFO_NULL, &mut node))?;
            check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(node, RSMPI_ERRORS_RETURN))?;
            self.node = Some(node);
            // The node's lowest rank names it: node rank 0 of a split keyed by world rank.
            let mut lowest = self.rank as u64;
            check("MPI_Bcast", MPI_Bcast(&mut lowest as *mut u64 as *mut _, 1, RSMPI_UINT64_T, 0, node))?;
            lowest
        };
        self.allgather_u64(leader)
    }

    /// Collectively allocates `len` bytes per rank as one *shared* window over the whole job
    /// (`whole_job`: every rank is on this host) or over this node's ranks (`node_layout`
    /// first); returns where each of its ranks' parts starts in this process, in the order of
    /// their ranks. Over the whole job the window is also the heap's RMA window; a node's
    /// window is memory only (the heap's window over the job is `create_heap_window`).
    pub fn allocate_shared_heap(&mut self, len: usize, whole_job: bool) -> Result<Vec<*mut u8>> {
        let comm = if whole_job { self.comm } else { self.node.expect("node_layout ran first") };
        // SAFETY: out-parameters are ours; MPI owns the memory until MPI_Win_free.
        unsafe {
            let mut n: c_int = 0;
            MPI_Comm_size(comm, &mut n);
            let mut info: MPI_Info = std::mem::zeroed();
            check("MPI_Info_create", MPI_Info_create(&mut info))?;
            // Each rank's part on its own pages: its heap stays page-aligned in every process.
            MPI_Info_set(info, c"alloc_shared_noncontig".as_ptr(), c"true".as_ptr());
            let mut base: *mut u8 = std::ptr::null_mut();
            let mut win: MPI_Win = std::mem::zeroed();
            let r = MPI_Win_allocate_shared(len as MPI_Aint, 1, info, comm, &mut base as *mut *mut u8 as *mut _, &mut win);
            MPI_Info_free(&mut info);
            check("MPI_Win_allocate_shared (the symmetric heap and tables; ACTIVERMA_SEGMENT_SIZE sets the heap's size)", r)?;
            let mut parts = Vec::with_capacity(n as usize);
            for rank in 0..n {
                let (mut size, mut unit): (MPI_Aint, c_int) = (0, 0);
                let mut ptr: *mut u8 = std::ptr::null_mut();
                check("MPI_Win_shared_query", MPI_Win_shared_query(win, rank, &mut size, &mut unit, &mut ptr as *mut *mut u8 as *mut _))?;
                parts.push(ptr);
            }
            if whole_job {
                open_epoch(win, self.size as c_int)?;
                self.heap_win = Some(win);
            } else {
                self.node_win = Some(win);
            }
            Ok(parts)
        }
    }

    /// The heap's RMA window over the whole job on memory we have (a part of the node's shared
    /// window, or a private mapping): how ranks of other nodes reach our segments.
    pub fn create_heap_window(&mut self, base: *mut u8, len: usize) -> Result<()> {
        // SAFETY: the caller keeps [base, base+len) alive until finalize frees the window.
        unsafe {
            let mut win: MPI_Win = std::mem::zeroed();
            check(
                "MPI_Win_create (the symmetric heap's window)",
                MPI_Win_create(base as *mut _, len as MPI_Aint, 1, RSMPI_INFO_NULL, self.comm, &mut win),
            )?;
            open_epoch(win, self.size as c_int)?;
            self.heap_win = Some(win);
        }
        Ok(())
    }

    pub fn rank(&self) -> Rank {
        self.rank
    }
    pub fn size(&self) -> usize {
        self.size
    }

    /// Blocking allgather of one u64 per rank (start-up only, before handlers exist).
    pub fn allgather_u64(&mut self, mine: u64) -> Result<Vec<u64>> {
        let mut out = vec![0u64; self.size];
        // SAFETY: buffers of one and `size` u64s.
        check("MPI_Allgather", unsafe {
            MPI_Allgather(&mine as *const u64 as *const _, 1, RSMPI_UINT64_T, out.as_mut_ptr() as *mut _, 1, RSMPI_UINT64_T, self.comm)
        })?;
        Ok(out)
    }

    pub fn ibarrier(&mut self) -> Result<Request> {
        // SAFETY: request out-parameter.
        unsafe {
            let mut r: MPI_Request = std::mem::zeroed();
            check("MPI_Ibarrier", MPI_Ibarrier(self.comm, &mut r))?;
            Ok(Request(r))
        }
    }

    /// `mine` and `out` must stay put until the request completes.
    pub fn iallgather_u64(&mut self, mine: &u64, out: &mut [u64]) -> Result<Request> {
        // SAFETY: as documented; the caller waits for the request before touching the buffers.
        unsafe {
            let mut r: MPI_Request = std::mem::zeroed();
            check(
                "MPI_Iallgather",
                MPI_Iallgather(
                    mine as *const u64 as *const _,
                    1,
                    RSMPI_UINT64_T,
                    out.as_mut_ptr() as *mut _,
                    1,
                    RSMPI_UINT64_T,
                    self.comm,
                    &mut r,
                ),
            )?;
            Ok(Request(r))
        }
    }

    /// `counts` and `displs` (per rank, in bytes) must stay put until the request completes.
    pub fn iallgatherv(&mut self, mine: &[u8], out: &mut [u8], counts: &[c_int], displs: &[c_int]) -> Result<Request> {
        // SAFETY: as above.
        unsafe {
            let mut r: MPI_Request = std::mem::zeroed();
            check(
                "MPI_Iallgatherv",
                MPI_Iallgatherv(
                    mine.as_ptr() as *const _,
                    mine.len() as c_int,
                    RSMPI_UINT8_T,
                    out.as_mut_ptr() as *mut _,
                    counts.as_ptr(),
                    displs.as_ptr(),
                    RSMPI_UINT8_T,
                    self.comm,
                    &mut r,
                ),
            )?;
            Ok(Request(r))
        }
    }

    /// True once the request completed (it is then freed by MPI).
    pub fn test(&mut self, r: &mut Request) -> Result<bool> {
        let mut flag: c_int = 0;
        // SAFETY: a live request of ours.
        check("MPI_Test", unsafe { MPI_Test(&mut r.0, &mut flag, RSMPI_STATUS_IGNORE) })?;
        Ok(flag != 0)
    }

    pub fn attach(&mut self, addr: usize, len: usize) -> Result<()> {
        // SAFETY: the caller owns [addr, addr+len) until detach.
        check("MPI_Win_attach", unsafe { MPI_Win_attach(self.win, addr as *mut _, len as MPI_Aint) })?;
        self.attached.push(addr);
        Ok(())
    }

    /// Open MPI 4.1's osc/ucx keeps a window's attached regions in an array sorted by address
    /// but searches it one slot past the last region: a region attached above all others
    /// lands one slot too far, and a later detach or `MPI_Win_free` frees the wrong
    /// registration (a crash in `ucs_rcache_region_invalidate`; a pure-MPI reproducer fails
    /// every time). With one region attached above every address a program can expose — the
    /// top page of the main thread's stack, never detached before the window goes — every
    /// search turns left of it and stays inside the array.
    fn attach_sentinel(&mut self) -> Result<()> {
        let maps = std::fs::read_to_string("/proc/self/maps")
            .map_err(|e| Error::Os { call: "read /proc/self/maps", errno_text: e.to_string() })?;
        let top = maps
            .lines()
            .find(|l| l.ends_with("[stack]"))
            .and_then(|l| l.split(['-', ' ']).nth(1))
            .and_then(|end| usize::from_str_radix(end, 16).ok())
            .ok_or_else(|| Error::Unsupported("no [stack] line in /proc/self/maps".into()))?;
        let page = top - activerma_core::page::page_size();
        // SAFETY: the main thread's stack stays mapped for the life of the process.
        check("MPI_Win_attach", unsafe { MPI_Win_attach(self.win, page as *mut _, activerma_core::page::page_size() as MPI_Aint) })?;
        self.sentinel = Some(page);
        Ok(())
    }

    pub fn detach(&mut self, addr: usize) -> Result<()> {
        // SAFETY: detaching what we attached.
        check("MPI_Win_detach", unsafe { MPI_Win_detach(self.win, addr as *const _) })?;
        self.attached.retain(|&a| a != addr);
        Ok(())
    }

    /// Completes every operation on `win` to `rank` (all ranks: None) at the target, and
    /// drops the copies implicit puts made for them.
    pub fn flush(&mut self, win: MPI_Win, rank: Option<Rank>) -> Result<()> {
        // SAFETY: our window, inside the lock_all epoch.
        match rank {
            Some(r) => check("MPI_Win_flush", unsafe { MPI_Win_flush(r as c_int, win) })?,
            None => check("MPI_Win_flush_all", unsafe { MPI_Win_flush_all(win) })?,
        }
        self.bounced.completed(win, rank);
        if let Some((len, call, ns)) = self.puts_since_flush.flushed(rank) {
            self.put_calls.record(len, call, ns);
        }
        Ok(())
    }

    /// Keeps `bytes`, the source of an implicit put on `win` to `rank`, until a flush; first
    /// completes everything kept so far (one flush per window) when keeping it would pass
    /// `budget` bytes.
    pub fn keep_bounced(&mut self, win: MPI_Win, rank: Rank, bytes: Vec<u8>, budget: usize) -> Result<()> {
        if self.bounced.over(bytes.len(), budget) {
            for w in self.bounced.windows() {
                self.flush(w, None)?;
            }
        }
        self.bounced.keep(win, rank, bytes);
        Ok(())
    }

    /// The library's own version text (e.g. "Open MPI v4.1.4, ..." or "MPICH Version: 4.0.2 ...").
    pub fn library_version() -> String {
        // SAFETY: reading a constant the bindings' C shim exports.
        let max = unsafe { RSMPI_MAX_LIBRARY_VERSION_STRING } as usize;
        let mut buf = vec![0u8; max + 1];
        let mut len: c_int = 0;
        // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING bytes as the call requires.
        unsafe { MPI_Get_library_version(buf.as_mut_ptr() as *mut _, &mut len) };
        buf.truncate(len.max(0) as usize);
        String::from_utf8_lossy(&buf).trim().to_string()
    }

    /// Runs MPI's progress engine once (a probe for a tag nobody sends).
    pub fn poke(&mut self) {
        let mut flag: c_int = 0;
        // SAFETY: a probe on our communicator; the status is ignored.
        unsafe { MPI_Iprobe(RSMPI_ANY_SOURCE, 0x7ead, self.comm, &mut flag, RSMPI_STATUS_IGNORE) };
    }

    /// Completes our side of every operation to `rank`: buffers may be reused.
    pub fn flush_local(&mut self, win: MPI_Win, rank: Rank) -> Result<()> {
        // SAFETY: our window, inside the lock_all epoch.
        check("MPI_Win_flush_local", unsafe { MPI_Win_flush_local(rank as c_int, win) })
    }

    pub fn finalize(&mut self) -> Result<()> {
        // SAFETY: end of the epoch, the window, the communicator and MPI, in that order.
        unsafe {
            close_epoch(self.win, self.size as c_int)?;
            if let Some(mut heap) = self.heap_win.take() {
                close_epoch(heap, self.size as c_int)?;
                check("MPI_Win_free", MPI_Win_free(&mut heap))?;
            }
            for addr in std::mem::take(&mut self.attached).into_iter().chain(self.sentinel.take()) {
                check("MPI_Win_detach", MPI_Win_detach(self.win, addr as *const _))?;
            }
            // Everyone is done with every message and access before anyone tears down.
            check("MPI_Barrier", MPI_Barrier(self.comm))?;
            // The node's memory goes after the heap window made on it.
            if let Some(mut w) = self.node_win.take() {
                check("MPI_Win_free", MPI_Win_free(&mut w))?;
            }
            if let Some(mut c) = self.node.take() {
                check("MPI_Comm_free", MPI_Comm_free(&mut c))?;
            }
            check("MPI_Win_free", MPI_Win_free(&mut self.win))?;
            check("MPI_Comm_free", MPI_Comm_free(&mut self.comm))?;
            if self.owns_mpi {
                check("MPI_Finalize", MPI_Finalize())?;
            }
            Ok(())
        }
    }
}

/// Errors come back as codes, and one passive-target epoch to every rank lasts the whole job:
/// a shared lock per target rather than `MPI_Win_lock_all`, whose flush Open MPI's osc/rdma
/// serves on a slower path (an 8 B put + flush: 0.067 µs under lock_all, 0.037 µs under a
/// per-target shared lock, bench/mpi_peers `-s lockall` vs `-s shared`).
///
/// # Safety
/// `win` is a window just created on our communicator of `size` ranks.
unsafe fn open_epoch(win: MPI_Win, size: c_int) -> Result<()> {
    check("MPI_Win_set_errhandler", MPI_Win_set_errhandler(win, RSMPI_ERRORS_RETURN))?;
    for r in 0..size {
        check("MPI_Win_lock", MPI_Win_lock(MPI_LOCK_SHARED as c_int, r, 0, win))?;
    }
    Ok(())
}

/// Ends the epochs `open_epoch` opened.
///
/// # Safety
/// As `open_epoch`, which ran on `win`.
unsafe fn close_epoch(win: MPI_Win, size: c_int) -> Result<()> {
    for r in 0..size {
        check("MPI_Win_unlock", MPI_Win_unlock(r, win))?;
    }
    Ok(())
}
