//! put_rma / get_rma / atomic_rma / accumulate: the target's segment is registered with the conduit
//! (MPI: inside the heap's allocated window) but not mapped here; the conduit's one-sided engine
//! moves the data. The origin has already checked the access against the segment map, which is
//! the same on every rank because segment allocation is collective.

use crate::{AtomicOp, Element, Proto, Protocol, Transfer};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::AccessKind;
use activerma_transport::StartedGet;

pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<()> {
    p.conduit.rma_put(rank, addr, src, complete)?;
    bump(&p.counters.put_rma, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}

pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    p.conduit.rma_get(rank, addr, dst)?;
    bump(&p.counters.get_rma, 1);
    bump(&p.counters.bytes_got, dst.len() as u64);
    Ok(())
}

/// A non-blocking get the conduit's one-sided engine carries on after the call: to a segment
/// of a rank on another host (the GetRma choice), started now, complete once the conduit's
/// `rma_test_get` said so or its `rma_wait_get` returned. Ok(None) for any other access:
/// nothing started nor counted, the caller takes the core's path.
///
/// # Safety
/// As `Conduit::rma_get_started`: `dst` (`len` bytes) is left alone until then.
pub(crate) unsafe fn get_started(p: &Proto, rank: Rank, addr: usize, dst: *mut u8, len: usize) -> Result<Option<StartedGet>> {
    if !moved_one_sided(p, rank, addr, len, AccessKind::Get)? {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let Some(started) = (unsafe { p.conduit.rma_get_started(rank, addr, dst, len)? }) else {
        return Ok(None);
    };
    bump(&p.counters.get_rma, 1);
    bump(&p.counters.bytes_got, len as u64);
    Ok(Some(started))
}

/// The put beside `get_started`: `src` may be reused on return (the conduit completed it locally
/// or put it from a copy); complete at the target once the conduit's `rma_flush` of `rank`
/// returned. Ok(false): not such an access, nothing moved.
pub(crate) fn put_started(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<bool> {
    if !moved_one_sided(p, rank, addr, src.len(), AccessKind::Put)? {
        return Ok(false);
    }
    put(p, rank, addr, src, false)?;
    Ok(true)
}

/// Whether this access is the conduit's one-sided engine's (PutRma / GetRma: a segment of a
/// rank on another host, nothing marked there). A rank of this host says no at once: the
/// core's paths move its data at issue.
fn moved_one_sided(p: &Proto, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<bool> {
    if p.tables[rank].is_some() || len == 0 {
        return Ok(false);
    }
    let one_sided = if kind == AccessKind::Put { Protocol::PutRma } else { Protocol::GetRma };
    Ok(p.choose(rank, addr, len, kind)?.protocol == one_sided)
}

pub(crate) fn atomic(p: &Proto, rank: Rank, addr: usize, op: AtomicOp, width: activerma_transport::Width) -> Result<u64> {
    let old = p.conduit.rma_atomic(rank, addr, op, width)?;
    bump(&p.counters.atomic_rma, 1);
    Ok(old)
}

/// See `Proto::accumulate`. Each piece is checked as an atomic (readable and writable); only
/// plain segment memory is added by the conduit, so that every origin adds to a given element
/// the same way (the conduit's adds are atomic only among themselves).
pub(crate) fn accumulate(p: &Proto, rank: Rank, elem: Element, pieces: &[(usize, usize)], packed: &[u8]) -> Result<bool> {
    p.check_rank(rank)?;
    let total = pieces.iter().try_fold(0usize, |sum, &(_, len)| {
        if len.is_multiple_of(elem.bytes()) {
            Ok(sum + len)
        } else {
            Err(Error::InvalidArgument(format!("an accumulate piece of {len} bytes is not whole {}-byte elements", elem.bytes())))
        }
    })?;
    if total != packed.len() {
        return Err(Error::InvalidArgument(format!("an accumulate of {} bytes into pieces of {total} bytes", packed.len())));
    }
    if !p.conduit.rma_accumulates() {
        return Ok(false);
    }
    if total == 0 {
        return Ok(true);
    }
    let mut choices = Vec::with_capacity(pieces.len());
    for &(addr, len) in pieces.iter().filter(|piece| piece.1 > 0) {
        let choice = p.choose(rank, addr, len, AccessKind::Atomic)?;
        if !matches!(choice.protocol, Protocol::AtomicDirect | Protocol::AtomicRma) {
            return Ok(false);
        }
        choices.push(choice);
    }
    p.conduit.rma_accumulate(rank, elem, pieces, packed)?;
    drop(choices);
    bump(&p.counters.accumulate_rma, 1);
    bump(&p.counters.bytes_put, total as u64);
    p.count(Transfer::ZeroCopy, total);
    Ok(true)
}
