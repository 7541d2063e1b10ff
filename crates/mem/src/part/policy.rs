//! PART's knobs: how much the target pages in per fault, how the origin learns it may resend,
//! block size, pre-touch. Parsers take the strings the settings table will use
//! (ACTIVERMA_PART_PAGEIN, ACTIVERMA_PART_RETRANSMIT, ...).

use activerma_core::{Error, Result};
use std::time::Duration;

/// What the target pages in when a NACK reports a fault (the paper's PIO / PI4 / PIA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageIn {
    /// PIO: only the faulting page; the resent block may fault again on a later page.
    One = 0,
    /// PI4: the faulting page and the rest of its block (4 pages with 16 KiB blocks).
    Block = 1,
    /// PIA: the faulting page and every later page of the transfer (the NACK carries the
    /// transfer's extent), then the ERR; the origin stops sending new blocks until the ERR,
    /// so a fault costs one retransmission for the whole transfer (the paper's order).
    All = 2,
    /// PIA with an early ERR (ours, not the paper's): the ERR goes out once the faulting block
    /// is in, then the rest of the transfer is paged in, while the origin does not wait: it
    /// goes on with the blocks after the faulting one (as under PIO) and resends that block
    /// on its ERR. Pages the origin reaches before the handler does NACK their blocks too
    /// (each block at most once: its ERR follows its page-in); at low fault rates the handler
    /// soon runs ahead of the copy and the fault hides behind it.
    AllEarlyErr = 3,
}

impl PageIn {
    pub fn parse(s: &str) -> Result<PageIn> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pio" | "one" | "page" => Ok(PageIn::One),
            "pi4" | "block" => Ok(PageIn::Block),
            "pia" | "all" => Ok(PageIn::All),
            "pia-early" => Ok(PageIn::AllEarlyErr),
            _ => Err(Error::InvalidArgument(format!("PART page-in policy '{s}': use pio, pi4, pia or pia-early"))),
        }
    }
    pub(crate) fn from_u8(v: u8) -> Option<PageIn> {
        PageIn::ALL.get(v as usize).copied()
    }
    pub fn name(self) -> &'static str {
        ["pio", "pi4", "pia", "pia-early"][self as usize]
    }
    /// Whether the origin holds new blocks while a NACK is outstanding: under PIA the target
    /// is paging in the rest of the transfer, and running ahead would only collect NACKs for
    /// pages about to arrive. PIA with an early ERR runs ahead on purpose (see AllEarlyErr).
    pub fn holds_while_pending(self) -> bool {
        self == PageIn::All
    }
    /// Every policy, in wire order.
    pub const ALL: [PageIn; 4] = [PageIn::One, PageIn::Block, PageIn::All, PageIn::AllEarlyErr];
}

/// How the origin learns that a NACKed block may be resent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retransmit {
    /// The target replies with an explicit retransmission request once the page is in.
    Err,
    /// No ERR: the origin resends after this long (the paper used 100 µs and 1 ms). The
    /// target still answers a NACK it cannot resolve, so a bad address is an error, not a hang.
    Timeout(Duration),
}

impl Retransmit {
    /// "err", or "timeout:<n>us|ms" / "<n>us" / "<n>ms".
    pub fn parse(s: &str) -> Result<Retransmit> {
        let t = s.trim().to_ascii_lowercase();
        if t == "err" {
            return Ok(Retransmit::Err);
        }
        let v = t.strip_prefix("timeout:").unwrap_or(&t);
        let bad = || Error::InvalidArgument(format!("PART retransmit '{s}': use err, or timeout:<n>us / timeout:<n>ms"));
        let (num, mul) = if let Some(n) = v.strip_suffix("us") {
            (n, 1_000u64)
        } else if let Some(n) = v.strip_suffix("ms") {
            (n, 1_000_000)
        } else {
            return Err(bad());
        };
        let n: u64 = num.trim().parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        Ok(Retransmit::Timeout(Duration::from_nanos(n * mul)))
    }
}

#[derive(Clone, Debug)]
pub struct PartConfig {
    /// Unit of retransmission (the paper's 16 KiB transactions). A multiple of the page size.
    pub block_size: usize,
    pub page_in: PageIn,
    pub retransmit: Retransmit,
    /// Transfers of at most this many bytes first page in the origin's own buffer when it lies
    /// in a PART region (the paper's "touch" for small synchronous transfers); 0 = never.
    pub pretouch_max: usize,
    /// A block resent this many times without landing is an error (pages evicted again as fast
    /// as they come in, or a userfaultfd range activerma does not manage).
    pub max_attempts: u32,
    /// Give up on a transfer that has waited this long for ERRs/time-outs (the target is not
    /// making progress).
    pub give_up: Duration,
}

impl Default for PartConfig {
    fn default() -> Self {
        PartConfig {
            block_size: 16 << 10,
            page_in: PageIn::One,
            retransmit: Retransmit::Err,
            pretouch_max: 0,
            max_attempts: 256,
            give_up: Duration::from_secs(30),
        }
    }
}

impl PartConfig {
    pub fn validate(&self) -> Result<()> {
        let ps = activerma_core::page::page_size();
        if self.block_size == 0 || !self.block_size.is_multiple_of(ps) || self.block_size > (1 << 30) {
            return Err(Error::InvalidArgument(format!(
                "PART block size {}: must be a positive multiple of the page size ({ps}), at most 1 GiB",
                self.block_size
            )));
        }
        if self.max_attempts == 0 {
            return Err(Error::InvalidArgument("PART max_attempts must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_policy_parsing() {
        assert_eq!(PageIn::parse("PI4").unwrap(), PageIn::Block);
        assert_eq!(PageIn::parse("pia").unwrap(), PageIn::All);
        assert_eq!(PageIn::parse("pia-early").unwrap(), PageIn::AllEarlyErr);
        for p in PageIn::ALL {
            assert_eq!(PageIn::parse(p.name()).unwrap(), p);
            assert_eq!(PageIn::from_u8(p as u8), Some(p));
        }
        assert!(PageIn::parse("x").is_err());
        assert_eq!(Retransmit::parse("err").unwrap(), Retransmit::Err);
        assert_eq!(Retransmit::parse("timeout:100us").unwrap(), Retransmit::Timeout(Duration::from_micros(100)));
        assert_eq!(Retransmit::parse("1ms").unwrap(), Retransmit::Timeout(Duration::from_millis(1)));
        assert!(Retransmit::parse("timeout:0us").is_err());
        let c = PartConfig { block_size: 1000, ..Default::default() };
        assert!(c.validate().is_err());
        assert!(PartConfig::default().validate().is_ok());
    }
}
