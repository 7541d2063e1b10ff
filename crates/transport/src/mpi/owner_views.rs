//! A node's heaps at the same addresses in every process of the node.
//!
//! MPI's shared window maps the node's heaps wherever MPI chooses in each process, so an
//! address rank q hands out (an ARMCI_Malloc pointer) means nothing in rank p even when p maps
//! q's memory: ARMCI had to report every rank as an SMP domain of its own, and Global Arrays
//! could not load and store its node's data directly. The smp conduit has no such problem: it
//! maps every heap at one hint address in every process (`mapping::HEAP_HINT`). Here the same
//! is done on top of MPI's window, without copying or giving MPI other memory:
//!
//! ```text
//! every rank of the job (collective, also where the node shares nothing):
//!     ok = reserve [HEAP_HINT, + node ranks * heap) as PROT_NONE (MAP_FIXED_NOREPLACE)
//!     keep going only if every rank of the node reserved it          (allgather)
//!     for node rank i: mremap(MPI's mapping of its heap, old size 0 -> a second mapping of
//!                      the same shared pages, fixed at HEAP_HINT + i * heap)
//!     keep them only if every rank of the node made all of them      (allgather)
//! ```
//!
//! The heaps' addresses are then the views' in every process of the node: what each rank
//! hands out, what the others load and store through (`heap_window`). MPI keeps using its own
//! mapping for its windows: displacements are offsets into the heap, the same in both. Where a
//! step fails on any rank of the node (the range is taken, an MPI whose shared memory is not a
//! shared mapping), the node goes on as before, its ranks separate domains.

use super::ffi::Mpi;
use crate::mapping::HEAP_HINT;
use activerma_core::{Rank, Result};

/// The views of this node's heaps: `HEAP_HINT + i * heap` for the node's i-th rank. Unmapped
/// on drop (MPI's own mappings are untouched).
pub(super) struct OwnerViews {
    base: usize,
    len: usize,
}

impl OwnerViews {
    /// Where the node's i-th rank's heap is seen in every process of the node.
    pub fn heap(&self, i: usize, heap_len: usize) -> usize {
        self.base + i * heap_len
    }

    /// Reserves [HEAP_HINT, + len) without memory behind it, if nothing is mapped there: the
    /// only way to make OwnerViews, so that only a range we hold is ever unmapped on drop.
    fn reserve(len: usize) -> Option<OwnerViews> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE;
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe { libc::mmap(HEAP_HINT as *mut _, len, libc::PROT_NONE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return None;
        }
        if p as usize != HEAP_HINT {
            // SAFETY: a mapping the kernel placed elsewhere (old kernels take the flag as a hint).
            unsafe { libc::munmap(p, len) };
            return None;
        }
        Some(OwnerViews { base: HEAP_HINT, len })
    }
}

impl Drop for OwnerViews {
    fn drop(&mut self) {
        // SAFETY: the range is ours (reserved, then mapped over by mremap).
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}

/// Collective over the job: views of this node's heaps at the same addresses in every process
/// of the node, or None (the node keeps MPI's addresses). `heaps`: where this process maps
/// each of the node's ranks' heaps (in node order; empty when this rank's node shares no
/// memory); `node`: the ranks of this node; `heap_len`: bytes of a heap (whole pages).
pub(super) fn map(mpi: &mut Mpi, node: &[Rank], heaps: &[usize], heap_len: usize, verbose: bool) -> Result<Option<OwnerViews>> {
    let page = activerma_core::page::page_size();
    let wanted = !heaps.is_empty() && heap_len.is_multiple_of(page) && heaps.iter().all(|h| h.is_multiple_of(page));
    let total = heap_len.saturating_mul(heaps.len());
    // Made only by a reservation that succeeded: dropping views unmaps the whole range, so a
    // value built while the range belongs to someone else (MPI's own window, when its random
    // address falls here) would unmap their memory.
    let reservation = if wanted && total < HEAP_HINT { OwnerViews::reserve(total) } else { None };
    let reserved = reservation.is_some();
    if verbose && !heaps.is_empty() && !reserved {
        eprintln!(
            "activerma: rank {}: no views of the node's heaps at their owners' addresses: {}",
            mpi.rank(),
            if wanted {
                format!("{total} bytes at {HEAP_HINT:#x} are taken")
            } else {
                format!("heaps not on whole pages ({heap_len} bytes at {heaps:x?})")
            }
        );
    }
    // Both rounds are collectives every rank takes part in, whatever it found: a rank outside
    // a shared node answers yes, and only the node's own answers decide for it. Dropping the
    // views unmaps the reservation and whatever was mapped over it.
    let everyone_reserved = node_agrees(mpi, node, reserved || heaps.is_empty())?;
    let Some(views) = reservation.filter(|_| everyone_reserved) else {
        node_agrees(mpi, node, true)?;
        return Ok(None);
    };
    let mapped = heaps.iter().enumerate().all(|(i, &h)| {
        let at = views.heap(i, heap_len);
        // SAFETY: `h` is MPI's shared mapping of a heap of `heap_len` bytes; old size 0 makes a
        // second mapping of the same pages (shared mappings only; EINVAL otherwise), placed
        // over our own reservation (MREMAP_FIXED replaces what is there, which is ours). The
        // system call itself, not libc's mremap: UCX's memory hooks (libucm, which MPICH links)
        // patch that symbol to watch for remapped registrations, and answer an old size of 0
        // with a null pointer. Nothing they watch changes here: the source stays mapped, the
        // target was our reservation (the views' munmap on drop goes through the hooks).
        let p = unsafe {
            libc::syscall(
                libc::SYS_mremap,
                h as *mut libc::c_void,
                0usize,
                heap_len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                at as *mut libc::c_void,
            )
        };
        if p as usize != at && verbose {
            let e = std::io::Error::last_os_error();
            eprintln!("activerma: rank {}: no view of the heap at {h:#x} at {at:#x} (mremap: {e})", mpi.rank());
        }
        p as usize == at
    });
    Ok(node_agrees(mpi, node, mapped)?.then_some(views))
}

/// Whether every rank of `node` says yes (collective over the job).
fn node_agrees(mpi: &mut Mpi, node: &[Rank], mine: bool) -> Result<bool> {
    let all = mpi.allgather_u64(mine as u64)?;
    Ok(node.iter().all(|&r| all[r] != 0))
}
