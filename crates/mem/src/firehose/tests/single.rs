//! One client thread: hits, misses, victim reuse, moves with replacements, pending hits,
//! try/partial, target callbacks, errors, the region flavour, and random workloads checked
//! after every operation.

use super::fakes::{cfg, page, Pair, LOCAL_BASE, REMOTE_BASE};
use super::Rng;
use crate::firehose::{CountingPinner, Firehose, FirehoseState, LocalPin, RemotePin, TargetCallback};
use activerma_core::Error;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

fn pair(f: usize, victims: usize) -> Pair {
    Pair::new(cfg(0, 2, f, victims, f), cfg(1, 2, f, victims, f), false)
}

fn lp(i: usize) -> usize {
    LOCAL_BASE + i * page()
}

fn rp(i: usize) -> usize {
    REMOTE_BASE + i * page()
}

#[test]
fn firehose_local_hit_miss_victim_reuse() {
    let p = pair(4, 4);
    let fh = &p.origin;
    let a = fh.local_pin(lp(0), 100).unwrap();
    assert_eq!((p.opin.pin_calls(), p.opin.live()), (1, 1));
    fh.release_local(a).unwrap();
    assert_eq!(p.opin.live(), 1, "a released bucket stays pinned as a victim");
    let a = fh.local_pin(lp(0) + 10, 10).unwrap();
    assert_eq!(p.opin.pin_calls(), 1, "re-pinning a victim costs nothing");
    assert_eq!(fh.stats().victim_reuses.load(Ordering::Relaxed), 1);
    fh.release_local(a).unwrap();
    // Four more buckets: Lh 4 + V 1 > MAXVICTIM 4, so the victim is unpinned (lazily, now).
    let b = fh.local_pin(lp(10), 4 * page()).unwrap();
    assert_eq!(p.opin.pin_calls(), 2, "one contiguous run, one pin call");
    assert_eq!(p.opin.live(), 4);
    assert!(!p.opin.is_pinned(lp(0)));
    p.check();
    // try: a hit only.
    assert!(fh.try_local_pin(lp(0), 1).is_none());
    let t = fh.try_local_pin(lp(11), page()).expect("pinned already");
    fh.release_local(t).unwrap();
    // partial: longest pinned run inside [9, 16): buckets 10..14.
    let part = fh.partial_local_pin(lp(9), 7 * page()).expect("a run is pinned");
    assert_eq!(part.region.addr, lp(10));
    assert_eq!(part.region.len, 4 * page());
    fh.release_local(part).unwrap();
    fh.release_local(b).unwrap();
    // Too big for MAXVICTIM: a clear error, not a hang.
    assert!(matches!(fh.local_pin(lp(100), 5 * page()), Err(Error::SizeLimit(_))));
    p.check();
    assert_eq!(fh.stats().local_misses.load(Ordering::Relaxed), 2);
}

#[test]
fn firehose_remote_hit_miss_and_move_replacements() {
    let p = pair(4, 2);
    let fh = &p.origin;
    let x = fh.remote_pin(1, rp(0), 2 * page()).unwrap();
    assert_eq!(p.net.moves().len(), 1);
    assert_eq!(p.tpin.live(), 2);
    assert!(!x.target_callback_ran);
    fh.release_remote(x).unwrap();
    // A hit: no message.
    let x = fh.remote_pin(1, rp(1), 10).unwrap();
    assert_eq!(p.net.moves().len(), 1);
    assert_eq!(fh.stats().remote_hits.load(Ordering::Relaxed), 1);
    fh.release_remote(x).unwrap();
    // Fill f = 4, then a fifth bucket must move the oldest unused firehose (bucket 0).
    let y = fh.remote_pin(1, rp(2), 2 * page()).unwrap();
    fh.release_remote(y).unwrap();
    let z = fh.remote_pin(1, rp(7), 1).unwrap();
    let last = p.net.moves().pop().unwrap();
    assert_eq!(last.release, vec![rp(0)]);
    assert_eq!(last.pin, vec![rp(7)]);
    assert!(p.tpin.live() <= 4 + 2);
    p.check();
    // try / partial.
    assert!(fh.try_remote_pin(1, rp(0), 1).is_none(), "bucket 0 was moved away");
    let t = fh.try_remote_pin(1, rp(1), page()).unwrap();
    let part = fh.partial_remote_pin(1, rp(0), 4 * page()).unwrap();
    assert_eq!((part.region.addr, part.region.len), (rp(1), 3 * page()));
    for pin in [t, part, z] {
        fh.release_remote(pin).unwrap();
    }
    p.check();
    // Argument errors.
    assert!(matches!(fh.remote_pin(1, rp(0), 5 * page()), Err(Error::SizeLimit(_))));
    assert!(matches!(fh.remote_pin(0, rp(0), 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(fh.remote_pin(2, rp(0), 1), Err(Error::InvalidRank { .. })));
}

#[test]
fn firehose_move_reuses_a_target_victim() {
    // MAXVICTIM 3: the third move's release (bucket 2) is applied before its pin and must not
    // push bucket 0 out of the victim FIFO.
    let p = pair(2, 3);
    let fh = &p.origin;
    let a = fh.remote_pin(1, rp(0), 2 * page()).unwrap();
    fh.release_remote(a).unwrap();
    // f = 2: buckets 2 and 3 take the slots of 0 and 1, which the target keeps as victims.
    let b = fh.remote_pin(1, rp(2), 2 * page()).unwrap();
    fh.release_remote(b).unwrap();
    assert_eq!(p.tpin.live(), 4, "released firehoses stay pinned at the target (lazy deregistration)");
    let pins = p.tpin.pin_calls();
    let c = fh.remote_pin(1, rp(0), page()).unwrap();
    assert_eq!(p.net.moves().len(), 3, "a miss for us: one move");
    assert_eq!(p.tpin.pin_calls(), pins, "but the target re-pins nothing: bucket 0 was a victim");
    assert_eq!(p.target.stats().victim_reuses.load(Ordering::Relaxed), 1);
    fh.release_remote(c).unwrap();
    p.check();
}

#[test]
fn firehose_async_pending_hit_and_target_callback() {
    type Seen = Vec<(usize, Vec<usize>, u64)>; // (origin, pinned buckets, argument)
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s = seen.clone();
    let cb: TargetCallback = Arc::new(move |origin, pins: &[usize], arg| s.lock().unwrap().push((origin, pins.to_vec(), arg)));
    let p = Pair::with(cfg(0, 2, 4, 2, 4), cfg(1, 2, 4, 2, 4), false, CountingPinner::new(), CountingPinner::new(), Some(cb));
    let fh = &p.origin;
    let got: Arc<Mutex<Vec<RemotePin>>> = Arc::default();
    let g = got.clone();
    fh.remote_pin_async(1, rp(0), 2 * page(), Some(42), move |r| g.lock().unwrap().push(r.unwrap())).unwrap();
    // The reply waits in the queue until someone polls: the firehoses are PENDING.
    assert!(got.lock().unwrap().is_empty());
    assert_eq!(fh.try_remote_pin(1, rp(0), 1).map(|_| ()), None, "pending is not a hit for try");
    let g = got.clone();
    fh.remote_pin_async(1, rp(1), 1, None, move |r| g.lock().unwrap().push(r.unwrap())).unwrap();
    assert_eq!(p.net.moves().len(), 1, "a pending hit sends no second move");
    assert_eq!(fh.stats().remote_pending_hits.load(Ordering::Relaxed), 1);
    use crate::firehose::MoveTransport;
    p.net.poll();
    let pins = std::mem::take(&mut *got.lock().unwrap());
    assert_eq!(pins.len(), 2, "both callbacks ran on the reply");
    assert_eq!(pins.iter().filter(|p| p.target_callback_ran).count(), 1, "only the move's creator ran it");
    assert_eq!(*seen.lock().unwrap(), vec![(0, vec![rp(0), rp(1)], 42)]);
    for pin in pins {
        fh.release_remote(pin).unwrap();
    }
    // A hit runs no target callback, and says so.
    let h = fh.remote_pin_with_target_arg(1, rp(0), 1, Some(7)).unwrap();
    assert!(!h.target_callback_ran);
    assert_eq!(seen.lock().unwrap().len(), 1);
    fh.release_remote(h).unwrap();
    p.check();
}

#[test]
fn firehose_pin_failures_name_the_memlock_limit() {
    // The target can pin 3 pages only, as if RLIMIT_MEMLOCK were tiny.
    let p = Pair::with(cfg(0, 2, 4, 4, 4), cfg(1, 2, 4, 4, 4), false, CountingPinner::with_limit(3), CountingPinner::with_limit(3), None);
    let err = p.origin.remote_pin(1, rp(0), 4 * page()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::OutOfResources(_)), "{err:?}");
    assert!(text.contains("RLIMIT_MEMLOCK") && text.contains("ulimit -l"), "{text}");
    p.check();
    // Nothing is held after the failure: all f firehoses are usable again.
    let ok = p.origin.remote_pin(1, rp(0), 2 * page()).unwrap();
    p.origin.release_remote(ok).unwrap();
    let err = p.origin.local_pin(lp(0), 4 * page()).unwrap_err();
    assert!(err.to_string().contains("ulimit -l"), "{err}");
    p.check();
    // A move that cannot be sent fails its waiters and keeps the accounting exact.
    p.net.fail_sends.store(true, Ordering::Relaxed);
    assert!(matches!(p.origin.remote_pin(1, rp(9), page()), Err(Error::PeerGone { .. })));
    p.net.fail_sends.store(false, Ordering::Relaxed);
    p.check();
    let ok = p.origin.remote_pin(1, rp(9), page()).unwrap();
    p.origin.release_remote(ok).unwrap();
    p.check();
}

#[test]
fn firehose_region_flavour_buckets_of_four_pages() {
    let (o, t) = (cfg(0, 2, 16, 8, 0).with_bucket_pages(4), cfg(1, 2, 16, 8, 0).with_bucket_pages(4));
    assert_eq!((o.max_remote_buckets, o.max_victim_buckets, o.firehoses_per_rank), (4, 2, 4));
    let p = Pair::new(o, t, false);
    let x = p.origin.remote_pin(1, REMOTE_BASE + 5, 1).unwrap();
    assert_eq!(p.tpin.live(), 4, "one firehose pins a whole 4-page bucket");
    assert_eq!(p.tpin.pin_calls(), 1);
    p.origin.release_remote(x).unwrap();
    let y = p.origin.remote_pin(1, REMOTE_BASE + page(), 3 * page()).unwrap();
    assert_eq!(p.net.moves().len(), 1, "same bucket: a hit");
    p.origin.release_remote(y).unwrap();
    // 16 pages aligned = 4 firehoses = f.
    let z = p.origin.remote_pin(1, REMOTE_BASE + 16 * page(), 16 * page()).unwrap();
    assert_eq!(p.net.moves().last().unwrap().pin.len(), 4);
    p.origin.release_remote(z).unwrap();
    p.check();
}

#[test]
fn firehose_random_single_thread_workload_stays_within_bounds() {
    // Small limits so eviction, replacement and victim reuse happen all the time.
    let (f, mv) = (6, 5);
    let p = Pair::new(cfg(0, 2, f, mv, f), cfg(1, 2, f, mv, f), false);
    let fh: &Firehose = &p.origin;
    let mut rng = Rng::new(7);
    let mut local: Vec<(LocalPin, usize)> = Vec::new();
    let mut remote: Vec<(RemotePin, usize)> = Vec::new();
    for op in 0..4000 {
        match rng.below(10) {
            0..=2 => {
                let n = 1 + rng.below(3);
                // One thread cannot wait for itself: release until the new pin fits.
                while local.iter().map(|l| l.1).sum::<usize>() + n > mv {
                    let (pin, _) = local.swap_remove(rng.below(local.len()));
                    fh.release_local(pin).unwrap();
                }
                let pin = fh.local_pin(lp(rng.below(24)), n * page() - rng.below(page())).unwrap();
                local.push((pin, n));
            }
            3..=6 => {
                let n = 1 + rng.below(3);
                while remote.iter().map(|r| r.1).sum::<usize>() + n > f {
                    let (pin, _) = remote.swap_remove(rng.below(remote.len()));
                    fh.release_remote(pin).unwrap();
                }
                let addr = rp(rng.below(20));
                let pin = match rng.below(4) {
                    0 => fh.try_remote_pin(1, addr, n * page()),
                    1 => fh.partial_remote_pin(1, addr, n * page()),
                    _ => Some(fh.remote_pin(1, addr, n * page()).unwrap()),
                };
                if let Some(pin) = pin {
                    remote.push((pin, n));
                }
            }
            7 if !local.is_empty() => fh.release_local(local.swap_remove(rng.below(local.len())).0).unwrap(),
            8 if !remote.is_empty() => fh.release_remote(remote.swap_remove(rng.below(remote.len())).0).unwrap(),
            9 => {
                // Memory freed: the runtime first drains the operations using it (a request
                // for a bucket that the same thread holds stale would wait for itself).
                for (pin, _) in remote.drain(..) {
                    fh.release_remote(pin).unwrap();
                }
                let i = rng.below(20);
                if rng.below(2) == 0 {
                    p.target.invalidate_local(rp(i), page());
                }
                fh.invalidate_remote(1, rp(i), page());
            }
            _ => {}
        }
        p.check();
        let _ = op;
    }
    for (pin, _) in local {
        fh.release_local(pin).unwrap();
    }
    for (pin, _) in remote {
        fh.release_remote(pin).unwrap();
    }
    p.check();
    // Every firehose is idle again: committed victims or released.
    let g = fh.lock_for_tests();
    for (_, e) in g.remote[1].entries.iter() {
        assert_eq!((e.state, e.refs), (FirehoseState::Committed, 0));
    }
}

#[test]
fn firehose_unsent_move_keeps_its_released_mapping() {
    // f = 2, both firehoses idle: a new bucket must reuse one. If that move cannot be sent, the
    // target still pins the old bucket for us, so it must stay counted and be released later.
    let p = Pair::new(cfg(0, 2, 2, 2, 2), cfg(1, 2, 2, 2, 2), false);
    let fh = &p.origin;
    fh.release_remote(fh.remote_pin(1, rp(0), 2 * page()).unwrap()).unwrap();
    p.net.fail_sends.store(true, Ordering::Relaxed);
    assert!(matches!(fh.remote_pin(1, rp(5), page()), Err(Error::PeerGone { .. })));
    p.check();
    assert!(p.tpin.is_pinned(rp(0)), "the target never heard of the failed move");
    p.net.fail_sends.store(false, Ordering::Relaxed);
    let pin = fh.remote_pin(1, rp(5), page()).unwrap();
    let m = p.net.moves().pop().unwrap();
    assert_eq!((m.release, m.pin), (vec![rp(0)], vec![rp(5)]));
    fh.release_remote(pin).unwrap();
    p.check();
}
