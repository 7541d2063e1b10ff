//! The actions of a page: the paper's control bits W, R, WL, WLD, RL, RLD. (E and the domain
//! come from the domain argument of `assoc_pages`.)

use activerma_mem::Entry;
use std::ops::BitOr;

/// A set of control bits. Every combination has the paper's meaning, e.g.
/// `WL | WLD` (W=0): an active put that does not touch memory, logged with its data;
/// `W | WL`: the put writes and its metadata is logged (counting);
/// `R | RL | RLD`: the get is served and a copy of the returned data is logged;
/// no W and no WL/WLD: a put is a protection fault reported to the origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Actions(u32);

impl Actions {
    pub const NONE: Actions = Actions(0);
    pub const W: Actions = Actions(Entry::W);
    pub const R: Actions = Actions(Entry::R);
    pub const WL: Actions = Actions(Entry::WL);
    pub const WLD: Actions = Actions(Entry::WLD);
    pub const RL: Actions = Actions(Entry::RL);
    pub const RLD: Actions = Actions(Entry::RLD);
    pub const ALL: Actions = Actions(Entry::W | Entry::R | Entry::WL | Entry::WLD | Entry::RL | Entry::RLD);

    pub fn bits(self) -> u32 {
        self.0
    }

    /// From raw bits (the C API's ARMA_AA_* flags, which are the same bits); unknown bits are an error.
    pub fn from_bits(bits: u32) -> Option<Actions> {
        (bits & !Self::ALL.0 == 0).then_some(Actions(bits))
    }

    pub fn contains(self, other: Actions) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Actions {
    type Output = Actions;
    fn bitor(self, rhs: Actions) -> Actions {
        Actions(self.0 | rhs.0)
    }
}
