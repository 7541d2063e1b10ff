//! The Registrar against the counting fake (exact bookkeeping, budgets, rollbacks) and against
//! the real mlock pinner (checked with the kernel's VmLck).

use super::*;
use std::alloc::{alloc_zeroed, dealloc, Layout};

fn page() -> usize {
    page_size()
}

fn registrar(strategy: Strategy, pinner: Arc<CountingPinner>, budget: u64) -> Registrar {
    Registrar::new(strategy, pinner, budget, Arc::new(RegistrationStats::default()))
}

fn count(r: &Registrar, name: &str) -> u64 {
    r.stats().snapshot().into_iter().find(|&(k, _)| k == name).unwrap().1
}

#[test]
fn shared_pages_are_pinned_once_and_unpinned_by_the_last_holder() {
    let p = page();
    let fake = Arc::new(CountingPinner::new());
    let r = registrar(Strategy::PinAll, fake.clone(), 0);
    let base = 0x4000_0000;
    // Two byte ranges that share page 1: [base+10, base+p+20) and [base+p+100, base+3p).
    r.hold(base + 10, p + 10).unwrap();
    r.hold(base + p + 100, 2 * p - 100).unwrap();
    assert_eq!(fake.live(), 3, "pages 0, 1, 2 pinned, page 1 once");
    assert_eq!(fake.pin_calls(), 2, "one run each: [0,2) then [2,3)");
    assert_eq!(r.pinned_bytes(), 3 * p);
    r.release(base + 10, p + 10).unwrap();
    assert!(fake.is_pinned(base + p), "page 1 is still held by the second range");
    assert!(!fake.is_pinned(base));
    r.release(base + p + 100, 2 * p - 100).unwrap();
    assert_eq!(fake.live(), 0);
    assert_eq!(fake.violations(), 0, "never pinned twice, never unpinned unpinned pages");
    assert_eq!(count(&r, "pins"), 2);
    assert_eq!(count(&r, "unpins"), 2);
    assert_eq!(count(&r, "bytes_pinned"), 3 * p as u64);
    assert_eq!(count(&r, "bytes_unpinned"), 3 * p as u64);
    assert_eq!(count(&r, "pinned_peak"), 3 * p as u64);
    assert_eq!(r.stats().pinned_now(), 0);
    assert!(r.release(base, 1).is_err(), "releasing what nobody holds is a bookkeeping error");
}

#[test]
fn the_pin_budget_refuses_with_the_setting_named_and_pins_nothing() {
    let p = page();
    let fake = Arc::new(CountingPinner::new());
    let r = registrar(Strategy::PinAll, fake.clone(), 4 * p as u64);
    r.hold(0x5000_0000, 3 * p).unwrap();
    let e = r.hold(0x6000_0000, 2 * p).unwrap_err().to_string();
    assert!(e.contains("ACTIVERMA_PIN_LIMIT") && e.contains("ulimit -l"), "{e}");
    assert_eq!(fake.live(), 3, "the refused range left nothing pinned");
    assert_eq!(count(&r, "pin_failures"), 1);
    // Holding an already pinned page costs no budget.
    r.hold(0x5000_0000, p).unwrap();
    r.hold(0x6000_0000, p).unwrap();
    assert_eq!(fake.live(), 4);
}

#[test]
fn a_failed_pin_rolls_back_the_runs_already_pinned() {
    let p = page();
    // The kernel-limit stand-in: 3 pages at most.
    let fake = Arc::new(CountingPinner::with_limit(3));
    let r = registrar(Strategy::Rendezvous, fake.clone(), 0);
    r.hold(0x7000_0000 + p, p).unwrap(); // splits the next range into two runs
    let e = r.hold(0x7000_0000, 4 * p).unwrap_err().to_string();
    assert!(e.contains("RLIMIT_MEMLOCK") && e.contains("ulimit -l"), "{e}");
    assert_eq!(fake.live(), 1, "the first run was unpinned again");
    assert_eq!(fake.violations(), 0);
    assert_eq!(r.pinned_bytes(), p);
}

/// Locked memory of this process, from /proc/self/status (kB).
fn vm_lck_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmLck:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn the_real_pinner_locks_and_unlocks_memory() {
    let ps = page();
    let layout = Layout::from_size_align(8 * ps, ps).unwrap();
    // SAFETY: non-zero size; freed below.
    let buf = unsafe { alloc_zeroed(layout) } as usize;
    let stats = Arc::new(RegistrationStats::default());
    let r = Registrar::new(Strategy::PinAll, Arc::new(MlockPinner), 0, stats);
    let before = vm_lck_kb();
    match r.hold(buf + 100, 3 * ps) {
        Ok(()) => {
            assert!(vm_lck_kb() >= before + 4 * ps as u64 / 1024, "4 pages locked");
            r.release(buf + 100, 3 * ps).unwrap();
            assert_eq!(vm_lck_kb(), before, "unlocked again");
        }
        Err(e) => assert!(e.to_string().contains("ulimit -l"), "a small RLIMIT_MEMLOCK is named: {e}"),
    }
    // SAFETY: allocated above with this layout.
    unsafe { dealloc(buf as *mut u8, layout) };
}
