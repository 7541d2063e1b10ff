//! Update with diff-arrays (paper Fig. 6): a writer packs the diffs of every region it
//! changed into arrays and puts each array, by RMA, into a slot every other rank keeps for it;
//! receivers apply the arrays in sequence (to their copy, then its twin) and acknowledge each
//! with a one-word put back; a writer reuses a slot only after its acknowledgement.
//!
//! ```text
//! at every rank:  slot[m] (one per sender m): [seq][len][entries]    ack[p]: p's last seq
//!                 entry = [ref][offset u32][length u32][bytes]       (one diff range)
//! release:   under the receive lock: for r in dirty: d = diff(copy, twin); twin += d;
//!            pack the ranges into arrays of the slot's size
//!            for each array, for each p != me: wait until ack[p] == sent[p]
//!                 put [len][entries] at p.slot[me]; put sent[p] + 1 at p.slot[me].seq
//!            wait until every ack[p] == sent[p]
//! receive (every progress step, and at acquires):
//!            for m: if slot[m].seq > done[m]: apply its entries to the copies this rank
//!            has (its masters included; others skipped); done[m] = seq; put seq at m.ack[me]
//! ```
//! One departure from the paper, and why: the paper's writer waits for an array's
//! acknowledgement only before it reuses the slot (the next release); ours also waits at the
//! end of the release. Without it a receiver could apply an older array from one writer after
//! a newer one (for the same bytes) from another writer who synchronized with the first in
//! between — arrays from different senders carry no common order. Waiting makes a release
//! complete only when every rank has its changes, which is what release consistency needs.
//!
//! Fetching a region (first touch) races with arrays, in two ways, and both are closed:
//! ```text
//! arrays the requester applied before it asked (skipping the region: no copy yet) must be
//!   in the master it gets: the request carries the requester's done[]; the home receives
//!   what it can first and, while its own done[] is behind, retries the request later
//! arrays that arrive while the request is out: their entries for the region are kept
//!   (pending) and applied, in order, on top of the fetched bytes before the copy is
//!   registered (under the receive lock)
//! ```

use crate::diff;
use crate::dsm::{bump, Dsm};
use crate::global_ref::GlobalRef;
use crate::heap::Heap;
use crate::shared::Shared;
use activerma::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A slot's header: the sequence word (put last), then the entries' length.
const SLOT_HEADER: usize = 16;
/// An entry's header: reference, offset, length.
const ENTRY_HEADER: usize = 16;

pub(crate) struct DiffArrays {
    /// Heap offset of the slot for sender 0 (the same at every rank).
    slots: usize,
    /// Heap offset of the acknowledgement word of receiver 0.
    acks: usize,
    cap: usize,
    /// Per sender: the last array applied. Its mutex is the receive lock.
    done: Mutex<Vec<u64>>,
}

impl DiffArrays {
    /// Every rank, at the same point of its heap's allocations (so the offsets agree).
    pub(crate) fn new(heap: &Heap, n: usize, cap: usize) -> Result<DiffArrays> {
        let cap = cap.max(SLOT_HEADER + ENTRY_HEADER + 64).next_multiple_of(64);
        let slots = heap.alloc(cap * n, "diff-array slots")?;
        let acks = heap.alloc(8 * n, "diff-array acknowledgements")?;
        Ok(DiffArrays { slots, acks, cap, done: Mutex::new(vec![0; n]) })
    }

    pub(crate) fn receive_lock(&self) -> MutexGuard<'_, Vec<u64>> {
        self.done.lock().unwrap()
    }

    /// A home serving a fetch: whether its master reflects every array the requester had
    /// applied when it asked (`theirs`), after receiving what it can now.
    pub(crate) fn caught_up(&self, s: &Shared, theirs: &[u64]) -> bool {
        let behind = |done: &[u64]| done.iter().zip(theirs).enumerate().any(|(m, (mine, t))| m != s.me && mine < t);
        match self.done.try_lock() {
            Ok(mut done) => {
                receive_locked(s, self, &mut done);
                !behind(&done)
            }
            Err(_) => false,
        }
    }

    /// The room for entries in one array.
    fn room(&self) -> usize {
        self.cap - SLOT_HEADER
    }
}

fn word_at(heap: &Heap, off: usize) -> u64 {
    // SAFETY: an aligned word of this heap (a slot's sequence, an acknowledgement), which
    // other ranks write by RMA.
    unsafe { &*(heap.ptr(off) as *const AtomicU64) }.load(Ordering::Acquire)
}

/// Applies whatever arrived, unless another thread holds the receive lock (it is receiving,
/// releasing or fetching, and receives itself). Every progress step runs it.
pub(crate) fn receive(s: &Shared) -> usize {
    let Some(a) = &s.arrays else { return 0 };
    let Ok(mut done) = a.done.try_lock() else { return 0 };
    receive_locked(s, a, &mut done)
}

fn receive_locked(s: &Shared, a: &DiffArrays, done: &mut [u64]) -> usize {
    let mut applied = 0;
    for m in (0..s.n).filter(|&m| m != s.me) {
        let slot = a.slots + m * a.cap;
        let seq = word_at(&s.heap, slot);
        if seq <= done[m] {
            continue;
        }
        let len = (word_at(&s.heap, slot + 8) as usize).min(a.room());
        // SAFETY: the slot's entries, which the sender does not touch before our ack.
        let mut body = unsafe { s.heap.bytes(slot + SLOT_HEADER, len) };
        while body.len() >= ENTRY_HEADER {
            let r = GlobalRef::from_bits(u64::from_le_bytes(body[..8].try_into().unwrap()));
            let off = u32::from_le_bytes(body[8..12].try_into().unwrap()) as usize;
            let l = (u32::from_le_bytes(body[12..16].try_into().unwrap()) as usize).min(body.len() - ENTRY_HEADER);
            let bytes = &body[ENTRY_HEADER..ENTRY_HEADER + l];
            match s.place_of(r) {
                Some(p) if off + l <= p.len => {
                    for at in [Some(p.off), p.twin].into_iter().flatten() {
                        // SAFETY: bytes of a copy (or twin) of this heap, under the receive lock.
                        unsafe { s.heap.bytes_mut(at + off, l) }.copy_from_slice(bytes);
                    }
                }
                Some(_) => {}
                None => {
                    if let Some(kept) = s.pending.lock().unwrap().get_mut(&r) {
                        kept.push((off, bytes.to_vec()));
                    }
                }
            }
            body = &body[ENTRY_HEADER + l..];
        }
        done[m] = seq;
        if let Err(e) = s.w.put(s.heap.remote(m, a.acks + 8 * s.me), &seq.to_le_bytes()) {
            s.mail.failures.lock().unwrap().push(format!("acknowledging rank {m}'s diff-array: {e}"));
        }
        applied += 1;
    }
    applied
}

impl Dsm {
    /// Release under update-diff: see the module's pseudo-code.
    pub(crate) fn release_diff_arrays(&mut self) -> Result<()> {
        let dirty = self.take_dirty();
        if dirty.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        let a = shared.arrays.as_ref().expect("update-diff has diff-arrays");
        let mut arrays: Vec<Vec<u8>> = vec![Vec::new()];
        {
            let _receiving = a.receive_lock(); // nothing lands in copies or twins meanwhile
            let mut d = Vec::new();
            for (r, c) in dirty {
                let twin = c.twin.expect("update protocols keep a twin with every copy");
                d.clear();
                // SAFETY: copy and twin of c.len bytes in this heap; no view is alive.
                let (copy, old) = unsafe { (shared.heap.bytes(c.off, c.len), shared.heap.bytes_mut(twin, c.len)) };
                if diff::encode(copy, old, &mut d) == 0 {
                    continue;
                }
                diff::apply(&d, old).map_err(Error::InvalidArgument)?;
                for (off, bytes) in diff::ranges(&d, c.len).map_err(Error::InvalidArgument)? {
                    pack(&mut arrays, a.room(), r, off, bytes);
                }
            }
        }
        for array in arrays.iter().filter(|a| !a.is_empty()) {
            self.broadcast(array)?;
        }
        for p in (0..self.n).filter(|&p| p != self.me) {
            let want = self.sent[p];
            self.wait_until("diff-array acknowledgements", p, || word_at(&shared.heap, a.acks + 8 * p) >= want)?;
        }
        Ok(())
    }

    /// One array to every other rank, each into its slot for this rank once the last one
    /// there is acknowledged.
    fn broadcast(&mut self, array: &[u8]) -> Result<()> {
        let shared = self.shared.clone();
        let a = shared.arrays.as_ref().unwrap();
        for p in (0..self.n).filter(|&p| p != self.me) {
            let last = self.sent[p];
            self.wait_until("a free diff-array slot", p, || word_at(&shared.heap, a.acks + 8 * p) >= last)?;
            let slot = a.slots + self.me * a.cap;
            let mut body = (array.len() as u64).to_le_bytes().to_vec();
            body.extend_from_slice(array);
            self.w.put(shared.heap.remote(p, slot + 8), &body)?;
            self.w.put(shared.heap.remote(p, slot), &(last + 1).to_le_bytes())?;
            self.sent[p] = last + 1;
            bump(&self.counts.arrays, 1);
            bump(&self.counts.update_bytes, body.len() as u64);
        }
        Ok(())
    }
}

/// Appends one diff range as entries (split where an array fills up).
fn pack(arrays: &mut Vec<Vec<u8>>, room: usize, r: GlobalRef, mut off: usize, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let cur = arrays.last_mut().unwrap();
        if cur.len() + ENTRY_HEADER >= room {
            arrays.push(Vec::new());
            continue;
        }
        let take = bytes.len().min(room - cur.len() - ENTRY_HEADER);
        cur.extend_from_slice(&r.to_bits().to_le_bytes());
        cur.extend_from_slice(&(off as u32).to_le_bytes());
        cur.extend_from_slice(&(take as u32).to_le_bytes());
        cur.extend_from_slice(&bytes[..take]);
        (off, bytes) = (off + take, &bytes[take..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_splits_at_the_slot_size() {
        let mut arrays = vec![Vec::new()];
        let r = GlobalRef::new(1, 2, 3);
        pack(&mut arrays, 100, r, 0, &[7u8; 150]);
        pack(&mut arrays, 100, r, 500, &[9u8; 10]);
        assert!(arrays.len() >= 2 && arrays.iter().all(|a| a.len() <= 100));
        // Every byte is there once, at its offset.
        let mut got = vec![0u8; 510];
        for a in &arrays {
            let mut b = &a[..];
            while !b.is_empty() {
                assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), r.to_bits());
                let off = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
                let l = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
                got[off..off + l].copy_from_slice(&b[16..16 + l]);
                b = &b[16 + l..];
            }
        }
        assert!(got[..150].iter().all(|&x| x == 7) && got[150..500].iter().all(|&x| x == 0) && got[500..].iter().all(|&x| x == 9));
    }
}
