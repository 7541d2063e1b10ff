//! The page-granular mode (`ACTIVERMA_DSM_ACCESS=mmu`): first accesses seen by the MMU instead
//! of access checks, with the invalidation protocols' homes, diffs and release consistency.
//!
//! Every rank maps, per other home, a private *mirror* of that home's heap at the same
//! offsets (a page of a mirror holds exactly the regions of one page of the home's heap), and
//! beside it a *twin* area of the same size. The mirrors are registered with one userfaultfd
//! for missing pages and asynchronous write-protection:
//!
//! ```text
//! view(r)          translate r to mirror[r.home] + offset (learned once from the home);
//!                  no state check, no twin
//! first touch      of an absent page: the thread stops in the kernel; this rank's pager
//!                  thread gets the page from the home's heap by RMA (the home's CPU is not
//!                  involved) into the twin area, installs it write-protected (UFFDIO_COPY),
//!                  and the thread goes on
//! first store      to a present page: the kernel lifts the protection and remembers the
//!                  page as written (no signal, no thread)
//! release          PAGEMAP_SCAN: the written pages, protected again; each diffed against its
//!                  twin -> DIFF_PAGE to its home (multiple writers merge there byte-wise, as
//!                  region diffs do); twin = page; wait for every acknowledgement
//! acquire          drop mirror pages (MADV_DONTNEED, protected again): all of them at a lock
//!                  from another rank, those another rank wrote at a barrier (page notices)
//! ```
//!
//! The home's own regions are its masters, as under the access checks. Limits: a system call
//! that reads an absent mirror page fails with EFAULT where the process may only take faults
//! of its own accesses (unprivileged, `vm.unprivileged_userfaultfd = 0`: `user_mode_only`); a
//! view's bytes handed to an MPI-conduit call of this runtime before they were touched would
//! wait for the pager while the call holds the conduit (touch them first).

use crate::diff;
use crate::shared::Shared;
use crate::wire;
use activerma::{Error, Rank, Result};
use activerma_mmu::{page_size, PageScan, Uffd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A page notice: the home and the page index in its heap, in one word.
pub(crate) fn notice(home: Rank, page: usize) -> u64 {
    (home as u64) << 40 | page as u64
}

/// The home and page a notice names.
fn noticed(n: u64) -> (Rank, usize) {
    ((n >> 40) as Rank, (n & ((1 << 40) - 1)) as usize)
}

fn unsupported(e: std::io::Error) -> Error {
    Error::Unsupported(format!("dsm: the page-granular mode (ACTIVERMA_DSM_ACCESS=mmu): {e}"))
}

/// What the pager and the rank's thread share.
struct Areas {
    page: usize,
    /// Bytes of every home's heap, and of each mirror and twin area.
    len: usize,
    /// Per home: where its mirror and its twins lie here (0: this rank's own).
    mirrors: Vec<usize>,
    twins: Vec<usize>,
    uffd: Uffd,
    /// Per home: the pages fetched since they were last dropped (unordered, may repeat).
    fetched: Mutex<Vec<Vec<usize>>>,
    /// Per home: the end of the highest page fetched since the last full drop (what a
    /// release scans).
    extents: Vec<AtomicUsize>,
    pages_fetched: AtomicU64,
    stop: AtomicBool,
}

pub(crate) struct Mirrors {
    areas: Arc<Areas>,
    scan: PageScan,
    pager: Option<JoinHandle<()>>,
}

fn map(len: usize) -> Result<usize> {
    // SAFETY: a fresh private mapping of ours, unmapped in Drop.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(unsupported(std::io::Error::last_os_error()));
    }
    Ok(p as usize)
}

impl Mirrors {
    /// Mirrors of every other rank's heap, registered, and the pager thread serving them.
    pub(crate) fn new(s: &Arc<Shared>) -> Result<Mirrors> {
        let page = page_size();
        if !(s.heap.ptr(0) as usize).is_multiple_of(page) {
            return Err(Error::Unsupported("dsm: the page-granular mode needs a page-aligned heap".into()));
        }
        let len = s.heap.len().next_multiple_of(page);
        let uffd = Uffd::open(Uffd::WP_ASYNC | Uffd::WP_UNPOPULATED).map_err(unsupported)?;
        let (mut mirrors, mut twins) = (vec![0; s.n], vec![0; s.n]);
        for h in (0..s.n).filter(|&h| h != s.me) {
            (mirrors[h], twins[h]) = (map(len)?, map(len)?);
            uffd.register(mirrors[h], len, Uffd::MISSING | Uffd::WP).map_err(unsupported)?;
            // Absent pages count as protected, not written (Uffd::WP_UNPOPULATED).
            uffd.write_protect(mirrors[h], len).map_err(unsupported)?;
        }
        let areas = Arc::new(Areas {
            page,
            len,
            mirrors,
            twins,
            uffd,
            fetched: Mutex::new(vec![Vec::new(); s.n]),
            extents: (0..s.n).map(|_| AtomicUsize::new(0)).collect(),
            pages_fetched: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let pager = {
            let (areas, s) = (areas.clone(), s.clone());
            std::thread::Builder::new().name("activerma-dsm-pager".into()).spawn(move || pager(&areas, &s))
        }
        .map_err(|e| unsupported(std::io::Error::other(format!("the pager thread: {e}"))))?;
        Ok(Mirrors { areas, scan: PageScan::open().map_err(unsupported)?, pager: Some(pager) })
    }

    /// Per home: where its mirror starts here (0: this rank's own heap, not mirrored).
    pub(crate) fn bases(&self) -> Vec<usize> {
        self.areas.mirrors.clone()
    }

    pub(crate) fn pages_fetched(&self) -> u64 {
        self.areas.pages_fetched.load(Ordering::Relaxed)
    }

    /// The release: every page written since the last one, diffed against its twin, goes to
    /// its home by `send(home, DIFF_PAGE payload)`; its twin becomes the page. Returns the
    /// page notices (home, page) of what was sent.
    pub(crate) fn release(&self, send: &mut dyn FnMut(Rank, &[u8]) -> Result<()>) -> Result<Vec<u64>> {
        let a = &self.areas;
        let mut notices = Vec::new();
        let mut msg = Vec::new();
        for h in 0..a.mirrors.len() {
            let Some(extent) = self.extent(h) else { continue };
            let base = a.mirrors[h];
            let mut written = Vec::new();
            self.scan.take_written(base, base + extent, &mut |at, l| written.push((at, l))).map_err(unsupported)?;
            for (at, l) in written {
                for off in (at - base..at - base + l).step_by(a.page) {
                    // SAFETY: a present page of the mirror and its twin (pages are dropped only
                    // at acquires, on this thread); no view is alive during a release.
                    let (page, twin) = unsafe {
                        (
                            std::slice::from_raw_parts((base + off) as *const u8, a.page),
                            std::slice::from_raw_parts_mut((a.twins[h] + off) as *mut u8, a.page),
                        )
                    };
                    msg.clear();
                    msg.extend_from_slice(&(off as u64).to_le_bytes());
                    if diff::encode(page, twin, &mut msg) > 0 {
                        send(h, &msg)?;
                        notices.push(notice(h, off / a.page));
                    }
                    twin.copy_from_slice(page);
                }
            }
        }
        Ok(notices)
    }

    /// How far into `home`'s mirror pages were fetched since the last full drop (None: none).
    fn extent(&self, home: Rank) -> Option<usize> {
        Some(self.areas.extents[home].load(Ordering::Acquire)).filter(|&e| e > 0)
    }

    /// The acquire: drops every mirror page (`changed` None), or those of the notices in
    /// `changed`; a dropped page is fetched again at its next touch. Returns the pages dropped.
    pub(crate) fn drop_pages(&self, changed: Option<&[u64]>) -> Result<u64> {
        let a = &self.areas;
        let mut fetched = a.fetched.lock().unwrap();
        let mut runs: Vec<(Rank, usize, usize)> = Vec::new(); // (home, first page, pages)
        let mut dropped = 0;
        match changed {
            None => {
                for (h, pages) in fetched.iter_mut().enumerate() {
                    pages.sort_unstable();
                    pages.dedup();
                    dropped += pages.len() as u64;
                    for &p in pages.iter() {
                        match runs.last_mut() {
                            Some((rh, first, k)) if *rh == h && *first + *k == p => *k += 1,
                            _ => runs.push((h, p, 1)),
                        }
                    }
                    pages.clear();
                    a.extents[h].store(0, Ordering::Release);
                }
            }
            Some(notices) => {
                for &n in notices {
                    let (h, p) = noticed(n);
                    if h < a.mirrors.len() && a.mirrors[h] != 0 && (p + 1) * a.page <= a.len {
                        runs.push((h, p, 1));
                        dropped += 1;
                    }
                }
            }
        }
        for (h, first, k) in runs {
            let (at, len) = (a.mirrors[h] + first * a.page, k * a.page);
            // SAFETY: pages of our own mirror; no view of them is alive (an acquire).
            if unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_DONTNEED) } != 0 {
                return Err(unsupported(std::io::Error::last_os_error()));
            }
            // Absent again: protected, so that a scan does not count them as written.
            a.uffd.write_protect(at, len).map_err(unsupported)?;
        }
        Ok(dropped)
    }
}

/// The pager thread: serves every missing-page fault of the mirrors with the page from its
/// home's heap, until the DSM is dropped.
fn pager(a: &Areas, s: &Shared) {
    while !a.stop.load(Ordering::Acquire) {
        let fault = match a.uffd.next_fault(50) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(e) => fatal(&format!("reading its userfaultfd: {e}")),
        };
        let Some(h) = (0..a.mirrors.len()).find(|&h| a.mirrors[h] != 0 && (a.mirrors[h]..a.mirrors[h] + a.len).contains(&fault.addr))
        else {
            fatal(&format!("a fault at {:#x}, outside every mirror", fault.addr));
        };
        let off = (fault.addr - a.mirrors[h]) & !(a.page - 1);
        // The page comes into its twin, and is installed from there. SAFETY: the twin area's
        // page, ours; the rank's thread reads it only at a release, after this fault was
        // served (a page that is absent was not written).
        let twin = unsafe { std::slice::from_raw_parts_mut((a.twins[h] + off) as *mut u8, a.page) };
        // The home's heap may end inside the page: the rest is zero.
        let n = a.page.min(s.heap.len() - off.min(s.heap.len()));
        twin[n..].fill(0);
        if let Err(e) = s.w.get(s.heap.remote(h, off), &mut twin[..n]) {
            fatal(&format!("getting page {} of rank {h}'s heap: {e}", off / a.page));
        }
        // Listed before it is installed: the faulting thread goes on at the copy, and its next
        // release must scan this page.
        a.fetched.lock().unwrap()[h].push(off / a.page);
        a.extents[h].fetch_max(off + a.page, Ordering::AcqRel);
        a.pages_fetched.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `twin` holds a page.
        if let Err(e) = unsafe { a.uffd.copy(a.mirrors[h] + off, twin.as_ptr(), a.page, true) } {
            fatal(&format!("installing page {} of rank {h}'s mirror: {e}", off / a.page));
        }
    }
}

/// A fault the pager cannot serve leaves the rank's thread stopped in the kernel for good:
/// end the process with the reason rather than hang (the launcher ends the job).
fn fatal(why: &str) -> ! {
    eprintln!("activerma dsm: the page-granular mode's pager failed {why}; the access waiting for it cannot complete");
    std::process::abort()
}

impl Drop for Mirrors {
    fn drop(&mut self) {
        self.areas.stop.store(true, Ordering::Release);
        if let Some(p) = self.pager.take() {
            let _ = p.join();
        }
        let a = &self.areas;
        for &at in a.mirrors.iter().chain(&a.twins).filter(|&&at| at != 0) {
            // SAFETY: our mappings; no view outlives the Dsm.
            unsafe { libc::munmap(at as *mut libc::c_void, a.len) };
        }
    }
}

/// DIFF_PAGE at the home: `[page offset][diff ranges]` into its heap.
pub(crate) fn apply_page_diff(s: &Shared, p: &[u8]) -> std::result::Result<(), String> {
    let page = page_size();
    let off = wire::word(p, 0).ok_or("a page diff without its offset")? as usize;
    let used = s.heap.used();
    if !off.is_multiple_of(page) || off >= used {
        return Err(format!("a page diff at heap offset {off}, not a page of the {used} bytes in use"));
    }
    let _home = s.home.lock().unwrap(); // one diff at a time, as region diffs are applied
                                        // SAFETY: bytes of this heap in use; writers of one interval change disjoint bytes.
    diff::apply(&p[8..], unsafe { s.heap.bytes_mut(off, page.min(s.heap.len() - off)) })
}
