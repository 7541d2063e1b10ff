//! Active Access: every bit combination, many origins into tiny logs, active flush, bits
//! changed under load, protection faults at the origin.

use super::share_u64;
use activerma::{Actions, Error, LogEntry, LogOp, Notify, Prot, RemotePtr, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a handler saw: (op, origin, addr, total_len, data) per entry.
type Seen = Arc<Mutex<Vec<(LogOp, u32, u64, u64, Vec<u8>)>>>;

fn recorder(seen: &Seen) -> activerma::LogHandler {
    let s = seen.clone();
    Arc::new(move |e: &LogEntry| s.lock().unwrap().push((e.meta.op, e.meta.origin, e.meta.addr, e.meta.total_len, e.data().to_vec())))
}

/// The notification the job's ACTIVERMA_AA_NOTIFY names (the suite runs the cases under each).
fn notify_of(w: &activerma::World) -> Result<Notify> {
    Notify::from_config(w.config())
}

/// Mappings of access-log arenas in this process: a rank makes its arena when it first logs
/// (none at init: a job that never logs reserves no room for logs), and an origin of its host
/// maps it when it first appends.
fn log_arenas_mapped() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap_or_default().lines().filter(|l| l.contains("activerma-access-logs")).count()
}

/// Rank 1 puts/gets pages of rank 0 marked with each combination; rank 0 checks memory and log.
pub fn bit_combinations() -> Result<()> {
    let w = activerma::init()?;
    let me = w.rank();
    assert_eq!(log_arenas_mapped(), 0, "rank {me}: an access-log arena before any log");
    let page = 4096;
    let seg = w.alloc_segment(8 * page)?;
    let mut private = vec![0u8; 8 * page + 4096];
    let off = private.as_ptr().align_offset(page);
    let exposed = w.expose(&mut private[off..off + 8 * page], Prot::ReadWrite)?;
    let paddr = share_u64(&w, exposed.addr() as u64)?;
    let seen: Seen = Default::default();
    let faults: Seen = Default::default();
    if me == 0 {
        w.create_log(3, 1 << 16, notify_of(&w)?, recorder(&seen))?;
        assert!(log_arenas_mapped() >= 1, "the first log makes the arena");
        w.set_fault_handler(Notify::Poll, recorder(&faults))?;
    }
    // Put combinations on pages 0..5, get combinations on page 6.
    let puts: [(Actions, Option<u16>, bool, bool, bool); 6] = [
        // actions, domain, memory written, logged, with data
        (Actions::W | Actions::R, Some(3), true, false, false),
        (Actions::W | Actions::R | Actions::WL, Some(3), true, true, false),
        (Actions::W | Actions::R | Actions::WL | Actions::WLD, Some(3), true, true, true),
        (Actions::R | Actions::WL | Actions::WLD, Some(3), false, true, true),
        (Actions::R | Actions::WL, None, false, true, false), // the classic IOMMU fault entry, into the fault log
        (Actions::R, Some(3), false, false, false),           // W=0, no logging: a protection fault
    ];
    for (base, is_seg) in [(0usize, true), (1, false)] {
        let local = if is_seg { seg.as_ptr() } else { (paddr[0] as usize) as *const u8 };
        if me == 0 {
            for (p, (a, d, ..)) in puts.iter().enumerate() {
                w.assoc_pages(unsafe { local.add(p * page) }, page, *a, *d)?;
            }
            w.assoc_pages(unsafe { local.add(6 * page) }, page, Actions::R | Actions::RL | Actions::RLD, Some(3))?;
        }
        w.barrier()?;
        let at = |p: usize| if is_seg { seg.remote(0, p * page + 8) } else { RemotePtr::new(0, paddr[0] as usize + p * page + 8) };
        if me == 1 {
            for (p, (.., written, logged, _)) in puts.iter().enumerate() {
                let r = w.put(at(p), &[0xa0 + p as u8; 16]);
                if !written && !logged {
                    assert!(matches!(r, Err(Error::Protection { .. })), "page {p}: W=0 without logging must fault, got {r:?}");
                } else {
                    r?;
                }
            }
            let mut got = [0u8; 16];
            w.get(at(6), &mut got)?;
            // A writing atomic on a page that logs puts' metadata (page 1: W, WL) runs and is
            // logged as a put of its word (atomic_active.rs), on every path; with data logging
            // (page 2) it is refused as unsupported; without W it is a protection fault. A
            // fetch is a read: pages 1 and 5 (no logged gets) take it, page 6 (logged gets)
            // refuses it as unsupported. The words lie past the puts' 16 bytes.
            let word = |p: usize| RemotePtr::new(0, at(p).addr + 24);
            assert_eq!(w.fetch_add(word(1), 5)?, 0, "page 1: fetch-add on a W, WL page");
            assert_eq!(w.fetch_add(word(1), 2)?, 5, "page 1: the second fetch-add sees the first");
            assert_eq!(w.fetch(word(1))?, 7, "page 1: a fetch reads the word plainly");
            let r = w.fetch_add(word(2), 1);
            assert!(matches!(r, Err(Error::Unsupported(_))), "page 2: fetch-add on a page logging put data, got {r:?}");
            for p in [3, 4, 5, 6] {
                let r = w.fetch_add(word(p), 1);
                assert!(matches!(r, Err(Error::Protection { .. })), "page {p}: fetch-add without W, got {r:?}");
            }
            let r = w.fetch(word(6));
            assert!(matches!(r, Err(Error::Unsupported(_))), "page 6: fetch on a page logging gets, got {r:?}");
            w.fetch(word(5))?;
            w.active_flush(0)?;
        }
        w.barrier()?;
        if me == 0 {
            w.progress();
            let mem = |p: usize| unsafe { std::slice::from_raw_parts(local.add(p * page + 8), 16).to_vec() };
            let s = std::mem::take(&mut *seen.lock().unwrap());
            let f = std::mem::take(&mut *faults.lock().unwrap());
            for (p, (_, d, written, logged, data)) in puts.iter().enumerate() {
                assert_eq!(mem(p) == [0xa0 + p as u8; 16], *written, "case {base}: page {p} written?");
                let addr = at(p).addr as u64;
                let log = if d.is_some() { &s } else { &f };
                let hit: Vec<_> = log.iter().filter(|e| e.2 == addr).collect();
                assert_eq!(hit.len(), *logged as usize, "case {base}: page {p} logged once? {log:?}");
                if let Some(e) = hit.first() {
                    assert_eq!((e.0, e.1, e.3), (LogOp::Put, 1, 16));
                    assert_eq!(e.4, if *data { vec![0xa0 + p as u8; 16] } else { vec![] }, "page {p}: data logged?");
                }
            }
            // The two fetch-adds on page 1, each logged as an 8-byte put without data, and the
            // word holds their sum.
            let word_at = at(1).addr as u64 + 24;
            let atomics: Vec<_> = s.iter().filter(|e| e.2 == word_at).collect();
            assert_eq!(atomics.len(), 2, "case {base}: the fetch-adds on page 1 logged? {s:?}");
            assert!(atomics.iter().all(|e| (e.0, e.1, e.3, e.4.len()) == (LogOp::Put, 1, 8, 0)), "case {base}: {atomics:?}");
            let sum = unsafe { std::ptr::read_volatile(local.add(page + 32) as *const u64) };
            assert_eq!(sum, 7, "case {base}: page 1's word");
            let g: Vec<_> = s.iter().filter(|e| e.0 == LogOp::Get).collect();
            assert_eq!(g.len(), 1, "one logged get");
            assert_eq!(g[0].4, mem(6), "RLD logs a copy of the bytes returned");
            for p in 0..7 {
                w.assoc_pages(unsafe { local.add(p * page) }, page, Actions::W | Actions::R, None)?;
            }
        }
        w.barrier()?;
    }
    // A refusal only the target can explain (its page logs into a domain without a log)
    // reaches the origin in the target's words, for a blocking and for an implicit put.
    if me == 0 {
        w.assoc_pages(seg.as_ptr(), page, Actions::R | Actions::WL, Some(9))?;
    }
    w.barrier()?;
    if me == 1 {
        let blocking = w.put(seg.remote(0, 8), &[1; 8]).unwrap_err().to_string();
        let implicit = w.put_nbi(seg.remote(0, 8), &[1; 8]).and_then(|()| w.flush(0)).unwrap_err().to_string();
        for e in [blocking, implicit] {
            assert!(e.contains("no log for domain 9"), "the target's reason is lost: {e}");
        }
    }
    w.barrier()?;
    if me == 0 {
        w.assoc_pages(seg.as_ptr(), page, Actions::W | Actions::R, None)?;
    }
    // Marks are the target's alone: the last rank (on another host under the emulated
    // layouts) protects its own copy of segment page 0 (W=0, no log), which says nothing about
    // rank 0's page at the same offset — an origin must not judge an access by its own bits.
    let last = w.size() - 1;
    if me == last {
        w.assoc_pages(seg.as_ptr(), page, Actions::R, None)?;
    }
    w.barrier()?;
    if me == last {
        w.put(seg.remote(0, 8), &[7; 8])?;
        assert_eq!(w.fetch_add(seg.remote(0, 64), 3)?, 0, "an atomic on rank 0's plain page");
        let r = w.put(seg.remote(last, 8), &[1; 8]);
        assert!(matches!(r, Err(Error::Protection { .. })), "a put into our own protected page, got {r:?}");
    }
    w.barrier()?;
    if me == 0 {
        let mut got = [0u8; 8];
        seg.read_local(8, &mut got);
        assert_eq!(got, [7; 8], "the last rank's put into page 0");
        seg.read_local(64, &mut got);
        assert_eq!(u64::from_ne_bytes(got), 3, "the last rank's fetch-add into page 0");
    }
    if me == last {
        w.assoc_pages(seg.as_ptr(), page, Actions::W | Actions::R, None)?;
    }
    w.barrier()?;
    drop(exposed);
    drop(seg);
    w.finalize()
}

/// Every rank but 0 puts accesses of random sizes into rank 0's tiny log; nothing is lost.
pub fn many_origins_tiny_log() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(64 * 1024)?;
    let count = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let by_origin = Arc::new(Mutex::new(vec![(0u64, 0u64); n])); // (bytes, last seq + 1)
    if me == 0 {
        let (c, s, b) = (count.clone(), sum.clone(), by_origin.clone());
        w.create_log(
            1,
            256,
            notify_of(&w)?,
            Arc::new(move |e: &LogEntry| {
                let bytes: u64 = e.data().iter().map(|&x| x as u64).sum();
                s.fetch_add(bytes, Ordering::Relaxed);
                let mut b = b.lock().unwrap();
                let o = &mut b[e.meta.origin as usize];
                o.0 += e.data().len() as u64;
                if e.meta.last {
                    c.fetch_add(1, Ordering::Relaxed);
                    assert!(e.meta.seq + 1 > o.1 || o.1 == 0, "per-origin order");
                    o.1 = e.meta.seq + 1;
                }
            }),
        )?;
        w.assoc_pages(seg.as_ptr(), 64 * 1024, Actions::WL | Actions::WLD, Some(1))?;
    }
    w.barrier()?;
    const ACCESSES: u64 = 400;
    let (mut sent_sum, mut sent_bytes) = (0u64, 0u64);
    if me != 0 {
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ me as u64;
        for i in 0..ACCESSES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 1 + (x % 700) as usize; // up to ~3 entries each in a 256-byte log
            let off = (x >> 20) as usize % (64 * 1024 - len);
            let data: Vec<u8> = (0..len).map(|k| (k as u64 ^ i ^ me as u64) as u8).collect();
            sent_sum += data.iter().map(|&b| b as u64).sum::<u64>();
            sent_bytes += len as u64;
            w.put(seg.remote(0, off), &data)?;
        }
        w.active_flush(0)?;
    }
    let sums = share_u64(&w, sent_sum)?;
    let bytes = share_u64(&w, sent_bytes)?;
    if me == 0 {
        assert_eq!(count.load(Ordering::Relaxed), ACCESSES * (n as u64 - 1), "count in = count out");
        assert_eq!(sum.load(Ordering::Relaxed), sums.iter().sum::<u64>(), "data checksums");
        let b = by_origin.lock().unwrap();
        for o in 1..n {
            assert_eq!(b[o].0, bytes[o], "bytes from origin {o}");
        }
        let untouched = unsafe { std::slice::from_raw_parts(seg.as_ptr(), 64 * 1024) };
        assert!(untouched.iter().all(|&b| b == 0), "W=0: the active puts never touched memory");
    }
    w.barrier()?;
    drop(seg);
    w.finalize()
}

/// Counting pages (W=1, WL=1) while the target flips them between counting and plain; every
/// put lands, and each was counted iff its page was marked when it read the entry.
pub fn bits_change_under_load() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(16 * 4096)?;
    let logged = Arc::new(AtomicU64::new(0));
    if me == 0 {
        let l = logged.clone();
        w.create_log(
            2,
            4096,
            Notify::Poll,
            Arc::new(move |e: &LogEntry| {
                l.fetch_add(e.meta.last as u64, Ordering::Relaxed);
            }),
        )?;
    }
    w.barrier()?;
    if me == 0 {
        for round in 0..2000 {
            let a = if round % 2 == 0 { Actions::W | Actions::R | Actions::WL } else { Actions::W | Actions::R };
            w.assoc_pages(seg.as_ptr(), 16 * 4096, a, Some(2))?;
            w.progress();
        }
        w.assoc_pages(seg.as_ptr(), 16 * 4096, Actions::W | Actions::R, None)?;
    } else {
        for i in 0..3000usize {
            let slot = (me * 7919 + i * 8) % (16 * 4096 / 8);
            w.put(seg.remote(0, slot * 8), &(i as u64 + 1).to_le_bytes())?;
        }
        w.active_flush(0)?;
    }
    w.barrier()?;
    if me == 0 {
        w.progress();
        let l = logged.load(Ordering::Relaxed);
        assert!(l <= 3000 * (n as u64 - 1), "never more entries than puts: {l}");
        let words = unsafe { std::slice::from_raw_parts(seg.as_ptr() as *const u64, 16 * 4096 / 8) };
        assert!(words.iter().filter(|&&v| v != 0).count() > 0, "W=1 throughout: puts land");
        eprintln!("bits_change_under_load: {l} of {} puts logged", 3000 * (n - 1));
    }
    w.barrier()?;
    drop(seg);
    w.finalize()
}

/// Active flush orders: after `active_flush(0)` returns, every active put this origin made has
/// run through rank 0's handler. The handler counts each origin's entries in rank 0's segment;
/// the origin reads its count with a get right after the active flush, and rank 0 checks the
/// total when it sees the origin's plain flag put, issued after that, while rank 0 only makes
/// progress. The puts go to a marked segment page and to a marked page of exposed private
/// memory, whose path depends on the registration strategy (under bounce and part they travel
/// through the target, which appends them to its log itself): the guarantee holds for every path.
pub fn active_flush_orders() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let page = 4096;
    // Page 0: marked; page 1: per-origin handled counts (words 0..n) and flags (words 64..64+n).
    let seg = w.alloc_segment(2 * page)?;
    let mut private = vec![0u8; 2 * page];
    let off = private.as_ptr().align_offset(page);
    let exposed = w.expose(&mut private[off..off + page], Prot::ReadWrite)?;
    let paddr = share_u64(&w, exposed.addr() as u64)?[0] as usize;
    const PUTS: u64 = 1000;
    let word = |i: usize| seg.as_ptr().wrapping_add(page + 8 * i) as *const AtomicU64;
    if me == 0 {
        let counts = seg.as_ptr() as usize + page;
        // One log per page, so that the private page's log is flushed on its own merits.
        for domain in [4, 5] {
            w.create_log(
                domain,
                1 << 12,
                notify_of(&w)?,
                Arc::new(move |e: &LogEntry| {
                    // SAFETY: word `origin` of page 1 of our segment, which outlives the handlers.
                    let count = unsafe { &*((counts + 8 * e.meta.origin as usize) as *const AtomicU64) };
                    count.fetch_add(1, Ordering::AcqRel);
                }),
            )?;
        }
        w.assoc_pages(seg.as_ptr(), page, Actions::WL | Actions::WLD, Some(4))?;
        w.assoc_pages(paddr as *const u8, page, Actions::WL | Actions::WLD, Some(5))?;
    }
    w.barrier()?;
    if me != 0 {
        for i in 0..PUTS {
            w.put(seg.remote(0, 8 * (i as usize % 64)), &i.to_le_bytes())?;
            w.put(RemotePtr::new(0, paddr + 8 * (i as usize % 64)), &i.to_le_bytes())?;
        }
        w.active_flush(0)?;
        let mut handled = [0u8; 8];
        w.get(seg.remote(0, page + 8 * me), &mut handled)?;
        let handled = u64::from_le_bytes(handled);
        assert_eq!(handled, 2 * PUTS, "rank {me}: active_flush(0) returned with {handled} of {} active puts handled", 2 * PUTS);
        // A plain put to the unmarked page: rank 0 may look at its count when it sees this.
        w.put(seg.remote(0, page + 8 * (64 + me)), &1u64.to_le_bytes())?;
    } else {
        // SAFETY: words of our own segment, written by the handler and by remote plain puts.
        let at = |i: usize| unsafe { &*word(i) }.load(Ordering::Acquire);
        let mut seen = vec![false; n];
        let mut done = 1;
        while done < n {
            w.progress();
            for (r, seen) in seen.iter_mut().enumerate().skip(1) {
                if !*seen && at(64 + r) == 1 {
                    *seen = true;
                    done += 1;
                    assert_eq!(at(r), 2 * PUTS, "rank {r} flagged after active_flush, but only {} entries were handled", at(r));
                }
            }
        }
    }
    w.barrier()?;
    drop(exposed);
    drop(seg);
    w.finalize()
}

/// The paper's reply-based consistency (its "alternative mechanism" of section 3): every
/// rank's handler answers every entry it processed with an active put into the origin's reply
/// page (W=0, WL=1, WLD=1, logging into the origin's own reply log). Origins learn from their
/// own log, without an active flush, that every one of their puts was handled, and with what.
/// Every rank is origin and target at once, with small logs: handlers send while logs are full.
pub fn handler_replies() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(2 * 4096)?; // page 0: work page; page 1: reply page
    const PUTS: u64 = 500;
    const WORK: u16 = 5;
    const REPLIES: u16 = 6;
    let (rw, reply_at): (_, Vec<RemotePtr>) = (w.clone(), (0..n).map(|r| seg.remote(r, 4096)).collect());
    w.create_log(
        WORK,
        1 << 12,
        notify_of(&w)?,
        Arc::new(move |e: &LogEntry| {
            let v = u64::from_le_bytes(e.data()[..8].try_into().unwrap());
            rw.put_nbi(reply_at[e.meta.origin as usize], &(v + 1).to_le_bytes()).expect("reply");
        }),
    )?;
    w.assoc_pages(seg.as_ptr(), 4096, Actions::WL | Actions::WLD, Some(WORK))?;
    let (count, sum) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (c, s) = (count.clone(), sum.clone());
    w.create_log(
        REPLIES,
        1 << 12,
        notify_of(&w)?,
        Arc::new(move |e: &LogEntry| {
            s.fetch_add(u64::from_le_bytes(e.data()[..8].try_into().unwrap()), Ordering::AcqRel);
            c.fetch_add(1, Ordering::AcqRel);
        }),
    )?;
    // SAFETY: page 1 of our own segment.
    w.assoc_pages(unsafe { seg.as_ptr().add(4096) }, 4096, Actions::WL | Actions::WLD, Some(REPLIES))?;
    w.barrier()?;
    for i in 0..PUTS {
        for t in (0..n).filter(|&t| t != me) {
            w.put_nbi(seg.remote(t, 8 * (i as usize % 64)), &i.to_le_bytes())?;
        }
    }
    // No active_flush: the replies say when everything was handled.
    let others = n as u64 - 1;
    while count.load(Ordering::Acquire) < PUTS * others {
        w.progress();
    }
    assert_eq!(count.load(Ordering::Acquire), PUTS * others, "one reply per put");
    assert_eq!(sum.load(Ordering::Acquire), others * PUTS * (PUTS + 1) / 2, "each reply carries its put's value + 1");
    // Again, now with active flushes arriving while the targets' handlers are busy replying.
    for i in 0..PUTS {
        for t in (0..n).filter(|&t| t != me) {
            w.put_nbi(seg.remote(t, 8 * (i as usize % 64)), &i.to_le_bytes())?;
        }
    }
    for t in (0..n).filter(|&t| t != me) {
        w.active_flush(t)?;
    }
    while count.load(Ordering::Acquire) < 2 * PUTS * others {
        w.progress();
    }
    assert_eq!(sum.load(Ordering::Acquire), 2 * others * PUTS * (PUTS + 1) / 2, "second round's replies");
    w.barrier()?;
    w.finalize()
}
