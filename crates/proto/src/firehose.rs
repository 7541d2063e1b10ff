//! Firehose registration (ACTIVERMA_REGISTRATION=firehose): the runtime side of
//! `activerma_mem::firehose`. Every rank has one `Firehose`; as an origin it holds at most f
//! firehoses (pinned buckets) on each other rank, as a target it pins at most M buckets for
//! others plus MAXVICTIM of released ones kept as victims (lazy deregistration).
//!
//! ```text
//! origin (every put/get to another rank's private memory)  target
//!   drop the table lookup
//!   per piece of at most f buckets:
//!     try_remote_pin(rank, piece) -- a firehose hit: no message
//!        miss: remote_pin: MOVE{release, pin} (AM 11) ->  serve_move: unpin released buckets
//!                                                          beyond MAXVICTIM victims, pin the
//!                                                          new ones (TablePinner: Registrar
//!                                                          hold + REGISTERED on exposed pages)
//!              <----------------------- MOVE_REPLY (AM 12): move_done
//!     check the table again; registered: put_cma / get_cma (put_active / get_active)
//!     release_remote(pin)      -- the firehose stays, a victim candidate for our next move
//!     not registered though we hold a firehose: it is stale (range exposed anew), drop it
//!     (invalidate_remote) and retry; the target cannot pin (memlock, budget): bounce
//! unexpose (target): table.unexpose (waits for copies, unpins), invalidate_local, and
//!   INVALIDATE(addr, len) (AM 13, one-way) to every other rank -> invalidate_remote
//! ```
//! A registration hit is decided by the origin's own firehose table (`try_remote_pin`: every
//! bucket of the piece has a committed firehose of ours — no message), as on a NIC, where an
//! origin holds keys only for buckets pinned on its behalf: a page the target keeps pinned for
//! another origin is a miss for us, and threads of one rank share their hits (Firehose-SMP).
//! The table's REGISTERED bits are still checked before every copy (the NIC's check), which
//! is what catches a firehose made stale by an unexpose whose INVALIDATE is still on its way.
//!
//! The target's pinner is the translation table: a bucket is pinned page by page through the
//! Registrar (the one place that mlocks, enforces ACTIVERMA_PIN_LIMIT and counts
//! `RegistrationStats`), and exactly its exposed pages carry REGISTERED while it is pinned.
//! Pages of a bucket outside every exposure are not pinned (nothing may reach them).

use crate::select::Choice;
use crate::{registered_move, Proto};
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{settings, Error, Rank, Result};
use activerma_mem::firehose::{Config, Firehose, MoveReply, MoveRequest, MoveTransport, Pinner};
use activerma_mem::{AccessKind, TargetTable};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Handler ids (9 and 10 are PART's).
pub const MOVE: HandlerId = 11;
pub const MOVE_REPLY: HandlerId = 12;
pub const INVALIDATE: HandlerId = 13;

/// How long one `MoveTransport::poll` keeps polling for a message (a move's round trip with
/// a few pins at the target is 5-20 us).
const POLL_SPIN: Duration = Duration::from_micros(50);

/// Retries of one piece when the table does not show the pages registered after a pin.
const TRIES: usize = 3;

/// The target's pinner: pins and registers through its translation table.
struct TablePinner(Arc<TargetTable>);

impl Pinner for TablePinner {
    fn pin(&self, addr: usize, len: usize) -> Result<()> {
        self.0.firehose_pin(addr, len)
    }
    fn unpin(&self, addr: usize, len: usize) -> Result<()> {
        self.0.firehose_unpin(addr, len)
    }
}

/// Moves travel as active messages. `Weak`: the Am owns the handlers that own the Firehose.
struct AmMoves(Weak<Am>);

impl MoveTransport for AmMoves {
    fn send_move(&self, target: Rank, req: MoveRequest) -> Result<()> {
        let am = self.0.upgrade().ok_or(Error::Finalized)?;
        am.send(target, MOVE, 0, &encode_request(&req))
    }
    /// Firehose naps (200 us) after a few idle polls, expecting another thread to deliver the
    /// reply and wake it; here our own polling usually delivers it, so keep polling for a
    /// round trip's time before reporting an idle round.
    fn poll(&self) {
        let Some(am) = self.0.upgrade() else { return };
        let t0 = std::time::Instant::now();
        while am.progress() == 0 && t0.elapsed() < POLL_SPIN {
            std::hint::spin_loop();
        }
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn read_u64s(msg: &[u8]) -> impl Iterator<Item = u64> + '_ {
    msg.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

/// move_id, bucket_bytes, has_arg, arg, n_release, n_pin, release..., pin...
fn encode_request(r: &MoveRequest) -> Vec<u8> {
    let mut m = Vec::with_capacity(48 + 8 * (r.release.len() + r.pin.len()));
    for v in [r.move_id, r.bucket_bytes as u64, r.target_arg.is_some() as u64, r.target_arg.unwrap_or(0)] {
        put_u64(&mut m, v);
    }
    put_u64(&mut m, r.release.len() as u64);
    put_u64(&mut m, r.pin.len() as u64);
    r.release.iter().chain(&r.pin).for_each(|&b| put_u64(&mut m, b as u64));
    m
}

fn decode_request(msg: &[u8]) -> Option<MoveRequest> {
    let w: Vec<u64> = read_u64s(msg).collect();
    let (nr, np) = (*w.get(4)? as usize, *w.get(5)? as usize);
    if !msg.len().is_multiple_of(8) || w.len() != 6 + nr + np {
        return None;
    }
    Some(MoveRequest {
        move_id: w[0],
        bucket_bytes: w[1] as usize,
        target_arg: (w[2] != 0).then_some(w[3]),
        release: w[6..6 + nr].iter().map(|&b| b as usize).collect(),
        pin: w[6 + nr..].iter().map(|&b| b as usize).collect(),
    })
}

/// move_id, status (0 ok, else the error's code), callback_ran, then the error's text.
fn encode_reply(r: &MoveReply) -> Vec<u8> {
    let mut m = Vec::with_capacity(32);
    put_u64(&mut m, r.move_id);
    put_u64(&mut m, r.result.as_ref().err().map_or(0, |e| e.code() as u64));
    put_u64(&mut m, r.target_callback_ran as u64);
    if let Err(e) = &r.result {
        m.extend_from_slice(e.to_string().as_bytes());
    }
    m
}

fn decode_reply(src: Rank, msg: &[u8]) -> Option<MoveReply> {
    if msg.len() < 24 {
        return None;
    }
    let w: Vec<u64> = read_u64s(&msg[..24]).collect();
    let text = String::from_utf8_lossy(&msg[24..]).into_owned();
    let result = match w[1] {
        0 => Ok(()),
        // Pins refused at the target (RLIMIT_MEMLOCK, ACTIVERMA_PIN_LIMIT): the origin bounces.
        7 => Err(Error::OutOfResources(format!("rank {src}: {text}"))),
        _ => Err(Error::InvalidArgument(format!("rank {src} refused a firehose move: {text}"))),
    };
    Some(MoveReply { move_id: w[0], result, target_callback_ran: w[2] != 0 })
}

/// M, MAXVICTIM, bucket pages from the job's configuration; f = M / (ranks - 1).
fn firehose_config(job: &activerma_core::Config, rank: Rank, nranks: usize) -> Result<Config> {
    let m = job.get_u64(settings::FIREHOSE_M)? as usize;
    let v = job.get_u64(settings::FIREHOSE_MAXVICTIM)? as usize;
    let pages = job.get_u64(settings::FIREHOSE_BUCKET)? as usize;
    let timeout = job.get_f64(settings::TIMEOUT_S)?;
    if pages == 0 || !pages.is_power_of_two() {
        return Err(Error::BadSetting {
            name: settings::FIREHOSE_BUCKET.into(),
            value: pages.to_string(),
            why: "pages per bucket must be a power of two (1 = page-based firehose)".into(),
        });
    }
    let mut cfg = Config::new(rank, nranks, m, v).with_bucket_pages(pages);
    cfg.wait_timeout = (timeout > 0.0).then(|| Duration::from_secs_f64(timeout));
    cfg.validate().map_err(|e| Error::BadSetting {
        name: format!("{} / {} / {}", settings::FIREHOSE_M, settings::FIREHOSE_MAXVICTIM, settings::FIREHOSE_BUCKET),
        value: format!("{m} / {v} / {pages}"),
        why: format!("{e} (with {nranks} ranks, f = M / (ranks - 1) buckets of {} bytes each)", cfg.bucket_bytes),
    })?;
    Ok(cfg)
}

/// Creates this rank's Firehose and installs its handlers; call after the table exists and
/// before the job's first barrier.
pub(crate) fn setup(am: &Arc<Am>, table: Arc<TargetTable>, job: &activerma_core::Config) -> Result<Arc<Firehose>> {
    let conduit = am.conduit();
    let cfg = firehose_config(job, conduit.rank(), conduit.size())?;
    let fh = Arc::new(Firehose::new(cfg, Arc::new(TablePinner(table)), Arc::new(AmMoves(Arc::downgrade(am))))?);
    let f = fh.clone();
    am.register(
        MOVE,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let reply = match decode_request(msg) {
                Some(req) => f.serve_move(ctx.src, req),
                None => {
                    eprintln!("activerma: rank {}: malformed firehose move from rank {} dropped", ctx.am().conduit().rank(), ctx.src);
                    return;
                }
            };
            ctx.reply(MOVE_REPLY, 0, &encode_reply(&reply));
        }),
    )?;
    let f = fh.clone();
    am.register(
        MOVE_REPLY,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| match decode_reply(ctx.src, msg) {
            Some(reply) => f.move_done(ctx.src, reply),
            None => eprintln!("activerma: rank {}: malformed firehose reply from rank {} dropped", ctx.am().conduit().rank(), ctx.src),
        }),
    )?;
    let f = fh.clone();
    am.register(
        INVALIDATE,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let w: Vec<u64> = read_u64s(msg).collect();
            if let [addr, len] = w[..] {
                f.invalidate_remote(ctx.src, addr as usize, len as usize);
            }
        }),
    )?;
    Ok(fh)
}

impl Proto {
    /// This rank's Firehose (ACTIVERMA_REGISTRATION=firehose only).
    pub fn firehose(&self) -> Option<&Arc<Firehose>> {
        self.firehose.as_ref()
    }

    /// Target side, before `[addr, addr+len)` is exposed: a bucket still pinned from earlier
    /// use of these addresses (or shared with a neighbouring exposure) is unpinned, so the
    /// next move pins it afresh and registers the new exposure's pages too.
    pub fn firehose_exposing(&self, addr: usize, len: usize) {
        if let Some(fh) = &self.firehose {
            fh.invalidate_local(addr, len);
        }
    }

    /// Target side, after `[addr, addr+len)` was unexposed (which waited for copies and
    /// unpinned its pages): no bucket of it stays pinned here, and every other rank drops its
    /// firehoses on it. Tells every rank on a best-effort basis (a failed send only costs the
    /// origin a retry: a firehose whose pages the table shows unregistered is dropped anyway).
    pub fn firehose_unexposed(&self, addr: usize, len: usize) {
        let Some(fh) = &self.firehose else { return };
        fh.invalidate_local(addr, len);
        let mut m = Vec::with_capacity(16);
        put_u64(&mut m, addr as u64);
        put_u64(&mut m, len as u64);
        let me = self.conduit.rank();
        for r in (0..self.conduit.size()).filter(|&r| r != me) {
            let _ = self.am.send(r, INVALIDATE, 0, &m);
        }
    }
}

/// The hit path, taken while the access's first table lookup is still held (no waiting can
/// happen on it): when every bucket already has a committed firehose of ours and the table
/// shows the pages registered, `zero_copy()` moves the data and the firehoses are released —
/// one table check per access, as for a registered page under pin-all. None when it is not
/// such a plain hit (a miss, Active Access pages, more than f buckets, a stale firehose): the
/// caller drops the lookup and takes `put` / `get`, which count the hit or miss themselves.
pub(crate) fn try_hit(
    p: &Proto,
    c: &Choice,
    rank: Rank,
    addr: usize,
    len: usize,
    zero_copy: impl FnOnce() -> Result<()>,
) -> Option<Result<()>> {
    let fh = p.firehose.as_ref()?;
    let lookup = c.lookup();
    if lookup.active || fh.config().buckets(addr, len).count > fh.config().firehoses_per_rank {
        return None;
    }
    let pin = fh.try_remote_pin(rank, addr, len)?;
    if !p.tables[rank].as_ref().is_some_and(|t| t.registered(lookup, addr, len)) {
        let _ = fh.release_remote(pin);
        return None;
    }
    bump(&p.reg_stats.hits, 1);
    let moved = zero_copy();
    Some(moved.and(fh.release_remote(pin)))
}

/// Moves one piece `(offset, len)` of a transfer: zero-copy with a choice, else bounced.
type PieceMover<'a> = dyn FnMut(usize, usize, Option<&Choice>) -> Result<()> + 'a;

/// Moves `[addr, addr+len)` in pieces of at most f buckets: for each, pin it through our
/// firehoses, move it zero-copy (`run(offset, piece_len, Some(choice))`) and release the
/// firehoses; or bounce the piece (`run(.., None)`) when the target cannot pin.
fn transfer(p: &Proto, rank: Rank, addr: usize, len: usize, kind: AccessKind, run: &mut PieceMover) -> Result<()> {
    let fh = p.firehose.as_ref().expect("firehose protocols are chosen only when the strategy is firehose");
    in_pieces(fh, addr, len, &mut |off, a, n| piece(p, fh, rank, a, n, kind, &mut |c| run(off, n, c)))
}

/// Calls `each(offset, addr, len)` for the pieces of `[addr, addr+len)` that one set of f
/// firehoses covers (cut at bucket boundaries).
pub(crate) fn in_pieces(fh: &Firehose, addr: usize, len: usize, each: &mut dyn FnMut(usize, usize, usize) -> Result<()>) -> Result<()> {
    let cfg = fh.config();
    let (bucket, f) = (cfg.bucket_bytes, cfg.firehoses_per_rank.max(1));
    let mut off = 0;
    while off < len {
        let a = addr + off;
        let end = ((a & !(bucket - 1)) + f * bucket).min(addr + len);
        each(off, a, end - a)?;
        off = end - addr;
    }
    Ok(())
}

/// `[addr, addr+len)` pinned through our firehoses at once (one miss or hit), then
/// `run(Some(choice))` moves it zero-copy, or `run(None)` bounces it: for a caller that moves
/// many pieces inside the range (a list's bounding range, noncontig.rs). None, with nothing
/// done, when the range needs more than the f firehoses we may hold at the target.
pub(crate) fn at_once(
    p: &Proto,
    rank: Rank,
    addr: usize,
    len: usize,
    kind: AccessKind,
    run: &mut registered_move::MoveWith,
) -> Option<Result<()>> {
    let fh = p.firehose.as_ref()?;
    (fh.config().buckets(addr, len).count <= fh.config().firehoses_per_rank).then(|| piece(p, fh, rank, addr, len, kind, run))
}

#[allow(clippy::too_many_arguments)]
fn piece(
    p: &Proto,
    fh: &Firehose,
    rank: Rank,
    addr: usize,
    len: usize,
    kind: AccessKind,
    run: &mut registered_move::MoveWith,
) -> Result<()> {
    for attempt in 0..TRIES {
        let hit = fh.try_remote_pin(rank, addr, len);
        if attempt == 0 {
            bump(if hit.is_some() { &p.reg_stats.hits } else { &p.reg_stats.misses }, 1);
        }
        let pinned = match hit {
            Some(pin) => Ok(pin),
            None => fh.remote_pin(rank, addr, len),
        };
        let pin = match pinned {
            Ok(pin) => pin,
            Err(Error::OutOfResources(why)) => {
                if p.verbose {
                    eprintln!("activerma: rank {} -> rank {rank}: firehose move refused, bouncing: {why}", p.conduit.rank());
                }
                break;
            }
            Err(e) => return Err(e),
        };
        let moved = registered_move::try_zero_copy(p, rank, addr, len, kind, run);
        let released = fh.release_remote(pin);
        if let Some(r) = moved {
            return r.and(released);
        }
        released?;
        // We hold firehoses there but the table shows a page unregistered: the range was
        // unexposed and exposed anew, and the target's INVALIDATE has not reached us yet.
        fh.invalidate_remote(rank, addr, len);
    }
    bump(&p.reg_stats.bounce_ops, 1);
    run(None)
}

pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    transfer(p, rank, addr, src.len(), AccessKind::Put, &mut |off, n, c| registered_move::put(p, rank, addr + off, &src[off..off + n], c))
}

pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    transfer(p, rank, addr, dst.len(), AccessKind::Get, &mut |off, n, c| {
        registered_move::get(p, rank, addr + off, &mut dst[off..off + n], c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_and_replies_round_trip() {
        let req = MoveRequest { move_id: 7, bucket_bytes: 4096, release: vec![0x1000, 0x3000], pin: vec![0x8000], target_arg: Some(9) };
        assert_eq!(decode_request(&encode_request(&req)), Some(req));
        let req = MoveRequest { move_id: 1, bucket_bytes: 8192, release: vec![], pin: vec![0x2000, 0x4000], target_arg: None };
        assert_eq!(decode_request(&encode_request(&req)), Some(req));
        assert_eq!(decode_request(&[1, 2, 3]), None);
        let ok = MoveReply { move_id: 3, result: Ok(()), target_callback_ran: true };
        assert_eq!(decode_reply(1, &encode_reply(&ok)), Some(ok));
        let bad = MoveReply { move_id: 4, result: Err(Error::OutOfResources("mlock".into())), target_callback_ran: false };
        let back = decode_reply(2, &encode_reply(&bad)).unwrap();
        assert!(matches!(back.result, Err(Error::OutOfResources(ref t)) if t.contains("mlock") && t.contains("rank 2")));
    }
}
