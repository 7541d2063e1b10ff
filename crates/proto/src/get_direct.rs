//! get_direct: copy straight out of the target's segment mapped in this process.

use crate::Proto;
use activerma_core::counters::bump;
use std::sync::atomic::{fence, Ordering};

#[inline]
pub(crate) fn run(p: &Proto, local: *mut u8, dst: &mut [u8]) {
    fence(Ordering::Acquire);
    // SAFETY: `local` was translated from a checked segment range of dst.len() bytes.
    unsafe { activerma_core::copy::copy_bytes(local, dst.as_mut_ptr(), dst.len()) };
    bump(&p.counters.get_direct, 1);
    bump(&p.counters.bytes_got, dst.len() as u64);
}
