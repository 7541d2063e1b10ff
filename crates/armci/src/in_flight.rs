//! The transfers ARMCI_NbPut / NbGet / NbPutS / NbGetS leave in flight, and ARMCI's ordering
//! rules over them.
//!
//! A non-blocking contiguous or strided call starts a `PendingTransfer` by the run's protocol. What the
//! core completes at issue (zero-copy on one host without the modelled network: the bytes
//! have moved) is finished at once and never recorded, so the default path costs one relaxed
//! load more. The rest (buffered and pipelined transfers waiting for the target's answers or
//! acknowledgements, completion times of the modelled network) is recorded here with its
//! handle (0 for an implicit one) and target:
//!
//! ```text
//! accumulates through Active Access (acc_active.rs): the ranks they were logged at, until an
//! active flush there (they are complete for ARMCI once the target ran their handlers)
//! ARMCI_Wait(h) / Test(h)    complete / test the transfers of handle h
//! ARMCI_WaitProc(p), Fence(p)  complete every transfer to p
//! ARMCI_WaitAll, AllFence, Barrier, Free, Finalize   complete all
//! any call touching p's memory  completes the transfers to p first (before_access), which
//!                               is ARMCI's location consistency: a get after a put to the
//!                               same place sees the put, an NbGet is not overtaken by a later put
//! ```
//!
//! A transfer borrows the user's buffer until it completes: ARMCI's contract says the buffer of
//! a non-blocking call stays untouched until its handle is waited for (or a fence completes it),
//! which is what the `'static` lifetimes below rest on.

use crate::errors::R;
use crate::state::{lock, rt};
use activerma::PendingTransfer;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

struct InFlight {
    /// The handle's address (0: implicit).
    handle: usize,
    proc: usize,
    transfer: PendingTransfer<'static>,
}

static IN_FLIGHT: Mutex<Vec<InFlight>> = Mutex::new(Vec::new());
/// How many are recorded: the calls that must complete some first read only this.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Ranks this rank logged accumulates at (acc_active.rs) that it has not active-flushed since,
/// and how many.
static ACCUMULATED_AT: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());
static ACC_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Notes that accumulates to `proc` were logged there and may not be applied yet.
pub(crate) fn note_active_accumulate(proc: usize) {
    let mut at = lock(&ACCUMULATED_AT);
    if at.insert(proc) {
        ACC_COUNT.store(at.len(), Ordering::Release);
    }
}

/// Waits until the ranks `which` selects ran the handlers of every accumulate this rank
/// logged there.
fn apply_accumulates(which: impl Fn(usize) -> bool) -> R {
    if ACC_COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let ranks: Vec<usize> = {
        let mut at = lock(&ACCUMULATED_AT);
        let picked: Vec<usize> = at.iter().copied().filter(|&p| which(p)).collect();
        picked.iter().for_each(|p| {
            at.remove(p);
        });
        ACC_COUNT.store(at.len(), Ordering::Release);
        picked
    };
    let w = crate::state::world()?;
    ranks.into_iter().try_for_each(|p| w.active_flush(p).map_err(rt))
}

/// Records `transfer`, unless it is complete already (then finished here).
pub(crate) fn record(handle: usize, proc: usize, mut transfer: PendingTransfer<'static>) -> R {
    // Moved already (zero-copy on one host)? Then nothing to keep. One still on the wire
    // (MPI across hosts) is kept, not completed here: the program computes while it moves.
    if transfer.test_without_conduit().map_err(rt)? {
        return transfer.wait().map(drop).map_err(rt);
    }
    let mut all = lock(&IN_FLIGHT);
    all.push(InFlight { handle, proc, transfer });
    COUNT.store(all.len(), Ordering::Release);
    Ok(())
}

/// Takes the transfers `which` selects out of the record (they are waited for or tested
/// outside the lock: see `complete`).
fn take(which: impl Fn(&InFlight) -> bool) -> Vec<InFlight> {
    let mut all = lock(&IN_FLIGHT);
    let (taken, kept) = std::mem::take(&mut *all).into_iter().partition(|t| which(t));
    *all = kept;
    COUNT.store(all.len(), Ordering::Release);
    taken
}

/// Completes the transfers `which` selects; the first error after all of them completed.
fn complete(which: impl Fn(&InFlight) -> bool) -> R {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let done = take(which);
    // Waited for outside the lock: a wait makes progress, which may run handlers that start
    // transfers of their own.
    let mut first = Ok(());
    for t in done {
        let outcome = t.transfer.wait().map(drop).map_err(rt);
        if first.is_ok() {
            first = outcome;
        }
    }
    first
}

/// Whether anything is in flight (relaxed loads: the fast path of ARMCI_Fence).
#[inline]
pub(crate) fn any() -> bool {
    COUNT.load(Ordering::Relaxed) != 0 || ACC_COUNT.load(Ordering::Relaxed) != 0
}

/// Before any call touches rank `proc`'s memory: what is in flight to it completes first.
#[inline]
pub(crate) fn before_access(proc: usize) -> R {
    if !any() {
        return Ok(());
    }
    complete_to(proc)
}

/// Completes the transfers of `handle`, and the accumulates to its target (`target`), which
/// are not recorded per handle.
pub(crate) fn complete_handle(handle: usize, target: Option<usize>) -> R {
    complete(|t| t.handle == handle)?;
    match target {
        Some(p) => apply_accumulates(|q| q == p),
        None => Ok(()),
    }
}

pub(crate) fn complete_to(proc: usize) -> R {
    complete(|t| t.proc == proc)?;
    apply_accumulates(|p| p == proc)
}

pub(crate) fn complete_all() -> R {
    complete(|_| true)?;
    apply_accumulates(|_| true)
}

/// Whether every transfer of `handle` is complete. Each is tested (which makes progress)
/// outside the lock, for the reason `complete` gives; the incomplete ones go back.
pub(crate) fn handle_done(handle: usize) -> R<bool> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(true);
    }
    let mine = take(|t| t.handle == handle);
    let mut first = Ok(());
    let mut left = Vec::new();
    for mut t in mine {
        match t.transfer.test().map_err(rt) {
            Ok(true) => {
                if let Err(e) = t.transfer.wait().map(drop).map_err(rt) {
                    first = first.and(Err(e));
                }
            }
            Ok(false) => left.push(t),
            Err(e) => first = first.and(Err(e)),
        }
    }
    let done = left.is_empty();
    let mut all = lock(&IN_FLIGHT);
    all.extend(left);
    COUNT.store(all.len(), Ordering::Release);
    first.map(|_| done)
}
