//! The SMP protocol step by step, without threads: the deadlock of the paper's section 4 (two
//! requests each holding half of f), deadlock avoidance (token, rollback, hand-over), and
//! conflicts on another request's PENDING_UNCOMMITTED firehose.

use super::fakes::{cfg, page, REMOTE_BASE};
use crate::firehose::config::{Config, Region};
use crate::firehose::remote_table::FirehoseState;
use crate::firehose::smp::{self, Request, Step, Tables};
use crate::firehose::stats::FirehoseStats;
use crate::firehose::transport::{MoveReply, MoveRequest};
use std::sync::atomic::Ordering;

fn rp(i: usize) -> usize {
    REMOTE_BASE + i * page()
}

fn req(c: &Config, id: u64, first: usize, n: usize) -> Request {
    Request::new(id, 1, c.buckets(rp(first), n * page()), Region::new(rp(first), n * page()), None)
}

fn committed(s: Step) -> MoveRequest {
    match s {
        Step::Committed { send: Some(m), ready: None } => m,
        _ => panic!("expected a commit with a move"),
    }
}

fn answer(t: &mut Tables, m: &MoveRequest, id: u64) {
    smp::move_done(t, MoveReply { move_id: m.move_id, result: Ok(()), target_callback_ran: false }, None);
    t.waiters.remove(&id).expect("the creator waited for its move");
}

fn uncommitted_by(t: &Tables, b: usize) -> Option<u64> {
    match t.remote[1].entries.get(&b)?.state {
        FirehoseState::PendingUncommitted { owner } => Some(owner),
        _ => None,
    }
}

#[test]
fn firehose_deadlock_avoidance_rollback_and_handover() {
    let mut c = cfg(0, 2, 4, 4, 4);
    c.da_limit = 3;
    let st = FirehoseStats::default();
    let mut t = Tables::new(&c);
    let ck = |t: &Tables| t.remote[1].check(4).unwrap();

    // C takes all f = 4 firehoses at once (the easy path); its move is in flight.
    let mut rc = req(&c, 1, 0, 4);
    let mc = committed(smp::step(&mut t, &mut rc, &c, &st));
    assert_eq!(t.remote[1].entries.get(&rp(0)).unwrap().state, FirehoseState::Pending { move_id: mc.move_id });
    let (mut a, mut b) = (req(&c, 2, 10, 4), req(&c, 3, 20, 4));
    assert!(matches!(smp::step(&mut t, &mut a, &c, &st), Step::Poll), "nothing to gather yet");
    ck(&t);

    // C is answered and releases two buckets: A gathers them, B the next two. Each holds half
    // of f and needs all of it: without deadlock avoidance neither would ever finish.
    answer(&mut t, &mc, 1);
    t.remote[1].drop_ref(rp(0));
    t.remote[1].drop_ref(rp(1));
    assert!(matches!(smp::step(&mut t, &mut a, &c, &st), Step::Poll));
    assert_eq!((uncommitted_by(&t, rp(10)), uncommitted_by(&t, rp(11))), (Some(2), Some(2)));
    t.remote[1].drop_ref(rp(2));
    t.remote[1].drop_ref(rp(3));
    assert!(matches!(smp::step(&mut t, &mut b, &c, &st), Step::Poll));
    assert_eq!(uncommitted_by(&t, rp(20)), Some(3));
    assert_eq!(t.remote[1].free + t.remote[1].idle(), 0);
    ck(&t);

    // A reaches DA_LIMIT first and takes the token; B, at its next attempt, rolls back.
    assert!(matches!(smp::step(&mut t, &mut a, &c, &st), Step::Poll));
    assert_eq!(t.remote[1].da_owner, Some(2));
    assert!(matches!(smp::step(&mut t, &mut b, &c, &st), Step::WaitToken));
    assert_eq!(uncommitted_by(&t, rp(20)), None);
    assert_eq!(t.remote[1].idle(), 2, "B's replacements went back to the FIFO");
    assert_eq!(t.remote[1].da_queue, [3]);
    ck(&t);

    // A completes with B's returned replacements and hands the token to B.
    let ma = committed(smp::step(&mut t, &mut a, &c, &st));
    let mut released = ma.release.clone();
    released.sort();
    assert_eq!(released, vec![rp(0), rp(1), rp(2), rp(3)]);
    assert_eq!(ma.pin, vec![rp(10), rp(11), rp(12), rp(13)]);
    assert_eq!(t.remote[1].da_owner, Some(3));
    ck(&t);

    // B, now the token holder, waits (without losing turns) until A is done, then commits.
    assert!(matches!(smp::step(&mut t, &mut b, &c, &st), Step::Poll));
    answer(&mut t, &ma, 2);
    for i in 10..14 {
        t.remote[1].drop_ref(rp(i));
    }
    let mb = committed(smp::step(&mut t, &mut b, &c, &st));
    assert_eq!(mb.pin.len(), 4);
    assert_eq!(t.remote[1].da_owner, None);
    answer(&mut t, &mb, 3);
    ck(&t);
    assert_eq!(st.da_claims.load(Ordering::Relaxed), 1);
    assert_eq!(st.rollbacks.load(Ordering::Relaxed), 1);
    assert_eq!(st.easy_path.load(Ordering::Relaxed), 1);
}

#[test]
fn firehose_conflict_on_uncommitted_firehose_rolls_back() {
    let c = cfg(0, 2, 4, 4, 4);
    let st = FirehoseStats::default();
    let mut t = Tables::new(&c);
    // Occupy 3 of the 4 slots so that A (4 buckets) can only gather one.
    let mut rc = req(&c, 1, 0, 3);
    let mc = committed(smp::step(&mut t, &mut rc, &c, &st));
    let mut a = req(&c, 2, 10, 4);
    assert!(matches!(smp::step(&mut t, &mut a, &c, &st), Step::Poll));
    assert_eq!(uncommitted_by(&t, rp(10)), Some(2));
    // B wants bucket 10 too. It may not count on A's uncommitted firehose.
    answer(&mut t, &mc, 1);
    t.remote[1].drop_ref(rp(0));
    let mut b = req(&c, 3, 9, 2);
    assert!(matches!(smp::step(&mut t, &mut b, &c, &st), Step::Poll));
    assert_eq!(b.tries, 1);
    assert_eq!(uncommitted_by(&t, rp(9)), None, "B gathers nothing while it conflicts");
    t.remote[1].check(4).unwrap();
    // After A gives up (timeout), B gets through.
    smp::abort(&mut t, &mut a);
    let mb = committed(smp::step(&mut t, &mut b, &c, &st));
    assert_eq!(mb.pin, vec![rp(9), rp(10)]);
    t.remote[1].check(4).unwrap();
}
