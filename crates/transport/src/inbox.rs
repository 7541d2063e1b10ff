//! A rank's inbox: one bounded many-producer, single-consumer queue of active-message
//! fragments in shared memory, which every rank of the host sends into. The memory grows with
//! the ranks (one inbox each), not with their pairs: at 256 ranks per-pair rings took
//! 256² queues, inboxes take 256.
//!
//! For ticket t (slot t mod S): a producer claims t, if the ring has room (t - head < S, against
//! the consumer's head as this producer last read it, re-read only when that view says full),
//! by a CAS of the slot's claimer word to (t, itself), then moves the shared tail from t to
//! t + 1 (any producer that finds t claimed moves it too, so a claimer that dies right after
//! its claim holds nobody up); writes the fragment; publishes it by writing the slot's stamp =
//! t + 1 last (release). The consumer takes ticket `head` once its stamp is
//! head + 1, and moves `head` on (its own line). The consumer never writes a slot: a short
//! fragment costs one cache-line hand-off from producer to consumer, as the per-pair rings
//! did (a design where the consumer marks each slot free — Vyukov's bounded queue — took two
//! more line transfers per message and ran the active-message round trip ~20 % slower).
//!
//! ```text
//! producer:  t = tail; if t - seen_head >= S: seen_head = head; if still: full
//!            c = slot(t).claimer; if c names t: CAS tail t -> t+1 (help); retry
//!            CAS claimer c -> (t, me) (retry on failure); CAS tail t -> t+1
//!            fragment; stamp = t + 1
//! consumer:  s = slot(head); if s.stamp == head + 1: hand it over; head += 1
//! ```
//!
//! One sender's fragments keep their order (its claims are in order), which is all reassembly
//! needs (`am`'s send lock keeps a message's fragments from one thread). A producer that dies
//! between its claim and its publication (respawn jobs) leaves a hole; the claim itself names
//! the claimer, and the consumer skips the slot once that incarnation is known dead (`drain`'s
//! `dead`). (A first version claimed by the tail alone and wrote the claimer after: a death
//! between the two left a hole nobody could name.)

use crate::FragHeader;
use activerma_core::{settings, Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Consumer's head and producers' tail, each on its own pair of cache lines.
#[repr(C, align(128))]
pub struct InboxCtl {
    head: AtomicU64,
    _pad: [u8; 120],
    tail: AtomicU64,
    _pad2: [u8; 120],
}

/// Slot header; the payload follows.
#[repr(C)]
pub struct SlotHeader {
    /// Ticket + 1 once the fragment of that ticket is complete.
    stamp: AtomicU64,
    /// ((ticket + 1) << 32) | (incarnation << 16) | rank of the producer that claimed the
    /// ticket (zero: never claimed).
    claimer: AtomicU64,
    len: u32,
    src: u32,
    /// Respawn jobs: the incarnation of the destination the message is for (high 16 bits) and
    /// the sender's (low 16).
    tag: u32,
    _pad: u32,
    deliver_at: u64,
    am: [u64; 2],
}

pub const SLOT_HEADER: usize = std::mem::size_of::<SlotHeader>();

/// An inbox in memory this process maps (all producers and its consumer map the same bytes).
pub struct Inbox {
    ctl: *const InboxCtl,
    slots: *mut u8,
    nslots: usize,
    slot_size: usize,
}

// SAFETY: a view of shared memory whose every shared word is atomic; the payload bytes of a
// slot are written only by the producer that claimed it, read only after its publication.
unsafe impl Send for Inbox {}
unsafe impl Sync for Inbox {}

/// A fragment taken out of the inbox.
pub struct Fragment<'a> {
    pub src: u32,
    pub tag: u32,
    pub deliver_at: u64,
    pub am: FragHeader,
    pub payload: &'a [u8],
}

/// A rank's wake-up words, on their own line before its inbox: a progress thread that sleeps
/// sets `sleeping` and waits on `wake`; a sender that finds it set bumps `wake` and wakes it.
#[repr(C, align(128))]
pub struct WakeWords {
    pub wake: AtomicU32,
    pub sleeping: AtomicU32,
    /// 1 while the rank's progress engine runs on its own (`Conduit::announce_serving`).
    pub serving: AtomicU32,
}

/// Checks ACTIVERMA_AM_SLOTS / ACTIVERMA_AM_SLOT_SIZE for an inbox.
pub fn check_settings(slots: u64, slot_size: u64) -> Result<()> {
    if !slots.is_power_of_two() || !(4..=1 << 24).contains(&slots) {
        return Err(Error::BadSetting {
            name: settings::AM_SLOTS.into(),
            value: slots.to_string(),
            why: "must be a power of two, from 4 to 16M".into(),
        });
    }
    if (slot_size as usize) < SLOT_HEADER + 64 || !slot_size.is_multiple_of(64) || slot_size > 1 << 20 {
        return Err(Error::BadSetting {
            name: settings::AM_SLOT_SIZE.into(),
            value: slot_size.to_string(),
            why: format!("must be a multiple of 64, from {} to 1M", SLOT_HEADER + 64),
        });
    }
    Ok(())
}

impl Inbox {
    /// Bytes an inbox of `nslots` (a power of two) slots of `slot_size` bytes takes.
    pub fn bytes(nslots: usize, slot_size: usize) -> usize {
        std::mem::size_of::<InboxCtl>() + nslots * slot_size
    }

    /// The inbox at `base` (zeroed memory is an empty one).
    ///
    /// # Safety
    /// `base` points to `Inbox::bytes(nslots, slot_size)` bytes of memory, aligned to 128, that
    /// stay mapped while the inbox is used and are only ever used as this inbox.
    pub unsafe fn new(base: *mut u8, nslots: usize, slot_size: usize) -> Inbox {
        debug_assert!(nslots.is_power_of_two() && slot_size > SLOT_HEADER && slot_size.is_multiple_of(8));
        // SAFETY: the slots follow the control block.
        Inbox { ctl: base as *const InboxCtl, slots: unsafe { base.add(std::mem::size_of::<InboxCtl>()) }, nslots, slot_size }
    }

    #[inline]
    fn ctl(&self) -> &InboxCtl {
        // SAFETY: the control block lies at the start of the inbox's memory.
        unsafe { &*self.ctl }
    }

    #[inline]
    fn slot(&self, ticket: u64) -> *mut SlotHeader {
        // SAFETY: the index is reduced modulo the slot count.
        unsafe { self.slots.add((ticket as usize & (self.nslots - 1)) * self.slot_size) as *mut SlotHeader }
    }

    /// Payload bytes a slot carries.
    pub fn capacity(&self) -> usize {
        self.slot_size - SLOT_HEADER
    }

    /// Producer side: puts one fragment in if there is room (false: full, back-pressure).
    /// `who` is the sender's (incarnation << 16) | rank; `tag` as in `SlotHeader`; `seen_head`
    /// is this producer's last view of the consumer's head (its own word, one per inbox).
    #[inline]
    pub fn try_push(&self, who: u32, seen_head: &AtomicU64, am: FragHeader, payload: &[u8], deliver_at: u64, tag: u32) -> bool {
        debug_assert!(payload.len() <= self.capacity());
        let ctl = self.ctl();
        let size = self.nslots as u64;
        let mut t = ctl.tail.load(Ordering::Relaxed);
        // Full when t is S or more tickets past the head. The tail may also lag the head: a
        // producer that died between its claim and its move of the tail, with nobody claiming
        // after it, leaves the tail on its ticket, and the consumer steps past the hole. Such a
        // t is no more than a few tickets behind, and the claim below moves the tail on.
        let full = |t: u64, head: u64| (t.wrapping_sub(head) as i64) >= size as i64;
        loop {
            if full(t, seen_head.load(Ordering::Relaxed)) {
                seen_head.store(ctl.head.load(Ordering::Acquire), Ordering::Relaxed);
                if full(t, seen_head.load(Ordering::Relaxed)) {
                    return false;
                }
            }
            let claimer = &self.header(t).claimer;
            let c = claimer.load(Ordering::Relaxed);
            if names_ticket(c, t) {
                // Claimed: move the tail past it for whoever claimed it, and look again.
                let _ = ctl.tail.compare_exchange(t, t + 1, Ordering::Relaxed, Ordering::Relaxed);
                t = ctl.tail.load(Ordering::Relaxed);
                continue;
            }
            // Free for t: never claimed (first lap) or last claimed for t - S. Anything else
            // means our t is stale (the slot went round since): look again.
            let free = if t < size { c == 0 } else { names_ticket(c, t - size) };
            if free && claimer.compare_exchange(c, claim(t, who), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                break;
            }
            t = ctl.tail.load(Ordering::Relaxed);
        }
        let s = self.slot(t);
        // SAFETY: ticket t is ours until we stamp it; the consumer reads it only after that,
        // and the slot's previous fragment (ticket t - S) was taken (t - head < S).
        unsafe {
            (*s).len = payload.len() as u32;
            (*s).src = who & 0xffff;
            (*s).tag = tag;
            (*s).deliver_at = deliver_at;
            (*s).am = am;
            std::ptr::copy_nonoverlapping(payload.as_ptr(), (s as *mut u8).add(SLOT_HEADER), payload.len());
            (*s).stamp.store(t + 1, Ordering::Release);
        }
        // Move the tail only now (any producer that finds t claimed moves it too): a locked
        // instruction on another line between the claim and the stores would widen the window
        // in which the polling consumer takes the slot's line back before they land.
        let _ = ctl.tail.compare_exchange(t, t + 1, Ordering::Relaxed, Ordering::Relaxed);
        true
    }

    /// Consumer side: hands up to `budget` published fragments to `f`, in order. A ticket
    /// claimed by a producer that `dead(rank, incarnation)` says is gone, and never published,
    /// is skipped. Returns how many tickets were taken.
    pub fn drain(&self, budget: usize, dead: &dyn Fn(u32, u32) -> bool, f: &mut dyn FnMut(Fragment)) -> usize {
        let ctl = self.ctl();
        let mut head = ctl.head.load(Ordering::Relaxed);
        let mut n = 0;
        while n < budget {
            let s = self.slot(head);
            // SAFETY: inside the inbox; fields are read after the stamp's acquire.
            unsafe {
                if (*s).stamp.load(Ordering::Acquire) == head + 1 {
                    let payload = std::slice::from_raw_parts((s as *const u8).add(SLOT_HEADER), (*s).len as usize);
                    f(Fragment { src: (*s).src, tag: (*s).tag, deliver_at: (*s).deliver_at, am: (*s).am, payload });
                } else if !self.claimed_by_dead(s, head, dead) {
                    break; // empty, or a producer is still writing
                }
            }
            head += 1;
            ctl.head.store(head, Ordering::Release);
            n += 1;
        }
        n
    }

    /// Whether the claimer word of a claimed, unpublished slot names, for this ticket, a
    /// producer that is gone.
    ///
    /// # Safety
    /// `s` is a slot of this inbox.
    unsafe fn claimed_by_dead(&self, s: *mut SlotHeader, ticket: u64, dead: &dyn Fn(u32, u32) -> bool) -> bool {
        // SAFETY: the caller's promise; the word is atomic.
        let c = unsafe { (*s).claimer.load(Ordering::Acquire) };
        names_ticket(c, ticket) && dead((c & 0xffff) as u32, ((c >> 16) & 0xffff) as u32)
    }

    #[inline]
    fn header(&self, ticket: u64) -> &SlotHeader {
        // SAFETY: a slot of this inbox; its shared words are atomic.
        unsafe { &*self.slot(ticket) }
    }

    /// Whether the ticket at the head is neither published nor claimed: nothing for `drain`
    /// to do. Read without the consumer's lock by any thread of the consuming rank, so that an
    /// idle poll takes no locked instruction.
    #[inline]
    pub fn idle(&self) -> bool {
        let head = self.ctl().head.load(Ordering::Acquire);
        let s = self.header(head);
        s.stamp.load(Ordering::Acquire) != head + 1 && !names_ticket(s.claimer.load(Ordering::Relaxed), head)
    }

    /// Fragments published and not yet taken (approximate while producers run).
    pub fn pending(&self) -> u64 {
        let ctl = self.ctl();
        ctl.tail.load(Ordering::Relaxed).saturating_sub(ctl.head.load(Ordering::Relaxed))
    }
}

/// The consumer's side of an inbox beyond the shared memory: the fragments the modelled
/// network has not delivered yet. Used by whoever holds the rank's poll lock.
#[derive(Default)]
pub struct Receiver {
    not_yet_due: Mutex<NotYetDue>,
    holding: AtomicBool,
}

impl Receiver {
    /// Whether fragments the modelled network has not delivered yet are held.
    #[inline]
    pub fn holding(&self) -> bool {
        self.holding.load(Ordering::Relaxed)
    }

    /// Hands up to `budget` fragments to `deliver`: held ones that are now due first, then the
    /// inbox's, in order; a fragment not yet due (or behind one of its sender's that is not)
    /// is held outside the inbox, so other senders' fragments are not held up.
    pub fn poll(&self, inbox: &Inbox, budget: usize, dead: &dyn Fn(u32, u32) -> bool, deliver: &mut dyn FnMut(Fragment)) -> usize {
        let mut handled = 0;
        if self.holding.load(Ordering::Relaxed) {
            let mut held = self.not_yet_due.lock().unwrap();
            handled += held.deliver_due(activerma_core::clock::now_ns(), budget, deliver);
            self.holding.store(!held.is_empty(), Ordering::Relaxed);
        }
        handled += inbox.drain(budget - handled, dead, &mut |frag| {
            let early = frag.deliver_at != 0 && activerma_core::clock::now_ns() < frag.deliver_at;
            if early || self.holding.load(Ordering::Relaxed) {
                let mut held = self.not_yet_due.lock().unwrap();
                if early || held.holds(frag.src) {
                    held.hold(&frag);
                    self.holding.store(true, Ordering::Relaxed);
                    return;
                }
            }
            deliver(frag);
        });
        handled
    }
}

/// The claimer word of `ticket` claimed by `who`.
#[inline]
fn claim(ticket: u64, who: u32) -> u64 {
    ((ticket + 1) << 32) | who as u64
}

/// Whether claimer word `c` is a claim of `ticket` (tickets compared in their low 32 bits: a
/// slot is claimed again only S tickets later).
#[inline]
fn names_ticket(c: u64, ticket: u64) -> bool {
    c >> 32 == (ticket + 1) & 0xffff_ffff
}

/// Fragments taken out of an inbox before the modelled network delivers them: kept here, in
/// arrival order, so the inbox's slots are free meanwhile and a late fragment of one sender does
/// not hold up every other sender's. A sender's fragments still come out in its order.
#[derive(Default)]
pub struct NotYetDue {
    held: VecDeque<(u32, u32, u64, FragHeader, Vec<u8>)>,
}

impl NotYetDue {
    /// Whether a fragment from `src` is held (a later one from it must wait behind it).
    pub fn holds(&self, src: u32) -> bool {
        self.held.iter().any(|h| h.0 == src)
    }

    pub fn hold(&mut self, f: &Fragment) {
        self.hold_owned(f.src, f.tag, f.deliver_at, f.am, f.payload.to_vec());
    }

    /// `hold` of a fragment whose bytes the caller already owns (MPI's receive buffers).
    pub fn hold_owned(&mut self, src: u32, tag: u32, deliver_at: u64, am: FragHeader, payload: Vec<u8>) {
        self.held.push_back((src, tag, deliver_at, am, payload));
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Hands over, up to `budget`, the fragments due at `now` whose sender has nothing earlier
    /// still held; returns how many.
    pub fn deliver_due(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(Fragment)) -> usize {
        self.take_due(now, budget, &mut |src, tag, deliver_at, am, payload| f(Fragment { src, tag, deliver_at, am, payload: &payload }))
    }

    /// `deliver_due` handing over the held bytes themselves (src, tag, deliver_at, header,
    /// payload): for a caller that keeps them past the call (MPI's, which handles fragments
    /// after releasing its lock).
    pub fn take_due(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(u32, u32, u64, FragHeader, Vec<u8>)) -> usize {
        let mut blocked: Vec<u32> = Vec::new();
        let mut n = 0;
        let mut i = 0;
        while i < self.held.len() && n < budget {
            let (src, at) = (self.held[i].0, self.held[i].2);
            if at > now || blocked.contains(&src) {
                blocked.push(src);
                i += 1;
                continue;
            }
            let (src, tag, deliver_at, am, payload) = self.held.remove(i).expect("index in range");
            f(src, tag, deliver_at, am, payload);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Mem {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    }
    impl Mem {
        fn new(bytes: usize) -> Mem {
            let layout = std::alloc::Layout::from_size_align(bytes, 4096).unwrap();
            // SAFETY: a non-zero size; freed in drop.
            Mem { ptr: unsafe { std::alloc::alloc_zeroed(layout) }, layout }
        }
    }
    impl Drop for Mem {
        fn drop(&mut self) {
            // SAFETY: allocated in new with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) };
        }
    }
    unsafe impl Send for Mem {}
    unsafe impl Sync for Mem {}

    const NOBODY_DIED: &dyn Fn(u32, u32) -> bool = &|_, _| false;

    /// An inbox of 4 slots of 128 bytes in memory of the test's own (keep the Mem alive).
    fn small_inbox() -> (Mem, Inbox) {
        let (nslots, slot_size) = (4, 128);
        let mem = Mem::new(Inbox::bytes(nslots, slot_size));
        // SAFETY: the test's allocation, of the inbox's size, page-aligned.
        let inbox = unsafe { Inbox::new(mem.ptr, nslots, slot_size) };
        (mem, inbox)
    }

    #[test]
    fn fifo_with_backpressure_over_many_laps() {
        let (_mem, inbox) = small_inbox();
        let nslots = 4;
        let seen_head = AtomicU64::new(0);
        let mut seen = vec![];
        let mut next = 0u64;
        for _round in 0..10 {
            while inbox.try_push(3, &seen_head, [next, 0], &[next as u8; 10], 0, 0) {
                next += 1;
            }
            assert_eq!(inbox.pending(), nslots as u64, "a full inbox refuses");
            inbox.drain(3, NOBODY_DIED, &mut |f| seen.push((f.src, f.am[0], f.payload.to_vec())));
        }
        inbox.drain(100, NOBODY_DIED, &mut |f| seen.push((f.src, f.am[0], f.payload.to_vec())));
        assert_eq!(seen.len() as u64, next);
        for (i, (src, id, p)) in seen.iter().enumerate() {
            assert_eq!((*src, *id), (3, i as u64));
            assert_eq!(p, &vec![i as u8; 10]);
        }
    }

    #[test]
    fn idle_until_a_ticket_at_the_head_is_claimed_or_published() {
        let (_mem, inbox) = small_inbox();
        let seen_head = AtomicU64::new(0);
        assert!(inbox.idle(), "a new inbox is idle");
        assert!(inbox.try_push(1, &seen_head, [7, 0], &[1; 8], 0, 0));
        assert!(!inbox.idle(), "a published fragment is work");
        assert_eq!(inbox.drain(8, NOBODY_DIED, &mut |_| {}), 1);
        assert!(inbox.idle(), "drained: idle again");
        // A producer that claimed the head and died before publishing: not idle, so that a
        // poll goes on to skip the hole once the claimer is known dead.
        inbox.header(1).claimer.store(claim(1, 5), Ordering::Relaxed);
        assert!(!inbox.idle());
        assert_eq!(inbox.drain(8, NOBODY_DIED, &mut |_| {}), 0, "still being written");
        assert_eq!(inbox.drain(8, &|rank, _| rank == 5, &mut |_| {}), 1, "the dead claimer's hole is skipped");
        assert!(inbox.idle());
    }

    #[test]
    fn many_producers_each_in_order_nothing_lost() {
        let (nslots, slot_size, producers, each) = (64, 64, 4u32, 20_000u64);
        let mem = std::sync::Arc::new(Mem::new(Inbox::bytes(nslots, slot_size)));
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    // SAFETY: the test's allocation, of the inbox's size, page-aligned.
                    let inbox = unsafe { Inbox::new(mem.ptr, nslots, slot_size) };
                    let seen_head = AtomicU64::new(0);
                    for i in 0..each {
                        while !inbox.try_push(p, &seen_head, [i, p as u64], &i.to_le_bytes(), 0, 0) {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        // SAFETY: the test's allocation, of the inbox's size, page-aligned.
        let inbox = unsafe { Inbox::new(mem.ptr, nslots, slot_size) };
        let mut next = vec![0u64; producers as usize];
        let mut total = 0;
        while total < producers as u64 * each {
            total += inbox.drain(16, NOBODY_DIED, &mut |f| {
                let src = f.src as usize;
                assert_eq!(f.am[0], next[src], "producer {src}'s fragments in order");
                assert_eq!(f.payload, &next[src].to_le_bytes()[..]);
                next[src] += 1;
            }) as u64;
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(next.iter().all(|&n| n == each));
    }

    #[test]
    fn a_dead_claimers_hole_is_skipped() {
        let (nslots, slot_size) = (4, 128);
        let mem = Mem::new(Inbox::bytes(nslots, slot_size));
        // SAFETY: the test's allocation, of the inbox's size, page-aligned.
        let inbox = unsafe { Inbox::new(mem.ptr, nslots, slot_size) };
        let seen_head = AtomicU64::new(0);
        assert!(inbox.try_push(1, &seen_head, [10, 0], &[1], 0, 0));
        // Rank 2 (incarnation 0) claims ticket 1 and dies before publishing, even before moving
        // the tail: the next producer moves it.
        inbox.header(1).claimer.store(claim(1, 2), Ordering::Relaxed);
        assert!(inbox.try_push(1, &seen_head, [11, 0], &[2], 0, 0));
        let mut seen = vec![];
        inbox.drain(10, NOBODY_DIED, &mut |f| seen.push(f.am[0]));
        assert_eq!(seen, vec![10], "a live claimer is waited for");
        inbox.drain(10, &|rank, inc| rank == 2 && inc == 0, &mut |f| seen.push(f.am[0]));
        assert_eq!(seen, vec![10, 11], "the dead claimer's slot is skipped");
        for i in 0..8 {
            assert!(inbox.try_push(1, &seen_head, [i, 0], &[], 0, 0) || i >= nslots as u64, "the skipped slot is reused");
        }
    }

    #[test]
    fn a_dead_claim_at_the_tail_skipped_by_the_consumer_leaves_room() {
        // The hang a respawn test found: rank 1 died right after claiming the last ticket
        // (the tail still on it), the consumer stepped over the hole (head = tail + 1), and
        // the replacement's pushes read head - tail as a full ring forever.
        let (_mem, inbox) = small_inbox();
        let seen_head = AtomicU64::new(0);
        assert!(inbox.try_push(1, &seen_head, [10, 0], &[1], 0, 0));
        inbox.header(1).claimer.store(claim(1, 1), Ordering::Relaxed);
        let mut seen = vec![];
        inbox.drain(10, &|rank, inc| rank == 1 && inc == 0, &mut |f| seen.push(f.am[0]));
        assert_eq!(seen, vec![10]);
        assert_eq!((inbox.ctl().head.load(Ordering::Relaxed), inbox.ctl().tail.load(Ordering::Relaxed)), (2, 1));
        // The replacement's view of the head is the head itself (it read it).
        let (replacement, its_head) = (1 << 16 | 1, AtomicU64::new(2));
        for i in 0..4 {
            assert!(inbox.try_push(replacement, &its_head, [20 + i, 0], &[], 0, 0), "push {i} after the hole");
        }
        assert!(!inbox.try_push(replacement, &its_head, [30, 0], &[], 0, 0), "and the ring is full after S more");
        inbox.drain(10, NOBODY_DIED, &mut |f| seen.push(f.am[0]));
        assert_eq!(seen, vec![10, 20, 21, 22, 23], "everything after the hole, in order");
    }

    #[test]
    fn not_yet_due_keeps_each_senders_order() {
        let mut held = NotYetDue::default();
        let frag = |src, at, id| (src, at, id);
        for (src, at, id) in [frag(1, 50, 0), frag(2, 10, 1), frag(1, 5, 2), frag(2, 20, 3)] {
            held.hold(&Fragment { src, tag: 0, deliver_at: at, am: [id, 0], payload: &[] });
        }
        let mut out = vec![];
        held.deliver_due(30, 10, &mut |f| out.push(f.am[0]));
        assert_eq!(out, vec![1, 3], "rank 1's later fragment waits behind its first");
        held.deliver_due(60, 10, &mut |f| out.push(f.am[0]));
        assert_eq!(out, vec![1, 3, 0, 2]);
        assert!(held.is_empty());
    }

    #[test]
    fn not_yet_due_hands_back_owned_bytes_in_each_senders_order() {
        // The mpi conduit's use: its receive buffers held, then taken back, bytes and all.
        let mut held = NotYetDue::default();
        held.hold_owned(3, 0, 40, [7, 8], vec![1, 2, 3]);
        held.hold_owned(4, 0, 0, [9, 0], vec![4]);
        held.hold_owned(3, 0, 0, [10, 0], vec![5, 6]);
        let mut out = vec![];
        let mut take = |now| held.take_due(now, 10, &mut |src, _, at, am, payload| out.push((src, at, am, payload)));
        assert_eq!(take(20), 1, "rank 4's fragment goes on; rank 3's second waits behind its first");
        assert_eq!(take(40), 2);
        assert_eq!(out, vec![(4, 0, [9, 0], vec![4]), (3, 40, [7, 8], vec![1, 2, 3]), (3, 0, [10, 0], vec![5, 6])]);
    }
}
