//! atomic_direct: the segment is shared memory, so the origin's CPU runs the atomic itself.
//! Atomics on different words never share a lock (there is none).

use crate::{AtomicOp, Proto};
use activerma_core::counters::bump;
use std::sync::atomic::{AtomicU64, Ordering};

/// Applies `op` to the word at `word`; returns the previous value.
pub(crate) fn apply(word: &AtomicU64, op: AtomicOp) -> u64 {
    match op {
        AtomicOp::Fetch => word.load(Ordering::SeqCst),
        AtomicOp::FetchAdd(v) => word.fetch_add(v, Ordering::SeqCst),
        AtomicOp::Swap(v) => word.swap(v, Ordering::SeqCst),
        AtomicOp::CompareSwap { expected, new } => match word.compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        },
    }
}

#[inline]
pub(crate) fn run(p: &Proto, local: *mut u8, op: AtomicOp) -> u64 {
    // SAFETY: `local` is 8-byte aligned (checked) inside a checked read-write segment range.
    let word = unsafe { &*(local as *const AtomicU64) };
    bump(&p.counters.atomic_direct, 1);
    apply(word, op)
}
