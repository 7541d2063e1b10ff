//! Rendezvous across hosts: a put or get of at least ACTIVERMA_RMA_RENDEZVOUS_MIN bytes (256
//! KiB), to private memory of a rank on another host, registers the range at the target and
//! then moves with the conduit's one-sided engine (MPI: `MPI_Put` / `MPI_Get` on the dynamic
//! window), instead of travelling through the target's CPU in fragments (put_am / get_am).
//! Smaller transfers stay eager: the handshake and, on Open MPI's osc/ucx, the dynamic
//! window's own per-access round trips (fetching the target's region table, its lock) cost
//! more than the copies they save (docs/design/mpi-conduit.md has the numbers).
//!
//! ```text
//! origin                                            target (REGISTER_RMA handler)
//!   REGISTER_RMA(addr, len, flags) ---------->        check its table: exposed, protection,
//!                                                       no Active Access page (those only
//!                                                       the target can apply: refused)
//!                                                     hold the exposure; register it with the
//!                                                       conduit once (MPI: Win_attach of the
//!                                                       whole exposed range)
//!                                                     rendezvous strategies: pin + REGISTERED
//!                                                       as on one host (table.register)
//!                                  <----------        reply: the exposure's generation | error
//!   one-sided put (remote complete) / get
//!   RELEASE_RMA(addr, len, gen, flags) ------>        drop the hold; rendezvous-unpin: unpin
//!   refused for a resource (attach or pin limit, Active Access pages): bounce, counted
//!
//! unexpose (target): mark the exposure closing (new requests: NotExposed), run handlers until
//!   no origin holds it, deregister it from the conduit, the table's own unexpose, forget it.
//! ```
//! The exposures, their conduit registration and holds: rma_exposures.rs.

use crate::am_request::{self, respond, Asked, OwnTable};
use crate::rma_exposures::RmaExposures;
use crate::{get_am, put_am, rma_conduit, Proto};
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, RegistrationStats, Strategy, TargetTable};
use std::sync::Arc;

/// Handler ids (13 is firehose.rs).
pub const REGISTER_RMA: HandlerId = 14;
pub const RELEASE_RMA: HandlerId = 15;

/// Request flags: the registration is for one operation (rendezvous-unpin); the access writes.
const PER_OP: u64 = 1;
const WRITE: u64 = 2;

pub(crate) fn words<const N: usize>(msg: &[u8]) -> Option<[u64; N]> {
    (msg.len() == N * 8).then(|| std::array::from_fn(|i| u64::from_le_bytes(msg[i * 8..i * 8 + 8].try_into().unwrap())))
}

pub(crate) fn encode<const N: usize>(w: [u64; N]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The target's side; made with its table, before the job's first barrier. The returned
/// registry is what `unexpose` closes exposures through.
pub(crate) fn register(am: &Am, table: Arc<TargetTable>) -> Result<Arc<RmaExposures>> {
    let exposures = Arc::new(RmaExposures::new(am.conduit().clone(), table.clone()));
    let (own, x, t) = (OwnTable::new(am.conduit().clone()), exposures.clone(), table.clone());
    am.register(
        REGISTER_RMA,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = (|| {
                let [addr, len, flags] = words(msg).ok_or_else(|| Error::InvalidArgument("malformed register request".into()))?;
                let (addr, len) = (addr as usize, len as usize);
                let kind = if flags & WRITE != 0 { AccessKind::Put } else { AccessKind::Get };
                if own.check(addr, len, kind)?.active {
                    return Err(Error::OutOfResources("pages marked for Active Access are applied by the target: bounce".into()));
                }
                RegistrationStats::add(&t.registrar().stats().registers_served, 1);
                let generation = x.hold(addr, len)?;
                // Pinning follows the job's strategy, as on one host; the others registered at
                // expose (or pin nothing: an MPI library that needs pinned memory pins it itself).
                if matches!(t.registrar().strategy(), Strategy::Rendezvous | Strategy::RendezvousUnpin) {
                    if let Err(e) = t.register(addr, len, flags & PER_OP != 0) {
                        x.release(addr);
                        return Err(e);
                    }
                }
                Ok((generation, &[][..]))
            })();
            respond(ctx, outcome);
        }),
    )?;
    let x = exposures.clone();
    am.register(
        RELEASE_RMA,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            // One-way: the origin's move is complete before it sends this.
            let Some([addr, len, generation, flags]) = words(msg) else { return };
            RegistrationStats::add(&table.registrar().stats().releases_served, 1);
            if flags & PER_OP != 0 {
                if let Err(e) = table.release_registration(addr as usize, len as usize, generation) {
                    eprintln!(
                        "activerma: rank {}: unpinning {addr:#x}+{len} after a rendezvous from rank {} failed: {e}",
                        ctx.am().conduit().rank(),
                        ctx.src
                    );
                }
            }
            x.release(addr as usize);
        }),
    )?;
    Ok(exposures)
}

/// Whether a put/get of `len` bytes to private memory of a rank on another host takes this
/// path: the conduit's engine reaches registered memory, the transfer is at least
/// ACTIVERMA_RMA_RENDEZVOUS_MIN, and the strategy registers (bounce never does; PART's unpinned
/// pages would fault inside the target's MPI library).
pub(crate) fn applies(p: &Proto, len: usize) -> bool {
    p.rma_rendezvous_min != 0
        && len >= p.rma_rendezvous_min
        && !matches!(p.strategy, Strategy::Bounce | Strategy::Part)
        && p.conduit.rma_reaches_registered()
}

/// Registers, moves with `one_sided(true)`, releases; or bounces (`one_sided(false)`) when the
/// target refused for a resource.
fn transfer(p: &Proto, rank: Rank, addr: usize, len: usize, write: bool, one_sided: &mut dyn FnMut(bool) -> Result<()>) -> Result<()> {
    let flags = if p.strategy.unpins_after_op() { PER_OP } else { 0 } | if write { WRITE } else { 0 };
    let op = if write { "put" } else { "get" };
    bump(&p.reg_stats.rendezvous_requests, 1);
    match am_request::request(p, REGISTER_RMA, &encode([addr as u64, len as u64, flags]), Asked { rank, addr, len, op }) {
        Ok((generation, _)) => {
            let moved = one_sided(true);
            // Sent even when the move failed: the target must not keep the exposure held.
            if flags & PER_OP != 0 {
                bump(&p.reg_stats.rendezvous_releases, 1);
            }
            p.am.send(rank, RELEASE_RMA, 0, &encode([addr as u64, len as u64, generation, flags]))?;
            moved
        }
        Err(Error::OutOfResources(why)) => {
            bump(&p.reg_stats.rendezvous_fallbacks, 1);
            bump(&p.reg_stats.bounce_ops, 1);
            if p.verbose {
                eprintln!("activerma: rank {} -> rank {rank}: rendezvous fell back to the target's copy: {why}", p.conduit.rank());
            }
            one_sided(false)
        }
        Err(e) => Err(e),
    }
}

pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    transfer(p, rank, addr, src.len(), true, &mut |rma| {
        if rma {
            rma_conduit::put(p, rank, addr, src, true)
        } else {
            put_am::run(p, rank, addr, src)
        }
    })
}

pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    transfer(p, rank, addr, dst.len(), false, &mut |rma| {
        if rma {
            rma_conduit::get(p, rank, addr, dst)
        } else {
            get_am::run(p, rank, addr, dst)
        }
    })
}
