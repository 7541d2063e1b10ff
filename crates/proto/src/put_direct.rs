//! put_direct: the target's segment is mapped in this process; the origin's CPU is the data
//! mover and the bytes are in the target's memory when the copy ends.

use crate::Proto;
use activerma_core::counters::bump;
use std::sync::atomic::{fence, Ordering};

#[inline]
pub(crate) fn run(p: &Proto, local: *mut u8, src: &[u8]) {
    // SAFETY: `local` was translated from a checked segment range of src.len() bytes; the
    // source is a distinct buffer of ours (overlap would need src inside the heap mapping, and
    // copy semantics for that case are memmove's, used below).
    unsafe { activerma_core::copy::copy_bytes(src.as_ptr(), local, src.len()) };
    fence(Ordering::Release);
    bump(&p.counters.put_direct, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
}

/// The same put with non-temporal stores (`copy::copy_streaming`), for a window of implicit puts too
/// large for the caches (`Proto::streams`); the source does not overlap the destination.
#[inline]
pub(crate) fn run_streaming(p: &Proto, local: *mut u8, src: &[u8]) {
    // SAFETY: as in `run`; the caller checked the ranges do not overlap.
    unsafe { activerma_core::copy::copy_streaming(local, src.as_ptr(), src.len()) };
    fence(Ordering::Release);
    bump(&p.counters.put_direct, 1);
    bump(&p.counters.put_streamed, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
}
