//! atomic_direct: the segment is shared memory, so the origin's CPU runs the atomic itself.
//! Atomics on different words never share a lock (there is none).

use crate::{AtomicOp, Proto};
use activerma_core::counters::bump;
use activerma_transport::Width;

#[inline]
pub(crate) fn run(p: &Proto, local: *mut u8, op: AtomicOp, width: Width) -> u64 {
    bump(&p.counters.atomic_direct, 1);
    // SAFETY: `local` is aligned to the width (checked) inside a checked segment range.
    unsafe { activerma_transport::apply_atomic_at(local, op, width) }
}
