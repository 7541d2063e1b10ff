//! Memory remote ranks can reach: symmetric segments and exposed private memory.

use crate::state::{exposures, lock, world, NEXT_EXPOSURE, SEGMENTS};
use crate::status::{guard, invalid};
use activerma::Prot;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

/// Remote ranks may get and arma_fetch (an atomic read) but not put; the other atomics write
/// and need ARMA_PROT_READ_WRITE (ARMA_ERR_PROTECTION here).
pub const ARMA_PROT_READ: c_int = 1;
/// Remote ranks may read and write (put, get, all atomics).
pub const ARMA_PROT_READ_WRITE: c_int = 3;

/// Exposed private memory, as returned by arma_expose.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct arma_exposure_t {
    /// Identifies the exposure for arma_unexpose (0 is never a live exposure).
    pub opaque: u64,
    /// The address remote ranks pass to arma_put/arma_get/atomics for the first exposed byte;
    /// send it to them, e.g. with arma_allgather.
    pub addr: u64,
}

/// Allocates a segment of `len` bytes on every rank (collective; every rank passes the same
/// `len`). `*local` receives this rank's copy, zero-filled. Remote ranks reach it with plain
/// loads and stores (no target progress needed); arma_seg_addr gives its address on a rank.
/// In a replacement rank before arma_rejoin (arma_incarnation() > 0) it is not collective: it
/// finds the rank's segment again, holding what the dead process left in it.
#[no_mangle]
pub unsafe extern "C" fn arma_seg_alloc(len: usize, local: *mut *mut c_void) -> c_int {
    guard("arma_seg_alloc", || {
        let w = world()?;
        if local.is_null() {
            return Err(invalid("local is NULL"));
        }
        let seg = w.alloc_segment(len)?;
        // SAFETY: checked non-NULL; the caller passes a writable pointer slot.
        unsafe { *local = seg.as_ptr().cast() };
        lock(&SEGMENTS).push(seg);
        Ok(())
    })
}

/// Frees a segment on every rank (collective). `local` is the pointer arma_seg_alloc returned.
/// Waits until no rank is still accessing it.
#[no_mangle]
pub extern "C" fn arma_seg_free(local: *mut c_void) -> c_int {
    guard("arma_seg_free", || {
        world()?;
        let seg = {
            let mut segs = lock(&SEGMENTS);
            let i = segs
                .iter()
                .position(|s| s.as_ptr().cast() == local)
                .ok_or_else(|| invalid(format!("{local:p} is not a pointer returned by arma_seg_alloc")))?;
            segs.swap_remove(i)
        };
        // Not under the registry lock: the free is collective and waits for the other ranks.
        Ok(seg.free()?)
    })
}

/// Address, in rank `rank`'s address space, of the byte that `local_seg_ptr` points to in this
/// rank's copy of a segment. `local_seg_ptr` may point anywhere inside the segment.
#[no_mangle]
pub unsafe extern "C" fn arma_seg_addr(local_seg_ptr: *const c_void, rank: c_int, remote_addr: *mut u64) -> c_int {
    guard("arma_seg_addr", || {
        let w = world()?;
        let r = crate::state::rank(w, rank)?;
        if remote_addr.is_null() {
            return Err(invalid("remote_addr is NULL"));
        }
        let p = local_seg_ptr as usize;
        let segs = lock(&SEGMENTS);
        let seg = segs
            .iter()
            .find(|s| p >= s.as_ptr() as usize && p - (s.as_ptr() as usize) < s.len())
            .ok_or_else(|| invalid(format!("{local_seg_ptr:p} is not inside a segment allocated by arma_seg_alloc")))?;
        let a = seg.addr_on(r) + (p - seg.as_ptr() as usize);
        // SAFETY: checked non-NULL; the caller passes a writable uint64_t.
        unsafe { *remote_addr = a as u64 };
        Ok(())
    })
}

/// Exposes `len` bytes of this rank's own memory (malloc'd, stack, static: anything) to remote
/// puts, gets and atomics, with protection ARMA_PROT_READ or ARMA_PROT_READ_WRITE. Remote
/// ranks use `out->addr`. The memory must stay valid until arma_unexpose. Puts and gets reach
/// it without the target's help; atomics on it are run by the target (it must make progress).
/// Exposed ranges must not overlap each other or a segment. Not collective.
#[no_mangle]
pub unsafe extern "C" fn arma_expose(ptr: *mut c_void, len: usize, prot: c_int, out: *mut arma_exposure_t) -> c_int {
    guard("arma_expose", || {
        let w = world()?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        if ptr.is_null() && len > 0 {
            return Err(invalid(format!("NULL pointer with len {len}")));
        }
        let prot = match prot {
            ARMA_PROT_READ => Prot::ReadOnly,
            ARMA_PROT_READ_WRITE => Prot::ReadWrite,
            p => return Err(invalid(format!("protection {p} is neither ARMA_PROT_READ (1) nor ARMA_PROT_READ_WRITE (3)"))),
        };
        // SAFETY: the caller keeps the memory valid until arma_unexpose (documented above).
        let e = unsafe { w.expose_raw(ptr.cast(), len, prot)? };
        let id = NEXT_EXPOSURE.fetch_add(1, Ordering::Relaxed);
        let a = e.addr() as u64;
        exposures().insert(id, e);
        // SAFETY: checked non-NULL; the caller passes a writable arma_exposure_t.
        unsafe { *out = arma_exposure_t { opaque: id, addr: a } };
        Ok(())
    })
}

/// Withdraws an exposure; returns once no remote copy is still in progress in it, after which
/// the memory may be freed. Not collective: make sure (e.g. with arma_barrier) that no rank
/// will still access it, or their accesses fail with ARMA_ERR_NOT_EXPOSED.
#[no_mangle]
pub extern "C" fn arma_unexpose(exposure: arma_exposure_t) -> c_int {
    guard("arma_unexpose", || {
        world()?;
        let e = exposures()
            .remove(&exposure.opaque)
            .ok_or_else(|| invalid(format!("exposure {} is not live (already unexposed, or not from arma_expose)", exposure.opaque)))?;
        Ok(e.unexpose()?)
    })
}
