//! Invalidation: after memory is freed or unexposed, no table may hand out its old
//! registration; the next pin registers it afresh.

use super::fakes::{cfg, page, Pair, LOCAL_BASE, REMOTE_BASE};
use crate::firehose::MoveTransport;
use std::sync::atomic::Ordering;

fn pair() -> Pair {
    Pair::new(cfg(0, 2, 4, 4, 4), cfg(1, 2, 4, 4, 4), false)
}

#[test]
fn firehose_invalidate_local_gives_fresh_registration() {
    let p = pair();
    let fh = &p.origin;
    let a = LOCAL_BASE;
    fh.release_local(fh.local_pin(a, page()).unwrap()).unwrap();
    // Without invalidation the victim is reused: no new pin.
    fh.release_local(fh.local_pin(a, page()).unwrap()).unwrap();
    assert_eq!(p.opin.pin_calls(), 1);
    assert_eq!(fh.invalidate_local(a, 1), 1);
    assert!(!p.opin.is_pinned(a));
    assert!(fh.try_local_pin(a, page()).is_none(), "the stale registration is not a hit");
    let x = fh.local_pin(a, page()).unwrap();
    assert_eq!(p.opin.pin_calls(), 2, "pinned afresh");
    // Invalidated while held: unpinned at once, the holder's release still balances.
    assert_eq!(fh.invalidate_local(a, page()), 1);
    assert_eq!(p.opin.live(), 0);
    p.check();
    fh.release_local(x).unwrap();
    p.check();
    let y = fh.local_pin(a, page()).unwrap();
    assert_eq!(p.opin.pin_calls(), 3);
    fh.release_local(y).unwrap();
    p.check();
}

#[test]
fn firehose_invalidate_remote_moves_afresh() {
    let p = pair();
    let fh = &p.origin;
    let x = REMOTE_BASE;
    fh.release_remote(fh.remote_pin(1, x, page()).unwrap()).unwrap();
    assert_eq!((p.net.moves().len(), p.tpin.pin_calls()), (1, 1));
    // The target frees the memory; it tells the origin, which drops its firehose.
    assert_eq!(p.target.invalidate_local(x, page()), 1);
    assert_eq!(p.tpin.live(), 0);
    assert_eq!(fh.invalidate_remote(1, x, page()), 1);
    assert!(fh.try_remote_pin(1, x, 1).is_none(), "no hit on an invalidated firehose");
    p.check();
    // The next pin moves a firehose again: it releases the old mapping and pins afresh.
    let pin = fh.remote_pin(1, x, page()).unwrap();
    let m = p.net.moves().pop().unwrap();
    assert_eq!((m.release, m.pin), (vec![x], vec![x]));
    assert_eq!(p.tpin.pin_calls(), 2, "the target registered the page again");
    assert!(p.tpin.is_pinned(x));
    p.check();
    // Invalidated while in use: stale until released, then released by the next move.
    assert_eq!(fh.invalidate_remote(1, x, 1), 1);
    assert!(fh.try_remote_pin(1, x, 1).is_none());
    fh.release_remote(pin).unwrap();
    p.check();
    let other = fh.remote_pin(1, x + 8 * page(), page()).unwrap();
    let m = p.net.moves().pop().unwrap();
    assert_eq!(m.release, vec![x], "the stale mapping rides along with the next move");
    fh.release_remote(other).unwrap();
    p.check();
    assert_eq!(fh.stats().invalidated_buckets.load(Ordering::Relaxed), 2);
}

#[test]
fn firehose_invalidate_pending_and_target_side_while_mapped() {
    let p = pair();
    let fh = &p.origin;
    let x = REMOTE_BASE;
    // Invalidate while the move is in flight: the reply must not make it a hit.
    let got = std::sync::Arc::new(std::sync::Mutex::new(None));
    let g = got.clone();
    fh.remote_pin_async(1, x, page(), None, move |r| *g.lock().unwrap() = Some(r.unwrap())).unwrap();
    assert_eq!(fh.invalidate_remote(1, x, page()), 1);
    p.net.poll();
    let pin = got.lock().unwrap().take().expect("completed");
    assert!(fh.try_remote_pin(1, x, 1).is_none());
    fh.release_remote(pin).unwrap();
    p.check();
    // The target frees memory other ranks still have firehoses on: it unpins at once and keeps
    // the count; a later move for it pins it again.
    let pin = fh.remote_pin(1, x + page(), page()).unwrap();
    let calls = p.tpin.pin_calls();
    p.target.invalidate_local(x + page(), 1);
    assert!(!p.tpin.is_pinned(x + page()));
    p.check();
    fh.invalidate_remote(1, x + page(), 1);
    fh.release_remote(pin).unwrap();
    let again = fh.remote_pin(1, x + page(), page()).unwrap();
    assert_eq!(p.tpin.pin_calls(), calls + 1);
    assert!(p.tpin.is_pinned(x + page()));
    fh.release_remote(again).unwrap();
    p.check();
}
