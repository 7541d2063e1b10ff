//! put_am: the reference path for memory the origin cannot reach itself (private memory of a
//! rank on another host): the data travels in an active message and the target's progress
//! engine checks its table and copies it in (or, on pages marked for Active Access, does what
//! their bits say: `log_append`). Returns when the target has written or logged the data.

use crate::am_request::{self, Asked, OwnTable, PUT};
use crate::log_append::{self, Logged};
use crate::Proto;
use activerma_am::{Am, AmCtx};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::AccessKind;
use std::sync::Arc;

pub(crate) fn register(am: &Am) -> Result<()> {
    let table = OwnTable::new(am.conduit().clone());
    am.register(
        PUT,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = (|| {
                let head = msg.get(..16).ok_or_else(|| Error::InvalidArgument("malformed put request".into()))?;
                let addr = u64::from_le_bytes(head[..8].try_into().unwrap()) as usize;
                let seq = u64::from_le_bytes(head[8..].try_into().unwrap());
                let data = &msg[16..];
                let lookup = table.check(addr, data.len(), AccessKind::Put)?;
                let mut write = |at: usize, bytes: &[u8]| {
                    // SAFETY: the table says this range is our memory, exposed writable.
                    unsafe { std::ptr::copy(bytes.as_ptr(), at as *mut u8, bytes.len()) };
                    Ok(())
                };
                if lookup.active {
                    let me = ctx.am().conduit().rank();
                    let l =
                        Logged { table: table.get(), lookup: &lookup, target: me, origin: ctx.src, seq, log_ns: 0, translate_log: None }; // the IOMMU model is charged by origins on one host
                    let mut w = activerma_am::Waiter::default();
                    log_append::put(&l, addr, data, &mut write, &mut || w.step_in_handler(ctx.am(), ctx.src, "room in an access log"))?;
                } else {
                    write(addr, data)?;
                }
                Ok((0, &[][..]))
            })();
            am_request::respond(ctx, outcome);
        }),
    )
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    let mut msg = Vec::with_capacity(16 + src.len());
    msg.extend_from_slice(&(addr as u64).to_le_bytes());
    msg.extend_from_slice(&p.next_seq(rank).to_le_bytes());
    msg.extend_from_slice(src);
    am_request::request(p, PUT, &msg, Asked { rank, addr, len: src.len(), op: "put" })?;
    bump(&p.counters.put_am, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}
