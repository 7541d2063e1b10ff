//! The landing zone of buffered and pipelined transfers (proto's landing.rs), under what can
//! break it: more non-blocking transfers to one target than an origin has slots there (waited
//! in any order), several threads of one rank sharing its slots, every origin at once, and a
//! zone small enough that every transfer crosses many slots. Every byte arrives; the chunks
//! went through the zone exactly when the job has one.

use super::{offer, pattern, Offered};
use activerma::{Error, RemotePtr, Result, StridedPattern, Transfer, World};

/// Bytes of target memory each origin owns (two threads take half each).
const REGION: usize = 1 << 20;
/// Non-blocking transfers in flight to one target: more than the 4 slots an origin has there.
const IN_FLIGHT: usize = 10;
/// Their size: a few pages, odd, so that slot-sized chunks end with a partial one.
const NB: usize = 40_003;

fn counter(w: &World, name: &str) -> u64 {
    w.counters().snapshot().iter().find(|&&(n, _)| n == name).map(|&(_, v)| v).unwrap()
}

pub fn landing_zone() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let mut private = vec![0u8; n * REGION];
    let read_only = vec![0u8; 4096];
    let Offered { exposed, ro, seg, priv_addr, .. } = offer(&w, &mut private, &read_only, n * REGION)?;
    w.barrier()?;
    let landed_before = (counter(&w, "landed_put"), counter(&w, "landed_get"));

    for (p, protocol) in [Transfer::Buffered, Transfer::Pipelined].into_iter().enumerate() {
        for t in (0..n).filter(|&t| t != me) {
            for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_addr[t] as usize)] {
                let at = |k: usize| RemotePtr::new(t, base + me * REGION + 1 + k * (NB + 5));
                let parts: Vec<Vec<u8>> = (0..IN_FLIGHT).map(|k| (0..NB).map(|i| pattern(me + 31 * k, t + 3 * p, i)).collect()).collect();
                // Puts in flight, waited in reverse order.
                let puts: Vec<_> = parts.iter().enumerate().map(|(k, d)| w.put_nb_by(protocol, at(k), d)).collect::<Result<_>>()?;
                for h in puts.into_iter().rev() {
                    assert_eq!(h.wait()?, protocol);
                }
                // Gets in flight: every one started before any is waited for, then waited
                // last first (the first ones hold the slots).
                let mut backs = vec![vec![0u8; NB]; IN_FLIGHT];
                let mut gets = Vec::new();
                for (k, b) in backs.iter_mut().enumerate() {
                    gets.push(w.get_nb_by(protocol, at(k), b)?);
                }
                for g in gets.into_iter().rev() {
                    assert_eq!(g.wait()?, protocol);
                }
                for (k, (back, part)) in backs.iter().zip(&parts).enumerate() {
                    assert!(
                        back == part,
                        "rank {me}: {} transfer {k} of {IN_FLIGHT} in flight with rank {t}'s {kind} memory",
                        protocol.name()
                    );
                }
            }
        }
    }
    w.barrier()?;

    // Strided transfers (their pieces in groups of a slot): a 2-D patch of 40 rows of 1000
    // bytes with gaps, several in flight to one target, waited last first; the gaps stay
    // untouched on both sides.
    let patch = StridedPattern::new(1000, vec![40], vec![1500], vec![1003])?;
    let extent = patch.local_extent().unwrap();
    for (p, protocol) in [Transfer::Buffered, Transfer::Pipelined].into_iter().enumerate() {
        for t in (0..n).filter(|&t| t != me) {
            for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_addr[t] as usize)] {
                let at = |k: usize| RemotePtr::new(t, base + me * REGION + 1 + k * 61_000);
                w.put(RemotePtr::new(t, base + me * REGION), &vec![0u8; REGION / 2])?;
                let sources: Vec<Vec<u8>> = (0..6).map(|k| (0..extent).map(|i| pattern(me + 11 * k, t + 5 * p, i)).collect()).collect();
                let puts: Vec<_> =
                    sources.iter().enumerate().map(|(k, src)| w.put_strided_nb_by(protocol, at(k), &patch, src)).collect::<Result<_>>()?;
                for h in puts.into_iter().rev() {
                    assert_eq!(h.wait()?, protocol);
                }
                let mut backs = vec![vec![0xeeu8; extent]; 6];
                let mut gets = Vec::new();
                for (k, b) in backs.iter_mut().enumerate() {
                    gets.push(w.get_strided_nb_by(protocol, at(k), &patch, b)?);
                }
                for g in gets.into_iter().rev() {
                    assert_eq!(g.wait()?, protocol);
                }
                for (k, (back, src)) in backs.iter().zip(&sources).enumerate() {
                    let mut expected = vec![0xeeu8; extent];
                    patch.for_each(|_, l| {
                        expected[l..l + patch.piece].copy_from_slice(&src[l..l + patch.piece]);
                        Ok::<(), Error>(())
                    })?;
                    assert!(*back == expected, "rank {me}: {} strided transfer {k} with rank {t}'s {kind} memory", protocol.name());
                }
            }
        }
    }
    w.barrier()?;

    // Two threads of every rank at once, each with its half of its region at every other rank,
    // blocking transfers by both protocols, each checked by a zero-copy get.
    std::thread::scope(|s| -> Result<()> {
        let threads: Vec<_> = (0..2)
            .map(|half| {
                let (w, seg, priv_addr) = (&w, &seg, &priv_addr);
                s.spawn(move || -> Result<()> {
                    for round in 0..6 {
                        let protocol = if round % 2 == 0 { Transfer::Pipelined } else { Transfer::Buffered };
                        let len = [100_000, 3, 70_000][round % 3];
                        for t in (0..n).filter(|&t| t != me) {
                            for base in [seg.remote(t, 0).addr, priv_addr[t] as usize] {
                                let at = RemotePtr::new(t, base + me * REGION + half * REGION / 2);
                                let data: Vec<u8> = (0..len).map(|i| pattern(me + 7 * half, t + round, i)).collect();
                                w.put_by(protocol, at, &data)?;
                                let mut seen = vec![0u8; len];
                                w.get(at, &mut seen)?;
                                assert!(seen == data, "rank {me} thread {half}: {} put of {len} B to rank {t}", protocol.name());
                                let mut back = vec![0u8; len];
                                w.get_by(protocol, at, &mut back)?;
                                assert!(back == data, "rank {me} thread {half}: {} get of {len} B from rank {t}", protocol.name());
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        threads.into_iter().try_for_each(|h| h.join().expect("a transfer thread panicked"))
    })?;

    // Through the zone exactly when the job has one (and another rank to send to).
    let landed = (counter(&w, "landed_put") - landed_before.0, counter(&w, "landed_get") - landed_before.1);
    if w.config().landing_zone_bytes()? > 0 && n > 1 {
        assert!(landed.0 > 0 && landed.1 > 0, "rank {me}: buffered transfers with a landing zone did not use it: {landed:?}");
    } else {
        assert_eq!(landed, (0, 0), "rank {me}: landed chunks without a landing zone");
    }

    w.barrier()?;
    drop((exposed, ro));
    w.finalize()
}
