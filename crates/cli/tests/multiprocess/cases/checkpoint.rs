//! Checkpoint and restart (activerma-checkpoint): a deterministic workload of local writes and
//! puts, a checkpoint after every step; a rank may die in the middle of one, and a restarted
//! job (`activerma run --restart-from DIR`, or ACTIVERMA_RESTART_FROM under mpirun) must find
//! exactly the state of the last complete checkpoint, every byte, and go on from there.
//!
//! `checkpoint_restart`'s steps also add into the next rank's memory with a fetch-add (a
//! logged atomic on the incremental scheme's tracked pages, atomic_active.rs). Under
//! trap-first-write, whose write-protected pages refuse atomics, the origin first asks the
//! target to lift the page's trap (`Checkpointer::before_remote_atomic`); the step checks that
//! the atomic is refused, clearly, without that.
//!
//! Driven by the environment: CKPT_DIR (the store), CKPT_SCHEME (full | incremental |
//! trap-first-write), CKPT_STEPS (steps to reach), CKPT_KILL (`rank:epoch`: that rank dies
//! on the first page of that checkpoint), CKPT_EXPECT_RESTORED (the epoch a restart must find).

use super::env;
use activerma::{Error, Result, World};
use activerma_checkpoint::{Checkpointer, Options, Scheme};

const PAGE: usize = 4096;
/// Pages per rank: the first half only its owner writes, the second half only the previous rank.
const PAGES: usize = 32;

/// Step `k`'s writes by rank `writer`: (page, offset in it, length, byte), into its own copy
/// (local) or into the next rank's (remote). Several per step, partial pages, some pages again.
fn writes(writer: usize, k: usize, remote: bool) -> Vec<(usize, usize, usize, u8)> {
    (0..3)
        .map(|j| {
            let half = if remote { PAGES / 2 } else { 0 };
            let page = half + (k * 5 + j * 3 + writer) % (PAGES / 2);
            let off = (k * 97 + j * 1000 + writer * 13) % (PAGE - 600);
            let len = 1 + (k * 31 + j * 211) % 600;
            (page, off, len, (writer * 41 + k * 7 + j + remote as usize * 100) as u8 | 1)
        })
        .collect()
}

/// Step `k`'s fetch-add by rank `writer` into the next rank's copy: (page, offset of the 8-byte
/// word, addend). A page of the remote half that step's puts may also touch, after them.
fn atomic_add(writer: usize, k: usize) -> (usize, usize, u64) {
    (PAGES / 2 + (k * 7 + writer * 5 + 1) % (PAGES / 2), PAGE - 8 * (1 + k % 4), (k * 1000 + writer) as u64)
}

/// What rank `me`'s copy holds after `steps` steps (`atomics`: the steps' fetch-adds ran).
fn expected(me: usize, n: usize, steps: usize, atomics: bool) -> Vec<u8> {
    let mut m = vec![0u8; PAGES * PAGE];
    let prev = (me + n - 1) % n;
    for k in 1..=steps {
        for (page, off, len, b) in writes(me, k, false).into_iter().chain(writes(prev, k, true)) {
            m[page * PAGE + off..page * PAGE + off + len].fill(b);
        }
        if atomics {
            let (page, off, add) = atomic_add(prev, k);
            let at = page * PAGE + off;
            let v = u64::from_ne_bytes(m[at..at + 8].try_into().unwrap()).wrapping_add(add);
            m[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
    m
}

/// A full base every this many checkpoints: checkpoint 4 is one, so a run of 5 steps prunes
/// and a restart after it applies a chain.
const FULL_EVERY: u64 = 3;

/// Pages rank `me`'s checkpoint `k` writes: all of them for a full one (the first, every
/// FULL_EVERY-th after the base, every one of the full scheme), else the pages step `k` changed.
fn pages_written(scheme: Scheme, me: usize, n: usize, k: usize, atomics: bool) -> u64 {
    let full = scheme == Scheme::Full || k == 1 || (k as u64 - 1).is_multiple_of(FULL_EVERY);
    if full {
        return PAGES as u64;
    }
    pages_changed(me, n, k, atomics)
}

/// The pages of rank `me` step `k` changes (its own writes, the previous rank's puts and, with
/// `atomics`, its fetch-add).
fn pages_changed(me: usize, n: usize, k: usize, atomics: bool) -> u64 {
    let prev = (me + n - 1) % n;
    let mut pages: std::collections::BTreeSet<usize> =
        writes(me, k, false).iter().chain(writes(prev, k, true).iter()).map(|w| w.0).collect();
    if atomics {
        pages.insert(atomic_add(prev, k).0);
    }
    pages.len() as u64
}

pub fn checkpoint_restart() -> Result<()> {
    let dir = std::path::PathBuf::from(env("CKPT_DIR").expect("CKPT_DIR"));
    let scheme = Scheme::parse(&env("CKPT_SCHEME").unwrap_or("incremental".into()))?;
    let steps: usize = env("CKPT_STEPS").map_or(4, |s| s.parse().unwrap());
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let atomics = true;
    let seg = w.alloc_segment(PAGES * PAGE)?;
    let mut opts = Options::new(scheme);
    opts.full_every = FULL_EVERY;
    if let Some(kill) = env("CKPT_KILL") {
        let (rank, epoch) = kill.split_once(':').expect("rank:epoch");
        if rank.parse::<usize>().unwrap() == me {
            let before: u64 = (1..epoch.parse::<usize>().unwrap()).map(|k| pages_written(scheme, me, n, k, atomics)).sum();
            opts.kill_after_pages = Some(before + 1);
        }
    }
    let mut ck = Checkpointer::new(&w, &dir, opts)?;
    ck.protect(&seg)?;
    let restored = ck.restore()?;
    let want = env("CKPT_EXPECT_RESTORED").map(|e| e.parse::<u64>().unwrap());
    if restored != want {
        return Err(Error::InvalidArgument(format!("rank {me}: restored {restored:?}, expected {want:?}")));
    }
    let start = restored.unwrap_or(0) as usize;
    check_state(&w, &seg, start, "after restore", atomics)?;
    for k in start + 1..=steps {
        step(&w, &seg, &ck, k, atomics)?;
        let st = ck.checkpoint()?;
        if st.epoch != k as u64 {
            return Err(Error::InvalidArgument(format!("rank {me}: checkpoint {} after step {k}", st.epoch)));
        }
        // An incremental checkpoint writes what changed: this step's pages, no more.
        let want = pages_written(scheme, me, n, k, atomics);
        if st.pages_written != want || st.full != (want == PAGES as u64) {
            return Err(Error::InvalidArgument(format!(
                "rank {me}: checkpoint {k} (full: {}) wrote {} pages, expected {want} ({} found by the log, {} by the MMU)",
                st.full, st.pages_written, st.remote_pages, st.local_pages
            )));
        }
        check_state(&w, &seg, k, "after a checkpoint", atomics)?;
    }
    w.finalize()
}

/// A death inside a checkpoint of a job that goes on (`activerma run --respawn 1`): the
/// survivors' `checkpoint()` fails with RankFailed, they wait for the replacement, which
/// restores the last complete checkpoint alone and rejoins; whatever the replacement lost is
/// done again (its own step, the puts aimed at it), and every rank calls `checkpoint()` again.
/// That retry must write every page changed since the last complete checkpoint — the pages
/// the failed call had already taken from the tracking included, though nobody writes them
/// again — and a job restarted from the store afterwards must find every byte.
///
/// Same workload as `checkpoint_restart`, but only the first checkpoint is a full base, so
/// that a page lost from one incremental checkpoint stays lost. CKPT_KILL: `pages:R:K` (rank R
/// dies on its first page of checkpoint K: nobody marks K complete) or `marker:K` (rank 0 dies
/// right after marking K complete: the survivors' call fails all the same, and the retry must
/// take epoch K + 1 and write what changed since K). With CKPT_EXPECT_RESTORED `E:S` (a job
/// started with `--restart-from`): checkpoint E must be restored, holding step S's state.
pub fn checkpoint_retry() -> Result<()> {
    let dir = std::path::PathBuf::from(env("CKPT_DIR").expect("CKPT_DIR"));
    let scheme = Scheme::parse(&env("CKPT_SCHEME").unwrap_or("incremental".into()))?;
    let steps: usize = env("CKPT_STEPS").map_or(5, |s| s.parse().unwrap());
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let fail = |what: String| Error::InvalidArgument(format!("rank {me} (incarnation {}): {what}", w.incarnation()));
    let seg = w.alloc_segment(PAGES * PAGE)?;
    let mut opts = Options::new(scheme);
    opts.full_every = 0;
    let full = |k: usize| scheme == Scheme::Full || k == 1;
    let pages = |k: usize| if full(k) { PAGES as u64 } else { pages_changed(me, n, k, false) };
    let kill = env("CKPT_KILL").unwrap_or_default();
    let kill: Vec<&str> = kill.split(':').collect();
    if w.incarnation() == 0 {
        match kill[..] {
            ["pages", rank, k] if rank.parse::<usize>().unwrap() == me => {
                let before: u64 = (1..k.parse::<usize>().unwrap()).map(pages).sum();
                opts.kill_after_pages = Some(before + 1);
            }
            ["marker", k] => opts.kill_after_marker = k.parse().unwrap(),
            _ => {}
        }
    }
    let mut ck = Checkpointer::new(&w, &dir, opts)?;
    ck.protect(&seg)?;
    let restored = ck.restore()?;
    if let Some(want) = env("CKPT_EXPECT_RESTORED") {
        let (epoch, step) = want.split_once(':').expect("epoch:step");
        if restored != Some(epoch.parse().unwrap()) {
            return Err(fail(format!("restored {restored:?}, expected checkpoint {epoch}")));
        }
        check_state(&w, &seg, step.parse().unwrap(), "after restore", false)?;
        return w.finalize();
    }
    // Epochs ahead of steps: 1 once a failed call's checkpoint turned out complete.
    let mut ahead = 0;
    let mut first = 1;
    if w.is_recovering() {
        let Some(r) = restored else { return Err(fail("a replacement found no checkpoint to restore".into())) };
        w.rejoin()?;
        let (k, marked) = redo_lost(&w, &seg, &ck, me, r as usize)?;
        ahead = marked as usize;
        let st = ck.checkpoint()?;
        // Restored K (marked): nothing changed since. Restored K - 1: step K again.
        let want = if marked && !full(k) { 0 } else { pages(k) };
        if st.epoch != (k + ahead) as u64 || st.pages_written != want {
            return Err(fail(format!(
                "retried checkpoint {} wrote {} pages, expected checkpoint {} of {want}",
                st.epoch,
                st.pages_written,
                k + ahead
            )));
        }
        check_state(&w, &seg, k, "after the retried checkpoint", false)?;
        first = k + 1;
    }
    for k in first..=steps {
        step(&w, &seg, &ck, k, false)?;
        let st = match ck.checkpoint() {
            Err(Error::RankFailed { rank, .. }) => {
                w.wait_for_rank(rank)?;
                let (at, marked) = redo_lost(&w, &seg, &ck, rank, k)?;
                if at != k {
                    return Err(fail(format!("failed in checkpoint {k}, but the job's furthest rank is at step {at}")));
                }
                ahead = marked as usize;
                ck.checkpoint()?
            }
            other => other?,
        };
        // Every page this step changed, including the ones a failed call had taken.
        if st.epoch != (k + ahead) as u64 || st.pages_written != pages(k) || st.full != full(k) {
            return Err(fail(format!(
                "checkpoint {} (full: {}) after step {k} wrote {} pages, expected checkpoint {} of {} ({} found by the log, {} by the MMU)",
                st.epoch,
                st.full,
                st.pages_written,
                k + ahead,
                pages(k),
                st.remote_pages,
                st.local_pages
            )));
        }
        check_state(&w, &seg, k, "after a checkpoint", false)?;
    }
    w.finalize()
}

/// After `dead`'s replacement rejoined (collective, the replacement included; `holds`: the
/// step this rank's memory holds): the failed checkpoint's step `k` is the furthest any rank
/// reached. If the replacement restored the checkpoint before it, it does step `k` again and
/// the rank before it puts its step-`k` bytes into it again. Returns `k` and whether the
/// replacement found `k` itself complete.
fn redo_lost(w: &World, seg: &activerma::Segment, ck: &Checkpointer, dead: usize, holds: usize) -> Result<(usize, bool)> {
    let (me, n) = (w.rank(), w.size());
    let all: Vec<usize> =
        w.allgather(&(holds as u64).to_le_bytes())?.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap()) as usize).collect();
    let (k, lowest) = (*all.iter().max().unwrap(), *all.iter().min().unwrap());
    if lowest < k {
        if me == dead {
            step(w, seg, ck, k, false)?;
        } else if (me + 1) % n == dead {
            for (page, off, len, b) in writes(me, k, true) {
                w.put(seg.remote(dead, page * PAGE + off), &vec![b; len])?;
                ck.after_remote_write(dead)?;
            }
        }
    }
    Ok((k, lowest == k))
}

/// Step `k` of rank `w`: its local writes, its puts into the next rank and, with `atomics`,
/// its fetch-add there.
fn step(w: &World, seg: &activerma::Segment, ck: &Checkpointer, k: usize, atomics: bool) -> Result<()> {
    let (me, n) = (w.rank(), w.size());
    for (page, off, len, b) in writes(me, k, false) {
        seg.write_local(page * PAGE + off, &vec![b; len]);
    }
    let next = (me + 1) % n;
    for (page, off, len, b) in writes(me, k, true) {
        w.put(seg.remote(next, page * PAGE + off), &vec![b; len])?;
        ck.after_remote_write(next)?;
    }
    if atomics {
        let (page, off, add) = atomic_add(me, k);
        let at = seg.remote(next, page * PAGE + off);
        let lifted_by_a_put = writes(me, k, true).iter().any(|w| w.0 == page);
        if ck.scheme() == Scheme::TrapFirstWrite && ck.epoch() > 0 && !lifted_by_a_put {
            // The page is trapped: an atomic is refused (nothing written) until it is lifted.
            match w.fetch_add(at, add) {
                Err(e) if e.to_string().contains("protect") || e.to_string().contains("refused") => {}
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "rank {me}: an atomic on a trapped page of rank {next} (step {k}) returned {other:?}, expected a protection error"
                    )))
                }
            }
        }
        ck.before_remote_atomic(at)?;
        w.fetch_add(at, add)?;
        ck.before_remote_atomic(at)?; // once per page and interval: no second request
        ck.after_remote_write(next)?;
    }
    Ok(())
}

fn check_state(w: &World, seg: &activerma::Segment, steps: usize, when: &str, atomics: bool) -> Result<()> {
    w.barrier()?;
    let mut got = vec![0u8; PAGES * PAGE];
    seg.read_local(0, &mut got);
    let want = expected(w.rank(), w.size(), steps, atomics);
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(Error::InvalidArgument(format!(
            "rank {}: {when} (step {steps}): byte {i} (page {}) is {}, expected {}",
            w.rank(),
            i / PAGE,
            got[i],
            want[i]
        )));
    }
    w.barrier()
}

/// The application's own Active Access marks on protected pages (`remote::tracked_runs` in
/// the checkpoint crate). Every rank's segment: page 0 marked W=0 WL WLD by the application
/// (its handler writes each put and counts it), page 1 marked W=1 with the application's get
/// logging, the rest unmarked. Checked, under CKPT_SCHEME:
/// - protecting a segment with the get-logged page fails with an error naming the page;
/// - protecting one where page 0 is the only marked page works: the previous rank's puts into
///   page 0 (through the application's handler, which keeps its marks and sees every put) and
///   into page 2 (tracked by the checkpoint) are both in the next incremental checkpoint,
///   which writes exactly those two pages;
/// - the application taking a tracked page's marks away fails the next checkpoint.
///
/// The store is a folder rank 0 makes (named by its pid, shared by allgather) and removes.
pub fn checkpoint_with_app_marks() -> Result<()> {
    use activerma::{Actions, LogEntry, LogOp, Notify, MAX_DOMAINS};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    const APP_DOMAIN: u16 = 3;
    const SEG_PAGES: usize = 8;
    let scheme = Scheme::parse(&env("CKPT_SCHEME").unwrap_or("incremental".into()))?;
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let (prev, next) = ((me + n - 1) % n, (me + 1) % n);
    let fail = |what: String| Error::InvalidArgument(format!("rank {me}: {what}"));
    let dirs = w.allgather(format!("/tmp/activerma-ckpt-marks-{}", std::process::id()).as_bytes())?;
    let dir = std::path::PathBuf::from(String::from_utf8(dirs[0].clone()).expect("utf-8"));
    if me == 0 {
        std::fs::create_dir_all(&dir).map_err(|e| fail(format!("mkdir {}: {e}", dir.display())))?;
    }
    w.barrier()?;

    // The application's handler: write the put's bytes where they were aimed, count them.
    let handled = Arc::new(AtomicU64::new(0));
    let h = handled.clone();
    w.create_log(
        APP_DOMAIN,
        1 << 16,
        Notify::Poll,
        Arc::new(move |e: &LogEntry| {
            if e.meta.op == LogOp::Put {
                let data = e.data();
                // SAFETY: the entry names bytes of this rank's segment page 0 (the only page
                // logged with data in this domain).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), e.meta.addr as *mut u8, data.len()) };
                h.fetch_add(1, Ordering::AcqRel);
            }
        }),
    )?;
    let handler_writes = Actions::R | Actions::WL | Actions::WLD;
    let get_logged = Actions::W | Actions::R | Actions::RL | Actions::RLD;

    // 1. A page whose puts write memory while the application logs it cannot be tracked.
    let refused = w.alloc_segment(SEG_PAGES * PAGE)?;
    w.assoc_pages(refused.as_ptr().wrapping_add(PAGE), PAGE, get_logged, Some(APP_DOMAIN))?;
    {
        let mut opts = Options::new(scheme);
        opts.domain = (MAX_DOMAINS - 2) as u16;
        let mut ck = Checkpointer::new(&w, &dir.join("refused"), opts)?;
        ck.protect(&refused)?;
        match ck.checkpoint() {
            Err(Error::InvalidArgument(m))
                if m.contains("carries marks") && m.contains(&format!("{:#x}", refused.as_ptr() as usize + PAGE)) => {}
            other => return Err(fail(format!("a get-logged protected page: expected an error naming it, got {other:?}"))),
        }
    }
    w.barrier()?;
    if w.page_marks(refused.as_ptr().wrapping_add(PAGE), PAGE)?[0] != (get_logged, Some(APP_DOMAIN)) {
        return Err(fail("the refused checkpointer changed the application's marks".into()));
    }

    // 2. Page 0 left to the application's handler, the rest tracked.
    let seg = w.alloc_segment(SEG_PAGES * PAGE)?;
    w.assoc_pages(seg.as_ptr(), PAGE, handler_writes, Some(APP_DOMAIN))?;
    w.barrier()?;
    let mut opts = Options::new(scheme);
    opts.domain = (MAX_DOMAINS - 1) as u16;
    let mut ck = Checkpointer::new(&w, &dir.join("tracked"), opts)?;
    ck.protect(&seg)?;
    let base = ck.checkpoint()?;
    if !base.full {
        return Err(fail("the first checkpoint is not the full base".into()));
    }
    let puts = 5u64;
    for i in 0..puts {
        w.put(seg.remote(next, 100 + i as usize * 8), &[0xa0 + i as u8; 8])?;
        w.put(seg.remote(next, 2 * PAGE + 300 + i as usize * 8), &[0xb0 + i as u8; 8])?;
        ck.after_remote_write(next)?;
    }
    w.flush_all()?;
    w.active_flush(next)?;
    let st = ck.checkpoint()?;
    if st.full || st.pages_written != 2 {
        return Err(fail(format!(
            "checkpoint 2 (full: {}) wrote {} pages, expected pages 0 and 2 ({} found by the log, {} by the MMU)",
            st.full, st.pages_written, st.remote_pages, st.local_pages
        )));
    }
    if handled.load(Ordering::Acquire) != puts {
        return Err(fail(format!("the application's handler saw {} of {puts} puts from rank {prev}", handled.load(Ordering::Acquire))));
    }
    let mut got = vec![0u8; SEG_PAGES * PAGE];
    seg.read_local(0, &mut got);
    for i in 0..puts as usize {
        if got[100 + i * 8..108 + i * 8] != [0xa0 + i as u8; 8]
            || got[2 * PAGE + 300 + i * 8..2 * PAGE + 308 + i * 8] != [0xb0 + i as u8; 8]
        {
            return Err(fail(format!("put {i} from rank {prev} is not in pages 0 and 2")));
        }
    }
    if w.page_marks(seg.as_ptr(), PAGE)?[0] != (handler_writes, Some(APP_DOMAIN)) {
        return Err(fail("the checkpoint changed the marks of the application's page 0".into()));
    }

    // 3. Taking a tracked page's marks away fails the next checkpoint (every rank does it).
    w.assoc_pages(seg.as_ptr().wrapping_add(3 * PAGE), PAGE, Actions::W | Actions::R, None)?;
    match ck.checkpoint() {
        Err(Error::InvalidArgument(m)) if m.contains("changed them while the checkpoint tracked") => {}
        other => return Err(fail(format!("a tracked page made plain: expected the checkpoint to fail, got {other:?}"))),
    }
    drop(ck);
    w.barrier()?;
    if w.page_marks(seg.as_ptr(), PAGE)?[0] != (handler_writes, Some(APP_DOMAIN)) {
        return Err(fail("dropping the checkpointer changed the application's page 0".into()));
    }
    if me == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    w.finalize()
}
