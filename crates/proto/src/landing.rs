//! The landing zone: pre-registered buffers at every target through which the buffered and
//! pipelined transfer protocols (transfer.rs; the ARMCI paper's host-based protocol, §4) move
//! their bytes. Without it those protocols carried the data inside active messages, which the
//! queues cut into slot-sized fragments (256 bytes by default): a 1 MiB buffered put moved at
//! about 130 MB/s. Here the bytes take the core's zero-copy path into the target's landing
//! zone (a memcpy into a segment mapped here, or one MPI_Put), and one small message asks the
//! target's CPU to copy them into place: two copies and a message per chunk, as in the paper.
//!
//! ```text
//! layout (every rank alike): heap = [segments: SEGMENT_SIZE][landing zone: LANDING_ZONE]
//!     landing zone = one part per origin rank; a part = SLOTS put slots, then SLOTS get slots
//!
//! put chunk (origin o -> target t, at most one slot):
//!     s = a free put slot of o's part at t   # waiting (making progress) while all are busy
//!     put(t, slot(t, o, put, s), chunk)      # the core's zero-copy path
//!     posted[t] += 1; send LANDED_PUT(addr, seq, len) with token s
//! t:  apply(addr, its slot(o, put, s))        # put_am's table check and Active Access logging
//!     send LANDED_PUT_ACK(outcome) with token s
//! o:  free s; posted[t] -= 1 (a refusal is kept for the next flush, as for posted puts)
//!
//! get chunk:
//!     s = a free get slot of o's part at t   # none free and none of this transfer's chunks
//!                                            # in flight: a plain get request instead (get_am),
//!                                            # so a thread never waits for slots that its own
//!                                            # handles, not waited for yet, hold
//!     request LANDED_GET(addr, len, seq, s)
//! t:  check, log if Active Access, copy addr -> its slot(o, get, s); answer
//! o:  get(t, slot(t, o, get, s), dst)         # zero-copy; then free s
//!
//! lists of pieces (strided and vector transfers by the buffered protocols, the packed
//! method), in groups of at most one slot of bytes:
//!     get: request LANDED_GET_PIECES(s, the list); t checks every piece, gathers them into
//!          its slot(o, get, s), answers; o gets the slot and scatters it
//!     put: o packs the pieces' bytes, puts them into slot(t, o, put, s), requests
//!          LANDED_PUT_PIECES(s, the list); t checks every piece, scatters the slot, answers;
//!          o frees s at the answer
//!     (no slot free and nothing of the transfer in flight: the packed message of before)
//! ```
//!
//! Messages of one pair run in order, so landed puts apply in the order they were issued, and
//! a get after a put to the same place (both through the target) reads the new bytes. Slots
//! are this origin's alone at each target (its part), so claiming one is a bit in this
//! process: the target keeps no state. A target that dies takes its acknowledgements with it:
//! `forget` frees every slot at it and starts a new epoch of that target's slots, so that a
//! transfer still holding a claim from before (another thread, failing with RankFailed a
//! moment later, or an acknowledgement of the dead process handled late) cannot free a slot
//! somebody claimed since: a claim names its epoch, and freeing it outside that epoch does
//! nothing.

use crate::am_request::{self, Asked, OwnTable};
use crate::{get_am, noncontig, put_am, Proto};
use activerma_access::LogOp;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::page::{page_ceil, page_floor, page_size};
use activerma_core::{settings, Config, Error, Rank, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const LANDED_PUT: HandlerId = 27;
pub const LANDED_PUT_ACK: HandlerId = 28;
pub const LANDED_GET: HandlerId = 29;
pub const LANDED_GET_PIECES: HandlerId = 30;
pub const LANDED_PUT_PIECES: HandlerId = 31;

/// Slots per direction in an origin's part: enough for the pipeline (transfer.rs keeps 4
/// chunks in flight), few enough that a part stays small when there are many ranks.
const SLOTS: usize = 4;

/// A claimed slot: its index in the part, and the epoch of the target's slots it was claimed
/// in (`Landing::forget` starts a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub index: u32,
    epoch: u32,
}

impl Slot {
    /// The claim as a message token (a landed put's, echoed by its acknowledgement): the
    /// target reads the index from the low half.
    fn token(self) -> u64 {
        u64::from(self.epoch) << 32 | u64::from(self.index)
    }

    fn from_token(token: u64) -> Slot {
        Slot { index: token as u32, epoch: (token >> 32) as u32 }
    }
}

/// Put or get slots.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Put = 0,
    Get = 1,
}

/// Where the landing zone lies and how it is cut, and which of this origin's slots at each
/// target are busy.
pub(crate) struct Landing {
    /// Offset of the landing zone in every rank's heap.
    offset: usize,
    /// Bytes of one origin's part, of one slot, and slots per direction.
    part: usize,
    slot: usize,
    slots: usize,
    /// Per target and direction: the slots' epoch in the high half, and in the low half bit i
    /// set while slot i is in use.
    busy: Vec<[AtomicU64; 2]>,
    me: Rank,
    /// This rank's heap as its own process maps it (the target's side copies there).
    own_heap: usize,
}

impl Landing {
    /// The job's landing zone (the same layout on every rank), or None when
    /// ACTIVERMA_LANDING_ZONE is 0 or too small to give every origin a page per slot.
    pub fn from_config(cfg: &Config, am: &Am) -> Result<Option<Arc<Landing>>> {
        let (zone, offset) = (cfg.landing_zone_bytes()?, cfg.segment_heap_bytes()?);
        let conduit = am.conduit();
        let n = conduit.size();
        let part = page_floor(zone / n);
        let slots = SLOTS.min(part / 2 / page_size());
        if slots == 0 {
            return Ok(None);
        }
        let chunk = page_ceil(cfg.get_u64(settings::PIPELINE_CHUNK)?.max(1) as usize);
        let slot = chunk.min(page_floor(part / 2 / slots));
        let own_heap = conduit.heap_window(conduit.rank()).ok_or_else(|| Error::Unsupported("conduit without a local heap".into()))?;
        if own_heap.len < offset + zone {
            return Err(Error::InvalidArgument(format!(
                "the heap maps {} bytes, short of the segments' {offset} and the landing zone's {zone}",
                own_heap.len
            )));
        }
        Ok(Some(Arc::new(Landing {
            offset,
            part,
            slot,
            slots,
            busy: (0..n).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
            me: conduit.rank(),
            own_heap: own_heap.local as usize,
        })))
    }

    /// Bytes one slot holds: the largest chunk a landed transfer moves per message.
    pub fn slot_bytes(&self) -> usize {
        self.slot
    }

    /// Offset of slot `s` of `origin`'s part, direction `dir`, from the heap's start.
    fn slot_offset(&self, origin: Rank, dir: Dir, s: u32) -> usize {
        self.offset + origin * self.part + (dir as usize * self.slots + s as usize) * self.slot
    }

    /// Takes a free slot of ours at `target`, or None while all are busy.
    fn try_claim(&self, target: Rank, dir: Dir) -> Option<Slot> {
        let busy = &self.busy[target][dir as usize];
        let all = (1u64 << self.slots) - 1;
        let mut now = busy.load(Ordering::Acquire);
        loop {
            let free = !now & all;
            if free == 0 {
                return None;
            }
            let index = free.trailing_zeros();
            match busy.compare_exchange_weak(now, now | 1 << index, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Slot { index, epoch: (now >> 32) as u32 }),
                Err(seen) => now = seen,
            }
        }
    }

    /// Gives `slot` back, unless its epoch has ended (`forget`): then it is no longer ours
    /// to free, whoever holds that index now.
    fn free(&self, target: Rank, dir: Dir, slot: Slot) {
        let _ = self.busy[target][dir as usize].fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            ((now >> 32) as u32 == slot.epoch).then_some(now & !(1 << slot.index))
        });
    }

    /// Frees every slot at `target` (it died: its acknowledgements and answers never come)
    /// and starts their next epoch.
    pub fn forget(&self, target: Rank) {
        for b in &self.busy[target] {
            let _ = b.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| Some(u64::from(((now >> 32) as u32).wrapping_add(1)) << 32));
        }
    }

    /// Where `origin`'s slot lies here, as this (target) process sees it. Only the target's
    /// handler for a message of `origin` naming slot `s` may touch it, and only until it
    /// answers (then the origin may reuse the slot).
    fn own_slot(&self, origin: Rank, dir: Dir, s: u32) -> *mut u8 {
        (self.own_heap + self.slot_offset(origin, dir, s)) as *mut u8
    }

    /// Checks a message's slot and length against the layout (a forged message must not make
    /// the target copy outside the origin's part).
    fn checked(&self, s: u64, len: usize) -> Result<u32> {
        if (s as usize) < self.slots && len <= self.slot {
            Ok(s as u32)
        } else {
            Err(Error::InvalidArgument(format!(
                "a landed transfer names slot {s} and {len} bytes (slots: {} of {} bytes)",
                self.slots, self.slot
            )))
        }
    }
}

pub(crate) fn register(am: &Am, landing: Arc<Landing>, posted: Arc<put_am::PostedPuts>) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    let (l, t) = (landing.clone(), table.clone());
    am.register(
        LANDED_PUT,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let (addr, seq, len) = (word(msg, 0) as usize, word(msg, 8), word(msg, 16) as usize);
            let outcome = l.checked(Slot::from_token(ctx.token).index.into(), len).and_then(|s| {
                // SAFETY: the origin put the chunk into this slot (`checked`: inside its part)
                // and leaves it alone until we answer.
                let data = unsafe { std::slice::from_raw_parts(l.own_slot(ctx.src, Dir::Put, s), len) };
                put_am::apply_at(&t, ctx, addr, seq, data)
            });
            if let Ok(false) = outcome {
                return ctx.retry_later(); // a full access log: the slot keeps the bytes
            }
            put_am::acknowledge(ctx, LANDED_PUT_ACK, ctx.token, outcome.map(drop), addr, len);
        }),
    )?;
    register_pieces(am, landing.clone())?;
    let l = landing.clone();
    am.register(
        LANDED_PUT_ACK,
        Arc::new(move |ctx: &AmCtx, ack: &[u8]| {
            let slot = Slot::from_token(ctx.token);
            if (slot.index as usize) < l.slots {
                l.free(ctx.src, Dir::Put, slot);
            }
            put_am::acknowledged(&posted, ctx.src, ack);
        }),
    )?;
    am.register(
        LANDED_GET,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            // Some(()), or None: a log to append to is full, retry later (see put_am::apply).
            let outcome = (|| {
                let (addr, len, seq) = (word(msg, 0) as usize, word(msg, 8) as usize, word(msg, 16));
                let s = landing.checked(word(msg, 24), len)?;
                let Some(bytes) = get_am::serve(&table, ctx, addr, len, seq)? else { return Ok(None) };
                // SAFETY: the origin's slot (`checked`: len fits it), which it reads only after
                // our answer.
                unsafe { activerma_core::copy::copy_bytes(bytes.as_ptr(), landing.own_slot(ctx.src, Dir::Get, s), len) };
                Ok(Some(()))
            })();
            match outcome.transpose() {
                None => ctx.retry_later(),
                Some(answer) => am_request::respond(ctx, answer.map(|_| (0, &[][..]))),
            }
        }),
    )
}

/// A landed list request: the slot, then a packed request (noncontig::encode_request) without
/// bytes; the slot checked against the list's bytes.
fn decode_pieces_request<'m>(l: &Landing, msg: &'m [u8]) -> Result<(u32, noncontig::Request<'m>, usize)> {
    let (seq, pieces, rest) = noncontig::decode_request(msg.get(8..).unwrap_or_default())?;
    let total = pieces.iter().try_fold(0usize, |sum, p| sum.checked_add(p.1)).unwrap_or(usize::MAX);
    let s = l.checked(word(msg, 0), total)?;
    Ok((s, (seq, pieces, rest), total))
}

/// A landed list request decoded and every piece checked (noncontig::check_pieces): (slot,
/// sequence number, pieces, their lookups, their bytes); None when it has been answered (a
/// malformed request, a refused piece) or is to be retried (a full log).
#[allow(clippy::type_complexity)]
fn checked_list<'t>(
    l: &Landing,
    table: &'t OwnTable,
    ctx: &AmCtx,
    msg: &[u8],
    op: LogOp,
) -> Option<(u32, u64, Vec<(usize, usize)>, Vec<activerma_mem::Lookup<'t>>, usize)> {
    let (s, (seq, pieces, _), total) = match decode_pieces_request(l, msg) {
        Ok(r) => r,
        Err(e) => {
            am_request::respond(ctx, Err(e));
            return None;
        }
    };
    let lookups = noncontig::check_pieces(table, ctx, seq, &pieces, op)?;
    Some((s, seq, pieces, lookups, total))
}

fn register_pieces(am: &Am, l: Arc<Landing>) -> Result<()> {
    let table = Arc::new(OwnTable::new(am.conduit().clone()));
    let (gl, gt) = (l.clone(), table.clone());
    am.register(
        LANDED_GET_PIECES,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let Some((s, seq, pieces, lookups, _)) = checked_list(&gl, &gt, ctx, msg, LogOp::Get) else { return };
            let Some(served) = noncontig::serve_pieces(&gt, ctx, seq, &lookups, &pieces) else { return };
            let mut to = gl.own_slot(ctx.src, Dir::Get, s);
            for bytes in served {
                // SAFETY: the origin's slot, which the pieces' bytes fit (`checked`) and which it
                // reads only after our answer.
                unsafe {
                    activerma_core::copy::copy_bytes(bytes.as_ptr(), to, bytes.len());
                    to = to.add(bytes.len());
                }
            }
            am_request::respond(ctx, Ok((0, &[][..])));
        }),
    )?;
    am.register(
        LANDED_PUT_PIECES,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let Some((s, seq, pieces, lookups, total)) = checked_list(&l, &table, ctx, msg, LogOp::Put) else { return };
            // SAFETY: the origin put the pieces' bytes into this slot (`checked`: they fit it)
            // and leaves it alone until we answer.
            let data = unsafe { std::slice::from_raw_parts(l.own_slot(ctx.src, Dir::Put, s), total) };
            if noncontig::write_packed_pieces(&table, ctx, seq, &lookups, &pieces, data) {
                am_request::respond(ctx, Ok((0, &[][..])));
            }
        }),
    )
}

/// A little-endian word of a message at `at` (0 past its end: the checks refuse what follows).
fn word(msg: &[u8], at: usize) -> u64 {
    msg.get(at..at + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

impl Proto {
    /// The job's landing zone, if it has one (ACTIVERMA_LANDING_ZONE).
    pub(crate) fn landing(&self) -> Option<&Landing> {
        self.landing.as_deref()
    }

    /// Address of slot `s` of our part at `target`, direction `dir`.
    fn landing_slot(&self, l: &Landing, target: Rank, dir: Dir, s: u32) -> usize {
        self.conduit.heap_base(target) + l.slot_offset(l.me, dir, s)
    }

    /// Posts `src` (at most one slot) to `target`'s `addr` through the landing zone: it is in
    /// the target's slot when this returns (`src` may be reused), and applied when the
    /// target acknowledges it (`put_am::wait_acknowledged`, as posted puts). `one_at_a_time`
    /// (the buffered protocol) first waits until every earlier posted put to `target` is
    /// acknowledged: no chunk overlaps another's copy.
    pub(crate) fn post_landed(&self, l: &Landing, target: Rank, addr: usize, src: &[u8], one_at_a_time: bool) -> Result<()> {
        debug_assert!(src.len() <= l.slot);
        if one_at_a_time && self.posted.any_to(target) {
            self.am.wait_until(|| !self.posted.any_to(target), target, "the acknowledgement of a buffered put")?;
        }
        // Wait for a slot while posted puts hold some (their acknowledgements free them); slots
        // held by list puts this thread has not waited for would never come back: then the
        // chunk travels in a message of its own.
        let mut claimed = None;
        self.am.wait_until(
            || {
                claimed = l.try_claim(target, Dir::Put);
                claimed.is_some() || !self.posted.any_to(target)
            },
            target,
            "a free landing slot (acknowledgements of landed puts)",
        )?;
        let Some(s) = claimed else { return put_am::post(self, target, addr, src) };
        let sent = (|| {
            self.put(target, self.landing_slot(l, target, Dir::Put, s.index), src)?;
            let mut msg = [0u8; 24];
            msg[..8].copy_from_slice(&(addr as u64).to_le_bytes());
            msg[8..16].copy_from_slice(&self.next_seq(target).to_le_bytes());
            msg[16..].copy_from_slice(&(src.len() as u64).to_le_bytes());
            put_am::send_posted(self, target, LANDED_PUT, s.token(), &msg)
        })();
        match sent {
            Ok(()) => bump(&self.counters.landed_put, 1),
            Err(_) => l.free(target, Dir::Put, s),
        }
        sent
    }

    /// Asks `target` to copy `len` bytes at `addr` into a landing slot of ours: Some((cell,
    /// slot)) when sent, None (nothing sent) while no slot or no completion cell is free.
    pub(crate) fn try_ask_landed(&self, l: &Landing, target: Rank, addr: usize, len: usize) -> Result<Option<(u32, Slot)>> {
        debug_assert!(len <= l.slot);
        self.with_slot(l, target, Dir::Get, |s| {
            let mut msg = [0u8; 32];
            msg[..8].copy_from_slice(&(addr as u64).to_le_bytes());
            msg[8..16].copy_from_slice(&(len as u64).to_le_bytes());
            msg[16..24].copy_from_slice(&self.next_seq(target).to_le_bytes());
            msg[24..].copy_from_slice(&u64::from(s.index).to_le_bytes());
            am_request::try_send(self, LANDED_GET, &msg, target)
        })
    }

    /// Claims a slot of ours at `target` and runs `send` with it: Some((cell, slot)) when it
    /// sent a request; the slot is given back when it sent nothing or failed.
    fn with_slot(
        &self,
        l: &Landing,
        target: Rank,
        dir: Dir,
        send: impl FnOnce(Slot) -> Result<Option<u32>>,
    ) -> Result<Option<(u32, Slot)>> {
        let Some(s) = l.try_claim(target, dir) else { return Ok(None) };
        match send(s) {
            Ok(Some(cell)) => Ok(Some((cell, s))),
            other => {
                l.free(target, dir, s);
                other.map(|_| None)
            }
        }
    }

    /// Asks `target` to gather `list` (at most a slot of bytes) into a slot of ours (`data`
    /// None), or puts `data` (the list's bytes, in order) into a slot of ours and asks `target`
    /// to scatter it: Some((cell, slot)) when sent, None (nothing sent) while no slot or no
    /// completion cell is free.
    pub(crate) fn try_ask_landed_pieces(
        &self,
        l: &Landing,
        target: Rank,
        list: &[(usize, usize)],
        data: Option<&[&[u8]]>,
    ) -> Result<Option<(u32, Slot)>> {
        let (dir, handler) = if data.is_some() { (Dir::Put, LANDED_PUT_PIECES) } else { (Dir::Get, LANDED_GET_PIECES) };
        self.with_slot(l, target, dir, |s| {
            if let Some(data) = data {
                self.put(target, self.landing_slot(l, target, dir, s.index), &data.concat())?;
            }
            // The target logs pieces on pages it marked for Active Access itself: the next
            // active flush there must ask it.
            self.note_bounced(target);
            let mut msg = u64::from(s.index).to_le_bytes().to_vec();
            msg.extend_from_slice(&noncontig::encode_request(self.next_seq(target), list.iter().copied(), &[]));
            am_request::try_send(self, handler, &msg, target)
        })
    }

    /// Waits for the answer to `try_ask_landed_pieces`' request and frees the slot; for a get
    /// (`into`: the pieces asked for, in order) first gets the slot and scatters it.
    pub(crate) fn receive_landed_pieces(
        &self,
        l: &Landing,
        target: Rank,
        cell: u32,
        s: Slot,
        list: &[(usize, usize)],
        into: Option<&mut [(usize, &mut [u8])]>,
    ) -> Result<()> {
        let (dir, op) = if into.is_some() { (Dir::Get, "get") } else { (Dir::Put, "put") };
        let bytes: usize = list.iter().map(|x| x.1).sum();
        let outcome = (|| {
            let asked = Asked { rank: target, addr: list.first().map_or(0, |x| x.0), len: bytes, op: "packed list" };
            let (value, answer) = am_request::answer(self, cell, &asked)?;
            noncontig::answered(target, op, list, value, &answer)?;
            if let Some(pieces) = into {
                let mut packed = vec![0u8; bytes];
                self.get(target, self.landing_slot(l, target, dir, s.index), &mut packed)?;
                noncontig::scatter(&packed, pieces);
            }
            Ok(())
        })();
        l.free(target, dir, s);
        outcome?;
        bump(&self.counters.noncontig_packed, 1);
        bump(if dir == Dir::Get { &self.counters.landed_get } else { &self.counters.landed_put }, 1);
        Ok(())
    }

    /// Waits for the answer to `try_ask_landed`'s request, then reads the slot into `dst` and
    /// frees it (also when the target refused).
    pub(crate) fn receive_landed(&self, l: &Landing, target: Rank, addr: usize, cell: u32, s: Slot, dst: &mut [u8]) -> Result<()> {
        let outcome = am_request::answer(self, cell, &Asked { rank: target, addr, len: dst.len(), op: "get" })
            .and_then(|_| self.get(target, self.landing_slot(l, target, Dir::Get, s.index), dst));
        l.free(target, Dir::Get, s);
        outcome?;
        bump(&self.counters.landed_get, 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landing(targets: usize) -> Landing {
        Landing {
            offset: 0,
            part: 8 * 4096,
            slot: 4096,
            slots: SLOTS,
            busy: (0..targets).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
            me: 0,
            own_heap: 0,
        }
    }

    #[test]
    fn claims_take_every_slot_once_and_free_gives_it_back() {
        let l = landing(2);
        let claims: Vec<Slot> = (0..SLOTS).map(|_| l.try_claim(1, Dir::Get).expect("a free slot")).collect();
        let mut indices: Vec<u32> = claims.iter().map(|s| s.index).collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..SLOTS as u32).collect::<Vec<_>>());
        assert_eq!(l.try_claim(1, Dir::Get), None, "all busy");
        assert!(l.try_claim(1, Dir::Put).is_some(), "put slots are apart from get slots");
        assert!(l.try_claim(0, Dir::Get).is_some(), "slots at another target are apart");
        l.free(1, Dir::Get, claims[2]);
        assert_eq!(l.try_claim(1, Dir::Get).map(|s| s.index), Some(claims[2].index));
    }

    #[test]
    fn a_claim_from_before_forget_cannot_free_a_later_claim() {
        let l = landing(2);
        let old = l.try_claim(1, Dir::Put).expect("a free slot");
        // The target dies: every slot at it is free again, and a transfer claims the same one.
        l.forget(1);
        let new = l.try_claim(1, Dir::Put).expect("a free slot after forget");
        assert_eq!(new.index, old.index);
        assert_ne!(new, old);
        // The old holder (failing with RankFailed, or a late acknowledgement) frees its claim:
        // the new one must stay taken.
        l.free(1, Dir::Put, old);
        assert_ne!(l.try_claim(1, Dir::Put).map(|s| s.index), Some(new.index), "the new claim was freed by the old one");
        l.free(1, Dir::Put, new);
        // A token round trip keeps the epoch (a landed put's acknowledgement carries it).
        assert_eq!(Slot::from_token(new.token()), new);
    }
}
