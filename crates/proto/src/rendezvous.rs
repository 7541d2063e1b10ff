//! Rendezvous registration: a put or get that finds unregistered pages in the target's private
//! memory asks the target to pin them (mlock) and mark them REGISTERED, then moves the data
//! zero-copy (put_cma / get_cma, or put_active / get_active on Active Access pages).
//!
//! ```text
//! origin (miss):                               target (REGISTER handler):
//!   drop the table lookup                        register(addr, len, per_op): pin the pages
//!   REGISTER(addr, len, per_op) ----------->       not registered yet, set REGISTERED
//!                               <-----------     reply: the exposure's generation | error
//!   check the table again: registered? zero-copy   (mlock over the limit -> OutOfResources)
//!   rendezvous-unpin: RELEASE(addr, len, gen) ->  release_registration: clear REGISTERED,
//!                                                 unpin pages nobody else holds (no reply)
//!   pin failure at the target: bounce (put_am / get_am) for this operation, counted
//! ```
//! The lookup is dropped before the request: holding a region's in-flight count while waiting
//! for the target could deadlock with a target that is in `unexpose` waiting for that count.
//! The second check may miss again only if the range was unexposed and exposed anew in
//! between; a few retries, then the operation bounces (always correct).
//! Without unpin, registered pages stay pinned until their range is unexposed: a registration
//! cache with no staleness (unexpose invalidates) bounded by RLIMIT_MEMLOCK / ACTIVERMA_PIN_LIMIT.

use crate::am_request::{self, respond, Asked};
use crate::{registered_move, Proto};
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, RegistrationStats, TargetTable};
use std::sync::Arc;

/// Handler ids (6 is remote_marks.rs).
pub const REGISTER: HandlerId = 7;
pub const RELEASE: HandlerId = 8;

/// Re-registrations tried when the range was exposed anew under us, before bouncing.
const TRIES: usize = 3;

fn words(msg: &[u8]) -> Option<[u64; 3]> {
    (msg.len() == 24).then(|| std::array::from_fn(|i| u64::from_le_bytes(msg[i * 8..i * 8 + 8].try_into().unwrap())))
}

fn encode(w: [u64; 3]) -> [u8; 24] {
    let mut m = [0u8; 24];
    for (i, v) in w.iter().enumerate() {
        m[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    m
}

/// The target's side; needs its own table (registered after the table exists, before the
/// job's first barrier).
pub(crate) fn register(am: &Am, table: Arc<TargetTable>) -> Result<()> {
    let t = table.clone();
    am.register(
        REGISTER,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome =
                words(msg).ok_or_else(|| Error::InvalidArgument("malformed register request".into())).and_then(|[addr, len, per_op]| {
                    RegistrationStats::add(&t.registrar().stats().registers_served, 1);
                    let gen = t.register(addr as usize, len as usize, per_op != 0)?;
                    Ok((gen, &[][..]))
                });
            respond(ctx, outcome);
        }),
    )?;
    am.register(
        RELEASE,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            // One-way: the origin does not wait for its registration to be dropped.
            let Some([addr, len, gen]) = words(msg) else { return };
            RegistrationStats::add(&table.registrar().stats().releases_served, 1);
            if let Err(e) = table.release_registration(addr as usize, len as usize, gen) {
                eprintln!(
                    "activerma: rank {}: unpinning {addr:#x}+{len} after a rendezvous from rank {} failed: {e}",
                    ctx.am().conduit().rank(),
                    ctx.src
                );
            }
        }),
    )
}

/// Registers, moves zero-copy (`run(Some(choice))`) and, under rendezvous-unpin, releases; or
/// bounces (`run(None)`) when the target cannot pin. `[addr, addr+len)` may be the bounding
/// range of a list of pieces that `run` moves all at once (noncontig.rs).
pub(crate) fn transfer(
    p: &Proto,
    rank: Rank,
    addr: usize,
    len: usize,
    kind: AccessKind,
    run: &mut registered_move::MoveWith,
) -> Result<()> {
    let per_op = p.strategy.unpins_after_op();
    let op = if kind == AccessKind::Put { "put" } else { "get" };
    for _ in 0..TRIES {
        bump(&p.reg_stats.rendezvous_requests, 1);
        let asked = Asked { rank, addr, len, op };
        let gen = match am_request::request(p, REGISTER, &encode([addr as u64, len as u64, per_op as u64]), asked) {
            Ok((gen, _)) => gen,
            Err(Error::OutOfResources(why)) => {
                bump(&p.reg_stats.rendezvous_fallbacks, 1);
                if p.verbose {
                    eprintln!("activerma: rank {} -> rank {rank}: rendezvous fell back to bounce: {why}", p.conduit.rank());
                }
                break;
            }
            Err(e) => return Err(e),
        };
        let moved = registered_move::try_zero_copy(p, rank, addr, len, kind, run);
        if per_op {
            bump(&p.reg_stats.rendezvous_releases, 1);
            p.am.send(rank, RELEASE, 0, &encode([addr as u64, len as u64, gen]))?;
        }
        if let Some(r) = moved {
            return r;
        }
    }
    bump(&p.reg_stats.bounce_ops, 1);
    run(None)
}

pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    transfer(p, rank, addr, src.len(), AccessKind::Put, &mut |c| registered_move::put(p, rank, addr, src, c))
}

pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    transfer(p, rank, addr, dst.len(), AccessKind::Get, &mut |c| registered_move::get(p, rank, addr, dst, c))
}
