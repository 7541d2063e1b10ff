//! How pages are pinned: the `Pinner` trait, the real one (mlock/munlock) and a counting fake
//! for tests. Shared by every registration strategy (Firehose re-exports it). mlock is not
//! reference counted — one munlock undoes any number of mlocks — so callers never pin a page
//! twice: Firehose pins whole buckets once, the `Registrar` keeps a count per page; the fake
//! checks that this bookkeeping is exact.

use activerma_core::page::{memlock_limit, page_size};
use activerma_core::{Error, Result};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Pins and unpins page-aligned ranges. Called with the caller's table lock held (Firehose's,
/// the Registrar's), so it must return in bounded time (an AM handler waits for it).
pub trait Pinner: Send + Sync {
    fn pin(&self, addr: usize, len: usize) -> Result<()>;
    fn unpin(&self, addr: usize, len: usize) -> Result<()>;
}

extern "C" {
    // Declared here rather than adding a libc dependency to this crate: two stable POSIX calls.
    fn mlock(addr: *const std::ffi::c_void, len: usize) -> i32;
    fn munlock(addr: *const std::ffi::c_void, len: usize) -> i32;
}

// Linux errno values.
const EPERM: i32 = 1;
const EAGAIN: i32 = 11;
const ENOMEM: i32 = 12;

/// The real pinner: mlock(2) / munlock(2) on this process's memory.
#[derive(Debug, Default)]
pub struct MlockPinner;

impl Pinner for MlockPinner {
    fn pin(&self, addr: usize, len: usize) -> Result<()> {
        // SAFETY: mlock only changes residency; any address range is safe to pass.
        if unsafe { mlock(addr as *const _, len) } == 0 {
            return Ok(());
        }
        Err(pin_error(addr, len, std::io::Error::last_os_error()))
    }

    fn unpin(&self, addr: usize, len: usize) -> Result<()> {
        // SAFETY: as above.
        if unsafe { munlock(addr as *const _, len) } == 0 {
            return Ok(());
        }
        Err(Error::Os { call: "munlock", errno_text: std::io::Error::last_os_error().to_string() })
    }
}

/// Turns an mlock failure into an error that names the limit and how to raise it: the common
/// cause is RLIMIT_MEMLOCK (8 MiB by default for non-root users).
pub fn pin_error(addr: usize, len: usize, err: std::io::Error) -> Error {
    let limit = match memlock_limit() {
        Some(b) => format!("{} KiB", b / 1024),
        None => "unlimited".to_string(),
    };
    match err.raw_os_error() {
        Some(EAGAIN) | Some(ENOMEM) | Some(EPERM) => Error::OutOfResources(format!(
            "cannot pin {len} bytes at {addr:#x} (mlock: {err}); the locked-memory limit \
             RLIMIT_MEMLOCK is {limit}: raise it with `ulimit -l <KiB>` or `ulimit -l unlimited` \
             (for batch jobs: `memlock` in /etc/security/limits.conf or the scheduler's setting), \
             or pin less: a registration strategy that pins on demand (ACTIVERMA_REGISTRATION=\
             rendezvous-unpin or bounce instead of pin-all), or for firehose lower M and MAXVICTIM \
             so that (M + MAXVICTIM) fits under it (if the limit is already large, the range may \
             not be mapped memory)"
        )),
        _ => Error::Os { call: "mlock", errno_text: err.to_string() },
    }
}

/// Test double: remembers which pages are pinned, counts calls, keeps the high-water mark, and
/// refuses (as mlock would over RLIMIT_MEMLOCK) beyond an optional page limit. It touches no
/// memory, so tests can use any addresses. Pinning a pinned page or unpinning an unpinned one
/// is a Firehose bookkeeping bug: it fails and is counted in `violations`.
#[derive(Debug, Default)]
pub struct CountingPinner {
    pages: Mutex<HashSet<usize>>,
    limit_pages: Option<usize>,
    pin_calls: AtomicU64,
    unpin_calls: AtomicU64,
    max_live: AtomicU64,
    violations: AtomicU64,
}

impl CountingPinner {
    pub fn new() -> CountingPinner {
        CountingPinner::default()
    }

    /// Refuses pins that would make more than `pages` pages pinned at once.
    pub fn with_limit(pages: usize) -> CountingPinner {
        CountingPinner { limit_pages: Some(pages), ..CountingPinner::default() }
    }

    /// Pages pinned now.
    pub fn live(&self) -> usize {
        self.pages.lock().unwrap().len()
    }

    pub fn max_live(&self) -> usize {
        self.max_live.load(Ordering::Relaxed) as usize
    }

    pub fn pin_calls(&self) -> u64 {
        self.pin_calls.load(Ordering::Relaxed)
    }

    pub fn unpin_calls(&self) -> u64 {
        self.unpin_calls.load(Ordering::Relaxed)
    }

    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }

    pub fn is_pinned(&self, addr: usize) -> bool {
        self.pages.lock().unwrap().contains(&(addr & !(page_size() - 1)))
    }
}

fn pages_of(addr: usize, len: usize) -> impl Iterator<Item = usize> {
    let p = page_size();
    (addr / p..(addr + len).div_ceil(p)).map(move |i| i * p)
}

impl Pinner for CountingPinner {
    fn pin(&self, addr: usize, len: usize) -> Result<()> {
        self.pin_calls.fetch_add(1, Ordering::Relaxed);
        let mut pages = self.pages.lock().unwrap();
        let new: Vec<usize> = pages_of(addr, len).collect();
        if new.iter().any(|p| pages.contains(p)) {
            self.violations.fetch_add(1, Ordering::Relaxed);
            return Err(Error::InvalidArgument(format!("fake pinner: {addr:#x}+{len} is already pinned")));
        }
        if let Some(limit) = self.limit_pages {
            if pages.len() + new.len() > limit {
                return Err(pin_error(addr, len, std::io::Error::from_raw_os_error(ENOMEM)));
            }
        }
        pages.extend(new);
        self.max_live.fetch_max(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn unpin(&self, addr: usize, len: usize) -> Result<()> {
        self.unpin_calls.fetch_add(1, Ordering::Relaxed);
        let mut pages = self.pages.lock().unwrap();
        let mut ok = true;
        for p in pages_of(addr, len) {
            ok &= pages.remove(&p);
        }
        if !ok {
            self.violations.fetch_add(1, Ordering::Relaxed);
            return Err(Error::InvalidArgument(format!("fake pinner: {addr:#x}+{len} was not pinned")));
        }
        Ok(())
    }
}
