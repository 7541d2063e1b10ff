//! ARMCI_Rmw: fetch-and-add and swap on remote ints and longs.
//!
//! activerma's remote atomics work on aligned 64-bit words. The long ops map onto them
//! directly; an int op is a compare-and-swap loop on the aligned 64-bit word that holds the
//! int, changing only its 4 bytes, so a concurrent update of the neighbouring int (by another
//! Rmw) is never lost. The loop starts from the word the previous int Rmw of this process
//! left on the same word, when there is one (a counter's next increment then costs one
//! compare-and-swap, not a fetch and a compare-and-swap). ARMCI_Malloc rounds blocks to 8 bytes so that word is always inside one.

use crate::errors::{entry, R};
use crate::state::{local_arg, proc_arg, remote_arg, rt, world};
use activerma::{RemotePtr, World};
use std::ffi::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

const FETCH_AND_ADD: c_int = 0;
const FETCH_AND_ADD_LONG: c_int = 1;
const SWAP: c_int = 2;
const SWAP_LONG: c_int = 3;

/// The word the last int Rmw of this process left behind, and where (rank and address):
/// the next Rmw on the same word (a counter's next increment) starts its compare-and-swap from
/// it instead of fetching the word first. Only a guess: threads may overwrite each other's,
/// and a wrong one costs one failed compare-and-swap, which returns the real word.
static GUESS_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static GUESS_WORD: AtomicU64 = AtomicU64::new(0);

fn guess_key(word: RemotePtr) -> u64 {
    (word.rank as u64) << 48 ^ word.addr as u64
}

/// Applies f to the int at `at` (4-byte aligned) atomically; returns the old int.
fn rmw32(w: &World, at: RemotePtr, f: impl Fn(i32) -> i32) -> R<i32> {
    let word = RemotePtr::new(at.rank, at.addr & !7);
    // Little-endian: the int at byte 4 of the word is its high half.
    let shift = ((at.addr & 4) * 8) as u32;
    let key = guess_key(word);
    let mut cur = if GUESS_AT.load(Ordering::Relaxed) == key { GUESS_WORD.load(Ordering::Relaxed) } else { w.fetch(word).map_err(rt)? };
    loop {
        let old = (cur >> shift) as u32 as i32;
        let new = (cur & !(0xffff_ffffu64 << shift)) | ((f(old) as u32 as u64) << shift);
        let seen = w.compare_swap(word, cur, new).map_err(rt)?;
        if seen == cur {
            GUESS_WORD.store(new, Ordering::Relaxed);
            GUESS_AT.store(key, Ordering::Relaxed);
            return Ok(old);
        }
        cur = seen;
    }
}

unsafe fn rmw(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let size = match op {
        FETCH_AND_ADD | SWAP => 4,
        FETCH_AND_ADD_LONG | SWAP_LONG => 8,
        _ => return Err(format!("argument op = {op} is not an ARMCI Rmw operation (ARMCI_FETCH_AND_ADD = 0 to ARMCI_SWAP_LONG = 3)")),
    };
    local_arg(ploc, size, "ploc")?;
    if ploc.is_null() {
        return Err("argument ploc is NULL".into());
    }
    if !(prem as usize).is_multiple_of(size) {
        return Err(format!("argument prem = {prem:p} is not aligned to its {size}-byte type"));
    }
    let at = remote_arg(p, prem as usize, size, "prem")?;
    match op {
        FETCH_AND_ADD => {
            let old = rmw32(w, at, |x| x.wrapping_add(value))?;
            (ploc as *mut c_int).write_unaligned(old);
        }
        SWAP => {
            let new = (ploc as *const c_int).read_unaligned();
            let old = rmw32(w, at, |_| new)?;
            (ploc as *mut c_int).write_unaligned(old);
        }
        FETCH_AND_ADD_LONG => {
            let old = w.fetch_add(at, value as c_long as u64).map_err(rt)?;
            (ploc as *mut c_long).write_unaligned(old as c_long);
        }
        _ => {
            let new = (ploc as *const c_long).read_unaligned();
            let old = w.swap(at, new as u64).map_err(rt)?;
            (ploc as *mut c_long).write_unaligned(old as c_long);
        }
    }
    Ok(())
}

/// Atomic read-modify-write of rank proc's *prem; the old value lands in *ploc.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Rmw(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> c_int {
    entry("ARMCI_Rmw", || rmw(op, ploc, prem, value, proc));
    0
}
