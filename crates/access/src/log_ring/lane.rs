//! One lane of an access log: a ring of stamped, whole-line entries with its own positions,
//! counters and laps. The log routes each origin to one lane, so producers of different lanes
//! never touch the same cache line; a lane still takes several producers (an origin's
//! threads, or origins that share a lane when there are more origins than lanes) through the
//! CAS on `reserve`.

use super::{EntryData, EntryMeta, LogOp, ENTRY_HEADER};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries are made of whole cache lines, each starting with its stamp word.
pub(super) const LINE: usize = 64;
/// Data bytes in an entry's first line (after the stamp and the body) and in each further line.
pub(super) const FIRST_DATA: usize = LINE - ENTRY_HEADER;
pub(super) const CONT_DATA: usize = LINE - 8;
/// Entries whose further lines hold at least this many bytes are written past the caches.
const STREAM_MIN: usize = 4096;

/// A line's stamp word: the lap of the lane it was written in (high 32 bits), the entry's size
/// in lines (bits 5..32, first lines only) and flags. Zeroed memory has no COMMITTED line.
pub(super) const COMMITTED: u64 = 1;
pub(super) const PADDING: u64 = 2;
/// A further line of an entry: never committed, so never taken for an entry's start.
pub(super) const CONTINUED: u64 = 4;
pub(super) const LINES_SHIFT: u32 = 5;
const LINES_MASK: u64 = (1 << (32 - LINES_SHIFT)) - 1;

/// Keeps a field on a cache line of its own, so producers hammering `reserve` do not slow the
/// consumer's `tail` and the other way round.
#[repr(C, align(64))]
pub(super) struct CacheLine<T>(pub(super) T);

/// A lane's control block, in the log's header: atomics only, so every process may hold a
/// reference to it while others write.
#[repr(C)]
pub(super) struct LaneHeader {
    /// Absolute byte position producers have claimed up to (CAS).
    pub(super) reserve: CacheLine<AtomicU64>,
    /// Absolute byte position the consumer has freed up to.
    pub(super) tail: CacheLine<AtomicU64>,
    /// A lower bound of `tail`, kept by the producers (the consumer never touches it): a
    /// producer reads the real tail — a line the consumer writes after every entry — only when
    /// this bound says the lane is full, so appends do not pull that line across cores each time.
    tail_seen: CacheLine<AtomicU64>,
    /// Entries freed so far (the consumer's own line).
    consumed: CacheLine<AtomicU64>,
}

/// An entry's stored form after its first word. Written and read whole with plain copies: the
/// Release store and Acquire load of the first word order them.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Body {
    op: u32,
    origin: u32,
    seq: u64,
    addr: u64,
    total_len: u64,
    offset: u64,
    data_len: u32,
    last: u32,
}

/// Bytes an entry with `data_len` bytes of data occupies: its first line and as many further
/// lines as the rest of the data needs.
pub(super) fn entry_size(data_len: usize) -> u64 {
    ((1 + data_len.saturating_sub(FIRST_DATA).div_ceil(CONT_DATA)) * LINE) as u64
}

/// A byte range a producer has claimed: `padding` bytes at `start` (to the end of the lane's
/// data; 0 if none), then the entry of `size` bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Claim {
    pub(super) start: u64,
    pub(super) padding: u64,
    pub(super) size: u64,
}

impl Claim {
    fn entry_pos(&self) -> u64 {
        self.start + self.padding
    }
}

/// The entry at a lane's tail, read but not yet freed.
pub(super) struct Head {
    pub(super) meta: EntryMeta,
    pub(super) data: EntryData,
    pub(super) pos: u64,
    pub(super) size: u64,
}

/// A view of one lane: its control block and its `capacity` data bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lane {
    pub(super) header: *const LaneHeader,
    pub(super) data: *mut u8,
    pub(super) capacity: usize,
}

impl Lane {
    pub(super) fn header(&self) -> &LaneHeader {
        // SAFETY: the log's init/attach checked the region; the block holds atomics only.
        unsafe { &*self.header }
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.capacity as u64 - 1
    }

    /// The lap (round of the lane, 32 bits) that absolute position `pos` belongs to.
    #[inline]
    fn lap(&self, pos: u64) -> u64 {
        (pos >> self.capacity.trailing_zeros()) as u32 as u64
    }

    /// The stamp of a line written at absolute position `pos`.
    #[inline]
    fn stamp(&self, pos: u64, lines: u64, flags: u64) -> u64 {
        self.lap(pos) << 32 | lines << LINES_SHIFT | flags
    }

    /// Address of absolute position `pos` in the lane's data.
    #[inline]
    pub(super) fn slot(&self, pos: u64) -> *mut u8 {
        // SAFETY: the offset is reduced into the lane's data.
        unsafe { self.data.add((pos & self.mask()) as usize) }
    }

    /// The first word of the line at `pos` (lines start at multiples of 64).
    #[inline]
    fn word_at(&self, pos: u64) -> &AtomicU64 {
        debug_assert!(pos.is_multiple_of(8));
        // SAFETY: 8-aligned (data 64-aligned, positions multiples of 8) and inside the lane;
        // first words are only ever accessed atomically while the region is shared.
        unsafe { &*(self.slot(pos) as *const AtomicU64) }
    }

    pub(super) fn consumed(&self) -> u64 {
        self.header().consumed.0.load(Ordering::Acquire)
    }

    pub(super) fn count_consumed(&self, n: u64) {
        self.header().consumed.0.fetch_add(n, Ordering::Release);
    }

    /// Bytes free right now (padding counts as used); approximate under concurrency.
    pub(super) fn free_bytes(&self) -> usize {
        // tail first: a reserve loaded later is never behind it.
        let tail = self.header().tail.0.load(Ordering::Acquire);
        let reserve = self.header().reserve.0.load(Ordering::Relaxed);
        self.capacity - (reserve.saturating_sub(tail) as usize).min(self.capacity)
    }

    /// The stamp at `pos` if an entry (or padding) of this lap starts there and is published;
    /// None for an empty place, a hole, or whatever an earlier lap left there. Acquire: pairs
    /// with the producer's Release of the stamp, so the entry is complete.
    #[inline]
    pub(super) fn tail(&self) -> u64 {
        self.header().tail.0.load(Ordering::Relaxed)
    }

    pub(super) fn published_at(&self, pos: u64) -> Option<u64> {
        let word = self.word_at(pos).load(Ordering::Acquire);
        (word & COMMITTED != 0 && word >> 32 == self.lap(pos)).then_some(word)
    }

    #[inline]
    pub(super) fn has_entry(&self) -> bool {
        self.published_at(self.header().tail.0.load(Ordering::Acquire)).is_some()
    }

    /// Producer step 1: claims `size` contiguous bytes (plus padding to the end of the lane if
    /// they would not fit before it) with one CAS, or returns None if the lane is too full.
    pub(super) fn claim(&self, size: u64) -> Option<Claim> {
        let cap = self.capacity as u64;
        let h = self.header();
        // Acquire (from the consumer's Release of tail, directly or through the producer that
        // raised tail_seen with it): the consumer is done reading everything before the tail we
        // see; our bytes are among them. Loaded before reserve, so the reserve we load is never
        // behind it.
        let mut tail = h.tail_seen.0.load(Ordering::Acquire);
        let mut start = h.reserve.0.load(Ordering::Relaxed);
        loop {
            if start < tail {
                // A failed CAS gave us a reserve older than a tail we reloaded since.
                start = h.reserve.0.load(Ordering::Relaxed);
                continue;
            }
            let offset = start & self.mask();
            let padding = if offset + size > cap { cap - offset } else { 0 };
            let end = start + padding + size;
            if end - tail > cap {
                let fresh = h.tail.0.load(Ordering::Acquire);
                if fresh == tail {
                    return None;
                }
                h.tail_seen.0.fetch_max(fresh, Ordering::AcqRel);
                tail = fresh;
                continue;
            }
            // Release: claims only split the positions (the bytes are ordered by tail and the
            // entries' first words), but a respawned origin that reads reserve must see the
            // counts a claimer of a shared lane raised before it (`LogRing::cover_holes_of`).
            // The same locked instruction on x86.
            match h.reserve.0.compare_exchange_weak(start, end, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Some(Claim { start, padding, size }),
                Err(current) => start = current,
            }
        }
    }

    /// Producer step 2: writes the claimed entry and publishes it (and the padding, if any):
    /// every further line gets its stamp and data, the first line its body and first data
    /// bytes, and last the first line's stamp, with Release.
    pub(super) fn publish(&self, claim: Claim, meta: &EntryMeta, data: &[u8]) {
        debug_assert!(entry_size(data.len()) == claim.size);
        let line = LINE as u64;
        if claim.padding > 0 {
            let word = self.stamp(claim.start, claim.padding / line, PADDING | COMMITTED);
            self.word_at(claim.start).store(word, Ordering::Release);
        }
        let pos = claim.entry_pos();
        let slot = self.slot(pos);
        let body = Body {
            op: meta.op as u32,
            origin: meta.origin,
            seq: meta.seq,
            addr: meta.addr,
            total_len: meta.total_len,
            offset: meta.offset,
            data_len: data.len() as u32,
            last: meta.last as u32,
        };
        let (first, rest) = data.split_at(data.len().min(FIRST_DATA));
        // SAFETY: the claim gives this producer [pos, pos + size) alone, whole lines contiguous
        // inside the lane (claim added padding otherwise), and nobody reads it before the
        // Release below; `size` has room for the body and every chunk of the data.
        unsafe {
            ptr::write(slot.add(8) as *mut Body, body);
            if first.len() == FIRST_DATA {
                // The usual small access (a word): one store, not a call to memcpy.
                ptr::write_unaligned(slot.add(ENTRY_HEADER) as *mut [u8; FIRST_DATA], *(first.as_ptr() as *const [u8; FIRST_DATA]));
            } else {
                ptr::copy_nonoverlapping(first.as_ptr(), slot.add(ENTRY_HEADER), first.len());
            }
            self.write_continued(pos + line, rest);
        }
        // Release: the consumer that sees this stamp sees the body and the data.
        self.word_at(pos).store(self.stamp(pos, claim.size / line, COMMITTED), Ordering::Release);
        // The line the lane's next entry starts at was last read by the consumer, a lap ago:
        // ask for it now, so that the next append's stores do not miss (and the locked claim
        // before them does not wait for those misses to drain).
        activerma_core::prefetch::for_write(self.slot(pos + claim.size) as usize);
    }

    /// Writes `rest` (an entry's data after its first line) into the further lines from `at`:
    /// each line its CONTINUED stamp and up to CONT_DATA bytes. Entries of STREAM_MIN bytes or
    /// more are written with non-temporal stores (x86-64): a bulk entry is read back much
    /// later if at all (a held log, a checkpoint's), and a cached write would first read every
    /// line it overwrites from memory; the fence after them orders them before the Release
    /// that publishes the entry.
    ///
    /// # Safety
    /// The claim gives this producer the lines, which lie whole and contiguous in the lane.
    unsafe fn write_continued(&self, mut at: u64, rest: &[u8]) {
        let line = LINE as u64;
        let mut chunks = rest.chunks_exact(CONT_DATA);
        #[cfg(target_arch = "x86_64")]
        if rest.len() >= STREAM_MIN {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128, _mm_stream_si64};
            for chunk in chunks.by_ref() {
                let (to, from) = (self.slot(at), chunk.as_ptr());
                // SAFETY: the caller's contract; `to` is 64-aligned, so the words at 0 and 8
                // are 8-aligned and those at 16, 32, 48 16-aligned; `chunk` has CONT_DATA bytes.
                unsafe {
                    _mm_stream_si64(to as *mut i64, self.stamp(at, 0, CONTINUED) as i64);
                    _mm_stream_si64(to.add(8) as *mut i64, ptr::read_unaligned(from as *const i64));
                    for k in 0..3 {
                        _mm_stream_si128(to.add(16 + 16 * k) as *mut __m128i, _mm_loadu_si128(from.add(8 + 16 * k) as *const __m128i));
                    }
                }
                at += line;
            }
            // SAFETY: a fence.
            unsafe { _mm_sfence() };
        }
        for chunk in chunks.by_ref() {
            self.word_at(at).store(self.stamp(at, 0, CONTINUED), Ordering::Relaxed);
            // SAFETY: the caller's contract; a whole line's data, copied as words (a call to
            // memcpy per line cost more than the copy).
            unsafe { ptr::write_unaligned(self.slot(at).add(8) as *mut [u8; CONT_DATA], *(chunk.as_ptr() as *const [u8; CONT_DATA])) };
            at += line;
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            self.word_at(at).store(self.stamp(at, 0, CONTINUED), Ordering::Relaxed);
            // SAFETY: as above, a part of a line.
            unsafe { ptr::copy_nonoverlapping(tail.as_ptr(), self.slot(at).add(8), tail.len()) };
        }
    }

    /// For the producer that replaces a producer of this lane after its process died (a
    /// respawned origin, before its first append): every entry below `reserve` claimed but
    /// never published — a hole the consumer would wait on for good — becomes padding the
    /// consumer skips. The caller makes sure every such hole is the dead process's: alone in
    /// the lane, or after seeing the lane's other producers with nothing in flight since it
    /// read `reserve` (`LogRing::cover_holes_of`); a live producer's claim would look the
    /// same. Walks the published entries from the tail; a hole ends at the next line that
    /// starts an entry published in this lap (every line begins with a stamp word, and the
    /// lines of an unpublished entry carry none that is committed) or at `reserve`. Safe
    /// beside the consumer, which reads only published stamps and is held at the first hole.
    /// Returns the holes covered.
    pub(super) fn cover_holes(&self, reserve: u64) -> usize {
        let line = LINE as u64;
        let h = self.header();
        let mut pos = h.tail.0.load(Ordering::Acquire);
        let mut covered = 0;
        while pos < reserve {
            if let Some((_, size)) = self.published_entry(pos) {
                pos += size;
                continue;
            }
            let mut end = pos + line;
            while end < reserve && self.published_entry(end).is_none() {
                end += line;
            }
            // Padding never crosses the end of the lane: one piece up to it, one after.
            let mut at = pos;
            while at < end {
                let room = self.capacity as u64 - (at & self.mask());
                let piece = (end - at).min(room);
                self.word_at(at).store(self.stamp(at, piece / line, PADDING | COMMITTED), Ordering::Release);
                at += piece;
            }
            covered += 1;
            pos = end;
        }
        covered
    }

    /// The stamp and size of the entry (or padding) published at `pos`; None if nothing is
    /// published there, or if the stamp names an impossible size (`head` reports that).
    #[inline]
    fn published_entry(&self, pos: u64) -> Option<(u64, u64)> {
        let word = self.published_at(pos)?;
        let size = (word >> LINES_SHIFT & LINES_MASK) * LINE as u64;
        (size != 0 && size <= self.capacity as u64 - (pos & self.mask())).then_some((word, size))
    }

    /// Starts loading the memory the entry published at `pos` accessed (its address in the
    /// target) and returns the position after the entry; None if nothing is published there
    /// yet. Only a hint to the cache: a prefetch never faults, so an address that is not
    /// mapped here costs nothing.
    #[inline]
    pub(super) fn prefetch_accessed(&self, pos: u64) -> Option<u64> {
        let (word, size) = self.published_entry(pos)?;
        if word & PADDING == 0 {
            // SAFETY: published (Acquire in published_at): the body is written and stays
            // until the consumer frees it (and a reused line fails the lap check first).
            let addr = unsafe { ptr::read(self.slot(pos).add(8) as *const Body) }.addr;
            activerma_core::prefetch::for_write(addr as usize);
        }
        Some(pos + size)
    }

    /// Entries published from the tail on and not yet freed, counted up to `limit`: a walk
    /// over their stamps. Producers keep no count, because a counter shared by a lane's
    /// producers costs a locked instruction per append, which waits for the previous entry's
    /// stores (they miss: the consumer read those lines last). Safe beside the consumer: a
    /// line it freed and a producer reused carries a later lap and ends the walk.
    pub(super) fn published(&self, limit: u64) -> u64 {
        let mut pos = self.header().tail.0.load(Ordering::Acquire);
        let end = pos + self.capacity as u64;
        let mut n = 0;
        while n < limit && pos < end {
            let Some((word, size)) = self.published_entry(pos) else { break };
            n += (word & PADDING == 0) as u64;
            pos += size;
        }
        n
    }

    /// The entry at the tail, skipping (and freeing) padding; the caller holds the log's
    /// consumer guard.
    pub(super) fn head(&self) -> Option<Head> {
        // Only the guard holder writes tail, and the guard ordered us after the last write.
        let tail_pos = &self.header().tail.0;
        loop {
            let pos = tail_pos.load(Ordering::Relaxed);
            let word = self.published_at(pos)?;
            let size = (word >> LINES_SHIFT & LINES_MASK) * LINE as u64;
            let room = self.capacity as u64 - (pos & self.mask());
            assert!(
                size >= LINE as u64 && size <= room,
                "access log corrupted at position {pos}: first word {word:#x} (another process overwrote the region?)"
            );
            if word & PADDING != 0 {
                tail_pos.store(pos + size, Ordering::Release);
                continue;
            }
            let slot = self.slot(pos);
            // SAFETY: the entry is published (Acquire above) and stays untouched until we free it;
            // its first line lies inside the lane (size checked against room).
            let body = unsafe { ptr::read(slot.add(8) as *const Body) };
            let op = LogOp::from_raw(body.op).filter(|_| entry_size(body.data_len as usize) == size);
            let Some(op) = op else {
                panic!("access log corrupted at position {pos}: entry of {size} bytes, op {}, {} data bytes", body.op, body.data_len);
            };
            let meta = EntryMeta {
                op,
                origin: body.origin,
                seq: body.seq,
                addr: body.addr,
                total_len: body.total_len,
                offset: body.offset,
                last: body.last != 0,
            };
            let len = body.data_len as usize;
            // Data that fits in the first line is handed out in place; longer data continues
            // after each further line's stamp and is gathered into one buffer.
            let data = if len <= FIRST_DATA {
                // SAFETY: inside the first line.
                EntryData::InPlace(unsafe { slot.add(ENTRY_HEADER) } as *const u8, len)
            } else {
                let mut v = Vec::with_capacity(len);
                // SAFETY: the entry's lines lie inside the lane (size checked above) and hold
                // `len` data bytes: FIRST_DATA in the first line, CONT_DATA after each stamp.
                unsafe {
                    v.extend_from_slice(std::slice::from_raw_parts(slot.add(ENTRY_HEADER), FIRST_DATA));
                    let mut line = slot.add(LINE);
                    while v.len() < len {
                        let n = (len - v.len()).min(CONT_DATA);
                        v.extend_from_slice(std::slice::from_raw_parts(line.add(8), n));
                        line = line.add(LINE);
                    }
                }
                EntryData::Gathered(v)
            };
            return Some(Head { meta, data, pos, size });
        }
    }

    /// Advances the tail past the head entry at `pos` of `size` bytes; the caller holds the
    /// guard and is done with the entry. Its lines are left as they are: their stamps name this
    /// lap, which the next lap does not accept, so the consumer never writes a line a producer
    /// is about to write.
    pub(super) fn free(&self, pos: u64, size: u64) {
        let tail_pos = &self.header().tail.0;
        assert_eq!(tail_pos.load(Ordering::Relaxed), pos, "access log entry consumed out of order");
        // Release: a producer that sees the new tail has our reads of the entry behind it.
        tail_pos.store(pos + size, Ordering::Release);
    }
}
