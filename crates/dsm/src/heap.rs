//! Each rank's DSM heap: one segment (so any rank can put into any other's copies, twins and
//! receive buffers by RMA — the paper registers its whole object heap with the NIC), carved
//! by a bump allocator. Nothing is given back: a freed region's bytes are not reused (Jackal
//! has a garbage collector; this layer leaves reuse to a later step and says so).

use activerma::{Error, Rank, RemotePtr, Result, Segment, World};
use std::sync::Mutex;

/// Every allocation starts on a cache line.
const ALIGN: usize = 64;

pub(crate) struct Heap {
    seg: Segment,
    base: usize,
    next: Mutex<usize>,
}

impl Heap {
    /// Collective: every rank's heap of `bytes`.
    pub(crate) fn new(w: &World, bytes: usize) -> Result<Heap> {
        let seg = w.alloc_segment(bytes)?;
        let base = seg.as_ptr() as usize;
        Ok(Heap { seg, base, next: Mutex::new(0) })
    }

    /// `len` bytes of this rank's heap, zeroed; returns their offset.
    pub(crate) fn alloc(&self, len: usize, what: &str) -> Result<usize> {
        let mut next = self.next.lock().unwrap();
        let off = *next;
        let end = off.checked_add(len.max(1).next_multiple_of(ALIGN)).filter(|&e| e <= self.seg.len()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "dsm: no room for {what} of {len} bytes: the heap of {} bytes has {} left (ACTIVERMA_DSM_HEAP)",
                self.seg.len(),
                self.seg.len() - off
            ))
        })?;
        *next = end;
        Ok(off)
    }

    /// The heap's bytes (every rank's is this long).
    pub(crate) fn len(&self) -> usize {
        self.seg.len()
    }

    /// The bytes allocated so far (offsets below this are in use).
    pub(crate) fn used(&self) -> usize {
        *self.next.lock().unwrap()
    }

    /// Where offset `off` of this rank's heap is in this process.
    pub(crate) fn ptr(&self, off: usize) -> *mut u8 {
        (self.base + off) as *mut u8
    }

    /// Offset `off` of `rank`'s heap, for RMA.
    pub(crate) fn remote(&self, rank: Rank, off: usize) -> RemotePtr {
        self.seg.remote(rank, off)
    }

    /// This rank's bytes `off..off + len`.
    ///
    /// # Safety
    /// `off..off + len` must lie in an allocation of this heap; others may write it (diffs,
    /// updates, replies) as the protocols allow.
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        std::slice::from_raw_parts(self.ptr(off), len)
    }

    /// As `bytes`, to write.
    ///
    /// # Safety
    /// As `bytes`, and no other slice of these bytes may be alive.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, off: usize, len: usize) -> &mut [u8] {
        std::slice::from_raw_parts_mut(self.ptr(off), len)
    }
}
