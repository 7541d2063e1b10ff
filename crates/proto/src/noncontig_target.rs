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
//! A strided transfer sends its pattern instead of its list (`Ask::TargetGetStrided` /
//! `TargetPutStrided`, handlers 25/26): piece, counts and both sides' strides, a few words
//! whatever the patch's size, which the target expands into the same list. The origin's cost
//! of a request then no longer grows with the pieces (a list of 1024 rows was a 24 KiB
//! message in 256-byte slots: most of what a non-blocking get left unhidden, Fig. 7b).
//!
//! Against `host-assisted`, where the origin makes the same calls itself (the kernel reaches
//! the target's memory without its CPU): no origin CPU while a non-blocking transfer is in
//! flight (the overlap of the paper's Figure 7b), at the price of the target's progress. Only
//! between processes of one host: the list goes `packed` to ranks of other hosts.

use crate::am_request::{self, Asked, OwnTable};
use crate::noncontig::{answered, check_pieces, decode_request, encode_request, serve_pieces, write_packed_pieces};
use crate::strided::StridedPattern;
use crate::transfer::{Ask, PendingTransfer};
use crate::{Noncontig, Proto, Transfer};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use std::sync::Arc;

pub const PUT_TARGETED: HandlerId = 23;
pub const GET_TARGETED: HandlerId = 24;
pub const PUT_TARGETED_STRIDED: HandlerId = 25;
pub const GET_TARGETED_STRIDED: HandlerId = 26;
/// The most levels and pieces a strided request may describe: the target expands it into a
/// list (24 bytes a piece) before it moves anything. Larger patterns go as lists.
const MAX_LEVELS: usize = 16;
const MAX_STRIDED_PIECES: usize = 1 << 20;

impl Proto {
    /// Whether `rank`'s CPU can move a list into or out of this process's buffers: another
    /// process of this host (its table is mapped here), which cross-memory attach reaches.
    pub(crate) fn target_can_assist(&self, rank: Rank) -> bool {
        rank != self.conduit.rank() && self.tables.get(rank).is_some_and(Option::is_some)
    }

    /// Whether a non-blocking strided transfer of `bytes` to `rank` is handed to its CPU:
    /// always under target-assisted; under host-assisted from ACTIVERMA_NB_TARGET_FROM bytes
    /// on when its progress engine runs on its own, so that the pieces move while this rank
    /// computes instead of being copied by this rank at issue (where the target's engine waits
    /// for the program's next call, that would delay them instead).
    pub(crate) fn nb_moved_by_target(&self, rank: Rank, bytes: usize) -> bool {
        self.target_can_assist(rank)
            && match self.noncontig.method {
                Noncontig::TargetAssisted => true,
                Noncontig::HostAssisted => {
                    self.noncontig.nb_target_from.is_some_and(|from| bytes >= from) && self.conduit.serves_on_its_own(rank)
                }
                Noncontig::PerPiece | Noncontig::Packed => false,
            }
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

/// A strided transfer the target moves: `pattern` from `addr` at the target, our side laid
/// out by its local strides from `local` (checked to hold it, its pieces apart for a get).
pub(crate) struct StridedAsk<B> {
    pub addr: usize,
    pub pattern: StridedPattern,
    pub local: B,
}

/// Whether `pattern` can go as a strided request (else as a list).
pub(crate) fn sends_as_pattern(pattern: &StridedPattern) -> bool {
    pattern.counts.len() <= MAX_LEVELS && pattern.pieces() <= MAX_STRIDED_PIECES
}

impl<B> StridedAsk<B> {
    /// The pieces (address, length), for naming the one the target refused.
    fn list(&self) -> Vec<(usize, usize)> {
        let mut list = Vec::with_capacity(self.pattern.pieces());
        let _ = self.pattern.for_each(|r, _| {
            list.push((self.addr + r, self.pattern.piece));
            Ok::<(), Error>(())
        });
        list
    }
}

/// Asks `rank` to move a strided pattern between its memory and our buffer at `local`
/// (`handler`: GET_TARGETED_STRIDED or PUT_TARGETED_STRIDED); None while every completion cell
/// is taken.
pub(crate) fn try_ask_strided<B>(p: &Proto, rank: Rank, handler: HandlerId, ask: &StridedAsk<B>, local: usize) -> Result<Option<u32>> {
    p.note_bounced(rank);
    let msg = encode_strided(p.next_seq(rank), ask.addr, local, &ask.pattern);
    am_request::try_send(p, handler, &msg, rank)
}

/// A strided request: seq, remote address, origin address, piece, levels, then counts,
/// remote strides and local strides (u64 each).
fn encode_strided(seq: u64, addr: usize, local: usize, pat: &StridedPattern) -> Vec<u8> {
    let words = [seq, addr as u64, local as u64, pat.piece as u64, pat.counts.len() as u64];
    let levels = pat.counts.iter().chain(&pat.remote_strides).chain(&pat.local_strides).map(|&v| v as u64);
    words.into_iter().chain(levels).flat_map(u64::to_le_bytes).collect()
}

/// Waits for the target's answer to the request sent with `cell`: every piece moved, or the
/// first it refused (then none was). `list`: the pieces asked for, (address, length).
pub(crate) fn receive(p: &Proto, rank: Rank, cell: u32, list: &[(usize, usize)], kind: LogOp) -> Result<()> {
    let bytes: usize = list.iter().map(|x| x.1).sum();
    receive_answer(p, rank, cell, list[0].0, bytes, kind, || list.to_vec())
}

/// `receive` for a strided request.
pub(crate) fn receive_strided<B>(p: &Proto, rank: Rank, cell: u32, ask: &StridedAsk<B>, kind: LogOp) -> Result<()> {
    receive_answer(p, rank, cell, ask.addr, ask.pattern.bytes(), kind, || ask.list())
}

/// The answer to a request of `bytes` from `addr`; `list` (made only for a refusal) names the
/// pieces in the order the target checked them.
fn receive_answer(
    p: &Proto,
    rank: Rank,
    cell: u32,
    addr: usize,
    bytes: usize,
    kind: LogOp,
    list: impl FnOnce() -> Vec<(usize, usize)>,
) -> Result<()> {
    let op = if kind == LogOp::Put { "put" } else { "get" };
    let (value, answer) = am_request::answer(p, cell, &Asked { rank, addr, len: bytes, op })?;
    if value != 0 {
        answered(rank, op, &list(), value, &answer)?;
    }
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

/// A strided request taken apart into the list form.
fn decoded_strided(msg: &[u8]) -> Result<Targeted> {
    let bad = |why: &str| Error::InvalidArgument(format!("target-assisted strided request: {why}"));
    if !msg.len().is_multiple_of(8) || msg.len() < 40 {
        return Err(bad("malformed"));
    }
    let words: Vec<usize> = msg.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize).collect();
    let (seq, addr, local, piece, levels) = (words[0] as u64, words[1], words[2], words[3], words[4]);
    if levels > MAX_LEVELS {
        return Err(bad(&format!("more than {MAX_LEVELS} levels")));
    }
    if words.len() != 5 + 3 * levels {
        return Err(bad("its levels do not match its length"));
    }
    let level = |k: usize| words[5 + k * levels..5 + (k + 1) * levels].to_vec();
    let pattern = StridedPattern::new(piece, level(0), level(1), level(2))?;
    if pattern.counts.iter().try_fold(1usize, |n, &c| n.checked_mul(c)).is_none_or(|n| n > MAX_STRIDED_PIECES) {
        return Err(bad(&format!("more than {MAX_STRIDED_PIECES} pieces")));
    }
    // Both sides' spans fit the address space from their bases (so no offset below wraps).
    addr.checked_add(pattern.remote_extent()?).ok_or_else(|| bad("it wraps the target's address space"))?;
    local.checked_add(pattern.local_extent()?).ok_or_else(|| bad("it wraps the origin's address space"))?;
    let (mut pieces, mut there) = (Vec::with_capacity(pattern.pieces()), Vec::with_capacity(pattern.pieces()));
    pattern.for_each(|r, l| {
        pieces.push((addr + r, piece));
        there.push(local + l);
        Ok::<(), Error>(())
    })?;
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

/// The target's side of a get: checks `pieces` (ours) and writes them to `there` (the
/// origin's addresses) by scatter/gather calls of up to `sge_max` pieces, then answers.
fn move_get(table: &OwnTable, ctx: &AmCtx, (seq, pieces, there): Targeted, sge_max: usize) {
    let Some(lookups) = check_pieces(table, ctx, seq, &pieces, LogOp::Get) else { return };
    let Some(served) = serve_pieces(table, ctx, seq, &lookups, &pieces) else { return };
    let out: Vec<(usize, &[u8])> = there.iter().copied().zip(served).collect();
    drop(lookups);
    let conduit = ctx.am().conduit();
    let outcome = match conduit.cma_writev(ctx.src, &out, sge_max) {
        // A page of ours the kernel call cannot fault in (PART evicts pages that only a CPU
        // touch brings back): through a buffer our CPU fills.
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
}

/// The target's side of a put: checks `pieces` (ours) and reads them from `there` (the
/// origin's addresses), then answers.
fn move_put(table: &OwnTable, ctx: &AmCtx, (seq, pieces, there): Targeted, sge_max: usize) {
    let Some(lookups) = check_pieces(table, ctx, seq, &pieces, LogOp::Put) else { return };
    let direct = !lookups.iter().any(|l| l.active) && disjoint(&pieces);
    let tried = direct.then(|| {
        let mut reads: Vec<(usize, &mut [u8])> = there
            .iter()
            .zip(&pieces)
            // SAFETY: the table says [addr, addr+len) is our memory, exposed writable; the
            // pieces do not overlap (`disjoint`).
            .map(|(&at, &(addr, len))| (at, unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }))
            .collect();
        ctx.am().conduit().cma_readv(ctx.src, &mut reads, sge_max)
    });
    let outcome = match tried {
        Some(Err(Error::NotExposed { .. })) | None => {
            // Logged pages, pieces that overlap here, or a page of ours the kernel call cannot
            // fault in (PART's evicted pages): the bytes come here first, then go in as a
            // packed put's do (by our CPU; each piece through its log, in order).
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
            if read.is_ok() && !write_packed_pieces(table, ctx, seq, &lookups, &pieces, &data) {
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
}

/// The target's side: registered with the rank's table handlers, `sge_max` pieces per
/// scatter/gather call (this rank's setting). Each direction takes a list or a pattern.
pub(crate) fn register(am: &Am, sge_max: usize) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    type Decode = fn(&[u8]) -> Result<Targeted>;
    type Move = fn(&OwnTable, &AmCtx, Targeted, usize);
    let handlers: [(HandlerId, Decode, Move); 4] = [
        (GET_TARGETED, decoded, move_get),
        (GET_TARGETED_STRIDED, decoded_strided, move_get),
        (PUT_TARGETED, decoded, move_put),
        (PUT_TARGETED_STRIDED, decoded_strided, move_put),
    ];
    for (id, decode, mover) in handlers {
        let t = table.clone();
        am.register(
            id,
            Arc::new(move |ctx: &AmCtx, msg: &[u8]| match decode(msg) {
                Ok(request) => mover(&t, ctx, request, sge_max),
                Err(e) => am_request::respond(ctx, Err(e)),
            }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strided_request_expands_into_the_list_and_bad_ones_are_refused() {
        let pat = StridedPattern::new(8, vec![2, 3], vec![100, 1000], vec![8, 16]).unwrap();
        let (seq, pieces, there) = decoded_strided(&encode_strided(7, 0x10000, 0x5000, &pat)).unwrap();
        assert_eq!(seq, 7);
        let expect: Vec<(usize, usize)> = [0, 100, 1000, 1100, 2000, 2100].iter().map(|&r| (0x10000 + r, 8)).collect();
        assert_eq!(pieces, expect);
        assert_eq!(there, vec![0x5000, 0x5008, 0x5010, 0x5018, 0x5020, 0x5028]);

        let refused = |msg: Vec<u8>, why: &str| {
            let e = decoded_strided(&msg).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        };
        let mut cut = encode_strided(1, 0x10000, 0x5000, &pat);
        cut.truncate(cut.len() - 8);
        refused(cut, "levels do not match");
        let mut odd = encode_strided(1, 0x10000, 0x5000, &pat);
        odd.push(0);
        refused(odd, "malformed");
        let deep = StridedPattern::new(8, vec![1; MAX_LEVELS + 1], vec![8; MAX_LEVELS + 1], vec![8; MAX_LEVELS + 1]).unwrap();
        refused(encode_strided(1, 0, 0, &deep), &format!("more than {MAX_LEVELS} levels"));
        let many = StridedPattern::new(8, vec![1 << 11, 1 << 10], vec![8, 1 << 14], vec![8, 1 << 14]).unwrap();
        refused(encode_strided(1, 0, 0, &many), "pieces");
        let huge = StridedPattern::new(8, vec![1 << 20, 1 << 20], vec![8, 1 << 23], vec![8, 1 << 23]).unwrap();
        refused(encode_strided(1, 0, 0, &huge), "pieces");
        refused(encode_strided(1, usize::MAX - 64, 0, &pat), "wraps the target");
        refused(encode_strided(1, 0, usize::MAX - 16, &pat), "wraps the origin");
    }
}
