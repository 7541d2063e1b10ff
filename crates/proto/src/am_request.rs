//! The request/response pattern of the protocols the target's CPU carries out (atomics on
//! private memory, puts and gets to memory origins cannot reach directly): the origin takes a
//! completion cell, sends the request with the cell's index as token, and waits making
//! progress; the target checks the access against its own translation table, does the work,
//! and answers with a status, a value and optional bytes.

use crate::Proto;
use activerma_access::ActiveTable;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, Lookup, OriginTable, Prot};
use activerma_transport::Conduit;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// Handler ids of the runtime's own requests (users start at FIRST_USER_HANDLER).
pub const ATOMIC: HandlerId = 1;
pub const RESPONSE: HandlerId = 2;
pub const PUT: HandlerId = 3;
pub const GET: HandlerId = 4;
pub const ACTIVE_FLUSH: HandlerId = 5;

/// The target's own table, attached on first use (it is initialized before any request).
pub(crate) struct OwnTable {
    table: OnceLock<ActiveTable>,
    conduit: Arc<dyn Conduit>,
}

impl OwnTable {
    pub fn new(conduit: Arc<dyn Conduit>) -> OwnTable {
        OwnTable { table: OnceLock::new(), conduit }
    }
    pub fn get(&self) -> &ActiveTable {
        let me = self.conduit.rank();
        self.table.get_or_init(|| {
            let table = OriginTable::attach(self.conduit.table_window(me).expect("own table"), me);
            ActiveTable::attach(table.expect("own table initialized"), None, None)
        })
    }
    pub fn check(&self, addr: usize, len: usize, kind: AccessKind) -> Result<Lookup<'_>> {
        self.get().check(addr, len, kind)
    }
}

/// Sends the outcome back: status 0 with a value and bytes, or the error's code (with, for a
/// protection error, the target's protection bits, and for the others the target's text, so
/// the origin can tell the user what the target said: `rebuild_error`).
pub(crate) fn respond(ctx: &AmCtx, outcome: Result<(u64, &[u8])>) {
    let (status, value, text);
    let data: &[u8] = match outcome {
        Ok((v, d)) => {
            (status, value) = (0, v);
            d
        }
        Err(e) => {
            text = e.to_string();
            (status, value) = status_of::<()>(Err(e));
            text.as_bytes()
        }
    };
    ctx.reply(RESPONSE, ctx.token, &encode_outcome(status, value, &[data]));
}

/// An outcome on the wire: status (i32), value (u64), then `parts` (the data, or the target's
/// text), all little-endian; `decode_outcome` reads it back.
pub(crate) fn encode_outcome(status: i32, value: u64, parts: &[&[u8]]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(12 + parts.iter().map(|p| p.len()).sum::<usize>());
    msg.extend_from_slice(&status.to_le_bytes());
    msg.extend_from_slice(&value.to_le_bytes());
    for p in parts {
        msg.extend_from_slice(p);
    }
    msg
}

/// (status, value, the rest) of an `encode_outcome` message.
pub(crate) fn decode_outcome(msg: &[u8]) -> (i32, u64, &[u8]) {
    (i32::from_le_bytes(msg[..4].try_into().unwrap()), u64::from_le_bytes(msg[4..12].try_into().unwrap()), &msg[12..])
}

/// An outcome as it travels: 0, or the error's code with (for a protection error) the
/// target's protection bits, so the origin can name them (`rebuild_error`).
pub(crate) fn status_of<T>(outcome: Result<T>) -> (i32, u64) {
    match outcome {
        Ok(_) => (0, 0),
        Err(Error::Protection { prot, .. }) => (Error::Protection { rank: 0, addr: 0, len: 0, op: "", prot }.code(), prot_bits(prot)),
        Err(e) => (e.code(), 0),
    }
}

fn prot_bits(prot: &str) -> u64 {
    match prot {
        "read-only" => Prot::ReadOnly.bits() as u64,
        "read-write" => Prot::ReadWrite.bits() as u64,
        _ => 0,
    }
}

pub(crate) fn register_response(am: &Am) -> Result<()> {
    am.register(
        RESPONSE,
        Arc::new(|ctx: &AmCtx, msg: &[u8]| {
            let (status, value, data) = decode_outcome(msg);
            if let Some(c) = ctx.am().completions.get(ctx.token) {
                c.complete(status, value, data);
            }
        }),
    )
}

/// What the origin asked for, to rebuild the target's error with the origin's words.
pub(crate) struct Asked {
    pub rank: Rank,
    pub addr: usize,
    pub len: usize,
    pub op: &'static str,
}

/// Sends a request and waits for its response; returns the value and the bytes.
pub(crate) fn request(p: &Proto, handler: HandlerId, payload: &[u8], asked: Asked) -> Result<(u64, Vec<u8>)> {
    let cell = send(p, handler, payload, asked.rank)?;
    answer(p, cell, &asked)
}

/// Takes a completion cell and sends the request with it as token; `answer` waits for the
/// response. Split so that a caller may have several requests in flight (pipelined gets).
pub(crate) fn send(p: &Proto, handler: HandlerId, payload: &[u8], rank: Rank) -> Result<u32> {
    loop {
        if let Some(cell) = try_send(p, handler, payload, rank)? {
            return Ok(cell);
        }
        p.am.progress();
    }
}

/// `send`, or None (nothing sent) while every completion cell is taken: a caller that holds
/// cells itself (non-blocking gets) must not wait for one here.
pub(crate) fn try_send(p: &Proto, handler: HandlerId, payload: &[u8], rank: Rank) -> Result<Option<u32>> {
    let Some(cell) = p.am.completions.take() else { return Ok(None) };
    match p.am.send(rank, handler, cell as u64, payload) {
        Ok(()) => Ok(Some(cell)),
        Err(e) => {
            p.am.completions.give_back(cell);
            Err(e)
        }
    }
}

/// Waits for the response to the request sent with `cell`, gives the cell back, and returns
/// the value and the bytes (or the target's refusal in the origin's words).
pub(crate) fn answer(p: &Proto, cell: u32, asked: &Asked) -> Result<(u64, Vec<u8>)> {
    let result = (|| {
        let c = p.am.completions.get(cell as u64).unwrap();
        p.am.wait_completion(c, asked.rank, &format!("the answer to a {}", asked.op))?;
        let value = c.value.load(Ordering::Relaxed);
        match c.status.load(Ordering::Relaxed) {
            0 => Ok((value, std::mem::take(&mut *c.data.lock().unwrap()))),
            code => {
                let said = std::mem::take(&mut *c.data.lock().unwrap());
                Err(rebuild_error(code, value, asked, &String::from_utf8_lossy(&said)))
            }
        }
    })();
    p.am.completions.give_back(cell);
    result
}

/// The target's refusal in the origin's words: the access as the origin asked for it, and the
/// target's own text (`said`) for errors that only the target can explain.
pub(crate) fn rebuild_error(code: i32, value: u64, a: &Asked, said: &str) -> Error {
    let (rank, addr, len) = (a.rank, a.addr, a.len);
    let refused = format!("rank {rank} refused the {} at {addr:#x}+{len}: {said}", a.op);
    match code {
        2 => Error::NotExposed { rank, addr, len },
        3 => Error::Protection { rank, addr, len, op: a.op, prot: Prot::describe(value as u32) },
        4 => Error::Misaligned { rank, addr },
        // Resource limits at the target (a pin over RLIMIT_MEMLOCK or the pin budget): callers
        // such as rendezvous fall back on this kind.
        7 => Error::OutOfResources(format!(
            "rank {rank} ran out of a resource serving the {} at {addr:#x}+{len} (for registration: its pinned-memory limit, RLIMIT_MEMLOCK / ACTIVERMA_PIN_LIMIT): {said}",
            a.op
        )),
        6 => Error::SizeLimit(refused),
        12 => Error::Unsupported(refused),
        _ => Error::InvalidArgument(refused),
    }
}

/// The target's side of an active flush from another host: every log's position when the
/// request arrived must be consumed before the answer goes back. It does not wait in the
/// handler (the drain may be suspended above it on this stack): it notes the positions still
/// ahead of their logs' tails and asks to be retried with them (`AmCtx::retry_later_with`)
/// until every log has caught up.
///
/// ```text
/// first run:  marks = [(slot, lane, reserved) for every lane of every log whose tail < reserved]
/// every run:  marks = [m for m in marks if tail(m.slot, m.lane) < m.upto]; empty ? answer : retry(marks)
/// ```
pub(crate) fn register_active_flush(am: &Am) -> Result<()> {
    let table = OwnTable::new(am.conduit().clone());
    am.register(
        ACTIVE_FLUSH,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = (|| {
                // No arena: no logs, nothing to wait for.
                let Some(logs) = table.get().logs_if_any()? else { return Ok(Vec::new()) };
                // A mark names a log's lane as slot << 32 | lane, and the position to reach.
                let marks: Vec<(u64, u64)> = if msg.is_empty() {
                    (0..activerma_access::MAX_LOGS)
                        .filter_map(|slot| logs.ring(slot).map(|r| (slot, r)))
                        .flat_map(|(slot, r)| (0..r.lanes()).map(move |lane| ((slot as u64) << 32 | lane as u64, r.reserved(lane))))
                        .collect()
                } else {
                    msg.chunks_exact(16)
                        .map(|m| (u64::from_le_bytes(m[..8].try_into().unwrap()), u64::from_le_bytes(m[8..].try_into().unwrap())))
                        .collect()
                };
                let behind = |key: u64, upto: u64| {
                    let (slot, lane) = ((key >> 32) as usize, (key & 0xffff_ffff) as usize);
                    logs.ring(slot).is_some_and(|r| lane < r.lanes() && r.tail(lane) < upto)
                };
                let ahead: Vec<u8> = marks
                    .into_iter()
                    .filter(|&(key, upto)| behind(key, upto))
                    .flat_map(|(key, upto)| [key.to_le_bytes(), upto.to_le_bytes()].concat())
                    .collect();
                Ok(ahead)
            })();
            match outcome {
                Ok(ahead) if !ahead.is_empty() => ctx.retry_later_with(ahead),
                outcome => respond(ctx, outcome.map(|_| (0, &[][..]))),
            }
        }),
    )
}

/// Active flush towards a rank whose logs we cannot see: ask it.
pub(crate) fn active_flush_remote(p: &Proto, rank: Rank) -> Result<()> {
    request(p, ACTIVE_FLUSH, &[], Asked { rank, addr: 0, len: 0, op: "active flush" }).map(|_| ())
}
