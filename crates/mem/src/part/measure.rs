//! Fault-path latency, printed (run: cargo test -p activerma-mem --release part_measure --
//! --ignored --nocapture). Medians over many runs; the page is evicted before each run, outside
//! the timed part. The machine's load average is printed with the numbers: other jobs inflate
//! them, so compare rows of one run.

use super::cross_process::ChildTarget;
use super::tests::{me, region};
use super::*;
use activerma_core::clock::now_ns;
use activerma_core::page::page_size;
use std::sync::Arc;
use std::time::Duration;

fn pct(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

fn row(name: &str, mut v: Vec<u64>) -> f64 {
    let med = pct(&mut v, 0.5);
    println!("{name:<58} median {med:>9.2} µs   p10 {:>9.2}   p90 {:>9.2}   (n={})", pct(&mut v, 0.1), pct(&mut v, 0.9), v.len());
    med
}

/// Times `op` `n` times, running `prep` (untimed) before each.
fn time(n: usize, mut prep: impl FnMut(), mut op: impl FnMut()) -> Vec<u64> {
    (0..n)
        .map(|_| {
            prep();
            let t = now_ns();
            op();
            now_ns() - t
        })
        .collect()
}

#[test]
#[ignore = "measurement; prints numbers"]
fn part_measure_fault_latency() {
    let ps = page_size();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nPART fault path, {} CPUs, loadavg {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), load.trim());
    let r = region(ps);
    let page = vec![0x5au8; ps];
    let pid = std::process::id() as i32;
    let raw = |dst: usize| {
        let l = libc::iovec { iov_base: page.as_ptr() as *mut _, iov_len: ps };
        let rv = libc::iovec { iov_base: dst as *mut _, iov_len: ps };
        unsafe { libc::process_vm_writev(pid, &l, 1, &rv, 1, 0) }
    };
    println!("-- components (one process) --");
    r.page_in(r.addr(), ps).unwrap();
    row("process_vm_writev 4 KiB, page resident", time(5000, || {}, || assert_eq!(raw(r.addr()), ps as isize)));
    r.evict(r.addr(), ps).unwrap();
    row("process_vm_writev 4 KiB, page missing -> EFAULT", time(5000, || {}, || assert_eq!(raw(r.addr()), -1)));
    row(
        "page-in one page (UFFDIO_COPY)",
        time(
            5000,
            || {
                r.evict(r.addr(), ps).unwrap();
            },
            || assert_eq!(r.page_in(r.addr(), ps).unwrap(), 1),
        ),
    );

    println!("-- 4 KiB put with a fault at the destination --");
    let stats = Arc::new(PartStats::default());
    let target = PartTarget::new(stats.clone());
    let link = LocalLink::new(target.clone(), false);
    let origin = Origin::new(0, PartConfig::default(), stats.clone()).unwrap();
    r.page_in(r.addr(), ps).unwrap();
    let base = row("no fault (PART path, page resident)", time(5000, || {}, || origin.put(&link, me(), r.addr(), &page).unwrap()));
    {
        let _h = HandlerThread::spawn(target.clone(), link.clone());
        let m = row(
            "fault, ERR, target handler thread polling (one process)",
            time(
                5000,
                || {
                    r.evict(r.addr(), ps).unwrap();
                },
                || origin.put(&link, me(), r.addr(), &page).unwrap(),
            ),
        );
        println!("   -> {:.1}x the no-fault put; issue target <= 10 µs", m / base);
    }
    let inline = LocalLink::new(target.clone(), true);
    row(
        "fault, ERR, handler run inline by the origin's wait",
        time(
            5000,
            || {
                r.evict(r.addr(), ps).unwrap();
            },
            || origin.put(&inline, me(), r.addr(), &page).unwrap(),
        ),
    );
    for (t, n) in [(Duration::from_micros(100), 500), (Duration::from_millis(1), 100)] {
        let o = Origin::new(0, PartConfig { retransmit: Retransmit::Timeout(t), ..Default::default() }, stats.clone()).unwrap();
        let _h = HandlerThread::spawn(target.clone(), link.clone());
        row(
            &format!("fault, no ERR, time-out {t:?}"),
            time(
                n,
                || {
                    r.evict(r.addr(), ps).unwrap();
                },
                || o.put(&link, me(), r.addr(), &page).unwrap(),
            ),
        );
    }
    {
        let child = ChildTarget::spawn(ps);
        let stats = Arc::new(PartStats::default());
        let o = Origin::new(0, PartConfig::default(), stats).unwrap();
        o.put(&child, child.peer(), child.addr, &page).unwrap();
        row("no fault, target in another process", time(2000, || {}, || o.put(&child, child.peer(), child.addr, &page).unwrap()));
        row(
            "fault, ERR, target in another process (polling handler)",
            time(
                2000,
                || {
                    child.inject(100, 1);
                },
                || o.put(&child, child.peer(), child.addr, &page).unwrap(),
            ),
        );
    }

    println!("-- 1 MiB put, every destination page faulting (paper Fig. 10) --");
    let len = 1 << 20;
    let big = region(len);
    let src = vec![0xa5u8; len];
    big.page_in(big.addr(), len).unwrap();
    let o = Origin::new(0, PartConfig::default(), stats.clone()).unwrap();
    let base = row("no fault", time(50, || {}, || o.put(&link, me(), big.addr(), &src).unwrap()));
    let _h = HandlerThread::spawn(target.clone(), link.clone());
    for p in PageIn::ALL {
        let o = Origin::new(0, PartConfig { page_in: p, ..Default::default() }, stats.clone()).unwrap();
        let m = row(
            &format!("100 % faults, {}", p.name()),
            time(
                30,
                || {
                    big.evict(big.addr(), len).unwrap();
                },
                || o.put(&link, me(), big.addr(), &src).unwrap(),
            ),
        );
        println!("   -> {:.1}x no fault", m / base);
    }
    for (prob, p) in [(0.05, PageIn::One), (0.05, PageIn::All), (0.05, PageIn::AllEarlyErr), (0.3, PageIn::One), (0.3, PageIn::All)] {
        let o = Origin::new(0, PartConfig { page_in: p, ..Default::default() }, stats.clone()).unwrap();
        let mut inj = FaultInjector::new(prob, 7).unwrap();
        let m = row(
            &format!("{:.0} % faults, {}", prob * 100.0, p.name()),
            time(
                30,
                || {
                    big.page_in(big.addr(), len).unwrap();
                    inj.inject(&big, big.addr(), len).unwrap();
                },
                || o.put(&link, me(), big.addr(), &src).unwrap(),
            ),
        );
        println!("   -> {:.2}x no fault", m / base);
    }
}
