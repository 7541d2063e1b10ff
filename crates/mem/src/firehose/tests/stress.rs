//! The paper's fairness benchmark as a test: 8 threads of one rank scatter 32 KiB "puts"
//! (8 pages) to random places of a large remote space with f = 8, so nearly every put must
//! move all of the rank's firehoses and threads constantly compete for them. The target is a
//! second Firehose served by its own thread; replies are delivered only when origin threads
//! poll. Checked: bounds after every operation, no deadlock (a watchdog), every thread done.

use super::fakes::{cfg, page, Pair, LOCAL_BASE, REMOTE_BASE};
use super::Rng;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const THREADS: usize = 8;
const OPS: usize = 400;
const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs `body` on a thread and fails the test if it does not finish in time (a deadlock).
fn with_watchdog(name: &str, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: surface its message.
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{name}: no progress within {WATCHDOG:?}: deadlock"),
    }
}

/// Puts of `min..=max` pages into a remote space of `space` pages; local sources are pinned
/// too, from a local space small enough that local pins hit and compete as well.
fn scatter(name: &'static str, (min, max): (usize, usize), space: usize, seed: u64) {
    with_watchdog(name, move || {
        let f = 8;
        // Target: M = f (one origin), a small victim pool. Origin: MAXVICTIM = 16 pages, so at
        // most two 8-page sources are pinned at once and local pins queue too.
        let p = Arc::new(Pair::new(cfg(0, 2, f, 16, f), cfg(1, 2, f, 4, f), true));
        let done: Arc<Vec<AtomicUsize>> = Arc::new((0..THREADS).map(|_| AtomicUsize::new(0)).collect());
        let start = Instant::now();
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (p, done) = (p.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng::new(seed + t as u64);
                    let (obound, tbound) = (8 + 16, 8 + 4);
                    for _ in 0..OPS {
                        let pages = min + rng.below(max - min + 1);
                        let len = pages * page();
                        let src = p.origin.local_pin(LOCAL_BASE + rng.below(32) * page(), len).unwrap();
                        let dst = REMOTE_BASE + rng.below(space - pages) * page();
                        let pin = p.origin.remote_pin(1, dst, len).unwrap();
                        assert!(p.tpin.live() <= tbound, "target pins {} > M + MAXVICTIM", p.tpin.live());
                        assert!(p.opin.live() <= obound, "origin pins {} > M + MAXVICTIM", p.opin.live());
                        assert_eq!(p.tpin.violations() + p.opin.violations(), 0);
                        std::hint::black_box(&pin); // the one-sided put would go here
                        p.origin.release_remote(pin).unwrap();
                        p.origin.release_local(src).unwrap();
                        done[t].fetch_add(1, Ordering::Relaxed);
                    }
                    start.elapsed()
                })
            })
            .collect();
        let times: Vec<Duration> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        for (t, d) in done.iter().enumerate() {
            assert_eq!(d.load(Ordering::Relaxed), OPS, "thread {t} did not finish");
        }
        p.origin.check_invariants().unwrap();
        p.target.check_invariants().unwrap();
        assert!(p.tpin.max_live() <= 8 + 4 && p.opin.max_live() <= 8 + 16);
        let st: Vec<String> = p.origin.stats().snapshot().iter().filter(|s| s.1 > 0).map(|(n, v)| format!("{n}={v}")).collect();
        let (min, max) = (times.iter().min().unwrap(), times.iter().max().unwrap());
        eprintln!(
            "{name}: {THREADS} threads x {OPS} puts in {:?} (fastest thread {min:?}, slowest {max:?}); {}",
            start.elapsed(),
            st.join(" ")
        );
    });
}

#[test]
fn firehose_stress_8_threads_32k_puts_f8() {
    scatter("32 KiB puts, 16 MiB space", (8, 8), 4096, 1);
}

#[test]
fn firehose_stress_8_threads_mixed_hits_and_conflicts() {
    // 4-32 KiB puts into 192 KiB: hits, pending hits, partial gathering (releases free a few
    // firehoses at a time), conflicts on uncommitted firehoses, rollbacks.
    scatter("4-32 KiB puts, 192 KiB space", (1, 8), 48, 99);
}
