//! put_am: the reference path for memory the origin cannot reach itself (private memory of a
//! rank on another host, segment pages another host marked for Active Access): the data
//! travels in an active message and the target's progress engine checks its table and copies
//! it in (or, on pages marked for Active Access, does what their bits say: `log_append`).
//!
//! Two ways to ask:
//! - `run` (blocking puts, handles): request/response, returns once the target wrote or
//!   logged the data, with the target's error if it refused.
//! - `post` (implicit non-blocking puts): the message goes out and the origin moves on; the
//!   target acknowledges each one, and `flush` / `flush_all` / `fence` / `active_flush` wait
//!   for every acknowledgement to that target and report the first refusal. One round trip
//!   per put would cap a DHT's inserts at one per round trip (2k/s with 3 ranks on 2 CPUs).
//!   Messages of one pair run in order, so posted puts land in the order they were issued.
//!   At most MAX_POSTED_PER_TARGET are unacknowledged per target (back-pressure).
//!
//! ```text
//! origin  post:  outstanding[t] += 1; send PUT_POSTED(addr, seq, data)
//! target:        outcome = apply(addr, data); send PUT_POSTED_ACK(status, bits, addr, len)
//! origin  ack:   if status != 0 and no error yet: first_error = rebuilt error; outstanding[src] -= 1
//! origin  flush(t): progress until outstanding[t] == 0; return first_error.take()
//! ```

use crate::am_request::{self, Asked, OwnTable, PUT};
use crate::Proto;
use activerma_access::log_append::{self, Logged};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::AccessKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Posted puts one origin may have unacknowledged at one target: past it the origin waits
/// (making progress), so a target that parks them for a full log holds a bounded number.
const MAX_POSTED_PER_TARGET: u64 = 1024;

pub const PUT_POSTED: HandlerId = 16;
pub const PUT_POSTED_ACK: HandlerId = 17;

/// Per target: posted puts it has not acknowledged yet, and the first refusal among them.
pub struct PostedPuts {
    outstanding: Vec<AtomicU64>,
    first_error: Vec<Mutex<Option<Error>>>,
}

impl PostedPuts {
    pub fn new(ranks: usize) -> PostedPuts {
        PostedPuts {
            outstanding: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            first_error: (0..ranks).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Forgets what was posted to `rank` (a process that died: its acknowledgements never
    /// come, and what it had not applied is for the program's recovery to replay).
    pub(crate) fn forget(&self, rank: Rank) {
        self.outstanding[rank].store(0, Ordering::Release);
        self.first_error[rank].lock().unwrap().take();
    }

    #[inline]
    pub(crate) fn any_to(&self, rank: Rank) -> bool {
        self.outstanding[rank].load(Ordering::Acquire) != 0
    }
}

/// The target's side, shared by both ways: checks the access and writes or logs it. Returns
/// false, having done nothing, when a log it must append to is full: the handler then asks to
/// be retried rather than wait here for a drain that may be suspended above it on this stack.
fn apply(table: &OwnTable, ctx: &AmCtx, msg: &[u8]) -> Result<bool> {
    let head = msg.get(..16).ok_or_else(|| Error::InvalidArgument("malformed put request".into()))?;
    let addr = u64::from_le_bytes(head[..8].try_into().unwrap()) as usize;
    let seq = u64::from_le_bytes(head[8..].try_into().unwrap());
    apply_at(table, ctx, addr, seq, &msg[16..])
}

/// `apply` of `data` to `addr`, wherever the bytes wait (in the message, or in the landing
/// zone: landing.rs); `seq` is the origin's sequence number for Active Access logs.
pub(crate) fn apply_at(table: &OwnTable, ctx: &AmCtx, addr: usize, seq: u64, data: &[u8]) -> Result<bool> {
    let lookup = table.check(addr, data.len(), AccessKind::Put)?;
    let mut write = |at: usize, bytes: &[u8]| {
        // SAFETY: the table says this range is our memory, exposed writable.
        unsafe { activerma_core::copy::copy_bytes(bytes.as_ptr(), at as *mut u8, bytes.len()) };
        Ok(())
    };
    if lookup.active {
        let l = Logged::at_target(table.get(), &lookup, ctx.am().conduit().rank(), ctx.src, seq);
        if !log_append::has_room(&l, LogOp::Put, addr, data.len())? {
            return Ok(false);
        }
        let mut w = activerma_am::Waiter::default();
        log_append::put(&l, addr, data, false, &mut write, &mut || w.step_in_handler(ctx.am(), ctx.src, "room in an access log"))?;
    } else {
        write(addr, data)?;
    }
    Ok(true)
}

pub(crate) fn register(am: &Am, posted: Arc<PostedPuts>) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    let t = table.clone();
    am.register(
        PUT,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| match apply(&t, ctx, msg) {
            Ok(false) => ctx.retry_later(),
            outcome => am_request::respond(ctx, outcome.map(|_| (0, &[][..]))),
        }),
    )?;
    am.register(
        PUT_POSTED,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = apply(&table, ctx, msg);
            if let Ok(false) = outcome {
                return ctx.retry_later();
            }
            let addr = msg.get(..8).map_or(0, |a| u64::from_le_bytes(a.try_into().unwrap()) as usize);
            acknowledge(ctx, PUT_POSTED_ACK, 0, outcome.map(drop), addr, msg.len().saturating_sub(16));
        }),
    )?;
    am.register(PUT_POSTED_ACK, Arc::new(move |ctx: &AmCtx, ack: &[u8]| acknowledged(&posted, ctx.src, ack)))
}

/// The target's acknowledgement of a posted put of `len` bytes at `addr` (its outcome; the
/// address and length go back too, for the origin's error), sent to `handler` with `token`.
pub(crate) fn acknowledge(ctx: &AmCtx, handler: HandlerId, token: u64, outcome: Result<()>, addr: usize, len: usize) {
    let said = outcome.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
    let (status, bits) = am_request::status_of(outcome);
    let (addr, len) = ((addr as u64).to_le_bytes(), (len as u64).to_le_bytes());
    ctx.reply(handler, token, &am_request::encode_outcome(status, bits, &[&addr, &len, said.as_bytes()]));
}

/// The origin's side of `acknowledge`: one posted put to `src` fewer outstanding, and its
/// refusal kept for the next flush if it is the first.
pub(crate) fn acknowledged(posted: &PostedPuts, src: Rank, ack: &[u8]) {
    let (status, bits, rest) = am_request::decode_outcome(ack);
    if status != 0 {
        let word = |i: usize| rest.get(i..i + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
        let asked = Asked { rank: src, addr: word(0) as usize, len: word(8) as usize, op: "put" };
        let mut first = posted.first_error[src].lock().unwrap();
        let said = String::from_utf8_lossy(rest.get(16..).unwrap_or_default());
        first.get_or_insert(am_request::rebuild_error(status, bits, &asked, &said));
    }
    // Saturating: after `forget` (the target died) a late acknowledgement of the dead
    // process finds nothing outstanding.
    let _ = posted.outstanding[src].fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}

fn message(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(16 + src.len());
    msg.extend_from_slice(&(addr as u64).to_le_bytes());
    msg.extend_from_slice(&p.next_seq(rank).to_le_bytes());
    msg.extend_from_slice(src);
    msg
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    am_request::request(p, PUT, &message(p, rank, addr, src), Asked { rank, addr, len: src.len(), op: "put" })?;
    bump(&p.counters.put_am, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}

/// An implicit non-blocking put: sent, not waited for (see the module doc).
pub(crate) fn post(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    send_posted(p, rank, PUT_POSTED, 0, &message(p, rank, addr, src))?;
    bump(&p.counters.put_am, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}

/// Sends a message whose handler acknowledges it as a posted put (`acknowledge`), counted
/// outstanding until then, at most MAX_POSTED_PER_TARGET per target.
pub(crate) fn send_posted(p: &Proto, rank: Rank, handler: HandlerId, token: u64, msg: &[u8]) -> Result<()> {
    let outstanding = &p.posted.outstanding[rank];
    if outstanding.load(Ordering::Acquire) >= MAX_POSTED_PER_TARGET {
        p.am.wait_until(|| outstanding.load(Ordering::Acquire) < MAX_POSTED_PER_TARGET, rank, "acknowledgements of posted puts")?;
    }
    outstanding.fetch_add(1, Ordering::AcqRel);
    if let Err(e) = p.am.send(rank, handler, token, msg) {
        outstanding.fetch_sub(1, Ordering::AcqRel);
        return Err(e);
    }
    Ok(())
}

/// Waits until `rank` (every rank: None) acknowledged every put posted to it, then reports
/// the first refusal among them, if any.
pub(crate) fn wait_acknowledged(p: &Proto, rank: Option<Rank>) -> Result<()> {
    let ranks = match rank {
        Some(r) => r..r + 1,
        None => 0..p.posted.outstanding.len(),
    };
    let mut refused = None;
    for r in ranks {
        if p.posted.any_to(r) {
            p.am.wait_until(|| !p.posted.any_to(r), r, "acknowledgements of posted puts")?;
        }
        let e = p.posted.first_error[r].lock().unwrap().take();
        refused = refused.or(e);
    }
    refused.map_or(Ok(()), Err)
}
