//! get_active: the target marked some page of the access RL / RLD. The origin reads the bytes
//! (memcpy from a mapped segment, or cross-memory attach from private memory), then logs the
//! access — with a copy of the returned bytes where RLD — into the target's access log.

use crate::{get_cma, Proto};
use activerma_access::log_append;
use activerma_core::counters::bump;
use activerma_core::{Rank, Result};
use activerma_mem::Lookup;

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8], lookup: &Lookup, local: *mut u8) -> Result<()> {
    if lookup.private {
        get_cma::copy_out(p, rank, addr, dst)?;
    } else {
        // SAFETY: `local` maps the checked segment range of dst.len() bytes.
        unsafe { activerma_core::copy::copy_bytes(local, dst.as_mut_ptr(), dst.len()) };
    }
    let mut waiter = activerma_am::Waiter::default();
    let touched = crate::active_origin::logged(p, rank, lookup, |l| {
        log_append::get(l, addr, dst, &mut || waiter.step(&p.am, rank, "room in an access log"))
    })?;
    p.note_touched(rank, touched);
    bump(&p.counters.get_active, 1);
    bump(&p.counters.bytes_got, dst.len() as u64);
    Ok(())
}
