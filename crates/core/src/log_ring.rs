//! The access log of Active Access (Besta & Hoefler, ICS'15): a ring of variable-size entries in
//! memory shared between processes, into which many producers (origins, in any process) append
//! what they accessed, and which one consumer (the target's handler) reads in order.
//!
//! ```text
//! region offset
//!   0    magic, capacity       written once by init, magic last
//!   64   reserve               absolute byte position producers have claimed up to (CAS)
//!   128  appended              entries claimed so far (counted just before they are published)
//!   192  tail                  absolute byte position the consumer has freed up to
//!   256  consumed, guard       entries freed so far; the guard makes sure only one consumer reads
//!   320  data area             `capacity` bytes; absolute position p is at 320 + (p & (capacity - 1))
//!
//! data area (positions grow to the right and wrap round to the left edge; whole 64-byte lines):
//!   | entry |..old laps..| entry | entry (claimed, not yet published) | entry | pad |
//!           ^ reserve    ^ tail: the consumer stops at the unpublished entry (a hole)
//!
//! entry (one or more lines; every line starts with a stamp word):
//!   line 0   stamp: lap << 32 | lines << 5 | PADDING? | COMMITTED    Release-stored last
//!            body: op u32, origin u32, seq, addr, total_len, offset, data_len u32, last u32
//!            the first 8 data bytes
//!   line k   stamp: lap << 32 | CONTINUED, then the next 56 data bytes
//!   (lap = position / capacity: the ring's round this line was written in)
//! ```
//!
//! Why this shape:
//! - The region is mapped by several processes, possibly at different addresses, so it holds
//!   offsets and absolute positions only, never pointers; `LogRing` is a per-process view.
//! - Producers take no lock: one CAS on `reserve` claims a byte range, the producer fills it at
//!   leisure and publishes it with one Release store of its first word, so many producers copy
//!   in parallel. (A producer that dies between its CAS and its publish leaves a hole that blocks
//!   the log for good, as a dead peer blocks any protocol with it.)
//! - An entry is never split across the end of the data area, so the consumer hands out one
//!   contiguous slice: an entry that would not fit claims the rest of the lap as padding in the
//!   same CAS.
//! - Every line starts with a stamp that names the lap it was written in, and data never sits
//!   at a line's start. The consumer accepts the line at `tail` as an entry only if its stamp is
//!   COMMITTED and of the current lap, so whatever an earlier lap left there (an old entry, a
//!   further line, padding: all stamps, never data) reads as "not written yet". The consumer
//!   therefore never writes the lines it consumed: a line moves between the two cores twice a
//!   lap (producer writes, consumer reads), not three times as when the consumer zeroed it.
//!   Data longer than the first line's 8 bytes is gathered into a buffer for the handler.
//!   Laps are counted in 32 bits: a line 2^32 laps old would pass (centuries of logging).
//! - The consumer only frees in order, so a claimed but unpublished entry (a hole) hides the
//!   entries after it until it is published; nothing is exposed half-written.
//! - One consumer at a time, enforced: `peek` takes a guard word in the region (so it covers
//!   every view in every process) and the entry it returns gives it back, so a second poller gets
//!   `None` instead of racing the first one's reads and tail updates.
//! - Positions are absolute u64 byte counts and never wrap (2^64 bytes is decades of logging at
//!   10 GB/s); `reserve - tail` is the space in use, including padding.

use crate::{Error, Result};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes of an entry before its data: the first line's stamp plus the body.
pub const ENTRY_HEADER: usize = 8 + std::mem::size_of::<Body>();

/// Entries are made of whole cache lines, each starting with its stamp word.
const LINE: usize = 64;
/// Data bytes in an entry's first line (after the stamp and the body) and in each further line.
const FIRST_DATA: usize = LINE - ENTRY_HEADER;
const CONT_DATA: usize = LINE - 8;

/// Smallest data area: at least a few entries of the smallest chunk must fit.
pub const MIN_CAPACITY: usize = 256;

/// Largest data area: keeps `data_len` within a u32, sizes far from overflow and an entry's
/// line count within its stamp.
pub const MAX_CAPACITY: usize = 1 << 32;

/// "acclog02": tells a formatted log from zeroed or foreign memory (02: stamped lines).
const MAGIC: u64 = u64::from_be_bytes(*b"acclog02");

/// A line's stamp word: the lap of the ring it was written in (high 32 bits), the entry's size
/// in lines (bits 5..32, first lines only) and flags. Zeroed memory has no COMMITTED line.
const COMMITTED: u64 = 1;
const PADDING: u64 = 2;
/// A further line of an entry: never committed, so never taken for an entry's start.
const CONTINUED: u64 = 4;
const LINES_SHIFT: u32 = 5;
const LINES_MASK: u64 = (1 << (32 - LINES_SHIFT)) - 1;

/// Region bytes before the data area.
const DATA_OFF: usize = std::mem::size_of::<RingHeader>();

const _: () = assert!(ENTRY_HEADER.is_multiple_of(8) && ENTRY_HEADER < LINE);
const _: () = assert!(DATA_OFF.is_multiple_of(64));
const _: () = assert!(MIN_CAPACITY.is_multiple_of(LINE));

/// Region bytes needed for a log whose data area holds `capacity` bytes (a power of two, at
/// least `MIN_CAPACITY`).
pub fn ring_bytes(capacity: usize) -> usize {
    DATA_OFF + capacity
}

/// What access was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogOp {
    Put = 1,
    Get = 2,
}

impl LogOp {
    fn from_raw(raw: u32) -> Option<LogOp> {
        match raw {
            1 => Some(LogOp::Put),
            2 => Some(LogOp::Get),
            _ => None,
        }
    }
}

/// What one entry says about the access it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryMeta {
    pub op: LogOp,
    /// Origin rank.
    pub origin: u32,
    /// Per-origin sequence number of the access.
    pub seq: u64,
    /// Target address of this chunk (access address + offset).
    pub addr: u64,
    /// Length of the whole access.
    pub total_len: u64,
    /// Offset of this chunk within the access.
    pub offset: u64,
    /// This chunk ends the access.
    pub last: bool,
}

/// Keeps a field on a cache line of its own, so producers hammering `reserve` do not slow the
/// consumer's `tail` and the other way round.
#[repr(C, align(64))]
struct CacheLine<T>(T);

#[repr(C)]
struct Ident {
    magic: AtomicU64,
    capacity: AtomicU64,
}

#[repr(C)]
struct ConsumerSide {
    consumed: AtomicU64,
    /// 1 while an `Entry` is out (peek to consume), in whichever view or process holds it.
    busy: AtomicU32,
}

/// The control block at the start of the region: atomics only, so every process may hold a
/// reference to it while others write.
#[repr(C)]
struct RingHeader {
    ident: CacheLine<Ident>,
    reserve: CacheLine<AtomicU64>,
    appended: CacheLine<AtomicU64>,
    tail: CacheLine<AtomicU64>,
    /// A lower bound of `tail`, kept by the producers (the consumer never touches it): a
    /// producer reads the real tail — a line the consumer writes after every entry — only when
    /// this bound says the log is full, so appends do not pull that line across cores each time.
    tail_seen: CacheLine<AtomicU64>,
    consumer: CacheLine<ConsumerSide>,
}

/// An entry after its first word. Written and read whole with plain copies: the Release store
/// and Acquire load of the first word order them.
#[derive(Clone, Copy)]
#[repr(C)]
struct Body {
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
fn entry_size(data_len: usize) -> u64 {
    ((1 + data_len.saturating_sub(FIRST_DATA).div_ceil(CONT_DATA)) * LINE) as u64
}

/// The lap (round of the ring, 32 bits) that absolute position `pos` of a ring of `capacity`
/// bytes belongs to.
#[inline]
fn lap(pos: u64, capacity: usize) -> u64 {
    (pos >> capacity.trailing_zeros()) as u32 as u64
}

/// The stamp of a line written at absolute position `pos` of a ring of `capacity` bytes.
#[inline]
fn stamp(pos: u64, capacity: usize, lines: u64, flags: u64) -> u64 {
    lap(pos, capacity) << 32 | lines << LINES_SHIFT | flags
}

/// A byte range a producer has claimed: `padding` bytes at `start` (to the end of the data
/// area; 0 if none), then the entry of `size` bytes.
#[derive(Clone, Copy, Debug)]
struct Claim {
    start: u64,
    padding: u64,
    size: u64,
}

impl Claim {
    fn entry_pos(&self) -> u64 {
        self.start + self.padding
    }
}

/// A view of an access log in this process. Cheap to copy; every view of the same region, in
/// any process, sees the same log.
#[derive(Clone, Copy, Debug)]
pub struct LogRing {
    base: *mut u8,
    capacity: usize,
}

// SAFETY: the view is a pointer to a region whose shared fields are atomics and whose entries
// are handed between threads by Release/Acquire on their first word; `init`/`attach` make the
// caller promise the region outlives every view. Nothing in the view is tied to a thread.
unsafe impl Send for LogRing {}
// SAFETY: as above: all methods take &self and synchronise through the region's atomics.
unsafe impl Sync for LogRing {}

impl LogRing {
    /// Formats a region of `ring_bytes(capacity)` bytes as an empty log (zeroing it first, so
    /// recycled memory is fine too) and returns a view of it.
    ///
    /// Panics if `capacity` is not a power of two in `MIN_CAPACITY..=MAX_CAPACITY` or `base` is
    /// not 64-byte aligned.
    ///
    /// # Safety
    /// `base` points to at least `ring_bytes(capacity)` writable bytes that stay mapped as long
    /// as any view of them exists, and no other view uses the region while it is being formatted.
    pub unsafe fn init(base: *mut u8, capacity: usize) -> LogRing {
        assert!(
            capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity),
            "log ring capacity {capacity} must be a power of two between {MIN_CAPACITY} and {MAX_CAPACITY}"
        );
        assert!((base as usize).is_multiple_of(64), "log ring region {base:p} must be 64-byte aligned");
        // SAFETY: the caller gives us the whole region, unused by anyone else for now.
        unsafe { ptr::write_bytes(base, 0, ring_bytes(capacity)) };
        let ring = LogRing { base, capacity };
        let ident = &ring.header().ident.0;
        ident.capacity.store(capacity as u64, Ordering::Relaxed);
        // Release: a process that sees the magic sees a formatted, zeroed region.
        ident.magic.store(MAGIC, Ordering::Release);
        ring
    }

    /// A view of a log that `init` formatted, maybe in another process and at another address.
    /// Fails with `InvalidArgument` if the region does not start with a formatted log.
    ///
    /// # Safety
    /// `base` points to a mapping of the whole region, `ring_bytes(capacity)` bytes for the
    /// capacity `init` was given (or at least `ring_bytes(0)` if it may be unformatted), that
    /// stays mapped as long as the view and its entries exist.
    pub unsafe fn attach(base: *mut u8) -> Result<LogRing> {
        if !(base as usize).is_multiple_of(64) {
            return Err(Error::InvalidArgument(format!("log ring region {base:p} is not 64-byte aligned")));
        }
        // SAFETY: the caller promises at least the control block is mapped; it holds atomics only.
        let ident = unsafe { &(*(base as *const RingHeader)).ident.0 };
        let magic = ident.magic.load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(Error::InvalidArgument(format!(
                "no access log at {base:p} (magic {magic:#x}, expected {MAGIC:#x}): the region was not formatted by LogRing::init"
            )));
        }
        let capacity = ident.capacity.load(Ordering::Relaxed);
        if !capacity.is_power_of_two() || !(MIN_CAPACITY as u64..=MAX_CAPACITY as u64).contains(&capacity) {
            return Err(Error::InvalidArgument(format!(
                "access log at {base:p} has capacity {capacity}, not a power of two in {MIN_CAPACITY}..={MAX_CAPACITY} (corrupted)"
            )));
        }
        Ok(LogRing { base, capacity: capacity as usize })
    }

    /// Bytes in the data area.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Largest data payload of one entry: a quarter of the data area less the header, so that an
    /// entry plus the padding it may need (less than one more entry) takes under half the area
    /// and several producers can have entries in flight at once.
    pub fn max_chunk(&self) -> usize {
        let lines = (self.capacity / 4 / LINE).max(1);
        FIRST_DATA + (lines - 1) * CONT_DATA
    }

    /// Appends one entry carrying `meta` and `data` (which may be empty: a metadata-only entry).
    /// `Ok(false)` means the log is full right now: the caller makes progress and retries, since a
    /// log never drops an entry. Fails with `InvalidArgument` if `data` exceeds `max_chunk()`.
    pub fn try_append(&self, meta: &EntryMeta, data: &[u8]) -> Result<bool> {
        if data.len() > self.max_chunk() {
            return Err(Error::InvalidArgument(format!(
                "access log entry of {} data bytes exceeds the largest chunk of this log ({} bytes); append_access splits accesses",
                data.len(),
                self.max_chunk()
            )));
        }
        match self.claim(entry_size(data.len())) {
            Some(claim) => {
                self.publish(claim, meta, data);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Appends a whole access as entries of at most `max_chunk()` data bytes, in order of offset,
    /// the last one flagged `last`. With `with_data` false, `data` is ignored and one
    /// metadata-only entry describes the whole access of `total_len` bytes; with `with_data` true,
    /// `total_len` must equal `data.len()`. An empty access still writes one entry.
    ///
    /// Whenever the log is full `wait` is called; it should make progress or back off, and
    /// returns an error to give up, which is returned here. Entries appended before giving up
    /// stay in the log: the consumer then sees an access without its `last` chunk.
    ///
    /// Returns the number of entries written.
    #[allow(clippy::too_many_arguments)] // one argument per field of the access, as callers hold them
    pub fn append_access(
        &self,
        op: LogOp,
        origin: u32,
        seq: u64,
        addr: u64,
        data: &[u8],
        with_data: bool,
        total_len: u64,
        wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<usize> {
        let payload: &[u8] = if with_data { data } else { &[] };
        if with_data && total_len != data.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "logged access carries {} data bytes but claims a length of {total_len}",
                data.len()
            )));
        }
        let max_chunk = self.max_chunk();
        let mut offset = 0;
        let mut written = 0;
        loop {
            let end = payload.len().min(offset + max_chunk);
            let meta = EntryMeta {
                op,
                origin,
                seq,
                addr: addr.wrapping_add(offset as u64),
                total_len,
                offset: offset as u64,
                last: end == payload.len(),
            };
            while !self.try_append(&meta, &payload[offset..end])? {
                wait()?;
            }
            written += 1;
            if meta.last {
                return Ok(written);
            }
            offset = end;
        }
    }

    /// Whether an access of `total_len` bytes (with its data or not) would be appended now
    /// without waiting for room: its entries, plus one entry's worth of padding at the wrap,
    /// fit in the free bytes. Approximate under concurrency (another producer may take the room
    /// first; the append then waits as usual). An access too large to fit in half the log is
    /// always "yes": it is streamed through the log and must wait in pieces anyway.
    pub fn has_room_for(&self, total_len: usize, with_data: bool) -> bool {
        let data = if with_data { total_len } else { 0 };
        let chunk = self.max_chunk().max(1);
        let (full, rest) = (data / chunk, data % chunk);
        let mut need = full as u64 * entry_size(chunk) + if rest > 0 || full == 0 { entry_size(rest) } else { 0 };
        need += entry_size(data.min(chunk)); // padding at the wrap
        need as usize > self.capacity / 2 || self.free_bytes() >= need as usize
    }

    /// Bytes free right now (padding counts as used). Approximate under concurrency: for
    /// thresholds, not for deciding whether an append will succeed.
    pub fn free_bytes(&self) -> usize {
        // tail first: a reserve loaded later is never behind it.
        let tail = self.header().tail.0.load(Ordering::Acquire);
        let reserve = self.header().reserve.0.load(Ordering::Relaxed);
        self.capacity - (reserve.saturating_sub(tail) as usize).min(self.capacity)
    }

    /// Address in this view of absolute position `pos` (for the IOTLB model: the page an
    /// entry was written to).
    pub fn address_of(&self, pos: u64) -> usize {
        self.base as usize + DATA_OFF + (pos as usize & (self.capacity - 1))
    }

    /// Absolute position producers have claimed up to: every entry appended before this call
    /// lies below it. With `tail`, the test of an active flush: once `tail() >= ` a value read
    /// here, everything appended before the read has been consumed.
    pub fn reserved(&self) -> u64 {
        self.header().reserve.0.load(Ordering::Acquire)
    }

    /// Absolute position the consumer has freed up to (entries are consumed after their
    /// handler ran, so everything below it has been processed).
    pub fn tail(&self) -> u64 {
        self.header().tail.0.load(Ordering::Acquire)
    }

    /// Entries appended so far, including ones whose producer is still writing them (counted
    /// just before they are published, so that `appended() >= consumed()` always holds).
    pub fn appended(&self) -> u64 {
        self.header().appended.0.load(Ordering::Acquire)
    }

    /// Entries consumed so far.
    pub fn consumed(&self) -> u64 {
        self.header().consumer.0.consumed.load(Ordering::Acquire)
    }

    /// Whether the entry (or padding) at the tail is published: something to drain. A hint for
    /// pollers (no guard taken); `drain` / `peek` decide.
    #[inline]
    pub fn has_entry(&self) -> bool {
        self.published_at(self.header().tail.0.load(Ordering::Acquire)).is_some()
    }

    /// The stamp at `pos` if an entry (or padding) of this lap starts there and is published;
    /// None for an empty place, a hole, or whatever an earlier lap left there. Acquire: pairs
    /// with the producer's Release of the stamp, so the entry is complete.
    #[inline]
    fn published_at(&self, pos: u64) -> Option<u64> {
        let word = self.word_at(pos).load(Ordering::Acquire);
        (word & COMMITTED != 0 && word >> 32 == lap(pos, self.capacity)).then_some(word)
    }

    /// Entries appended and not yet consumed.
    pub fn pending(&self) -> u64 {
        // consumed first: each consumed entry was counted in appended before it was published.
        let consumed = self.consumed();
        self.appended().saturating_sub(consumed)
    }

    /// Consumer side: the next entry in log order, or `None` if the log is empty, if the next
    /// entry is still being written (later complete entries wait behind it), or if another
    /// consumer holds an entry right now.
    ///
    /// One consumer at a time: the returned entry holds the log's consumer guard (in the region,
    /// so it covers every view in every process) until it is consumed or dropped. Dropping an
    /// entry without consuming it leaves it at the head of the log for the next peek.
    pub fn peek(&self) -> Option<Entry<'_>> {
        let guard = &self.header().consumer.0.busy;
        // Acquire: see the tail the previous guard holder advanced.
        if guard.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return None;
        }
        let e = self.head_entry(true);
        if e.is_none() {
            guard.store(0, Ordering::Release);
        }
        e
    }

    /// Consumer side, in bulk: runs `f` on every entry in log order until the log is empty or
    /// the next entry is still being written, and frees each after `f` returns; returns how
    /// many it ran. Takes the consumer guard once for the whole batch and counts the batch in
    /// `consumed` once, so a busy log costs no locked instruction per entry (each would wait
    /// for the stores before it). Returns 0 at once if another consumer holds the guard.
    pub fn drain(&self, mut f: impl FnMut(&Entry<'_>)) -> usize {
        let guard = &self.header().consumer.0.busy;
        if guard.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return 0;
        }
        /// Gives the guard back and counts the batch, also when `f` unwinds.
        struct Batch<'r> {
            ring: &'r LogRing,
            done: u64,
        }
        impl Drop for Batch<'_> {
            fn drop(&mut self) {
                let consumer = &self.ring.header().consumer.0;
                if self.done > 0 {
                    consumer.consumed.fetch_add(self.done, Ordering::Release);
                }
                consumer.busy.store(0, Ordering::Release);
            }
        }
        let mut batch = Batch { ring: self, done: 0 };
        while let Some(e) = self.head_entry(false) {
            f(&e);
            self.free(&e);
            batch.done += 1;
        }
        batch.done as usize
    }

    /// The entry at the tail, skipping (and freeing) padding; the caller holds the guard. With
    /// `owns_guard` the entry gives the guard back when dropped (`peek`).
    fn head_entry(&self, owns_guard: bool) -> Option<Entry<'_>> {
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
            // its first line lies inside the data area (size checked against room).
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
                // SAFETY: the entry's lines lie inside the data area (size checked above) and
                // hold `len` data bytes: FIRST_DATA in the first line, CONT_DATA after each stamp.
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
            return Some(Entry { meta, data, pos, size, ring: self, owns_guard });
        }
    }

    /// Frees the entry `peek` returned: advances the tail with Release so producers may reuse
    /// its lines (their stamps keep the next lap from taking them for entries).
    ///
    /// Panics if the entry came from another view (views of one region in one process are not
    /// interchangeable here, to keep the check a pointer comparison).
    pub fn consume(&self, e: Entry<'_>) {
        assert!(ptr::eq(e.ring.base, self.base), "access log entry consumed through another view than the one it came from");
        self.free(&e);
        self.header().consumer.0.consumed.fetch_add(1, Ordering::Release);
        // Dropping `e` releases the consumer guard.
    }

    /// Advances the tail past the head entry; the caller holds the guard and is done with the
    /// entry. Its lines are left as they are: their stamps name this lap, which the next lap
    /// does not accept, so the consumer never writes a line a producer is about to write.
    fn free(&self, e: &Entry<'_>) {
        let tail_pos = &self.header().tail.0;
        assert_eq!(tail_pos.load(Ordering::Relaxed), e.pos, "access log entry consumed out of order");
        // Release: a producer that sees the new tail has our reads of the entry behind it.
        tail_pos.store(e.pos + e.size, Ordering::Release);
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: init/attach checked the region starts with a control block, which holds
        // atomics only, so shared references to it are fine while other processes write.
        unsafe { &*(self.base as *const RingHeader) }
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.capacity as u64 - 1
    }

    /// Address of absolute position `pos` in the data area.
    #[inline]
    fn slot(&self, pos: u64) -> *mut u8 {
        // SAFETY: the offset is reduced into the data area, which follows the control block.
        unsafe { self.base.add(DATA_OFF + (pos & self.mask()) as usize) }
    }

    /// The first word of the entry at `pos` (entries start at multiples of 8).
    #[inline]
    fn word_at(&self, pos: u64) -> &AtomicU64 {
        debug_assert!(pos.is_multiple_of(8));
        // SAFETY: 8-aligned (region 64-aligned, positions multiples of 8) and inside the data
        // area; entry first words are only ever accessed atomically while the region is shared.
        unsafe { &*(self.slot(pos) as *const AtomicU64) }
    }

    /// Producer step 1: claims `size` contiguous bytes (plus padding to the end of the data area
    /// if they would not fit before it) with one CAS, or returns None if the log is too full.
    fn claim(&self, size: u64) -> Option<Claim> {
        let cap = self.capacity as u64;
        let reserve = &self.header().reserve.0;
        let tail_pos = &self.header().tail.0;
        let tail_seen = &self.header().tail_seen.0;
        // Acquire (from the consumer's Release of tail, directly or through the producer that
        // raised tail_seen with it): the consumer is done reading everything before the tail we
        // see; our bytes are among them. Loaded before reserve, so the reserve we load is never
        // behind it.
        let mut tail = tail_seen.load(Ordering::Acquire);
        let mut start = reserve.load(Ordering::Relaxed);
        loop {
            if start < tail {
                // A failed CAS gave us a reserve older than a tail we reloaded since.
                start = reserve.load(Ordering::Relaxed);
                continue;
            }
            let offset = start & self.mask();
            let padding = if offset + size > cap { cap - offset } else { 0 };
            let end = start + padding + size;
            if end - tail > cap {
                let fresh = tail_pos.load(Ordering::Acquire);
                if fresh == tail {
                    return None;
                }
                tail_seen.fetch_max(fresh, Ordering::AcqRel);
                tail = fresh;
                continue;
            }
            // Relaxed: claims only split the positions; the bytes are ordered by tail and the
            // entries' first words.
            match reserve.compare_exchange_weak(start, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Claim { start, padding, size }),
                Err(current) => start = current,
            }
        }
    }

    /// Producer step 2: writes the claimed entry and publishes it (and the padding, if any):
    /// every further line gets its stamp and data, the first line its body and first data
    /// bytes, and last the first line's stamp, with Release.
    fn publish(&self, claim: Claim, meta: &EntryMeta, data: &[u8]) {
        debug_assert!(entry_size(data.len()) == claim.size);
        let line = LINE as u64;
        if claim.padding > 0 {
            let word = stamp(claim.start, self.capacity, claim.padding / line, PADDING | COMMITTED);
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
        // Counted before the entry's bytes are written: a locked instruction after them would
        // wait for those stores, which miss (the consumer read the lines last), on every append.
        self.header().appended.0.fetch_add(1, Ordering::Relaxed);
        let (first, rest) = data.split_at(data.len().min(FIRST_DATA));
        // SAFETY: the claim gives this producer [pos, pos + size) alone, whole lines contiguous
        // inside the data area (claim added padding otherwise), and nobody reads it before the
        // Release below; `size` has room for the body and every chunk of the data.
        unsafe {
            ptr::write(slot.add(8) as *mut Body, body);
            ptr::copy_nonoverlapping(first.as_ptr(), slot.add(ENTRY_HEADER), first.len());
            for (i, chunk) in rest.chunks(CONT_DATA).enumerate() {
                let at = pos + (i as u64 + 1) * line;
                self.word_at(at).store(stamp(at, self.capacity, 0, CONTINUED), Ordering::Relaxed);
                ptr::copy_nonoverlapping(chunk.as_ptr(), self.slot(at).add(8), chunk.len());
            }
        }
        // Release: the consumer that sees this stamp sees the body, the data and the count.
        self.word_at(pos).store(stamp(pos, self.capacity, claim.size / line, COMMITTED), Ordering::Release);
    }
}

/// An entry's data: in place in its first line, or gathered from its lines.
enum EntryData {
    InPlace(*const u8, usize),
    Gathered(Vec<u8>),
}

/// One entry of the log, handed out by `LogRing::peek`; holds the consumer guard until it is
/// consumed or dropped.
pub struct Entry<'a> {
    pub meta: EntryMeta,
    data: EntryData,
    pos: u64,
    size: u64,
    ring: &'a LogRing,
    /// Handed out by `peek`: gives the consumer guard back when dropped (`drain` holds it for
    /// the whole batch instead).
    owns_guard: bool,
}

impl Entry<'_> {
    /// The data this entry carries (empty for a metadata-only entry). Borrowed from the entry,
    /// not the log: once the entry is consumed, producers may overwrite those bytes.
    pub fn data(&self) -> &[u8] {
        match &self.data {
            // SAFETY: the data lies inside the entry's first line, which stays untouched while
            // the entry (and so this borrow) lives.
            EntryData::InPlace(at, len) => unsafe { std::slice::from_raw_parts(*at, *len) },
            EntryData::Gathered(v) => v,
        }
    }
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        if self.owns_guard {
            // Release: the next consumer sees the tail we advanced.
            self.ring.header().consumer.0.busy.store(0, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("meta", &self.meta).field("data_len", &self.data().len()).field("pos", &self.pos).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A page-aligned zeroed region, freed on drop.
    struct Region {
        mem: *mut u8,
        layout: Layout,
    }

    // SAFETY: a plain heap block; the tests share it between threads through LogRing views.
    unsafe impl Send for Region {}
    unsafe impl Sync for Region {}

    impl Region {
        fn new(capacity: usize) -> Region {
            let layout = Layout::from_size_align(ring_bytes(capacity), 4096).unwrap();
            // SAFETY: non-zero size.
            let mem = unsafe { alloc_zeroed(layout) };
            assert!(!mem.is_null());
            Region { mem, layout }
        }
        fn ring(&self, capacity: usize) -> LogRing {
            // SAFETY: the region is ring_bytes(capacity) bytes and outlives the test's views.
            unsafe { LogRing::init(self.mem, capacity) }
        }
    }

    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: allocated in new with this layout.
            unsafe { dealloc(self.mem, self.layout) };
        }
    }

    /// splitmix64: deterministic, good enough to pick sizes and bytes.
    fn mix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    fn payload(origin: u32, seq: u64, len: usize) -> Vec<u8> {
        let seed = mix(((origin as u64) << 40) ^ seq);
        (0..len).map(|i| (mix(seed ^ i as u64) >> 24) as u8).collect()
    }

    fn checksum(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
    }

    fn meta(seq: u64, data_len: usize) -> EntryMeta {
        EntryMeta {
            op: if seq.is_multiple_of(2) { LogOp::Put } else { LogOp::Get },
            origin: 3,
            seq,
            addr: 0x1000 + seq,
            total_len: data_len as u64,
            offset: 0,
            last: true,
        }
    }

    /// Consumes the next entry, returning its meta and data.
    fn pop(ring: &LogRing) -> Option<(EntryMeta, Vec<u8>)> {
        let e = ring.peek()?;
        let out = (e.meta, e.data().to_vec());
        ring.consume(e);
        Some(out)
    }

    #[test]
    fn log_ring_single_thread_order_and_content() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        assert_eq!(ring.max_chunk(), 8 + 3 * 56, "a quarter of the log: the first line's 8 data bytes and 3 more lines");
        assert!(ring.peek().is_none(), "a fresh log is empty");
        for seq in 0..4u64 {
            assert!(ring.try_append(&meta(seq, 10 * seq as usize), &payload(3, seq, 10 * seq as usize)).unwrap());
        }
        assert_eq!((ring.appended(), ring.consumed(), ring.pending()), (4, 0, 4));
        // A peeked entry that is dropped stays at the head.
        assert_eq!(ring.peek().unwrap().meta.seq, 0);
        for seq in 0..4u64 {
            let (m, d) = pop(&ring).unwrap();
            assert_eq!(m, meta(seq, 10 * seq as usize));
            assert_eq!(d, payload(3, seq, 10 * seq as usize));
        }
        assert!(ring.peek().is_none());
        assert_eq!((ring.appended(), ring.consumed(), ring.pending()), (4, 4, 0));
        assert_eq!(ring.free_bytes(), 1024);
    }

    #[test]
    fn log_ring_wraps_with_padding() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        // Entries of 100 data bytes take 3 lines (192 bytes): five fill 960, the sixth needs
        // padding of 64.
        assert_eq!(entry_size(100), 192);
        for seq in 0..5u64 {
            assert!(ring.try_append(&meta(seq, 100), &payload(3, seq, 100)).unwrap());
        }
        assert!(!ring.try_append(&meta(5, 100), &payload(3, 5, 100)).unwrap(), "padding + entry do not fit");
        assert_eq!(ring.free_bytes(), 64);
        for seq in 0..2u64 {
            assert_eq!(pop(&ring).unwrap().0.seq, seq);
        }
        assert!(ring.try_append(&meta(5, 100), &payload(3, 5, 100)).unwrap(), "fits after the wrap");
        assert_eq!(ring.free_bytes(), 1024 - (3 * 192 + 64 + 192));
        for seq in 2..6u64 {
            let (m, d) = pop(&ring).unwrap();
            assert_eq!(m.seq, seq);
            assert_eq!(d, payload(3, seq, 100));
        }
        assert!(ring.peek().is_none());
        assert_eq!(ring.free_bytes(), 1024);
    }

    #[test]
    fn log_ring_metadata_only_entries() {
        let region = Region::new(256);
        let ring = region.ring(256);
        let m = EntryMeta { op: LogOp::Get, origin: 7, seq: 9, addr: 0xdead_beef, total_len: 1 << 40, offset: 0, last: true };
        assert!(ring.try_append(&m, &[]).unwrap());
        let (got, data) = pop(&ring).unwrap();
        assert_eq!(got, m);
        assert!(data.is_empty());
        // Many metadata-only entries go round the ring several times.
        for seq in 0..100 {
            assert!(ring.try_append(&meta(seq, 0), &[]).unwrap());
            assert_eq!(pop(&ring).unwrap().0, meta(seq, 0));
        }
    }

    #[test]
    fn log_ring_full_then_room_again() {
        let region = Region::new(256);
        let ring = region.ring(256);
        assert_eq!(ring.max_chunk(), 8);
        let mut appended = 0;
        while ring.try_append(&meta(appended, 8), &[appended as u8; 8]).unwrap() {
            appended += 1;
        }
        assert_eq!(appended, 4, "four 64-byte entries fill 256 bytes");
        assert_eq!(ring.free_bytes(), 0);
        assert!(!ring.try_append(&meta(99, 0), &[]).unwrap(), "still full, nothing dropped");
        assert_eq!(pop(&ring).unwrap().1, vec![0u8; 8]);
        assert!(ring.try_append(&meta(appended, 8), &[appended as u8; 8]).unwrap(), "room after consuming");
        for seq in 1..=4u64 {
            assert_eq!(pop(&ring).unwrap().1, vec![seq as u8; 8]);
        }
        assert!(ring.peek().is_none());
    }

    #[test]
    fn log_ring_rejects_oversize_chunk() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        let too_big = vec![0u8; ring.max_chunk() + 1];
        assert!(matches!(ring.try_append(&meta(0, too_big.len()), &too_big), Err(Error::InvalidArgument(_))));
        assert!(ring.try_append(&meta(0, ring.max_chunk()), &too_big[1..]).unwrap(), "max_chunk itself fits");
        assert_eq!(ring.appended(), 1);
    }

    /// A random mix of appends and consumes against a queue model, many laps round a small ring.
    #[test]
    fn log_ring_matches_queue_model() {
        let region = Region::new(512);
        let ring = region.ring(512);
        let mut model: VecDeque<(EntryMeta, Vec<u8>)> = VecDeque::new();
        let mut seq = 0u64;
        for step in 0..20_000u64 {
            let r = mix(step);
            if !r.is_multiple_of(3) {
                let len = (r >> 8) as usize % (ring.max_chunk() + 1);
                let (m, d) = (meta(seq, len), payload(3, seq, len));
                if ring.try_append(&m, &d).unwrap() {
                    model.push_back((m, d));
                    seq += 1;
                } else {
                    assert!(!model.is_empty(), "an empty log always takes an entry");
                    assert!(ring.free_bytes() < 2 * entry_size(len) as usize, "refused with room to spare");
                }
            } else {
                assert_eq!(pop(&ring), model.pop_front());
            }
            assert_eq!(ring.pending(), model.len() as u64);
        }
        while let Some(expected) = model.pop_front() {
            assert_eq!(pop(&ring), Some(expected));
        }
        assert!(ring.peek().is_none());
    }

    #[test]
    fn log_ring_append_access_splits_and_reassembles() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        let access = payload(5, 77, 10 * 1024 + 13);
        let mut consumer_side: Vec<(EntryMeta, Vec<u8>)> = Vec::new();
        // The log holds only a few chunks; `wait` plays the consumer, as progress would.
        let written = ring
            .append_access(LogOp::Put, 5, 77, 0x10_0000, &access, true, access.len() as u64, &mut || {
                while let Some(got) = pop(&ring) {
                    consumer_side.push(got);
                }
                Ok(())
            })
            .unwrap();
        while let Some(got) = pop(&ring) {
            consumer_side.push(got);
        }
        assert_eq!(written, access.len().div_ceil(ring.max_chunk()));
        assert_eq!(consumer_side.len(), written);
        let mut rebuilt = Vec::new();
        for (i, (m, d)) in consumer_side.iter().enumerate() {
            assert_eq!((m.op, m.origin, m.seq, m.total_len), (LogOp::Put, 5, 77, access.len() as u64));
            assert_eq!(m.offset, rebuilt.len() as u64);
            assert_eq!(m.addr, 0x10_0000 + m.offset);
            assert_eq!(m.last, i + 1 == written);
            assert!(d.len() <= ring.max_chunk());
            rebuilt.extend_from_slice(d);
        }
        assert_eq!(rebuilt, access);

        // Metadata only: one entry for the whole access.
        assert_eq!(ring.append_access(LogOp::Get, 5, 78, 0x20_0000, &[], false, 1 << 20, &mut || Ok(())).unwrap(), 1);
        let (m, d) = pop(&ring).unwrap();
        assert_eq!((m.op, m.seq, m.addr, m.total_len, m.offset, m.last), (LogOp::Get, 78, 0x20_0000, 1 << 20, 0, true));
        assert!(d.is_empty());

        // An empty access with data is one empty, last entry.
        assert_eq!(ring.append_access(LogOp::Put, 5, 79, 0, &[], true, 0, &mut || Ok(())).unwrap(), 1);
        assert!(pop(&ring).unwrap().0.last);

        // Giving up in `wait` propagates its error; the chunks written so far stay.
        let gave_up = ring.append_access(LogOp::Put, 5, 80, 0, &access, true, access.len() as u64, &mut || {
            Err(Error::Timeout { what: "room in the access log".into(), secs: 0.0 })
        });
        assert!(matches!(gave_up, Err(Error::Timeout { .. })));
        assert!(ring.pending() > 0);
        let mut offset = 0;
        while let Some((m, d)) = pop(&ring) {
            assert!(!m.last && m.offset == offset);
            offset += d.len() as u64;
        }

        // Mismatched length with data is refused.
        assert!(matches!(ring.append_access(LogOp::Put, 5, 81, 0, &access, true, 1, &mut || Ok(())), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn log_ring_stale_lines_of_an_earlier_lap_are_never_entries() {
        // The consumer does not clear what it consumed: a later lap must tell its own lines
        // from the old ones by their stamps, whatever the old data held. Fill a lap with data
        // that copies every stamp the next laps could expect, consume it, then look.
        let region = Region::new(1024);
        let ring = region.ring(1024);
        let forged: Vec<u8> = (0..ring.max_chunk() / 8)
            .flat_map(|i| {
                let lap = 1 + (i as u64 % 3);
                (lap << 32 | 1 << LINES_SHIFT | COMMITTED).to_le_bytes()
            })
            .collect();
        for lap in 0..3u64 {
            while ring.try_append(&meta(lap, forged.len()), &forged).unwrap() {}
            assert_eq!(ring.drain(|e| assert_eq!(e.data(), &forged[..])), 1024 / entry_size(forged.len()) as usize);
            assert!(!ring.has_entry() && ring.peek().is_none(), "lap {lap}: old lines are not entries");
            // Take the ring to the next lap's start with metadata-only entries.
            while !ring.header().reserve.0.load(Ordering::Relaxed).is_multiple_of(1024) {
                assert!(ring.try_append(&meta(9, 0), &[]).unwrap());
                assert_eq!(pop(&ring).unwrap().0.seq, 9);
            }
            assert!(!ring.has_entry() && ring.peek().is_none(), "lap {lap}: the next lap starts empty");
        }
        assert!(ring.try_append(&meta(7, 3), &[1, 2, 3]).unwrap());
        assert_eq!(pop(&ring).unwrap(), (meta(7, 3), vec![1, 2, 3]));
    }

    #[test]
    fn log_ring_hole_hides_later_entries() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        assert!(ring.try_append(&meta(0, 8), &[1; 8]).unwrap());
        // A producer claims its bytes, then is descheduled before publishing.
        let slow = ring.claim(entry_size(16)).unwrap();
        assert!(ring.try_append(&meta(2, 8), &[3; 8]).unwrap());
        assert_eq!(pop(&ring).unwrap().0.seq, 0);
        assert!(ring.peek().is_none(), "the hole hides the complete entry after it");
        ring.publish(slow, &meta(1, 16), &[2; 16]);
        assert_eq!(pop(&ring).unwrap(), (meta(1, 16), vec![2; 16]));
        assert_eq!(pop(&ring).unwrap(), (meta(2, 8), vec![3; 8]));
    }

    #[test]
    fn log_ring_hole_with_padding() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        // 256-byte entries (144 data bytes: 4 lines) move the positions to 512.
        assert_eq!(entry_size(144), 256);
        for seq in 0..2u64 {
            assert!(ring.try_append(&meta(seq, 144), &payload(3, seq, 144)).unwrap());
            pop(&ring).unwrap();
        }
        let slow = ring.claim(entry_size(144)).unwrap(); // 512..768
        assert_eq!((slow.start, slow.padding), (512, 0));
        assert!(ring.try_append(&meta(4, 0), &[]).unwrap()); // 768..832
                                                             // 832 + 256 passes the end: 192 bytes of padding, then the entry at 1024.
        let slow_padded = ring.claim(entry_size(144)).unwrap();
        assert_eq!((slow_padded.start, slow_padded.padding), (832, 192));
        assert!(ring.try_append(&meta(6, 144), &payload(3, 6, 144)).unwrap()); // 1280..1536
        assert!(ring.peek().is_none(), "first hole");
        ring.publish(slow, &meta(3, 144), &payload(3, 3, 144));
        assert_eq!(pop(&ring).unwrap(), (meta(3, 144), payload(3, 3, 144)));
        assert_eq!(pop(&ring).unwrap().0, meta(4, 0));
        assert!(ring.peek().is_none(), "the padding of a claimed, unpublished entry is a hole too");
        ring.publish(slow_padded, &meta(5, 144), &payload(3, 5, 144));
        assert_eq!(pop(&ring).unwrap(), (meta(5, 144), payload(3, 5, 144)));
        assert_eq!(pop(&ring).unwrap(), (meta(6, 144), payload(3, 6, 144)));
        assert!(ring.peek().is_none());
        assert_eq!(ring.free_bytes(), 1024);
    }

    #[test]
    fn log_ring_one_consumer_at_a_time() {
        let region = Region::new(256);
        let ring = region.ring(256);
        assert!(ring.try_append(&meta(0, 0), &[]).unwrap());
        let held = ring.peek().unwrap();
        assert!(ring.peek().is_none(), "a second consumer gets nothing while an entry is out");
        drop(held);
        let again = ring.peek().unwrap();
        assert_eq!(again.meta.seq, 0);
        ring.consume(again);
        assert!(ring.peek().is_none());
    }

    #[test]
    fn log_ring_drain_runs_in_order_counts_once_and_excludes_other_consumers() {
        let region = Region::new(1024);
        let ring = region.ring(1024);
        // Wrap once so that the batch also frees padding (5 entries of 192 bytes, then 64 of padding).
        for seq in 0..5u64 {
            assert!(ring.try_append(&meta(seq, 100), &payload(3, seq, 100)).unwrap());
        }
        assert_eq!(ring.drain(|_| {}), 5);
        for seq in 6..10u64 {
            assert!(ring.try_append(&meta(seq, 100), &payload(3, seq, 100)).unwrap());
        }
        assert!(ring.has_entry());
        let mut seen = Vec::new();
        let n = ring.drain(|e| {
            assert!(ring.peek().is_none(), "no second consumer while a drain runs");
            assert_eq!(ring.drain(|_| panic!("a nested drain gets nothing")), 0);
            seen.push((e.meta, e.data().to_vec()));
        });
        assert_eq!(n, 4);
        assert_eq!(seen, (6..10u64).map(|s| (meta(s, 100), payload(3, s, 100))).collect::<Vec<_>>());
        assert_eq!((ring.appended(), ring.consumed(), ring.pending()), (9, 9, 0));
        assert!(!ring.has_entry() && ring.peek().is_none());
        // A handler that panics leaves the guard free and the entries before it counted.
        for seq in 10..13u64 {
            assert!(ring.try_append(&meta(seq, 8), &payload(3, seq, 8)).unwrap());
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ring.drain(|e| assert!(e.meta.seq != 11, "handler fails on 11"));
        }));
        assert!(unwound.is_err());
        assert_eq!(ring.consumed(), 10, "entry 10 consumed before the panic");
        assert_eq!(pop(&ring).unwrap().0.seq, 11, "the entry whose handler failed stays at the head");
        assert_eq!(pop(&ring).unwrap().0.seq, 12);
    }

    #[test]
    fn log_ring_stress_many_producers_one_consumer() {
        const PRODUCERS: u32 = 6;
        const ACCESSES: u64 = 12_500; // about 100k entries with the splits
        const CAPACITY: usize = 1024;
        fn access_len(origin: u32, seq: u64) -> (usize, bool) {
            let r = mix(((origin as u64) << 32) | seq);
            ((r % 300) as usize, !(r >> 32).is_multiple_of(8))
        }
        fn access_addr(origin: u32, seq: u64) -> u64 {
            ((origin as u64) << 48) | (seq << 12)
        }

        let region = Arc::new(Region::new(CAPACITY));
        let ring = region.ring(CAPACITY);
        let producers_done = Arc::new(AtomicBool::new(false));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|origin| {
                std::thread::spawn(move || {
                    let mut entries = 0;
                    for seq in 0..ACCESSES {
                        let (len, with_data) = access_len(origin, seq);
                        let data = if with_data { payload(origin, seq, len) } else { Vec::new() };
                        let op = if with_data { LogOp::Put } else { LogOp::Get };
                        entries += ring
                            .append_access(op, origin, seq, access_addr(origin, seq), &data, with_data, len as u64, &mut || {
                                std::thread::yield_now();
                                Ok(())
                            })
                            .unwrap();
                    }
                    entries
                })
            })
            .collect();
        let consumer = {
            let done = producers_done.clone();
            std::thread::spawn(move || {
                let mut next_seq = vec![0u64; PRODUCERS as usize];
                let mut assembled: Vec<Vec<u8>> = vec![Vec::new(); PRODUCERS as usize];
                let mut entries = vec![0usize; PRODUCERS as usize];
                loop {
                    let Some(e) = ring.peek() else {
                        if done.load(Ordering::Acquire) && ring.pending() == 0 {
                            break;
                        }
                        std::thread::yield_now();
                        continue;
                    };
                    let m = e.meta;
                    let o = m.origin as usize;
                    assert!(o < PRODUCERS as usize);
                    assert_eq!(m.seq, next_seq[o], "origin {o}: accesses arrive in order");
                    assert_eq!(m.offset, assembled[o].len() as u64, "origin {o} seq {}: chunks arrive in order", m.seq);
                    assert_eq!(m.addr, access_addr(m.origin, m.seq) + m.offset);
                    let (len, with_data) = access_len(m.origin, m.seq);
                    assert_eq!(m.total_len, len as u64);
                    assert_eq!(m.op, if with_data { LogOp::Put } else { LogOp::Get });
                    assembled[o].extend_from_slice(e.data());
                    entries[o] += 1;
                    ring.consume(e);
                    if m.last {
                        let expected = if with_data { payload(m.origin, m.seq, len) } else { Vec::new() };
                        assert_eq!(checksum(&assembled[o]), checksum(&expected), "origin {o} seq {}: payload", m.seq);
                        assembled[o].clear();
                        next_seq[o] += 1;
                    }
                }
                assert!(next_seq.iter().all(|&n| n == ACCESSES), "every access arrived: {next_seq:?}");
                entries
            })
        };
        let sent: Vec<usize> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        producers_done.store(true, Ordering::Release);
        let received = consumer.join().unwrap();
        assert_eq!(sent, received, "entries in == entries out per producer");
        let total: usize = sent.iter().sum();
        assert!(total > 90_000, "{total} entries");
        assert_eq!((ring.appended(), ring.consumed()), (total as u64, total as u64));
    }

    /// Two mappings of one memfd at different addresses, as two processes would have.
    #[test]
    fn log_ring_attach_second_view() {
        const CAPACITY: usize = 4096;
        let len = ring_bytes(CAPACITY);
        // SAFETY: plain system calls; the mappings are unmapped and the fd closed at the end.
        let (fd, first, second) = unsafe {
            let fd = libc::memfd_create(c"log_ring_test".as_ptr(), 0);
            assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
            assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
            let map = || {
                let p = libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
                assert_ne!(p, libc::MAP_FAILED);
                p as *mut u8
            };
            (fd, map(), map())
        };
        assert_ne!(first, second);
        // SAFETY: `second` maps nothing formatted yet.
        assert!(matches!(unsafe { LogRing::attach(second) }, Err(Error::InvalidArgument(_))), "unformatted region refused");
        // SAFETY: both mappings stay until the end of the test.
        let producer_view = unsafe { LogRing::init(first, CAPACITY) };
        // SAFETY: as above.
        let consumer_view = unsafe { LogRing::attach(second) }.unwrap();
        assert_eq!(consumer_view.capacity(), CAPACITY);
        for seq in 0..50u64 {
            let data = payload(1, seq, (seq as usize * 37) % 200);
            assert!(producer_view.try_append(&meta(seq, data.len()), &data).unwrap());
            if seq % 3 == 2 {
                // Interleave consumption, so positions wrap and both views see the moving tail.
                for _ in 0..2 {
                    assert!(pop(&consumer_view).is_some());
                }
            }
        }
        assert_eq!(consumer_view.appended(), 50);
        let mut seq = consumer_view.consumed();
        while let Some((m, d)) = pop(&consumer_view) {
            assert_eq!(m, meta(seq, d.len()));
            assert_eq!(d, payload(1, seq, (seq as usize * 37) % 200));
            seq += 1;
        }
        assert_eq!(seq, 50);
        assert_eq!((producer_view.consumed(), producer_view.pending(), producer_view.free_bytes()), (50, 0, CAPACITY));
        // A corrupted capacity is refused.
        producer_view.header().ident.0.capacity.store(1000, Ordering::Relaxed);
        // SAFETY: as above.
        assert!(matches!(unsafe { LogRing::attach(second) }, Err(Error::InvalidArgument(_))));
        // SAFETY: mapped above with this length; no view is used after this.
        unsafe {
            libc::munmap(first as *mut libc::c_void, len);
            libc::munmap(second as *mut libc::c_void, len);
            libc::close(fd);
        }
    }
}
