//! The group pool: segment memory for allocations over part of the job.
//!
//! activerma's segments are collective over the whole job, but ARMCI_Malloc_group is collective
//! over a group only. So ARMCI_Init (collective over the job) sets aside one segment of
//! ACTIVERMA_ARMCI_GROUP_POOL bytes per rank, and each member of a group allocation carves its
//! block out of its own part of it, alone; group_memory.rs exchanges the addresses among the
//! members. The blocks are then segment memory like ARMCI_Malloc's: transfers and atomics to
//! them are one-sided, and ranks of the owner's node address them directly (Global Arrays
//! loads and stores through any same-node block, group arrays included).
//!
//! ```text
//! setup (ARMCI_Init, collective): pool = alloc_segment(POOL) unless POOL = 0
//! take(bytes): a run of whole pages of my part (first fit: offset-allocator), zeroed
//!              (a page given back and taken again holds the old bytes); None when full
//! drop of the block: the pages go back
//! ```

use crate::errors::R;
use crate::state::rt;
use activerma::{Segment, World};
use offset_allocator::{Allocation, Allocator};
use std::sync::{Mutex, OnceLock};

/// Blocks are whole pages: the unit the allocator counts in.
const PAGE: usize = 4096;

struct Pool {
    seg: Segment,
    pages: Mutex<Allocator>,
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// Collective, at ARMCI_Init: the pool, unless the setting is 0.
pub(crate) fn setup(w: &World) -> R {
    let bytes = w.config().get_u64(activerma::settings::ARMCI_GROUP_POOL).map_err(rt)? as usize;
    let pages = u32::try_from(bytes / PAGE).map_err(|_| format!("ACTIVERMA_ARMCI_GROUP_POOL = {bytes} is too large (at most 16 TiB)"))?;
    if pages == 0 {
        return Ok(());
    }
    // Unzeroed: `take` clears each block as it hands it out, so the pool's pages take memory
    // only as groups use them (on every conduit; zeroing 128 MiB here cost each rank ~0.1 s
    // of ARMCI_Init and 128 MiB of resident memory).
    let seg = w.alloc_segment_unzeroed(pages as usize * PAGE).map_err(|e| {
        format!("setting aside ACTIVERMA_ARMCI_GROUP_POOL = {bytes} bytes of the segment heap for group allocations: {e} (lower it, or raise ACTIVERMA_SEGMENT_SIZE)")
    })?;
    let _ = POOL.set(Pool { seg, pages: Mutex::new(Allocator::new(pages)) });
    Ok(())
}

/// Whether group allocations come from the pool in this run.
pub(crate) fn enabled() -> bool {
    POOL.get().is_some()
}

/// The pool's size per rank, for messages.
pub(crate) fn bytes() -> usize {
    POOL.get().map_or(0, |p| p.seg.len())
}

/// A block of this rank's part of the pool; its pages go back when it is dropped.
pub(crate) struct PoolBlock {
    pub addr: usize,
    allocation: Allocation,
}

impl Drop for PoolBlock {
    fn drop(&mut self) {
        if let Some(p) = POOL.get() {
            crate::state::lock(&p.pages).free(self.allocation);
        }
    }
}

/// A zeroed block of at least `bytes` (> 0) bytes of this rank's part of the pool; None when
/// there is no pool or no run of free pages that long.
pub(crate) fn take(bytes: usize) -> Option<PoolBlock> {
    let p = POOL.get()?;
    let pages = u32::try_from(bytes.div_ceil(PAGE)).ok()?;
    let allocation = crate::state::lock(&p.pages).allocate(pages)?;
    let len = pages as usize * PAGE;
    let addr = p.seg.as_ptr() as usize + allocation.offset as usize * PAGE;
    // SAFETY: these pages of our own segment are ours alone until the block is dropped; a
    // block's memory starts zeroed, as a fresh mapping would.
    unsafe { std::ptr::write_bytes(addr as *mut u8, 0, len) };
    Some(PoolBlock { addr, allocation })
}
