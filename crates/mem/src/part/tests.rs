//! PART against the real kernel fault path: every test uses a SIGBUS-mode userfaultfd region.
//! If userfaultfd is unavailable the tests fail with the reason and the fix — never pass silently.

use super::*;
use activerma_core::page::page_size;
use activerma_core::Error;
use std::sync::Arc;
use std::time::Duration;

pub(super) fn region(len: usize) -> UffdRegion {
    match UffdRegion::new(len) {
        Ok(r) => r,
        Err(e) => panic!("PART tests need userfaultfd and could not get it: {e}"),
    }
}

pub(super) fn me() -> Peer {
    Peer { rank: 0, pid: std::process::id() as i32 }
}

/// Raw process_vm_writev into our own address space: bytes written, or -errno.
fn raw_write(dst: usize, src: &[u8]) -> isize {
    let l = libc::iovec { iov_base: src.as_ptr() as *mut _, iov_len: src.len() };
    let r = libc::iovec { iov_base: dst as *mut _, iov_len: src.len() };
    let n = unsafe { libc::process_vm_writev(std::process::id() as i32, &l, 1, &r, 1, 0) };
    if n < 0 {
        -(std::io::Error::last_os_error().raw_os_error().unwrap() as isize)
    } else {
        n
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8).collect()
}

#[test]
fn part_missing_page_fails_fast_with_efault_or_short_count() {
    let ps = page_size();
    let r = region(4 * ps);
    let data = pattern(2 * ps, 1);
    // Missing first page: nothing is written.
    assert_eq!(raw_write(r.addr(), &data[..ps]), -(libc::EFAULT as isize));
    // First page in, second missing: a short count that ends at the missing page.
    assert_eq!(r.page_in(r.addr(), ps).unwrap(), 1);
    assert_eq!(raw_write(r.addr(), &data), ps as isize);
    // After page-in the retransmission lands.
    assert_eq!(r.page_in(r.addr(), 2 * ps).unwrap(), 1, "only the second page was missing");
    assert_eq!(raw_write(r.addr(), &data), (2 * ps) as isize);
    let mut back = vec![0u8; 2 * ps];
    r.read(0, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(r.resident_pages(r.addr(), 4 * ps).unwrap(), 2);
}

#[test]
fn part_populate_write_cannot_page_in_a_sigbus_range() {
    // Why the handler uses UFFDIO_COPY: MADV_POPULATE_WRITE takes the same fault and fails.
    let ps = page_size();
    let r = region(ps);
    let rc = unsafe {
        libc::madvise(r.as_ptr() as *mut _, ps, 23 /* MADV_POPULATE_WRITE */)
    };
    let e = std::io::Error::last_os_error().raw_os_error();
    assert_eq!(rc, -1, "MADV_POPULATE_WRITE unexpectedly populated a SIGBUS-mode page");
    assert!(matches!(e, Some(libc::EFAULT) | Some(libc::EINVAL)), "{e:?}");
    assert_eq!(r.resident_pages(r.addr(), ps).unwrap(), 0);
}

#[test]
fn part_evict_keeps_contents_and_faults_again() {
    let ps = page_size();
    let r = region(8 * ps);
    let data = pattern(8 * ps, 7);
    r.write(0, &data).unwrap();
    assert_eq!(r.evict(r.addr() + 2 * ps, 3 * ps).unwrap(), 3);
    assert_eq!(r.resident_pages(r.addr(), 8 * ps).unwrap(), 5);
    assert_eq!(raw_write(r.addr() + 2 * ps, &data[..ps]), -(libc::EFAULT as isize));
    let mut back = vec![0u8; 8 * ps];
    r.read(0, &mut back).unwrap();
    assert_eq!(back, data, "evicted pages come back with their contents");
}

#[test]
fn part_eviction_moves_pages_where_the_kernel_can() {
    // Eviction and page-in move the pages themselves (UFFDIO_MOVE) so no CPU copy leaves
    // them dirty in a cache; on a kernel with the feature the moves must keep working over
    // evict / page-in / overwrite cycles, on fresh and on adopted (heap) memory, with
    // contents intact and single pages as well as runs.
    let ps = page_size();
    let mut heap = vec![0u8; 40 * ps];
    let heap_at = heap.as_mut_ptr() as usize;
    // SAFETY: `heap` outlives `adopted` (dropped first, at the end of the test).
    let adopted = unsafe { UffdRegion::adopt(heap_at, heap.len()) }.unwrap();
    let fresh = region(32 * ps);
    // Only whole pages inside the Vec: the region's first page also holds malloc's header.
    for (r, start) in [(&fresh, fresh.addr()), (&adopted, heap_at)] {
        let base = activerma_core::page::page_ceil(start);
        let data = pattern(16 * ps, 3);
        let at = base - r.addr();
        for round in 0..4 {
            r.write(at, &data).unwrap();
            // One page, then a run, then everything (pages evicted twice meanwhile).
            let (a, l) = [(3 * ps, ps), (4 * ps, 8 * ps), (0, 16 * ps), (5 * ps, ps)][round];
            r.evict(base + a, l).unwrap();
            assert_eq!(raw_write(base + a, &data[..8]), -(libc::EFAULT as isize), "round {round}: evicted");
            let mut back = vec![0u8; 16 * ps];
            r.read(at, &mut back).unwrap();
            assert!(back == data, "round {round}: contents back");
        }
        if super::uffd_region::kernel_has_move() {
            assert!(
                r.moves_pages(),
                "UFFDIO_MOVE refused on this kernel's {} region",
                if std::ptr::eq(r, &fresh) { "fresh" } else { "adopted" }
            );
        }
    }
    drop(adopted);
    drop(heap);
}

#[test]
fn part_page_in_from_the_shadow_keeps_contents_over_repeated_evictions() {
    // Page-in moves the shadow's pages into place where the kernel has UFFDIO_MOVE (the shadow
    // page is gone afterwards), so a second eviction must save the new contents again, and a
    // run of pages mixing evicted and never-written pages must come back exactly.
    let ps = page_size();
    let r = region(64 * ps);
    for round in 0..3u8 {
        let data = pattern(48 * ps, 11 + round);
        r.write(0, &data).unwrap();
        assert_eq!(r.evict(r.addr(), 64 * ps).unwrap(), if round == 0 { 48 } else { 64 });
        assert_eq!(r.resident_pages(r.addr(), 64 * ps).unwrap(), 0);
        assert_eq!(r.page_in(r.addr(), 64 * ps).unwrap(), 64);
        let mut back = vec![1u8; 64 * ps];
        r.read(0, &mut back).unwrap();
        assert_eq!(&back[..48 * ps], &data[..], "round {round}: evicted pages come back with their contents");
        assert!(back[48 * ps..].iter().all(|&b| b == 0), "round {round}: never-written pages are zeros");
    }
    // The owner's own touch (SIGBUS, one page at a time) takes the same path.
    let data = pattern(64 * ps, 3);
    r.write(0, &data).unwrap();
    r.evict(r.addr(), 64 * ps).unwrap();
    for i in 0..64 {
        assert_eq!(unsafe { std::ptr::read_volatile(r.as_ptr().add(i * ps + 9)) }, data[i * ps + 9]);
    }
}

#[test]
fn part_owner_cpu_touch_is_resolved_by_the_sigbus_handler() {
    let ps = page_size();
    let r = region(4 * ps);
    let before = sigbus_resolved();
    let p = r.as_ptr();
    unsafe {
        // A plain store into a missing page: SIGBUS, handled, store retried.
        std::ptr::write_volatile(p.add(ps + 5), 42u8);
        assert_eq!(std::ptr::read_volatile(p.add(ps + 5)), 42);
        assert_eq!(std::ptr::read_volatile(p.add(3 * ps)), 0, "never-written page reads as zeros");
    }
    r.evict(r.addr() + ps, ps).unwrap();
    assert_eq!(unsafe { std::ptr::read_volatile(p.add(ps + 5)) }, 42, "content survives eviction");
    assert!(sigbus_resolved() >= before + 3);
}

struct Case {
    page_in: PageIn,
    retransmit: Retransmit,
    threaded: bool,
}

/// Distinct blocks (aligned in the target's address space) holding an injected page inside
/// `[addr, addr+len)`.
fn injected_blocks(injected: &[usize], addr: usize, len: usize, block: usize) -> u64 {
    let ps = page_size();
    let mut blocks: Vec<usize> = injected.iter().filter(|&&p| p + ps > addr && p < addr + len).map(|&p| p.max(addr) / block).collect();
    blocks.dedup();
    blocks.len() as u64
}

/// 1 MiB (unaligned at both ends) with ~30 % of the target's pages evicted, as a put and as a
/// get (the get's local buffer faults too). Checks every byte, the bytes around the transfer,
/// and that every injected fault was counted.
fn run_case(c: &Case, seed: u64) {
    let ps = page_size();
    let len = (1 << 20) - 300;
    let off = 100;
    let cfg = PartConfig { page_in: c.page_in, retransmit: c.retransmit, ..Default::default() };
    let label = format!("{:?}/{:?}/threaded={}", c.page_in, c.retransmit, c.threaded);
    let remote_pages_of = |addr: usize, v: &[usize]| v.iter().filter(|&&p| p + ps > addr + off && p < addr + off + len).count();

    // ---- put: origin buffer (plain memory) -> target region with faults ----
    let target_region = region(len + 2 * ps);
    let old = pattern(target_region.len(), 3);
    target_region.write(0, &old).unwrap();
    let src = pattern(len, 9);
    let injected = FaultInjector::new(0.3, seed).unwrap().inject(&target_region, target_region.addr(), target_region.len()).unwrap();
    let n_inj = remote_pages_of(target_region.addr(), &injected);
    assert!(n_inj > 0, "{label}: injector chose no page");
    let stats = Arc::new(PartStats::default());
    let target = PartTarget::new(stats.clone());
    let link = LocalLink::new(target.clone(), !c.threaded);
    let _h = c.threaded.then(|| HandlerThread::spawn(target.clone(), link.clone()));
    let origin = Origin::new(0, cfg.clone(), stats.clone()).unwrap();
    origin.put(&link, me(), target_region.addr() + off, &src).unwrap_or_else(|e| panic!("{label}: put: {e}"));
    drop(_h);
    // With a time-out the transfer can finish while a duplicate NACK (sent by a resend that beat
    // the page-in) is still queued; resolve it so the counts below are complete.
    target.progress(&*link).unwrap();
    let mut back = vec![0u8; target_region.len()];
    target_region.read(0, &mut back).unwrap();
    let mut want = old.clone();
    want[off..off + len].copy_from_slice(&src);
    assert!(back == want, "{label}: put result differs (first at {:?})", back.iter().zip(&want).position(|(a, b)| a != b));
    let g = |c: &std::sync::atomic::AtomicU64| PartStats::get(c);
    // Every injected page inside the transfer was paged in exactly once, by the handler; pages
    // outside it only by the read-back above.
    assert_eq!(g(&stats.pages_paged_in), n_inj as u64, "{label}: pages paged in vs injected");
    assert_eq!(g(&stats.faults_src), 0);
    // With ERR a page faults at most once (only PI4/PIA can make it fewer); with a time-out a
    // resend that beats the page-in NACKs again, as often as the handler is late.
    let f = g(&stats.faults_dst);
    assert!(f >= 1 && (c.retransmit != Retransmit::Err || f <= n_inj as u64), "{label}: {f} faults for {n_inj} injected");
    if c.page_in == PageIn::One && c.retransmit == Retransmit::Err {
        assert_eq!(g(&stats.faults_dst), n_inj as u64, "{label}: PIO meets every injected page once");
    }
    assert_eq!(g(&stats.nacks_sent), g(&stats.faults_dst));
    assert_eq!(g(&stats.nacks_received), g(&stats.nacks_sent));
    assert_eq!(g(&stats.retransmissions), g(&stats.nacks_sent), "{label}: one resend per NACK");
    match c.retransmit {
        Retransmit::Err => {
            assert_eq!(g(&stats.errs_sent), g(&stats.nacks_sent));
            assert_eq!(g(&stats.errs_received), g(&stats.errs_sent));
            assert_eq!(g(&stats.timeouts), 0);
        }
        Retransmit::Timeout(_) => {
            assert_eq!(g(&stats.errs_sent), 0);
            assert_eq!(g(&stats.timeouts), g(&stats.retransmissions));
        }
    }
    if c.page_in == PageIn::All && c.retransmit == Retransmit::Err {
        // PIA: the first fault pages in the rest of the transfer and the origin waits for the
        // ERR before sending on. (With a time-out the resend may beat the page-in and NACK again.)
        assert_eq!(g(&stats.faults_dst), 1, "{label}: PIA resolves the whole transfer on its first fault");
    }
    if c.page_in == PageIn::AllEarlyErr && c.retransmit == Retransmit::Err {
        // Early ERR: the origin runs on while the handler pages in, so several blocks may
        // fault; but a block's ERR follows the page-in of that whole block, so no block
        // faults twice.
        let blocks = injected_blocks(&injected, target_region.addr() + off, len, cfg.block_size);
        assert!(f <= blocks, "{label}: {f} faults for {blocks} blocks holding injected pages");
    }

    // ---- get: target region with faults -> origin region with faults ----
    let local_region = region(len + 2 * ps);
    let local_old = pattern(local_region.len(), 5);
    local_region.write(0, &local_old).unwrap();
    let injected_t = FaultInjector::new(0.3, seed + 1).unwrap().inject(&target_region, target_region.addr(), target_region.len()).unwrap();
    let injected_l = FaultInjector::new(0.3, seed + 2).unwrap().inject(&local_region, local_region.addr(), local_region.len()).unwrap();
    let n_t = remote_pages_of(target_region.addr(), &injected_t);
    let n_l = remote_pages_of(local_region.addr(), &injected_l);
    let stats = Arc::new(PartStats::default());
    let target = PartTarget::new(stats.clone());
    let link = LocalLink::new(target.clone(), !c.threaded);
    let _h = c.threaded.then(|| HandlerThread::spawn(target.clone(), link.clone()));
    let origin = Origin::new(0, cfg, stats.clone()).unwrap();
    // The local buffer is a PART region of ours: a raw slice over it is what a user would hand in.
    let dst = unsafe { std::slice::from_raw_parts_mut(local_region.as_ptr().add(off), len) };
    origin.get(&link, me(), target_region.addr() + off, dst).unwrap_or_else(|e| panic!("{label}: get: {e}"));
    drop(_h);
    target.progress(&*link).unwrap();
    assert_eq!(g(&stats.faults_dst), n_l as u64, "{label}: every local (destination) fault counted once");
    assert_eq!(g(&stats.pages_paged_in), (n_t + n_l) as u64, "{label}: get pages paged in");
    let mut lback = vec![0u8; local_region.len()];
    local_region.read(0, &mut lback).unwrap();
    let mut lwant = local_old;
    lwant[off..off + len].copy_from_slice(&want[off..off + len]);
    assert!(lback == lwant, "{label}: get result differs (first at {:?})", lback.iter().zip(&lwant).position(|(a, b)| a != b));
}

#[test]
fn part_1mib_with_30pct_faults_pio_err() {
    run_case(&Case { page_in: PageIn::One, retransmit: Retransmit::Err, threaded: true }, 11);
    run_case(&Case { page_in: PageIn::One, retransmit: Retransmit::Err, threaded: false }, 12);
}

#[test]
fn part_1mib_with_30pct_faults_pi4_err() {
    run_case(&Case { page_in: PageIn::Block, retransmit: Retransmit::Err, threaded: true }, 21);
    run_case(&Case { page_in: PageIn::Block, retransmit: Retransmit::Err, threaded: false }, 22);
}

#[test]
fn part_1mib_with_30pct_faults_pia_err() {
    run_case(&Case { page_in: PageIn::All, retransmit: Retransmit::Err, threaded: true }, 31);
    run_case(&Case { page_in: PageIn::All, retransmit: Retransmit::Err, threaded: false }, 32);
}

#[test]
fn part_1mib_with_30pct_faults_pia_early_err() {
    run_case(&Case { page_in: PageIn::AllEarlyErr, retransmit: Retransmit::Err, threaded: true }, 33);
    run_case(&Case { page_in: PageIn::AllEarlyErr, retransmit: Retransmit::Err, threaded: false }, 34);
}

#[test]
fn part_1mib_with_30pct_faults_timeouts() {
    for (i, page_in) in PageIn::ALL.into_iter().enumerate() {
        for (j, t) in [Duration::from_micros(100), Duration::from_millis(1)].into_iter().enumerate() {
            let seed = 40 + 2 * i as u64 + j as u64;
            run_case(&Case { page_in, retransmit: Retransmit::Timeout(t), threaded: true }, seed);
        }
    }
}

#[test]
fn part_put_source_faults_are_resolved_at_the_origin() {
    let ps = page_size();
    let len = 64 * ps;
    let local = region(len);
    let src = pattern(len, 4);
    local.write(0, &src).unwrap();
    let inj = FaultInjector::new(0.5, 5).unwrap().inject(&local, local.addr(), len).unwrap();
    let remote = region(len);
    remote.page_in(remote.addr(), len).unwrap();
    let stats = Arc::new(PartStats::default());
    let link = LocalLink::new(PartTarget::new(stats.clone()), true);
    let origin = Origin::new(0, PartConfig::default(), stats.clone()).unwrap();
    let s = unsafe { std::slice::from_raw_parts(local.as_ptr(), len) };
    origin.put(&link, me(), remote.addr(), s).unwrap();
    assert_eq!(PartStats::get(&stats.faults_src), inj.len() as u64);
    assert_eq!(PartStats::get(&stats.nacks_sent), 0, "source faults need no message");
    let mut back = vec![0u8; len];
    remote.read(0, &mut back).unwrap();
    assert_eq!(back, src);
}

#[test]
fn part_pretouch_pages_in_the_local_buffer_first() {
    let ps = page_size();
    let local = region(4 * ps);
    let remote = region(4 * ps);
    remote.page_in(remote.addr(), 4 * ps).unwrap();
    let stats = Arc::new(PartStats::default());
    let link = LocalLink::new(PartTarget::new(stats.clone()), true);
    let cfg = PartConfig { pretouch_max: 64 << 10, ..Default::default() };
    let origin = Origin::new(0, cfg, stats.clone()).unwrap();
    let s = unsafe { std::slice::from_raw_parts(local.as_ptr(), 4 * ps) };
    origin.put(&link, me(), remote.addr(), s).unwrap();
    assert_eq!(PartStats::get(&stats.pages_pretouched), 4);
    assert_eq!(PartStats::get(&stats.faults_src), 0);
}

#[test]
fn part_bad_remote_address_is_an_error_in_both_modes() {
    let ps = page_size();
    // A mapped but inaccessible page outside any PART region: cross-memory attach says EFAULT,
    // the target finds no region and answers NotPart even without ERR.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), ps, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED);
    for rt in [Retransmit::Err, Retransmit::Timeout(Duration::from_millis(1))] {
        let stats = Arc::new(PartStats::default());
        let link = LocalLink::new(PartTarget::new(stats.clone()), true);
        let origin = Origin::new(0, PartConfig { retransmit: rt, ..Default::default() }, stats).unwrap();
        let e = origin.put(&link, me(), p as usize, &[1u8; 64]).unwrap_err();
        assert!(matches!(e, Error::NotExposed { .. }), "{rt:?}: {e}");
    }
    unsafe { libc::munmap(p, ps) };
}

#[test]
fn part_block_size_is_settable() {
    let ps = page_size();
    let len = 32 * ps;
    let remote = region(len);
    let stats = Arc::new(PartStats::default());
    let link = LocalLink::new(PartTarget::new(stats.clone()), true);
    let cfg = PartConfig { block_size: 8 * ps, page_in: PageIn::Block, ..Default::default() };
    let origin = Origin::new(0, cfg, stats.clone()).unwrap();
    let src = pattern(len, 2);
    origin.put(&link, me(), remote.addr(), &src).unwrap();
    // All pages missing: PI4 pages in a whole block per fault. Blocks are aligned in the
    // target's address space, so a region that is not 8-page aligned has a short first block.
    let blocks = (remote.addr() % (8 * ps) + len).div_ceil(8 * ps) as u64;
    assert_eq!(PartStats::get(&stats.blocks_sent), blocks);
    assert_eq!(PartStats::get(&stats.nacks_sent), blocks);
    assert_eq!(PartStats::get(&stats.pages_paged_in), 32);
    let mut back = vec![0u8; len];
    remote.read(0, &mut back).unwrap();
    assert_eq!(back, src);
}

#[test]
fn part_adopt_existing_memory_keeps_resident_pages() {
    let ps = page_size();
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), 4 * ps, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    unsafe { std::ptr::write_bytes(p as *mut u8, 9, ps) }; // page 0 resident, pages 1..4 untouched
    {
        let r = unsafe { UffdRegion::adopt(p as usize, 4 * ps) }.unwrap_or_else(|e| panic!("adopt: {e}"));
        assert_eq!(r.resident_pages(r.addr(), 4 * ps).unwrap(), 1);
        assert_eq!(raw_write(r.addr(), &[1u8; 8]), 8, "a resident page takes the write");
        assert_eq!(raw_write(r.addr() + ps, &[1u8; 8]), -(libc::EFAULT as isize), "an untouched page is missing");
        let mut b = [0u8; 2];
        r.read(ps - 1, &mut b).unwrap();
        assert_eq!(b, [9, 0]);
    }
    // Dropped: the memory is ordinary again and stays mapped.
    assert_eq!(raw_write(p as usize + 3 * ps, &[1u8; 8]), 8);
    unsafe { libc::munmap(p, 4 * ps) };
}

#[test]
fn part_adopted_region_gives_back_evicted_pages_when_dropped() {
    // An exposure's region is dropped at unexpose while the memory lives on: pages evicted
    // (their contents in the shadow) must be installed again first, not come back as zeros.
    let ps = page_size();
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), 4 * ps, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    let data = pattern(4 * ps, 5);
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, 4 * ps) };
    {
        let r = unsafe { UffdRegion::adopt(p as usize, 4 * ps) }.unwrap_or_else(|e| panic!("adopt: {e}"));
        assert_eq!(r.evict(r.addr() + ps, 2 * ps).unwrap(), 2);
        assert_eq!(r.resident_pages(r.addr(), 4 * ps).unwrap(), 2);
    }
    // Unregistered: a missing page would now read as zeros; every byte must be the old one.
    let back = unsafe { std::slice::from_raw_parts(p as *const u8, 4 * ps) };
    assert!(back == &data[..], "evicted pages lost their contents when the region was dropped");
    unsafe { libc::munmap(p, 4 * ps) };
}
