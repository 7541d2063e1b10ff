//! get_cma: one process_vm_readv out of the target's exposed private memory.

use crate::Proto;
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    copy_out(p, rank, addr, dst)?;
    bump(&p.counters.get_cma, 1);
    bump(&p.counters.bytes_got, dst.len() as u64);
    Ok(())
}

/// Copies `rank`'s exposed private memory at `addr` into `dst` (checked by the caller).
pub(crate) fn copy_out(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    if rank == p.conduit.rank() {
        // SAFETY: the table says [addr, addr+len) is memory we exposed readable.
        unsafe { activerma_core::copy::copy_bytes(addr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    } else {
        p.conduit.cma_read(rank, addr, dst)
    }
}
