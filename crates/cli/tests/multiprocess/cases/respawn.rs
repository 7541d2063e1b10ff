//! A rank dies and is replaced (`activerma run --respawn N`): the survivors get `RankFailed`
//! naming it from every kind of operation to it and from a barrier — never a hang, never a
//! write into its memory — then wait for it; the replacement finds its segment again with what
//! the dead process left, restores its part, rejoins, and the job goes on: puts, gets and
//! atomics to it and from it, active messages both ways, collectives, every byte checked.
//!
//! Driven by the environment: RESPAWN_DEATHS (how many incarnations of the victim die, 1 by
//! default). The victim is rank 1.

use activerma::{Error, Result, World, FIRST_USER_HANDLER};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const VICTIM: usize = 1;
const KB: usize = 1024;
/// Segment layout (per rank): what the previous rank put before the death; what the owner
/// wrote itself; where refused puts aimed; a counter for atomics; what the next round puts.
const BEFORE: usize = 0;
const OWN: usize = 4 * KB;
const REFUSED: usize = 8 * KB;
const COUNTER: usize = 12 * KB;
const AFTER: usize = 16 * KB;
const LEN: usize = 4 * KB;
const PING: u16 = FIRST_USER_HANDLER + 3;

fn fail(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

fn expect_failed<T: std::fmt::Debug>(what: &str, r: Result<T>, incarnation: u32) -> Result<()> {
    match r {
        Err(Error::RankFailed { rank: VICTIM, incarnation: i }) if i == incarnation => Ok(()),
        other => {
            Err(fail(format!("{what} to the dead rank: expected RankFailed {{ rank: 1, incarnation: {incarnation} }}, got {other:?}")))
        }
    }
}

fn check_bytes(seg: &activerma::Segment, at: usize, want: u8, what: &str) -> Result<()> {
    let mut got = vec![0u8; LEN];
    seg.read_local(at, &mut got);
    match got.iter().position(|&b| b != want) {
        Some(i) => Err(fail(format!("{what}: byte {i} is {:#x}, expected {want:#x}", got[i]))),
        None => Ok(()),
    }
}

pub fn respawn_basic() -> Result<()> {
    let deaths: u32 = std::env::var("RESPAWN_DEATHS").ok().map_or(1, |v| v.parse().unwrap());
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let inc = w.incarnation();
    let pings = Arc::new(AtomicU64::new(0));
    let p = pings.clone();
    w.register_handler(
        PING,
        Arc::new(move |ctx, _| {
            p.fetch_add(1, Ordering::Relaxed);
            ctx.reply(PING + 1, ctx.token, &[]);
        }),
    )?;
    let pongs = Arc::new(AtomicU64::new(0));
    let q = pongs.clone();
    w.register_handler(
        PING + 1,
        Arc::new(move |_, _| {
            q.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    let seg = w.alloc_segment(32 * KB)?;
    let prev = (me + n - 1) % n;
    let next = (me + 1) % n;

    if me != VICTIM && inc > 0 {
        return Err(fail(format!("rank {me} was replaced (incarnation {inc}): a survivor failed")));
    }
    if me == VICTIM && inc > 0 {
        // The replacement: alone until it rejoins.
        if !w.is_recovering() {
            return Err(fail("a replacement reports it is not recovering".into()));
        }
        match w.barrier() {
            Err(Error::InvalidArgument(m)) if m.contains("rejoin") => {}
            other => return Err(fail(format!("a barrier before rejoin: expected a clear refusal, got {other:?}"))),
        }
        // Its segment is where the first incarnation had it, holding what was left in it.
        check_bytes(&seg, BEFORE, 0x10 + prev as u8, "the replacement's segment, written by the previous rank before the death")?;
        check_bytes(&seg, OWN, 0xA0 + (inc - 1) as u8, "the replacement's segment, written by the dead process")?;
        if inc < deaths {
            seg.write_local(OWN, &[0xA0 + inc as u8; LEN]);
            die(); // dies again, before rejoining
        }
        // Its "restore": the state the rank had, whatever the dead process did last.
        seg.write_local(OWN, &[0xCD; LEN]);
        w.rejoin()?;
    } else {
        w.put(seg.remote(next, BEFORE), &[0x10 + me as u8; LEN])?;
        seg.write_local(OWN, &[0xA0; LEN]);
        w.barrier()?;
        if me == VICTIM {
            die();
        }
        survive(&w, &seg, deaths)?;
    }

    // The job goes on, replacement included.
    w.barrier()?;
    if me == VICTIM {
        if inc != deaths {
            return Err(fail(format!("the rank that finished is incarnation {inc}, expected {deaths}")));
        }
        check_bytes(&seg, OWN, 0xCD, "the replacement's restored part")?;
        // No put refused on a survivor landed here (REFUSED is only ever written by refused puts).
        check_bytes(&seg, REFUSED, 0, "where the survivors' refused puts aimed")?;
    }
    w.put(seg.remote(next, AFTER), &[0x40 + me as u8; LEN])?;
    let mut got = vec![0u8; LEN];
    w.get(seg.remote(prev, BEFORE), &mut got)?;
    let want = 0x10 + ((prev + n - 1) % n) as u8;
    if got.iter().any(|&b| b != want) {
        return Err(fail(format!("get from rank {prev} after the rejoin: not its bytes ({:#x}, expected {want:#x})", got[0])));
    }
    for r in 0..n {
        w.fetch_add(seg.remote(r, COUNTER), 1)?;
        w.send_am(r, PING, me as u64, &[])?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while pongs.load(Ordering::Relaxed) < n as u64 || pings.load(Ordering::Relaxed) < n as u64 {
        w.progress();
        if Instant::now() > deadline {
            return Err(fail(format!(
                "active messages after the rejoin: {} pings, {} pongs of {n}",
                pings.load(Ordering::Relaxed),
                pongs.load(Ordering::Relaxed)
            )));
        }
    }
    w.barrier()?;
    check_bytes(&seg, AFTER, 0x40 + prev as u8, "the put after the rejoin")?;
    let mut c = [0u8; 8];
    seg.read_local(COUNTER, &mut c);
    if u64::from_le_bytes(c) != n as u64 {
        return Err(fail(format!("the counter holds {}, expected {n}", u64::from_le_bytes(c))));
    }
    w.finalize()
}

fn die() -> ! {
    // SAFETY: kill(2) on our own process.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("SIGKILL")
}

/// A survivor: sees the failure from every kind of operation, then waits for the replacement.
fn survive(w: &World, seg: &activerma::Segment, deaths: u32) -> Result<()> {
    let me = w.rank();
    // Until the launcher has seen the death, puts still succeed (into the dead rank's memory,
    // which the replacement restores anyway): poll with a put that is harmless.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match w.put(seg.remote(VICTIM, COUNTER + 64 + 8 * me), &[1u8; 8]) {
            Ok(()) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            r => {
                expect_failed("a put", r, 0)?;
                break;
            }
        }
    }
    if me == 0 {
        expect_failed("a put", w.put(seg.remote(VICTIM, REFUSED), &[0x77; LEN]), 0)?;
        let mut b = vec![0u8; LEN];
        expect_failed("a get", w.get(seg.remote(VICTIM, BEFORE), &mut b), 0)?;
        expect_failed("a fetch-add", w.fetch_add(seg.remote(VICTIM, COUNTER), 1), 0)?;
        expect_failed("an implicit put", w.put_nbi(seg.remote(VICTIM, REFUSED), &[0x77; 64]), 0)?;
        expect_failed("an active message", w.send_am(VICTIM, PING, 0, &[]), 0)?;
    }
    // The victim never arrives: the barrier says why rather than hang.
    expect_failed("a barrier with the dead rank", w.barrier(), 0)?;
    let mut incarnation = 0;
    while incarnation < deaths {
        // A replacement may die too: wait_for_rank waits through it for one that rejoins.
        incarnation = w.wait_for_rank(VICTIM)?;
    }
    if incarnation != deaths {
        return Err(fail(format!("wait_for_rank returned incarnation {incarnation}, expected {deaths}")));
    }
    // Waiting again for a rank that is up returns at once.
    if w.wait_for_rank(VICTIM)? != deaths {
        return Err(fail("wait_for_rank on a rank that is up changed its answer".into()));
    }
    Ok(())
}
