use super::*;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A page-aligned zeroed region, freed on drop.
struct Region {
    mem: *mut u8,
    layout: Layout,
    /// Origins that append (as many as lanes unless a test shares lanes).
    origins: usize,
}

// SAFETY: a plain heap block; the tests share it between threads through LogRing views.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    fn new(capacity: usize) -> Region {
        Region::with_lanes(capacity, 1)
    }
    fn with_lanes(capacity: usize, lanes: usize) -> Region {
        Region::shared(capacity, lanes, lanes)
    }
    fn shared(capacity: usize, lanes: usize, origins: usize) -> Region {
        let layout = Layout::from_size_align(ring_bytes(capacity, lanes, origins), 4096).unwrap();
        // SAFETY: non-zero size.
        let mem = unsafe { alloc_zeroed(layout) };
        assert!(!mem.is_null());
        Region { mem, layout, origins }
    }
    fn ring(&self, capacity: usize) -> LogRing {
        self.ring_with_lanes(capacity, 1)
    }
    fn ring_with_lanes(&self, capacity: usize, lanes: usize) -> LogRing {
        // SAFETY: the region is ring_bytes(capacity, lanes, origins) bytes and outlives the
        // test's views.
        unsafe { LogRing::init(self.mem, capacity, lanes, self.origins) }
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
    assert_eq!((ring.consumed(), ring.pending()), (0, 4));
    // A peeked entry that is dropped stays at the head.
    assert_eq!(ring.peek().unwrap().meta.seq, 0);
    for seq in 0..4u64 {
        let (m, d) = pop(&ring).unwrap();
        assert_eq!(m, meta(seq, 10 * seq as usize));
        assert_eq!(d, payload(3, seq, 10 * seq as usize));
    }
    assert!(ring.peek().is_none());
    assert_eq!((ring.consumed(), ring.pending()), (4, 0));
    assert_eq!(ring.free_bytes(3), 1024);
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
    assert_eq!(ring.free_bytes(3), 64);
    for seq in 0..2u64 {
        assert_eq!(pop(&ring).unwrap().0.seq, seq);
    }
    assert!(ring.try_append(&meta(5, 100), &payload(3, 5, 100)).unwrap(), "fits after the wrap");
    assert_eq!(ring.free_bytes(3), 1024 - (3 * 192 + 64 + 192));
    for seq in 2..6u64 {
        let (m, d) = pop(&ring).unwrap();
        assert_eq!(m.seq, seq);
        assert_eq!(d, payload(3, seq, 100));
    }
    assert!(ring.peek().is_none());
    assert_eq!(ring.free_bytes(3), 1024);
}

#[test]
fn log_ring_bulk_entries_written_past_the_caches_read_back_whole() {
    // Entries whose further lines hold 4 KiB or more take the non-temporal path (lane.rs
    // STREAM_MIN); sizes on both sides of it, with and without a partial last line, over
    // several laps of the lane so that entries wrap with padding and overwrite older lines.
    let capacity = 256 << 10;
    let region = Region::new(capacity);
    let ring = region.ring(capacity);
    let max = ring.max_chunk();
    let sizes = [FIRST_DATA + 4095, FIRST_DATA + 4096, FIRST_DATA + 4097, FIRST_DATA + 56 * 80, 20_000, max, 100, max - 1];
    let mut seq = 0u64;
    let mut used = 0usize;
    while used < 4 * capacity {
        for &len in &sizes {
            assert!(ring.try_append(&meta(seq, len), &payload(3, seq, len)).unwrap(), "one entry at a time fits");
            let (m, d) = pop(&ring).unwrap();
            assert_eq!(m, meta(seq, len));
            assert!(d == payload(3, seq, len), "entry {seq} of {len} bytes read back different");
            used += entry_size(len) as usize;
            seq += 1;
        }
    }
    assert!(ring.peek().is_none());
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
    assert_eq!(ring.free_bytes(3), 0);
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
    assert_eq!(ring.pending(), 1);
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
                assert!(ring.free_bytes(3) < 2 * entry_size(len) as usize, "refused with room to spare");
            }
        } else {
            assert_eq!(pop(&ring), model.pop_front());
        }
        assert_eq!(ring.pending(), model.len() as u64);
        assert_eq!(ring.pending_up_to(2), model.len().min(2) as u64, "a capped count stops at its limit");
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
        .append_access(
            LogOp::Put,
            5,
            77,
            0x10_0000,
            &access,
            true,
            access.len() as u64,
            &mut || {
                while let Some(got) = pop(&ring) {
                    consumer_side.push(got);
                }
                Ok(())
            },
            &mut || {},
        )
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
    assert_eq!(ring.append_access(LogOp::Get, 5, 78, 0x20_0000, &[], false, 1 << 20, &mut || Ok(()), &mut || {}).unwrap(), 1);
    let (m, d) = pop(&ring).unwrap();
    assert_eq!((m.op, m.seq, m.addr, m.total_len, m.offset, m.last), (LogOp::Get, 78, 0x20_0000, 1 << 20, 0, true));
    assert!(d.is_empty());

    // An empty access with data is one empty, last entry.
    assert_eq!(ring.append_access(LogOp::Put, 5, 79, 0, &[], true, 0, &mut || Ok(()), &mut || {}).unwrap(), 1);
    assert!(pop(&ring).unwrap().0.last);

    // Giving up in `wait` propagates its error; the chunks written so far stay.
    let gave_up = ring.append_access(
        LogOp::Put,
        5,
        80,
        0,
        &access,
        true,
        access.len() as u64,
        &mut || Err(Error::Timeout { what: "room in the access log".into(), secs: 0.0 }),
        &mut || {},
    );
    assert!(matches!(gave_up, Err(Error::Timeout { .. })));
    assert!(ring.pending() > 0);
    let mut offset = 0;
    while let Some((m, d)) = pop(&ring) {
        assert!(!m.last && m.offset == offset);
        offset += d.len() as u64;
    }

    // Mismatched length with data is refused.
    assert!(matches!(
        ring.append_access(LogOp::Put, 5, 81, 0, &access, true, 1, &mut || Ok(()), &mut || {}),
        Err(Error::InvalidArgument(_))
    ));
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
        while !ring.reserved(0).is_multiple_of(1024) {
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
    let slow = ring.lane_for_test(0).claim(entry_size(16)).unwrap();
    assert!(ring.try_append(&meta(2, 8), &[3; 8]).unwrap());
    assert_eq!(pop(&ring).unwrap().0.seq, 0);
    assert!(ring.peek().is_none(), "the hole hides the complete entry after it");
    ring.lane_for_test(0).publish(slow, &meta(1, 16), &[2; 16]);
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
    let slow = ring.lane_for_test(0).claim(entry_size(144)).unwrap(); // 512..768
    assert_eq!((slow.start, slow.padding), (512, 0));
    assert!(ring.try_append(&meta(4, 0), &[]).unwrap()); // 768..832
                                                         // 832 + 256 passes the end: 192 bytes of padding, then the entry at 1024.
    let slow_padded = ring.lane_for_test(0).claim(entry_size(144)).unwrap();
    assert_eq!((slow_padded.start, slow_padded.padding), (832, 192));
    assert!(ring.try_append(&meta(6, 144), &payload(3, 6, 144)).unwrap()); // 1280..1536
    assert!(ring.peek().is_none(), "first hole");
    ring.lane_for_test(0).publish(slow, &meta(3, 144), &payload(3, 3, 144));
    assert_eq!(pop(&ring).unwrap(), (meta(3, 144), payload(3, 3, 144)));
    assert_eq!(pop(&ring).unwrap().0, meta(4, 0));
    assert!(ring.peek().is_none(), "the padding of a claimed, unpublished entry is a hole too");
    ring.lane_for_test(0).publish(slow_padded, &meta(5, 144), &payload(3, 5, 144));
    assert_eq!(pop(&ring).unwrap(), (meta(5, 144), payload(3, 5, 144)));
    assert_eq!(pop(&ring).unwrap(), (meta(6, 144), payload(3, 6, 144)));
    assert!(ring.peek().is_none());
    assert_eq!(ring.free_bytes(3), 1024);
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
    assert_eq!((ring.consumed(), ring.pending()), (9, 0));
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
    stress(1024, 1);
}

/// Six producers over four lanes (origins 0 and 4, 1 and 5 share one), each lane as small as
/// the one-lane log above.
#[test]
fn log_ring_stress_many_producers_in_lanes() {
    stress(4096, 4);
}

fn stress(capacity: usize, lanes: usize) {
    const PRODUCERS: u32 = 6;
    const ACCESSES: u64 = 12_500; // about 100k entries with the splits
    fn access_len(origin: u32, seq: u64) -> (usize, bool) {
        let r = mix(((origin as u64) << 32) | seq);
        ((r % 300) as usize, !(r >> 32).is_multiple_of(8))
    }
    fn access_addr(origin: u32, seq: u64) -> u64 {
        ((origin as u64) << 48) | (seq << 12)
    }

    let region = Arc::new(Region::with_lanes(capacity, lanes));
    let ring = region.ring_with_lanes(capacity, lanes);
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
                        .append_access(
                            op,
                            origin,
                            seq,
                            access_addr(origin, seq),
                            &data,
                            with_data,
                            len as u64,
                            &mut || {
                                std::thread::yield_now();
                                Ok(())
                            },
                            &mut || {},
                        )
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
    assert_eq!((ring.consumed(), ring.pending()), (total as u64, 0));
}

/// Two mappings of one memfd at different addresses, as two processes would have.
#[test]
fn log_ring_attach_second_view() {
    const CAPACITY: usize = 4096;
    let len = ring_bytes(CAPACITY, 1, 1);
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
    let producer_view = unsafe { LogRing::init(first, CAPACITY, 1, 1) };
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
    assert_eq!(consumer_view.consumed() + consumer_view.pending(), 50);
    let mut seq = consumer_view.consumed();
    while let Some((m, d)) = pop(&consumer_view) {
        assert_eq!(m, meta(seq, d.len()));
        assert_eq!(d, payload(1, seq, (seq as usize * 37) % 200));
        seq += 1;
    }
    assert_eq!(seq, 50);
    assert_eq!((producer_view.consumed(), producer_view.pending(), producer_view.free_bytes(1)), (50, 0, CAPACITY));
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

#[test]
fn log_ring_lanes_for_gives_each_origin_a_lane_within_bounds() {
    assert_eq!(lanes_for(64 << 10, 1), 1);
    assert_eq!(lanes_for(64 << 10, 2), 2);
    assert_eq!(lanes_for(64 << 10, 3), 4, "rounded up: every origin its own lane");
    assert_eq!(lanes_for(64 << 10, 16), 16);
    assert_eq!(lanes_for(64 << 10, 64), 16, "at most MAX_LANES");
    assert_eq!(lanes_for(1 << 20, 1000), MAX_LANES);
    assert_eq!(lanes_for(16 << 10, 8), 4, "no lane below MIN_LANE");
    assert_eq!(lanes_for(4096, 8), 1, "a small log stays one ring");
    assert_eq!(lanes_for(256, 0), 1);
}

fn meta_from(origin: u32, seq: u64) -> EntryMeta {
    EntryMeta { origin, ..meta(seq, 8) }
}

#[test]
fn log_ring_lanes_keep_origins_apart() {
    let region = Region::with_lanes(1024, 2);
    let ring = region.ring_with_lanes(1024, 2);
    assert_eq!((ring.lanes(), ring.lane_of(0), ring.lane_of(1), ring.lane_of(2)), (2, 0, 1, 0));
    assert_eq!(ring.max_chunk(), 8 + 56, "a quarter of a 512-byte lane");
    // Origin 0 fills its lane (8 one-line entries); origin 1's lane is untouched.
    let mut n = 0;
    while ring.try_append(&meta_from(0, n), &[n as u8; 8]).unwrap() {
        n += 1;
    }
    assert_eq!(n, 8);
    assert_eq!((ring.free_bytes(0), ring.free_bytes(1)), (0, 512));
    assert!(!ring.has_room_for(2, 8, true) && ring.has_room_for(1, 8, true), "origin 2 shares origin 0's lane");
    assert!(ring.try_append(&meta_from(1, 0), &[100; 8]).unwrap(), "a full lane does not block another origin");
    // An active flush by origin 1 waits for its own lane only.
    let (mark0, mark1) = (ring.reserved(0), ring.reserved(1));
    assert_eq!((mark0, mark1), (512, 64));
    // Lane 0's entries come first from peek, in order; then lane 1's.
    for seq in 0..8u64 {
        assert_eq!(pop(&ring).unwrap(), (meta_from(0, seq), vec![seq as u8; 8]));
    }
    assert!(ring.tail(0) >= mark0 && ring.tail(1) < mark1);
    assert_eq!(pop(&ring).unwrap(), (meta_from(1, 0), vec![100; 8]));
    assert!(ring.tail(1) >= mark1);
    assert_eq!((ring.consumed(), ring.pending()), (9, 0));
    assert!(ring.peek().is_none() && !ring.has_entry());
}

#[test]
fn log_ring_drain_takes_lanes_in_turn() {
    let region = Region::with_lanes(64 << 10, 2);
    let ring = region.ring_with_lanes(64 << 10, 2);
    let per_origin = 2 * LANE_BATCH + 10;
    for seq in 0..per_origin {
        for origin in 0..2 {
            assert!(ring.try_append(&meta_from(origin, seq), &[origin as u8; 8]).unwrap());
        }
    }
    assert_eq!(ring.pending(), 2 * per_origin);
    let mut order = Vec::new();
    assert_eq!(ring.drain(|e| order.push((e.meta.origin, e.meta.seq))), 2 * per_origin as usize);
    // Batches of LANE_BATCH alternate between the lanes; each origin's entries stay in order.
    let first_lane: Vec<u32> = order.chunks(LANE_BATCH as usize).map(|c| c[0].0).collect();
    assert!(first_lane.windows(2).take(3).all(|w| w[0] != w[1]), "lanes alternate: {first_lane:?}");
    for origin in 0..2 {
        let seqs: Vec<u64> = order.iter().filter(|o| o.0 == origin).map(|o| o.1).collect();
        assert_eq!(seqs, (0..per_origin).collect::<Vec<_>>());
    }
    assert_eq!((ring.consumed(), ring.pending()), (2 * per_origin, 0));
}

#[test]
fn log_ring_attach_rejects_impossible_lanes() {
    let region = Region::with_lanes(1024, 4);
    let ring = region.ring_with_lanes(1024, 4);
    // SAFETY: the region is formatted and outlives the views.
    let again = unsafe { LogRing::attach(region.mem) }.unwrap();
    assert_eq!((again.capacity(), again.lanes()), (ring.capacity(), 4));
    // Corrupt the lane count: 8 lanes of 128 bytes are below MIN_CAPACITY.
    // SAFETY: the ident line is ours; nobody else uses the region.
    unsafe { (*(region.mem as *const LogHeader)).ident.0.lanes.store(8, Ordering::Relaxed) };
    // SAFETY: as above.
    assert!(matches!(unsafe { LogRing::attach(region.mem) }, Err(Error::InvalidArgument(_))));
}

/// A producer that died between claiming entries and publishing them (a respawned origin's
/// predecessor) leaves holes its replacement covers: the consumer then takes every published
/// entry, skips the holes, and the lane goes on — at every position of the lane, so that holes
/// that wrap (padding claimed with them) are covered too.
#[test]
fn holes_of_a_dead_producer_are_covered() {
    let cap = 8192;
    let region = Region::new(cap);
    let ring = region.ring(cap);
    let origin = meta(0, 0).origin;
    let mut seq = 0u64;
    // Enough rounds to go round the lane several times (a round takes up to 2 KiB).
    for round in 0..60u64 {
        let len = 40 + (mix(round) % 300) as usize;
        // Published, a hole, published again (a second thread of the same dead process), a hole.
        let mut want = Vec::new();
        for k in 0..4 {
            seq += 1;
            let data = payload(origin, seq, len + k * 17);
            if k % 2 == 0 {
                assert!(ring.try_append(&meta(seq, data.len()), &data).unwrap(), "round {round}: room for an entry");
                want.push(seq);
            } else {
                let lane = ring.lane(ring.lane_of(origin));
                assert!(lane.claim(entry_size(data.len())).is_some(), "round {round}: room for a hole");
            }
        }
        let mut got = Vec::new();
        ring.drain(|e| got.push(e.meta.seq));
        assert_eq!(got, want[..1], "round {round}: the consumer stops at the first hole");
        assert_eq!(ring.cover_holes_of(origin, &|_| true).unwrap(), 2, "round {round}: both holes covered");
        ring.drain(|e| got.push(e.meta.seq));
        assert_eq!(got, want, "round {round}: every published entry, in order, and nothing else");
        assert!(!ring.has_entry());
        assert_eq!(ring.cover_holes_of(origin, &|_| true).unwrap(), 0, "round {round}: nothing left to cover");
    }
}

/// In a lane shared by several origins (more origins than lanes), a live origin's claim in
/// flight looks like a hole: a respawned origin covers only its predecessor's holes, after
/// waiting for the live one's append to finish; and refuses, covering nothing, when an origin
/// of its lane died with an append in flight.
#[test]
fn holes_of_a_dead_producer_in_a_shared_lane_are_covered_after_the_live_ones_finish() {
    use std::sync::mpsc;
    use std::time::Duration;
    let cap = 8192;
    let region = Region::shared(cap, 2, 4);
    let ring = region.ring_with_lanes(cap, 2);
    let (live, dead) = (0u32, 2u32); // both in lane 0 (origins 1 and 3 in lane 1)
    assert_eq!((ring.lane_of(live), ring.lane_of(dead)), (0, 0));
    let entry = |origin: u32, seq: u64| {
        let data = payload(origin, seq, 100);
        (EntryMeta { op: LogOp::Put, origin, seq, addr: 0x1000, total_len: 100, offset: 0, last: true }, data)
    };
    let (m, d) = entry(live, 1);
    assert!(ring.try_append(&m, &d).unwrap());
    // The dead process: its append started (counted) and claimed, never published.
    ring.counts(dead).started.fetch_add(1, Ordering::SeqCst);
    assert!(ring.lane(0).claim(entry_size(100)).is_some());
    let (m, d) = entry(live, 2);
    assert!(ring.try_append(&m, &d).unwrap());
    // The live origin's third append is in flight (claimed, not published) while the
    // replacement covers: the replacement must wait for it, not cover it.
    let (claimed_tx, claimed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (covered_tx, covered_rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(move || {
            let (m, d) = entry(live, 3);
            let mut hook = || {
                claimed_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            };
            assert!(ring.try_append_after(&m, &d, &mut hook).unwrap());
        });
        claimed_rx.recv().unwrap();
        s.spawn(move || covered_tx.send(ring.cover_holes_of(dead, &|_| true).unwrap()).unwrap());
        assert!(
            covered_rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "covered while a live origin of the lane had a claim in flight"
        );
        go_tx.send(()).unwrap();
        assert_eq!(covered_rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1, "the dead origin's hole, and only it");
    });
    let mut got = Vec::new();
    ring.drain(|e| got.push((e.meta.origin, e.meta.seq, checksum(e.data()))));
    let want: Vec<_> = (1..=3).map(|seq| (live, seq, checksum(&entry(live, seq).1))).collect();
    assert_eq!(got, want, "every entry of the live origin, intact and in order; nothing of the dead one's");
    assert_eq!(ring.cover_holes_of(dead, &|_| true).unwrap(), 0, "nothing left; the replacement starts with nothing in flight");
    // A second origin of the lane died with an append in flight: its counts never settle, so
    // nothing can be told apart and nothing is covered.
    ring.counts(live).started.fetch_add(1, Ordering::SeqCst);
    assert!(ring.lane(0).claim(entry_size(8)).is_some());
    match ring.cover_holes_of(dead, &|o| o != live) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("origin 0") && m.contains("died"), "{m}"),
        other => panic!("expected an error naming the dead origin 0, got {other:?}"),
    }
    assert!(!ring.has_entry());
}

/// `capacity_to_hold` gives a log whose lanes take every origin's accesses without a drain
/// (streamed accesses cut at `max_chunk`, as appends cut them), and half of it does not.
#[test]
fn capacity_to_hold_holds_exactly_enough() {
    for (origins, accesses, len) in [(1, 10, 8), (2, 1000, 8), (3, 500, 8), (4, 40, 300), (5, 7, 5000), (20, 100, 64), (2, 3, 0)] {
        let fill = |capacity: usize| -> bool {
            let lanes = lanes_for(capacity, origins);
            let region = Region::with_lanes(capacity, lanes);
            let ring = region.ring_with_lanes(capacity, lanes);
            let chunk = ring.max_chunk();
            for seq in 0..accesses as u64 {
                for origin in 0..origins as u32 {
                    let data = payload(origin, seq, len);
                    let mut offset = 0;
                    loop {
                        let end = (offset + chunk).min(len);
                        let m = EntryMeta { origin, offset: offset as u64, last: end == len, ..meta(seq, len) };
                        if !ring.try_append(&m, &data[offset..end]).unwrap() {
                            return false;
                        }
                        if end == len {
                            break;
                        }
                        offset = end;
                    }
                }
            }
            true
        };
        let capacity = capacity_to_hold(origins, accesses, len).unwrap();
        assert!(fill(capacity), "{origins} origins x {accesses} accesses of {len} B fit in {capacity}");
        if capacity > MIN_LANE {
            assert!(!fill(capacity / 2), "{origins} x {accesses} x {len} B: {capacity} is not the smallest");
        }
    }
}
