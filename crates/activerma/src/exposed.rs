//! Private memory a rank exposes to remote access (by cross-memory attach).

use crate::{RemotePtr, World};
use activerma_mem::table::ExposureId;
use std::marker::PhantomData;

/// An exposed range of this rank's own memory; unexposed when dropped (after any remote copy
/// into or out of it has finished).
pub struct Exposed<'a> {
    pub(crate) world: World,
    pub(crate) id: Option<ExposureId>,
    pub(crate) addr: usize,
    pub(crate) len: usize,
    pub(crate) _borrow: PhantomData<&'a mut [u8]>,
}

impl Exposed<'_> {
    /// The address remote ranks use (send it to them, e.g. with `World::allgather`).
    pub fn addr(&self) -> usize {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn remote(&self, offset: usize) -> RemotePtr {
        RemotePtr::new(self.world.rank(), self.addr + offset)
    }
    /// Copies the exposed bytes out (remote ranks may be writing them).
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.len, "read past the exposed range");
        // SAFETY: inside the range we borrowed.
        unsafe { std::ptr::copy((self.addr + offset) as *const u8, dst.as_mut_ptr(), dst.len()) }
    }
    /// Withdraws the exposure now, reporting errors (drop does the same silently).
    pub fn unexpose(mut self) -> crate::Result<()> {
        match self.id.take() {
            Some(id) => self.world.unexpose_id(id, self.addr, self.len),
            None => Ok(()),
        }
    }
}

impl Drop for Exposed<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let _ = self.world.unexpose_id(id, self.addr, self.len);
        }
    }
}
