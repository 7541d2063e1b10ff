//! atomic_active: a writing atomic on a segment page the target marked to log puts without
//! their data (W, WL, not WLD; incremental checkpoints track remote writes so). The paper
//! defines no logged atomics; an atomic writes its word, so it is logged as a put of that word
//! would be — address and length, in the order of a direct put (claim the entry, run the
//! atomic, publish), so a consumer that sees the entry sees the new value.
//!
//! ```text
//! origin, segment mapped here:  log_append::put(word, stand-in bytes, direct,
//!                                               write = the CPU atomic)        (this file)
//! target's CPU (private memory, marked ranges of other hosts, ACTIVERMA_ATOMICS=target):
//!                               the same, in atomic_am's handler (`run_logged`)
//! ```
//! The stand-in bytes never reach the log (no WLD) nor memory (the `write` runs the atomic).

use crate::{active_origin, AtomicOp, Proto};
use activerma_access::log_append::{self, Logged};
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};
use activerma_mem::Lookup;
use activerma_transport::Width;

/// The atomic at `local` (our mapping of `rank`'s `addr`), logged at `rank`.
pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, op: AtomicOp, width: Width, lookup: &Lookup, local: *mut u8) -> Result<u64> {
    let mut waiter = activerma_am::Waiter::default();
    let (old, touched) = active_origin::logged(p, rank, lookup, |l| {
        // SAFETY: `local` maps the checked, aligned word of `width` bytes.
        logged_write(l, addr, width, true, |_| unsafe { activerma_transport::apply_atomic_at(local, op, width) }, &mut || {
            waiter.step(&p.am, rank, "room in an access log")
        })
    })?;
    p.note_touched(rank, touched);
    bump(&p.counters.atomic_active, 1);
    Ok(old)
}

/// Runs `atomic` (given the word's address) as the write of a logged put of the word at
/// `addr`: the old value and the log slots appended to. `direct`: as `log_append::put`'s.
pub(crate) fn logged_write(
    l: &Logged,
    addr: usize,
    width: Width,
    direct: bool,
    mut atomic: impl FnMut(usize) -> u64,
    wait: &mut dyn FnMut() -> Result<()>,
) -> Result<(u64, u64)> {
    let stand_in = [0u8; 8];
    let mut old = None;
    let mut write = |at: usize, _: &[u8]| -> Result<()> {
        old = Some(atomic(at));
        Ok(())
    };
    let touched = log_append::put(l, addr, &stand_in[..width.bytes()], direct, &mut write, wait)?;
    let old = old.expect("a W page: the write ran (the table's check allows atomics only on W, WL pages)");
    Ok((old, touched))
}
