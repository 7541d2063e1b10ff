//! put_active: the target marked some page of the access with Active Access bits. The origin
//! reads the target's table as the IOMMU would and carries out what each page's bits say
//! (`log_append`): the bytes go into memory where W=1 (memcpy into a mapped segment, or cross-
//! memory attach into private memory), and into the target's access log where WL / WLD.

use crate::{put_cma, Proto};
use activerma_access::log_append;
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};
use activerma_mem::Lookup;

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8], lookup: &Lookup, local: *mut u8) -> Result<()> {
    let mut write = |at: usize, bytes: &[u8]| -> Result<()> {
        if lookup.private {
            put_cma::copy_in(p, rank, at, bytes)
        } else {
            // SAFETY: `local` maps `addr` of the checked segment range; `at` lies inside it.
            unsafe { activerma_core::copy::copy_bytes(bytes.as_ptr(), local.add(at - addr), bytes.len()) };
            Ok(())
        }
    };
    let mut waiter = activerma_am::Waiter::default();
    let touched = crate::active_origin::logged(p, rank, lookup, |l| {
        log_append::put(l, addr, src, !lookup.private, &mut write, &mut || waiter.step(&p.am, rank, "room in an access log"))
    })?;
    p.note_touched(rank, touched);
    bump(&p.counters.put_active, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}
