//! Segments: collective allocations from every rank's symmetric heap, in shared memory.

use crate::{RemotePtr, World};
use activerma_core::{Rank, Result};

/// A collectively allocated block, the same size on every rank. Remote ranks reach it with
/// plain loads and stores. Freed by `free()` (collective); otherwise it lives until the job ends.
pub struct Segment {
    pub(crate) world: World,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) local: *mut u8,
}

unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Segment {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Offset of this segment in every rank's symmetric heap.
    pub fn heap_offset(&self) -> usize {
        self.offset
    }
    /// This rank's copy, as a pointer (remote ranks may write it at any time).
    pub fn as_ptr(&self) -> *mut u8 {
        self.local
    }
    /// Address of byte `offset` of `rank`'s copy, in `rank`'s address space.
    pub fn addr_on(&self, rank: Rank) -> usize {
        self.world.heap_base(rank) + self.offset
    }
    /// Remote pointer to byte `offset` of `rank`'s copy.
    pub fn remote(&self, rank: Rank, offset: usize) -> RemotePtr {
        RemotePtr::new(rank, self.addr_on(rank) + offset)
    }
    /// Copies out of this rank's copy.
    pub fn read_local(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.len, "read past the segment");
        // SAFETY: inside our segment; concurrent remote writes are the program's business.
        unsafe { std::ptr::copy(self.local.add(offset), dst.as_mut_ptr(), dst.len()) }
    }
    /// Copies into this rank's copy.
    pub fn write_local(&self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.len, "write past the segment");
        // SAFETY: as above.
        unsafe { std::ptr::copy(src.as_ptr(), self.local.add(offset), src.len()) }
    }
    pub fn read_u64(&self, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read_local(offset, &mut b);
        u64::from_le_bytes(b)
    }
    /// Frees the segment on every rank (collective).
    pub fn free(self) -> Result<()> {
        self.world.free_segment(self.offset, self.len)
    }
}
