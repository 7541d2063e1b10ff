//! put_active: the target marked some page of the access with Active Access bits. The origin
//! reads the target's table as the IOMMU would and carries out what each page's bits say
//! (`log_append`): the bytes go into memory where W=1 (memcpy into a mapped segment, or cross-
//! memory attach into private memory), and into the target's access log where WL / WLD.

use crate::{put_cma, Proto};
use activerma_access::log_append;
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};
use activerma_mem::Lookup;

/// Returns the modelled cost of its log entries, owed after the put's wire time (the target's
/// IOMMU writes them once the data has landed): 0 with the model off or nothing logged.
pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8], lookup: &Lookup, local: *mut u8) -> Result<u64> {
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
    let (touched, owed_ns) = crate::active_origin::logged(p, rank, lookup, |l| {
        log_append::put(l, addr, src, !lookup.private, &mut write, &mut || waiter.step(&p.am, rank, "room in an access log"))
            .map(|touched| (touched, l.owed_ns.get()))
    })?;
    p.note_touched(rank, touched);
    bump(&p.counters.put_active, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(owed_ns)
}
