//! Keyed one-sided access between hosts: a put or get to private memory of a rank on another
//! host, where the conduit's one-sided engine reaches memory the target registered (MPI's
//! dynamic window), under the strategies that keep registrations across operations:
//! `firehose` (the target's pinning is Firehose's, with its bounds M, MAXVICTIM and f per
//! origin, moved by active message as on one host: firehose.rs) and `pin-all` (everything
//! pinned at expose). The data moves one-sided (MPI_Put / MPI_Get): a hit sends no message.
//!
//! An origin on another host cannot read the target's table, so it holds a *key* per exposure
//! it reaches, as a NIC holds a memory key: the exposure's bounds and protection, granted by
//! the target after checking the first access, and revoked by the target before the exposure
//! goes or its pages' bits change. The key is what makes a hit safe; under firehose the
//! firehoses are what keep the pinned memory bounded.
//!
//! ```text
//! origin put/get(rank, addr, len)                     target
//!   key covering the range?  no: KEY(addr,len,write) -> check the access (NotExposed,
//!                                                        Protection: the origin's error)
//!                                                      pages of the exposure all plain and
//!                                                        alike: attach it to the dynamic window
//!                                                        once (refused: the key says "through")
//!                                                      else a "through" key (Active Access)
//!                               <-------------------  base, len, generation, R/W bits, direct
//!   "through" key: put_am / get_am (the target applies the pages' bits)
//!   key without the right: Protection error, nothing sent
//!   direct key (users[rank] += 1 while the move runs); pin-all: rma_put / rma_get, done
//!   firehose, per piece of at most f buckets:
//!       try_remote_pin (hit: no message) | remote_pin (MOVE, AM 11)
//!         pin refused (memlock, budget): the piece goes through the target (bounce, counted)
//!       rma_put (remote complete) / rma_get; release_remote
//!
//! target unexpose: close (no new key) -> REVOKE(addr,len) to every key holder, wait for each
//!                  answer -> wait for rendezvous holds -> detach -> table unexpose (unpins)
//! target assoc_pages on exposed memory: REVOKE(addr,len,BITS) to the holders of keys
//!                  overlapping the range, wait for each answer
//! target assoc_pages_here (never waits): REVOKE(addr,len,BITS|POSTED), no answer
//! origin KEY request: a key answered after a REVOKE from that rank was handled (the progress
//!                  thread may take both in before the requester) is dropped and asked again
//! origin REVOKE handler: count it; drop overlapping keys; firehoses too, unless only BITS changed (the
//!                  memory stays pinned, and the target holds our references to it: dropping
//!                  them here would leave the target's pins counted forever); answer now
//!                  if no operation of ours uses a key to that rank, else the last one to
//!                  finish answers (a handler never waits: a parked message would hold back
//!                  the MOVE_REPLY that operation may be waiting for); POSTED: no answer
//! ```

use crate::am_request::{self, encode_outcome, respond, Asked, OwnTable};
use crate::rendezvous_rma::{encode, words};
use crate::rma_exposures::RmaExposures;
use crate::{firehose, get_am, put_am, rma_conduit, Proto};
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{Error, Rank, Result};
use activerma_mem::firehose::Firehose;
use activerma_mem::{AccessKind, Entry, Prot};
use std::sync::{Arc, Mutex};

pub const KEY: HandlerId = 21;
pub const REVOKE: HandlerId = 22;

/// Keys an origin keeps per target (the oldest goes first; a target asks for it back anyway).
const MAX_KEYS: usize = 64;

/// The KEY answer's value: the R/W bits, and this flag when the key is direct.
const DIRECT: u64 = 1 << 32;

/// REVOKE's third word: only the pages' bits changed (the memory stays exposed and pinned).
const BITS: u64 = 1;
/// REVOKE's third word: the target does not wait for an answer (`assoc_pages_here`).
const POSTED: u64 = 2;

#[derive(Clone, Copy, Debug)]
struct Key {
    start: usize,
    end: usize,
    /// R and W (`Entry` bits) every page of the exposure has.
    bits: u32,
    /// False: the exposure has Active Access pages (or could not be registered): accesses go
    /// through the target.
    direct: bool,
}

#[derive(Default)]
struct PerRank {
    keys: Vec<Key>,
    /// Our operations moving data one-sided with a key to this rank right now.
    users: u32,
    /// Revocations from this rank to answer when `users` drops to zero (their tokens).
    owed: Vec<u64>,
    /// Revocations from this rank so far. A key is kept only if none came between its request
    /// and its answer: the answer and a revocation sent right after it can be handled (by the
    /// progress thread) before the requester takes the answer in, and that revocation, finding
    /// no key, is answered at once — the late key would then reach memory the target has
    /// already given back.
    revocations: u64,
}

/// Where an access goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Direct,
    Through,
}

/// This origin's keys to other hosts' exposures.
pub struct RmaKeys {
    ranks: Vec<Mutex<PerRank>>,
}

impl RmaKeys {
    fn new(n: usize) -> RmaKeys {
        RmaKeys { ranks: (0..n).map(|_| Mutex::new(PerRank::default())).collect() }
    }

    /// The route of an access a key covers (None: no key does). A direct route counts as a
    /// user until `end`.
    fn begin(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Option<Result<Route>> {
        let mut g = self.ranks[rank].lock().unwrap();
        let k = *g.keys.iter().rev().find(|k| addr >= k.start && addr.checked_add(len).is_some_and(|e| e <= k.end))?;
        if !k.direct {
            return Some(Ok(Route::Through));
        }
        let (need, op) = if kind == AccessKind::Put { (Entry::W, "put") } else { (Entry::R, "get") };
        if k.bits & need == 0 {
            return Some(Err(Error::Protection { rank, addr, len, op, prot: Prot::describe(k.bits) }));
        }
        g.users += 1;
        Some(Ok(Route::Direct))
    }

    /// A direct access `begin` let through has finished: answers revocations it held back.
    fn end(&self, p: &Proto, rank: Rank) {
        let owed = {
            let mut g = self.ranks[rank].lock().unwrap();
            g.users -= 1;
            if g.users == 0 {
                std::mem::take(&mut g.owed)
            } else {
                Vec::new()
            }
        };
        for token in owed {
            if let Err(e) = p.am.send(rank, am_request::RESPONSE, token, &encode_outcome(0, 0, &[])) {
                eprintln!("activerma: rank {}: answering rank {rank}'s key revocation failed: {e}", p.conduit.rank());
            }
        }
    }

    /// Revocations from `rank` so far (read before asking it for a key).
    fn revocations(&self, rank: Rank) -> u64 {
        self.ranks[rank].lock().unwrap().revocations
    }

    /// Keeps `key`, unless `rank` revoked anything since `asked` (`revocations` before the
    /// request): then the key may be stale, and false says to ask again.
    fn insert(&self, rank: Rank, key: Key, asked: u64) -> bool {
        let mut g = self.ranks[rank].lock().unwrap();
        if g.revocations != asked {
            return false;
        }
        g.keys.retain(|k| k.end <= key.start || key.end <= k.start);
        if g.keys.len() >= MAX_KEYS {
            g.keys.remove(0);
        }
        g.keys.push(key);
        true
    }

    /// Drops the keys to `rank` overlapping `[addr, addr+len)`; true when the revocation can
    /// be answered now, false when it was left for the last user to answer (`token`: None
    /// when no answer is wanted).
    fn revoke(&self, rank: Rank, addr: usize, len: usize, token: Option<u64>) -> bool {
        let mut g = self.ranks[rank].lock().unwrap();
        g.revocations += 1;
        g.keys.retain(|k| k.end <= addr || addr.saturating_add(len) <= k.start);
        if g.users == 0 {
            return true;
        }
        g.owed.extend(token);
        false
    }

    /// `rank`'s process was replaced: its keys named the dead process's memory.
    pub(crate) fn forget(&self, rank: Rank) {
        if let Some(r) = self.ranks.get(rank) {
            let mut g = r.lock().unwrap();
            g.keys.clear();
            g.revocations += 1; // a key the dead process answered late is not kept either
        }
    }
}

/// Installs the KEY (target) and REVOKE (origin) handlers; returns this origin's key table.
pub(crate) fn register(am: &Am, fh: Option<Arc<Firehose>>, exposures: Arc<RmaExposures>) -> Result<Arc<RmaKeys>> {
    let keys = Arc::new(RmaKeys::new(am.conduit().size()));
    let own = OwnTable::new(am.conduit().clone());
    am.register(
        KEY,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = (|| {
                let [addr, len, write] = words(msg).ok_or_else(|| Error::InvalidArgument("malformed key request".into()))?;
                let (addr, len) = (addr as usize, len as usize);
                let kind = if write != 0 { AccessKind::Put } else { AccessKind::Get };
                // The access itself first: its errors are the origin's.
                drop(own.check(addr, len, kind)?);
                let g = exposures.grant(ctx.src, addr, len)?;
                let value = g.bits.map_or(0, |b| b as u64 | DIRECT);
                Ok((value, encode([g.base as u64, g.len as u64])))
            })();
            match outcome {
                Ok((value, data)) => respond(ctx, Ok((value, &data[..]))),
                Err(e) => respond(ctx, Err(e)),
            }
        }),
    )?;
    let k = keys.clone();
    am.register(
        REVOKE,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let Some([addr, len, how]) = words(msg) else { return };
            let (addr, len) = (addr as usize, len as usize);
            // Firehoses on the range go too when the memory goes: the target unpinned them.
            if let Some(fh) = fh.as_ref().filter(|_| how & BITS == 0) {
                fh.invalidate_remote(ctx.src, addr, len);
            }
            let posted = how & POSTED != 0;
            if k.revoke(ctx.src, addr, len, (!posted).then_some(ctx.token)) && !posted {
                respond(ctx, Ok((0, &[])));
            }
        }),
    )?;
    Ok(keys)
}

impl Proto {
    /// Target side: takes back the keys `ranks` hold to `[addr, addr+len)` (`bits_only`: the
    /// memory stays, only its pages' bits changed); returns once each of them has dropped its
    /// keys and finished every move it made with one.
    pub(crate) fn revoke_keys(&self, ranks: &[Rank], addr: usize, len: usize, bits_only: bool) -> Result<()> {
        let msg = encode([addr as u64, len as u64, if bits_only { BITS } else { 0 }]);
        let mut result = Ok(());
        for &rank in ranks {
            let asked = Asked { rank, addr, len, op: "key revocation" };
            if let Err(e) = am_request::request(self, REVOKE, &msg, asked) {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// Target side, the bits of `[addr, addr+len)` of our exposed memory changed: origins on
    /// other hosts give back their keys to it and ask anew (an access issued before this
    /// returns may still see the old bits, as on one host).
    pub fn pages_changed(&self, addr: usize, len: usize) -> Result<()> {
        match (&self.rma_keys, &self.rma_exposures) {
            (Some(_), Some(x)) => self.revoke_keys(&x.keyed(addr, len), addr, len, true),
            _ => Ok(()),
        }
    }

    /// `pages_changed` without waiting (a log handler's `assoc_pages_here` may not wait): the
    /// revocations are sent, and an origin on another host sees the new bits from the first
    /// access it starts after it has run ours (one that is under way finishes with its key).
    pub fn pages_changed_posted(&self, addr: usize, len: usize) -> Result<()> {
        let (Some(_), Some(x)) = (&self.rma_keys, &self.rma_exposures) else { return Ok(()) };
        let msg = encode([addr as u64, len as u64, BITS | POSTED]);
        x.keyed(addr, len).into_iter().try_for_each(|rank| self.am.send(rank, REVOKE, 0, &msg))
    }
}

/// Asks `rank` for a key to the exposure holding `[addr, addr+len)`; the target's refusal is
/// the access's error. A key overtaken by a revocation is dropped (the caller asks again).
fn fetch_key(p: &Proto, keys: &RmaKeys, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<()> {
    let op = if kind == AccessKind::Put { "put" } else { "get" };
    let msg = encode([addr as u64, len as u64, (kind == AccessKind::Put) as u64]);
    let asked = keys.revocations(rank);
    let (value, data) = am_request::request(p, KEY, &msg, Asked { rank, addr, len, op })?;
    let [base, klen] = words(&data).ok_or_else(|| Error::InvalidArgument(format!("rank {rank} sent a malformed key")))?;
    let (start, end) = (base as usize, base as usize + klen as usize);
    keys.insert(rank, Key { start, end, bits: value as u32, direct: value & DIRECT != 0 }, asked);
    Ok(())
}

/// Moves `[addr, addr+len)` (`one_sided(offset, len)` per piece, `through(offset, len)` for
/// what goes through the target).
fn transfer(
    p: &Proto,
    rank: Rank,
    addr: usize,
    len: usize,
    kind: AccessKind,
    one_sided: &mut dyn FnMut(usize, usize) -> Result<()>,
    through: &mut dyn FnMut(usize, usize) -> Result<()>,
) -> Result<()> {
    let keys = p.rma_keys.as_ref().expect("keyed_rma is chosen only with keys");
    // A hit sends nothing and waits for nothing: poll once, so that a target waiting for us to
    // give back a key (its unexpose) is answered by our next access at the latest.
    p.am.progress();
    let route = loop {
        match keys.begin(rank, addr, len, kind) {
            Some(route) => break route?,
            None => fetch_key(p, keys, rank, addr, len, kind)?,
        }
    };
    if route == Route::Through {
        return through(0, len);
    }
    let moved = match &p.firehose {
        // pin-all: every exposed page is pinned and the exposure registered: a hit.
        None => {
            bump(&p.reg_stats.hits, 1);
            one_sided(0, len)
        }
        Some(fh) => firehose::in_pieces(fh, addr, len, &mut |off, a, n| {
            let hit = fh.try_remote_pin(rank, a, n);
            bump(if hit.is_some() { &p.reg_stats.hits } else { &p.reg_stats.misses }, 1);
            let pin = match hit {
                Some(pin) => pin,
                None => match fh.remote_pin(rank, a, n) {
                    Ok(pin) => pin,
                    Err(Error::OutOfResources(why)) => {
                        if p.verbose {
                            eprintln!(
                                "activerma: rank {} -> rank {rank}: firehose move refused, through the target: {why}",
                                p.conduit.rank()
                            );
                        }
                        bump(&p.reg_stats.bounce_ops, 1);
                        return through(off, n);
                    }
                    Err(e) => return Err(e),
                },
            };
            one_sided(off, n).and(fh.release_remote(pin))
        }),
    };
    keys.end(p, rank);
    moved
}

pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    let data = |off: usize, n: usize| &src[off..off + n];
    transfer(
        p,
        rank,
        addr,
        src.len(),
        AccessKind::Put,
        &mut |off, n| rma_conduit::put(p, rank, addr + off, data(off, n), true),
        &mut |off, n| put_am::run(p, rank, addr + off, data(off, n)),
    )
}

pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    // Both movers write into `dst`, never at once: share it through a cell.
    let len = dst.len();
    let dst = std::cell::RefCell::new(dst);
    transfer(
        p,
        rank,
        addr,
        len,
        AccessKind::Get,
        &mut |off, n| rma_conduit::get(p, rank, addr + off, &mut dst.borrow_mut()[off..off + n]),
        &mut |off, n| get_am::run(p, rank, addr + off, &mut dst.borrow_mut()[off..off + n]),
    )
}
