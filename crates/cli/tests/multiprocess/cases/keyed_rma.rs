//! Keyed one-sided access to private memory of ranks on other hosts (proto/src/keyed_rma.rs):
//! the protocol, hits without messages, the target's protection, bits changed under keys held,
//! and an unexpose while origins keep putting.

use super::{pattern, same_host, share_u64};
use activerma::{Actions, Error, Prot, Protocol, RemotePtr, Result, Strategy};

/// Bytes of each target's memory one origin owns (a few buckets, fewer than f under firehose).
const SLICE: usize = 3 * 4096 + 100;

fn expect_err(r: Result<()>, what: &str, ok: impl Fn(&Error) -> bool) {
    match r {
        Err(e) if ok(&e) => {}
        other => panic!("{what}: expected the documented error, got {other:?}"),
    }
}

/// Keyed one-sided access between hosts (firehose, pin-all): a key per exposure (and under
/// firehose the origin's firehoses), then one-sided moves.
/// A second pass over the same bytes sends no message at all (every piece a hit); a put to
/// read-only memory and one past an exposure's end are refused with nothing changed; when the
/// target changes its pages' bits (waiting, or not: `assoc_pages_here`), origins holding keys
/// see the new bits and keep their firehoses; an unexpose while
/// origins keep putting ends with NotExposed for them and no byte written after it returned.
pub fn across_hosts() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    assert!(
        matches!(w.registration_strategy(), Strategy::Firehose | Strategy::PinAll),
        "run with ACTIVERMA_REGISTRATION=firehose or pin-all"
    );
    let remote: Vec<usize> = (0..n).filter(|&t| !same_host(&w, t)).collect();
    let mut rw = vec![0u8; n * SLICE];
    let rw_ptr = rw.as_mut_ptr();
    let ex = w.expose(&mut rw, Prot::ReadWrite)?;
    let ro_bytes: Vec<u8> = (0..4096).map(|i| pattern(me, 3, i)).collect();
    let ro = w.expose_read_only(&ro_bytes)?;
    let rw_at = share_u64(&w, ex.addr() as u64)?;
    let ro_at = share_u64(&w, ro.addr() as u64)?;
    let mine = |t: usize| RemotePtr::new(t, rw_at[t] as usize + me * SLICE);
    for &t in &remote {
        assert_eq!(w.explain(mine(t), SLICE, "put")?.0, Protocol::PutKeyedRma, "rank {me} -> rank {t}");
        assert_eq!(w.explain(mine(t), SLICE, "get")?.0, Protocol::GetKeyedRma, "rank {me} -> rank {t}");
    }
    w.barrier()?;

    // 1. Two passes: keys and moves first, then hits only.
    let mut back = vec![0u8; SLICE];
    for pass in 0..2 {
        // (Every rank's moves of pass 0 are answered before the barrier: what we send to a
        // rank in pass 1 is then our own traffic, not replies to its requests.)
        w.barrier()?;
        let before: Vec<_> = remote.iter().map(|&t| w.traffic_to(t)).collect::<Result<_>>()?;
        let data: Vec<u8> = (0..SLICE).map(|i| pattern(me, 10 + pass, i)).collect();
        for &t in &remote {
            w.put(mine(t), &data)?;
            w.get(mine(t), &mut back)?;
            assert!(back == data, "rank {me}: pass {pass}: read back from rank {t} differs");
        }
        for (i, &t) in remote.iter().enumerate() {
            let after = w.traffic_to(t)?;
            assert!(after.rma_ops > before[i].rma_ops, "rank {me} -> rank {t}: the data did not move one-sided");
            if pass == 1 {
                assert_eq!(after.am_fragments, before[i].am_fragments, "rank {me} -> rank {t}: a firehose hit sent a message");
            }
        }
    }
    w.barrier()?;

    // 2. Bad input: refused, nothing changed.
    for &t in &remote {
        let at = RemotePtr::new(t, ro_at[t] as usize);
        expect_err(w.put(at, &[1u8; 8]), "a put into read-only memory", |e| matches!(e, Error::Protection { .. }));
        let mut got = vec![0u8; 4096];
        w.get(at, &mut got)?;
        assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(t, 3, i)), "rank {me}: read-only memory of rank {t}");
        let past = RemotePtr::new(t, rw_at[t] as usize + n * SLICE - 10);
        expect_err(w.put(past, &[2u8; 20]), "a put past the exposure's end", |e| matches!(e, Error::NotExposed { .. }));
        let mut tail = [0u8; 10];
        expect_err(w.get(past, &mut [0u8; 20]), "a get past the exposure's end", |e| matches!(e, Error::NotExposed { .. }));
        w.get(past, &mut tail)?;
    }
    w.barrier()?;
    // SAFETY: nobody writes our memory between the barriers; only reading it here.
    let now = unsafe { std::slice::from_raw_parts(rw_ptr, n * SLICE) };
    for o in (0..n).filter(|&o| !same_host(&w, o)) {
        assert!((0..SLICE).all(|i| now[o * SLICE + i] == pattern(o, 11, i)), "rank {me}: the slice of rank {o} is not what it put last");
    }
    w.barrier()?;

    // 3. The target's bits change under keys already held: read-only, then read-write again.
    // The memory stays pinned meanwhile, so origins keep their firehoses: a move here would
    // mean one was dropped while the target still counts it pinned (pins it never released).
    let moves_sent = || w.firehose_stats().map(|s| s.moves_sent.load(std::sync::atomic::Ordering::Relaxed));
    let moves_before = moves_sent();
    w.assoc_pages(rw_ptr, n * SLICE, Actions::R, None)?;
    w.barrier()?;
    for &t in &remote {
        expect_err(w.put(mine(t), &[3u8; 16]), "a put after the target made its pages read-only", |e| {
            matches!(e, Error::Protection { .. })
        });
        w.get(mine(t), &mut back)?;
    }
    w.barrier()?;
    w.assoc_pages(rw_ptr, n * SLICE, Actions::R | Actions::W, None)?;
    w.barrier()?;
    for &t in &remote {
        w.put(mine(t), &[4u8; 16])?;
        w.get(mine(t), &mut back[..16])?;
        assert_eq!(&back[..16], &[4u8; 16], "rank {me}: put after the pages became writable again (rank {t})");
    }
    assert_eq!(moves_sent(), moves_before, "rank {me}: a change of bits cost firehoses (moved again)");
    w.barrier()?;

    // 3b. The same change without waiting for the origins (what a log handler may call): each
    // origin on another host sees it once it has run the revocation, within its next accesses.
    w.assoc_pages_here(rw_ptr, n * SLICE, Actions::R, None)?;
    w.barrier()?;
    for &t in &remote {
        let started = std::time::Instant::now();
        while w.put(mine(t), &[4u8; 16]).is_ok() {
            assert!(started.elapsed().as_secs() < 10, "rank {me}: puts into rank {t} still pass 10 s after its pages became read-only");
            w.progress();
        }
        expect_err(w.put(mine(t), &[4u8; 16]), "a put after assoc_pages_here made the pages read-only", |e| {
            matches!(e, Error::Protection { .. })
        });
    }
    w.barrier()?;
    w.assoc_pages(rw_ptr, n * SLICE, Actions::R | Actions::W, None)?;
    w.barrier()?;

    // 4. Rank 0 unexposes while the ranks on other hosts keep putting into it.
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        ex.unexpose()?;
        rw.fill(0xee);
        std::thread::sleep(std::time::Duration::from_millis(100));
        w.progress();
        assert!(rw.iter().all(|&b| b == 0xee), "rank 0: a byte was written after unexpose returned");
    } else if !same_host(&w, 0) {
        let started = std::time::Instant::now();
        let data = [5u8; 64];
        let mut puts = 0u64;
        loop {
            match w.put(mine(0), &data) {
                Ok(()) => puts += 1,
                Err(Error::NotExposed { .. }) => break,
                Err(e) => panic!("rank {me}: put during rank 0's unexpose: {e}"),
            }
            assert!(started.elapsed().as_secs() < 30, "rank {me}: puts into rank 0 still succeed 30 s later ({puts} puts)");
        }
        expect_err(w.put(mine(0), &data), "a put after the unexpose", |e| matches!(e, Error::NotExposed { .. }));
        drop(ex);
    } else {
        drop(ex);
    }
    w.barrier()?;
    ro.unexpose()?;
    w.barrier()?;
    assert_eq!(w.registration_stats().pinned_now(), 0, "rank {me}: unexpose unpinned everything");
    w.finalize()
}
