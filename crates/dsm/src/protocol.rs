//! The consistency protocols (paper sections 4 and 5), chosen per run
//! (`ACTIVERMA_DSM_PROTOCOL`) and the same for every region of a run.

use activerma::{settings, Config, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Home-based invalidation, multiple writers; an object comes back as a reply message.
    Invalidate,
    /// The same; the home puts the reply message straight into the requester's registered
    /// receive buffer (Fig. 2), or sends it as a message when it does not fit.
    InvalidateRdma,
    /// At a release the writer puts its changes into every cached copy and its twin (Fig. 4).
    UpdateInPlace,
    /// At a release the writer puts arrays of diffs into every rank, in sequence, each reused
    /// after its receiver's acknowledgement (Fig. 6).
    UpdateDiff,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [Protocol::Invalidate, Protocol::InvalidateRdma, Protocol::UpdateInPlace, Protocol::UpdateDiff];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Invalidate => "invalidate",
            Protocol::InvalidateRdma => "invalidate-rdma",
            Protocol::UpdateInPlace => "update-in-place",
            Protocol::UpdateDiff => "update-diff",
        }
    }

    pub fn from_config(cfg: &Config) -> Result<Protocol> {
        let name = cfg.get_enum(settings::DSM_PROTOCOL)?;
        Ok(Protocol::ALL.into_iter().find(|p| p.name() == name).expect("the setting's values are the protocols' names"))
    }

    /// Invalidation protocols drop cached copies at an acquire; update protocols keep them
    /// current instead.
    pub fn invalidates(self) -> bool {
        matches!(self, Protocol::Invalidate | Protocol::InvalidateRdma)
    }
}

/// The job's settings (the environment's) with the protocol and the access mode a program's
/// command line chose, checked against the settings' values (an unknown name is refused with
/// the list): what the `water` and `lu` binaries start their job with.
pub fn config_with(protocol: Option<&str>, access: Option<&str>) -> Result<Config> {
    let mut cfg = Config::from_env()?;
    if let Some(p) = protocol {
        cfg.set(settings::DSM_PROTOCOL, p)?;
    }
    if let Some(a) = access {
        cfg.set(settings::DSM_ACCESS, a)?;
    }
    Ok(cfg)
}
