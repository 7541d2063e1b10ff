//! The part of a rank's DSM its handlers see (they may run on the progress thread): the heap,
//! the home table, the mailbox, the copies others may write into, and the world to answer
//! through.

use crate::diff_array::DiffArrays;
use crate::global_ref::GlobalRef;
use crate::heap::Heap;
use crate::home::{Grant, Home, Place};
use crate::lock_cache::LockCache;
use crate::mailbox::Mailbox;
use crate::protocol::Protocol;
use crate::wire;
use activerma::{AmCtx, Rank, Result, World};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// How a lock message leaves: from a handler (its context), or posted from anywhere else
/// (the rank's thread, a progress hook). Neither blocks.
#[derive(Clone, Copy)]
pub(crate) enum Via<'a, 'b> {
    Handler(&'a AmCtx<'b>),
    Post,
}

/// Diff ranges (offset, bytes) kept for a region being fetched.
pub(crate) type Kept = Vec<(usize, Vec<u8>)>;

pub(crate) struct Shared {
    pub w: World,
    pub me: Rank,
    pub n: usize,
    pub protocol: Protocol,
    pub heap: Heap,
    pub home: Mutex<Home>,
    /// Locks of other homes this rank keeps after its unlock.
    pub locks: LockCache,
    /// Set when a lock was kept idle while another rank wants it (here as its home, or in
    /// `locks`): the progress hook then hands it on unless this rank took it again.
    pub locks_wanted: AtomicBool,
    /// Progress steps that found `locks_wanted` set (the hook looks every few: handlers.rs).
    pub kept_looks: AtomicU64,
    pub mail: Mailbox,
    /// Copies of other homes' regions that remote changes are applied to (update-diff: the
    /// diff-arrays' receiver looks them up here).
    pub copies: Mutex<HashMap<GlobalRef, Place>>,
    /// Regions their homes freed (notices from the homes), and a count of notices so that the
    /// access checks notice with one load.
    pub freed: Mutex<HashSet<GlobalRef>>,
    pub frees: AtomicU64,
    /// The diff-array protocol's slots and acknowledgements (update-diff only).
    pub arrays: Option<DiffArrays>,
    /// update-diff: regions being fetched, with the diff ranges that arrived for them since
    /// the request went out (applied on top of the reply).
    pub pending: Mutex<HashMap<GlobalRef, Kept>>,
}

/// A copy and its twin as one allocation: the twin starts on the next cache line.
pub(crate) fn twin_at(off: usize, len: usize) -> usize {
    off + len.max(1).next_multiple_of(64)
}

impl Shared {
    /// `bytes` of new regions homed here: one region, or an array of `chunk`-byte chunks.
    /// Update protocols give every master a twin (the home writes it like any copy), and
    /// update-in-place a lock word and copy set, with the home's own master in it.
    pub(crate) fn alloc_here(&self, bytes: usize, chunk: Option<usize>) -> Result<(GlobalRef, usize)> {
        let (len, count) = match chunk {
            Some(c) if bytes > c => (c, bytes.div_ceil(c)),
            _ => (bytes, 1),
        };
        let last = bytes - len * (count - 1);
        let update = !self.protocol.invalidates();
        let stride = if update { 2 * len.max(1).next_multiple_of(64) } else { len };
        let off = self.heap.alloc(if update { stride * count } else { bytes }, "a region")?;
        let meta_bytes = 8 + 8 * self.n;
        let meta = match self.protocol {
            Protocol::UpdateInPlace => Some(self.heap.alloc(meta_bytes * count, "regions' copy sets")?),
            _ => None,
        };
        let places: Vec<Place> = (0..count)
            .map(|k| {
                let (off, len) = (off + k * stride, if k + 1 == count { last } else { len });
                Place { off, len, twin: update.then(|| twin_at(off, len)), meta: meta.map(|m| m + k * meta_bytes) }
            })
            .collect();
        for p in &places {
            if let Some(m) = p.meta {
                // SAFETY: the copy set's word for this rank, in this heap, not yet shared.
                unsafe { (self.heap.ptr(m + 8 + 8 * self.me) as *mut u64).write((p.off + 1) as u64) };
            }
        }
        Ok((self.home.lock().unwrap().add(self.me, places), count))
    }

    /// Frees a region homed here (the freeing rank tells every rank: `Dsm::free`).
    pub(crate) fn free_here(&self, r: GlobalRef) -> std::result::Result<(), String> {
        self.home.lock().unwrap().free(r)?;
        self.note_freed(r);
        Ok(())
    }

    pub(crate) fn note_freed(&self, r: GlobalRef) {
        self.freed.lock().unwrap().insert(r);
        self.copies.lock().unwrap().remove(&r);
        self.frees.fetch_add(1, Ordering::AcqRel);
    }

    /// Hands `r`'s lock on as `g` says: into this rank's mailbox, or as a GRANT message (its
    /// payload: whether others wait). Never blocks, so that it can be issued while the home
    /// table is locked: the lock's messages then leave in the order its state changed (a
    /// RECALL must not overtake the GRANT it is about).
    pub(crate) fn grant(&self, via: Via, g: Grant, r: GlobalRef) {
        if g.to == self.me {
            self.mail.grant(r, Ok(()));
            return;
        }
        let msg = wire::ok(&r.to_bits().to_le_bytes(), &[g.wanted as u8]);
        self.post(via, g.to, wire::GRANT, &msg);
    }

    /// Posts a lock message that carries only `r` (RECALL, UNLOCK, WAIT): see `post`.
    pub(crate) fn post_ref(&self, via: Via, to: Rank, id: u16, r: GlobalRef) {
        self.post(via, to, id, &r.to_bits().to_le_bytes());
    }

    /// Sends a lock message without blocking (see `grant`); a failure (the rank is gone, the
    /// world finalized) is reported by this rank's next sync call.
    pub(crate) fn post(&self, via: Via, to: Rank, id: u16, msg: &[u8]) {
        match via {
            Via::Handler(ctx) => ctx.forward(to, id, 0, msg),
            Via::Post => {
                if let Err(e) = self.w.post_am(to, id, 0, msg) {
                    self.mail.failures.lock().unwrap().push(format!("a lock message to rank {to}: {e}"));
                }
            }
        }
    }

    /// Where this rank keeps `r` for remote changes: its master (if it is the home) or its
    /// copy.
    pub(crate) fn place_of(&self, r: GlobalRef) -> Option<Place> {
        if r.home() == self.me {
            self.home.lock().unwrap().place(r)
        } else {
            self.copies.lock().unwrap().get(&r).copied()
        }
    }
}
