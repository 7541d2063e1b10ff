//! Contiguous transfers by every transfer protocol (`put_by` / `get_by`: zero-copy, buffered,
//! pipelined, dynamic registration, and `auto`'s choice), to segments and to exposed private
//! memory of every rank: every byte arrives, the bytes around it stay untouched, the protocol
//! that moved each transfer is the one returned and counted, and bad input is refused by each
//! protocol with the error the plain calls give, writing nothing. Non-blocking strided gets
//! and puts (`get_strided_nb_by`, `put_strided_nb_by`) by every protocol move exactly the
//! pattern's pieces.

use super::{offer, pattern, same_host, Offered};
use activerma::{Error, RemotePtr, Result, StridedPattern, Transfer, World};

/// Bytes of target memory each origin owns.
const REGION: usize = 320 << 10;
/// Sizes: a word, an odd size of a few pages, and one past ACTIVERMA_PIPELINE_MIN's default
/// (256K) that spans several pipeline chunks with a partial last one.
const SIZES: [usize; 3] = [8, 4099, 300_003];

fn counters(w: &World, t: Transfer) -> (u64, u64) {
    let name = match t {
        Transfer::Buffered => "transfer_buffered",
        Transfer::Pipelined => "transfer_pipelined",
        Transfer::DynamicRegistration => "transfer_dynamic",
        Transfer::ZeroCopy | Transfer::Auto => "transfer_zero_copy",
    };
    let snap = w.counters().snapshot();
    let get = |k: &str| snap.iter().find(|&&(n, _)| n == k).map(|&(_, v)| v).unwrap();
    (get(name), get(&format!("{name}_bytes")))
}

/// The protocols `auto` may pick for private memory, by where the target is and the
/// registration strategy (the core decides; this test only checks it is one of them).
fn auto_private_ok(used: Transfer, own: bool, same_host: bool, len: usize) -> bool {
    let strategy = std::env::var("ACTIVERMA_REGISTRATION").unwrap_or_default();
    match (own, same_host, strategy.as_str()) {
        (true, _, _) | (false, true, "" | "none" | "pin-all") => used == Transfer::ZeroCopy,
        (false, true, "bounce") => used == if len >= 256 << 10 { Transfer::Pipelined } else { Transfer::Buffered },
        _ => used != Transfer::Auto,
    }
}

/// Whether a strided transfer forced to `protocol` moved as it should have (`own`: to this
/// rank, where buffering through the target is a copy by our own CPU).
fn strided_moved_as(protocol: Transfer, used: Transfer, own: bool) -> bool {
    match protocol {
        Transfer::Buffered | Transfer::Pipelined if own => used == Transfer::ZeroCopy,
        Transfer::Buffered | Transfer::Pipelined => used == protocol,
        // A pin refused by the memlock limit falls back to pipelined.
        Transfer::DynamicRegistration => used == protocol || used == Transfer::Pipelined,
        _ => used != Transfer::Auto,
    }
}

pub fn transfer_protocols() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let mut private = vec![0u8; n * REGION];
    let read_only = vec![7u8; 4096];
    let Offered { exposed, ro, seg, priv_addr, ro_addr } = offer(&w, &mut private, &read_only, n * REGION)?;
    w.barrier()?;

    for (p, &protocol) in Transfer::ALL.iter().enumerate() {
        for (t, &priv_base) in priv_addr.iter().enumerate() {
            for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_base as usize)] {
                for &len in &SIZES {
                    // One byte in, so nothing is aligned; a guard byte on each side.
                    let at = base + me * REGION + 1;
                    let zeros = vec![0u8; len + 2];
                    w.put(RemotePtr::new(t, at - 1), &zeros)?;
                    let data: Vec<u8> = (0..len).map(|i| pattern(me, t + 7 * p, i + len)).collect();
                    let used = w.put_by(protocol, RemotePtr::new(t, at), &data)?;
                    let mut expected = vec![0u8];
                    expected.extend_from_slice(&data);
                    expected.push(0);
                    let mut seen = vec![0u8; len + 2];
                    w.get(RemotePtr::new(t, at - 1), &mut seen)?;
                    assert!(
                        seen == expected,
                        "rank {me}: {} put of {len} B into rank {t}'s {kind} memory (moved {:?})",
                        protocol.name(),
                        used
                    );
                    let mut back = vec![0u8; len];
                    let used_get = w.get_by(protocol, RemotePtr::new(t, at), &mut back)?;
                    assert!(
                        back == data,
                        "rank {me}: {} get of {len} B from rank {t}'s {kind} memory (moved {:?})",
                        protocol.name(),
                        used_get
                    );
                    for u in [used, used_get] {
                        assert_ne!(u, Transfer::Auto, "the protocol that moved it is named");
                        let own = t == me;
                        let ok = match protocol {
                            Transfer::Buffered | Transfer::Pipelined if own => u == Transfer::ZeroCopy,
                            Transfer::Buffered | Transfer::Pipelined => u == protocol,
                            // A pin refused by the memlock limit falls back to pipelined.
                            Transfer::DynamicRegistration => u == protocol || u == Transfer::Pipelined,
                            _ if kind == "segment" => u == Transfer::ZeroCopy,
                            Transfer::Auto => auto_private_ok(u, own, same_host(&w, t), len),
                            _ => u != Transfer::Pipelined,
                        };
                        assert!(ok, "rank {me}: {} to rank {t}'s {kind} memory ({len} B) moved as {u:?}", protocol.name());
                    }
                }
            }
        }
    }

    // Non-blocking: three puts in flight to each rank, waited in reverse order; then three gets,
    // tested until complete and waited out of order; one more get dropped without a wait
    // (dropping completes it: its bytes are there afterwards).
    const NB: usize = 70_001;
    for (p, &protocol) in Transfer::ALL.iter().enumerate() {
        for (t, &priv_base) in priv_addr.iter().enumerate() {
            for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_base as usize)] {
                let at = |k: usize| RemotePtr::new(t, base + me * REGION + 1 + k * 80_000);
                let parts: Vec<Vec<u8>> = (0..3).map(|k| (0..NB).map(|i| pattern(me + 17 * k, t + 5 * p, i)).collect()).collect();
                let puts: Vec<_> = parts.iter().enumerate().map(|(k, d)| w.put_nb_by(protocol, at(k), d)).collect::<Result<_>>()?;
                for h in puts.into_iter().rev() {
                    assert_ne!(h.wait()?, Transfer::Auto);
                }
                let mut backs = vec![vec![0u8; NB]; 3];
                let mut gets = Vec::new();
                for (k, b) in backs.iter_mut().enumerate() {
                    gets.push(w.get_nb_by(protocol, at(k), b)?);
                }
                let mut rounds = 0u64;
                while !gets.iter_mut().map(|g| g.test()).collect::<Result<Vec<bool>>>()?.into_iter().all(|d| d) {
                    rounds += 1;
                    assert!(rounds < 100_000_000, "rank {me}: non-blocking gets by {} never completed", protocol.name());
                }
                let last = gets.pop().unwrap();
                gets.insert(0, last);
                for g in gets {
                    g.wait()?;
                }
                assert!(backs == parts, "rank {me}: non-blocking {} transfers with rank {t}'s {kind} memory", protocol.name());
                let mut dropped = vec![0u8; NB];
                drop(w.get_nb_by(protocol, at(1), &mut dropped)?);
                assert!(dropped == parts[1], "rank {me}: a non-blocking {} get dropped unwaited did not complete", protocol.name());
            }
        }
    }

    // Non-blocking strided gets: a 2-D patch of odd rows with gaps on both sides, and a 3-level
    // one whose pieces are longer than a pipeline chunk, two in flight at once, tested until
    // complete; the local gaps stay untouched.
    // The third overlaps itself on the local side (stride 50 < piece 100): its gets cannot be
    // lent out one request each and run by the core's path, in order, later pieces over
    // earlier ones.
    let patterns = [
        StridedPattern::new(1000, vec![37], vec![1500], vec![1003])?,
        StridedPattern::new(70_000, vec![2, 2], vec![75_000, 150_000], vec![70_001, 140_003])?,
        StridedPattern::new(100, vec![5], vec![200], vec![50])?,
    ];
    for (p, &protocol) in Transfer::ALL.iter().enumerate() {
        for (t, &priv_base) in priv_addr.iter().enumerate() {
            for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_base as usize)] {
                let region = base + me * REGION;
                let remote: Vec<u8> = (0..300_000).map(|i| pattern(me + 3, t + 11 * p, i)).collect();
                w.put(RemotePtr::new(t, region), &remote)?;
                let mut locals: Vec<Vec<u8>> = patterns.iter().map(|s| vec![0xee; s.local_extent().unwrap() + 1]).collect();
                let mut started = Vec::new();
                for (s, local) in patterns.iter().zip(locals.iter_mut()) {
                    let len = local.len() - 1;
                    started.push(w.get_strided_nb_by(protocol, RemotePtr::new(t, region + 1), s, &mut local[..len])?);
                }
                let mut rounds = 0u64;
                while !started.iter_mut().map(|g| g.test()).collect::<Result<Vec<bool>>>()?.into_iter().all(|d| d) {
                    rounds += 1;
                    assert!(rounds < 100_000_000, "rank {me}: strided gets by {} never completed", protocol.name());
                }
                for (g, s) in started.into_iter().zip(&patterns) {
                    let used = g.wait()?;
                    let apart = s.local_strides[0] >= s.piece;
                    assert!(
                        if apart { strided_moved_as(protocol, used, t == me) } else { used != Transfer::Auto },
                        "rank {me}: {} strided get from rank {t}'s {kind} memory moved as {used:?}",
                        protocol.name()
                    );
                }
                for (s, local) in patterns.iter().zip(&locals) {
                    let mut expected = vec![0xeeu8; local.len()];
                    s.for_each(|r, l| {
                        expected[l..l + s.piece].copy_from_slice(&remote[1 + r..1 + r + s.piece]);
                        Ok::<(), Error>(())
                    })?;
                    assert!(
                        *local == expected,
                        "rank {me}: {} strided get ({} B pieces) from rank {t}'s {kind} memory",
                        protocol.name(),
                        s.piece
                    );
                }
                // Non-blocking strided puts into a zeroed region: two 2-D patches side by side
                // in flight at once, then the 3-level pattern alone; every byte of the region
                // is what the pieces put, zero elsewhere.
                for batch in [vec![(&patterns[0], 0usize), (&patterns[0], 60_000)], vec![(&patterns[1], 0)], vec![(&patterns[2], 0)]] {
                    w.put(RemotePtr::new(t, region), &vec![0u8; 300_000])?;
                    let sources: Vec<Vec<u8>> = batch
                        .iter()
                        .enumerate()
                        .map(|(k, (s, _))| (0..s.local_extent().unwrap()).map(|i| pattern(me + 29 * k, t + 13 * p, i)).collect())
                        .collect();
                    let mut started = Vec::new();
                    for ((s, off), src) in batch.iter().zip(&sources) {
                        started.push(w.put_strided_nb_by(protocol, RemotePtr::new(t, region + 1 + off), s, src)?);
                    }
                    for g in started.into_iter().rev() {
                        let used = g.wait()?;
                        assert!(
                            strided_moved_as(protocol, used, t == me),
                            "rank {me}: {} strided put to rank {t}'s {kind} memory moved as {used:?}",
                            protocol.name()
                        );
                    }
                    let mut expected = vec![0u8; 300_000];
                    for ((s, off), src) in batch.iter().zip(&sources) {
                        s.for_each(|r, l| {
                            expected[1 + off + r..1 + off + r + s.piece].copy_from_slice(&src[l..l + s.piece]);
                            Ok::<(), Error>(())
                        })?;
                    }
                    let mut seen = vec![0u8; 300_000];
                    w.get(RemotePtr::new(t, region), &mut seen)?;
                    assert!(seen == expected, "rank {me}: {} strided puts into rank {t}'s {kind} memory", protocol.name());
                }
                // Past the end of the exposure: refused.
                if kind == "private" {
                    let mut into = vec![0u8; patterns[0].local_extent().unwrap()];
                    let outside = RemotePtr::new(t, base + n * REGION - 1000);
                    let refused = w.get_strided_nb_by(protocol, outside, &patterns[0], &mut into).and_then(|g| g.wait());
                    assert!(refused.is_err(), "rank {me}: {} strided get past the end of rank {t}'s exposure", protocol.name());
                }
            }
        }
    }

    // The counters: one call and its bytes under the protocol each call returned.
    for &protocol in &Transfer::ALL {
        let t = (me + 1) % n;
        let data = vec![5u8; 70_000];
        let snapshot: Vec<(u64, u64)> = Transfer::ALL.iter().map(|&x| counters(&w, x)).collect();
        let used = w.put_by(protocol, RemotePtr::new(t, priv_addr[t] as usize + me * REGION), &data)?;
        for (i, &x) in Transfer::ALL.iter().enumerate().skip(1) {
            let (calls, bytes) = counters(&w, x);
            let grew = (calls - snapshot[i].0, bytes - snapshot[i].1);
            let want = if x == used { (1, data.len() as u64) } else { (0, 0) };
            assert_eq!(grew, want, "rank {me}: {} put moved as {used:?}: counters of {x:?}", protocol.name());
        }
    }

    // Bad input, refused the same way by every protocol, and nothing written.
    for &protocol in &Transfer::ALL {
        let t = (me + 1) % n;
        let word = [1u8; 64];
        let mut into = [0u8; 64];
        // An address in none of t's exposures: past its private buffer — unless its heap
        // (segments are exposed memory) was mapped right there, as an MPI may place it.
        let heap = seg.remote(t, 0).addr - seg.heap_offset();
        let heap_len = w.config().heap_bytes()?;
        let exposed_ranges = [(priv_addr[t] as usize, n * REGION), (ro_addr[t] as usize, 4096), (heap, heap_len)];
        let outside = [priv_addr[t] as usize + n * REGION, heap + heap_len, priv_addr[t] as usize - (1 << 20), heap - (1 << 20)]
            .into_iter()
            .map(|a| a + 4096 * 16)
            .find(|&a| exposed_ranges.iter().all(|&(s, l)| a + 64 <= s || a >= s + l))
            .expect("an address outside every exposure");
        let not_exposed = w.put_by(protocol, RemotePtr::new(t, outside), &word);
        assert!(
            matches!(not_exposed, Err(Error::NotExposed { .. })),
            "rank {me}: {} put outside every exposure: {not_exposed:?}",
            protocol.name()
        );
        let not_exposed = w.get_by(protocol, RemotePtr::new(t, outside), &mut into);
        assert!(
            matches!(not_exposed, Err(Error::NotExposed { .. })),
            "rank {me}: {} get outside every exposure: {not_exposed:?}",
            protocol.name()
        );
        let straddles = w.put_by(protocol, RemotePtr::new(t, priv_addr[t] as usize + n * REGION - 8), &word);
        assert!(straddles.is_err(), "rank {me}: {} put past the end of an exposure succeeded", protocol.name());
        let read_only_put = w.put_by(protocol, RemotePtr::new(t, ro_addr[t] as usize), &word);
        assert!(
            matches!(read_only_put, Err(Error::Protection { .. })),
            "rank {me}: {} put into read-only memory: {read_only_put:?}",
            protocol.name()
        );
        let bad_rank = w.put_by(protocol, RemotePtr::new(n + 3, 4096), &word);
        assert!(matches!(bad_rank, Err(Error::InvalidRank { .. })), "rank {me}: {} put to rank {}: {bad_rank:?}", protocol.name(), n + 3);
    }
    w.barrier()?;
    assert!(read_only.iter().all(|&b| b == 7), "rank {me}: read-only memory was written");
    // Nothing was written past any origin's region (the straddling puts were refused whole).
    drop(exposed);
    drop(ro);
    let tail_untouched = private[n * REGION - 8..].iter().all(|&b| b == 0);
    assert!(tail_untouched, "rank {me}: a refused put wrote into the last bytes of the exposure");
    w.finalize()
}
