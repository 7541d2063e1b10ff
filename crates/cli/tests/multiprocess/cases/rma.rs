//! Plain RMA: puts, gets, handles, flush, private memory, atomics.

use super::{expect_protocol, pattern, private_protocols, share_u64};
use activerma::{Actions, AtomicOp, Error, Prot, RemotePtr, Result};

const REGION: usize = 20_000; // not a page multiple: regions straddle pages

pub fn put_get_segment() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(n * REGION)?;
    // Every rank writes its own region of every rank's segment, itself included.
    let mine: Vec<u8> = (0..REGION).map(|i| pattern(me, 0, i)).collect();
    for t in 0..n {
        w.put(seg.remote(t, me * REGION), &mine)?;
    }
    w.barrier()?;
    for src in 0..n {
        let mut got = vec![0u8; REGION];
        seg.read_local(src * REGION, &mut got);
        assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(src, 0, i)), "rank {me}: region of rank {src} corrupted");
    }
    // Read back every region of every rank with gets of odd sizes.
    for t in 0..n {
        for src in 0..n {
            let mut off = 0;
            while off < REGION {
                let len = (1 + off % 4093).min(REGION - off);
                let mut got = vec![0u8; len];
                w.get(seg.remote(t, src * REGION + off), &mut got)?;
                assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(src, 0, off + i)));
                off += len;
            }
        }
    }
    let next = (me + 1) % n;
    let (p, why) = w.explain(seg.remote(next, 0), 8, "put")?;
    assert_eq!(p.name(), expect_protocol(&w, next, "put_direct", "put_rma"), "{why}");
    let (p, why) = w.explain(seg.remote(next, 8), 8, "atomic")?;
    let on_node = if w.cpu_atomics() { "atomic_direct" } else { "atomic_rma" };
    assert_eq!(p.name(), expect_protocol(&w, next, on_node, "atomic_rma"), "{why}");
    // Fresh memory reads as zero on every rank, after a free too: the written block given
    // back, then a small block and a new one over the written pages, starting inside a page
    // (conduits may punch whole pages out rather than write them: Conduit::zero_heap).
    let len = seg.len();
    seg.free()?;
    let small = w.alloc_segment(100)?;
    let fresh = w.alloc_segment(len)?;
    let mut got = vec![0xffu8; len];
    fresh.read_local(0, &mut got);
    assert!(got.iter().all(|&b| b == 0), "rank {me}: a fresh segment holds old bytes");
    got.fill(0xff);
    w.get(fresh.remote(next, 0), &mut got)?;
    assert!(got.iter().all(|&b| b == 0), "rank {me}: rank {next}'s fresh segment holds old bytes");
    w.barrier()?;
    fresh.free()?;
    small.free()?;
    w.finalize()
}

pub fn nonblocking_and_flush() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(4 * n * REGION)?;
    let data: Vec<u8> = (0..REGION).map(|i| pattern(me, 1, i)).collect();
    for t in 0..n {
        let h = w.put_nb(seg.remote(t, me * REGION), &data)?;
        h.wait();
        w.put_nbi(seg.remote(t, (n + me) * REGION), &data)?;
    }
    w.flush_all()?;
    // With a window threshold below REGION, every implicit put into a segment mapped here
    // streams (non-temporal stores): the checks below then cover that path.
    let threshold = activerma::settings::get_u64(activerma::settings::PUT_STREAM_AFTER)?;
    let streamed = w.counters().put_streamed.load(std::sync::atomic::Ordering::Relaxed);
    if threshold != 0 && (threshold as usize) < REGION && w.conduit_name() == "smp" {
        assert_eq!(streamed, n as u64, "every implicit put streamed (threshold {threshold})");
    }
    w.barrier()?;
    for t in 0..n {
        let mut a = vec![0u8; REGION];
        let mut b = vec![0u8; REGION];
        let h = w.get_nb(seg.remote(t, me * REGION), &mut a)?;
        while !h.test() {}
        h.wait();
        w.get_nbi(seg.remote(t, (n + me) * REGION), &mut b)?;
        w.flush(t)?;
        assert_eq!(a, data, "non-blocking put/get to rank {t}");
        assert_eq!(b, data, "implicit put/get to rank {t}");
    }
    // Fence orders a data put before a flag put to the same target.
    let right = (me + 1) % n;
    w.put(seg.remote(right, 2 * n * REGION + me * 8), &[7u8; 8])?;
    w.fence()?;
    w.put(seg.remote(right, 3 * n * REGION + me * 8), &[1u8; 8])?;
    w.barrier()?;
    let left = (me + n - 1) % n;
    assert_eq!(seg.read_u64(3 * n * REGION + left * 8), u64::from_le_bytes([1; 8]));
    assert_eq!(seg.read_u64(2 * n * REGION + left * 8), u64::from_le_bytes([7; 8]));
    w.finalize()
}

pub fn private_memory() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let mut heap_buf = vec![0u8; n * REGION]; // written by everyone
    let stack_buf: [u8; 512] = std::array::from_fn(|i| pattern(me, 2, i)); // read-only, on the stack
    let rw = w.expose(&mut heap_buf, Prot::ReadWrite)?;
    let ro = w.expose_read_only(&stack_buf)?;
    let rw_addr = share_u64(&w, rw.addr() as u64)?;
    let ro_addr = share_u64(&w, ro.addr() as u64)?;

    let data: Vec<u8> = (0..REGION).map(|i| pattern(me, 3, i)).collect();
    for t in 0..n {
        let at = RemotePtr::new(t, rw_addr[t] as usize + me * REGION);
        w.put(at, &data)?;
        let mut back = vec![0u8; REGION];
        w.get(at, &mut back)?;
        assert_eq!(back, data, "private put/get round trip with rank {t}");
        let mut stack = [0u8; 512];
        w.get(RemotePtr::new(t, ro_addr[t] as usize), &mut stack)?;
        assert!(stack.iter().enumerate().all(|(i, &b)| b == pattern(t, 2, i)), "read-only stack buffer of rank {t}");
        // The target's protection holds: no write to read-only memory, nothing past the end.
        let e = w.put(RemotePtr::new(t, ro_addr[t] as usize), &[1]).unwrap_err();
        assert!(matches!(e, Error::Protection { .. }), "{e}");
        // An implicit put is refused at once, or — when only the target can check it (another
        // host) — by the flush that completes it; the refusal is reported once.
        let e = w.put_nbi(RemotePtr::new(t, ro_addr[t] as usize), &[1]).and_then(|()| w.flush(t)).unwrap_err();
        assert!(matches!(e, Error::Protection { .. }), "implicit put to read-only memory: {e}");
        w.flush(t)?;
        let e = w.get(RemotePtr::new(t, ro_addr[t] as usize + 500), &mut [0u8; 13]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "{e}");
        let e = w.put(RemotePtr::new(t, rw_addr[t] as usize + n * REGION), &[1]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "{e}");
        if t != me {
            let (p, _) = w.explain(at, 8, "put")?;
            assert!(private_protocols(&w, t, "put").iter().any(|n| n == p.name()), "{} under this registration strategy", p.name());
        }
    }
    w.barrier()?;
    let mut local = vec![0u8; n * REGION];
    rw.read(0, &mut local);
    for src in 0..n {
        assert!(
            local[src * REGION..(src + 1) * REGION].iter().enumerate().all(|(i, &b)| b == pattern(src, 3, i)),
            "rank {me}: region of {src}"
        );
    }
    // After unexposing, the memory is out of reach and errors say so.
    w.barrier()?;
    drop(ro);
    w.barrier()?;
    let e = w.get(RemotePtr::new((me + 1) % n, ro_addr[(me + 1) % n] as usize), &mut [0u8; 8]).unwrap_err();
    assert!(matches!(e, Error::NotExposed { .. }), "{e}");
    w.barrier()?;
    drop(rw);
    w.finalize()
}

pub fn atomics() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    // Page 0: counters; page 1: marked read-only (R, no W) by its owner, for the fetch contract.
    let seg = w.alloc_segment(2 * 4096)?;
    let mut private = vec![0u64; 8];
    // SAFETY: `private` outlives the exposure (dropped before it below).
    let exposed = unsafe { w.expose_raw(private.as_mut_ptr() as *mut u8, 64, Prot::ReadWrite)? };
    let paddr = share_u64(&w, exposed.addr() as u64)?;
    let read_only = [0x5eed_0000 + me as u64; 4];
    // SAFETY: the words' own bytes, borrowed for as long as `read_only` lives.
    let ro = w.expose_read_only(unsafe { std::slice::from_raw_parts(read_only.as_ptr() as *const u8, 32) })?;
    let ro_addr = share_u64(&w, ro.addr() as u64)?;
    // SAFETY: word 0 of page 1 of our own segment, before anyone reads it (barrier below).
    unsafe { std::ptr::write_volatile(seg.as_ptr().add(4096) as *mut u64, 0xfee1_0000 + me as u64) };
    w.assoc_pages(seg.as_ptr().wrapping_add(4096), 4096, Actions::R, None)?;
    w.barrier()?;
    const ITERS: u64 = 1500; // enough contention to expose a non-atomic mix of local and remote atomics

    // fetch-add from every rank on rank 0's segment and on rank 0's private memory.
    let counter = seg.remote(0, 0);
    let pcounter = RemotePtr::new(0, paddr[0] as usize);
    let mut seen = Vec::new();
    for _ in 0..ITERS {
        seen.push(w.fetch_add(counter, 1)?);
        w.add(pcounter, 3)?;
    }
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "tickets increase");
    w.barrier()?;
    assert_eq!(w.fetch(counter)?, ITERS * n as u64, "segment fetch-add lost updates");
    assert_eq!(w.fetch(pcounter)?, 3 * ITERS * n as u64, "private-memory fetch-add lost updates");

    // 32-bit atomics on the two halves of one 64-bit word, from every rank at once, on rank
    // 0's segment and private memory: each half counts exactly its own increments (a carry or
    // a torn update of one would show in the other), and tickets increase.
    for (what, base) in [("segment", seg.remote(0, 256)), ("private memory", RemotePtr::new(0, paddr[0] as usize + 32))] {
        let (low, high) = (base, RemotePtr::new(base.rank, base.addr + 4));
        let mut tickets = Vec::new();
        for _ in 0..ITERS {
            tickets.push(w.fetch_add_u32(low, 1)?);
            w.fetch_add_u32(high, 2)?;
        }
        assert!(tickets.windows(2).all(|p| p[0] < p[1]), "32-bit tickets increase ({what})");
        w.barrier()?;
        assert_eq!(w.fetch_u32(low)?, ITERS as u32 * n as u32, "32-bit fetch-add lost updates ({what}, low half)");
        assert_eq!(w.fetch_u32(high)?, 2 * ITERS as u32 * n as u32, "32-bit fetch-add lost updates ({what}, high half)");
        w.barrier()?;
        if me == 0 {
            // Wrapping at 32 bits leaves the neighbour alone; swap and compare-and-swap too.
            let before_high = w.fetch_u32(high)?;
            assert_eq!(w.swap_u32(low, u32::MAX - 1)?, ITERS as u32 * n as u32);
            assert_eq!(w.fetch_add_u32(low, 5)?, u32::MAX - 1);
            assert_eq!(w.fetch_u32(low)?, 3, "a 32-bit add wraps at 32 bits");
            assert_eq!(w.compare_swap_u32(low, 4, 9)?, 3, "a failed 32-bit compare-and-swap returns the value");
            assert_eq!(w.compare_swap_u32(low, 3, 9)?, 3);
            assert_eq!(w.fetch_u32(high)?, before_high, "the neighbouring int is untouched ({what})");
            assert_eq!(w.fetch(base)?, (before_high as u64) << 32 | 9, "the word holds both halves ({what})");
            let e = w.fetch_add_u32(RemotePtr::new(0, base.addr + 2), 1).unwrap_err();
            assert!(matches!(e, Error::Misaligned { .. }), "a 32-bit atomic at a 2-byte offset ({what}): {e}");
        }
        w.barrier()?;
    }

    // A compare-and-swap lock protecting a non-atomic read-modify-write on rank n-1.
    let lock = seg.remote(n - 1, 64);
    let value = seg.remote(n - 1, 128);
    for _ in 0..100 {
        while w.compare_swap(lock, 0, me as u64 + 1)? != 0 {
            w.progress();
        }
        let mut v = [0u8; 8];
        w.get(value, &mut v)?;
        w.put(value, &(u64::from_le_bytes(v) + 1).to_le_bytes())?;
        assert_eq!(w.swap(lock, 0)?, me as u64 + 1, "lock held by us");
    }
    w.barrier()?;
    assert_eq!(w.fetch(value)?, 100 * n as u64, "the cswap lock serialized every increment");

    // swap / cswap semantics on private memory of the right neighbour, word `me`... one word
    // per rank so the checks are deterministic.
    let right = (me + 1) % n;
    let word = RemotePtr::new(right, paddr[right] as usize + 8);
    if me == 0 {
        assert_eq!(w.swap(word, 42)?, 0);
        assert_eq!(w.compare_swap(word, 41, 7)?, 42, "failed cswap returns current value");
        assert_eq!(w.compare_swap(word, 42, 7)?, 42);
        assert_eq!(w.fetch(word)?, 7);
    }
    // A fetch is a read: read permission suffices (a read-only exposure, a segment page marked
    // R without W), as for MPI_Fetch_and_op with MPI_NO_OP. Every other atomic writes and needs
    // read-write: refused with a protection error, the word unchanged.
    for (t, &ro_at) in ro_addr.iter().enumerate() {
        let ro_word = RemotePtr::new(t, ro_at as usize + 8);
        let marked = seg.remote(t, 4096);
        assert_eq!(w.fetch(ro_word)?, 0x5eed_0000 + t as u64, "fetch from rank {t}'s read-only exposure");
        assert_eq!(w.fetch(marked)?, 0xfee1_0000 + t as u64, "fetch from rank {t}'s page marked R");
        for at in [ro_word, marked] {
            for op in [AtomicOp::FetchAdd(1), AtomicOp::Swap(1), AtomicOp::CompareSwap { expected: 0, new: 1 }] {
                let e = w.atomic(at, op).unwrap_err();
                assert!(matches!(e, Error::Protection { .. }), "{op:?} on read-only memory of rank {t}: {e}");
            }
        }
        assert_eq!(w.fetch(ro_word)?, 0x5eed_0000 + t as u64, "rank {t}'s read-only word unchanged");
        assert_eq!(w.fetch(marked)?, 0xfee1_0000 + t as u64, "rank {t}'s marked word unchanged");
    }
    // Misaligned and out-of-range atomics are refused.
    let e = w.fetch_add(seg.remote(right, 3), 1).unwrap_err();
    assert!(matches!(e, Error::Misaligned { .. }), "{e}");
    let e = w.fetch_add(RemotePtr::new(right, paddr[right] as usize + 64), 1).unwrap_err();
    assert!(matches!(e, Error::NotExposed { .. }), "{e}");
    // Server-based atomics: every atomic on another rank's word went to that rank's CPU.
    if std::env::var("ACTIVERMA_ATOMICS").is_ok_and(|v| v == "target") && me != 0 {
        let count = |name: &str| w.counters().snapshot().into_iter().find(|&(k, _)| k == name).map_or(0, |(_, v)| v);
        assert_eq!(count("atomic_rma"), 0, "rank {me}: no one-sided atomic under ACTIVERMA_ATOMICS=target");
        assert!(count("atomic_am") >= 3 * ITERS, "rank {me}: {} atomics run by their target", count("atomic_am"));
    }
    w.barrier()?;
    drop(ro);
    drop(exposed);
    drop(private);
    w.finalize()
}

/// One-sided means the target's code takes no part: every rank puts data, fences, puts a flag
/// into its right neighbour's segment, then spins on its own flag without calling the runtime.
/// The data must be there once the flag is (fence ordering), and nothing may stall.
pub fn passive_target_spins() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seg = w.alloc_segment(64 * 1024)?;
    let right = (me + 1) % n;
    for round in 1..=20u64 {
        let data: Vec<u8> = (0..4000).map(|i| pattern(me, round as usize, i)).collect();
        w.put_nbi(seg.remote(right, 64), &data)?;
        w.fence()?;
        w.put(seg.remote(right, 0), &round.to_le_bytes())?;
        let flag = seg.as_ptr() as *const std::sync::atomic::AtomicU64;
        let started = std::time::Instant::now();
        // SAFETY: the flag word lies in our own segment; our left neighbour writes it.
        while unsafe { &*flag }.load(std::sync::atomic::Ordering::Acquire) != round {
            assert!(started.elapsed().as_secs() < 30, "round {round}: the flag never arrived (one-sided put stalled)");
            std::hint::spin_loop();
        }
        let left = (me + n - 1) % n;
        let mut got = vec![0u8; 4000];
        seg.read_local(64, &mut got);
        assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(left, round as usize, i)), "round {round}: data before the fenced flag");
        w.barrier()?;
    }
    w.finalize()
}

/// Large transfers to private memory: across hosts, from ACTIVERMA_RMA_RENDEZVOUS_MIN (256 KiB)
/// on, a rendezvous (the target registers its exposure with the conduit) and one one-sided
/// move (`put_rma_rendezvous`); on one host the usual private paths. Data arrives intact both ways,
/// protection and bounds still hold, and an exposure withdrawn and exposed anew is reached
/// again (its conduit registration went and came back).
pub fn private_large_transfers() -> Result<()> {
    const BIG: usize = 300 * 1024 + 77; // above the default rendezvous size, not a page multiple
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let strategy = std::env::var("ACTIVERMA_REGISTRATION").unwrap_or_default();
    let min = std::env::var("ACTIVERMA_RMA_RENDEZVOUS_MIN").unwrap_or_else(|_| "256K".into());
    let rendezvous_across = !matches!(strategy.as_str(), "bounce" | "part") && min != "0";
    let mut ro_buf: Vec<u8> = (0..BIG).map(|i| pattern(me, 5, i)).collect();
    let ro = w.expose_read_only(&ro_buf)?;
    let ro_addr = share_u64(&w, ro.addr() as u64)?;
    for round in 0..2usize {
        let mut rw_buf = vec![0u8; n * BIG];
        let rw = w.expose(&mut rw_buf, Prot::ReadWrite)?;
        let rw_addr = share_u64(&w, rw.addr() as u64)?;
        let data: Vec<u8> = (0..BIG).map(|i| pattern(me, 6 + round, i)).collect();
        for k in 1..=n {
            let t = (me + k) % n; // others first, ourselves last
            let at = RemotePtr::new(t, rw_addr[t] as usize + me * BIG);
            if t != me {
                let (p, _) = w.explain(at, BIG, "put")?;
                let across = if rendezvous_across { "put_rma_rendezvous" } else { "put_am" };
                let want = expect_protocol(&w, t, "", across);
                assert!(want.is_empty() || p.name() == want, "rank {me} -> {t}: {} for {BIG} B, expected {want}", p.name());
            }
            w.put(at, &data)?;
            let mut back = vec![0u8; BIG];
            w.get(at, &mut back)?;
            assert!(back == data, "round {round}: {BIG} B put/get round trip with rank {t}");
            let mut theirs = vec![0u8; BIG];
            w.get(RemotePtr::new(t, ro_addr[t] as usize), &mut theirs)?;
            assert!(theirs.iter().enumerate().all(|(i, &b)| b == pattern(t, 5, i)), "rank {t}'s read-only buffer");
            let e = w.put(RemotePtr::new(t, ro_addr[t] as usize), &data).unwrap_err();
            assert!(matches!(e, Error::Protection { .. }), "large put to read-only memory: {e}");
            let e = w.get(RemotePtr::new(t, rw_addr[t] as usize + (n - 1) * BIG + 1), &mut back).unwrap_err();
            assert!(matches!(e, Error::NotExposed { .. }), "large get past the end: {e}");
        }
        w.barrier()?;
        let mut local = vec![0u8; n * BIG];
        rw.read(0, &mut local);
        for src in 0..n {
            let got = &local[src * BIG..(src + 1) * BIG];
            assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(src, 6 + round, i)), "rank {me}: round {round}, region of {src}");
        }
        w.barrier()?;
        rw.unexpose()?;
        w.barrier()?;
        // Withdrawn: a large access now fails clearly (no stale registration reaches it).
        let t = (me + 1) % n;
        let e = w.get(RemotePtr::new(t, rw_addr[t] as usize), &mut vec![0u8; BIG]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "round {round}: large get after unexpose: {e}");
        w.barrier()?;
    }
    drop(ro);
    ro_buf[0] ^= 1; // the buffer stays ours and alive until here
    w.finalize()
}
