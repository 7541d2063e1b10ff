//! atomic_am: private memory can only be updated atomically by the target's own CPU, so the
//! origin sends a request; the target's progress engine checks its own table, runs the atomic
//! and answers with the old value. Needs target progress: a progress thread, or the target
//! calling into the runtime (any call that waits progresses).

use crate::am_request::{self, Asked, OwnTable, ATOMIC};
use crate::{atomic_active, AtomicOp, Proto};
use activerma_access::log_append::{self, Logged};
use activerma_access::LogOp;
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

/// A request: op code, address, two operands, and the origin's sequence number at the target
/// (a logged atomic's entry carries it, as a put's does).
fn encode(addr: usize, op: AtomicOp, width: Width, seq: u64) -> [u8; 33] {
    let (code, a, b) = match op {
        AtomicOp::Fetch => (0u8, 0, 0),
        AtomicOp::FetchAdd(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::CompareSwap { expected, new } => (3, expected, new),
    };
    let mut m = [0u8; 33];
    m[0] = code | if width == Width::W32 { W32 } else { 0 };
    m[1..9].copy_from_slice(&(addr as u64).to_le_bytes());
    m[9..17].copy_from_slice(&a.to_le_bytes());
    m[17..25].copy_from_slice(&b.to_le_bytes());
    m[25..33].copy_from_slice(&seq.to_le_bytes());
    m
}

fn decode(m: &[u8]) -> Option<(usize, AtomicOp, Width, u64)> {
    if m.len() != 33 {
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
    Some((word(1) as usize, op, width, word(25)))
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
            // Some(old value), or None: the access log to append to is full, retry later.
            let outcome = (|| {
                let (addr, op, width, seq) = decode(msg).ok_or_else(|| Error::InvalidArgument("malformed atomic request".into()))?;
                if !addr.is_multiple_of(width.bytes()) {
                    return Err(Error::Misaligned { rank: ctx.am().conduit().rank(), addr });
                }
                let lookup = table.check(addr, width.bytes(), kind(op))?;
                // SAFETY: the table says the aligned word is exposed by us with the needed rights.
                let apply = |at: usize| unsafe { activerma_transport::apply_atomic_at(at as *mut u8, op, width) };
                if !lookup.active {
                    return Ok(Some(apply(addr)));
                }
                // A writing atomic on a W, WL page (the only active kind the check lets
                // through): logged here as a put of the word (atomic_active.rs).
                let l = Logged::at_target(table.get(), &lookup, ctx.am().conduit().rank(), ctx.src, seq);
                if !log_append::has_room(&l, LogOp::Put, addr, width.bytes())? {
                    return Ok(None);
                }
                let mut w = activerma_am::Waiter::default();
                let (old, _) = atomic_active::logged_write(&l, addr, width, false, apply, &mut || {
                    w.step_in_handler(ctx.am(), ctx.src, "room in an access log")
                })?;
                Ok(Some(old))
            })();
            match outcome.transpose() {
                None => ctx.retry_later(),
                Some(answer) => am_request::respond(ctx, answer.map(|old| (old, &[][..]))),
            }
        }),
    )
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, op: AtomicOp, width: Width) -> Result<u64> {
    let r =
        am_request::request(p, ATOMIC, &encode(addr, op, width, p.next_seq(rank)), Asked { rank, addr, len: width.bytes(), op: "atomic" });
    bump(&p.counters.atomic_am, 1);
    r.map(|(old, _)| old)
}
