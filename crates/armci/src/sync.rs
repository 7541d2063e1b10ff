//! Completion: fences, barriers and the handles of the non-blocking calls.
//!
//! Blocking calls are complete at the target when they return, and so are the non-blocking
//! strided, vector and accumulate calls (they run blocking). NbPut and NbGet leave what their
//! protocol has not finished in flight (in_flight.rs); Wait, Test, WaitProc, WaitAll, Fence,
//! AllFence and Barrier complete it. (A flush of operations that are complete would only add
//! a full memory fence, about as long as the 8-byte put it follows: Fence skips it.)

use crate::errors::entry;
use crate::in_flight;
use crate::state::{proc_arg, rt, world};
use std::ffi::c_int;

/// armci_hdl_t, as the header lays it out.
#[repr(C)]
pub struct ArmciHdl {
    pub target: c_int,
    pub aggregate: c_int,
}

/// Records the target of an operation started with `hdl` (NULL: an implicit handle).
pub(crate) unsafe fn mark(hdl: *mut ArmciHdl, proc: c_int) {
    if let Some(h) = hdl.as_mut() {
        h.target = proc;
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_INIT_HANDLE(hdl: *mut ArmciHdl) {
    if let Some(h) = hdl.as_mut() {
        h.target = -1;
        h.aggregate = 0;
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_SET_AGGREGATE_HANDLE(hdl: *mut ArmciHdl) {
    if let Some(h) = hdl.as_mut() {
        h.aggregate = 1;
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_UNSET_AGGREGATE_HANDLE(hdl: *mut ArmciHdl) {
    if let Some(h) = hdl.as_mut() {
        h.aggregate = 0;
    }
}

/// Completes the operations started with `hdl`; 0 when done.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Wait(hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_Wait", || {
        let w = world()?;
        if let Some(h) = hdl.as_mut() {
            let target = if h.target >= 0 { Some(proc_arg(w, h.target, "hdl->target")?) } else { None };
            in_flight::complete_handle(hdl as usize, target)?;
            h.target = -1;
        }
        Ok(())
    });
    0
}

/// 0 when the operations of `hdl` are complete, 1 while some are in flight.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Test(hdl: *mut ArmciHdl) -> c_int {
    let mut busy = 0;
    entry("ARMCI_Test", || {
        let w = world()?;
        if let Some(h) = hdl.as_mut() {
            if h.target >= 0 {
                proc_arg(w, h.target, "hdl->target")?;
            }
            busy = c_int::from(!in_flight::handle_done(hdl as usize)?);
        }
        Ok(())
    });
    busy
}

/// Completes every operation of this rank to `proc` (NbPut/NbGet in flight).
#[no_mangle]
pub extern "C" fn ARMCI_WaitProc(proc: c_int) -> c_int {
    entry("ARMCI_WaitProc", || in_flight::complete_to(proc_arg(world()?, proc, "proc")?));
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_WaitAll() -> c_int {
    entry("ARMCI_WaitAll", || world().and_then(|_| in_flight::complete_all()));
    0
}

/// Completes every operation of this rank to proc: blocking calls are complete when they
/// return; NbPut/NbGet in flight complete here.
#[no_mangle]
pub extern "C" fn ARMCI_Fence(proc: c_int) {
    // Called after every put in many programs: with nothing in flight, a valid rank returns
    // without the entry machinery; anything else goes through it (for the message).
    if crate::state::is_live_rank(proc) && !in_flight::any() {
        return;
    }
    fence_checked(proc)
}

/// ARMCI_Fence past its fast path. Out of line: inlined, its closure's reference to `proc`
/// made the fast path spill `proc` into the slot its frame alignment pops back, and that
/// 8-byte pop of a 4-byte store cannot be store-forwarded (a stall of about 3 ns, as long
/// as the rest of the call).
#[cold]
#[inline(never)]
fn fence_checked(proc: c_int) {
    entry("ARMCI_Fence", || in_flight::complete_to(proc_arg(world()?, proc, "proc")?))
}

#[no_mangle]
pub extern "C" fn ARMCI_AllFence() {
    entry("ARMCI_AllFence", || world().and_then(|_| in_flight::complete_all()))
}

/// Completes everything everywhere: this rank's transfers in flight, then activerma's
/// barrier (which completes this rank's operations and waits for every rank).
#[no_mangle]
pub extern "C" fn ARMCI_Barrier() {
    entry("ARMCI_Barrier", || {
        in_flight::complete_all()?;
        world()?.barrier().map_err(rt)
    })
}

/// No-ops: smp memory is coherent, a rank may load and store its own ARMCI memory any time.
#[no_mangle]
pub extern "C" fn ARMCI_Access_begin(_ptr: *mut std::ffi::c_void) {}
#[no_mangle]
pub extern "C" fn ARMCI_Access_end(_ptr: *mut std::ffi::c_void) {}

/// armcix.h: serves requests that wait for this rank (atomics on its group blocks,
/// transfers through it under the buffered protocols) while the program computes.
#[no_mangle]
pub extern "C" fn ARMCIX_Progress() {
    entry("ARMCIX_Progress", || {
        world()?.progress();
        Ok(())
    })
}
