//! Views of a region's local copy, handed out by the access checks. They borrow the `Dsm`, so
//! none outlives the next synchronization (lock, unlock, wait, barrier take `&mut Dsm`), and
//! they follow `RefCell`'s rule per region: many readers or one writer.

use bytemuck::Pod;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use activerma::{Error, Result};

pub struct ReadView<'a> {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    pub(crate) borrow: *const Cell<isize>,
    pub(crate) _dsm: PhantomData<&'a ()>,
}

pub struct WriteView<'a> {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) borrow: *const Cell<isize>,
    pub(crate) _dsm: PhantomData<&'a ()>,
}

fn element<T: Pod>(bytes: &[u8], i: usize) -> Result<&[u8]> {
    let size = std::mem::size_of::<T>();
    i.checked_mul(size)
        .and_then(|at| bytes.get(at..at + size))
        .ok_or_else(|| Error::InvalidArgument(format!("dsm: element {i} of {} bytes is outside a region of {} bytes", size, bytes.len())))
}

impl ReadView<'_> {
    /// Element `i` of the region read as an array of `T`.
    pub fn get<T: Pod>(&self, i: usize) -> Result<T> {
        Ok(bytemuck::pod_read_unaligned(element::<T>(self, i)?))
    }
}

impl WriteView<'_> {
    pub fn get<T: Pod>(&self, i: usize) -> Result<T> {
        Ok(bytemuck::pod_read_unaligned(element::<T>(self, i)?))
    }

    /// Sets element `i` of the region seen as an array of `T`.
    pub fn set<T: Pod>(&mut self, i: usize, value: T) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let len = self.len;
        let at = i
            .checked_mul(size)
            .filter(|at| at + size <= len)
            .ok_or_else(|| Error::InvalidArgument(format!("dsm: element {i} of {size} bytes is outside a region of {len} bytes")))?;
        self[at..at + size].copy_from_slice(bytemuck::bytes_of(&value));
        Ok(())
    }
}

impl Deref for ReadView<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the copy lies in the rank's heap for as long as the Dsm lives; the borrow
        // flag keeps writers of this region away while the view lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Deref for WriteView<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: as ReadView's; this view is the region's only one.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for WriteView<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for ReadView<'_> {
    fn drop(&mut self) {
        // SAFETY: the flag outlives every view of its copy (cache.rs: the graveyard).
        let flag = unsafe { &*self.borrow };
        flag.set(flag.get() - 1);
    }
}

impl Drop for WriteView<'_> {
    fn drop(&mut self) {
        // SAFETY: as ReadView's.
        unsafe { &*self.borrow }.set(0);
    }
}
