//! The registration strategies, chosen job-wide by ACTIVERMA_REGISTRATION. Every rank reads the
//! same setting (the launcher passes the environment to all ranks), so an origin knows which
//! slow path a target serves without asking it.

use activerma_core::{settings, Config, Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Every exposed page is REGISTERED at once and nothing is pinned: the zero-copy path
    /// always applies (the runtime's behaviour before strategies existed; the default).
    None,
    /// Pin (mlock) all exposed memory and every segment when it is exposed / allocated; an
    /// exposure that does not fit under the limit fails and leaves nothing exposed.
    PinAll,
    /// Never pin exposed private memory: the target copies through its pre-registered
    /// active-message buffers (put_am / get_am). Needs target progress.
    Bounce,
    /// On a miss, ask the target to pin the pages and mark them REGISTERED, then zero-copy;
    /// they stay registered until unexposed (a registration cache bounded by memlock).
    Rendezvous,
    /// As `Rendezvous`, but the pages are unpinned again after every operation.
    RendezvousUnpin,
    /// Firehose: each origin holds at most f firehoses (pinned buckets) on every other rank; a
    /// miss moves one with a message, released ones stay pinned as victims (`crate::firehose`,
    /// docs/design/firehose.md).
    Firehose,
    /// PART: nothing is pinned; exposed pages are registered with userfaultfd (SIGBUS mode) so
    /// a zero-copy access to a missing page fails fast, the target pages it in and the origin
    /// resends the block (`crate::part`, docs/design/part.md).
    Part,
}

impl Strategy {
    pub const ALL: [Strategy; 7] = [
        Strategy::None,
        Strategy::PinAll,
        Strategy::Bounce,
        Strategy::Rendezvous,
        Strategy::RendezvousUnpin,
        Strategy::Firehose,
        Strategy::Part,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::PinAll => "pin-all",
            Strategy::Bounce => "bounce",
            Strategy::Rendezvous => "rendezvous",
            Strategy::RendezvousUnpin => "rendezvous-unpin",
            Strategy::Firehose => "firehose",
            Strategy::Part => "part",
        }
    }

    /// Parses a name of the setting's enum.
    pub fn parse(name: &str) -> Result<Strategy> {
        let s = Strategy::ALL.iter().copied().find(|s| s.name().eq_ignore_ascii_case(name)).ok_or_else(|| Error::BadSetting {
            name: settings::REGISTRATION.into(),
            value: name.into(),
            why: format!("expected one of {}", Strategy::ALL.map(|s| s.name()).join(", ")),
        })?;
        Ok(s)
    }

    /// The strategy of this job (ACTIVERMA_REGISTRATION).
    pub fn from_config(cfg: &Config) -> Result<Strategy> {
        Strategy::parse(cfg.get_enum(settings::REGISTRATION)?)
    }

    /// Exposed pages are REGISTERED as soon as they are exposed (no miss ever happens).
    pub fn registers_at_expose(self) -> bool {
        matches!(self, Strategy::None | Strategy::PinAll)
    }

    /// Registering really pins (mlock); `None` only marks pages.
    pub fn pins(self) -> bool {
        !matches!(self, Strategy::None)
    }

    /// Segments are pinned at allocation (and counted as pinned memory).
    pub fn pins_segments(self) -> bool {
        self == Strategy::PinAll
    }

    /// After a rendezvous operation, its registration is dropped again.
    pub fn unpins_after_op(self) -> bool {
        self == Strategy::RendezvousUnpin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::parse(s.name()).unwrap(), s);
        }
        assert!(matches!(Strategy::parse("pin-some"), Err(Error::BadSetting { .. })));
        // The setting's enum and this one list the same names, in the same order.
        let settings::Kind::Enum(names) = settings::lookup(settings::REGISTRATION).kind else { panic!("an enum") };
        assert_eq!(names.to_vec(), Strategy::ALL.map(|s| s.name()).to_vec());
    }
}
