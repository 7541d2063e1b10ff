//! armci_notify / armci_notify_wait (Global Arrays' ARMCI; ARMCI-MPI has no such calls): a
//! flag that follows a rank's data. Every rank holds a counter per sending rank in ARMCI's
//! RANK_WORDS segment.
//!
//! ```text
//! notify(p):       complete what is in flight to p (NbPut, queued accumulates; blocking calls
//!                  are complete when they return); sent = fetch_add(p's counter of me, 1) + 1
//!                  -> every byte this rank wrote to p before is visible once p sees the count
//! notify_wait(p):  waited[p] += 1; wait (serving requests) until my counter of p >= waited[p];
//!                  *pval = waited[p]; return the counter
//! ```

use crate::errors::{entry, R};
use crate::state::{lock, proc_arg, rank_word, rt, world, NOTIFY_FROM};
use std::ffi::c_int;
use std::sync::atomic::{fence, Ordering};
use std::sync::Mutex;

/// How many notifications this rank has waited for, per sending rank.
static WAITED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn notify(proc: c_int) -> R<c_int> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    crate::in_flight::complete_to(p)?;
    let before = w.fetch_add(rank_word(p, NOTIFY_FROM + 8 * w.rank())?, 1).map_err(rt)?;
    Ok((before + 1) as c_int)
}

fn notify_wait(proc: c_int, pval: *mut c_int) -> R<c_int> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let waited = {
        let mut all = lock(&WAITED);
        all.resize(w.size(), 0);
        all[p] += 1;
        all[p]
    };
    let counter = rank_word(w.rank(), NOTIFY_FROM + 8 * p)?;
    let mut spins = 0u32;
    let received = loop {
        let now = w.fetch(counter).map_err(rt)?;
        if now >= waited {
            break now;
        }
        // Serve requests meanwhile (the sender's data may come through this rank's CPU), and
        // let the sender run when the ranks outnumber the cores.
        w.progress();
        spins += 1;
        if spins > 16 {
            std::thread::yield_now();
        }
    };
    // The sender's data is visible before the count: nothing read after this moves above it.
    fence(Ordering::SeqCst);
    if !pval.is_null() {
        // SAFETY: the caller's int (checked for NULL: then only the count is returned).
        unsafe { *pval = waited as c_int };
    }
    Ok(received as c_int)
}

/// Tells rank `proc` that every put, accumulate and other write of this rank to it so far is
/// complete; returns how many notifications this rank has sent to `proc`.
#[no_mangle]
pub extern "C" fn armci_notify(proc: c_int) -> c_int {
    entry("armci_notify", || notify(proc))
}

/// Waits for the next notification from rank `proc`: its number goes to *pval; returns how
/// many have arrived from `proc` (at least that number).
#[no_mangle]
pub extern "C" fn armci_notify_wait(proc: c_int, pval: *mut c_int) -> c_int {
    entry("armci_notify_wait", || notify_wait(proc, pval))
}
