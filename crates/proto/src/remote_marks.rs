//! Active Access marks on segments of ranks on other hosts. Such origins reach segments
//! one-sidedly (the conduit's RMA engine) and cannot read the target's table, so a target that
//! marks segment pages tells every rank which heap range is marked; origins then send accesses
//! that touch a marked range to the target as active messages (put_am / get_am), whose handler
//! applies the page bits exactly as an origin on the same host would (`log_append`). Plain
//! ranges stay one-sided.
//!
//! ```text
//! target assoc_pages(range, bits) on its segment, tables not all visible:
//!     marked = bits != plain (W|R, no log, no domain)
//!     for every other rank r: request MARKS(heap offset, len, marked) and wait for its answer
//! origin choose(rank, segment addr): range intersects marks[rank] ? put_am/get_am/atomic_am : put_rma/get_rma/atomic_rma
//! ```
//! An access issued before `assoc_pages` returned may still go one-sided (old bits); one issued
//! after it sees the new ones — the same rule as on one host.
//!
//! A rank keeps the ranges it published about itself too, so that a replacement of a rank
//! that died (`activerma run --respawn`), which starts knowing nothing, can ask every rank for
//! them (`learn_marks`, MARKS_ASK) before it accesses anyone.

use crate::am_request::{self, respond, Asked};
use crate::Proto;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::page::page_size;
use activerma_core::{Error, Rank, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

pub const MARKS: HandlerId = 6;
pub const MARKS_ASK: HandlerId = 20;

/// Per rank: the heap-offset ranges it marked (page aligned, sorted, disjoint).
pub struct RemoteMarks {
    ranges: Vec<RwLock<Vec<(usize, usize)>>>,
    /// Per rank: any range at all (the one-sided fast path reads only this).
    any: Vec<AtomicBool>,
}

impl RemoteMarks {
    pub fn new(ranks: usize) -> RemoteMarks {
        RemoteMarks {
            ranges: (0..ranks).map(|_| RwLock::new(Vec::new())).collect(),
            any: (0..ranks).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// True when `[off, off+len)` of `rank`'s heap touches a marked page.
    #[inline]
    pub fn touches(&self, rank: Rank, off: usize, len: usize) -> bool {
        if !self.any[rank].load(Ordering::Acquire) {
            return false;
        }
        let end = off + len.max(1);
        self.ranges[rank].read().unwrap().iter().any(|&(s, e)| s < end && off < e)
    }

    /// Marks (or unmarks) `[start, end)` of `rank`'s heap.
    fn set(&self, rank: Rank, start: usize, end: usize, marked: bool) {
        let mut v = self.ranges[rank].write().unwrap();
        // Cut the range out of every existing one, then add it back if marked.
        let mut out = Vec::with_capacity(v.len() + 2);
        for &(s, e) in v.iter() {
            if e <= start || s >= end {
                out.push((s, e));
                continue;
            }
            if s < start {
                out.push((s, start));
            }
            if e > end {
                out.push((end, e));
            }
        }
        if marked {
            out.push((start, end));
        }
        out.sort_unstable();
        // Merge neighbours so that lookups stay short.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(out.len());
        for (s, e) in out {
            match merged.last_mut() {
                Some(last) if last.1 >= s => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.any[rank].store(!merged.is_empty(), Ordering::Release);
        *v = merged;
    }
}

pub(crate) fn register(am: &Am, marks: Arc<RemoteMarks>) -> Result<()> {
    let own = marks.clone();
    am.register(
        MARKS,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
            let outcome = (|| {
                let word = |i: usize| msg.get(i * 8..i * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
                let (Some(off), Some(len), Some(marked)) = (word(0), word(1), word(2)) else {
                    return Err(Error::InvalidArgument("malformed marks message".into()));
                };
                marks.set(ctx.src, off, off + len, marked != 0);
                Ok((0, &[][..]))
            })();
            respond(ctx, outcome);
        }),
    )?;
    let me = am.conduit().rank();
    am.register(
        MARKS_ASK,
        Arc::new(move |ctx: &AmCtx, _: &[u8]| {
            let mine: Vec<u8> =
                own.ranges[me].read().unwrap().iter().flat_map(|&(s, e)| [s as u64, e as u64]).flat_map(u64::to_le_bytes).collect();
            respond(ctx, Ok((0, &mine)));
        }),
    )
}

impl Proto {
    /// Tells every rank that `[off, off+len)` of our heap is now marked (or plain again), and
    /// returns once all of them know.
    pub fn publish_marks(&self, off: usize, len: usize, marked: bool) -> Result<()> {
        let ps = page_size();
        let (start, end) = (off / ps * ps, (off + len).div_ceil(ps) * ps);
        let mut msg = Vec::with_capacity(24);
        for w in [start as u64, (end - start) as u64, marked as u64] {
            msg.extend_from_slice(&w.to_le_bytes());
        }
        let me = self.conduit.rank();
        self.marks.set(me, start, end, marked);
        for rank in (0..self.conduit.size()).filter(|&r| r != me) {
            am_request::request(self, MARKS, &msg, Asked { rank, addr: start, len: end - start, op: "Active Access marks" })?;
        }
        Ok(())
    }

    /// A replacement rank learns which ranges of every other rank's heap are marked (it
    /// starts knowing nothing; see the module doc). Nothing to learn when every table is
    /// visible here.
    pub fn learn_marks(&self) -> Result<()> {
        if self.all_tables_visible() {
            return Ok(());
        }
        let me = self.conduit.rank();
        for rank in (0..self.conduit.size()).filter(|&r| r != me) {
            let (_, ranges) = am_request::request(self, MARKS_ASK, &[], Asked { rank, addr: 0, len: 0, op: "Active Access marks" })?;
            let words: Vec<usize> = ranges.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize).collect();
            for pair in words.chunks_exact(2) {
                self.marks.set(rank, pair[0], pair[1], true);
            }
        }
        Ok(())
    }
}
