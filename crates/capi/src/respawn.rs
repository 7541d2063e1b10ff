//! Surviving a rank's death: jobs started with `activerma run --respawn N` (one host).

use crate::state::{rank, world, WORLD};
use crate::status::{guard, last_failed_rank};
use std::ffi::c_int;

/// This process's incarnation of its rank: 0 for a rank the job started with, k for the k-th
/// replacement of a rank that died (`activerma run --respawn N`); -1 before arma_init.
///
/// Surviving a rank's death: when a rank dies, every operation to it and every collective
/// fails on the other ranks with ARMA_ERR_RANK_FAILED (arma_failed_rank names it) — never a
/// hang, never a write into its memory — until they call arma_wait_for_rank(rank). The
/// replacement starts the program again: arma_init, then the same arma_alloc_segment calls as
/// the rank's first incarnation made (they find its segments again, contents as the dead
/// process left them, without waiting for the others), restores its state (e.g. from a
/// checkpoint), then calls arma_rejoin; collectives before that fail with
/// ARMA_ERR_INVALID_ARGUMENT.
#[no_mangle]
pub extern "C" fn arma_incarnation() -> c_int {
    WORLD.get().map_or(-1, |w| w.incarnation() as c_int)
}

/// The rank that this thread's last ARMA_ERR_RANK_FAILED named, -1 if none did.
#[no_mangle]
pub extern "C" fn arma_failed_rank() -> c_int {
    last_failed_rank()
}

/// A replacement rank says it is back (a no-op on any other rank): returns once every other
/// rank has seen the failure, after which their arma_wait_for_rank returns and collectives
/// work again. Call it after restoring the rank's state.
#[no_mangle]
pub extern "C" fn arma_rejoin() -> c_int {
    guard("arma_rejoin", || Ok(world()?.rejoin()?))
}

/// Waits until `target`'s replacement has rejoined (returns at once if `target` did not fail);
/// from then on operations to it work again. Stores its incarnation in `*incarnation` unless
/// that is NULL. Serves other ranks' requests while it waits. Without --respawn, a rank that
/// died stays gone: ARMA_ERR_PEER_GONE.
#[no_mangle]
pub unsafe extern "C" fn arma_wait_for_rank(target: c_int, incarnation: *mut c_int) -> c_int {
    guard("arma_wait_for_rank", || {
        let w = world()?;
        let r = rank(w, target)?;
        let k = w.wait_for_rank(r)?;
        if !incarnation.is_null() {
            // SAFETY: the caller passes NULL or a writable int.
            unsafe { *incarnation = k as c_int };
        }
        Ok(())
    })
}
