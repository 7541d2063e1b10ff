//! What the registration strategies' slow paths share once they have had the target register
//! a range (rendezvous, firehose): look at the table again and move the data zero-copy, or,
//! when the target could not register it, bounce it through the target.

use crate::select::{Choice, Pass, Protocol};
use crate::{get_active, get_am, get_cma, put_active, put_am, put_cma, Proto};
use activerma_core::{Rank, Result};
use activerma_mem::AccessKind;

/// Moves a range given the choice to move it zero-copy with, or `None` to bounce it.
pub(crate) type MoveWith<'a> = dyn FnMut(Option<&Choice>) -> Result<()> + 'a;

fn zero_copy(p: Protocol) -> bool {
    matches!(p, Protocol::PutCma | Protocol::GetCma | Protocol::PutActive | Protocol::GetActive)
}

/// After the target registered `[addr, addr+len)`: if the table now allows a zero-copy move,
/// runs `run(Some(choice))` and returns its result; None when a page is unregistered again
/// (the range was unexposed and exposed anew meanwhile: the caller retries or bounces).
pub(crate) fn try_zero_copy(p: &Proto, rank: Rank, addr: usize, len: usize, kind: AccessKind, run: &mut MoveWith) -> Option<Result<()>> {
    match p.choose_for(rank, addr, len, kind, Pass::Registered) {
        Ok(c) if zero_copy(c.protocol) => Some(run(Some(&c))),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Moves a put zero-copy with the choice (writing and/or logging on Active Access pages), or
/// bounces it (`None`) through the target's active-message buffers.
pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8], c: Option<&Choice>) -> Result<()> {
    match c {
        // The caller books the wire time after this, so the entries' modelled time (waited for
        // in the append) already comes before the completion: nothing owed.
        Some(c) if c.protocol == Protocol::PutActive => put_active::run(p, rank, addr, src, c.lookup(), c.local).map(|_| ()),
        Some(_) => put_cma::run(p, rank, addr, src),
        None => {
            p.note_bounced(rank);
            put_am::run(p, rank, addr, src)
        }
    }
}

/// The get counterpart of `put`.
pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8], c: Option<&Choice>) -> Result<()> {
    match c {
        Some(c) if c.protocol == Protocol::GetActive => get_active::run(p, rank, addr, dst, c.lookup(), c.local),
        Some(_) => get_cma::run(p, rank, addr, dst),
        None => {
            p.note_bounced(rank);
            get_am::run(p, rank, addr, dst)
        }
    }
}
