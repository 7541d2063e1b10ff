//! The eight designs of the paper's section 5.2.1, with identical semantics.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Variant {
    /// Inserts are active puts (W=0, WL=1, WLD=1) into the target's access log; the target's
    /// handler inserts locally, run by the application's polling (`progress()`).
    AaPoll,
    /// As AA-Poll, the handler run by a thread woken every 10 entries (the interrupt).
    AaInt,
    /// As AA-Poll, the handler run by a dedicated spinning thread (the scratchpad core).
    AaSp,
    /// The paper's Listing 2: compare-and-swap, fetch-and-add, puts and flushes.
    Rma,
    /// Inserts are active messages; ranks poll for messages at a fixed interval.
    Am,
    /// Active messages; the polling interval doubles while nothing arrives.
    AmExp,
    /// Active messages served by a dedicated progress thread (onload core).
    AmOnload,
    /// Active messages served by a thread woken by message arrival (interrupts).
    AmInts,
}

impl Variant {
    pub const ALL: [Variant; 8] =
        [Variant::AaPoll, Variant::AaInt, Variant::AaSp, Variant::Rma, Variant::Am, Variant::AmExp, Variant::AmOnload, Variant::AmInts];

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::AaPoll => "AA-Poll",
            Variant::AaInt => "AA-Int",
            Variant::AaSp => "AA-SP",
            Variant::Rma => "RMA",
            Variant::Am => "AM",
            Variant::AmExp => "AM-Exp",
            Variant::AmOnload => "AM-Onload",
            Variant::AmInts => "AM-Ints",
        }
    }

    pub fn from_name(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name().eq_ignore_ascii_case(s))
    }

    pub fn is_aa(self) -> bool {
        matches!(self, Variant::AaPoll | Variant::AaInt | Variant::AaSp)
    }

    pub fn is_am(self) -> bool {
        matches!(self, Variant::Am | Variant::AmExp | Variant::AmOnload | Variant::AmInts)
    }
}
