//! The real pinner on a small buffer, checked against the kernel's VmLck.

use crate::firehose::{pin_error, Config, Firehose, MlockPinner, Pinner, Region};
use activerma_core::page::page_size;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Arc;

use super::fakes::NoTransport;

/// Locked memory of this process, from /proc/self/status (kB).
fn vm_lck_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmLck:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn firehose_mlock_pinner_on_a_small_buffer() {
    let ps = page_size();
    let layout = Layout::from_size_align(8 * ps, ps).unwrap();
    // SAFETY: non-zero size; freed below.
    let buf = unsafe { alloc_zeroed(layout) } as usize;
    assert_ne!(buf, 0);
    let before = vm_lck_kb();

    let pinner = MlockPinner;
    match pinner.pin(buf, 2 * ps) {
        Ok(()) => {
            assert!(vm_lck_kb() >= before + 2 * ps as u64 / 1024, "mlock took effect");
            pinner.unpin(buf, 2 * ps).unwrap();
        }
        // A tiny RLIMIT_MEMLOCK: the error must say so and how to raise it.
        Err(e) => assert!(e.to_string().contains("ulimit -l"), "{e}"),
    }

    // Through Firehose: pin 4 pages, release (stays locked as victims), invalidate (unlocked).
    let mut cfg = Config::new(0, 1, 8 * ps, 8 * ps);
    cfg.prepinned = vec![Region::new(buf + 7 * ps, ps)];
    let fh = Firehose::new(cfg, Arc::new(MlockPinner), Arc::new(NoTransport)).unwrap();
    if let Ok(pin) = fh.local_pin(buf, 4 * ps) {
        let locked = vm_lck_kb();
        assert!(locked >= before + 4 * ps as u64 / 1024);
        fh.release_local(pin).unwrap();
        assert_eq!(vm_lck_kb(), locked, "released pages stay pinned (lazy deregistration)");
        assert_eq!(fh.invalidate_local(buf, 8 * ps), 4);
        assert_eq!(vm_lck_kb(), before);
        // Prepinned memory is a hit without any pinning.
        let pre = fh.local_pin(buf + 7 * ps, 10).unwrap();
        assert_eq!(fh.pinned_buckets(), 0);
        fh.release_local(pre).unwrap();
        fh.check_invariants().unwrap();
    }
    // SAFETY: allocated above with this layout.
    unsafe { dealloc(buf as *mut u8, layout) };

    // An unmapped range (the first page is never mapped) fails with an explanatory error.
    let e = MlockPinner.pin(0, ps).unwrap_err();
    assert!(e.to_string().contains("RLIMIT_MEMLOCK"), "{e}");
    let e = pin_error(0x1000, 4096, std::io::Error::from_raw_os_error(11));
    assert!(e.to_string().contains("ulimit -l"), "{e}");
}
