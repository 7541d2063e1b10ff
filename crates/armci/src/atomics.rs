//! ARMCI_Rmw: fetch-and-add and swap on remote ints and longs.
//!
//! Both map onto activerma's atomics directly: the long ops onto its 64-bit words, the int
//! ops onto its 32-bit ones (`World::fetch_add_u32` / `swap_u32`: a CPU atomic on a segment
//! of this host, MPI_Fetch_and_op on MPI_UINT32_T across hosts, the target's CPU for private
//! memory), which never touch the neighbouring int.

use crate::errors::{entry, R};
use crate::in_flight;
use crate::state::{inside_allocation, live_world, local_arg, proc_arg, remote_arg, rt, world};
use activerma::RemotePtr;
use std::ffi::{c_int, c_long, c_void};

const FETCH_AND_ADD: c_int = 0;
const FETCH_AND_ADD_LONG: c_int = 1;
const SWAP: c_int = 2;
const SWAP_LONG: c_int = 3;

unsafe fn rmw(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let size = match op {
        FETCH_AND_ADD | SWAP => 4,
        FETCH_AND_ADD_LONG | SWAP_LONG => 8,
        _ => return Err(format!("argument op = {op} is not an ARMCI Rmw operation (ARMCI_FETCH_AND_ADD = 0 to ARMCI_SWAP_LONG = 3)")),
    };
    local_arg(ploc, size, "ploc")?;
    if ploc.is_null() {
        return Err("argument ploc is NULL".into());
    }
    if !(prem as usize).is_multiple_of(size) {
        return Err(format!("argument prem = {prem:p} is not aligned to its {size}-byte type"));
    }
    let at = remote_arg(p, prem as usize, size, "prem")?;
    match op {
        FETCH_AND_ADD => {
            let old = w.fetch_add_u32(at, value as u32).map_err(rt)?;
            (ploc as *mut c_int).write_unaligned(old as c_int);
        }
        SWAP => {
            let new = (ploc as *const c_int).read_unaligned();
            let old = w.swap_u32(at, new as u32).map_err(rt)?;
            (ploc as *mut c_int).write_unaligned(old as c_int);
        }
        FETCH_AND_ADD_LONG => {
            let old = w.fetch_add(at, value as c_long as u64).map_err(rt)?;
            (ploc as *mut c_long).write_unaligned(old as c_long);
        }
        _ => {
            let new = (ploc as *const c_long).read_unaligned();
            let old = w.swap(at, new as u64).map_err(rt)?;
            (ploc as *mut c_long).write_unaligned(old as c_long);
        }
    }
    Ok(())
}

/// Atomic read-modify-write of rank proc's *prem; the old value lands in *ploc.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Rmw(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> c_int {
    // The counter increment programs run in loops (a shared task counter), ahead of the entry
    // machinery as ARMCI_Put's small transfers: a live rank, a local result, an aligned word
    // inside one of the rank's allocations, nothing in flight. A refusal by the core ran
    // nothing: the checked path then runs the call or says what is wrong.
    if op == FETCH_AND_ADD && !ploc.is_null() && (prem as usize).is_multiple_of(4) {
        if let Some((w, p)) = live_world(proc) {
            if !in_flight::any() && inside_allocation(p, prem as usize, 4) {
                if let Ok(old) = w.fetch_add_u32(RemotePtr::new(p, prem as usize), value as u32) {
                    (ploc as *mut c_int).write_unaligned(old as c_int);
                    return 0;
                }
            }
        }
    }
    rmw_checked(op, ploc, prem, value, proc)
}

/// ARMCI_Rmw past its fast path (out of line, as contiguous.rs's put_checked).
#[cold]
#[inline(never)]
unsafe fn rmw_checked(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> c_int {
    entry("ARMCI_Rmw", || rmw(op, ploc, prem, value, proc));
    0
}
