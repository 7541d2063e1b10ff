//! A range of private anonymous memory registered with userfaultfd in SIGBUS mode: the on-host
//! stand-in for unpinned memory behind an IOMMU. A remote access (process_vm_writev/readv) that
//! meets a missing page fails fast — EFAULT, or a short count ending at that page — instead of
//! the kernel quietly allocating it; that failure is PART's NACK. Pages are installed with
//! UFFDIO_COPY (MADV_POPULATE_WRITE does not work here: in SIGBUS mode it fails with EFAULT
//! like any other fault, see the tests).
//!
//! Eviction keeps contents: a resident page goes to a per-region shadow (the "swap") and its
//! slot becomes missing; paging it in brings it back. Where the kernel has UFFDIO_MOVE both
//! ways move the page itself (no copy): a real swap moves data by DMA, which leaves no CPU's
//! cache holding it, while a CPU copy here would leave the whole page dirty in the evicting
//! and then the paging-in core's cache, and every later remote copy would pay to fetch it
//! from there (measured: a put to pages "dirty in the owner's cache" took 1.9-2.1x a put to
//! the same pages otherwise). Without UFFDIO_MOVE: a CPU copy out, UFFDIO_COPY back. A page
//! never written (or never evicted while resident) pages in as zeros, as demand-zero memory
//! would.

use super::registry::{self, Slot};
use super::sys::*;
use activerma_core::page::page_size;
use activerma_core::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// The part of a region the fault paths need; reachable from the SIGBUS handler through the
/// process-wide registry, so it is never freed while a lookup holds it (see registry.rs).
pub(crate) struct RegionInner {
    uffd: OwnedFd,
    pub(crate) base: usize,
    pub(crate) len: usize,
    /// Shadow copy of evicted pages ("swap"); committed lazily, only pages evicted while
    /// resident ever get written.
    shadow: usize,
    /// Per page: 1 when the shadow holds the page's contents (it was evicted while resident).
    saved: Box<[AtomicU8]>,
    /// Serialises evictions (a test/benchmark tool), never taken on a fault path.
    evict_lock: Mutex<()>,
    /// UFFDIO_MOVE works here: eviction and page-in move pages (no allocation, no copy);
    /// cleared at the first refusal, then UFFDIO_COPY.
    can_move: std::sync::atomic::AtomicBool,
    /// The shadow is registered with `uffd` too (so pages can be moved into it): the CPU must
    /// then never touch it (a missing shadow page would raise SIGBUS); only ioctls fill it.
    shadow_registered: bool,
}

/// Source of zeros for UFFDIO_COPY: a read-only anonymous mapping that is never written, so
/// reading it maps the shared zero page and costs no memory.
const ZERO_SRC_LEN: usize = 256 << 10;
fn zero_src() -> Result<usize> {
    static Z: OnceLock<usize> = OnceLock::new();
    if let Some(&z) = Z.get() {
        return Ok(z);
    }
    let p = mmap_anon(ZERO_SRC_LEN, libc::PROT_READ)?;
    Ok(*Z.get_or_init(|| p))
}

fn mmap_anon(len: usize, prot: libc::c_int) -> Result<usize> {
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(Error::last_os("mmap"));
    }
    Ok(p as usize)
}

/// Opens a SIGBUS-mode userfaultfd, or says exactly why it cannot and how to fix that; with
/// UFFD_FEATURE_MOVE when the kernel has it (the bool).
fn open_uffd() -> Result<(OwnedFd, bool)> {
    match open_uffd_with(UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MOVE) {
        Ok(fd) => Ok((fd, true)),
        // UFFDIO_API can be called once per descriptor: ask a fresh one for SIGBUS alone.
        Err(Error::Unsupported(_)) => Ok((open_uffd_with(UFFD_FEATURE_SIGBUS)?, false)),
        Err(e) => Err(e),
    }
}

/// Whether this kernel's userfaultfd offers UFFD_FEATURE_MOVE (Linux >= 6.8).
#[cfg(test)]
pub(crate) fn kernel_has_move() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| open_uffd().map(|(_, m)| m).unwrap_or(false))
}

fn open_uffd_with(features: u64) -> Result<OwnedFd> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: plain syscalls; the result is checked.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) } as i32;
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // Kernels before 5.11 do not know UFFD_USER_MODE_ONLY.
        fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as i32;
    }
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let sysctl = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) => Error::Unsupported(format!(
                "userfaultfd is not permitted (EPERM; vm.unprivileged_userfaultfd = {sysctl}). PART needs it to \
                 make remote accesses to unpinned pages fail fast: run `sysctl -w vm.unprivileged_userfaultfd=1`, \
                 or give the rank CAP_SYS_PTRACE, or use a kernel >= 5.11 (user-mode-only userfaultfd is always \
                 allowed there); otherwise choose another registration strategy"
            )),
            Some(libc::ENOSYS) => Error::Unsupported(
                "userfaultfd is not available (ENOSYS: kernel built without CONFIG_USERFAULTFD, or blocked by \
                 seccomp); PART cannot run here, choose another registration strategy"
                    .into(),
            ),
            _ => Error::Os { call: "userfaultfd", errno_text: e.to_string() },
        });
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut api = UffdioApi { api: UFFD_API, features, ioctls: 0 };
    // SAFETY: UFFDIO_API reads and writes the struct we pass.
    if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } < 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::Unsupported(format!("userfaultfd without UFFD_FEATURE_SIGBUS ({e}); PART needs Linux >= 4.14")));
    }
    if api.features & UFFD_FEATURE_SIGBUS == 0 {
        return Err(Error::Unsupported("userfaultfd does not report UFFD_FEATURE_SIGBUS; PART needs Linux >= 4.14".into()));
    }
    Ok(fd)
}

impl RegionInner {
    #[inline]
    pub(crate) fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.len
    }

    /// Installs page `idx` if it is missing. Returns 1 if this call installed it, 0 if it was
    /// already present. Allocation-free and lock-free: the SIGBUS handler calls it.
    pub(crate) fn install_one(&self, idx: usize) -> std::result::Result<usize, i32> {
        let ps = page_size();
        let saved = self.saved[idx].load(Ordering::Acquire) == 1;
        let src = if saved { self.shadow + idx * ps } else { zero_src().map_err(|_| libc::ENOMEM)? };
        let n = if saved { self.transfer(self.base + idx * ps, src, ps)? } else { self.copy(self.base + idx * ps, src, ps)? };
        if n == 1 && saved {
            self.saved[idx].store(0, Ordering::Release);
        }
        Ok(n)
    }

    /// Installs every missing page of `pages`; returns how many this call installed, or errno.
    pub(crate) fn install_range(&self, pages: std::ops::Range<usize>) -> std::result::Result<usize, i32> {
        if pages.len() == 1 {
            return self.install_one(pages.start);
        }
        let ps = page_size();
        let present = self.mincore(pages.clone()).map_err(|_| errno())?;
        let mut installed = 0;
        let mut i = pages.start;
        while i < pages.end {
            if present[i - pages.start] & 1 != 0 {
                i += 1;
                continue;
            }
            // A run of missing pages that all come from the same source (shadow or zeros).
            let saved = self.saved[i].load(Ordering::Acquire) == 1;
            let mut j = i + 1;
            while j < pages.end
                && present[j - pages.start] & 1 == 0
                && (self.saved[j].load(Ordering::Acquire) == 1) == saved
                && (saved || j - i < ZERO_SRC_LEN / ps)
            {
                j += 1;
            }
            let src = if saved { self.shadow + i * ps } else { zero_src().map_err(|_| libc::ENOMEM)? };
            installed += if saved {
                self.transfer(self.base + i * ps, src, (j - i) * ps)?
            } else {
                self.copy(self.base + i * ps, src, (j - i) * ps)?
            };
            if saved {
                for s in &self.saved[i..j] {
                    s.store(0, Ordering::Release);
                }
            }
            i = j;
        }
        Ok(installed)
    }

    /// Fills missing pages `[dst, dst+len)` of a range registered with `uffd` (the region, or
    /// the shadow when it is registered) from `[src, src+len)`: UFFDIO_MOVE where the kernel
    /// allows it (the pages themselves move: no allocation, no copy, no cache lines touched;
    /// the source slots become missing), else UFFDIO_COPY. Skips pages someone else installed
    /// meanwhile (EEXIST). Returns the number of pages this call filled.
    fn transfer(&self, dst: usize, src: usize, len: usize) -> std::result::Result<usize, i32> {
        let (mut off, mut installed) = (0, 0);
        if self.can_move.load(Ordering::Relaxed) {
            let stopped;
            (installed, off, stopped) = install_runs(len, |off| {
                let mut m = UffdioMove {
                    dst: (dst + off) as u64,
                    src: (src + off) as u64,
                    len: (len - off) as u64,
                    mode: UFFDIO_MOVE_MODE_DONTWAKE,
                    moved: 0,
                };
                // SAFETY: UFFDIO_MOVE takes pages of our own private mapping into missing
                // pages of our own registered range.
                let r = unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_MOVE, &mut m) };
                (r, outcome(r, m.moved))
            });
            if stopped.is_some() {
                // EBUSY (a shared or large folio), EINVAL, ENOENT ...: this page, and from
                // now on every page, by UFFDIO_COPY.
                self.can_move.store(false, Ordering::Relaxed);
            }
        }
        if off < len {
            installed += self.copy(dst + off, src + off, len - off)?;
        }
        Ok(installed)
    }

    /// Saves the resident pages `run` (indices) to the shadow; under a registered shadow the
    /// region's slots are left missing when the pages moved (the caller drops the rest).
    fn save_run(&self, run: std::ops::Range<usize>) -> Result<()> {
        let ps = page_size();
        let (src, dst, len) = (self.base + run.start * ps, self.shadow + run.start * ps, run.len() * ps);
        if !self.shadow_registered {
            // SAFETY: the pages are resident (so no SIGBUS) and both ranges are ours.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len) };
            return Ok(());
        }
        // Either ioctl needs the shadow's slots missing; a page paged in by UFFDIO_COPY left
        // its old copy there.
        // SAFETY: dropping pages of our own shadow that hold nothing still needed (these
        // pages are resident in the region, so their saved copies are stale).
        if unsafe { libc::madvise(dst as *mut _, len, libc::MADV_DONTNEED) } < 0 {
            return Err(Error::last_os("madvise(MADV_DONTNEED) of the PART shadow"));
        }
        self.transfer(dst, src, len).map(|_| ()).map_err(|e| os_err("ioctl(UFFDIO_MOVE/COPY) into the PART shadow", e))
    }

    /// UFFDIO_COPY of `len` bytes, skipping pages someone else installed meanwhile (EEXIST).
    /// Returns the number of pages this call installed.
    fn copy(&self, dst: usize, src: usize, len: usize) -> std::result::Result<usize, i32> {
        let (installed, _, stopped) = install_runs(len, |off| {
            let mut c = UffdioCopy {
                dst: (dst + off) as u64,
                src: (src + off) as u64,
                len: (len - off) as u64,
                mode: UFFDIO_COPY_MODE_DONTWAKE,
                copy: 0,
            };
            // SAFETY: UFFDIO_COPY reads `src` (ours) and fills missing pages of our own range.
            let r = unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_COPY, &mut c) };
            (r, outcome(r, c.copy))
        });
        match stopped {
            Some(e) => Err(e),
            None => Ok(installed),
        }
    }

    /// mincore vector for `pages` (bit 0 set = resident).
    fn mincore(&self, pages: std::ops::Range<usize>) -> Result<Vec<u8>> {
        let ps = page_size();
        let mut v = vec![0u8; pages.len()];
        // SAFETY: the range lies inside our mapping; mincore writes one byte per page into v.
        let r = unsafe { libc::mincore((self.base + pages.start * ps) as *mut _, pages.len() * ps, v.as_mut_ptr()) };
        if r < 0 {
            return Err(Error::last_os("mincore"));
        }
        Ok(v)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

pub(crate) fn os_err(call: &'static str, errno: i32) -> Error {
    Error::Os { call, errno_text: std::io::Error::from_raw_os_error(errno).to_string() }
}

/// A PART region: memory a remote origin may access without it being pinned.
///
/// The owner's own threads may touch the memory at any time: a missing page then raises
/// SIGBUS, which the handler this module installs resolves by installing the page, and the
/// access restarts (≈ a few µs). [`UffdRegion::read`] / [`UffdRegion::write`] /
/// [`UffdRegion::page_in`] install first and avoid the signal.
pub struct UffdRegion {
    inner: Box<RegionInner>,
    slot: &'static Slot,
    owned: bool,
}

impl UffdRegion {
    /// Maps `len` bytes (rounded up to pages) of fresh private anonymous memory and registers
    /// it; every page starts missing.
    pub fn new(len: usize) -> Result<UffdRegion> {
        if len == 0 {
            return Err(Error::InvalidArgument("a PART region of 0 bytes".into()));
        }
        let len = activerma_core::page::page_ceil(len);
        let base = mmap_anon(len, libc::PROT_READ | libc::PROT_WRITE)?;
        // 4 KiB granularity: eviction and page-in of part of a huge page would split it anyway.
        // SAFETY: advice on the mapping we just made.
        unsafe { libc::madvise(base as *mut _, len, libc::MADV_NOHUGEPAGE) };
        match Self::register(base, len, true) {
            Ok(r) => Ok(r),
            Err(e) => {
                // SAFETY: our own fresh mapping.
                unsafe { libc::munmap(base as *mut _, len) };
                Err(e)
            }
        }
    }

    /// Registers existing private anonymous memory `[addr, addr+len)` (widened to whole pages).
    /// Resident pages stay; pages not yet touched become PART-managed.
    ///
    /// # Safety
    /// The range must be mapped private anonymous memory that stays mapped until this region is
    /// dropped, and must not be registered with another userfaultfd. Any page shared with other
    /// data becomes subject to the SIGBUS handler too (which resolves it transparently).
    pub unsafe fn adopt(addr: usize, len: usize) -> Result<UffdRegion> {
        let base = activerma_core::page::page_floor(addr);
        let end = activerma_core::page::page_ceil(addr + len);
        Self::register(base, end - base, false)
    }

    fn register(base: usize, len: usize, owned: bool) -> Result<UffdRegion> {
        zero_src()?;
        registry::install_sigbus_handler()?;
        let (uffd, can_move) = open_uffd()?;
        let mut reg =
            UffdioRegister { range: UffdioRange { start: base as u64, len: len as u64 }, mode: UFFDIO_REGISTER_MODE_MISSING, ioctls: 0 };
        // SAFETY: UFFDIO_REGISTER on a range of our own address space.
        if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } < 0 {
            return Err(Error::last_os("ioctl(UFFDIO_REGISTER)"));
        }
        if reg.ioctls & (1 << 0x03) == 0 {
            return Err(Error::Unsupported("userfaultfd range does not allow UFFDIO_COPY (not anonymous memory?)".into()));
        }
        let shadow = mmap_anon(len, libc::PROT_READ | libc::PROT_WRITE)?;
        // SAFETY: advice on the mapping we just made (moves are per 4 KiB page).
        unsafe { libc::madvise(shadow as *mut _, len, libc::MADV_NOHUGEPAGE) };
        // Evicting by moving needs the shadow registered with the same descriptor (the
        // destination of a move must be).
        let shadow_registered = can_move && {
            let mut sreg = UffdioRegister {
                range: UffdioRange { start: shadow as u64, len: len as u64 },
                mode: UFFDIO_REGISTER_MODE_MISSING,
                ioctls: 0,
            };
            // SAFETY: UFFDIO_REGISTER on the mapping we just made.
            unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut sreg) == 0 }
        };
        let pages = len / page_size();
        let inner = Box::new(RegionInner {
            uffd,
            base,
            len,
            shadow,
            saved: (0..pages).map(|_| AtomicU8::new(0)).collect(),
            evict_lock: Mutex::new(()),
            can_move: std::sync::atomic::AtomicBool::new(can_move),
            shadow_registered,
        });
        let slot = registry::insert(&inner).inspect_err(|_| {
            // SAFETY: shadow is our own mapping.
            unsafe { libc::munmap(shadow as *mut _, len) };
        })?;
        Ok(UffdRegion { inner, slot, owned })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.base as *mut u8
    }
    pub fn addr(&self) -> usize {
        self.inner.base
    }
    pub fn len(&self) -> usize {
        self.inner.len
    }
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    fn pages(&self, addr: usize, len: usize) -> Result<std::ops::Range<usize>> {
        let i = &self.inner;
        if len == 0 || addr < i.base || addr.checked_add(len).is_none_or(|e| e > i.base + i.len) {
            return Err(Error::InvalidArgument(format!("{addr:#x}+{len} is not inside the PART region {:#x}+{}", i.base, i.len)));
        }
        Ok(activerma_core::page::pages_spanned(i.base, addr, len))
    }

    /// Installs every missing page of `[addr, addr+len)`; returns how many it installed.
    pub fn page_in(&self, addr: usize, len: usize) -> Result<usize> {
        let p = self.pages(addr, len)?;
        self.inner.install_range(p).map_err(|e| os_err("ioctl(UFFDIO_COPY)", e))
    }

    /// Makes every page of `[addr, addr+len)` missing again, keeping contents (see module doc);
    /// returns how many pages were resident. The owner must not write those pages while this
    /// runs (a write racing with the copy to the shadow could be lost, as with a real swap-out
    /// without the kernel's locking).
    pub fn evict(&self, addr: usize, len: usize) -> Result<usize> {
        let p = self.pages(addr, len)?;
        let i = &self.inner;
        let _g = i.evict_lock.lock().unwrap_or_else(|e| e.into_inner());
        let present = i.mincore(p.clone())?;
        let ps = page_size();
        let mut n = 0;
        let mut k = 0;
        while k < present.len() {
            if present[k] & 1 == 0 {
                k += 1;
                continue;
            }
            let mut j = k + 1;
            while j < present.len() && present[j] & 1 != 0 {
                j += 1;
            }
            i.save_run(p.start + k..p.start + j)?;
            for s in &i.saved[p.start + k..p.start + j] {
                s.store(1, Ordering::Release);
            }
            n += j - k;
            k = j;
        }
        // SAFETY: dropping pages of our own registered range (those that moved are missing
        // already); contents are in the shadow.
        if unsafe { libc::madvise((i.base + p.start * ps) as *mut _, p.len() * ps, libc::MADV_DONTNEED) } < 0 {
            return Err(Error::last_os("madvise(MADV_DONTNEED)"));
        }
        Ok(n)
    }

    /// Whether eviction and page-in still move pages (UFFDIO_MOVE) rather than copy them.
    #[cfg(test)]
    pub(crate) fn moves_pages(&self) -> bool {
        self.inner.shadow_registered && self.inner.can_move.load(Ordering::Relaxed)
    }

    /// How many pages of `[addr, addr+len)` are resident.
    pub fn resident_pages(&self, addr: usize, len: usize) -> Result<usize> {
        let p = self.pages(addr, len)?;
        Ok(self.inner.mincore(p)?.iter().filter(|&&b| b & 1 != 0).count())
    }

    /// Copies out of the region, paging in first so the owner's CPU never takes the SIGBUS.
    pub fn read(&self, off: usize, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.page_in(self.inner.base + off, buf.len())?;
        // SAFETY: in bounds (checked by page_in) and resident (a concurrent eviction would be
        // caught by the SIGBUS handler).
        unsafe { std::ptr::copy_nonoverlapping((self.inner.base + off) as *const u8, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Copies into the region, paging in first.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.page_in(self.inner.base + off, data.len())?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (self.inner.base + off) as *mut u8, data.len()) };
        Ok(())
    }
}

impl Drop for UffdRegion {
    fn drop(&mut self) {
        let i = &self.inner;
        if !self.owned {
            // Adopted memory outlives the region: give back every page whose contents sit in
            // the shadow (evicted and not paged in since), or unregistering would turn them
            // into demand-zero pages and lose the data.
            for idx in 0..i.saved.len() {
                if i.saved[idx].load(Ordering::Acquire) == 1 {
                    let _ = i.install_one(idx);
                }
            }
        }
        // Make the region unreachable for the SIGBUS handler and the fault paths.
        registry::remove(self.slot);
        let mut r = UffdioRange { start: i.base as u64, len: i.len as u64 };
        // SAFETY: unregistering and unmapping what we registered / mapped.
        unsafe {
            libc::ioctl(i.uffd.as_raw_fd(), UFFDIO_UNREGISTER, &mut r);
            libc::munmap(i.shadow as *mut _, i.len);
            if self.owned {
                libc::munmap(i.base as *mut _, i.len);
            }
        }
    }
}

/// What an install ioctl (UFFDIO_COPY / UFFDIO_MOVE) did: bytes done (> 0, also on a partial
/// failure), or -errno — from the struct's field when the kernel got as far as trying,
/// otherwise from errno.
fn outcome(r: i32, field: i64) -> i64 {
    if r == 0 || field != 0 {
        field
    } else {
        -(errno() as i64)
    }
}

/// Drives one kind of install ioctl over `len` bytes: `attempt(off)` issues it for
/// `[off, len)` and returns (its result, `outcome`). A partial success moves on, a page
/// present already (EEXIST) is skipped, EAGAIN (mappings changing) retries; any other error
/// stops. Returns (pages installed, offset reached, the errno that stopped it).
fn install_runs(len: usize, mut attempt: impl FnMut(usize) -> (i32, i64)) -> (usize, usize, Option<i32>) {
    let ps = page_size();
    let (mut off, mut installed) = (0usize, 0usize);
    while off < len {
        let (r, done) = attempt(off);
        if r == 0 {
            return (installed + (len - off) / ps, len, None);
        }
        if done > 0 {
            installed += done as usize / ps;
            off += done as usize;
            continue;
        }
        match -done as i32 {
            libc::EEXIST => off += ps,
            libc::EAGAIN => std::hint::spin_loop(),
            e => return (installed, off, Some(e)),
        }
    }
    (installed, off, None)
}
