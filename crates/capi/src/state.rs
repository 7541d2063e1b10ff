//! The process-global runtime state behind the C calls: the World, and registries for the
//! Rust objects C cannot hold (segments, exposures).

use crate::status::{invalid, CResult, Fail, ARMA_ERR_INVALID_RANK, ARMA_ERR_NOT_INITIALIZED};
use activerma::{Error, Exposed, Segment, World};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Set once by arma_init; a OnceLock so every call finds it with a single load.
pub(crate) static WORLD: OnceLock<World> = OnceLock::new();
/// Serializes arma_init (two threads racing must not both join the job).
pub(crate) static INIT: Mutex<()> = Mutex::new(());
/// Set by arma_finalize: the World stays (rank and size still answer) but refuses work.
pub(crate) static FINALIZED: AtomicBool = AtomicBool::new(false);

/// Live segments, searched by local address (arma_seg_addr accepts any byte inside one).
pub(crate) static SEGMENTS: Mutex<Vec<Segment>> = Mutex::new(Vec::new());
/// Live exposures by the id handed to C in `arma_exposure_t`.
pub(crate) static EXPOSURES: OnceLock<Mutex<HashMap<u64, Exposed<'static>>>> = OnceLock::new();
/// Exposure ids start at 1 so that a zeroed `arma_exposure_t` is never a live exposure.
pub(crate) static NEXT_EXPOSURE: AtomicU64 = AtomicU64::new(1);

/// The World, or why there is none to use.
#[inline]
pub(crate) fn world() -> CResult<&'static World> {
    let w = WORLD.get().ok_or_else(|| Fail {
        code: ARMA_ERR_NOT_INITIALIZED,
        msg: "arma_init has not been called (or it failed)".into(),
        failed_rank: None,
    })?;
    if FINALIZED.load(Ordering::Acquire) {
        return Err(Error::Finalized.into());
    }
    Ok(w)
}

/// A C rank checked against the job (the Rust API cannot even represent a negative one).
#[inline]
pub(crate) fn rank(w: &World, r: c_int) -> CResult<usize> {
    match usize::try_from(r) {
        Ok(r) if r < w.size() => Ok(r),
        Ok(r) => Err(Error::InvalidRank { rank: r, size: w.size() }.into()),
        Err(_) => Err(Fail {
            code: ARMA_ERR_INVALID_RANK,
            msg: format!("invalid rank {r}: the job has {} ranks, numbered 0 to {}", w.size(), w.size().saturating_sub(1)),
            failed_rank: None,
        }),
    }
}

/// A C address as this machine's address type.
#[inline]
pub(crate) fn addr(a: u64) -> CResult<usize> {
    usize::try_from(a).map_err(|_| invalid(format!("address {a:#x} does not fit this machine's pointers")))
}

/// Locks a registry; a poisoned lock only means a panic was caught mid-update elsewhere, and
/// the registries stay consistent (every update is a single push/insert/remove).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn exposures() -> MutexGuard<'static, HashMap<u64, Exposed<'static>>> {
    lock(EXPOSURES.get_or_init(Default::default))
}
