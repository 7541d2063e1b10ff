//! The target-assisted method of moving a list of pieces (ACTIVERMA_NONCONTIG=target-assisted):
//! the paper's host-assisted zero-copy as the paper builds it, with the *target's* helper
//! turning the description into scatter/gather lists. The origin sends the list — each piece's
//! address at the target, its length and where its bytes lie in the origin — in one message,
//! no bytes; the target's progress engine checks every piece in its own table and moves them
//! all between its memory and the origin's buffers by cross-memory attach, in calls of up to
//! SGE_MAX pieces, then answers.
//!
//! ```text
//! origin:  cell = send(GET_TARGETED, seq, [(addr, len)], [origin address of each piece])
//!          (non-blocking: return; the origin's CPU is free until the wait)
//! target:  check every piece (refuse one: nothing moves); log the ones on Active Access pages
//!          process_vm_writev(origin, [origin pieces] <- [our pieces])   # readv for a put
//!          answer(cell)
//! origin:  wait for the answer, then for the modelled wire time of the bytes
//! ```
//! Against `host-assisted`, where the origin makes the same calls itself (the kernel reaches
//! the target's memory without its CPU): no origin CPU while a non-blocking transfer is in
//! flight (the overlap of the paper's Figure 7b), at the price of the target's progress. Only
//! between processes of one host: the list goes `packed` to ranks of other hosts.

use crate::am_request::{self, Asked, OwnTable};
use crate::noncontig::{answered, check_pieces, decode_request, encode_request, serve_pieces, write_packed_pieces};
use crate::transfer::{Ask, PendingTransfer};
use crate::{Proto, Transfer};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use std::sync::Arc;

pub const PUT_TARGETED: HandlerId = 23;
pub const GET_TARGETED: HandlerId = 24;

impl Proto {
    /// Whether `rank`'s CPU can move a list into or out of this process's buffers: another
    /// process of this host (its table is mapped here), which cross-memory attach reaches.
    pub(crate) fn target_can_assist(&self, rank: Rank) -> bool {
        rank != self.conduit.rank() && self.tables.get(rank).is_some_and(Option::is_some)
    }
}

/// The request: the packed request's list, then each piece's address in the origin.
fn request(p: &Proto, rank: Rank, pieces: impl ExactSizeIterator<Item = (usize, usize, usize)> + Clone) -> Vec<u8> {
    // The target logs pieces on pages it marked for Active Access itself: the next active
    // flush there must ask it.
    p.note_bounced(rank);
    let here: Vec<u8> = pieces.clone().flat_map(|(_, _, at)| (at as u64).to_le_bytes()).collect();
    encode_request(p.next_seq(rank), pieces.map(|(addr, len, _)| (addr, len)), &[&here])
}

/// Asks `rank` to write `pieces` (its address, our buffer) into our buffers; None (nothing
/// sent) while every completion cell is taken. The buffers are lent to the target until
/// `receive` returns.
pub(crate) fn try_ask_get(p: &Proto, rank: Rank, pieces: &[(usize, &mut [u8])]) -> Result<Option<u32>> {
    let msg = request(p, rank, pieces.iter().map(|(addr, dst)| (*addr, dst.len(), dst.as_ptr() as usize)));
    am_request::try_send(p, GET_TARGETED, &msg, rank)
}

/// Asks `rank` to read `pieces` (its address, our bytes) out of our buffers into its memory.
pub(crate) fn try_ask_put(p: &Proto, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<Option<u32>> {
    let msg = request(p, rank, pieces.iter().map(|(addr, src)| (*addr, src.len(), src.as_ptr() as usize)));
    am_request::try_send(p, PUT_TARGETED, &msg, rank)
}

/// Waits for the target's answer to the request sent with `cell`: every piece moved, or the
/// first it refused (then none was). `list`: the pieces asked for, (address, length).
pub(crate) fn receive(p: &Proto, rank: Rank, cell: u32, list: &[(usize, usize)], kind: LogOp) -> Result<()> {
    let bytes: usize = list.iter().map(|x| x.1).sum();
    let op = if kind == LogOp::Put { "put" } else { "get" };
    let (value, answer) = am_request::answer(p, cell, &Asked { rank, addr: list[0].0, len: bytes, op })?;
    answered(rank, op, list, value, &answer)?;
    bump(&p.counters.noncontig_target_assisted, 1);
    bump(if kind == LogOp::Put { &p.counters.bytes_put } else { &p.counters.bytes_got }, bytes as u64);
    Ok(())
}

/// A blocking list of `bytes` moved by `rank`'s CPU (`ask`: `Ask::TargetGet` or `TargetPut`):
/// the non-blocking path's request, waited for at once.
pub(crate) fn moved_by_target(p: &Proto, rank: Rank, ask: Ask<'_>, bytes: usize) -> Result<()> {
    PendingTransfer::target_moving(p, rank, Transfer::ZeroCopy, ask, bytes).wait().map(drop)
}

/// A request taken apart: (seq, pieces, each piece's address in the origin).
type Targeted = (u64, Vec<(usize, usize)>, Vec<usize>);

fn decoded(msg: &[u8]) -> Result<Targeted> {
    let (seq, pieces, rest) = decode_request(msg)?;
    if rest.len() != 8 * pieces.len() {
        return Err(Error::InvalidArgument("target-assisted request: the origin's addresses do not match the pieces".into()));
    }
    let there = rest.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize).collect();
    Ok((seq, pieces, there))
}

/// Whether no two pieces (address, length) share a byte.
fn disjoint(pieces: &[(usize, usize)]) -> bool {
    let mut sorted = pieces.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0)
}

/// Answers a request whose list the target moved with `calls` scatter/gather calls.
fn moved(ctx: &AmCtx, calls: usize) {
    let counters = ctx.am().counters();
    bump(&counters.noncontig_sg_calls, calls as u64);
    bump(&counters.noncontig_target_moves, 1);
    am_request::respond(ctx, Ok((0, &[][..])))
}

/// The target's side: registered with the rank's table handlers, `sge_max` pieces per
/// scatter/gather call (this rank's setting).
pub(crate) fn register(am: &Am, sge_max: usize) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    let t = table.clone();
    am.register(
        GET_TARGETED,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let (seq, pieces, there) = match decoded(msg) {
                Ok(r) => r,
                Err(e) => return am_request::respond(ctx, Err(e)),
            };
            let Some(lookups) = check_pieces(&t, ctx, seq, &pieces, LogOp::Get) else { return };
            let Some(served) = serve_pieces(&t, ctx, seq, &lookups, &pieces) else { return };
            let out: Vec<(usize, &[u8])> = there.iter().copied().zip(served).collect();
            drop(lookups);
            let conduit = ctx.am().conduit();
            let outcome = match conduit.cma_writev(ctx.src, &out, sge_max) {
                // A page of ours the kernel call cannot fault in (PART evicts pages that only
                // a CPU touch brings back): through a buffer our CPU fills.
                Err(Error::NotExposed { .. }) => {
                    let data: Vec<u8> = out.iter().flat_map(|(_, bytes)| bytes.iter().copied()).collect();
                    let mut at = 0;
                    let staged: Vec<(usize, &[u8])> = out
                        .iter()
                        .map(|&(there, bytes)| {
                            at += bytes.len();
                            (there, &data[at - bytes.len()..at])
                        })
                        .collect();
                    conduit.cma_writev(ctx.src, &staged, sge_max)
                }
                outcome => outcome,
            };
            match outcome {
                Ok(calls) => moved(ctx, calls),
                Err(e) => am_request::respond(ctx, Err(e)),
            }
        }),
    )?;
    am.register(
        PUT_TARGETED,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let (seq, pieces, there) = match decoded(msg) {
                Ok(r) => r,
                Err(e) => return am_request::respond(ctx, Err(e)),
            };
            let Some(lookups) = check_pieces(&table, ctx, seq, &pieces, LogOp::Put) else { return };
            let direct = !lookups.iter().any(|l| l.active) && disjoint(&pieces);
            let tried = direct.then(|| {
                let mut reads: Vec<(usize, &mut [u8])> = there
                    .iter()
                    .zip(&pieces)
                    // SAFETY: the table says [addr, addr+len) is our memory, exposed writable;
                    // the pieces do not overlap (`disjoint`).
                    .map(|(&at, &(addr, len))| (at, unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }))
                    .collect();
                ctx.am().conduit().cma_readv(ctx.src, &mut reads, sge_max)
            });
            let outcome = match tried {
                Some(Err(Error::NotExposed { .. })) | None => {
                    // Logged pages, pieces that overlap here, or a page of ours the kernel
                    // call cannot fault in (PART's evicted pages): the bytes come here first,
                    // then go in as a packed put's do (by our CPU; each piece through its log,
                    // in order).
                    let mut data = vec![0u8; pieces.iter().map(|p| p.1).sum()];
                    let mut reads = Vec::with_capacity(pieces.len());
                    let mut rest = &mut data[..];
                    for (&at, &(_, len)) in there.iter().zip(&pieces) {
                        let (piece, tail) = rest.split_at_mut(len);
                        reads.push((at, piece));
                        rest = tail;
                    }
                    let read = ctx.am().conduit().cma_readv(ctx.src, &mut reads, sge_max);
                    drop(reads);
                    if read.is_ok() && !write_packed_pieces(&table, ctx, seq, &lookups, &pieces, &data) {
                        return; // refused, and answered
                    }
                    read
                }
                Some(outcome) => outcome,
            };
            drop(lookups);
            match outcome {
                Ok(calls) => moved(ctx, calls),
                Err(e) => am_request::respond(ctx, Err(e)),
            }
        }),
    )
}
