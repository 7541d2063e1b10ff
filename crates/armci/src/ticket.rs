//! A fair (FIFO) lock on two 64-bit words of a segment: `next` hands out tickets with a remote
//! fetch-add, `serving` says whose turn it is. Used by the accumulate calls and ARMCI mutexes.
//! A try-lock draws its ticket only when it would be served at once (next == serving).

use crate::errors::R;
use crate::state::rt;
use activerma::{RemotePtr, World};
use std::sync::atomic::{fence, Ordering};

/// Takes the lock whose `next` word is at `at` (and `serving` at `at + 8`).
pub(crate) fn acquire(w: &World, at: RemotePtr) -> R {
    let ticket = w.fetch_add(at, 1).map_err(rt)?;
    let mut spins = 0u32;
    while w.fetch(at.offset(8)).map_err(rt)? != ticket {
        // Serve our own incoming requests (progress mode `app`) and let the holder run: with
        // more ranks than cores a busy wait would starve it.
        w.progress();
        spins += 1;
        if spins > 16 {
            std::thread::yield_now();
        }
    }
    // The holder's data movement must not be reordered before the lock is ours.
    fence(Ordering::SeqCst);
    Ok(())
}

/// Takes the lock only if nobody holds it or waits for it: true when taken. The ticket is
/// drawn by a compare-and-swap from the serving number, so a busy lock is left untouched.
pub(crate) fn try_acquire(w: &World, at: RemotePtr) -> R<bool> {
    let serving = w.fetch(at.offset(8)).map_err(rt)?;
    if w.compare_swap(at, serving, serving + 1).map_err(rt)? != serving {
        return Ok(false);
    }
    fence(Ordering::SeqCst);
    Ok(true)
}

/// Releases the lock: hands it to the next ticket.
pub(crate) fn release(w: &World, at: RemotePtr) -> R {
    fence(Ordering::SeqCst);
    w.fetch_add(at.offset(8), 1).map_err(rt)?;
    Ok(())
}
