//! The five designs of the paper's section 5.2.2, counting the same accesses.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Variant {
    /// The array's pages are marked `W=1, WL=1, WLD=0` and `R=1, RL=1, RLD=0`: puts and gets
    /// are served as usual and log their metadata into the target's access log, whose handler
    /// counts them per page; run by the application's polling (`progress()`).
    AaPoll,
    /// Plain puts and gets; after each, the origin increments the target's per-page counter
    /// with a remote atomic add.
    Rma,
    /// "Active key-value" (application level): every access is an active message whose
    /// handler at the target carries it out (a get replies with the value) and counts it.
    AKv,
    /// Plain puts and gets counted at the origin per (target, page); the counts are reduced at
    /// the end.
    Allreduce,
    /// Plain puts and gets, no counting: the baseline.
    NoCnt,
}

impl Variant {
    pub const ALL: [Variant; 5] = [Variant::AaPoll, Variant::Rma, Variant::AKv, Variant::Allreduce, Variant::NoCnt];

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::AaPoll => "AA-Poll",
            Variant::Rma => "RMA",
            Variant::AKv => "A-KV",
            Variant::Allreduce => "Allreduce",
            Variant::NoCnt => "No-Cnt",
        }
    }

    pub fn from_name(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name().eq_ignore_ascii_case(s))
    }

    pub fn is_aa(self) -> bool {
        matches!(self, Variant::AaPoll)
    }

    /// Whether the variant counts at all (all but No-Cnt).
    pub fn counts(self) -> bool {
        self != Variant::NoCnt
    }
}
