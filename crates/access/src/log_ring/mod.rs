//! The access log of Active Access (Besta & Hoefler, ICS'15): entries of variable size in
//! memory shared between processes, into which many producers (origins, in any process) append
//! what they accessed, and which one consumer (the target's handler) reads.
//!
//! ```text
//! region offset
//!   0      magic, capacity, lanes     written once by init, magic last
//!   0      magic, capacity, lanes, origins   written once by init, magic last
//!   64     guard, next lane           only one consumer at a time; where the next drain starts
//!   128    lane 0's control block     reserve | tail | tail_seen | consumed (a line each)
//!   ...    lane L-1's control block
//!   (only if lanes are shared, origins > L) origin 0's counts: started | finished (a line)
//!   ...    origin origins-1's counts
//!   data   `capacity` bytes: lane i's ring is bytes [i * capacity/L, (i+1) * capacity/L)
//!
//! a lane's ring (positions grow to the right and wrap round to its left edge; whole 64-byte lines):
//!   | entry |..old laps..| entry | entry (claimed, not yet published) | entry | pad |
//!           ^ reserve    ^ tail: the consumer stops at the unpublished entry (a hole)
//!
//! entry (one or more lines; every line starts with a stamp word):
//!   line 0   stamp: lap << 32 | lines << 5 | PADDING? | COMMITTED    Release-stored last
//!            body: op u32, origin u32, seq, addr, total_len, offset, data_len u32, last u32
//!            the first 8 data bytes
//!   line k   stamp: lap << 32 | CONTINUED, then the next 56 data bytes
//!   (lap = position / lane capacity: the lane's round this line was written in)
//! ```
//!
//! Why this shape:
//! - **Lanes.** Origin `o` appends to lane `o mod L` only (`L = lanes_for(capacity, origins)`:
//!   one lane per origin, up to `MAX_LANES`, each at least `MIN_LANE` bytes). Producers of
//!   different lanes share no cache line: with one shared ring, every append's claim and count
//!   moved the ring's control lines between the producers' cores (a rank appending to its own
//!   log and a peer appending to it took turns on them), which made an active put slower than
//!   an active message, whose queues are one per pair of ranks. Entries of one origin stay in
//!   order (one lane); entries of different origins never had an order to keep. An active
//!   flush waits for the origin's lane only (`reserved(lane)` / `tail(lane)`).
//! - The region is mapped by several processes, possibly at different addresses, so it holds
//!   offsets and absolute positions only, never pointers; `LogRing` is a per-process view.
//! - Producers take no lock: one CAS on the lane's `reserve` claims a byte range, the producer
//!   fills it at leisure and publishes it with one Release store of its first word, so several
//!   producers of one lane (an origin's threads) copy in parallel. (A producer that dies
//!   between its CAS and its publish leaves a hole that blocks its lane, as a dead peer blocks
//!   any protocol with it; a respawned origin covers its predecessor's holes with padding
//!   before it appends, `cover_holes_of`. In a lane of its own every hole is its
//!   predecessor's. In a lane it shares with other origins, their claims in flight look the
//!   same, so those logs count each origin's appends started and finished: a hole still
//!   there once every other origin of the lane has been seen with none in flight is the dead
//!   one's. Logs whose lanes are not shared count nothing: two more locked instructions per
//!   append would cost what the lanes were made to save.)
//! - An entry is never split across the end of its lane, so the consumer hands out one
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
//! - The consumer frees each lane in order, so a claimed but unpublished entry (a hole) hides
//!   the entries of its lane after it until it is published; nothing is exposed half-written.
//!   The consumer visits the lanes in turn, a bounded batch from each, so a busy origin cannot
//!   starve the others.
//! - One consumer at a time, enforced: `peek` and `drain` take a guard word in the region (so
//!   it covers every view in every process), so a second poller gets nothing instead of racing
//!   the first one's reads and tail updates.
//! - Positions are absolute u64 byte counts and never wrap (2^64 bytes is decades of logging at
//!   10 GB/s); `reserve - tail` is the space a lane has in use, including padding.

mod lane;

use activerma_core::{Error, Result};
use lane::{entry_size, Body, CacheLine, Lane, LaneHeader, CONT_DATA, FIRST_DATA, LINE};
#[cfg(test)]
use lane::{COMMITTED, LINES_SHIFT};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes of an entry before its data: the first line's stamp plus the body.
pub const ENTRY_HEADER: usize = 8 + std::mem::size_of::<Body>();

/// Smallest lane: at least a few entries of the smallest chunk must fit.
pub const MIN_CAPACITY: usize = 256;

/// Largest data area: keeps `data_len` within a u32, sizes far from overflow and an entry's
/// line count within its stamp.
pub const MAX_CAPACITY: usize = 1 << 32;

/// Most lanes a log has: origins beyond it share lanes (`origin mod lanes`).
pub const MAX_LANES: usize = 16;

/// Smallest lane `lanes_for` makes: 64 entries of one line. Below it a busy origin would wait
/// for the consumer more often than contention on a shared lane costs.
pub const MIN_LANE: usize = 4096;

/// Entries the consumer takes from one lane before it looks at the next.
const LANE_BATCH: u64 = 64;

/// Entries whose accessed memory the consumer loads ahead of the handler (`drain`).
const PREFETCH_AHEAD: usize = 4;

/// "acclog05": tells a formatted log from zeroed or foreign memory (03: lanes; 04: no count of
/// appended entries; 05: the origins, and their counts when lanes are shared).
const MAGIC: u64 = u64::from_be_bytes(*b"acclog05");

/// How long a respawned origin waits for the other producers of a shared lane to be seen
/// with no append in flight (an append is a few stores: only a producer descheduled mid-way
/// takes long, or one that died too).
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

const _: () = assert!(ENTRY_HEADER.is_multiple_of(8) && ENTRY_HEADER < LINE);
const _: () = assert!(MIN_CAPACITY.is_multiple_of(LINE));
const _: () = assert!(std::mem::size_of::<LogHeader>().is_multiple_of(64));
const _: () = assert!(std::mem::size_of::<LaneHeader>().is_multiple_of(64));

/// How many lanes a log of `capacity` bytes gets when `origins` ranks append to it: one per
/// origin (rounded up to a power of two), at most `MAX_LANES`, and fewer if a lane would fall
/// below `MIN_LANE` bytes (one lane for a log smaller than two of them).
pub fn lanes_for(capacity: usize, origins: usize) -> usize {
    let mut lanes = origins.clamp(1, MAX_LANES).next_power_of_two();
    while lanes > 1 && capacity / lanes < MIN_LANE {
        lanes /= 2;
    }
    lanes
}

/// The smallest capacity (a power of two) of a log that `origins` ranks append to whose lanes
/// hold, with nobody draining them, `accesses` accesses of up to `len` bytes of data from every
/// origin (each as the entries of `max_chunk` bytes it is cut into, and a wrap's padding).
/// None past `MAX_CAPACITY`. For a log kept as a store (`Notify::Hold`) between two drains.
pub fn capacity_to_hold(origins: usize, accesses: usize, len: usize) -> Option<usize> {
    let mut capacity = MIN_LANE.max(MIN_CAPACITY);
    while capacity <= MAX_CAPACITY {
        let lanes = lanes_for(capacity, origins);
        let chunk = chunk_of(capacity, lanes);
        let per_access =
            (len / chunk) as u64 * entry_size(chunk) + if !len.is_multiple_of(chunk) || len == 0 { entry_size(len % chunk) } else { 0 };
        let need = origins.div_ceil(lanes) as u64 * accesses as u64 * per_access + entry_size(len.min(chunk));
        if need <= (capacity / lanes) as u64 {
            return Some(capacity);
        }
        capacity *= 2;
    }
    None
}

/// `LogRing::max_chunk` of a log of `capacity` bytes in `lanes` lanes.
fn chunk_of(capacity: usize, lanes: usize) -> usize {
    let lines = (capacity / lanes / 4 / LINE).max(1);
    FIRST_DATA + (lines - 1) * CONT_DATA
}

/// Offset of the origins' counts in a log of `lanes` lanes.
fn counts_off(lanes: usize) -> usize {
    std::mem::size_of::<LogHeader>() + lanes * std::mem::size_of::<LaneHeader>()
}

/// Origins whose appends a log of `lanes` lanes for `origins` origins counts: all of them if
/// some share a lane, none otherwise.
fn counted(lanes: usize, origins: usize) -> usize {
    if origins > lanes {
        origins
    } else {
        0
    }
}

/// Offset of the data area in a log of `lanes` lanes counting `counted` origins.
fn data_off(lanes: usize, counted: usize) -> usize {
    counts_off(lanes) + counted * std::mem::size_of::<OriginCounts>()
}

/// Region bytes needed for a log whose data area holds `capacity` bytes (a power of two) in
/// `lanes` lanes (a power of two; each lane at least `MIN_CAPACITY` bytes) that `origins`
/// ranks append to.
pub fn ring_bytes(capacity: usize, lanes: usize, origins: usize) -> usize {
    data_off(lanes, counted(lanes, origins)) + capacity
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

#[repr(C)]
struct Ident {
    magic: AtomicU64,
    capacity: AtomicU64,
    lanes: AtomicU64,
    /// Origins whose appends are counted (0: every origin has a lane of its own).
    counted: AtomicU64,
}

/// One origin's appends to a log whose lanes are shared: `started` is raised before the
/// claim, `finished` after the publish (or the failed claim). Equal: none in flight.
#[repr(C, align(64))]
struct OriginCounts {
    started: AtomicU64,
    finished: AtomicU64,
}

#[repr(C)]
struct ConsumerSide {
    /// 1 while a consumer reads (an `Entry` from `peek` is out, or a `drain` runs), in
    /// whichever view or process it is.
    busy: AtomicU32,
    /// The lane the next drain starts with (fairness across calls).
    next_lane: AtomicU32,
}

/// The log's own control block, before its lanes' blocks.
#[repr(C)]
struct LogHeader {
    ident: CacheLine<Ident>,
    consumer: CacheLine<ConsumerSide>,
}

/// A view of an access log in this process. Cheap to copy; every view of the same region, in
/// any process, sees the same log.
#[derive(Clone, Copy, Debug)]
pub struct LogRing {
    base: *mut u8,
    capacity: usize,
    lanes: usize,
    /// Origins whose appends are counted (0: none, every origin has a lane of its own).
    counted: usize,
}

// SAFETY: the view is a pointer to a region whose shared fields are atomics and whose entries
// are handed between threads by Release/Acquire on their first word; `init`/`attach` make the
// caller promise the region outlives every view. Nothing in the view is tied to a thread.
unsafe impl Send for LogRing {}
// SAFETY: as above: all methods take &self and synchronise through the region's atomics.
unsafe impl Sync for LogRing {}

impl LogRing {
    /// Formats a region of `ring_bytes(capacity, lanes, origins)` bytes as an empty log that
    /// ranks `0..origins` append to (zeroing it first, so recycled memory is fine too) and
    /// returns a view of it.
    ///
    /// Panics if `capacity` is not a power of two in `MIN_CAPACITY..=MAX_CAPACITY`, `lanes` is
    /// not a power of two up to `MAX_LANES` leaving each lane `MIN_CAPACITY` bytes, or `base`
    /// is not 64-byte aligned.
    ///
    /// # Safety
    /// `base` points to at least `ring_bytes(capacity, lanes, origins)` writable bytes that
    /// stay mapped as long as any view of them exists, and no other view uses the region while
    /// it is being formatted.
    pub unsafe fn init(base: *mut u8, capacity: usize, lanes: usize, origins: usize) -> LogRing {
        assert!(
            capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity),
            "log ring capacity {capacity} must be a power of two between {MIN_CAPACITY} and {MAX_CAPACITY}"
        );
        assert!(
            lanes.is_power_of_two() && lanes <= MAX_LANES && capacity / lanes >= MIN_CAPACITY,
            "a log of {capacity} bytes cannot have {lanes} lanes (a power of two up to {MAX_LANES}, each of at least {MIN_CAPACITY} bytes)"
        );
        assert!((base as usize).is_multiple_of(64), "log ring region {base:p} must be 64-byte aligned");
        // SAFETY: the caller gives us the whole region, unused by anyone else for now.
        unsafe { ptr::write_bytes(base, 0, ring_bytes(capacity, lanes, origins)) };
        let ring = LogRing { base, capacity, lanes, counted: counted(lanes, origins) };
        let ident = &ring.header().ident.0;
        ident.capacity.store(capacity as u64, Ordering::Relaxed);
        ident.lanes.store(lanes as u64, Ordering::Relaxed);
        ident.counted.store(ring.counted as u64, Ordering::Relaxed);
        // Release: a process that sees the magic sees a formatted, zeroed region.
        ident.magic.store(MAGIC, Ordering::Release);
        ring
    }

    /// A view of a log that `init` formatted, maybe in another process and at another address.
    /// Fails with `InvalidArgument` if the region does not start with a formatted log.
    ///
    /// # Safety
    /// `base` points to a mapping of the whole region, `ring_bytes(capacity, lanes, origins)`
    /// bytes for what `init` was given (or at least its first 64 bytes if it may be unformatted), that
    /// stays mapped as long as the view and its entries exist.
    pub unsafe fn attach(base: *mut u8) -> Result<LogRing> {
        if !(base as usize).is_multiple_of(64) {
            return Err(Error::InvalidArgument(format!("log ring region {base:p} is not 64-byte aligned")));
        }
        // SAFETY: the caller promises at least the first line is mapped; it holds atomics only.
        let ident = unsafe { &(*(base as *const LogHeader)).ident.0 };
        let magic = ident.magic.load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(Error::InvalidArgument(format!(
                "no access log at {base:p} (magic {magic:#x}, expected {MAGIC:#x}): the region was not formatted by LogRing::init"
            )));
        }
        let capacity = ident.capacity.load(Ordering::Relaxed);
        let lanes = ident.lanes.load(Ordering::Relaxed);
        let counted = ident.counted.load(Ordering::Relaxed);
        if !capacity.is_power_of_two()
            || !(MIN_CAPACITY as u64..=MAX_CAPACITY as u64).contains(&capacity)
            || !lanes.is_power_of_two()
            || lanes > MAX_LANES as u64
            || capacity / lanes < MIN_CAPACITY as u64
            || (counted != 0 && counted <= lanes)
            || counted > u32::MAX as u64
        {
            return Err(Error::InvalidArgument(format!(
                "access log at {base:p} has capacity {capacity} in {lanes} lanes counting {counted} origins, not a power of two in {MIN_CAPACITY}..={MAX_CAPACITY} in up to {MAX_LANES}, counting none or more origins than lanes (corrupted)"
            )));
        }
        Ok(LogRing { base, capacity: capacity as usize, lanes: lanes as usize, counted: counted as usize })
    }

    /// Bytes in the data area (all lanes).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lanes of the log.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// A respawned `origin`, before its first append here: covers what its dead predecessor
    /// claimed and never published (see `Lane::cover_holes`). In a lane of its own every hole
    /// is its predecessor's. In a lane shared with other origins, their claims in flight look
    /// the same: it first waits until each of them has been seen with no append in flight
    /// (its counts equal) after the lane's `reserve` was read, so that every claim below that
    /// `reserve` still unpublished is the dead one's. `alive(o)`: whether origin `o` can still
    /// finish an append (a dead one's counts never settle); a dead one, or one that stays busy
    /// past `QUIET_WAIT`, fails the call with nothing covered. Returns the holes covered.
    pub fn cover_holes_of(&self, origin: u32, alive: &dyn Fn(u32) -> bool) -> Result<usize> {
        let lane_index = self.lane_of(origin);
        let lane = self.lane(lane_index);
        let shared = (0..self.counted as u32).filter(|&o| o != origin && self.lane_of(o) == lane_index);
        // Acquire: pairs with the claims' Release, so the counts a claimer raised before its
        // claim below `until` are visible here.
        let until = lane.header().reserve.0.load(Ordering::Acquire);
        std::sync::atomic::fence(Ordering::SeqCst);
        let waiting_since = std::time::Instant::now();
        for o in shared {
            let counts = self.counts(o);
            loop {
                // finished, then started: equal means none in flight at the first load.
                let finished = counts.finished.load(Ordering::SeqCst);
                if counts.started.load(Ordering::SeqCst) == finished {
                    break;
                }
                if !alive(o) || waiting_since.elapsed() > QUIET_WAIT {
                    return Err(Error::InvalidArgument(format!(
                        "covering the dead origin {origin}'s unfinished entries in an access log: origin {o}, which shares its lane, {} with an append in flight",
                        if alive(o) { "stays busy" } else { "died" }
                    )));
                }
                std::thread::yield_now();
            }
        }
        let covered = lane.cover_holes(until);
        if (origin as usize) < self.counted {
            // The predecessor's append in flight is over: the replacement starts even.
            let counts = self.counts(origin);
            counts.finished.store(counts.started.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        Ok(covered)
    }

    /// `origin`'s counts (only in a log that counts, for an origin below `counted`).
    fn counts(&self, origin: u32) -> &OriginCounts {
        debug_assert!((origin as usize) < self.counted);
        // SAFETY: the counts lie after the lanes' blocks, one per counted origin, and hold
        // atomics only.
        unsafe { &*(self.base.add(counts_off(self.lanes)) as *const OriginCounts).add(origin as usize) }
    }

    /// The lane `origin`'s entries go to.
    #[inline]
    pub fn lane_of(&self, origin: u32) -> usize {
        origin as usize & (self.lanes - 1)
    }

    /// This view's address and length of the entries' bytes of `origin`'s lane.
    pub fn lane_data_of(&self, origin: u32) -> (*mut u8, usize) {
        let lane = self.lane(self.lane_of(origin));
        (lane.data, lane.capacity)
    }

    fn lane(&self, i: usize) -> Lane {
        debug_assert!(i < self.lanes);
        let lane_bytes = self.capacity / self.lanes;
        // SAFETY: i < lanes, whose blocks follow the log's header, and whose data follow them.
        unsafe {
            Lane {
                header: (self.base.add(std::mem::size_of::<LogHeader>()) as *const LaneHeader).add(i),
                data: self.base.add(data_off(self.lanes, self.counted) + i * lane_bytes),
                capacity: lane_bytes,
            }
        }
    }

    /// Largest data payload of one entry: a quarter of a lane less the header, so that an entry
    /// plus the padding it may need (less than one more entry) takes under half the lane and
    /// several producers can have entries in flight at once.
    pub fn max_chunk(&self) -> usize {
        chunk_of(self.capacity, self.lanes)
    }

    /// Appends one entry carrying `meta` and `data` (which may be empty: a metadata-only entry)
    /// to `meta.origin`'s lane. `Ok(false)` means the lane is full right now: the caller makes
    /// progress and retries, since a log never drops an entry. Fails with `InvalidArgument` if
    /// `data` exceeds `max_chunk()`.
    pub fn try_append(&self, meta: &EntryMeta, data: &[u8]) -> Result<bool> {
        self.try_append_after(meta, data, &mut || {})
    }

    /// `try_append`, running `before_publish` once the entry's place is claimed and before it
    /// is published (not at all if the lane is full). An origin stores its data there: the
    /// claim's locked instruction then does not wait for that store's cache miss to drain from
    /// the store buffer, and the handler still never sees the entry before the data.
    pub fn try_append_after(&self, meta: &EntryMeta, data: &[u8], before_publish: &mut dyn FnMut()) -> Result<bool> {
        if data.len() > self.max_chunk() {
            return Err(Error::InvalidArgument(format!(
                "access log entry of {} data bytes exceeds the largest chunk of this log ({} bytes); append_access splits accesses",
                data.len(),
                self.max_chunk()
            )));
        }
        let lane = self.lane(self.lane_of(meta.origin));
        // Counted only where lanes are shared (see `cover_holes_of`); SeqCst: seen before the
        // claim by whoever sees the claim.
        let counts = ((meta.origin as usize) < self.counted).then(|| self.counts(meta.origin));
        if let Some(c) = counts {
            c.started.fetch_add(1, Ordering::SeqCst);
        }
        let claimed = match lane.claim(entry_size(data.len())) {
            Some(claim) => {
                before_publish();
                lane.publish(claim, meta, data);
                true
            }
            None => false,
        };
        if let Some(c) = counts {
            c.finished.fetch_add(1, Ordering::Release);
        }
        Ok(claimed)
    }

    /// Appends a whole access as entries of at most `max_chunk()` data bytes, in order of offset,
    /// the last one flagged `last`. With `with_data` false, `data` is ignored and one
    /// metadata-only entry describes the whole access of `total_len` bytes; with `with_data` true,
    /// `total_len` must equal `data.len()`. An empty access still writes one entry.
    ///
    /// Whenever the origin's lane is full `wait` is called; it should make progress or back
    /// off, and returns an error to give up, which is returned here. Entries appended before
    /// giving up stay in the log: the consumer then sees an access without its `last` chunk.
    ///
    /// `before_first_publish` runs once, between claiming the access's first entry and
    /// publishing it (see `try_append_after`; `&mut || {}` for nothing).
    ///
    /// Returns the number of entries written.
    #[allow(clippy::too_many_arguments)] // one argument per field of the access, as callers hold them, and the hook
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
        before_first_publish: &mut dyn FnMut(),
    ) -> Result<usize> {
        let mut first = Some(before_first_publish);
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
            loop {
                let mut hook = || {
                    if let Some(f) = first.take() {
                        f();
                    }
                };
                if self.try_append_after(&meta, &payload[offset..end], &mut hook)? {
                    break;
                }
                wait()?;
            }
            written += 1;
            if meta.last {
                return Ok(written);
            }
            offset = end;
        }
    }

    /// Whether an access of `total_len` bytes (with its data or not) from `origin` would be
    /// appended now without waiting for room: its entries, plus one entry's worth of padding at
    /// the wrap, fit in its lane's free bytes. Approximate under concurrency (another producer
    /// of the lane may take the room first; the append then waits as usual). An access too
    /// large to fit in half the lane is always "yes": it is streamed through the lane and must
    /// wait in pieces anyway.
    pub fn has_room_for(&self, origin: u32, total_len: usize, with_data: bool) -> bool {
        let data = if with_data { total_len } else { 0 };
        let chunk = self.max_chunk().max(1);
        let (full, rest) = (data / chunk, data % chunk);
        let mut need = full as u64 * entry_size(chunk) + if rest > 0 || full == 0 { entry_size(rest) } else { 0 };
        need += entry_size(data.min(chunk)); // padding at the wrap
        let lane = self.lane(self.lane_of(origin));
        need as usize > lane.capacity / 2 || lane.free_bytes() >= need as usize
    }

    /// Bytes free right now in `origin`'s lane (padding counts as used). Approximate under
    /// concurrency: for thresholds, not for deciding whether an append will succeed.
    pub fn free_bytes(&self, origin: u32) -> usize {
        self.lane(self.lane_of(origin)).free_bytes()
    }

    /// Address in this view of the last byte claimed in `lane` (for the IOTLB model: the page
    /// an entry was written to, near enough).
    pub fn last_claimed_address(&self, lane: usize) -> usize {
        let l = self.lane(lane);
        l.slot(l.header().reserve.0.load(Ordering::Relaxed).saturating_sub(1)) as usize
    }

    /// Absolute position producers have claimed `lane` up to: every entry appended to it before
    /// this call lies below it. With `tail`, the test of an active flush: once `tail(lane) >=`
    /// a value read here, everything appended to the lane before the read has been consumed.
    pub fn reserved(&self, lane: usize) -> u64 {
        self.lane(lane).header().reserve.0.load(Ordering::Acquire)
    }

    /// Absolute position the consumer has freed `lane` up to (entries are freed after their
    /// handler ran, so everything below it has been processed).
    pub fn tail(&self, lane: usize) -> u64 {
        self.lane(lane).header().tail.0.load(Ordering::Acquire)
    }

    /// Entries consumed so far (all lanes).
    pub fn consumed(&self) -> u64 {
        (0..self.lanes).map(|i| self.lane(i).consumed()).sum()
    }

    /// Entries published and not yet consumed (all lanes). An entry a producer has claimed but
    /// not finished writing is not counted yet.
    pub fn pending(&self) -> u64 {
        self.pending_up_to(u64::MAX)
    }

    /// `pending()`, counted up to `limit` only: what a notification threshold needs, at the
    /// cost of reading at most `limit` entries' first lines.
    pub fn pending_up_to(&self, limit: u64) -> u64 {
        let mut n = 0;
        for i in 0..self.lanes {
            n += self.lane(i).published(limit - n);
            if n == limit {
                break;
            }
        }
        n
    }

    /// Whether the entry (or padding) at some lane's tail is published: something to drain. A
    /// hint for pollers (no guard taken); `drain` / `peek` decide.
    #[inline]
    pub fn has_entry(&self) -> bool {
        (0..self.lanes).any(|i| self.lane(i).has_entry())
    }

    fn guard(&self) -> &AtomicU32 {
        &self.header().consumer.0.busy
    }

    /// Consumer side: the next entry of the first lane (from lane 0) that has one, or `None` if
    /// the log is empty, if every lane's next entry is still being written (later complete
    /// entries of a lane wait behind it), or if another consumer holds an entry right now.
    ///
    /// One consumer at a time: the returned entry holds the log's consumer guard (in the region,
    /// so it covers every view in every process) until it is consumed or dropped. Dropping an
    /// entry without consuming it leaves it at the head of its lane for the next peek.
    pub fn peek(&self) -> Option<Entry<'_>> {
        // Acquire: see the tails the previous guard holder advanced.
        if self.guard().compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return None;
        }
        let e = (0..self.lanes).find_map(|i| self.lane(i).head().map(|h| Entry::new(h, i, self, true)));
        if e.is_none() {
            self.guard().store(0, Ordering::Release);
        }
        e
    }

    /// Consumer side, in bulk: runs `f` on every entry until every lane is empty or waits for
    /// an entry still being written, and frees each after `f` returns; returns how many it ran.
    /// Lanes take turns, `LANE_BATCH` entries at a time, starting where the last drain stopped.
    /// Takes the consumer guard once for the whole batch and counts each lane's share in one
    /// add, so a busy log costs no locked instruction per entry (each would wait for the stores
    /// before it). Returns 0 at once if another consumer holds the guard.
    pub fn drain(&self, mut f: impl FnMut(&Entry<'_>)) -> usize {
        if self.guard().compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return 0;
        }
        /// Gives the guard back and counts the lane's batch, also when `f` unwinds.
        struct Batch<'r> {
            ring: &'r LogRing,
            lane: usize,
            done: u64,
        }
        impl Batch<'_> {
            fn count(&mut self) {
                if self.done > 0 {
                    self.ring.lane(self.lane).count_consumed(self.done);
                    self.done = 0;
                }
            }
        }
        impl Drop for Batch<'_> {
            fn drop(&mut self) {
                self.count();
                let consumer = &self.ring.header().consumer.0;
                consumer.next_lane.store(((self.lane + 1) & (self.ring.lanes - 1)) as u32, Ordering::Relaxed);
                consumer.busy.store(0, Ordering::Release);
            }
        }
        let first = self.header().consumer.0.next_lane.load(Ordering::Relaxed) as usize & (self.lanes - 1);
        let mut batch = Batch { ring: self, lane: first, done: 0 };
        let mut total = 0usize;
        let mut idle_lanes = 0;
        // Round robin until a whole round of lanes had nothing.
        while idle_lanes < self.lanes {
            let lane = self.lane(batch.lane);
            let mut taken = 0;
            // Entries past the tail whose accessed memory is being loaded (`lead` of them, up
            // to `ahead`): a handler almost always touches the address its access went to (a
            // DHT's insert: the cell), so while it runs, the next entries' lines are on their
            // way (a dependent cache miss per entry otherwise, which a message carrying no
            // address cannot avoid). Topped up after each handler, not before: looking ahead
            // reads the line after the entry, which its producer may hold (it prefetches the
            // line its next entry goes to), and a lone entry's handler — an acknowledgement
            // the producer waits for — must not wait for that line to move.
            let (mut ahead, mut lead) = (0u64, 0usize);
            while taken < LANE_BATCH {
                let Some(h) = lane.head() else { break };
                let e = Entry::new(h, batch.lane, self, false);
                f(&e);
                lane.free(e.pos, e.size);
                batch.done += 1;
                taken += 1;
                if lead == 0 {
                    ahead = lane.tail();
                } else {
                    lead -= 1; // the entry just handled was one of them
                }
                while lead < PREFETCH_AHEAD {
                    let Some(next) = lane.prefetch_accessed(ahead) else { break };
                    (ahead, lead) = (next, lead + 1);
                }
            }
            total += taken as usize;
            idle_lanes = if taken == 0 { idle_lanes + 1 } else { 0 };
            batch.count();
            batch.lane = (batch.lane + 1) & (self.lanes - 1);
        }
        // The next drain starts with the lane after the last one looked at.
        batch.lane = (batch.lane + self.lanes - 1) & (self.lanes - 1);
        total
    }

    /// Frees the entry `peek` returned: advances its lane's tail with Release so producers may
    /// reuse its lines (their stamps keep the next lap from taking them for entries).
    ///
    /// Panics if the entry came from another view (views of one region in one process are not
    /// interchangeable here, to keep the check a pointer comparison).
    pub fn consume(&self, e: Entry<'_>) {
        assert!(ptr::eq(e.ring.base, self.base), "access log entry consumed through another view than the one it came from");
        let lane = self.lane(e.lane);
        lane.free(e.pos, e.size);
        lane.count_consumed(1);
        // Dropping `e` releases the consumer guard.
    }

    fn header(&self) -> &LogHeader {
        // SAFETY: init/attach checked the region starts with a control block, which holds
        // atomics only, so shared references to it are fine while other processes write.
        unsafe { &*(self.base as *const LogHeader) }
    }

    /// The lane a test pokes at directly (holes, laps).
    #[cfg(test)]
    fn lane_for_test(&self, i: usize) -> Lane {
        self.lane(i)
    }
}

/// An entry's data: in place in its first line, or gathered from its lines.
enum EntryData {
    InPlace(*const u8, usize),
    Gathered(Vec<u8>),
}

/// One entry of the log, handed out by `LogRing::peek` (holding the consumer guard until it is
/// consumed or dropped) or to `drain`'s function.
pub struct Entry<'a> {
    pub meta: EntryMeta,
    data: EntryData,
    lane: usize,
    pos: u64,
    size: u64,
    ring: &'a LogRing,
    /// Handed out by `peek`: gives the consumer guard back when dropped (`drain` holds it for
    /// the whole batch instead).
    owns_guard: bool,
}

impl<'a> Entry<'a> {
    fn new(h: lane::Head, lane: usize, ring: &'a LogRing, owns_guard: bool) -> Entry<'a> {
        Entry { meta: h.meta, data: h.data, lane, pos: h.pos, size: h.size, ring, owns_guard }
    }
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
            self.ring.guard().store(0, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("meta", &self.meta)
            .field("data_len", &self.data().len())
            .field("lane", &self.lane)
            .field("pos", &self.pos)
            .finish()
    }
}

#[cfg(test)]
mod tests;
