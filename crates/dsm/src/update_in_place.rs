//! Update in place (paper Fig. 4): at a release a writer puts the bytes it changed straight
//! into every other rank's copy of the region and into that copy's twin — one-sided, from heap
//! to heap — and into its own twin.
//!
//! ```text
//! at the home, per region:  lock word, copy set [n words: copy offset + 1, or 0]
//! first touch at rank p:  JOIN -> (length, meta);  allocate copy + twin;
//!                         SUBSCRIBE(copy): the home takes the region's lock, enters p in the
//!                         copy set, puts the master into p's copy and twin, unlocks
//! release:  for r in dirty:  take r's lock (compare-and-swap at the home)
//!                            set = get(copy set);  d = diff(copy, twin);  twin += d
//!                            for p in set, p != me:  put d into p's copy, then p's twin
//!                            unlock
//! acquire:  nothing to drop: copies are current (a rank reads them after the release that
//!           wrote them finished, since it synchronized with it)
//! ```
//! The region's lock orders writers' puts and subscriptions: a rank that subscribes while a
//! writer releases either is in the set the writer read, or gets the master after the writer
//! put into it — never a copy that misses a release. It also keeps other writers' puts out of
//! a copy while its own rank diffs it against its twin, so a diff never carries another
//! writer's bytes caught half-way in.

use crate::diff;
use crate::dsm::{bump, Dsm};
use crate::global_ref::GlobalRef;
use crate::shared::{twin_at, Shared};
use crate::wire::{self, word};
use activerma::{AmCtx, Error, Result};

/// The lock word's value while rank `r` holds it.
fn holder(r: usize) -> u64 {
    r as u64 + 1
}

/// SUBSCRIBE at the home (a handler): see the module's pseudo-code. Returns false when a
/// writer holds the region's lock (the message is retried later).
pub(crate) fn serve_subscribe(s: &Shared, ctx: &AmCtx, r: GlobalRef, copy: usize) -> std::result::Result<bool, String> {
    let place = s.home.lock().unwrap().region(r)?.place;
    let meta = place.meta.ok_or("the region has no copy set (not an update-in-place run)")?;
    let lock = s.heap.remote(s.me, meta);
    let err = |e: Error| e.to_string();
    if s.w.compare_swap(lock, 0, holder(s.me)).map_err(err)? != 0 {
        return Ok(false);
    }
    // SAFETY: the copy set's word for ctx.src, in this heap, under the region's lock.
    unsafe { (s.heap.ptr(meta + 8 + 8 * ctx.src) as *mut u64).write_volatile((copy + 1) as u64) };
    // SAFETY: the master's bytes; writers are kept out by the lock.
    let master = unsafe { s.heap.bytes(place.off, place.len) }.to_vec();
    let put =
        s.w.put(s.heap.remote(ctx.src, copy), &master).and_then(|_| s.w.put(s.heap.remote(ctx.src, twin_at(copy, place.len)), &master));
    s.w.compare_swap(lock, holder(s.me), 0).map_err(err)?;
    put.map_err(err)?;
    Ok(true)
}

impl Dsm {
    /// First touch of another home's region: JOIN, then SUBSCRIBE a fresh copy and twin.
    /// Returns (copy offset, length, meta offset at the home).
    pub(crate) fn subscribe(&self, r: GlobalRef) -> Result<(usize, usize, usize)> {
        let joined = self.ask(r.home(), wire::JOIN, &r.to_bits().to_le_bytes())?;
        let (len, meta) = (word(&joined, 0).unwrap_or(0) as usize, word(&joined, 1).unwrap_or(0) as usize);
        let off = self.shared.heap.alloc(2 * len.max(1).next_multiple_of(64), "a cached copy and its twin")?;
        self.ask(r.home(), wire::SUBSCRIBE, &wire::words(&[r.to_bits(), off as u64]))?;
        bump(&self.counts.fetches_message, 1);
        bump(&self.counts.fetched_bytes, len as u64);
        Ok((off, len, meta))
    }

    /// Release under update-in-place: see the module's pseudo-code.
    pub(crate) fn release_in_place(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let heap = &shared.heap;
        let mut d = Vec::new();
        for (r, c) in self.take_dirty() {
            let (off, len) = (c.off, c.len);
            let twin = c.twin.expect("update protocols keep a twin with every copy");
            let meta = c.meta.expect("update-in-place copies know their copy set");
            let lock = heap.remote(r.home(), meta);
            self.wait_until("a region's update lock", r.home(), || {
                self.w.compare_swap(lock, 0, holder(self.me)).is_ok_and(|old| old == 0)
            })?;
            let mut set = vec![0u8; 8 * self.n];
            let outcome = self.w.get(heap.remote(r.home(), meta + 8), &mut set).and_then(|_| {
                d.clear();
                // SAFETY: copy and twin of this heap; no view is alive, and no writer puts
                // into this region while we hold its lock.
                let (copy, old) = unsafe { (heap.bytes(off, len), heap.bytes_mut(twin, len)) };
                if diff::encode(copy, old, &mut d) == 0 {
                    return Ok(());
                }
                diff::apply(&d, old).map_err(Error::InvalidArgument)?;
                let ranges = diff::ranges(&d, len).map_err(Error::InvalidArgument)?;
                for p in (0..self.n).filter(|&p| p != self.me) {
                    let Some(at) = word(&set, p).filter(|&w| w != 0).map(|w| w as usize - 1) else { continue };
                    for base in [at, twin_at(at, len)] {
                        let pieces: Vec<(usize, &[u8])> = ranges.iter().map(|&(o, b)| (heap.remote(p, base + o).addr, b)).collect();
                        self.w.put_vector(p, &pieces)?;
                    }
                    bump(&self.counts.update_bytes, 2 * ranges.iter().map(|(_, b)| b.len() as u64).sum::<u64>());
                }
                Ok(())
            });
            self.w.compare_swap(lock, holder(self.me), 0)?;
            outcome?;
        }
        Ok(())
    }
}
