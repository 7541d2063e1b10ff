//! get_am: the reference path for reading memory the origin cannot reach itself: the target's
//! progress engine checks its table and answers with the bytes.

use crate::am_request::{self, Asked, OwnTable, GET};
use crate::Proto;
use activerma_access::log_append::{self, Logged};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::AccessKind;
use std::sync::Arc;

pub(crate) fn register(am: &Am) -> Result<()> {
    let table = OwnTable::new(am.conduit().clone());
    am.register(
        GET,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            // Some(bytes), or None: a log to append to is full, retry later (see put_am::apply).
            let outcome = (|| {
                if msg.len() != 24 {
                    return Err(Error::InvalidArgument("malformed get request".into()));
                }
                let addr = u64::from_le_bytes(msg[..8].try_into().unwrap()) as usize;
                let len = u64::from_le_bytes(msg[8..16].try_into().unwrap()) as usize;
                let seq = u64::from_le_bytes(msg[16..].try_into().unwrap());
                Ok(serve(&table, ctx, addr, len, seq)?.map(|bytes| (0, bytes)))
            })();
            match outcome.transpose() {
                None => ctx.retry_later(),
                Some(answer) => am_request::respond(ctx, answer),
            }
        }),
    )
}

/// The target's side of a get of `len` bytes at `addr` for `ctx.src`: checked against our
/// table, and on Active Access pages logged as served (`seq`: the origin's sequence number);
/// the bytes to answer with, or None when a log to append to is full (the handler then asks
/// to be retried, see put_am::apply).
pub(crate) fn serve<'m>(table: &OwnTable, ctx: &AmCtx, addr: usize, len: usize, seq: u64) -> Result<Option<&'m [u8]>> {
    let lookup = table.check(addr, len, AccessKind::Get)?;
    // SAFETY: the table says [addr, addr+len) is our memory, exposed readable.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
    if lookup.active {
        let l = Logged::at_target(table.get(), &lookup, ctx.am().conduit().rank(), ctx.src, seq);
        if !log_append::has_room(&l, LogOp::Get, addr, len)? {
            return Ok(None);
        }
        let mut w = activerma_am::Waiter::default();
        log_append::get(&l, addr, bytes, &mut || w.step_in_handler(ctx.am(), ctx.src, "room in an access log"))?;
    }
    Ok(Some(bytes))
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    let cell = am_request::send(p, GET, &request(p, rank, addr, dst.len()), rank)?;
    receive(p, rank, addr, cell, dst)
}

/// Sends the request for `len` bytes at `addr`, or None while every completion cell is taken;
/// `receive` waits for the answer. Split so that non-blocking gets (transfer.rs) keep several
/// in flight.
pub(crate) fn try_ask(p: &Proto, rank: Rank, addr: usize, len: usize) -> Result<Option<u32>> {
    am_request::try_send(p, GET, &request(p, rank, addr, len), rank)
}

/// The request: address, length, and this origin's next sequence number there (Active Access
/// logs order by it).
fn request(p: &Proto, rank: Rank, addr: usize, len: usize) -> [u8; 24] {
    let mut msg = [0u8; 24];
    msg[..8].copy_from_slice(&(addr as u64).to_le_bytes());
    msg[8..16].copy_from_slice(&(len as u64).to_le_bytes());
    msg[16..].copy_from_slice(&p.next_seq(rank).to_le_bytes());
    msg
}

/// Waits for the answer to the request for `dst.len()` bytes at `addr` sent with `cell`, and
/// copies it to `dst`.
pub(crate) fn receive(p: &Proto, rank: Rank, addr: usize, cell: u32, dst: &mut [u8]) -> Result<()> {
    let (_, bytes) = am_request::answer(p, cell, &Asked { rank, addr, len: dst.len(), op: "get" })?;
    if bytes.len() != dst.len() {
        return Err(Error::InvalidArgument(format!("rank {rank} answered a get of {} bytes with {}", dst.len(), bytes.len())));
    }
    dst.copy_from_slice(&bytes);
    bump(&p.counters.get_am, 1);
    bump(&p.counters.bytes_got, dst.len() as u64);
    Ok(())
}
