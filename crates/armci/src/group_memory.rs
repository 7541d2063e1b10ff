//! Allocations over part of the job: ARMCI_Malloc_group over a group smaller than the job (or
//! ARMCI_Malloc when such a group is the default), with the members' collectives of
//! point_to_point.rs. A member's block comes from its part of the group pool (group_pool.rs:
//! segment memory, so one-sided and addressable by the ranks of its node); with the pool off
//! (ACTIVERMA_ARMCI_GROUP_POOL=0) it is private memory the member maps and exposes (activerma
//! reaches it by cross-memory attach on one host; atomics on it are run by its owner's progress
//! engine).
//!
//! ```text
//! malloc(members, bytes):
//!     block = bytes > 0 ? (pool on ? group_pool::take(round_up(bytes, 8)) or FULL
//!                                  : mmap(page_ceil(round_up(bytes, 8))) exposed read-write)
//!                       : none
//!     all = group_allgather(members, (bytes, block address or FULL, my next group number))
//!     some member FULL -> every member fails, naming it (its block goes back)
//!     number = max of the members' next numbers; every member's next = number + 1
//!     registry += {seq = GROUP | number, bases/sizes of the members (0 elsewhere), block}
//! free(members, ptr):
//!     mine = ptr ? number of my block at ptr : NONE; all = group_allgather(members, mine)
//!     the one number named (all must agree); drop the block (pool pages back, or unexpose
//!     and unmap)
//! ```

use crate::errors::R;
use crate::group_pool::{self, PoolBlock};
use crate::point_to_point::group_allgather;
use crate::state::{nonneg, registry, registry_mut, rt, world, Alloc};
use activerma::{Exposed, Prot};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Set in the sequence numbers of group allocations, so they never equal the job's own.
const GROUP_SEQ: u64 = 1 << 63;
/// The block address a member sends when its block did not fit in its pool.
const FULL: u64 = u64::MAX;
/// The next group allocation number this rank would propose.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// This rank's part of a group allocation.
pub(crate) struct GroupBlock {
    pub members: Vec<c_int>,
    /// Pages of the group pool (None when this rank asked for 0 bytes or the pool is off).
    pooled: Option<PoolBlock>,
    /// Without the pool: the exposure of the mapping (None when this rank asked for 0 bytes);
    /// dropped first.
    exposed: Option<Exposed<'static>>,
    /// Without the pool: the mapping, address and length (0, 0 when none).
    map: (usize, usize),
}

impl GroupBlock {
    /// Where this rank's block starts (0: none).
    fn addr(&self) -> usize {
        self.pooled.as_ref().map_or(self.map.0, |b| b.addr)
    }
}

impl Drop for GroupBlock {
    fn drop(&mut self) {
        drop(self.exposed.take());
        if self.map.1 > 0 {
            // SAFETY: our own mapping, no longer exposed, and no ARMCI call uses it any more.
            unsafe { libc::munmap(self.map.0 as *mut c_void, self.map.1) };
        }
    }
}

/// Collective over `members` (job ranks in group order): every member's base (0 outside the
/// group and for members that asked for 0 bytes), by job rank.
pub(crate) fn malloc(members: &[c_int], bytes: libc::c_long) -> R<Vec<usize>> {
    let w = world()?;
    let mine = nonneg(bytes, "bytes")?;
    let mut block = GroupBlock { members: members.to_vec(), pooled: None, exposed: None, map: (0, 0) };
    // Rounded up to 8 bytes, as the job's allocations are (a 32-bit Rmw works on the word).
    let mut full = false;
    if mine > 0 && group_pool::enabled() {
        block.pooled = group_pool::take(mine.div_ceil(8) * 8);
        full = block.pooled.is_none();
    } else if mine > 0 {
        let len = (mine.div_ceil(8) * 8).next_multiple_of(page_size());
        // SAFETY: a fresh anonymous mapping of ours.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(format!("out of memory mapping {len} bytes for a group allocation"));
        }
        block.map = (p as usize, len);
        // SAFETY: the mapping stays until the block is dropped, after the exposure.
        block.exposed = Some(unsafe { w.expose_raw(p as *mut u8, len, Prot::ReadWrite) }.map_err(rt)?);
    }
    let job: Vec<usize> = members.iter().map(|&m| m as usize).collect();
    let proposal = NEXT.load(Ordering::Relaxed);
    // Every member takes part in the exchange even when its block did not fit, so that all of
    // them fail together instead of waiting for it.
    let words = [mine as u64, if full { FULL } else { block.addr() as u64 }, proposal];
    let all = group_allgather(&job, &words.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())?;
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    if let Some((&m, b)) = job.iter().zip(&all).find(|(_, b)| word(b, 1) == FULL) {
        return Err(format!(
            "rank {m}'s block of {} bytes does not fit in what is left of its group pool (ACTIVERMA_ARMCI_GROUP_POOL = {} bytes per rank): raise the setting",
            word(b, 0),
            group_pool::bytes()
        ));
    }
    let number = all.iter().map(|b| word(b, 2)).max().unwrap_or(proposal);
    NEXT.store(number + 1, Ordering::Relaxed);
    let (mut bases, mut sizes) = (vec![0usize; w.size()], vec![0usize; w.size()]);
    for (&m, b) in job.iter().zip(&all) {
        sizes[m] = word(b, 0) as usize;
        bases[m] = word(b, 1) as usize;
    }
    registry_mut().allocs.push(Alloc { seq: GROUP_SEQ | number, seg: None, bases: bases.clone(), sizes, group: Some(block) });
    Ok(bases)
}

/// The members of the group allocation whose block on this rank starts at `ptr` (None: not
/// one, or NULL).
pub(crate) fn members_of_block(ptr: *mut c_void) -> R<Option<Vec<c_int>>> {
    let me = world()?.rank();
    Ok(registry()
        .allocs
        .iter()
        .find(|a| !ptr.is_null() && a.sizes[me] > 0 && a.bases[me] == ptr as usize)
        .and_then(|a| a.group.as_ref().map(|g| g.members.clone())))
}

/// Collective over `members`: frees the group allocation whose block here is `ptr` (NULL on a
/// member that asked for 0 bytes).
pub(crate) fn free(members: &[c_int], ptr: *mut c_void) -> R {
    let me = world()?.rank();
    let ours = |a: &Alloc| a.group.as_ref().is_some_and(|g| g.members == members);
    let mine = if ptr.is_null() {
        u64::MAX
    } else {
        registry()
            .allocs
            .iter()
            .find(|a| ours(a) && a.sizes[me] > 0 && a.bases[me] == ptr as usize)
            .map(|a| a.seq)
            .ok_or_else(|| format!("argument ptr = {ptr:p} is not the base of a group allocation of this rank over this group"))?
    };
    let job: Vec<usize> = members.iter().map(|&m| m as usize).collect();
    let all = group_allgather(&job, &mine.to_le_bytes())?;
    let named: Vec<u64> = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap())).filter(|&s| s != u64::MAX).collect();
    let seq = match named.first() {
        Some(&s) => {
            if let Some(o) = named.iter().find(|&&o| o != s) {
                return Err(format!(
                    "the members free different allocations (numbers {} and {}): the free is collective",
                    s & !GROUP_SEQ,
                    o & !GROUP_SEQ
                ));
            }
            s
        }
        // Every member passed NULL: the oldest allocation of this group where all got 0 bytes.
        None => match registry()
            .allocs
            .iter()
            .find(|a| ours(a) && a.group.as_ref().is_some_and(|g| g.addr() == 0) && members.iter().all(|&m| a.sizes[m as usize] == 0))
        {
            Some(a) => a.seq,
            None => return Ok(()),
        },
    };
    let mut reg = registry_mut();
    let i = reg
        .allocs
        .iter()
        .position(|a| a.seq == seq)
        .ok_or_else(|| format!("group allocation number {} is not live on this rank", seq & !GROUP_SEQ))?;
    if ptr.is_null() && reg.allocs[i].sizes[me] > 0 {
        return Err(format!(
            "argument ptr is NULL but this rank allocated {} bytes in the allocation the others free",
            reg.allocs[i].sizes[me]
        ));
    }
    drop(reg.allocs.remove(i)); // gives this rank's block back (pool pages, or unexpose and unmap)
    Ok(())
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}
