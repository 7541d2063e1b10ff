//! put_rma / get_rma / atomic_rma: the target's segment is registered with the conduit
//! (MPI: inside the heap's allocated window) but not mapped here; the conduit's one-sided engine
//! moves the data. The origin has already checked the access against the segment map, which is
//! the same on every rank because segment allocation is collective.

use crate::{AtomicOp, Proto};
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};

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

pub(crate) fn atomic(p: &Proto, rank: Rank, addr: usize, op: AtomicOp, width: activerma_transport::Width) -> Result<u64> {
    let old = p.conduit.rma_atomic(rank, addr, op, width)?;
    bump(&p.counters.atomic_rma, 1);
    Ok(old)
}
