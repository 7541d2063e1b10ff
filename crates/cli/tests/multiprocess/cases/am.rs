//! Active messages and target-side progress.

use super::share_u64;
use activerma::{AmCtx, Prot, RemotePtr, Result, FIRST_USER_HANDLER};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const DATA: u16 = FIRST_USER_HANDLER;
const ECHO: u16 = FIRST_USER_HANDLER + 1;
const ECHO_BACK: u16 = FIRST_USER_HANDLER + 2;

fn payload(src: usize, seq: u64) -> Vec<u8> {
    // Sizes from empty to several fragments, and now and then a large one.
    let len = match seq % 50 {
        0 => 300_000,
        k => (k * k * 37 % 5000) as usize,
    };
    (0..len).map(|i| (src as u64 * 7 + seq * 13 + i as u64) as u8).collect()
}

fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Every rank sends many messages of many sizes to every rank (itself too); each must arrive
/// whole, in order, exactly once — through queue-full back-pressure and fragmentation.
pub fn active_messages() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    const MSGS: u64 = 300;
    let received = Arc::new(AtomicU64::new(0));
    let next_seq: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let (r2, s2) = (received.clone(), next_seq.clone());
    w.register_handler(
        DATA,
        Arc::new(move |ctx: &AmCtx, bytes: &[u8]| {
            let expect = s2[ctx.src].fetch_add(1, Ordering::Relaxed);
            assert_eq!(ctx.token, expect, "messages from rank {} arrive in order", ctx.src);
            let want = payload(ctx.src, expect);
            assert_eq!(bytes.len(), want.len(), "message {expect} from {} has its full length", ctx.src);
            assert_eq!(checksum(bytes), checksum(&want), "message {expect} from {} intact", ctx.src);
            r2.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    let echoes = Arc::new(AtomicU64::new(0));
    let e2 = echoes.clone();
    w.register_handler(ECHO, Arc::new(|ctx: &AmCtx, bytes: &[u8]| ctx.reply(ECHO_BACK, ctx.token, bytes)))?;
    w.register_handler(
        ECHO_BACK,
        Arc::new(move |ctx: &AmCtx, bytes: &[u8]| {
            assert_eq!(bytes, &(ctx.token).to_le_bytes()[..]);
            e2.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    w.barrier()?; // handlers are installed everywhere before anything is sent

    for seq in 0..MSGS {
        for t in 0..n {
            w.send_am(t, DATA, seq, &payload(me, seq))?;
        }
        w.send_am((me + 1) % n, ECHO, seq, &seq.to_le_bytes())?;
    }
    let expected = MSGS * n as u64;
    while received.load(Ordering::Relaxed) < expected || echoes.load(Ordering::Relaxed) < MSGS {
        w.progress();
    }
    w.barrier()?;
    assert_eq!(received.load(Ordering::Relaxed), expected, "nothing duplicated");
    let a = w.counters().snapshot();
    assert!(a.iter().any(|&(k, v)| k == "am_fragments" && v > MSGS), "large messages were fragmented");
    w.finalize()
}

/// With a progress thread (thread or wake mode), atomics on a rank's private memory complete
/// while that rank's application thread sleeps and calls nothing.
pub fn progress_without_target_calls() -> Result<()> {
    let w = activerma::init()?;
    let me = w.rank();
    let seg = w.alloc_segment(4096)?;
    let mut word = vec![0u64; 1];
    // SAFETY: `word` outlives the exposure.
    let exposed = unsafe { w.expose_raw(word.as_mut_ptr() as *mut u8, 8, Prot::ReadWrite)? };
    let addr = share_u64(&w, exposed.addr() as u64)?;
    w.barrier()?;
    if me == 1 {
        // The target: no runtime call until the origin says it is done.
        let done = seg.as_ptr() as *const AtomicU64;
        let started = std::time::Instant::now();
        // SAFETY: the flag word lies in our own segment; the origin sets it with an atomic.
        while unsafe { &*done }.load(Ordering::Acquire) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            assert!(started.elapsed().as_secs() < 60, "origin never finished: no target progress");
        }
        let mut v = [0u8; 8];
        exposed.read(0, &mut v);
        assert_eq!(u64::from_le_bytes(v), 1000, "every atomic applied while the application slept");
    } else if me == 0 {
        for _ in 0..1000 {
            w.fetch_add(RemotePtr::new(1, addr[1] as usize), 1)?;
        }
        w.add(seg.remote(1, 0), 1)?;
    }
    w.barrier()?;
    drop(exposed);
    drop(word);
    w.finalize()
}
