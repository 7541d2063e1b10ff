//! The two PART messages and the links that carry them. In the runtime both are active
//! messages (NACK: origin → target, ERR: target → origin); here they are plain values with a
//! fixed little-endian wire form, and the links are traits so tests can run origin and target
//! in one process or in two.
//!
//! Why the origin sends the NACK: on a real NI the target's IOMMU sees the fault and queues it
//! locally. With cross-memory attach the origin's own system call is what fails, so the origin
//! reports the fault to the target — the NACK stands in for the IOMMU's fault-queue entry and
//! carries what the target's handler needs: the faulting address, the block, and the whole
//! transfer's extent (for PIA).

use super::policy::PageIn;
use activerma_core::{Error, Rank, Result};

/// "Your page at `fault_addr` is missing" — one remote fault met by one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Transfer id, unique per origin process.
    pub xfer: u64,
    pub origin: Rank,
    pub block: u32,
    /// The remote access was a write (put) rather than a read (get).
    pub write: bool,
    /// The origin waits for an ERR; if false it resends after its time-out and the target only
    /// answers NACKs it cannot resolve.
    pub want_err: bool,
    pub page_in: PageIn,
    pub fault_addr: usize,
    /// The block's remote range.
    pub block_addr: usize,
    pub block_len: usize,
    /// The whole transfer's remote range (PIA pages in from the fault to its end).
    pub xfer_addr: usize,
    pub xfer_len: usize,
}

/// The target's answer to a NACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrStatus {
    /// Paged in (`pages` newly installed; 0 if someone else got there first): resend.
    Resolved { pages: u32 },
    /// The address is not in a PART region of the target: the access is an error.
    NotPart,
    /// Paging in failed with this errno.
    Failed { errno: i32 },
}

/// Explicit retransmission request (or failure report) for one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrMsg {
    pub xfer: u64,
    pub block: u32,
    pub status: ErrStatus,
}

pub const NACK_BYTES: usize = 64;
pub const ERR_BYTES: usize = 24;

struct W<'a>(&'a mut [u8], usize);
impl W<'_> {
    fn put(&mut self, v: u64, n: usize) {
        self.0[self.1..self.1 + n].copy_from_slice(&v.to_le_bytes()[..n]);
        self.1 += n;
    }
}
struct R<'a>(&'a [u8], usize);
impl R<'_> {
    fn get(&mut self, n: usize) -> u64 {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        u64::from_le_bytes(b)
    }
}

impl Nack {
    pub fn encode(&self) -> [u8; NACK_BYTES] {
        let mut b = [0u8; NACK_BYTES];
        let mut w = W(&mut b, 0);
        w.put(self.xfer, 8);
        w.put(self.origin as u64, 4);
        w.put(self.block as u64, 4);
        w.put(self.write as u64 | (self.want_err as u64) << 1, 1);
        w.put(self.page_in as u64, 1);
        w.put(0, 6);
        for v in [self.fault_addr, self.block_addr, self.block_len, self.xfer_addr, self.xfer_len] {
            w.put(v as u64, 8);
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Nack> {
        if b.len() < NACK_BYTES {
            return Err(Error::InvalidArgument(format!("PART NACK of {} bytes (need {NACK_BYTES})", b.len())));
        }
        let mut r = R(b, 0);
        let xfer = r.get(8);
        let origin = r.get(4) as Rank;
        let block = r.get(4) as u32;
        let flags = r.get(1);
        let page_in =
            PageIn::from_u8(r.get(1) as u8).ok_or_else(|| Error::InvalidArgument("PART NACK with an unknown page-in policy".into()))?;
        r.get(6);
        let mut v = [0usize; 5];
        for x in v.iter_mut() {
            *x = r.get(8) as usize;
        }
        Ok(Nack {
            xfer,
            origin,
            block,
            write: flags & 1 != 0,
            want_err: flags & 2 != 0,
            page_in,
            fault_addr: v[0],
            block_addr: v[1],
            block_len: v[2],
            xfer_addr: v[3],
            xfer_len: v[4],
        })
    }
}

impl ErrMsg {
    pub fn encode(&self) -> [u8; ERR_BYTES] {
        let mut b = [0u8; ERR_BYTES];
        let (tag, val) = match self.status {
            ErrStatus::Resolved { pages } => (0, pages as u64),
            ErrStatus::NotPart => (1, 0),
            ErrStatus::Failed { errno } => (2, errno as u32 as u64),
        };
        let mut w = W(&mut b, 0);
        w.put(self.xfer, 8);
        w.put(self.block as u64, 4);
        w.put(tag, 4);
        w.put(val, 8);
        b
    }

    pub fn decode(b: &[u8]) -> Result<ErrMsg> {
        if b.len() < ERR_BYTES {
            return Err(Error::InvalidArgument(format!("PART ERR of {} bytes (need {ERR_BYTES})", b.len())));
        }
        let mut r = R(b, 0);
        let xfer = r.get(8);
        let block = r.get(4) as u32;
        let tag = r.get(4);
        let val = r.get(8);
        let status = match tag {
            0 => ErrStatus::Resolved { pages: val as u32 },
            1 => ErrStatus::NotPart,
            2 => ErrStatus::Failed { errno: val as u32 as i32 },
            _ => return Err(Error::InvalidArgument(format!("PART ERR with unknown status {tag}"))),
        };
        Ok(ErrMsg { xfer, block, status })
    }
}

/// The origin's side of the link.
pub trait OriginLink {
    /// Delivers a NACK to `target` (runtime: an active message to its PART handler).
    fn send_nack(&self, target: Rank, nack: &Nack) -> Result<()>;
    /// Moves the ERRs that have arrived for transfer `xfer` into `out`; never blocks.
    fn take_errs(&self, xfer: u64, out: &mut Vec<ErrMsg>);
    /// Called while the origin waits for ERRs or a time-out: run whatever progress the link
    /// needs (the runtime's AM progress; a single-threaded test runs the target here).
    fn progress(&self) {}
    /// Whether the link models a network (the runtime's ACTIVERMA_NET_*): then every block
    /// is booked on it with `book_block`, one at a time.
    fn paces(&self) -> bool {
        false
    }
    /// Books one block (a first send or a resend) of `bytes` on the modelled link and returns
    /// when it starts there (ns, the clock of `activerma_core::clock::now_ns`); the origin
    /// copies the block at that moment, so blocks go out at the link's rate, a resend costs
    /// the link a whole block, and a fault is met when its block is on the wire. `None`: the
    /// link models nothing; copy at once.
    fn book_block(&self, _bytes: usize) -> Option<u64> {
        None
    }
}

/// The target's side of the link.
pub trait ErrSink {
    fn send_err(&self, origin: Rank, err: &ErrMsg) -> Result<()>;
}

impl<T: OriginLink + ?Sized> OriginLink for std::sync::Arc<T> {
    fn send_nack(&self, target: Rank, nack: &Nack) -> Result<()> {
        (**self).send_nack(target, nack)
    }
    fn take_errs(&self, xfer: u64, out: &mut Vec<ErrMsg>) {
        (**self).take_errs(xfer, out)
    }
    fn progress(&self) {
        (**self).progress()
    }
    fn paces(&self) -> bool {
        (**self).paces()
    }
    fn book_block(&self, bytes: usize) -> Option<u64> {
        (**self).book_block(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_messages_round_trip() {
        let n = Nack {
            xfer: 7,
            origin: 3,
            block: 9,
            write: true,
            want_err: false,
            page_in: PageIn::All,
            fault_addr: 0x7fff_0000_1000,
            block_addr: 0x7fff_0000_0000,
            block_len: 16384,
            xfer_addr: 0x7ffe_0000_0000,
            xfer_len: 1 << 20,
        };
        assert_eq!(Nack::decode(&n.encode()).unwrap(), n);
        for status in [ErrStatus::Resolved { pages: 4 }, ErrStatus::NotPart, ErrStatus::Failed { errno: libc::ENOMEM }] {
            let e = ErrMsg { xfer: u64::MAX, block: 2, status };
            assert_eq!(ErrMsg::decode(&e.encode()).unwrap(), e);
        }
        assert!(Nack::decode(&[0; 10]).is_err());
    }
}
