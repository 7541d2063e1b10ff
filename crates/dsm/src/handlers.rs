//! The home's side of every request, and the requester's side of every answer: active-message
//! handlers, registered by every rank when it makes its `Dsm`.

use crate::diff;
use crate::diff_array;
use crate::global_ref::GlobalRef;
use crate::home::{Entry, Grant};
use crate::shared::{Shared, Via};
use crate::update_in_place;
use crate::wire::{self, word};
use activerma::{AmCtx, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

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
        // Answered with the home table still locked: messages in the order of its changes.
        let mut home = s.home.lock().unwrap();
        match home.lock(r, ctx.src, &Instant::now) {
            Ok(Entry::Now { wanted, .. }) => s.grant(Via::Handler(ctx), Grant { to: ctx.src, wanted }, r),
            Ok(Entry::Handed(g)) => s.grant(Via::Handler(ctx), g, r),
            Ok(Entry::Queued { recall: Some(owner) }) => s.post_ref(Via::Handler(ctx), owner, wire::RECALL, r),
            Ok(Entry::Queued { recall: None }) => {}
            Err(why) => ctx.reply(wire::GRANT, 0, &wire::refused(&rp, &why)),
        }
    })?;
    register(s, wire::UNLOCK, |s, ctx, p| hand_on(s, ctx, p, false))?;
    register(s, wire::WAIT, |s, ctx, p| hand_on(s, ctx, p, true))?;
    register(s, wire::NOTIFY, |s, ctx, p| {
        let r = reference(p);
        let mut home = s.home.lock().unwrap();
        match home.notify(r, ctx.src, p.get(8) == Some(&1)) {
            Ok(Some(owner)) => s.post_ref(Via::Handler(ctx), owner, wire::RECALL, r),
            Ok(None) => {}
            Err(why) => ctx.reply(wire::FAILED, 0, &wire::refused(&[], &why)),
        }
    })?;
    register(s, wire::GRANT, |s, _, p| {
        let (r, body) = (reference(p), wire::body(&p[8..]));
        if let Ok(wanted) = &body {
            // Kept from here on: a RECALL right behind this grant finds it.
            s.locks.granted(r, Instant::now(), wanted.first() == Some(&1));
        }
        s.mail.grant(r, body.map(drop));
    })?;
    register(s, wire::RECALL, |s, ctx, p| {
        s.locks.recall(reference(p), |r| s.post_ref(Via::Handler(ctx), ctx.src, wire::UNLOCK, r));
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
    register(s, wire::PLACE, |s, ctx, p| {
        let answer = match s.home.lock().unwrap().region(reference(p)) {
            Ok(g) => wire::ok(&[], &wire::words(&[g.place.off as u64, g.place.len as u64])),
            Err(why) => wire::refused(&[], &why),
        };
        ctx.reply(wire::ANSWER, 0, &answer);
    })?;
    register(s, wire::PING, |_, ctx, _| ctx.reply(wire::ANSWER, 0, &wire::ok(&[], &[])))?;
    register(s, wire::DIFF_PAGE, |s, ctx, p| {
        let answer = match crate::mirrors::apply_page_diff(s, p) {
            Ok(()) => wire::ok(&[], &[]),
            Err(why) => wire::refused(&[], &why),
        };
        ctx.reply(wire::DIFF_ACK, 0, &answer);
    })?;
    register(s, wire::FAILED, |s, _, p| {
        s.mail.failures.lock().unwrap().push(wire::body(p).err().unwrap_or_default());
    })?;
    let s = s.clone();
    s.w.clone().add_progress_hook(Arc::new(move || {
        let arrays = if s.arrays.is_some() { diff_array::receive(&s) } else { 0 };
        arrays + hand_on_kept_locks(&s)
    }))?;
    Ok(())
}

/// The progress step's part of lock caching: locks this rank kept idle at its unlock although
/// another rank wants them (their lease was not over) go on now, unless taken again since.
/// Posted, not sent: a progress hook must not block.
fn hand_on_kept_locks(s: &Shared) -> usize {
    // A load first: the idle progress step takes no locked instruction.
    if !s.locks_wanted.load(Ordering::Acquire) {
        return 0;
    }
    // Every KEPT_LOOK_EVERY-th step only: the owner's loop must get to leave its lock a few
    // times between two looks (one look with no leave in between means it stopped), and
    // the owner's own steps (one per lock it takes) must not pay for a look each.
    if !s.kept_looks.fetch_add(1, Ordering::Relaxed).is_multiple_of(KEPT_LOOK_EVERY) || !s.locks_wanted.swap(false, Ordering::AcqRel) {
        return 0;
    }
    let mut handed = 0;
    let pending_here = {
        let mut home = s.home.lock().unwrap();
        for (r, g) in home.hand_on_idle(&Instant::now) {
            s.grant(Via::Post, g, r);
            handed += 1;
        }
        home.has_idle_wanted()
    };
    let pending_cached = s.locks.take_recalled_idle(Instant::now(), |r| {
        s.post_ref(Via::Post, r.home(), wire::UNLOCK, r);
        handed += 1;
    });
    if pending_here || pending_cached {
        s.locks_wanted.store(true, Ordering::Release); // look again a few steps on
    }
    handed
}

/// How many progress steps apart the hook looks at locks kept while others wait.
const KEPT_LOOK_EVERY: u64 = 64;

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
    let mut home = s.home.lock().unwrap();
    let next = if wait { home.wait(r, ctx.src, &Instant::now) } else { home.unlock(r, ctx.src, &Instant::now) };
    match next {
        Ok(Some(g)) => s.grant(Via::Handler(ctx), g, r),
        Ok(None) => {}
        Err(why) => ctx.reply(wire::FAILED, 0, &wire::refused(&[], &why)),
    }
}
