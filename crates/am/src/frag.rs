//! Fragment headers and reassembly. A message longer than one slot is cut into fragments that
//! travel in order through the pair's queue (the sender holds the queue for the whole message),
//! so the receiver only needs one partial message per source.

use activerma_core::Rank;
use activerma_transport::FragHeader;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragFlags {
    pub first: bool,
    pub last: bool,
}

pub fn encode(handler: u16, f: FragFlags, total: u32, token: u64) -> FragHeader {
    let flags = (f.first as u64) | ((f.last as u64) << 1);
    [(handler as u64) | (flags << 16) | ((total as u64) << 32), token]
}

pub fn decode(h: FragHeader) -> (u16, FragFlags, u32, u64) {
    let flags = (h[0] >> 16) & 0xffff;
    (h[0] as u16, FragFlags { first: flags & 1 != 0, last: flags & 2 != 0 }, (h[0] >> 32) as u32, h[1])
}

pub struct Reassembly {
    partial: Vec<Vec<u8>>,
}

impl Reassembly {
    pub fn new(nranks: usize) -> Reassembly {
        Reassembly { partial: vec![Vec::new(); nranks] }
    }

    /// Adds a fragment from `src`; returns the whole message when this was its last fragment.
    pub fn add(&mut self, src: Rank, f: FragFlags, total: u32, bytes: &[u8]) -> Option<Vec<u8>> {
        let buf = &mut self.partial[src];
        if f.first {
            buf.clear();
            buf.reserve_exact(total as usize);
        }
        buf.extend_from_slice(bytes);
        if f.last {
            debug_assert_eq!(buf.len(), total as usize);
            Some(std::mem::take(buf))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = encode(700, FragFlags { first: true, last: false }, 123456, 0xdead_beef_0000_0001);
        assert_eq!(decode(h), (700, FragFlags { first: true, last: false }, 123456, 0xdead_beef_0000_0001));
    }

    #[test]
    fn reassembles_in_order() {
        let mut r = Reassembly::new(2);
        assert!(r.add(1, FragFlags { first: true, last: false }, 6, b"abc").is_none());
        assert_eq!(r.add(1, FragFlags { first: false, last: true }, 6, b"def").unwrap(), b"abcdef");
        assert_eq!(r.add(0, FragFlags { first: true, last: true }, 1, b"x").unwrap(), b"x");
    }
}
