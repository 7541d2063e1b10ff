//! 64-bit remote atomics. The address must be 8-byte aligned. On a segment the origin's CPU
//! runs the atomic directly; on exposed private memory the target's CPU runs it, so the
//! target must make progress (any blocking arma call, arma_progress, or a progress thread).
//! Rights: arma_fetch is a read and needs read permission; every other atomic writes and needs
//! read-write (ARMA_ERR_PROTECTION otherwise). Pages marked for Active Access logging refuse
//! the atomics they permit (ARMA_ERR_UNSUPPORTED): atomics are not logged.

use crate::state::{addr, rank, world};
use crate::status::{guard, invalid, CResult};
use activerma::{AtomicOp, RemotePtr};
use std::ffi::c_int;

/// Runs `op` at (rank, addr) and stores the previous value in `*old` unless `old` is NULL.
unsafe fn run(r: c_int, a: u64, op: AtomicOp, old: *mut u64) -> CResult {
    let w = world()?;
    let v = w.atomic(RemotePtr::new(rank(w, r)?, addr(a)?), op)?;
    // SAFETY: the caller passes NULL or a writable uint64_t.
    if let Some(old) = unsafe { old.as_mut() } {
        *old = v;
    }
    Ok(())
}

/// Atomically adds `v` (wrapping) to the 64-bit word at `addr` on rank `rank`; `*old` receives
/// the previous value (`old` may be NULL). Returns when the update is done at the target.
/// `addr` must be 8-byte aligned (else ARMA_ERR_MISALIGNED). On a segment this rank's CPU
/// does it; on exposed private memory the target's CPU does, so the target must make progress
/// (a blocking arma call such as arma_barrier, arma_progress, or ACTIVERMA_PROGRESS=thread).
#[no_mangle]
pub unsafe extern "C" fn arma_fetch_add(rank: c_int, addr: u64, v: u64, old: *mut u64) -> c_int {
    guard("arma_fetch_add", || unsafe { run(rank, addr, AtomicOp::FetchAdd(v), old) })
}

/// Atomically adds `v` (wrapping) to the 64-bit word at `addr` on rank `rank`. Completion and
/// progress as for arma_fetch_add.
#[no_mangle]
pub extern "C" fn arma_add(rank: c_int, addr: u64, v: u64) -> c_int {
    // SAFETY: a NULL `old` is never written.
    guard("arma_add", || unsafe { run(rank, addr, AtomicOp::FetchAdd(v), std::ptr::null_mut()) })
}

/// Atomically stores `v` into the word at `addr` on rank `rank`; `*old` receives the previous
/// value (`old` may be NULL). Completion and progress as for arma_fetch_add.
#[no_mangle]
pub unsafe extern "C" fn arma_swap(rank: c_int, addr: u64, v: u64, old: *mut u64) -> c_int {
    guard("arma_swap", || unsafe { run(rank, addr, AtomicOp::Swap(v), old) })
}

/// Atomically stores `desired` into the word at `addr` on rank `rank` if it holds `expected`;
/// `*old` receives the previous value either way (the swap happened iff *old == expected;
/// `old` may be NULL). Completion and progress as for arma_fetch_add.
#[no_mangle]
pub unsafe extern "C" fn arma_cswap(rank: c_int, addr: u64, expected: u64, desired: u64, old: *mut u64) -> c_int {
    guard("arma_cswap", || unsafe { run(rank, addr, AtomicOp::CompareSwap { expected, new: desired }, old) })
}

/// Atomically reads the word at `addr` on rank `rank` into `*value`. A fetch is a read: read
/// permission suffices (ARMA_PROT_READ memory, a segment page marked ARMA_AA_R without
/// ARMA_AA_W), as for MPI_Fetch_and_op with MPI_NO_OP; it is atomic with respect to every
/// other atomic on the word. Completion and progress as for arma_fetch_add.
#[no_mangle]
pub unsafe extern "C" fn arma_fetch(rank: c_int, addr: u64, value: *mut u64) -> c_int {
    guard("arma_fetch", || {
        if value.is_null() {
            return Err(invalid("value is NULL"));
        }
        unsafe { run(rank, addr, AtomicOp::Fetch, value) }
    })
}
