//! Contiguous transfers by the run's transfer protocol (ACTIVERMA_TRANSFER: zero-copy,
//! buffered, pipelined or dynamic registration, or chosen per call; the `transfer_*` counters
//! say which moved what). Put and Get are blocking: complete at the target when they return.
//! NbPut and NbGet start a transfer that completes with its handle; what the protocol leaves
//! in flight is recorded in in_flight.rs, which also keeps ARMCI's location consistency.

use crate::errors::{entry, R};
use crate::in_flight;
use crate::state::{inside_allocation, live_world, local_arg, nonneg, proc_arg, remote_arg, rt, world, TRANSFER};
use crate::sync::{mark, ArmciHdl};
use activerma::{RemotePtr, Transfer, World};
use std::ffi::{c_int, c_void};

/// Puts n bytes from local `src` to rank `proc`'s address `dst` (checked against its allocations).
#[inline]
pub(crate) unsafe fn put_bytes(w: &World, src: *const u8, dst: usize, n: usize, proc: usize, arg: &str) -> R {
    if n == 0 {
        return Ok(());
    }
    let at = remote_arg(proc, dst, n, arg)?;
    w.put_by(transfer(), at, std::slice::from_raw_parts(src, n)).map(drop).map_err(rt)
}

/// Gets n bytes of rank `proc`'s address `src` into local `dst`.
#[inline]
pub(crate) unsafe fn get_bytes(w: &World, src: usize, dst: *mut u8, n: usize, proc: usize, arg: &str) -> R {
    if n == 0 {
        return Ok(());
    }
    let at = remote_arg(proc, src, n, arg)?;
    w.get_by(transfer(), at, std::slice::from_raw_parts_mut(dst, n)).map(drop).map_err(rt)
}

#[inline]
pub(crate) fn transfer() -> Transfer {
    TRANSFER.get().copied().unwrap_or(Transfer::Auto)
}

/// The checks every contiguous call starts with: the job, the rank, the size, and the local
/// buffer (`local`, named `local_name`). Returns the World, the rank and the size.
#[inline]
fn checked(local: *const c_void, size: c_int, proc: c_int, local_name: &str) -> R<(&'static World, usize, usize)> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let n = nonneg(size.into(), "bytes")?;
    local_arg(local, n, local_name)?;
    Ok((w, p, n))
}

#[inline]
pub(crate) unsafe fn put(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> R {
    let (w, p, n) = checked(src, size, proc, "src")?;
    put_bytes(w, src as *const u8, dst as usize, n, p, "dst")
}

#[inline]
pub(crate) unsafe fn get(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> R {
    let (w, p, n) = checked(dst, size, proc, "dst")?;
    get_bytes(w, src as usize, dst as *mut u8, n, p, "src")
}

/// The common small transfer ahead of the entry machinery (whose closure call and argument
/// plumbing cost more than the 8-byte copy): a live rank, a positive size, a local buffer,
/// nothing in flight, a zero-copy protocol and an address inside one of the rank's
/// allocations; the core then moves it if the target is plain segment memory mapped here.
/// None, and a false from the core, move nothing: the checked path runs the call, or says
/// what is wrong with it.
#[inline(always)]
fn plain_target(remote: *mut c_void, size: c_int, proc: c_int, local: *const c_void) -> Option<(&'static World, RemotePtr, usize)> {
    let (w, p) = live_world(proc)?;
    let n = usize::try_from(size).ok().filter(|&n| n > 0)?;
    let plain = !local.is_null()
        && !in_flight::any()
        && matches!(transfer(), Transfer::Auto | Transfer::ZeroCopy)
        && inside_allocation(p, remote as usize, n);
    plain.then_some((w, RemotePtr::new(p, remote as usize), n))
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Put(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int {
    if let Some((w, at, n)) = plain_target(dst, size, proc, src) {
        if w.put_plain(at, std::slice::from_raw_parts(src as *const u8, n)) {
            return 0;
        }
    }
    put_checked(src, dst, size, proc)
}

/// ARMCI_Put past its fast path: out of line, so that the fast path keeps its arguments in
/// registers (see ARMCI_Fence for the stall an inlined entry closure caused).
#[cold]
#[inline(never)]
unsafe fn put_checked(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int {
    entry("ARMCI_Put", || put(src, dst, size, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Get(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int {
    if let Some((w, at, n)) = plain_target(src, size, proc, dst) {
        if w.get_plain(at, std::slice::from_raw_parts_mut(dst as *mut u8, n)) {
            return 0;
        }
    }
    get_checked(src, dst, size, proc)
}

/// ARMCI_Get past its fast path (as `put_checked`).
#[cold]
#[inline(never)]
unsafe fn get_checked(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int {
    entry("ARMCI_Get", || get(src, dst, size, proc));
    0
}

/// Starts a put that completes with `hdl` (NULL: implicitly, by a fence or a later call to
/// `proc`): see in_flight.rs. `src` may be reused when this returns.
unsafe fn nb_put(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int, hdl: *mut ArmciHdl) -> R {
    let (w, p, n) = checked(src, size, proc, "src")?;
    if n == 0 {
        return Ok(());
    }
    let at = remote_arg(p, dst as usize, n, "dst")?;
    let started = w.put_nb_by(transfer(), at, std::slice::from_raw_parts(src as *const u8, n)).map_err(rt)?;
    in_flight::record(hdl as usize, p, started)
}

/// Starts a get into `dst`, which the program leaves alone until `hdl` completes (ARMCI's
/// contract, which lets the transfer borrow it until then).
unsafe fn nb_get(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int, hdl: *mut ArmciHdl) -> R {
    let (w, p, n) = checked(dst, size, proc, "dst")?;
    if n == 0 {
        return Ok(());
    }
    let at = remote_arg(p, src as usize, n, "src")?;
    let started = w.get_nb_by(transfer(), at, std::slice::from_raw_parts_mut(dst as *mut u8, n)).map_err(rt)?;
    in_flight::record(hdl as usize, p, started)
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbPut(src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbPut", || nb_put(src, dst, bytes, proc, hdl));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbGet(src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbGet", || nb_get(src, dst, bytes, proc, hdl));
    mark(hdl, proc);
    0
}

/// A local copy (both addresses are this process's).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Copy(src: *mut c_void, dst: *mut c_void, size: c_int) {
    entry("ARMCI_Copy", || {
        let n = nonneg(size.into(), "size")?;
        local_arg(src, n, "src")?;
        local_arg(dst, n, "dst")?;
        if n > 0 {
            std::ptr::copy(src as *const u8, dst as *mut u8, n);
        }
        Ok(())
    })
}

/// The data, then `*flag = value` on proc (`put_flag`).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Put_flag(
    src: *mut c_void,
    dst: *mut c_void,
    size: c_int,
    flag: *mut c_int,
    value: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_Put_flag", || {
        put(src, dst, size, proc)?;
        put_flag(flag, value, proc)
    });
    0
}

/// After a put of data to `proc`: stores `value` into the int `flag` at `proc`. The data put
/// was blocking (complete at the target), so a rank that sees the flag sees the data (the
/// `_flag` calls).
pub(crate) unsafe fn put_flag(flag: *mut c_int, value: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    put_bytes(w, (&value as *const c_int).cast(), flag as usize, 4, p, "flag")
}
