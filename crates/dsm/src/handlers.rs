//! The home's side of every request, and the requester's side of every answer: active-message
//! handlers, registered by every rank when it makes its `Dsm`.

use crate::diff;
use crate::diff_array;
use crate::global_ref::GlobalRef;
use crate::shared::Shared;
use crate::update_in_place;
use crate::wire::{self, word};
use activerma::{AmCtx, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

type Body = dyn Fn(&Shared, &AmCtx, &[u8]) + Send + Sync;

fn register(s: &Arc<Shared>, id: u16, f: impl Fn(&Shared, &AmCtx, &[u8]) + Send + Sync + 'static) -> Result<()> {
    let (s, f): (Arc<Shared>, Box<Body>) = (s.clone(), Box::new(f));
    s.w.clone().register_handler(
        id,
        Arc::new(move |ctx: &AmCtx, p: &[u8]| {
            f(&s, ctx, p);
            s.mail.notify();
        }),
    )
}

fn reference(p: &[u8]) -> GlobalRef {
    GlobalRef::from_bits(word(p, 0).unwrap_or(u64::MAX))
}

pub(crate) fn install(s: &Arc<Shared>) -> Result<()> {
    register(s, wire::FETCH, serve_fetch)?;
    register(s, wire::REPLY, |s, ctx, p| *s.mail.reply.lock().unwrap() = Some((ctx.token, p.to_vec())))?;
    register(s, wire::DIFF, apply_diff)?;
    register(s, wire::DIFF_ACK, |s, _, p| {
        if let Err(why) = wire::body(p) {
            s.mail.diff_refusals.lock().unwrap().push(why);
        }
        s.mail.diff_acks.fetch_add(1, Ordering::AcqRel);
    })?;
    register(s, wire::LOCK, |s, ctx, p| {
        let r = reference(p);
        let rp = r.to_bits().to_le_bytes();
        match s.home.lock().unwrap().lock(r, ctx.src) {
            Ok(true) => ctx.reply(wire::GRANT, 0, &wire::ok(&rp, &[])),
            Ok(false) => {}
            Err(why) => ctx.reply(wire::GRANT, 0, &wire::refused(&rp, &why)),
        }
    })?;
    register(s, wire::UNLOCK, |s, ctx, p| hand_on(s, ctx, p, false))?;
    register(s, wire::WAIT, |s, ctx, p| hand_on(s, ctx, p, true))?;
    register(s, wire::NOTIFY, |s, ctx, p| {
        let r = reference(p);
        if let Err(why) = s.home.lock().unwrap().notify(r, ctx.src, p.get(8) == Some(&1)) {
            ctx.reply(wire::FAILED, 0, &wire::refused(&[], &why));
        }
    })?;
    register(s, wire::GRANT, |s, _, p| {
        s.mail.grant(reference(p), wire::body(&p[8..]).map(|_| ()));
    })?;
    register(s, wire::ALLOC, |s, ctx, p| {
        let (bytes, chunk) = (word(p, 0).unwrap_or(0) as usize, word(p, 1).unwrap_or(0) as usize);
        let answer = match s.alloc_here(bytes, Some(chunk).filter(|&c| c > 0)) {
            Ok((r, _)) => wire::ok(&[], &r.to_bits().to_le_bytes()),
            Err(e) => wire::refused(&[], &e.to_string()),
        };
        ctx.reply(wire::ANSWER, 0, &answer);
    })?;
    register(s, wire::FREE, |s, ctx, p| {
        let answer = match s.free_here(reference(p)) {
            Ok(()) => wire::ok(&[], &[]),
            Err(why) => wire::refused(&[], &why),
        };
        ctx.reply(wire::ANSWER, 0, &answer);
    })?;
    register(s, wire::FREED_NOTICE, |s, ctx, p| {
        s.note_freed(reference(p));
        ctx.reply(wire::NOTICE_ACK, 0, &[]);
    })?;
    register(s, wire::NOTICE_ACK, |s, _, _| {
        s.mail.notice_acks.fetch_add(1, Ordering::AcqRel);
    })?;
    register(s, wire::ANSWER, |s, _, p| *s.mail.answer.lock().unwrap() = Some(p.to_vec()))?;
    register(s, wire::JOIN, |s, ctx, p| {
        let answer = match s.home.lock().unwrap().region(reference(p)) {
            Ok(g) => match g.place.meta {
                Some(meta) => wire::ok(&[], &wire::words(&[g.place.len as u64, meta as u64])),
                None => wire::refused(&[], "the region has no copy set (not an update-in-place run)"),
            },
            Err(why) => wire::refused(&[], &why),
        };
        ctx.reply(wire::ANSWER, 0, &answer);
    })?;
    register(s, wire::SUBSCRIBE, |s, ctx, p| {
        let copy = word(p, 1).unwrap_or(0) as usize;
        match update_in_place::serve_subscribe(s, ctx, reference(p), copy) {
            Ok(true) => ctx.reply(wire::ANSWER, 0, &wire::ok(&[], &[])),
            Ok(false) => ctx.retry_later(), // a writer holds the region: after its release
            Err(why) => ctx.reply(wire::ANSWER, 0, &wire::refused(&[], &why)),
        }
    })?;
    register(s, wire::FAILED, |s, _, p| {
        s.mail.failures.lock().unwrap().push(wire::body(p).err().unwrap_or_default());
    })?;
    if s.arrays.is_some() {
        let s = s.clone();
        s.w.clone().add_progress_hook(Arc::new(move || diff_array::receive(&s)))?;
    }
    Ok(())
}

/// FETCH: the region's bytes back to the requester — put into its receive buffer (the RDMA
/// reply: the body first, then the sequence word it spins on) when it named one that holds
/// them, else as a message.
fn serve_fetch(s: &Shared, ctx: &AmCtx, p: &[u8]) {
    let (r, seq) = (reference(p), word(p, 1).unwrap_or(0));
    let (buffer, cap) = (word(p, 2).unwrap_or(wire::NONE), word(p, 3).unwrap_or(0) as usize);
    if let Some(a) = &s.arrays {
        let theirs: Vec<u64> = (0..s.n).map(|m| word(p, 4 + m).unwrap_or(0)).collect();
        if !a.caught_up(s, &theirs) {
            ctx.retry_later(); // the master misses arrays the requester has applied
            return;
        }
    }
    let body = {
        let home = s.home.lock().unwrap();
        match home.region(r) {
            Ok(g) => {
                let mut object = (g.place.len as u64).to_le_bytes().to_vec();
                // SAFETY: a live region's bytes lie in this heap.
                object.extend_from_slice(unsafe { s.heap.bytes(g.place.off, g.place.len) });
                Ok(wire::ok(&[], &object))
            }
            Err(why) => Err(wire::refused(&[], &why)),
        }
    };
    let body = match body {
        Ok(body) if buffer != wire::NONE && wire::RDMA_FLAG + body.len() <= cap => {
            let at = buffer as usize;
            let put = s.w.put(s.heap.remote(ctx.src, at + wire::RDMA_FLAG), &body);
            if put.and_then(|_| s.w.put(s.heap.remote(ctx.src, at), &seq.to_le_bytes())).is_ok() {
                return;
            }
            body
        }
        Ok(body) | Err(body) => body,
    };
    ctx.reply(wire::REPLY, seq, &body);
}

/// DIFF: a writer's changes into the master copy.
fn apply_diff(s: &Shared, ctx: &AmCtx, p: &[u8]) {
    let r = reference(p);
    let outcome = {
        let home = s.home.lock().unwrap();
        home.region(r).and_then(|g| {
            // SAFETY: a live region's bytes; diffs of one region are applied one at a time
            // (under the home's lock), and the program's own writes at the home touch other
            // bytes (multiple writers write disjoint bytes in one interval).
            diff::apply(&p[8..], unsafe { s.heap.bytes_mut(g.place.off, g.place.len) })
        })
    };
    let answer = match outcome {
        Ok(()) => wire::ok(&[], &[]),
        Err(why) => wire::refused(&[], &why),
    };
    ctx.reply(wire::DIFF_ACK, 0, &answer);
}

/// UNLOCK and WAIT: the lock passes to the next rank in line.
fn hand_on(s: &Shared, ctx: &AmCtx, p: &[u8], wait: bool) {
    let r = reference(p);
    let next = {
        let mut home = s.home.lock().unwrap();
        if wait {
            home.wait(r, ctx.src)
        } else {
            home.unlock(r, ctx.src)
        }
    };
    match next {
        Ok(Some(to)) => {
            let _ = s.grant(Some(ctx), to, r);
        }
        Ok(None) => {}
        Err(why) => ctx.reply(wire::FAILED, 0, &wire::refused(&[], &why)),
    }
}
