//! A rank's table of its copies: for every region it touched, where its copy lies in its heap,
//! the copy's state, its twin, and a borrow flag for the views handed out. Indexed by home
//! and id, so an access check that hits costs two indexed loads and a compare.
//!
//! ```text
//! state    Home     this rank is the home (invalidation protocols): the master, written in
//!                   place, always valid
//!          Invalid  no valid data: the next access fetches it from the home
//!          Valid    readable (invalidation: until the next acquire; update: for good)
//!          Dirty    written in this interval: the twin holds the copy as it was before
//!          Mapped   the page-granular mode (mirrors.rs): the region is seen through the
//!                   mirror of its home's heap (`off` is its offset there); the MMU, not this
//!                   state, says whether its pages are here and which were written
//! ```

use crate::global_ref::GlobalRef;
use std::cell::Cell;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Home,
    Invalid,
    Valid,
    Dirty,
    Mapped,
}

pub(crate) struct Copy {
    pub off: usize,
    pub len: usize,
    pub tag: u16,
    pub state: State,
    /// Where the twin lies in the heap: invalidation protocols make it at the first write
    /// (and keep it for reuse); update protocols keep one with every copy, equal to the copy
    /// but for this rank's unpublished writes.
    pub twin: Option<usize>,
    /// update-in-place: the region's lock word and copy set at its home.
    pub meta: Option<usize>,
    /// Written by this rank since the last barrier (it is in the rank's write notices).
    pub noted: bool,
    /// Views alive: n > 0 readers, -1 one writer. Boxed so that its address is stable: views
    /// point at it (a copy taken out of the table leaves it in the graveyard until no view
    /// can be alive).
    pub borrow: Box<Cell<isize>>,
}

impl Copy {
    pub(crate) fn new(off: usize, len: usize, tag: u16, state: State) -> Copy {
        Copy { off, len, tag, state, twin: None, meta: None, noted: false, borrow: Box::default() }
    }
}

#[derive(Default)]
pub(crate) struct Cache {
    copies: Vec<Vec<Option<Copy>>>,
    /// Copies of other homes in state Valid or Dirty: what an acquire invalidates.
    pub valid: Vec<GlobalRef>,
    /// Copies written in this interval: what a release flushes.
    pub dirty: Vec<GlobalRef>,
    /// Borrow flags of copies taken out of the table while views may point at them; emptied
    /// at synchronization, when no view is alive. Boxes: a view points at the flag itself,
    /// which must not move when the vector grows.
    #[allow(clippy::vec_box)]
    pub graveyard: Vec<Box<Cell<isize>>>,
}

impl Cache {
    pub(crate) fn new(ranks: usize) -> Cache {
        Cache { copies: (0..ranks).map(|_| Vec::new()).collect(), ..Cache::default() }
    }

    #[inline]
    pub(crate) fn get(&self, r: GlobalRef) -> Option<&Copy> {
        self.copies.get(r.home())?.get(r.id() as usize)?.as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, r: GlobalRef) -> Option<&mut Copy> {
        self.copies.get_mut(r.home())?.get_mut(r.id() as usize)?.as_mut()
    }

    pub(crate) fn insert(&mut self, r: GlobalRef, c: Copy) -> &mut Copy {
        let row = &mut self.copies[r.home()];
        let i = r.id() as usize;
        if row.len() <= i {
            row.resize_with(i + 1, || None);
        }
        if let Some(old) = row[i].replace(c) {
            self.graveyard.push(old.borrow);
        }
        row[i].as_mut().unwrap()
    }

    pub(crate) fn remove(&mut self, r: GlobalRef) {
        if let Some(old) = self.copies.get_mut(r.home()).and_then(|row| row.get_mut(r.id() as usize)).and_then(Option::take) {
            self.graveyard.push(old.borrow);
        }
    }
}
