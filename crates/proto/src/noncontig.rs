//! Non-contiguous puts and gets: a list of pieces — (address at the target, local bytes) — to
//! one rank, as strided and vector transfers produce them. ARMCI's paper (§5) compares three
//! ways to move such a list (we add a fourth), and `ACTIVERMA_NONCONTIG` picks one per run:
//!
//! ```text
//! host-assisted (default): check every piece first (nothing moves if one is refused), then
//!     all pieces plain memory of a segment mapped here  -> one CPU copy each, one fence
//!     all pieces private memory on this host            -> process_vm_writev/readv with the
//!         whole list: ceil(pieces / SGE_MAX) kernel calls instead of one per piece
//!     anything else (another host, Active Access pages, a registration miss, a mix)
//!                                                       -> an implicit put/get per piece,
//!         then one flush of the rank (one round of completions, not one per piece)
//! per-piece: a blocking put/get per piece (what a layer without list support does)
//! packed:    the list in a message, the pieces' bytes through the target's landing zone in
//!     groups of at most a slot (landing.rs; without one: the bytes in the message too); the
//!     target's progress engine checks every piece in its own table, then scatters (put) or
//!     gathers (get) — the buffered protocol: two copies, needs the target's progress
//! target-assisted: the list without bytes in one message; the target's progress engine
//!     checks it, then moves every piece between its memory and the origin's buffers with
//!     scatter/gather calls (noncontig_target.rs) — one message, one copy, needs the target's
//!     progress, frees the origin's CPU; ranks of other hosts: packed
//! ```
//!
//! On one host the origin itself plays the paper's "host" (the target's helper that turns the
//! description into one scatter/gather list): cross-memory attach reaches the target's
//! memory without its CPU, so the list goes straight to the kernel.

use crate::am_request::{self, Asked, OwnTable};
use crate::select::{Choice, Pass, Protocol};
use crate::transfer::{Ask, PendingTransfer};
use crate::{firehose, get_cma, noncontig_target, put_cma, registered_move, rendezvous, Proto, Transfer};
use activerma_access::log_append::{self, Logged};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::{AccessKind, Lookup, Strategy};
use activerma_transport::StartedGet;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

pub const PUT_PACKED: HandlerId = 18;
pub const GET_PACKED: HandlerId = 19;

/// How a list of pieces moves (ACTIVERMA_NONCONTIG).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noncontig {
    HostAssisted,
    PerPiece,
    Packed,
    TargetAssisted,
}

impl Noncontig {
    pub const ALL: [Noncontig; 4] = [Noncontig::HostAssisted, Noncontig::PerPiece, Noncontig::Packed, Noncontig::TargetAssisted];

    /// The setting's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Noncontig::HostAssisted => "host-assisted",
            Noncontig::PerPiece => "per-piece",
            Noncontig::Packed => "packed",
            Noncontig::TargetAssisted => "target-assisted",
        }
    }
}

/// The run's method and the scatter/gather limit, read once at init.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoncontigSettings {
    pub method: Noncontig,
    pub sge_max: usize,
    /// ACTIVERMA_NB_TARGET_FROM (None: never).
    pub nb_target_from: Option<usize>,
}

impl NoncontigSettings {
    pub fn from_config(cfg: &Config) -> Result<NoncontigSettings> {
        let word = cfg.get_enum(settings::NONCONTIG)?;
        let method = Noncontig::ALL.into_iter().find(|m| m.name() == word).expect("the setting's words are the methods' names");
        let sge_max = cfg.get_u64(settings::SGE_MAX)?;
        let kernel = activerma_transport::smp::cma::KERNEL_IOV_MAX as u64;
        if sge_max == 0 || sge_max > kernel {
            return Err(Error::BadSetting {
                name: settings::SGE_MAX.into(),
                value: sge_max.to_string(),
                why: format!("expected 1 to {kernel} pieces per scatter/gather call (the kernel's IOV_MAX)"),
            });
        }
        let nb_target_from = Some(cfg.get_u64(settings::NB_TARGET_FROM)? as usize).filter(|&b| b > 0);
        Ok(NoncontigSettings { method, sge_max: sge_max as usize, nb_target_from })
    }
}

impl Proto {
    /// The method this run uses for lists of pieces.
    pub fn noncontig(&self) -> Noncontig {
        self.noncontig.method
    }

    /// Whether this process has a copy engine (ACTIVERMA_COPY_ENGINE, copy_engine.rs).
    pub fn has_copy_engine(&self) -> bool {
        self.copy_engine.is_some()
    }

    /// Blocking put of every piece `(addr, bytes)` to `rank`; returns once all are written.
    /// Every piece is checked before any moves (host-assisted and packed), so a refused piece
    /// leaves the target's memory untouched.
    pub fn put_pieces(&self, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        self.put_pieces_by(self.noncontig.method, rank, pieces)
    }

    /// `put_pieces` by a method of the caller's choice (benchmarks compare them in one run).
    pub fn put_pieces_by(&self, method: Noncontig, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        self.check_rank(rank)?;
        let pieces: Vec<(usize, &[u8])> = pieces.iter().copied().filter(|p| !p.1.is_empty()).collect();
        if pieces.is_empty() {
            return Ok(());
        }
        bump(&self.counters.noncontig_pieces, pieces.len() as u64);
        match method {
            Noncontig::PerPiece => {
                bump(&self.counters.noncontig_per_piece, 1);
                pieces.iter().try_for_each(|&(addr, src)| self.put(rank, addr, src))
            }
            Noncontig::TargetAssisted if self.target_can_assist(rank) => {
                let bytes = pieces.iter().map(|x| x.1.len()).sum();
                noncontig_target::moved_by_target(self, rank, Ask::TargetPut(pieces), bytes)
            }
            Noncontig::Packed | Noncontig::TargetAssisted if rank != self.conduit.rank() => put_packed(self, rank, &pieces),
            _ => self.put_host_assisted(rank, &pieces),
        }
    }

    /// Blocking get of every piece `(addr, buffer)` from `rank` (see `put_pieces`).
    pub fn get_pieces(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        self.get_pieces_by(self.noncontig.method, rank, pieces)
    }

    /// `get_pieces` by a method of the caller's choice.
    pub fn get_pieces_by(&self, method: Noncontig, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        self.check_rank(rank)?;
        let mut pieces: Vec<(usize, &mut [u8])> = pieces.iter_mut().filter(|p| !p.1.is_empty()).map(|(a, d)| (*a, &mut **d)).collect();
        if pieces.is_empty() {
            return Ok(());
        }
        bump(&self.counters.noncontig_pieces, pieces.len() as u64);
        match method {
            Noncontig::PerPiece => {
                bump(&self.counters.noncontig_per_piece, 1);
                pieces.iter_mut().try_for_each(|(addr, dst)| self.get(rank, *addr, dst))
            }
            Noncontig::TargetAssisted if self.target_can_assist(rank) => {
                let bytes = pieces.iter().map(|x| x.1.len()).sum();
                noncontig_target::moved_by_target(self, rank, Ask::TargetGet(pieces), bytes)
            }
            Noncontig::Packed | Noncontig::TargetAssisted if rank != self.conduit.rank() => get_packed(self, rank, &mut pieces),
            _ => self.get_host_assisted(rank, &mut pieces),
        }
    }

    /// Where each piece goes, checked before anything moves (no registration is counted: the
    /// path taken counts it). First one check of the list's bounding range: when it lies in one
    /// segment or one exposure, plainly reachable, that check covers every piece (the usual
    /// strided case: one translation instead of one per piece). Otherwise every piece is
    /// checked by itself, which also names the piece that is refused.
    fn choose_list<'a>(&'a self, rank: Rank, pieces: &[(usize, usize)], kind: AccessKind) -> Result<Placed<'a>> {
        let lo = pieces.iter().map(|p| p.0).min().unwrap_or(0);
        let hi = pieces.iter().map(|p| p.0.saturating_add(p.1)).max().unwrap_or(0);
        if let Ok(c) = self.choose_for(rank, lo, hi - lo, kind, Pass::Explain) {
            let covers = [Protocol::PutDirect, Protocol::GetDirect, Protocol::PutCma, Protocol::GetCma, Protocol::PutRma, Protocol::GetRma];
            if covers.contains(&c.protocol) {
                return Ok(Placed::Bounding { lo, hi, choice: c });
            }
            let on_demand =
                [Protocol::PutRendezvous, Protocol::GetRendezvous, Protocol::PutFirehose, Protocol::GetFirehose].contains(&c.protocol);
            let bytes: usize = pieces.iter().map(|p| p.1).sum();
            if on_demand && hi - lo <= DENSE * bytes {
                return Ok(Placed::Unregistered { lo, hi, protocol: c.protocol });
            }
        }
        let each = pieces.iter().map(|&(addr, len)| self.choose_for(rank, addr, len, kind, Pass::Explain)).collect::<Result<Vec<_>>>()?;
        Ok(Placed::Each(each))
    }

    /// A list moved into or out of private memory by `calls` scatter/gather calls: one cma
    /// operation (`op`), and — every piece was registered, or it would not have come here —
    /// the registration hits the per-piece path would have counted.
    fn count_scatter_gather(&self, pieces: usize, calls: usize, op: &std::sync::atomic::AtomicU64, count_hits: bool) {
        if count_hits && !matches!(self.strategy, Strategy::None | Strategy::Firehose) {
            bump(&self.reg_stats.hits, pieces as u64);
        }
        bump(&self.counters.noncontig_sg_calls, calls as u64);
        bump(op, 1);
    }

    fn put_host_assisted(&self, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        let spans: Vec<(usize, usize)> = pieces.iter().map(|p| (p.0, p.1.len())).collect();
        let placed = self.choose_list(rank, &spans, AccessKind::Put)?;
        let bytes: usize = spans.iter().map(|p| p.1).sum();
        match placed.protocol() {
            Some(Protocol::PutDirect) => {
                for (i, (addr, src)) in pieces.iter().enumerate() {
                    // SAFETY: the check translated this piece into our mapping of the segment.
                    unsafe { activerma_core::copy::copy_bytes(src.as_ptr(), placed.local(i, *addr), src.len()) };
                }
                fence(Ordering::Release);
                bump(&self.counters.put_direct, 1);
            }
            Some(Protocol::PutCma) => {
                // The lookup held while the kernel copies: an unexpose waits for it.
                self.put_cma_list(rank, pieces, true)?;
                drop(placed);
            }
            Some(protocol @ (Protocol::PutRendezvous | Protocol::PutFirehose)) if placed.unregistered() => {
                let (lo, hi) = placed.range();
                drop(placed);
                let mut move_list = |c: Option<&Choice>| match c {
                    // `c` holds the range's lookup while the kernel copies.
                    Some(_) => self.put_cma_list(rank, pieces, false).map(|()| self.moved_list(bytes, &self.counters.bytes_put)),
                    None => self.put_each(rank, pieces),
                };
                return self
                    .registered_for_list(protocol, rank, lo, hi, AccessKind::Put, &mut move_list)
                    .unwrap_or_else(|| self.put_each(rank, pieces));
            }
            // Segments of another host: one operation for the list where the conduit has one.
            Some(Protocol::PutRma) if self.conduit.rma_put_list(rank, pieces)? => {
                drop(placed);
                bump(&self.counters.noncontig_rma_lists, 1);
                bump(&self.counters.put_rma, 1);
            }
            // Private memory of another host: its target copies the pieces in anyway, so they
            // travel together in one message rather than one message each.
            Some(Protocol::PutAm) => {
                drop(placed);
                return put_packed(self, rank, pieces).map(|()| bump(&self.counters.noncontig_host_assisted, 1));
            }
            _ => {
                drop(placed);
                return self.put_each(rank, pieces);
            }
        }
        self.moved_list(bytes, &self.counters.bytes_put);
        Ok(())
    }

    /// Every piece by its own put (its own protocol), then one flush of the rank.
    fn put_each(&self, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
        for &(addr, src) in pieces {
            self.put_nbi(rank, addr, src)?;
        }
        self.flushed_list(rank)
    }

    /// A checked list into private memory on this host (or our own), by scatter/gather calls
    /// (the caller holds the lookup, then completes it with `moved_list`); `count_hits`: the
    /// pages were registered already (not just now, for this list).
    fn put_cma_list(&self, rank: Rank, pieces: &[(usize, &[u8])], count_hits: bool) -> Result<()> {
        let calls = if rank == self.conduit.rank() {
            pieces.iter().try_for_each(|&(addr, src)| put_cma::copy_in(self, rank, addr, src))?;
            0
        } else {
            self.conduit.cma_writev(rank, pieces, self.noncontig.sge_max)?
        };
        self.count_scatter_gather(pieces.len(), calls, &self.counters.put_cma, count_hits);
        Ok(())
    }

    /// A dense list whose bounding range `[lo, hi)` is private memory the strategy registers on
    /// demand: registered once for the whole range by the strategy's slow path (one rendezvous,
    /// one set of firehoses), then `move_list(Some(choice))` moves every piece by
    /// scatter/gather calls, or `move_list(None)` when the target could not register it —
    /// instead of a registration and a kernel call per piece. None: the range needs more
    /// firehoses than we may hold, so the caller moves the pieces one by one.
    fn registered_for_list(
        &self,
        protocol: Protocol,
        rank: Rank,
        lo: usize,
        hi: usize,
        kind: AccessKind,
        move_list: &mut registered_move::MoveWith,
    ) -> Option<Result<()>> {
        let moved = match protocol {
            Protocol::PutRendezvous | Protocol::GetRendezvous => Some(rendezvous::transfer(self, rank, lo, hi - lo, kind, move_list)),
            _ => firehose::at_once(self, rank, lo, hi - lo, kind, move_list),
        };
        // Counted only when the range was registered at once (not when firehose declined it).
        if moved.is_some() {
            bump(&self.counters.noncontig_registered_lists, 1);
        }
        moved
    }

    fn get_host_assisted(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        let spans: Vec<(usize, usize)> = pieces.iter().map(|p| (p.0, p.1.len())).collect();
        let placed = self.choose_list(rank, &spans, AccessKind::Get)?;
        let bytes: usize = spans.iter().map(|p| p.1).sum();
        match placed.protocol() {
            Some(Protocol::GetDirect) => {
                fence(Ordering::Acquire);
                for (i, (addr, dst)) in pieces.iter_mut().enumerate() {
                    // SAFETY: the check translated this piece into our mapping of the segment.
                    unsafe { activerma_core::copy::copy_bytes(placed.local(i, *addr) as *const u8, dst.as_mut_ptr(), dst.len()) };
                }
                bump(&self.counters.get_direct, 1);
            }
            Some(Protocol::GetCma) => {
                self.get_cma_list(rank, pieces, placed.sieve_range(spans.len(), bytes), true)?;
                drop(placed);
            }
            Some(protocol @ (Protocol::GetRendezvous | Protocol::GetFirehose)) if placed.unregistered() => {
                let (lo, hi) = placed.range();
                drop(placed);
                let sieve = sieve_range(lo, hi, spans.len(), bytes);
                let mut move_list = |c: Option<&Choice>| match c {
                    Some(_) => self.get_cma_list(rank, pieces, sieve, false).map(|()| self.moved_list(bytes, &self.counters.bytes_got)),
                    None => self.get_each(rank, pieces),
                };
                return match self.registered_for_list(protocol, rank, lo, hi, AccessKind::Get, &mut move_list) {
                    Some(r) => r,
                    None => self.get_each(rank, pieces),
                };
            }
            Some(Protocol::GetRma) if self.conduit.rma_get_list(rank, pieces)? => {
                drop(placed);
                bump(&self.counters.noncontig_rma_lists, 1);
                bump(&self.counters.get_rma, 1);
            }
            Some(Protocol::GetAm) => {
                drop(placed);
                return get_packed(self, rank, pieces).map(|()| bump(&self.counters.noncontig_host_assisted, 1));
            }
            _ => {
                drop(placed);
                return self.get_each(rank, pieces);
            }
        }
        self.moved_list(bytes, &self.counters.bytes_got);
        Ok(())
    }

    /// Whether a list get to `rank` may start on the conduit's one-sided engine
    /// (`get_list_started`): the host-assisted method, towards a rank of another host. Cheap,
    /// so that callers build no list for ranks of this host.
    pub(crate) fn list_gets_start_one_sided(&self, rank: Rank) -> bool {
        self.noncontig.method == Noncontig::HostAssisted && self.tables[rank].is_none() && rank != self.conduit.rank()
    }

    /// The host-assisted list get's non-blocking form towards another host: checked as
    /// `get_host_assisted` checks it, then started on the conduit's one-sided engine as one
    /// operation (MPI: one MPI_Rget with a datatype on each side) that moves straight into
    /// the pieces' buffers while the caller computes; complete once the conduit tested or
    /// waited the ticket. None: not such a list (see `list_gets_start_one_sided`; marked
    /// memory, a conduit that cannot take it as one operation): nothing moved.
    ///
    /// # Safety
    /// Every piece `(addr at rank, buffer, bytes)`: its buffer stays the get's, unread and
    /// alive, until the ticket completed.
    pub(crate) unsafe fn get_list_started(&self, rank: Rank, pieces: &[(usize, *mut u8, usize)]) -> Result<Option<StartedGet>> {
        if !self.list_gets_start_one_sided(rank) {
            return Ok(None);
        }
        let spans: Vec<(usize, usize)> = pieces.iter().map(|p| (p.0, p.2)).collect();
        if self.choose_list(rank, &spans, AccessKind::Get)?.protocol() != Some(Protocol::GetRma) {
            return Ok(None);
        }
        // SAFETY: the caller's contract.
        let Some(get) = (unsafe { self.conduit.rma_get_list_started(rank, pieces)? }) else {
            return Ok(None);
        };
        bump(&self.counters.noncontig_pieces, pieces.len() as u64);
        bump(&self.counters.noncontig_rma_lists, 1);
        bump(&self.counters.noncontig_rma_lists_started, 1);
        bump(&self.counters.get_rma, 1);
        bump(&self.counters.bytes_got, spans.iter().map(|p| p.1 as u64).sum());
        bump(&self.counters.noncontig_host_assisted, 1);
        Ok(Some(get))
    }

    /// Every piece by its own get (its own protocol), then one flush of the rank.
    fn get_each(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
        for (addr, dst) in pieces.iter_mut() {
            self.get_nbi(rank, *addr, dst)?;
        }
        self.flushed_list(rank)
    }

    /// A checked list out of private memory on this host (or our own), by scatter/gather
    /// calls, or by one read of `sieve`, the checked range holding them all; the lookup and
    /// `count_hits` as for `put_cma_list`.
    fn get_cma_list(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])], sieve: Option<(usize, usize)>, count_hits: bool) -> Result<()> {
        let calls = if rank == self.conduit.rank() {
            pieces.iter_mut().try_for_each(|(addr, dst)| get_cma::copy_out(self, rank, *addr, dst))?;
            0
        } else if let Some((lo, hi)) = sieve {
            // Small pieces close together: the kernel pins and walks the pages of each
            // descriptor by itself (~0.1 us each), so one read of the whole checked range and
            // a scatter here beats a descriptor per piece (data sieving).
            let mut range = vec![0u8; hi - lo];
            self.conduit.cma_read(rank, lo, &mut range)?;
            for (addr, dst) in pieces.iter_mut() {
                dst.copy_from_slice(&range[*addr - lo..*addr - lo + dst.len()]);
            }
            bump(&self.counters.noncontig_sieved, 1);
            1
        } else {
            self.conduit.cma_readv(rank, pieces, self.noncontig.sge_max)?
        };
        self.count_scatter_gather(pieces.len(), calls, &self.counters.get_cma, count_hits);
        Ok(())
    }

    /// A list moved here (CPU copies or scatter/gather): counted, and complete once the
    /// modelled network would have delivered its bytes.
    fn moved_list(&self, bytes: usize, byte_counter: &std::sync::atomic::AtomicU64) {
        bump(byte_counter, bytes as u64);
        bump(&self.counters.noncontig_host_assisted, 1);
        crate::completion::spin_until(self.net.completion_time(bytes));
    }

    /// A list whose pieces were started one by one (their own protocols): one flush ends them.
    fn flushed_list(&self, rank: Rank) -> Result<()> {
        self.flush(rank)?;
        bump(&self.counters.noncontig_host_assisted, 1);
        Ok(())
    }
}

/// Where a list's pieces go (`choose_list`): one choice for the bounding range, or one per piece.
enum Placed<'a> {
    /// The checked range [lo, hi) holds every piece.
    Bounding {
        lo: usize,
        hi: usize,
        choice: Choice<'a>,
    },
    Each(Vec<Choice<'a>>),
    /// The checked range [lo, hi) holds every piece, densely, in private memory of this host
    /// whose strategy registers pages on demand (`protocol`: its slow path); no lookup held.
    Unregistered {
        lo: usize,
        hi: usize,
        protocol: Protocol,
    },
}

/// A list's pieces are dense when their bounding range is at most this many times their bytes:
/// registering (pinning) the whole range for them costs little more than their own pages.
const DENSE: usize = 4;

/// The checked range [lo, hi) a get of `pieces` pieces, `bytes` in all, should read at once, if
/// it should: its pieces are small (a descriptor each would cost more than copying the gaps)
/// and the range is at most DENSE times the bytes wanted and at most SIEVE_MAX.
fn sieve_range(lo: usize, hi: usize, pieces: usize, bytes: usize) -> Option<(usize, usize)> {
    const SMALL_PIECE: usize = 4096;
    const SIEVE_MAX: usize = 4 << 20;
    let range = hi - lo;
    (pieces > 1 && bytes / pieces < SMALL_PIECE && range <= SIEVE_MAX && range <= DENSE * bytes).then_some((lo, hi))
}

impl Placed<'_> {
    /// The bounding range's sieve (`sieve_range`), for a list placed by one check.
    fn sieve_range(&self, pieces: usize, bytes: usize) -> Option<(usize, usize)> {
        let Placed::Bounding { lo, hi, .. } = *self else { return None };
        sieve_range(lo, hi, pieces, bytes)
    }

    /// Whether the list waits for the strategy to register its bounding range.
    fn unregistered(&self) -> bool {
        matches!(self, Placed::Unregistered { .. })
    }

    /// The list's checked bounding range (lists placed by one check).
    fn range(&self) -> (usize, usize) {
        match *self {
            Placed::Bounding { lo, hi, .. } | Placed::Unregistered { lo, hi, .. } => (lo, hi),
            Placed::Each(_) => unreachable!("a list checked piece by piece has no one range"),
        }
    }

    /// The protocol every piece takes, if they all take the same one.
    fn protocol(&self) -> Option<Protocol> {
        match self {
            Placed::Bounding { choice, .. } => Some(choice.protocol),
            Placed::Unregistered { protocol, .. } => Some(*protocol),
            Placed::Each(each) => {
                let first = each.first()?.protocol;
                each.iter().all(|c| c.protocol == first).then_some(first)
            }
        }
    }

    /// Where piece `i` (at `addr`) lies in this process's mapping (direct protocols).
    fn local(&self, i: usize, addr: usize) -> *mut u8 {
        match self {
            // SAFETY (for callers): addr - lo lies inside the checked bounding range.
            Placed::Bounding { lo, choice, .. } => choice.local.wrapping_add(addr - lo),
            Placed::Each(each) => each[i].local,
            Placed::Unregistered { .. } => std::ptr::null_mut(),
        }
    }
}

/// A packed request: the sequence number (for Active Access logs), the piece count, each
/// piece's (address, length), then (puts) every piece's bytes in order.
pub(crate) fn encode_request(seq: u64, pieces: impl ExactSizeIterator<Item = (usize, usize)>, data: &[&[u8]]) -> Vec<u8> {
    let n = pieces.len();
    let mut msg = Vec::with_capacity(16 + 16 * n + data.iter().map(|d| d.len()).sum::<usize>());
    msg.extend_from_slice(&seq.to_le_bytes());
    msg.extend_from_slice(&(n as u64).to_le_bytes());
    for (addr, len) in pieces {
        msg.extend_from_slice(&(addr as u64).to_le_bytes());
        msg.extend_from_slice(&(len as u64).to_le_bytes());
    }
    for d in data {
        msg.extend_from_slice(d);
    }
    msg
}

/// A decoded packed request: (seq, pieces as (address, length), the bytes after the list).
pub(crate) type Request<'m> = (u64, Vec<(usize, usize)>, &'m [u8]);

pub(crate) fn decode_request(msg: &[u8]) -> Result<Request<'_>> {
    let bad = || Error::InvalidArgument("malformed packed request".into());
    let word = |i: usize| msg.get(i..i + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).ok_or_else(bad);
    let (seq, n) = (word(0)?, word(8)? as usize);
    let list_end = n.checked_mul(16).and_then(|b| b.checked_add(16)).filter(|&e| e <= msg.len()).ok_or_else(bad)?;
    let pieces = (0..n).map(|i| Ok((word(16 + 16 * i)? as usize, word(24 + 16 * i)? as usize))).collect::<Result<Vec<_>>>()?;
    Ok((seq, pieces, &msg[list_end..]))
}

/// The target's refusal of piece `i`: answered as a success whose value names the piece
/// (1-based) and whose bytes hold the error's own outcome, so that the origin can name the
/// piece's address in its error.
pub(crate) fn refuse(ctx: &AmCtx, i: usize, e: Error) {
    let said = e.to_string();
    let (status, bits) = am_request::status_of::<()>(Err(e));
    am_request::respond(ctx, Ok((i as u64 + 1, &am_request::encode_outcome(status, bits, &[said.as_bytes()]))));
}

/// The origin's side of an answer: Ok, or the refused piece's error in the origin's words.
pub(crate) fn answered(rank: Rank, op: &'static str, pieces: &[(usize, usize)], value: u64, bytes: &[u8]) -> Result<()> {
    if value == 0 {
        return Ok(());
    }
    let (addr, len) = pieces.get(value as usize - 1).copied().unwrap_or_default();
    let (status, bits, said) = am_request::decode_outcome(bytes);
    Err(am_request::rebuild_error(status, bits, &Asked { rank, addr, len, op }, &String::from_utf8_lossy(said)))
}

/// The target checks every piece of a packed request (and that the logs of Active Access
/// pages have room) before it touches any: None when it has already answered (a refused piece)
/// or asked to be retried (a full log).
pub(crate) fn check_pieces<'t>(
    table: &'t OwnTable,
    ctx: &AmCtx,
    seq: u64,
    pieces: &[(usize, usize)],
    op: LogOp,
) -> Option<Vec<Lookup<'t>>> {
    let kind = if op == LogOp::Put { AccessKind::Put } else { AccessKind::Get };
    let mut lookups = Vec::with_capacity(pieces.len());
    for (i, &(addr, len)) in pieces.iter().enumerate() {
        match table.check(addr, len, kind) {
            Ok(l) => lookups.push(l),
            Err(e) => {
                refuse(ctx, i, e);
                return None;
            }
        }
    }
    let me = ctx.am().conduit().rank();
    for (l, &(addr, len)) in lookups.iter().zip(pieces) {
        let logged = Logged::at_target(table.get(), l, me, ctx.src, seq);
        if l.active && !log_append::has_room(&logged, op, addr, len).unwrap_or(true) {
            ctx.retry_later();
            return None;
        }
    }
    Some(lookups)
}

/// The target's bytes of checked `pieces` a get serves, each on an Active Access page logged
/// as served; None when one was refused (the refusal answered).
pub(crate) fn serve_pieces<'m>(
    table: &OwnTable,
    ctx: &AmCtx,
    seq: u64,
    lookups: &[Lookup<'_>],
    pieces: &[(usize, usize)],
) -> Option<Vec<&'m [u8]>> {
    let me = ctx.am().conduit().rank();
    let mut served = Vec::with_capacity(pieces.len());
    for (i, (l, &(addr, len))) in lookups.iter().zip(pieces).enumerate() {
        // SAFETY: the table says [addr, addr+len) is our memory, exposed readable.
        let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
        if l.active {
            let logged = Logged::at_target(table.get(), l, me, ctx.src, seq);
            let mut w = activerma_am::Waiter::default();
            if let Err(e) = log_append::get(&logged, addr, bytes, &mut || w.step_in_handler(ctx.am(), ctx.src, "room in an access log")) {
                refuse(ctx, i, e);
                return None;
            }
        }
        served.push(bytes);
    }
    Some(served)
}

/// The target writes checked `pieces` from `data` (their bytes in order), each on an Active
/// Access page through its log; true when all are written, false when one was refused (the
/// refusal answered).
pub(crate) fn write_packed_pieces(
    table: &OwnTable,
    ctx: &AmCtx,
    seq: u64,
    lookups: &[Lookup<'_>],
    pieces: &[(usize, usize)],
    data: &[u8],
) -> bool {
    let me = ctx.am().conduit().rank();
    let mut at = 0;
    for (i, (l, &(addr, len))) in lookups.iter().zip(pieces).enumerate() {
        let bytes = &data[at..at + len];
        at += len;
        let mut write = |to: usize, b: &[u8]| {
            // SAFETY: the table says this range is our memory, exposed writable.
            unsafe { activerma_core::copy::copy_bytes(b.as_ptr(), to as *mut u8, b.len()) };
            Ok(())
        };
        let done = if l.active {
            let logged = Logged::at_target(table.get(), l, me, ctx.src, seq);
            let mut w = activerma_am::Waiter::default();
            log_append::put(&logged, addr, bytes, false, &mut write, &mut || w.step_in_handler(ctx.am(), ctx.src, "room in an access log"))
                .map(|_| ())
        } else {
            write(addr, bytes)
        };
        if let Err(e) = done {
            refuse(ctx, i, e);
            return false;
        }
    }
    true
}

pub(crate) fn register(am: &Am) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    let t = table.clone();
    am.register(
        PUT_PACKED,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let (seq, pieces, data) = match decode_request(msg) {
                Ok(r) => r,
                Err(e) => return am_request::respond(ctx, Err(e)),
            };
            if data.len() != pieces.iter().map(|p| p.1).sum::<usize>() {
                return am_request::respond(ctx, Err(Error::InvalidArgument("packed put: the bytes do not match the pieces".into())));
            }
            let Some(lookups) = check_pieces(&t, ctx, seq, &pieces, LogOp::Put) else { return };
            if write_packed_pieces(&t, ctx, seq, &lookups, &pieces, data) {
                am_request::respond(ctx, Ok((0, &[][..])))
            }
        }),
    )?;
    am.register(
        GET_PACKED,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let (seq, pieces, _) = match decode_request(msg) {
                Ok(r) => r,
                Err(e) => return am_request::respond(ctx, Err(e)),
            };
            let Some(lookups) = check_pieces(&table, ctx, seq, &pieces, LogOp::Get) else { return };
            let Some(served) = serve_pieces(&table, ctx, seq, &lookups, &pieces) else { return };
            am_request::respond(ctx, Ok((0, &served.concat())))
        }),
    )
}

fn put_packed(p: &Proto, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<()> {
    if p.landing().is_some() {
        let asks = p.put_asks(pieces.to_vec(), usize::MAX);
        return PendingTransfer::asking(p, rank, Transfer::Pipelined, asks, None).wait().map(drop);
    }
    let cell = am_request::send(p, PUT_PACKED, &packed_put_request(p, rank, pieces), rank)?;
    receive_packed_put(p, rank, cell, pieces)
}

/// The request of a packed put of `pieces` (address, bytes) to `rank`, the bytes included.
fn packed_put_request(p: &Proto, rank: Rank, pieces: &[(usize, &[u8])]) -> Vec<u8> {
    // The target logs pieces on pages it marked for Active Access itself: the next active
    // flush there must ask it.
    p.note_bounced(rank);
    let data: Vec<&[u8]> = pieces.iter().map(|x| x.1).collect();
    encode_request(p.next_seq(rank), pieces.iter().map(|x| (x.0, x.1.len())), &data)
}

/// Sends a packed put of `pieces` to `rank`, acknowledged through `receive_packed_put`; None
/// (nothing sent) while every completion cell is taken.
pub(crate) fn try_ask_packed_put(p: &Proto, rank: Rank, pieces: &[(usize, &[u8])]) -> Result<Option<u32>> {
    am_request::try_send(p, PUT_PACKED, &packed_put_request(p, rank, pieces), rank)
}

/// Waits for the target's answer to the packed put sent with `cell`: every piece written, or
/// the first it refused (then none was).
pub(crate) fn receive_packed_put(p: &Proto, rank: Rank, cell: u32, pieces: &[(usize, &[u8])]) -> Result<()> {
    let list: Vec<(usize, usize)> = pieces.iter().map(|x| (x.0, x.1.len())).collect();
    let bytes: usize = list.iter().map(|x| x.1).sum();
    let (value, answer) = am_request::answer(p, cell, &Asked { rank, addr: list[0].0, len: bytes, op: "packed put" })?;
    answered(rank, "put", &list, value, &answer)?;
    bump(&p.counters.noncontig_packed, 1);
    bump(&p.counters.put_am, 1);
    bump(&p.counters.bytes_put, bytes as u64);
    Ok(())
}

fn get_packed(p: &Proto, rank: Rank, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
    if p.landing().is_some() {
        let asks = p.get_asks(pieces.iter_mut().map(|(at, d)| (*at, &mut **d)).collect(), usize::MAX);
        return PendingTransfer::asking(p, rank, Transfer::Pipelined, asks, None).wait().map(drop);
    }
    let list: Vec<(usize, usize)> = pieces.iter().map(|x| (x.0, x.1.len())).collect();
    let cell = am_request::send(p, GET_PACKED, &packed_get_request(p, rank, &list), rank)?;
    receive_packed_get(p, rank, cell, pieces)
}

/// The request of a packed get of `list` (address, bytes) from `rank`.
fn packed_get_request(p: &Proto, rank: Rank, list: &[(usize, usize)]) -> Vec<u8> {
    // The target logs pieces on pages it marked for Active Access itself: the next active
    // flush there must ask it.
    p.note_bounced(rank);
    encode_request(p.next_seq(rank), list.iter().copied(), &[])
}

/// Sends a packed get of `list` (address, bytes) from `rank`, to be answered through
/// `receive_packed_get`; None (nothing sent) while every completion cell is taken.
pub(crate) fn try_ask_packed_get(p: &Proto, rank: Rank, list: &[(usize, usize)]) -> Result<Option<u32>> {
    am_request::try_send(p, GET_PACKED, &packed_get_request(p, rank, list), rank)
}

/// Waits for the answer to the packed get sent with `cell` and scatters it into `pieces`
/// (the list it asked for, in order).
pub(crate) fn receive_packed_get(p: &Proto, rank: Rank, cell: u32, pieces: &mut [(usize, &mut [u8])]) -> Result<()> {
    let list: Vec<(usize, usize)> = pieces.iter().map(|x| (x.0, x.1.len())).collect();
    let bytes: usize = list.iter().map(|x| x.1).sum();
    let (value, answer) = am_request::answer(p, cell, &Asked { rank, addr: list[0].0, len: bytes, op: "packed get" })?;
    answered(rank, "get", &list, value, &answer)?;
    if answer.len() != bytes {
        return Err(Error::InvalidArgument(format!("rank {rank} answered a packed get of {bytes} bytes with {}", answer.len())));
    }
    scatter(&answer, pieces);
    bump(&p.counters.noncontig_packed, 1);
    bump(&p.counters.get_am, 1);
    bump(&p.counters.bytes_got, bytes as u64);
    Ok(())
}

/// Copies `packed` (the pieces' bytes in order) into `pieces`.
pub(crate) fn scatter(packed: &[u8], pieces: &mut [(usize, &mut [u8])]) {
    let mut at = 0;
    for (_, dst) in pieces.iter_mut() {
        dst.copy_from_slice(&packed[at..at + dst.len()]);
        at += dst.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_requests_round_trip_and_reject_malformed_lists() {
        let data: [&[u8]; 2] = [b"abc", b"de"];
        let msg = encode_request(7, [(0x1000, 3), (0x2000, 2)].into_iter(), &data);
        let (seq, pieces, rest) = decode_request(&msg).unwrap();
        assert_eq!((seq, pieces, rest), (7, vec![(0x1000, 3), (0x2000, 2)], &b"abcde"[..]));
        assert!(decode_request(&msg[..20]).is_err(), "a list cut short is refused");
        let mut huge = msg.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_request(&huge).is_err(), "a piece count past the message is refused");
    }
}
