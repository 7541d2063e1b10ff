//! put_am: the reference path for memory the origin cannot reach itself (private memory of a
//! rank on another host): the data travels in an active message and the target's progress
//! engine checks its table and copies it in. Returns when the target has written the data.

use crate::am_request::{self, Asked, OwnTable, PUT};
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
                let addr = u64::from_le_bytes(
                    msg.get(..8).ok_or_else(|| Error::InvalidArgument("malformed put request".into()))?.try_into().unwrap(),
                ) as usize;
                let data = &msg[8..];
                let _inside = table.check(addr, data.len(), AccessKind::Put)?;
                // SAFETY: the table says [addr, addr+len) is our memory, exposed writable.
                unsafe { std::ptr::copy(data.as_ptr(), addr as *mut u8, data.len()) };
                Ok((0, &[][..]))
            })();
            am_request::respond(ctx, outcome);
        }),
    )
}

pub(crate) fn run(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    let mut msg = Vec::with_capacity(8 + src.len());
    msg.extend_from_slice(&(addr as u64).to_le_bytes());
    msg.extend_from_slice(src);
    am_request::request(p, PUT, &msg, Asked { rank, addr, len: src.len(), op: "put" })?;
    bump(&p.counters.put_am, 1);
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(())
}
