//! atomic_direct: the segment is shared memory, so the origin's CPU runs the atomic itself.
//! Atomics on different words never share a lock (there is none).

use crate::{AtomicOp, Proto};
use activerma_core::counters::bump;
use std::sync::atomic::AtomicU64;

pub(crate) use activerma_transport::apply_atomic as apply;

#[inline]
pub(crate) fn run(p: &Proto, local: *mut u8, op: AtomicOp) -> u64 {
    // SAFETY: `local` is 8-byte aligned (checked) inside a checked read-write segment range.
    let word = unsafe { &*(local as *const AtomicU64) };
    bump(&p.counters.atomic_direct, 1);
    apply(word, op)
}
