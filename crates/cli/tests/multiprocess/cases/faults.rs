//! Bad input and faults: every misuse is an error value, never a crash or a hang.

use activerma::{Actions, Error, LogEntry, Notify, PageIn, RemotePtr, Result, Strategy};
use std::sync::Arc;
use std::time::Instant;

pub fn bad_input() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(8192)?;
    let right = (me + 1) % n;

    // Wrong rank.
    let e = w.put(RemotePtr::new(n, seg.addr_on(0)), &[1]).unwrap_err();
    assert!(matches!(e, Error::InvalidRank { .. }), "{e}");
    assert!(e.to_string().contains(&format!("numbered 0 to {}", n - 1)), "{e}");
    assert!(matches!(w.fetch_add(RemotePtr::new(usize::MAX, 0), 1), Err(Error::InvalidRank { .. })));
    assert!(matches!(w.flush(n + 5), Err(Error::InvalidRank { .. })));
    assert!(matches!(w.send_am(n, activerma::FIRST_USER_HANDLER, 0, b"x"), Err(Error::InvalidRank { .. })));

    // Outside what the target exposes: past the segment, before it, the null page, wrap-around.
    for (addr, len) in [(seg.addr_on(right) + 8192 - 4, 8), (seg.addr_on(right) - 1, 2), (0, 8), (usize::MAX - 3, 8)] {
        let e = w.put(RemotePtr::new(right, addr), &vec![0u8; len]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "put {addr:#x}+{len}: {e}");
        let e = w.get(RemotePtr::new(right, addr), &mut vec![0u8; len]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "get {addr:#x}+{len}: {e}");
    }
    // Misaligned or out-of-range atomics.
    assert!(matches!(w.fetch_add(seg.remote(right, 4), 1), Err(Error::Misaligned { .. })));
    assert!(matches!(w.swap(seg.remote(right, 8192), 1), Err(Error::NotExposed { .. })));

    // Zero-length transfers succeed and touch nothing, wherever they point.
    w.put(RemotePtr::new(right, 0), &[])?;
    w.get(RemotePtr::new(right, 0), &mut [])?;
    w.put_nbi(seg.remote(right, 0), &[])?;

    // Huge transfers: larger than anything exposed is refused; a large valid one works.
    let e = w.put(seg.remote(right, 0), &vec![1u8; 1 << 20]).unwrap_err();
    assert!(matches!(e, Error::NotExposed { .. }), "{e}");
    let big = w.alloc_segment(48 << 20)?;
    let data: Vec<u8> = (0..48usize << 20).map(|i| (i * 7 + me) as u8).collect();
    w.put(big.remote(right, 0), &data)?;
    w.barrier()?;
    let left = (me + n - 1) % n;
    let mut got = vec![0u8; 48 << 20];
    big.read_local(0, &mut got);
    assert!(got.iter().enumerate().all(|(i, &b)| b == (i * 7 + left) as u8), "48 MiB put intact");
    big.free()?;

    // A segment ends at its exact length, even inside a page.
    let small = w.alloc_segment(100)?;
    w.barrier()?;
    w.put(small.remote(right, 92), &[1u8; 8])?;
    assert!(matches!(w.put(small.remote(right, 93), &[1u8; 8]), Err(Error::NotExposed { .. })));
    assert!(matches!(w.get(small.remote(right, 200), &mut [0u8; 1]), Err(Error::NotExposed { .. })));

    // Mismatched collective sizes are an error on every rank, and the job goes on.
    let e = w.alloc_segment(4096 * (1 + me)).err();
    assert!(matches!(e, Some(Error::CollectiveMismatch(_))), "{e:?}");
    // A segment larger than the heap is a clear error naming the setting.
    let e = w.alloc_segment(1 << 40).err().expect("too big");
    assert!(e.to_string().contains("ACTIVERMA_SEGMENT_SIZE"), "{e}");

    // Reusing freed heap space gives zeroed memory, and the old addresses are gone.
    let tmp = w.alloc_segment(4096)?;
    let tmp_addr = tmp.addr_on(right);
    tmp.free()?;
    w.barrier()?;
    assert!(
        matches!(w.get(RemotePtr::new(right, tmp_addr), &mut [0u8; 8]), Err(Error::NotExposed { .. })),
        "freed segments are unreachable"
    );

    // Choosing PART's page-in policy at run time means something under PART only.
    let set = w.set_part_page_in(PageIn::All);
    if w.registration_strategy() == Strategy::Part {
        set?;
    } else {
        let e = set.unwrap_err();
        assert!(e.to_string().contains("ACTIVERMA_REGISTRATION=part"), "{e}");
    }

    // After finalize, every call is refused.
    w.finalize()?;
    assert!(matches!(w.put(seg.remote(right, 0), &[1]), Err(Error::Finalized)));
    assert!(matches!(w.barrier(), Err(Error::Finalized)));
    assert!(matches!(w.alloc_segment(8), Err(Error::Finalized)));
    Ok(())
}

/// The modelled network makes remote operations take at least latency + size / bandwidth.
pub fn modelled_network() -> Result<()> {
    let w = activerma::init()?;
    assert!(w.net_model().contains("20000 ns"), "{}", w.net_model());
    let seg = w.alloc_segment(2 << 20)?;
    let right = (w.rank() + 1) % w.size();
    let t = Instant::now();
    for _ in 0..50 {
        w.put(seg.remote(right, 0), &[0u8; 8])?;
    }
    assert!(t.elapsed().as_micros() >= 50 * 20, "50 puts with 20 us modelled latency took {:?}", t.elapsed());
    let t = Instant::now();
    w.put(seg.remote(right, 0), &vec![0u8; 1 << 20])?; // 1 MiB at 100 MB/s: 10.5 ms
    assert!(t.elapsed().as_micros() >= 10_000, "1 MiB at 100 MB/s took {:?}", t.elapsed());
    // Non-blocking operations overlap: 4 of them complete together, by flush.
    let t = Instant::now();
    let h = w.put_nb(seg.remote(right, 0), &[0u8; 8])?;
    // Only meaningful if issuing it took less than the latency (a loaded machine may take
    // longer than 20 us to get here; then the handle may rightly be complete already).
    let issued_in = t.elapsed().as_micros();
    assert!(issued_in >= 20 || !h.test(), "complete {issued_in} us after issue, before the modelled latency");
    h.wait();
    assert!(t.elapsed().as_micros() >= 20);
    logged_puts_pay_the_modelled_log_write(&w, &seg)?;
    arrived_messages_wait_for_the_modelled_arrival(&w)?;
    w.finalize()
}

/// `send_am_arrived` returns once the message has arrived as the modelled network carries it
/// (latency + size / bandwidth: 20 us + 4 KiB at 100 MB/s), as a blocking put waits for its
/// remote completion; the message is handled whole and once.
fn arrived_messages_wait_for_the_modelled_arrival(w: &activerma::World) -> Result<()> {
    const ARRIVED: u16 = activerma::FIRST_USER_HANDLER + 7;
    let got = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let g = got.clone();
    w.register_handler(
        ARRIVED,
        Arc::new(move |ctx: &activerma::AmCtx, bytes: &[u8]| {
            assert!(bytes.iter().all(|&b| b == ctx.token as u8) && bytes.len() == 4096, "the message arrived whole");
            g.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }),
    )?;
    w.barrier()?;
    let (right, left) = ((w.rank() + 1) % w.size(), (w.rank() + w.size() - 1) % w.size());
    let t = Instant::now();
    w.send_am_arrived(right, ARRIVED, 9, &[9u8; 4096])?;
    let took = t.elapsed().as_micros();
    assert!(took >= 20 + 40, "send_am_arrived of 4 KiB returned after {took} us: before its modelled arrival (61 us)");
    w.wait_until(|| got.load(std::sync::atomic::Ordering::Relaxed) == 1, left, "the arrived message's handler")?;
    w.barrier()?;
    assert_eq!(got.load(std::sync::atomic::Ordering::Relaxed), 1, "handled exactly once");
    Ok(())
}

/// The modelled IOMMU writes an active put's log entry at the target after the data has
/// landed: a put to a page marked W, WL completes no earlier than the latency plus the
/// entry's modelled write (ACTIVERMA_NET_LOG_NS), blocking or not — the put is booked at
/// issue, so the entry's cost must be added to its completion, not hidden in the wire time.
/// On one host only: across hosts the target's CPU logs the put (no modelled IOMMU cost).
fn logged_puts_pay_the_modelled_log_write(w: &activerma::World, seg: &activerma::Segment) -> Result<()> {
    const LATENCY_US: u128 = 20;
    const LOG_US: u128 = 20;
    assert!(w.net_model().contains("log write 20000 ns"), "{}", w.net_model());
    let page = activerma_core::page::page_size();
    if w.rank() == 0 {
        w.create_log(5, 1 << 16, Notify::Poll, Arc::new(|_: &LogEntry| {}))?;
        // SAFETY: the segment's second page (the segment is 2 MiB).
        w.assoc_pages(unsafe { seg.as_ptr().add(page) }, page, Actions::W | Actions::R | Actions::WL, Some(5))?;
    }
    w.barrier()?;
    let one_host = w.node_of(0)? == w.node_of(1)?;
    if w.rank() == 1 && one_host {
        let t = Instant::now();
        w.put(seg.remote(0, page + 8), &[7u8; 8])?;
        let took = t.elapsed().as_micros();
        assert!(took >= LATENCY_US + LOG_US, "a logged put took {took} us: less than the latency plus the log write");
        let t = Instant::now();
        let h = w.put_nb(seg.remote(0, page + 16), &[8u8; 8])?;
        h.wait();
        let took = t.elapsed().as_micros();
        assert!(took >= LATENCY_US + LOG_US, "a logged put_nb completed after {took} us");
    }
    w.barrier()?;
    if w.rank() == 0 && one_host {
        // Both puts wrote (W) and were logged: drain the log, then check the bytes.
        w.progress();
        let mut got = [0u8; 16];
        seg.read_local(page + 8, &mut got);
        assert_eq!(got, [[7u8; 8], [8u8; 8]].concat()[..], "the logged puts' bytes");
    }
    Ok(())
}

/// A rank that exits (successfully) without finalize: its peers get an error, not a hang.
pub fn peer_exits_early() -> Result<()> {
    let w = activerma::init()?;
    if w.rank() == 1 {
        std::process::exit(0);
    }
    match w.barrier() {
        Err(Error::PeerGone { rank: 1, how }) => {
            assert!(how.contains("exited with status 0"), "{how}");
            Ok(())
        }
        other => panic!("barrier with a departed rank should fail with PeerGone, got {other:?}"),
    }
}

pub fn rank_crashes() -> Result<()> {
    let w = activerma::init()?;
    if w.rank() == 1 {
        std::process::abort();
    }
    let _ = w.barrier(); // the launcher stops us (or we learn rank 1 is gone)
    std::thread::sleep(std::time::Duration::from_secs(60));
    Ok(())
}

pub fn rank_fails() -> Result<()> {
    let w = activerma::init()?;
    if w.rank() == 2 {
        std::process::exit(3);
    }
    let _ = w.barrier();
    std::thread::sleep(std::time::Duration::from_secs(60));
    Ok(())
}

pub fn sleep_forever() -> Result<()> {
    let _w = activerma::init()?;
    println!("pid {}", std::process::id());
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

pub fn hello() -> Result<()> {
    let w = activerma::init()?;
    println!("hello from {} of {}", w.rank(), w.size());
    w.finalize()
}

pub fn single_rank_job() -> Result<()> {
    let w = activerma::init()?;
    assert_eq!((w.rank(), w.size()), (0, 1));
    let seg = w.alloc_segment(4096)?;
    w.put(seg.remote(0, 8), &[5u8; 8])?;
    assert_eq!(w.fetch_add(seg.remote(0, 8), 1)?, u64::from_le_bytes([5; 8]));
    w.barrier()?;
    w.finalize()
}
