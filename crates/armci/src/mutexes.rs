//! ARMCI mutexes: each rank owns its own set, created collectively. Mutex m of rank p is a
//! fair ticket lock (ticket.rs) in p's copy of one segment: FIFO, so every rank gets its turn
//! under contention from all the others.

use crate::errors::{entry, R};
use crate::state::{lock, nonneg, proc_arg, rt, world};
use crate::ticket;
use activerma::{RemotePtr, Segment};
use std::ffi::c_int;
use std::sync::Mutex;

struct Mutexes {
    seg: Segment,
    /// How many mutexes each rank created (ranks may ask for different numbers).
    counts: Vec<usize>,
}

static MUTEXES: Mutex<Option<Mutexes>> = Mutex::new(None);

/// Bytes per mutex: the ticket word and the serving word.
const SLOT: usize = 16;

fn create(count: c_int) -> R {
    let w = world()?;
    let n = nonneg(count.into(), "count")?;
    if lock(&MUTEXES).is_some() {
        return Err("mutexes already exist: call ARMCI_Destroy_mutexes first".into());
    }
    let all = w.allgather(&(n as u64).to_le_bytes()).map_err(rt)?;
    let counts: Vec<usize> = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap()) as usize).collect();
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let seg = w.alloc_segment(most * SLOT).map_err(rt)?;
    *lock(&MUTEXES) = Some(Mutexes { seg, counts });
    Ok(())
}

fn destroy() -> R {
    world()?;
    let m = lock(&MUTEXES).take().ok_or("no mutexes exist (ARMCI_Create_mutexes was not called)")?;
    // Segment::free is collective and starts with a barrier.
    m.seg.free().map_err(rt)
}

/// Where mutex `mutex` of rank `proc` lives, after checking both.
fn locate(mutex: c_int, proc: c_int) -> R<RemotePtr> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let g = lock(&MUTEXES);
    let m = g.as_ref().ok_or("no mutexes exist (call ARMCI_Create_mutexes first)")?;
    match usize::try_from(mutex) {
        Ok(i) if i < m.counts[p] => Ok(m.seg.remote(p, i * SLOT)),
        _ => Err(format!("argument mutex = {mutex} is out of range: rank {p} created {} mutexes", m.counts[p])),
    }
}

#[no_mangle]
pub extern "C" fn ARMCI_Create_mutexes(count: c_int) -> c_int {
    entry("ARMCI_Create_mutexes", || create(count));
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_Destroy_mutexes() -> c_int {
    entry("ARMCI_Destroy_mutexes", destroy);
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_Lock(mutex: c_int, proc: c_int) {
    entry("ARMCI_Lock", || {
        let at = locate(mutex, proc)?;
        ticket::acquire(world()?, at)
    })
}

#[no_mangle]
pub extern "C" fn ARMCI_Unlock(mutex: c_int, proc: c_int) {
    entry("ARMCI_Unlock", || {
        let at = locate(mutex, proc)?;
        let w = world()?;
        // Data the holder put under the lock must be visible before the next holder enters.
        w.flush_all().map_err(rt)?;
        ticket::release(w, at)
    })
}
