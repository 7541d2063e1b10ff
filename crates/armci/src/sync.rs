//! Completion: fences, barriers and the handles of the non-blocking calls.
//!
//! Every call of this library moves its data with blocking activerma operations, which are
//! complete at the target when they return (contiguous.rs says why), the "non-blocking" ones
//! too. So nothing is ever outstanding: Fence, AllFence, Wait, WaitProc and WaitAll check their
//! arguments and return. (A flush would only add a full memory fence, about as long as the
//! 8-byte put it follows.) Calls that become truly non-blocking must record what they leave
//! outstanding per target, and these must complete it.

use crate::errors::entry;
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
        match hdl.as_mut() {
            Some(h) if h.target >= 0 => {
                proc_arg(w, h.target, "hdl->target")?;
                h.target = -1;
            }
            _ => {}
        }
        Ok(())
    });
    0
}

/// 0: the operations of `hdl` are complete (they always are once Test returns).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Test(hdl: *mut ArmciHdl) -> c_int {
    ARMCI_Wait(hdl)
}

#[no_mangle]
pub extern "C" fn ARMCI_WaitProc(proc: c_int) -> c_int {
    entry("ARMCI_WaitProc", || proc_arg(world()?, proc, "proc").map(|_| ()));
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_WaitAll() -> c_int {
    entry("ARMCI_WaitAll", || world().map(|_| ()));
    0
}

/// Completes every operation of this rank to proc: all are complete already.
#[no_mangle]
pub extern "C" fn ARMCI_Fence(proc: c_int) {
    // Called after every put in many programs: a valid rank returns without the entry
    // machinery; anything else goes through it for the message.
    if crate::state::is_live_rank(proc) {
        return;
    }
    entry("ARMCI_Fence", || proc_arg(world()?, proc, "proc").map(|_| ()))
}

#[no_mangle]
pub extern "C" fn ARMCI_AllFence() {
    entry("ARMCI_AllFence", || world().map(|_| ()))
}

/// Completes everything everywhere: activerma's barrier completes this rank's operations
/// and waits for every rank.
#[no_mangle]
pub extern "C" fn ARMCI_Barrier() {
    entry("ARMCI_Barrier", || world()?.barrier().map_err(rt))
}

/// No-ops: smp memory is coherent, a rank may load and store its own ARMCI memory any time.
#[no_mangle]
pub extern "C" fn ARMCI_Access_begin(_ptr: *mut std::ffi::c_void) {}
#[no_mangle]
pub extern "C" fn ARMCI_Access_end(_ptr: *mut std::ffi::c_void) {}
