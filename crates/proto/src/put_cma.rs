//! put_cma: the target exposed private memory (heap, stack, anything it owns); the kernel
//! copies into it with one process_vm_writev — the on-host analogue of a NIC writing to
//! unregistered user memory. Our own memory is copied directly.

use crate::Proto;
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    copy_in(p, rank, addr, src)?;
    bump(&p.counters.put_cma, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}

/// Copies `src` into `rank`'s exposed private memory at `addr` (checked by the caller).
pub(crate) fn copy_in(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    if rank == p.conduit.rank() {
        // SAFETY: the table says [addr, addr+len) is memory we exposed read-write.
        unsafe { activerma_core::copy::copy_bytes(src.as_ptr(), addr as *mut u8, src.len()) };
        Ok(())
    } else {
        p.conduit.cma_write(rank, addr, src)
    }
}
