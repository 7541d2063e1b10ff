//! Joining and leaving the job, who am I, and the collectives.

use crate::state::{world, FINALIZED, INIT, WORLD};
use crate::status::{guard, invalid, Fail, ARMA_ERR_COLLECTIVE_MISMATCH};
use activerma::Error;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

/// Joins the job (collective: every rank calls it once before any other arma_* call except
/// arma_rank, arma_size, arma_version, arma_strerror and arma_last_error). A program started
/// without the launcher becomes a one-rank job. Calling it again while initialized does
/// nothing and returns ARMA_OK; after arma_finalize it returns ARMA_ERR_FINALIZED.
#[no_mangle]
pub extern "C" fn arma_init() -> c_int {
    guard("arma_init", || {
        let _serial = INIT.lock().unwrap_or_else(|p| p.into_inner());
        if FINALIZED.load(Ordering::Acquire) {
            return Err(Error::Finalized.into());
        }
        if WORLD.get().is_none() {
            let w = activerma::init()?;
            let _ = WORLD.set(w);
        }
        Ok(())
    })
}

/// Leaves the job (collective): completes this rank's outstanding operations, waits for every
/// rank and stops the progress thread. Every later call fails with ARMA_ERR_FINALIZED, except
/// arma_rank and arma_size, which keep answering.
#[no_mangle]
pub extern "C" fn arma_finalize() -> c_int {
    guard("arma_finalize", || {
        let w = world()?;
        let r = w.finalize();
        // The World refuses work from here on even if the final barrier failed.
        FINALIZED.store(true, Ordering::Release);
        Ok(r?)
    })
}

/// This rank's number, 0..arma_size()-1; -1 before arma_init.
#[no_mangle]
pub extern "C" fn arma_rank() -> c_int {
    WORLD.get().map_or(-1, |w| w.rank() as c_int)
}

/// The number of ranks in the job; -1 before arma_init.
#[no_mangle]
pub extern "C" fn arma_size() -> c_int {
    WORLD.get().map_or(-1, |w| w.size() as c_int)
}

/// The library's version (any pointer may be NULL). Works before arma_init.
#[no_mangle]
pub unsafe extern "C" fn arma_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> c_int {
    guard("arma_version", || {
        let parts =
            [(major, env!("CARGO_PKG_VERSION_MAJOR")), (minor, env!("CARGO_PKG_VERSION_MINOR")), (patch, env!("CARGO_PKG_VERSION_PATCH"))];
        for (out, v) in parts {
            if !out.is_null() {
                // SAFETY: the caller passes NULL or a writable int.
                unsafe { *out = v.parse().unwrap_or(0) };
            }
        }
        Ok(())
    })
}

/// Barrier (collective): all ranks arrive before any leaves. Completes this rank's implicit
/// (nbi) operations first, and runs pending handlers while it waits, so a rank waiting here
/// serves atomics other ranks run on its exposed private memory.
#[no_mangle]
pub extern "C" fn arma_barrier() -> c_int {
    guard("arma_barrier", || Ok(world()?.barrier()?))
}

/// Runs pending active-message handlers once and returns. A rank whose exposed private memory
/// is the target of atomics must call this (or any blocking arma call) now and then when it
/// runs with ACTIVERMA_PROGRESS=app (the default) and has nothing else to do.
#[no_mangle]
pub extern "C" fn arma_progress() -> c_int {
    guard("arma_progress", || {
        world()?.progress();
        Ok(())
    })
}

/// Allgather (collective): every rank contributes `len` bytes from `mine` (the same `len`
/// everywhere); `out` receives arma_size() * len bytes, rank 0's contribution first. Handy
/// for exchanging exposure addresses.
#[no_mangle]
pub unsafe extern "C" fn arma_allgather(mine: *const c_void, len: usize, out: *mut c_void) -> c_int {
    guard("arma_allgather", || {
        let w = world()?;
        if len > 0 && (mine.is_null() || out.is_null()) {
            return Err(invalid(format!("NULL buffer with len {len}")));
        }
        let total = len
            .checked_mul(w.size())
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| invalid(format!("len {len} times {} ranks is larger than any buffer can be", w.size())))?;
        // SAFETY: the caller passes `len` readable bytes (checked non-NULL above when len > 0).
        let src = if len == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(mine.cast::<u8>(), len) } };
        let all = w.allgather(src)?;
        if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != len) {
            return Err(Fail {
                code: ARMA_ERR_COLLECTIVE_MISMATCH,
                msg: format!("rank {} passed len {len} but rank {r} passed {}", w.rank(), b.len()),
                failed_rank: None,
            });
        }
        if total > 0 {
            // SAFETY: the caller passes `size * len` writable bytes at `out`.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.cast::<u8>(), total) };
            for (chunk, b) in dst.chunks_exact_mut(len).zip(&all) {
                chunk.copy_from_slice(b);
            }
        }
        Ok(())
    })
}
