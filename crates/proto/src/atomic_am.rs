//! atomic_am: private memory can only be updated atomically by the target's own CPU, so the
//! origin sends a request; the target's progress engine checks its own table, runs the atomic
//! and answers with the old value. Needs target progress: a progress thread, or the target
//! calling into the runtime (any call that waits progresses).

use crate::am_request::{self, Asked, OwnTable, ATOMIC};
use crate::{AtomicOp, Proto};
use activerma_am::{Am, AmCtx};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::AccessKind;
use activerma_transport::Width;
use std::sync::Arc;

/// Who runs an atomic on another rank's word (ACTIVERMA_ATOMICS): the origin where it can
/// (one-sided), or always the target's CPU (server-based, the ARMCI paper's §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicPath {
    OneSided,
    Target,
}

impl AtomicPath {
    pub fn from_config(cfg: &activerma_core::Config) -> Result<AtomicPath> {
        Ok(if cfg.get_enum(activerma_core::settings::ATOMICS)? == "target" { AtomicPath::Target } else { AtomicPath::OneSided })
    }
}

/// Set in the op code of a request on a 32-bit word.
const W32: u8 = 0x10;

fn encode(addr: usize, op: AtomicOp, width: Width) -> [u8; 25] {
    let (code, a, b) = match op {
        AtomicOp::Fetch => (0u8, 0, 0),
        AtomicOp::FetchAdd(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::CompareSwap { expected, new } => (3, expected, new),
    };
    let mut m = [0u8; 25];
    m[0] = code | if width == Width::W32 { W32 } else { 0 };
    m[1..9].copy_from_slice(&(addr as u64).to_le_bytes());
    m[9..17].copy_from_slice(&a.to_le_bytes());
    m[17..25].copy_from_slice(&b.to_le_bytes());
    m
}

fn decode(m: &[u8]) -> Option<(usize, AtomicOp, Width)> {
    if m.len() != 25 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
    let width = if m[0] & W32 != 0 { Width::W32 } else { Width::W64 };
    let op = match m[0] & !W32 {
        0 => AtomicOp::Fetch,
        1 => AtomicOp::FetchAdd(word(9)),
        2 => AtomicOp::Swap(word(9)),
        3 => AtomicOp::CompareSwap { expected: word(9), new: word(17) },
        _ => return None,
    };
    Some((word(1) as usize, op, width))
}

#[inline]
pub(crate) fn kind(op: AtomicOp) -> AccessKind {
    if op == AtomicOp::Fetch {
        AccessKind::AtomicRead
    } else {
        AccessKind::Atomic
    }
}

pub(crate) fn register(am: &Am) -> Result<()> {
    let table = OwnTable::new(am.conduit().clone());
    am.register(
        ATOMIC,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome =
                decode(msg).ok_or_else(|| Error::InvalidArgument("malformed atomic request".into())).and_then(|(addr, op, width)| {
                    if !addr.is_multiple_of(width.bytes()) {
                        return Err(Error::Misaligned { rank: ctx.am().conduit().rank(), addr });
                    }
                    let _inside = table.check(addr, width.bytes(), kind(op))?;
                    // SAFETY: the table says the aligned word is exposed by us with the needed rights.
                    Ok((unsafe { activerma_transport::apply_atomic_at(addr as *mut u8, op, width) }, &[][..]))
                });
            am_request::respond(ctx, outcome);
        }),
    )
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
    let r = am_request::request(p, ATOMIC, &encode(addr, op, width), Asked { rank, addr, len: width.bytes(), op: "atomic" });
    bump(&p.counters.atomic_am, 1);
    r.map(|(old, _)| old)
}
