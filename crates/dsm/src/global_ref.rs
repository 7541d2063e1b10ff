//! Global references: what a program stores and sends instead of an address. A reference names
//! a region by its home rank and its id there; every rank translates it through its own table
//! to its own copy (copies have different addresses on different ranks, paper section 1).
//!
//! ```text
//! bits 63..48  home rank      (so at most 65535 ranks)
//! bits 47..32  tag            a number the home drew for the region: a forged or stale
//!                             reference fails the home's check instead of reading another region
//! bits 31..0   id             the region's index at its home
//! ```

use activerma::{Error, Rank, Result};
use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalRef(u64);

impl GlobalRef {
    /// The reference to nothing (a list's end).
    pub const NULL: GlobalRef = GlobalRef(u64::MAX);
    pub(crate) const MAX_HOME: usize = 0xFFFE;

    pub(crate) fn new(home: Rank, tag: u16, id: u32) -> GlobalRef {
        debug_assert!(home <= Self::MAX_HOME);
        GlobalRef((home as u64) << 48 | (tag as u64) << 32 | id as u64)
    }

    pub fn home(self) -> Rank {
        (self.0 >> 48) as Rank
    }

    pub(crate) fn tag(self) -> u16 {
        (self.0 >> 32) as u16
    }

    pub(crate) fn id(self) -> u32 {
        self.0 as u32
    }

    pub fn is_null(self) -> bool {
        self == GlobalRef::NULL
    }

    /// The reference as one word, to store in a region or send.
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// A reference from a stored word. Any word is accepted here; one that names no live
    /// region is refused when it is used.
    pub fn from_bits(bits: u64) -> GlobalRef {
        GlobalRef(bits)
    }

    /// The reference `k` regions further at the same home (an array's chunks).
    pub(crate) fn nth(self, k: u32) -> GlobalRef {
        GlobalRef::new(self.home(), self.tag(), self.id() + k)
    }

    /// Refuses the null reference and homes outside the job.
    pub(crate) fn check(self, size: usize) -> Result<()> {
        if self.is_null() {
            return Err(Error::InvalidArgument("dsm: the null reference names no region".into()));
        }
        if self.home() >= size {
            return Err(Error::InvalidArgument(format!("dsm: {self} names home rank {} in a job of {size} ranks", self.home())));
        }
        Ok(())
    }
}

impl fmt::Display for GlobalRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            return write!(f, "ref(null)");
        }
        write!(f, "ref(home {}, id {}, tag {:#06x})", self.home(), self.id(), self.tag())
    }
}

impl fmt::Debug for GlobalRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An array larger than a chunk: consecutive regions at one home, each `chunk` bytes (the last
/// may be shorter), fetched and flushed separately (paper: "array chunking").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ArrayRef {
    pub first: GlobalRef,
    pub len: u64,
    pub chunk: u64,
}

impl ArrayRef {
    pub fn chunks(&self) -> u64 {
        self.len.div_ceil(self.chunk).max(1)
    }

    /// The region holding chunk `k`.
    pub fn chunk_ref(&self, k: u64) -> Result<GlobalRef> {
        if k >= self.chunks() {
            return Err(Error::InvalidArgument(format!("dsm: chunk {k} of an array of {} chunks", self.chunks())));
        }
        Ok(self.first.nth(k as u32))
    }

    /// The chunk that holds byte `offset`, and where in it.
    pub fn locate(&self, offset: u64) -> Result<(GlobalRef, usize)> {
        if offset >= self.len {
            return Err(Error::InvalidArgument(format!("dsm: byte {offset} of an array of {} bytes", self.len)));
        }
        Ok((self.first.nth((offset / self.chunk) as u32), (offset % self.chunk) as usize))
    }

    /// As two words (to store in a region or send): the first chunk's reference, then the
    /// length (low 40 bits) and the chunk size (high 24 bits).
    pub fn to_words(&self) -> [u64; 2] {
        [self.first.to_bits(), self.len | self.chunk << 40]
    }

    pub fn from_words(w: [u64; 2]) -> ArrayRef {
        ArrayRef { first: GlobalRef::from_bits(w[0]), len: w[1] & ((1 << 40) - 1), chunk: w[1] >> 40 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let r = GlobalRef::new(65534, 0xBEEF, 0xFFFF_FFFE);
        assert_eq!((r.home(), r.tag(), r.id()), (65534, 0xBEEF, 0xFFFF_FFFE));
        assert_eq!(GlobalRef::from_bits(r.to_bits()), r);
        assert!(!r.is_null() && GlobalRef::NULL.is_null());
        assert!(r.check(4).is_err() && GlobalRef::NULL.check(4).is_err());
        assert!(GlobalRef::new(3, 1, 0).check(4).is_ok());
    }

    #[test]
    fn arrays_locate_bytes_in_chunks() {
        let a = ArrayRef { first: GlobalRef::new(1, 7, 10), len: 10_000, chunk: 4096 };
        assert_eq!(a.chunks(), 3);
        assert_eq!(a.locate(4096).unwrap(), (GlobalRef::new(1, 7, 11), 0));
        assert_eq!(a.locate(9999).unwrap(), (GlobalRef::new(1, 7, 12), 9999 - 8192));
        assert!(a.locate(10_000).is_err() && a.chunk_ref(3).is_err());
        assert_eq!(ArrayRef::from_words(a.to_words()), a);
    }
}
