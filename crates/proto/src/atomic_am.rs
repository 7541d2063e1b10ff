//! atomic_am: private memory can only be updated atomically by the target's own CPU, so the
//! origin sends a request; the target's progress engine checks its own table, runs the atomic
//! and replies with the old value (or an error code). Needs target progress: a progress thread,
//! or the target calling into the runtime (any blocking call progresses).

use crate::atomic_direct::apply;
use crate::{AtomicOp, Proto};
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, OriginTable};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub const REQUEST: HandlerId = 1;
pub const REPLY: HandlerId = 2;

fn encode(addr: usize, op: AtomicOp) -> [u8; 25] {
    let (code, a, b) = match op {
        AtomicOp::Fetch => (0u8, 0, 0),
        AtomicOp::FetchAdd(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::CompareSwap { expected, new } => (3, expected, new),
    };
    let mut m = [0u8; 25];
    m[0] = code;
    m[1..9].copy_from_slice(&(addr as u64).to_le_bytes());
    m[9..17].copy_from_slice(&a.to_le_bytes());
    m[17..25].copy_from_slice(&b.to_le_bytes());
    m
}

fn decode(m: &[u8]) -> Option<(usize, AtomicOp)> {
    if m.len() != 25 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
    let op = match m[0] {
        0 => AtomicOp::Fetch,
        1 => AtomicOp::FetchAdd(word(9)),
        2 => AtomicOp::Swap(word(9)),
        3 => AtomicOp::CompareSwap { expected: word(9), new: word(17) },
        _ => return None,
    };
    Some((word(1) as usize, op))
}

pub(crate) fn register(am: &Am) -> Result<()> {
    let me = am.conduit().rank();
    let own_table = std::sync::OnceLock::<OriginTable>::new();
    let conduit = am.conduit().clone();
    am.register(
        REQUEST,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let table = own_table
                .get_or_init(|| OriginTable::attach(conduit.table_window(me).expect("own table"), me).expect("own table initialized"));
            let (status, old) = match decode(msg) {
                None => (Error::InvalidArgument("malformed atomic request".into()).code(), 0),
                Some((addr, op)) => {
                    match table.check(addr, 8, if op == AtomicOp::Fetch { AccessKind::AtomicRead } else { AccessKind::Atomic }) {
                        Err(e) => (e.code(), 0),
                        Ok(_guard) => {
                            // SAFETY: the table says the aligned word is exposed read-write by us.
                            let word = unsafe { &*(addr as *const AtomicU64) };
                            (0, apply(word, op))
                        }
                    }
                }
            };
            let mut reply = [0u8; 12];
            reply[..4].copy_from_slice(&status.to_le_bytes());
            reply[4..].copy_from_slice(&old.to_le_bytes());
            ctx.reply(REPLY, ctx.token, &reply);
        }),
    )?;
    am.register(
        REPLY,
        Arc::new(|ctx: &AmCtx, msg: &[u8]| {
            let status = i32::from_le_bytes(msg[..4].try_into().unwrap());
            let old = u64::from_le_bytes(msg[4..12].try_into().unwrap());
            if let Some(c) = ctx.am().completions.get(ctx.token) {
                c.complete(status, old, &[]);
            }
        }),
    )
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, op: AtomicOp) -> Result<u64> {
    let cell = loop {
        if let Some(c) = p.am.completions.take() {
            break c;
        }
        p.am.progress();
    };
    let result = (|| {
        p.am.send(rank, REQUEST, cell as u64, &encode(addr, op))?;
        let c = p.am.completions.get(cell as u64).unwrap();
        p.am.wait_completion(c, rank, "an atomic reply")?;
        match c.status.load(std::sync::atomic::Ordering::Relaxed) {
            0 => Ok(c.value.load(std::sync::atomic::Ordering::Relaxed)),
            code => Err(error_from_target(code, rank, addr)),
        }
    })();
    p.am.completions.give_back(cell);
    bump(&p.counters.atomic_am, 1);
    result
}

/// Rebuilds an error the target reported by code (it checked the same table we did; the only
/// way to get here is a race with unexpose).
fn error_from_target(code: i32, rank: Rank, addr: usize) -> Error {
    match code {
        2 => Error::NotExposed { rank, addr, len: 8 },
        3 => Error::Protection { rank, addr, len: 8, op: "atomic", prot: "read-only" },
        _ => Error::InvalidArgument(format!("rank {rank} refused the atomic at {addr:#x} (code {code})")),
    }
}
