//! The process-wide table of PART regions, and the SIGBUS handler that uses it.
//!
//! Three paths need "which PART region holds this address?": the target's fault handler
//! (address from a NACK), the origin (its own buffer faulted), and the SIGBUS handler (the
//! owner's CPU touched a missing page). The last one runs in signal context, so the table is a
//! fixed array of atomics — no locks, no allocation. A lookup pins a slot with a `users` count;
//! removal marks the slot DYING and waits for `users` to drain before the region is freed (the
//! same Dekker-style handshake as the translation table's `inflight`, both sides SeqCst).

use super::uffd_region::RegionInner;
use activerma_core::page::page_size;
use activerma_core::{Error, Result};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
use std::sync::OnceLock;

const FREE: u32 = 0;
const BUSY: u32 = 1;
const LIVE: u32 = 2;
const DYING: u32 = 3;
/// Regions per process. A rank registers a handful (its exposed private ranges); 256 keeps
/// the signal-time scan short.
pub const MAX_REGIONS: usize = 256;

pub(crate) struct Slot {
    state: AtomicU32,
    users: AtomicU32,
    region: AtomicPtr<RegionInner>,
}

static SLOTS: [Slot; MAX_REGIONS] =
    [const { Slot { state: AtomicU32::new(FREE), users: AtomicU32::new(0), region: AtomicPtr::new(std::ptr::null_mut()) } }; MAX_REGIONS];

/// Pages installed by the SIGBUS handler (the owner's CPU touched a missing page).
static SIGBUS_RESOLVED: AtomicU64 = AtomicU64::new(0);

pub fn sigbus_resolved() -> u64 {
    SIGBUS_RESOLVED.load(Relaxed)
}

pub(crate) fn insert(r: &RegionInner) -> Result<&'static Slot> {
    for s in SLOTS.iter() {
        if s.state.compare_exchange(FREE, BUSY, Acquire, Relaxed).is_ok() {
            s.region.store(r as *const _ as *mut _, Relaxed);
            s.state.store(LIVE, SeqCst);
            return Ok(s);
        }
    }
    Err(Error::OutOfResources(format!("more than {MAX_REGIONS} PART regions in one process")))
}

pub(crate) fn remove(s: &'static Slot) {
    s.state.store(DYING, SeqCst);
    while s.users.load(SeqCst) != 0 {
        std::thread::yield_now();
    }
    s.region.store(std::ptr::null_mut(), Relaxed);
    s.state.store(FREE, Release);
}

/// A looked-up region; the region cannot be freed while this exists.
pub(crate) struct Held {
    slot: &'static Slot,
    region: *const RegionInner,
}

impl Held {
    pub(crate) fn region(&self) -> &RegionInner {
        // SAFETY: `remove` waits for our `users` count before the region is freed.
        unsafe { &*self.region }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.slot.users.fetch_sub(1, SeqCst);
    }
}

/// The PART region holding `addr`, if any. Async-signal-safe.
pub(crate) fn lookup(addr: usize) -> Option<Held> {
    for s in SLOTS.iter() {
        if s.state.load(Acquire) != LIVE {
            continue;
        }
        s.users.fetch_add(1, SeqCst);
        let r = s.region.load(SeqCst);
        // Re-check after pinning: the slot may have died or been reused meanwhile.
        // SAFETY: while LIVE and pinned, `r` points at a live region.
        if s.state.load(SeqCst) == LIVE && !r.is_null() && unsafe { (*r).contains(addr) } {
            return Some(Held { slot: s, region: r });
        }
        s.users.fetch_sub(1, SeqCst);
    }
    None
}

static OLD_ACTION: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs (once per process) the SIGBUS handler that resolves the owner's own touches of
/// missing pages; any other SIGBUS goes to the handler that was there before, or kills the
/// process as it would have.
pub(crate) fn install_sigbus_handler() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: sigaction with a handler that only uses async-signal-safe operations.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            // Record the old action before ours can run.
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) < 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
            let _ = OLD_ACTION.set(old);
            if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) < 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
        }
        Ok(())
    })
    .clone()
    .map_err(|errno_text| Error::Os { call: "sigaction(SIGBUS)", errno_text })
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(h) = lookup(addr) {
        let r = h.region();
        let idx = (addr - r.base) / page_size();
        // Ok(0) means another thread installed it first: retrying the access is right too.
        if r.install_one(idx).is_ok() {
            SIGBUS_RESOLVED.fetch_add(1, Relaxed);
            return;
        }
    }
    // Not ours (or the page cannot be installed): behave as if we were never here.
    let Some(old) = OLD_ACTION.get() else { return reset_default(sig) };
    if old.sa_flags & libc::SA_SIGINFO != 0 && old.sa_sigaction > libc::SIG_IGN {
        // SAFETY: calling the previously installed SA_SIGINFO handler with our arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(old.sa_sigaction) };
        f(sig, info, ctx);
    } else if old.sa_sigaction > libc::SIG_IGN {
        // SAFETY: as above, a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(old.sa_sigaction) };
        f(sig);
    } else {
        // SIG_DFL (or SIG_IGN, which cannot ignore a fault): restore the default and return;
        // the faulting access runs again and the kernel kills the process with SIGBUS.
        reset_default(sig);
    }
}

fn reset_default(sig: libc::c_int) {
    // SAFETY: sigaction/signal are async-signal-safe.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
}
