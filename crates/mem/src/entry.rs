//! One translation-table entry per page: a 64-bit word of control bits, a domain id, and how
//! many bytes of the page are valid (segments end mid-page; what lies past their end in the
//! same page is not reachable).
//! The Active Access bits (WL, WLD, RL, RLD, E, domain) are the paper's; they are stored now
//! and given meaning by the `access` layer.

/// Page entry bits.
pub struct Entry;

impl Entry {
    /// The page is mapped in the table (part of a segment allocation or exposed range).
    pub const PRESENT: u32 = 1 << 0;
    /// The page may be moved by the zero-copy path (pinned / attached).
    pub const REGISTERED: u32 = 1 << 1;
    pub const R: u32 = 1 << 2;
    pub const W: u32 = 1 << 3;
    /// Log puts (metadata) / with data.
    pub const WL: u32 = 1 << 4;
    pub const WLD: u32 = 1 << 5;
    /// Log gets (metadata) / with data.
    pub const RL: u32 = 1 << 6;
    pub const RLD: u32 = 1 << 7;
    /// Log into the domain's access log (1) or the default fault log (0).
    pub const E: u32 = 1 << 8;
    pub const ACTIVE: u32 = Self::WL | Self::WLD | Self::RL | Self::RLD;
    pub const DOMAIN_SHIFT: u32 = 16;
    /// Bits 32..: valid bytes at the start of the page; 0 means the whole page.
    pub const LIMIT_SHIFT: u32 = 32;

    #[inline]
    pub fn domain(e: u64) -> u16 {
        (e >> Self::DOMAIN_SHIFT) as u16
    }

    #[inline]
    pub fn limit(e: u64) -> usize {
        (e >> Self::LIMIT_SHIFT) as usize
    }
}

/// Protection a target grants on memory it exposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prot {
    ReadOnly,
    ReadWrite,
}

impl Prot {
    pub fn bits(self) -> u32 {
        match self {
            Prot::ReadOnly => Entry::R,
            Prot::ReadWrite => Entry::R | Entry::W,
        }
    }
    pub fn describe(bits: u32) -> &'static str {
        match (bits & Entry::R != 0, bits & Entry::W != 0) {
            (true, true) => "read-write",
            (true, false) => "read-only",
            (false, true) => "write-only",
            (false, false) => "no-access",
        }
    }
}
