//! Puts and gets: blocking, non-blocking with a handle (nb), implicit (nbi); completion.

use crate::handles;
use crate::state::{addr, rank, world};
use crate::status::{guard, invalid, CResult};
use activerma::RemotePtr;
use std::ffi::{c_int, c_void};

/// Handle of a non-blocking operation, filled by arma_put_nb / arma_get_nb and valid until
/// arma_wait returns or arma_test reports done, which reset it to zero. The runtime keeps a
/// registry of outstanding operations: arma_wait / arma_test on any other value (zeroed, never
/// issued, a copy of a completed handle, garbage) return ARMA_ERR_INVALID_HANDLE.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct arma_handle_t {
    /// The registry's name for the operation (slot and generation); 0 = none.
    pub opaque: u64,
}

/// No buffer can be this long (and a Rust slice must not be: checked, not assumed).
fn too_long(n: usize) -> crate::status::Fail {
    invalid(format!("n = {n} is larger than any buffer can be (a negative value cast to size_t?)"))
}

/// The source bytes of a put (`n == 0` needs no buffer).
unsafe fn src<'a>(buf: *const c_void, n: usize) -> CResult<&'a [u8]> {
    match (buf.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(invalid(format!("NULL buffer with n = {n}"))),
        _ if n > isize::MAX as usize => Err(too_long(n)),
        // SAFETY: the caller passes `n` readable bytes.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(buf.cast(), n) }),
    }
}

/// The destination bytes of a get.
unsafe fn dst<'a>(buf: *mut c_void, n: usize) -> CResult<&'a mut [u8]> {
    match (buf.is_null(), n) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(invalid(format!("NULL buffer with n = {n}"))),
        _ if n > isize::MAX as usize => Err(too_long(n)),
        // SAFETY: the caller passes `n` writable bytes.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), n) }),
    }
}

fn remote(w: &activerma::World, r: c_int, a: u64) -> CResult<RemotePtr> {
    Ok(RemotePtr::new(rank(w, r)?, addr(a)?))
}

/// Where an nb call stores its handle; cleared first so that a failed call leaves no handle
/// (waiting on it is ARMA_ERR_INVALID_HANDLE, as on any handle never issued).
unsafe fn handle_slot<'a>(h: *mut arma_handle_t) -> CResult<&'a mut arma_handle_t> {
    // SAFETY: the caller passes NULL or a writable arma_handle_t.
    let h = unsafe { h.as_mut() }.ok_or_else(|| invalid("handle pointer is NULL"))?;
    h.opaque = 0;
    Ok(h)
}

/// Blocking put of `n` bytes from `src` to address `addr` on rank `rank`. Returns when the
/// data is in the target's memory (remote completion); `src` may be reused at once. Needs no
/// progress from the target. With n == 0 it touches nothing and succeeds for any valid rank,
/// whatever `addr` and `src` are (this holds for every put and get).
#[no_mangle]
pub unsafe extern "C" fn arma_put(rank: c_int, addr: u64, src: *const c_void, n: usize) -> c_int {
    guard("arma_put", || {
        let w = world()?;
        let (to, data) = (remote(w, rank, addr)?, unsafe { self::src(src, n)? });
        Ok(w.put(to, data)?)
    })
}

/// Blocking get of `n` bytes at `addr` on rank `rank` into `dst`. Returns when `dst` holds
/// them. Needs no progress from the target.
#[no_mangle]
pub unsafe extern "C" fn arma_get(rank: c_int, addr: u64, dst: *mut c_void, n: usize) -> c_int {
    guard("arma_get", || {
        let w = world()?;
        let (from, buf) = (remote(w, rank, addr)?, unsafe { self::dst(dst, n)? });
        Ok(w.get(from, buf)?)
    })
}

/// Non-blocking put. On this conduit the data is moved before the call returns; the operation
/// completes remotely (modelled network included) when arma_wait returns or arma_test reports
/// done. Portable code leaves `src` alone until then.
#[no_mangle]
pub unsafe extern "C" fn arma_put_nb(rank: c_int, addr: u64, src: *const c_void, n: usize, h: *mut arma_handle_t) -> c_int {
    guard("arma_put_nb", || {
        let w = world()?;
        let h = unsafe { handle_slot(h)? };
        let (to, data) = (remote(w, rank, addr)?, unsafe { self::src(src, n)? });
        h.opaque = handles::issue(w.put_nb(to, data)?);
        Ok(())
    })
}

/// Non-blocking get: `dst` holds the data once arma_wait returns or arma_test reports done
/// (on this conduit it is filled before the call returns).
#[no_mangle]
pub unsafe extern "C" fn arma_get_nb(rank: c_int, addr: u64, dst: *mut c_void, n: usize, h: *mut arma_handle_t) -> c_int {
    guard("arma_get_nb", || {
        let w = world()?;
        let h = unsafe { handle_slot(h)? };
        let (from, buf) = (remote(w, rank, addr)?, unsafe { self::dst(dst, n)? });
        h.opaque = handles::issue(w.get_nb(from, buf)?);
        Ok(())
    })
}

/// Waits until the operation behind `*h` is complete, running pending handlers meanwhile
/// (a blocking call always makes progress); then zeroes `*h`. ARMA_ERR_INVALID_HANDLE if `*h`
/// names no outstanding operation (see arma_handle_t).
#[no_mangle]
pub unsafe extern "C" fn arma_wait(h: *mut arma_handle_t) -> c_int {
    guard("arma_wait", || {
        let w = world()?;
        // SAFETY: the caller passes NULL or a writable arma_handle_t.
        let h = unsafe { h.as_mut() }.ok_or_else(|| invalid("handle pointer is NULL"))?;
        let op = handles::outstanding(h.opaque)?;
        while !op.test() {
            w.progress();
        }
        op.wait(); // complete: returns at once
        handles::finish(h.opaque);
        h.opaque = 0;
        Ok(())
    })
}

/// Sets `*done` to 1 if the operation behind `*h` is complete (and zeroes `*h`), else to 0.
/// Never blocks. ARMA_ERR_INVALID_HANDLE (and `*done` untouched) if `*h` names no outstanding
/// operation (see arma_handle_t).
#[no_mangle]
pub unsafe extern "C" fn arma_test(h: *mut arma_handle_t, done: *mut c_int) -> c_int {
    guard("arma_test", || {
        world()?;
        // SAFETY: the caller passes NULL or writable objects.
        let (h, done) = unsafe { (h.as_mut(), done.as_mut()) };
        let (h, done) = h.zip(done).ok_or_else(|| invalid("handle or done pointer is NULL"))?;
        let complete = handles::outstanding(h.opaque)?.test();
        *done = complete as c_int;
        if complete {
            handles::finish(h.opaque);
            h.opaque = 0;
        }
        Ok(())
    })
}

/// Implicit non-blocking put: like arma_put_nb without a handle. Completes (remotely, modelled
/// network included) at the next arma_flush(rank), arma_flush_all or arma_barrier.
#[no_mangle]
pub unsafe extern "C" fn arma_put_nbi(rank: c_int, addr: u64, src: *const c_void, n: usize) -> c_int {
    guard("arma_put_nbi", || {
        let w = world()?;
        let (to, data) = (remote(w, rank, addr)?, unsafe { self::src(src, n)? });
        Ok(w.put_nbi(to, data)?)
    })
}

/// Implicit non-blocking get: `dst` holds the data after the next arma_flush(rank),
/// arma_flush_all or arma_barrier.
#[no_mangle]
pub unsafe extern "C" fn arma_get_nbi(rank: c_int, addr: u64, dst: *mut c_void, n: usize) -> c_int {
    guard("arma_get_nbi", || {
        let w = world()?;
        let (from, buf) = (remote(w, rank, addr)?, unsafe { self::dst(dst, n)? });
        Ok(w.get_nbi(from, buf)?)
    })
}

/// Returns when every implicit (nbi) operation this rank issued to `rank` is remotely
/// complete. Operations with a handle complete through the handle.
#[no_mangle]
pub extern "C" fn arma_flush(rank: c_int) -> c_int {
    guard("arma_flush", || {
        let w = world()?;
        Ok(w.flush(crate::state::rank(w, rank)?)?)
    })
}

/// arma_flush for every rank.
#[no_mangle]
pub extern "C" fn arma_flush_all() -> c_int {
    guard("arma_flush_all", || Ok(world()?.flush_all()?))
}

/// Ordering only: operations issued before the fence reach their targets before any issued
/// after it. Completes nothing; use arma_flush for that.
#[no_mangle]
pub extern "C" fn arma_fence() -> c_int {
    guard("arma_fence", || Ok(world()?.fence()?))
}
