//! The object DSM (activerma-dsm, Jackal-style) from C: regions with a home rank, global
//! references, access checks as begin/end pairs, Java-monitor locks, barriers.

use crate::state::{rank, world};
use crate::status::{guard, CResult, Fail, ARMA_ERR_INVALID_ARGUMENT, ARMA_ERR_NOT_INITIALIZED};
use activerma_dsm::{ArrayRef, Dsm, GlobalRef};
use std::cell::RefCell;
use std::ffi::{c_int, c_void};

/// A global reference to a region: its home rank, a tag and its id, in one word. Store it in
/// regions or send it; every rank translates it to its own copy. ARMA_DSM_NULL refers to
/// nothing.
#[allow(non_camel_case_types)]
pub type arma_ref_t = u64;

/// The reference to nothing (a list's end).
pub const ARMA_DSM_NULL: u64 = u64::MAX;

/// An array larger than a chunk: consecutive regions (chunks) at one home, fetched and
/// flushed separately. arma_dsm_locate finds the chunk that holds a byte.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct arma_dsm_array_t {
    /// The first chunk's reference.
    pub first: u64,
    /// Bytes in the array.
    pub len: u64,
    /// Bytes per chunk (the last may be shorter).
    pub chunk: u64,
}

thread_local! {
    /// The DSM of the thread that called arma_dsm_init (the DSM's views and locks belong to
    /// one thread, as a Java thread's working memory does).
    static DSM: RefCell<Option<Dsm>> = const { RefCell::new(None) };
}

fn not_made() -> Fail {
    Fail { code: ARMA_ERR_NOT_INITIALIZED, msg: "call arma_dsm_init first (on this thread)".into(), failed_rank: None }
}

fn with<T>(f: impl FnOnce(&mut Dsm) -> CResult<T>) -> CResult<T> {
    DSM.with(|d| match d.borrow_mut().as_mut() {
        Some(dsm) => f(dsm),
        None => Err(not_made()),
    })
}

fn bad(msg: &str) -> Fail {
    Fail { code: ARMA_ERR_INVALID_ARGUMENT, msg: msg.into(), failed_rank: None }
}

/// Collective, after arma_init: makes this rank's DSM (its heap, handlers and buffers) with the
/// protocol ACTIVERMA_DSM_PROTOCOL names (invalidate, invalidate-rdma, update-in-place,
/// update-diff) and the ACTIVERMA_DSM_* sizes. The calling thread is the one that uses it.
#[no_mangle]
pub extern "C" fn arma_dsm_init() -> c_int {
    guard("arma_dsm_init", || {
        if DSM.with(|d| d.borrow().is_some()) {
            return Err(bad("the DSM is made already"));
        }
        let dsm = Dsm::new(world()?)?;
        DSM.with(|d| *d.borrow_mut() = Some(dsm));
        Ok(())
    })
}

/// Collective: a barrier, then this rank's DSM is dropped (its regions with it). Call it
/// before arma_finalize.
#[no_mangle]
pub extern "C" fn arma_dsm_finalize() -> c_int {
    guard("arma_dsm_finalize", || {
        with(|dsm| Ok(dsm.barrier()?))?;
        DSM.with(|d| *d.borrow_mut() = None);
        Ok(())
    })
}

/// A region of `bytes`, zeroed, homed at rank `home` (-1: this rank); its reference in `*out`.
#[no_mangle]
pub unsafe extern "C" fn arma_dsm_alloc(bytes: usize, home: c_int, out: *mut arma_ref_t) -> c_int {
    guard("arma_dsm_alloc", || {
        if out.is_null() {
            return Err(bad("out is NULL"));
        }
        let r = with(|dsm| {
            let h = if home < 0 { dsm.world().rank() } else { rank(dsm.world(), home)? };
            Ok(dsm.alloc_at(h, bytes)?)
        })?;
        // SAFETY: the caller passes a writable arma_ref_t.
        unsafe { *out = r.to_bits() };
        Ok(())
    })
}

/// An array of `bytes` homed at rank `home` (-1: this rank), in chunks of ACTIVERMA_DSM_CHUNK.
#[no_mangle]
pub unsafe extern "C" fn arma_dsm_alloc_array(bytes: usize, home: c_int, out: *mut arma_dsm_array_t) -> c_int {
    guard("arma_dsm_alloc_array", || {
        if out.is_null() {
            return Err(bad("out is NULL"));
        }
        let a = with(|dsm| {
            let h = if home < 0 { dsm.world().rank() } else { rank(dsm.world(), home)? };
            Ok(dsm.alloc_array_at(h, bytes)?)
        })?;
        // SAFETY: the caller passes a writable arma_dsm_array_t.
        unsafe { *out = arma_dsm_array_t { first: a.first.to_bits(), len: a.len, chunk: a.chunk } };
        Ok(())
    })
}

/// The chunk of `array` that holds byte `offset` (in `*chunk`) and where in it (`*at`).
#[no_mangle]
pub unsafe extern "C" fn arma_dsm_locate(array: *const arma_dsm_array_t, offset: u64, chunk: *mut arma_ref_t, at: *mut usize) -> c_int {
    guard("arma_dsm_locate", || {
        if array.is_null() || chunk.is_null() || at.is_null() {
            return Err(bad("a NULL pointer"));
        }
        // SAFETY: the caller passes a readable array and writable results.
        let a = unsafe { *array };
        if a.chunk == 0 {
            return Err(bad("not an array (chunk size 0)"));
        }
        let (c, o) = ArrayRef { first: GlobalRef::from_bits(a.first), len: a.len, chunk: a.chunk }.locate(offset)?;
        unsafe {
            *chunk = c.to_bits();
            *at = o;
        }
        Ok(())
    })
}

/// Frees a region at its home; every rank refuses the reference from then on (dangling).
#[no_mangle]
pub extern "C" fn arma_dsm_free(r: arma_ref_t) -> c_int {
    guard("arma_dsm_free", || with(|dsm| Ok(dsm.free(GlobalRef::from_bits(r))?)))
}

/// The access check for reading (paper Fig. 1): fetches the region if this rank's copy is
/// missing or stale, then gives its bytes (`*bytes`, `*len`), valid until arma_dsm_end(r).
/// Many readers of a region, or one writer; synchronization calls fail while a view is open.
#[no_mangle]
pub unsafe extern "C" fn arma_dsm_read_begin(r: arma_ref_t, bytes: *mut *const c_void, len: *mut usize) -> c_int {
    guard("arma_dsm_read_begin", || {
        if bytes.is_null() || len.is_null() {
            return Err(bad("a NULL pointer"));
        }
        let (p, l) = with(|dsm| Ok(dsm.begin_read(GlobalRef::from_bits(r))?))?;
        // SAFETY: the caller passes writable results.
        unsafe {
            *bytes = p.cast();
            *len = l;
        }
        Ok(())
    })
}

/// The access check for writing: as arma_dsm_read_begin; the first write of an interval makes
/// a twin, and the changes reach other ranks at this rank's next unlock, wait or barrier.
#[no_mangle]
pub unsafe extern "C" fn arma_dsm_write_begin(r: arma_ref_t, bytes: *mut *mut c_void, len: *mut usize) -> c_int {
    guard("arma_dsm_write_begin", || {
        if bytes.is_null() || len.is_null() {
            return Err(bad("a NULL pointer"));
        }
        let (p, l) = with(|dsm| Ok(dsm.begin_write(GlobalRef::from_bits(r))?))?;
        // SAFETY: the caller passes writable results.
        unsafe {
            *bytes = p.cast();
            *len = l;
        }
        Ok(())
    })
}

/// Ends a view arma_dsm_read_begin or arma_dsm_write_begin opened on `r`.
#[no_mangle]
pub extern "C" fn arma_dsm_end(r: arma_ref_t) -> c_int {
    guard("arma_dsm_end", || with(|dsm| Ok(dsm.end_view(GlobalRef::from_bits(r))?)))
}

/// Enters `r`'s monitor (re-entrant): Java's synchronized. Publishes this rank's changes
/// first; sees the changes others published before their unlock of `r`.
#[no_mangle]
pub extern "C" fn arma_dsm_lock(r: arma_ref_t) -> c_int {
    guard("arma_dsm_lock", || with(|dsm| Ok(dsm.lock(GlobalRef::from_bits(r))?)))
}

/// Leaves `r`'s monitor (once per lock); the last leave publishes this rank's changes.
#[no_mangle]
pub extern "C" fn arma_dsm_unlock(r: arma_ref_t) -> c_int {
    guard("arma_dsm_unlock", || with(|dsm| Ok(dsm.unlock(GlobalRef::from_bits(r))?)))
}

/// Java's Object.wait: gives `r`'s lock up until another rank's notify and the lock is this
/// rank's again. Needs the lock.
#[no_mangle]
pub extern "C" fn arma_dsm_wait(r: arma_ref_t) -> c_int {
    guard("arma_dsm_wait", || with(|dsm| Ok(dsm.wait(GlobalRef::from_bits(r))?)))
}

/// Java's Object.notify: one rank waiting on `r` lines up for the lock. Needs the lock.
#[no_mangle]
pub extern "C" fn arma_dsm_notify(r: arma_ref_t) -> c_int {
    guard("arma_dsm_notify", || with(|dsm| Ok(dsm.notify(GlobalRef::from_bits(r))?)))
}

/// Java's Object.notifyAll. Needs the lock.
#[no_mangle]
pub extern "C" fn arma_dsm_notify_all(r: arma_ref_t) -> c_int {
    guard("arma_dsm_notify_all", || with(|dsm| Ok(dsm.notify_all(GlobalRef::from_bits(r))?)))
}

/// Every rank: publishes its changes, waits for all, sees everyone's.
#[no_mangle]
pub extern "C" fn arma_dsm_barrier() -> c_int {
    guard("arma_dsm_barrier", || with(|dsm| Ok(dsm.barrier()?)))
}

/// The home rank of a reference (-1 for ARMA_DSM_NULL).
#[no_mangle]
pub extern "C" fn arma_dsm_home(r: arma_ref_t) -> c_int {
    let g = GlobalRef::from_bits(r);
    if g.is_null() {
        -1
    } else {
        g.home() as c_int
    }
}
