//! The translation table: the software IOMMU page table of one rank.
//!
//! It lives in the rank's table window (shared memory on one host), so an origin checks a
//! remote access itself, as a NIC would consult the target's IOMMU, without the target's CPU.
//!
//! ```text
//! TableHeader                 magic (written last), limits, high-water mark of regions
//! RegionDesc[max_regions]     state, kind, in-flight origins, base, len, first entry
//! entries: u64[heap_pages + private_pages]   region 0 = the symmetric heap, then private pages
//! ```
//! The header also says where the rank's access-log arena is once it has one (the access
//! layer's `log_table.rs`): a file of its own, made when the rank first logs, so that a rank
//! that never logs reserves no room for logs (issue 19: control memory per rank).
//! Region 0 always describes the symmetric heap; its pages are PRESENT while a segment
//! allocation covers them. Other regions are exposed ranges of private memory, byte-exact.
//! Origins that access private memory announce themselves in the region's `inflight` counter,
//! so `unexpose` can wait until no copy into that memory is still running.

use crate::entry::{Entry, Prot};
use crate::registration::{MlockPinner, Registrar, RegistrationStats, Strategy};
use activerma_core::page::{page_floor, page_size, pages_spanned};
use activerma_core::{Error, Rank, Result};
use activerma_transport::Window;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MAGIC: u64 = 0x7472_616e_736c_7462; // "translTb"
const FREE: u32 = 0;
const ACTIVE: u32 = 1;
const DYING: u32 = 2;
const KIND_HEAP: u32 = 0;
const KIND_PRIVATE: u32 = 1;

#[repr(C)]
struct TableHeader {
    magic: AtomicU64,
    max_regions: u64,
    heap_pages: u64,
    private_pages: u64,
    /// One past the highest region index ever used: origins scan no further.
    hwm: AtomicU32,
    /// The access-log arena once published (`publish_log_arena`): the owner's pid << 32 | the
    /// arena file's descriptor in the owner; 0 while the rank has none.
    log_home: AtomicU64,
    log_bytes: AtomicU64,
}

#[repr(C, align(64))]
struct RegionDesc {
    state: AtomicU32,
    kind: AtomicU32,
    inflight: AtomicU32,
    base: AtomicU64,
    len: AtomicU64,
    first_entry: AtomicU64,
}

/// Sizes of a table; the launcher uses `bytes()` to size every rank's table window.
#[derive(Clone, Copy, Debug)]
pub struct TableLayout {
    pub max_regions: usize,
    pub heap_pages: usize,
    pub private_pages: usize,
}

impl TableLayout {
    #[inline(always)]
    fn regions_off() -> usize {
        std::mem::size_of::<TableHeader>().next_multiple_of(64)
    }
    #[inline(always)]
    fn entries_off(&self) -> usize {
        Self::regions_off() + self.max_regions * std::mem::size_of::<RegionDesc>()
    }
    fn entries_end(&self) -> usize {
        self.entries_off() + (self.heap_pages + self.private_pages) * 8
    }
    pub fn bytes(&self) -> usize {
        activerma_core::page::page_ceil(self.entries_end())
    }
    pub fn from_config(cfg: &activerma_core::Config, heap_size: usize) -> Result<TableLayout> {
        use activerma_core::settings as s;
        Ok(TableLayout {
            max_regions: (cfg.get_u64(s::MAX_REGIONS)? as usize).max(2),
            heap_pages: heap_size.div_ceil(page_size()),
            private_pages: cfg.get_u64(s::MAX_PRIVATE_PAGES)? as usize,
        })
    }
}

/// A table in a window, as raw views; shared by the origin and target sides.
#[derive(Clone, Copy)]
struct Raw {
    base: *mut u8,
    layout: TableLayout,
}

unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

impl Raw {
    fn header(&self) -> &TableHeader {
        // SAFETY: the window holds at least a header (checked at construction).
        unsafe { &*(self.base as *const TableHeader) }
    }
    fn region(&self, i: usize) -> &RegionDesc {
        debug_assert!(i < self.layout.max_regions);
        // SAFETY: i < max_regions, inside the window.
        unsafe { &*(self.base.add(TableLayout::regions_off()) as *const RegionDesc).add(i) }
    }
    #[inline(always)]
    fn entry(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.layout.heap_pages + self.layout.private_pages);
        // SAFETY: i is inside the entries array.
        unsafe { &*(self.base.add(self.layout.entries_off()) as *const AtomicU64).add(i) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Put,
    Get,
    /// An atomic that may modify the word.
    Atomic,
    /// An atomic read (fetch): read permission suffices.
    AtomicRead,
}

impl AccessKind {
    fn needs(self) -> u64 {
        (match self {
            AccessKind::Put => Entry::W,
            AccessKind::Get | AccessKind::AtomicRead => Entry::R,
            AccessKind::Atomic => Entry::R | Entry::W,
        }) as u64
    }
    fn name(self) -> &'static str {
        match self {
            AccessKind::Put => "put",
            AccessKind::Get => "get",
            AccessKind::Atomic => "atomic",
            AccessKind::AtomicRead => "atomic fetch",
        }
    }
}

/// The result of a successful check. For private memory it keeps the region's in-flight count
/// raised until dropped, so the target cannot unexpose the memory under a running copy.
pub struct Lookup<'a> {
    pub private: bool,
    /// Some page of the access carries Active Access bits for this kind of access (or forbids
    /// the plain access but logs it): the access goes page by page (`OriginTable::entry_of`).
    pub active: bool,
    page_base: usize,
    first_entry: usize,
    inflight: Option<&'a AtomicU32>,
}

/// What `OriginTable::heap_fast` found (None from it: take `check`).
pub enum HeapFast<'a> {
    Plain,
    Active(Lookup<'a>),
}

impl Drop for Lookup<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.inflight {
            c.fetch_sub(1, Ordering::Release);
        }
    }
}

/// An origin's view of one target's table.
pub struct OriginTable {
    raw: Raw,
    rank: Rank,
}

impl OriginTable {
    /// Attaches to `rank`'s initialized table in `w`.
    pub fn attach(w: Window, rank: Rank) -> Result<OriginTable> {
        if w.len < std::mem::size_of::<TableHeader>() {
            return Err(Error::InvalidArgument("translation-table window too small".into()));
        }
        // SAFETY: the window is at least a header long.
        let h = unsafe { &*(w.local as *const TableHeader) };
        if h.magic.load(Ordering::Acquire) != MAGIC {
            return Err(Error::InvalidArgument(format!("rank {rank} has not initialized its translation table")));
        }
        let layout =
            TableLayout { max_regions: h.max_regions as usize, heap_pages: h.heap_pages as usize, private_pages: h.private_pages as usize };
        Ok(OriginTable { raw: Raw { base: w.local, layout }, rank })
    }

    /// Where the target's access-log arena is, once it has one: (owner's pid, the arena
    /// file's descriptor in the owner, bytes). The owner formatted it before publishing.
    pub fn log_arena(&self) -> Option<LogArenaHome> {
        let h = self.raw.header();
        let home = h.log_home.load(Ordering::Acquire);
        (home != 0).then(|| LogArenaHome { pid: (home >> 32) as u32, fd: home as u32, bytes: h.log_bytes.load(Ordering::Relaxed) as usize })
    }

    /// The rank whose table this is.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The entry of the page holding `addr`, inside an access `lookup` checked.
    #[inline]
    pub fn entry_of(&self, lookup: &Lookup, addr: usize) -> u64 {
        let p = (addr - lookup.page_base) / page_size();
        self.raw.entry(lookup.first_entry + p).load(Ordering::Acquire)
    }

    /// True when every page of `[addr, addr+len)`, inside an access `lookup` checked, is
    /// REGISTERED: the zero-copy path may move it (a registration hit).
    #[inline]
    pub fn registered(&self, lookup: &Lookup, addr: usize, len: usize) -> bool {
        pages_spanned(lookup.page_base, addr, len.max(1))
            .all(|p| self.raw.entry(lookup.first_entry + p).load(Ordering::Acquire) & Entry::REGISTERED as u64 != 0)
    }

    /// Where the target's symmetric heap (region 0) lies in its address space: (base, len).
    pub fn heap_range(&self) -> (usize, usize) {
        let heap = self.raw.region(0);
        (heap.base.load(Ordering::Acquire) as usize, heap.len.load(Ordering::Acquire) as usize)
    }

    /// The fast path of `check` for the symmetric heap (region 0), for an access of `len` (> 0)
    /// bytes at `heap_off`: `Plain` when every page is present, permits `kind` and has no
    /// Active Access bits; `Active` (with the lookup `check` would return) when every page is
    /// present and either plain or marked to log this kind of access (a put into WL/WLD
    /// pages, a get from readable RL/RLD pages); None otherwise, and when a segment ending
    /// inside the last page does not cover the access: `check` then decides (it may still
    /// allow the access, or names the error). The same entries, read the same way, so both
    /// paths agree on every access.
    #[inline(always)]
    pub fn heap_fast(&self, heap_off: usize, len: usize, kind: AccessKind) -> Option<HeapFast<'_>> {
        let want = Entry::PRESENT as u64 | kind.needs();
        let logs_it = match kind {
            AccessKind::Put => (Entry::WL | Entry::WLD) as u64,
            AccessKind::Get => (Entry::RL | Entry::RLD) as u64,
            AccessKind::Atomic | AccessKind::AtomicRead => 0,
        };
        let shift = page_size().trailing_zeros();
        let (first, last) = (heap_off >> shift, (heap_off + len - 1) >> shift);
        if last >= self.raw.layout.heap_pages {
            return None;
        }
        let (mut e, mut active) = (0, false);
        for p in first..=last {
            e = self.raw.entry(p).load(Ordering::Acquire);
            if e & (want | Entry::ACTIVE as u64) == want {
                continue;
            }
            // A logged page: present; a logged get must also be readable (a put need not be
            // writable: W=0 with logging is an active put that does not touch memory).
            let readable = kind != AccessKind::Get || e & want == want;
            if e & logs_it == 0 || e & Entry::PRESENT as u64 == 0 || !readable {
                return None;
            }
            active = true;
        }
        let limit = Entry::limit(e);
        if limit != 0 && heap_off + len - (last << shift) > limit {
            return None;
        }
        if !active {
            return Some(HeapFast::Plain);
        }
        let page_base = self.raw.region(0).base.load(Ordering::Relaxed) as usize;
        Some(HeapFast::Active(Lookup { private: false, active: true, page_base, first_entry: 0, inflight: None }))
    }

    /// Checks an access of `len` bytes at the target's address `addr`. Zero-length accesses
    /// are the caller's business (they touch nothing and are never checked).
    #[inline]
    pub fn check(&self, addr: usize, len: usize, kind: AccessKind) -> Result<Lookup<'_>> {
        let not_exposed = || Error::NotExposed { rank: self.rank, addr, len };
        let end = addr.checked_add(len).ok_or_else(not_exposed)?;
        let heap = self.raw.region(0);
        let hb = heap.base.load(Ordering::Relaxed) as usize;
        if addr >= hb && end <= hb + heap.len.load(Ordering::Relaxed) as usize {
            let active = self.check_pages(hb, 0, addr, len, kind)?;
            return Ok(Lookup { private: false, active, page_base: hb, first_entry: 0, inflight: None });
        }
        let hwm = self.raw.header().hwm.load(Ordering::Acquire) as usize;
        for i in 1..hwm.min(self.raw.layout.max_regions) {
            let r = self.raw.region(i);
            if r.state.load(Ordering::Acquire) != ACTIVE {
                continue;
            }
            let (b, l) = (r.base.load(Ordering::Acquire) as usize, r.len.load(Ordering::Acquire) as usize);
            if addr < b || end > b + l {
                continue;
            }
            // Announce ourselves, then confirm the region is still the one we checked
            // (SeqCst pairs with `unexpose`, which marks DYING and then waits for zero).
            r.inflight.fetch_add(1, Ordering::SeqCst);
            let (page_base, first_entry) = (page_floor(b), r.first_entry.load(Ordering::Acquire) as usize);
            let mut lookup = Lookup { private: true, active: false, page_base, first_entry, inflight: Some(&r.inflight) };
            if r.state.load(Ordering::SeqCst) != ACTIVE
                || r.base.load(Ordering::Acquire) as usize != b
                || r.len.load(Ordering::Acquire) as usize != l
            {
                continue; // dropping `lookup` releases the count
            }
            lookup.active = self.check_pages(page_base, first_entry, addr, len, kind)?;
            return Ok(lookup);
        }
        Err(not_exposed())
    }

    /// Checks every page; returns whether the access must take the Active Access path.
    #[inline]
    fn check_pages(&self, page_base: usize, first_entry: usize, addr: usize, len: usize, kind: AccessKind) -> Result<bool> {
        let want = Entry::PRESENT as u64 | kind.needs();
        let pages = pages_spanned(page_base, addr, len.max(1));
        let last = pages.end - 1;
        let mut e = 0;
        let mut active = false;
        for p in pages {
            e = self.raw.entry(first_entry + p).load(Ordering::Acquire);
            // Fast path: present, permitted, no Active Access bits.
            if e & (want | Entry::ACTIVE as u64) != want {
                active |= self.active_page(e, want, addr, len, kind)?;
            }
        }
        // A segment may end inside its last page: the bytes past its end are not exposed.
        let limit = Entry::limit(e);
        if limit != 0 && addr + len.max(1) - (page_base + last * page_size()) > limit {
            return Err(Error::NotExposed { rank: self.rank, addr, len });
        }
        Ok(active)
    }

    /// A page off the fast path: an Active Access page (true), or an error.
    #[cold]
    fn active_page(&self, e: u64, want: u64, addr: usize, len: usize, kind: AccessKind) -> Result<bool> {
        if e & Entry::PRESENT as u64 == 0 {
            return Err(Error::NotExposed { rank: self.rank, addr, len });
        }
        let bits = e as u32;
        match kind {
            // W = 0 with logging is an active put that does not touch memory; W = 0 without is
            // a protection fault.
            AccessKind::Put if bits & (Entry::WL | Entry::WLD) != 0 => Ok(true),
            AccessKind::Get if e & want == want && bits & (Entry::RL | Entry::RLD) != 0 => Ok(true),
            // A writing atomic is a write of its word: logged like a put's metadata where the
            // page logs puts without their data (W, WL: what incremental checkpoints track).
            // A fetch only reads: plain where no get is logged. Data logging and logged gets
            // have no meaning for an atomic (which bytes, which value?): refused.
            AccessKind::Atomic if e & want == want && bits & Entry::WL != 0 && bits & (Entry::WLD | Entry::RL | Entry::RLD) == 0 => Ok(true),
            AccessKind::AtomicRead if e & want == want && bits & (Entry::RL | Entry::RLD) == 0 => Ok(false),
            AccessKind::Atomic | AccessKind::AtomicRead if e & want == want => Err(Error::Unsupported(format!(
                "atomic at rank {} address {addr:#x}: the page is marked for Active Access with data logging or logged gets, where atomics are not defined; unmark it or use puts",
                self.rank
            ))),
            _ if e & want != want => Err(Error::Protection { rank: self.rank, addr, len, op: kind.name(), prot: Prot::describe(bits) }),
            _ => Ok(false), // bits for the other direction only (e.g. RL on a put)
        }
    }
}

/// A rank's own table: the only writer of it.
pub struct TargetTable {
    raw: Raw,
    /// Free ranges of private entries (start, count), and free region slots.
    state: Mutex<TargetState>,
    /// Pins pages for the registration strategy (nothing under `none`).
    registrar: Registrar,
    /// PART counters of this rank (target and origin side; the table counts its regions).
    part_stats: Arc<crate::part::PartStats>,
}

struct TargetState {
    free_entries: Vec<(usize, usize)>,
    exposures: Vec<Exposure>,
    /// Generation of the next exposure: a late release for an exposure that is gone (and
    /// whose addresses may be exposed again) must not touch the new one.
    next_generation: u64,
}

struct Exposure {
    slot: usize,
    base: usize,
    len: usize,
    generation: u64,
    /// Per page of the range: registrations held on it (0 = not REGISTERED). The exposure holds
    /// one Registrar hold on a page while its count is above zero.
    holds: Vec<u32>,
    /// PART: the whole pages inside the range, registered with userfaultfd in SIGBUS mode
    /// (`None` under other strategies, or when no whole page lies inside / the kernel refused).
    part: Option<crate::part::UffdRegion>,
}

impl Exposure {
    fn contains(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && addr + len <= self.base + self.len
    }
}

/// The maximal runs `(first page, pages)` of `range` whose pages satisfy `keep`: registration
/// pins and unpins whole runs with one call each.
fn page_runs(range: std::ops::Range<usize>, keep: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut p = range.start;
    while p < range.end {
        if !keep(p) {
            p += 1;
            continue;
        }
        let start = p;
        while p < range.end && keep(p) {
            p += 1;
        }
        runs.push((start, p - start));
    }
    runs
}

/// Where a rank's access-log arena lives (`OriginTable::log_arena`): a file the owner made,
/// which a process of the same host opens as `/proc/<pid>/fd/<fd>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogArenaHome {
    pub pid: u32,
    pub fd: u32,
    pub bytes: usize,
}

/// A token for an exposed range; give it back to `unexpose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExposureId(pub usize);

impl TargetTable {
    /// Initializes the table in our own window; region 0 describes our heap.
    pub fn init(w: Window, heap_base: usize, heap_len: usize, max_regions: usize) -> Result<TargetTable> {
        let heap_pages = heap_len.div_ceil(page_size());
        let mut layout = TableLayout { max_regions, heap_pages, private_pages: 0 };
        let fixed = layout.bytes();
        if fixed > w.len {
            return Err(Error::OutOfResources(format!("translation table needs {fixed} bytes but its window has {}", w.len)));
        }
        // Whatever is left after the heap's entries holds private entries.
        layout.private_pages = (w.len - fixed) / 8;
        let raw = Raw { base: w.local, layout };
        // SAFETY: the window is ours and zeroed; nobody reads it before the magic is set.
        unsafe {
            std::ptr::write(
                w.local as *mut TableHeader,
                TableHeader {
                    magic: AtomicU64::new(0),
                    max_regions: max_regions as u64,
                    heap_pages: heap_pages as u64,
                    private_pages: layout.private_pages as u64,
                    hwm: AtomicU32::new(1),
                    log_home: AtomicU64::new(0),
                    log_bytes: AtomicU64::new(0),
                },
            );
        }
        let r0 = raw.region(0);
        r0.kind.store(KIND_HEAP, Ordering::Relaxed);
        r0.base.store(heap_base as u64, Ordering::Relaxed);
        r0.len.store(heap_len as u64, Ordering::Relaxed);
        r0.first_entry.store(0, Ordering::Relaxed);
        r0.state.store(ACTIVE, Ordering::Relaxed);
        raw.header().magic.store(MAGIC, Ordering::Release);
        let table = TargetTable {
            raw,
            state: Mutex::new(TargetState {
                free_entries: vec![(heap_pages, layout.private_pages)],
                exposures: vec![],
                next_generation: 1,
            }),
            registrar: Registrar::new(Strategy::None, Arc::new(MlockPinner), 0, Arc::new(RegistrationStats::default())),
            part_stats: Arc::new(crate::part::PartStats::default()),
        };
        Ok(table)
    }

    /// Tells origins where our access-log arena is (`OriginTable::log_arena`), once it is
    /// formatted. Set once per process.
    pub fn publish_log_arena(&self, home: LogArenaHome) {
        let h = self.raw.header();
        h.log_bytes.store(home.bytes as u64, Ordering::Relaxed);
        h.log_home.store((home.pid as u64) << 32 | home.fd as u64, Ordering::Release);
    }

    /// Installs the registration strategy (before anything is exposed; `none` until then).
    pub fn set_registrar(&mut self, registrar: Registrar) {
        self.registrar = registrar;
    }

    pub fn registrar(&self) -> &Registrar {
        &self.registrar
    }

    /// This rank's PART counters.
    pub fn part_stats(&self) -> &Arc<crate::part::PartStats> {
        &self.part_stats
    }

    /// PART, at expose: registers the whole pages inside `[addr, addr+len)` with userfaultfd
    /// (SIGBUS mode), so a zero-copy access to a missing one fails fast. Only whole pages: an
    /// unaligned exposure shares its edge pages with other data (and possibly with a
    /// neighbouring exposure, which a second registration would refuse); the edge pages stay
    /// under the kernel's own demand paging (unpinned too, they just never fail). A mapping
    /// userfaultfd refuses (file-backed, hugetlb ...) is left to the kernel likewise, counted as
    /// unmanaged. Whether userfaultfd works at all is checked once at init.
    fn part_adopt(&self, addr: usize, len: usize) -> Option<crate::part::UffdRegion> {
        let (a, b) = (activerma_core::page::page_ceil(addr), page_floor(addr + len));
        let region = if a < b {
            // SAFETY: the caller of `expose` keeps the range mapped until it is unexposed, and
            // `unexpose` drops the region; exposures do not overlap, so no whole page of this
            // range is registered by another exposure.
            unsafe { crate::part::UffdRegion::adopt(a, b - a) }.ok()
        } else {
            None
        };
        let c = if region.is_some() { &self.part_stats.regions_registered } else { &self.part_stats.regions_unmanaged };
        c.fetch_add(1, Ordering::Relaxed);
        region
    }

    /// PART, benchmarks and tests: evicts (contents kept) every whole page inside
    /// `[addr, addr+len)` of one of our exposures, so the next remote access meets real faults
    /// there; returns how many pages were evicted (0 when the range is not PART-managed).
    pub fn part_evict(&self, addr: usize, len: usize) -> Result<u64> {
        self.part_inject(addr, len, &mut crate::part::FaultInjector::new(1.0, 0)?)
    }

    /// PART fault injection, at the target: evicts (contents kept) each whole page inside
    /// `[addr, addr+len)` that this rank manages with the injector's probability; returns the
    /// number of pages evicted — each is missing when this returns. Only whole pages inside
    /// the accessed range are touched, so no byte outside the access can be lost to a write
    /// racing with the eviction; the access range itself must have no concurrent writer (as
    /// for any RMA).
    pub fn part_inject(&self, addr: usize, len: usize, inj: &mut crate::part::FaultInjector) -> Result<u64> {
        let st = self.state.lock().unwrap();
        let e = st.exposures.iter().find(|e| e.contains(addr, len)).ok_or(Error::NotExposed { rank: usize::MAX, addr, len })?;
        let Some(r) = &e.part else { return Ok(0) };
        let a = activerma_core::page::page_ceil(addr).max(r.addr());
        let b = page_floor(addr + len).min(r.addr() + r.len());
        if a >= b {
            return Ok(0);
        }
        let n = inj.inject(r, a, b - a)?.len() as u64;
        self.part_stats.pages_injected.fetch_add(n, Ordering::Relaxed);
        Ok(n)
    }

    fn heap_base(&self) -> usize {
        self.raw.region(0).base.load(Ordering::Relaxed) as usize
    }

    fn set_entries(&self, first: usize, count: usize, value: u64) {
        for i in first..first + count {
            self.raw.entry(i).store(value, Ordering::Release);
        }
    }

    /// Maps a segment allocation (heap offset, page aligned, and exact length) read-write.
    pub fn map_segment(&self, off: usize, len: usize) {
        let r = pages_spanned(0, off, len);
        let bits = (Entry::PRESENT | Entry::REGISTERED | Entry::R | Entry::W) as u64;
        self.set_entries(r.start, r.len(), bits);
        let tail = (off + len) % page_size();
        if tail != 0 {
            self.set_entries(r.end - 1, 1, bits | (tail as u64) << Entry::LIMIT_SHIFT);
        }
    }

    pub fn unmap_segment(&self, off: usize, len: usize) {
        let r = pages_spanned(0, off, len);
        self.set_entries(r.start, r.len(), 0);
    }

    /// Exposes `[addr, addr+len)` of our private memory to remote access with `prot`.
    pub fn expose(&self, addr: usize, len: usize, prot: Prot) -> Result<ExposureId> {
        if len == 0 {
            return Err(Error::InvalidArgument("cannot expose 0 bytes".into()));
        }
        let end = addr.checked_add(len).ok_or_else(|| Error::InvalidArgument("exposed range wraps around the address space".into()))?;
        let hb = self.heap_base();
        let hl = self.raw.region(0).len.load(Ordering::Relaxed) as usize;
        if addr < hb + hl && end > hb {
            return Err(Error::InvalidArgument("the range overlaps the symmetric heap: segments are exposed already".into()));
        }
        let mut st = self.state.lock().unwrap();
        if let Some(e) = st.exposures.iter().find(|e| addr < e.base + e.len && end > e.base) {
            return Err(Error::InvalidArgument(format!("the range overlaps an exposed range {:#x}+{}; unexpose it first", e.base, e.len)));
        }
        let pages = pages_spanned(page_floor(addr), addr, len).len();
        let slot =
            (1..self.raw.layout.max_regions).find(|&i| self.raw.region(i).state.load(Ordering::Acquire) == FREE).ok_or_else(|| {
                Error::OutOfResources(format!(
                    "all {} exposure slots are in use; raise ACTIVERMA_MAX_REGIONS",
                    self.raw.layout.max_regions - 1
                ))
            })?;
        let fi = st.free_entries.iter().position(|&(_, n)| n >= pages).ok_or_else(|| {
            Error::OutOfResources(format!("no room for {pages} more pages in the translation table; raise ACTIVERMA_MAX_PRIVATE_PAGES"))
        })?;
        // pin-all: the whole range is pinned before it becomes reachable; if it does not fit,
        // the exposure fails and nothing is left exposed or pinned.
        let strategy = self.registrar.strategy();
        if strategy == Strategy::PinAll {
            self.registrar.hold(addr, len)?;
        }
        let registered = if strategy.registers_at_expose() { Entry::REGISTERED } else { 0 };
        let part = if strategy == Strategy::Part { self.part_adopt(addr, len) } else { None };
        let (first, n) = st.free_entries[fi];
        if n == pages {
            st.free_entries.remove(fi);
        } else {
            st.free_entries[fi] = (first + pages, n - pages);
        }
        self.set_entries(first, pages, (Entry::PRESENT | registered | prot.bits()) as u64);
        let r = self.raw.region(slot);
        r.kind.store(KIND_PRIVATE, Ordering::Relaxed);
        r.base.store(addr as u64, Ordering::Release);
        r.len.store(len as u64, Ordering::Release);
        r.first_entry.store(first as u64, Ordering::Release);
        r.state.store(ACTIVE, Ordering::Release);
        self.raw.header().hwm.fetch_max(slot as u32 + 1, Ordering::AcqRel);
        let generation = st.next_generation;
        st.next_generation += 1;
        let holds = vec![u32::from(strategy == Strategy::PinAll); pages];
        st.exposures.push(Exposure { slot, base: addr, len, generation, holds, part });
        Ok(ExposureId(slot))
    }

    /// Withdraws an exposure; returns once no origin is still copying into or out of it.
    pub fn unexpose(&self, id: ExposureId) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        let pos = st
            .exposures
            .iter()
            .position(|e| e.slot == id.0)
            .ok_or_else(|| Error::InvalidArgument(format!("exposure {} is not active", id.0)))?;
        let Exposure { slot, base: addr, len, holds, part, .. } = st.exposures.remove(pos);
        let r = self.raw.region(slot);
        r.state.store(DYING, Ordering::SeqCst);
        let started = std::time::Instant::now();
        while r.inflight.load(Ordering::SeqCst) != 0 {
            // Copies take micro- to milliseconds; an origin that died mid-copy never finishes,
            // and its job is being torn down by the launcher — do not wait forever for it.
            if started.elapsed().as_secs() >= 10 {
                eprintln!("activerma: unexpose of {addr:#x}+{len}: an origin stayed inside for 10 s; proceeding");
                break;
            }
            std::thread::yield_now();
        }
        let first = r.first_entry.load(Ordering::Relaxed) as usize;
        let pages = pages_spanned(page_floor(addr), addr, len).len();
        self.set_entries(first, pages, 0);
        // Invalidation: no origin is inside and no entry says REGISTERED any more, so the pages
        // this exposure registered are unpinned now; a later access finds nothing to reuse.
        let released = self.release_runs(page_floor(addr), &holds, |h| h > 0);
        // PART: evicted pages come back from the shadow, then the range is unregistered.
        drop(part);
        st.free_entries.push((first, pages));
        st.free_entries.sort_unstable();
        r.state.store(FREE, Ordering::Release);
        released
    }

    /// Releases the Registrar hold of every page run (pages of an exposure starting at
    /// `page_base`) whose hold count satisfies `pick`; counts them as invalidated.
    fn release_runs(&self, page_base: usize, holds: &[u32], pick: impl Fn(u32) -> bool) -> Result<()> {
        let ps = page_size();
        let mut result = Ok(());
        let mut p = 0;
        while p < holds.len() {
            if !pick(holds[p]) {
                p += 1;
                continue;
            }
            let start = p;
            while p < holds.len() && pick(holds[p]) {
                p += 1;
            }
            RegistrationStats::add(&self.registrar.stats().invalidated_pages, (p - start) as u64);
            if let Err(e) = self.registrar.release(page_base + start * ps, (p - start) * ps) {
                result = Err(e);
            }
        }
        result
    }

    /// The protection bits (R, W) every page of the exposure `[base, base+len)` has, when they
    /// are the same on all of them and none is marked for Active Access: such an exposure can
    /// be described to an origin on another host by one key (keyed_rma.rs). None otherwise.
    pub fn uniform_protection(&self, base: usize, len: usize) -> Option<u32> {
        let st = self.state.lock().unwrap();
        let e = st.exposures.iter().find(|e| e.base == base && e.len == len)?;
        let first = self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize;
        let pages = pages_spanned(page_floor(base), base, len).len();
        let mask = (Entry::R | Entry::W | Entry::ACTIVE) as u64;
        let bits = self.raw.entry(first).load(Ordering::Acquire) & mask;
        let uniform = (1..pages).all(|p| self.raw.entry(first + p).load(Ordering::Acquire) & mask == bits);
        (uniform && bits & Entry::ACTIVE as u64 == 0).then_some(bits as u32)
    }

    /// The exposure holding all of `[addr, addr+len)`: its base, length and generation.
    pub fn exposure_of(&self, addr: usize, len: usize) -> Option<(usize, usize, u64)> {
        let st = self.state.lock().unwrap();
        st.exposures.iter().find(|e| e.contains(addr, len)).map(|e| (e.base, e.len, e.generation))
    }

    /// Rendezvous, target side: registers the pages of `[addr, addr+len)` (inside one exposure)
    /// — pins those not registered yet and sets REGISTERED on them. With `per_op`, every call
    /// is one more holder that `release_registration` drops; without, a page stays registered
    /// until its range is unexposed. Returns the exposure's generation, for the release.
    pub fn register(&self, addr: usize, len: usize, per_op: bool) -> Result<u64> {
        let mut st = self.state.lock().unwrap();
        let e = st.exposures.iter_mut().find(|e| e.contains(addr, len)).ok_or(Error::NotExposed { rank: usize::MAX, addr, len })?;
        let page_base = page_floor(e.base);
        let range = pages_spanned(page_base, addr, len.max(1));
        let ps = page_size();
        // Pin what is not registered yet, run by run; undo on failure (all or nothing).
        let mut pinned: Vec<(usize, usize)> = Vec::new();
        for (start, n) in page_runs(range.clone(), |p| e.holds[p] == 0) {
            if let Err(err) = self.registrar.hold(page_base + start * ps, n * ps) {
                for &(s, n) in &pinned {
                    let _ = self.registrar.release(page_base + s * ps, n * ps);
                }
                return Err(err);
            }
            pinned.push((start, n));
        }
        let first = self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize;
        for p in range {
            if e.holds[p] == 0 {
                self.raw.entry(first + p).fetch_or(Entry::REGISTERED as u64, Ordering::AcqRel);
                e.holds[p] = 1;
            } else if per_op {
                e.holds[p] += 1;
            }
        }
        Ok(e.generation)
    }

    /// Rendezvous-unpin, target side: drops one registration of `[addr, addr+len)` taken by
    /// `register(.., per_op = true)` on exposure `generation`; pages nobody holds lose
    /// REGISTERED and are unpinned. A release for an exposure that is gone is ignored (false):
    /// its pages were unpinned by `unexpose`.
    pub fn release_registration(&self, addr: usize, len: usize, generation: u64) -> Result<bool> {
        let mut st = self.state.lock().unwrap();
        let Some(e) = st.exposures.iter_mut().find(|e| e.generation == generation && e.contains(addr, len)) else {
            return Ok(false);
        };
        let page_base = page_floor(e.base);
        let range = pages_spanned(page_base, addr, len.max(1));
        let first = self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize;
        let mut freed = vec![0u32; e.holds.len()];
        for p in range {
            if e.holds[p] == 0 {
                continue;
            }
            e.holds[p] -= 1;
            if e.holds[p] == 0 {
                // Not REGISTERED before unpinned: no origin starts a zero-copy on it meanwhile.
                self.raw.entry(first + p).fetch_and(!(Entry::REGISTERED as u64), Ordering::AcqRel);
                freed[p] = 1;
            }
        }
        let ps = page_size();
        let mut result = Ok(true);
        for (start, n) in page_runs(0..freed.len(), |p| freed[p] == 1) {
            if let Err(err) = self.registrar.release(page_base + start * ps, n * ps) {
                result = Err(err);
            }
        }
        result
    }

    /// Firehose, target side (its pinner): a bucket run `[addr, addr+len)` is being pinned.
    /// Every exposed page inside it that is not registered yet is held in the Registrar
    /// (mlock, budget, counters) and marked REGISTERED; pages outside every exposure are left
    /// alone (nothing to register, and they may not even be mapped). All or nothing.
    pub fn firehose_pin(&self, addr: usize, len: usize) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        let end = addr + len;
        let ps = page_size();
        let mut done: Vec<(usize, usize, usize)> = Vec::new(); // (exposure index, first page, pages)
        let mut failed = None;
        'outer: for (i, e) in st.exposures.iter().enumerate() {
            if e.base >= end || e.base + e.len <= addr {
                continue;
            }
            let page_base = page_floor(e.base);
            let (lo, hi) = (addr.max(e.base), end.min(e.base + e.len));
            for (start, n) in page_runs(pages_spanned(page_base, lo, hi - lo), |p| e.holds[p] == 0) {
                if let Err(err) = self.registrar.hold(page_base + start * ps, n * ps) {
                    failed = Some(err);
                    break 'outer;
                }
                done.push((i, start, n));
            }
        }
        if let Some(err) = failed {
            for &(i, s, n) in &done {
                let _ = self.registrar.release(page_floor(st.exposures[i].base) + s * ps, n * ps);
            }
            return Err(err);
        }
        for (i, s, n) in done {
            let e = &mut st.exposures[i];
            let first = self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize;
            for p in s..s + n {
                e.holds[p] = 1;
                self.raw.entry(first + p).fetch_or(Entry::REGISTERED as u64, Ordering::AcqRel);
            }
        }
        Ok(())
    }

    /// Firehose, target side (its pinner): a bucket run is being unpinned (a victim evicted,
    /// or invalidated). Exposed pages inside it lose REGISTERED first, then their Registrar
    /// hold. Pages whose exposure is gone were unpinned by `unexpose` already.
    pub fn firehose_unpin(&self, addr: usize, len: usize) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        let end = addr + len;
        let ps = page_size();
        let mut result = Ok(());
        for e in st.exposures.iter_mut() {
            if e.base >= end || e.base + e.len <= addr {
                continue;
            }
            let page_base = page_floor(e.base);
            let (lo, hi) = (addr.max(e.base), end.min(e.base + e.len));
            let first = self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize;
            for (start, n) in page_runs(pages_spanned(page_base, lo, hi - lo), |p| e.holds[p] > 0) {
                for p in start..start + n {
                    // Not REGISTERED before unpinned: no origin starts a zero-copy on it meanwhile.
                    self.raw.entry(first + p).fetch_and(!(Entry::REGISTERED as u64), Ordering::AcqRel);
                    e.holds[p] = 0;
                }
                if let Err(err) = self.registrar.release(page_base + start * ps, n * ps) {
                    result = Err(err);
                }
            }
        }
        result
    }

    /// Sets and clears entry bits over a range of our exposed memory (the `access` layer's
    /// `assoc_pages` builds on this). Returns how many pages changed.
    pub fn update_bits(&self, addr: usize, len: usize, set: u32, clear: u32) -> Result<usize> {
        let st = self.state.lock().unwrap();
        let entries = self.entries_of(&st, addr, len)?;
        for i in entries.clone() {
            let _ = self.raw.entry(i).fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some((v | set as u64) & !(clear as u64)));
        }
        Ok(entries.len())
    }

    /// The entries of every page of `[addr, addr+len)` of our own memory (heap or an exposed
    /// range), as they are now: what `update_bits` last left there.
    pub fn entries(&self, addr: usize, len: usize) -> Result<Vec<u64>> {
        let st = self.state.lock().unwrap();
        Ok(self.entries_of(&st, addr, len)?.map(|i| self.raw.entry(i).load(Ordering::Acquire)).collect())
    }

    /// Indices into the entry array of the pages of `[addr, addr+len)`, which must lie in the
    /// heap or in one exposed range.
    fn entries_of(&self, st: &TargetState, addr: usize, len: usize) -> Result<std::ops::Range<usize>> {
        let (page_base, first) = if addr >= self.heap_base() && addr - self.heap_base() < self.raw.layout.heap_pages * page_size() {
            (self.heap_base(), 0)
        } else {
            let e = st.exposures.iter().find(|e| e.contains(addr, len)).ok_or(Error::NotExposed { rank: usize::MAX, addr, len })?;
            (page_floor(e.base), self.raw.region(e.slot).first_entry.load(Ordering::Relaxed) as usize)
        };
        let r = pages_spanned(page_base, addr, len.max(1));
        Ok(first + r.start..first + r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Page-aligned zeroed memory standing in for a table window; freed on drop.
    struct Mem(*mut u8, std::alloc::Layout);
    impl Drop for Mem {
        fn drop(&mut self) {
            // SAFETY: allocated in `window` with this layout.
            unsafe { std::alloc::dealloc(self.0, self.1) }
        }
    }

    fn window(bytes: usize) -> (Window, Mem) {
        let layout = std::alloc::Layout::from_size_align(bytes, 4096).unwrap();
        // SAFETY: non-zero size.
        let local = unsafe { std::alloc::alloc_zeroed(layout) };
        (Window { local, remote_base: 0, len: bytes }, Mem(local, layout))
    }

    #[test]
    fn heap_pages_follow_segment_allocations() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        let heap = 0x1000_0000;
        let t = TargetTable::init(w, heap, 16 * p, 8).unwrap();
        let o = OriginTable::attach(w, 3).unwrap();
        assert!(matches!(o.check(heap, 8, AccessKind::Put), Err(Error::NotExposed { rank: 3, .. })));
        t.map_segment(p, 2 * p);
        assert!(o.check(heap + p, 2 * p, AccessKind::Put).is_ok());
        assert!(o.check(heap + p - 1, 2, AccessKind::Get).is_err(), "straddles an unmapped page");
        assert!(o.check(heap + 16 * p - 4, 8, AccessKind::Get).is_err(), "runs past the heap");
        t.unmap_segment(p, 2 * p);
        assert!(o.check(heap + p, 8, AccessKind::Put).is_err());
        // A 100-byte segment: byte 99 is reachable, byte 100 of the same page is not.
        t.map_segment(4 * p, 100);
        assert!(o.check(heap + 4 * p + 92, 8, AccessKind::Put).is_ok());
        assert!(matches!(o.check(heap + 4 * p + 93, 8, AccessKind::Put), Err(Error::NotExposed { .. })));
        assert!(matches!(o.check(heap + 4 * p + 200, 1, AccessKind::Get), Err(Error::NotExposed { .. })));
    }

    #[test]
    fn private_exposure_is_byte_exact_and_protected() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        let t = TargetTable::init(w, 0x1000_0000, 4 * p, 8).unwrap();
        let o = OriginTable::attach(w, 1).unwrap();
        let base = 0x2000_0010;
        let id = t.expose(base, 100, Prot::ReadOnly).unwrap();
        assert!(matches!(o.check(base, 8, AccessKind::Atomic), Err(Error::Protection { .. })));
        assert!(o.check(base, 8, AccessKind::AtomicRead).is_ok(), "a fetch needs read permission only");
        assert!(o.check(base, 100, AccessKind::Get).unwrap().private);
        assert!(matches!(o.check(base + 99, 2, AccessKind::Get), Err(Error::NotExposed { .. })));
        assert!(matches!(o.check(base - 1, 1, AccessKind::Get), Err(Error::NotExposed { .. })));
        assert!(matches!(o.check(base, 8, AccessKind::Put), Err(Error::Protection { .. })));
        assert!(t.expose(base + 50, 10, Prot::ReadWrite).is_err(), "overlap refused");
        t.unexpose(id).unwrap();
        assert!(o.check(base, 8, AccessKind::Get).is_err());
        let id2 = t.expose(base, 100, Prot::ReadWrite).unwrap();
        assert!(o.check(base, 8, AccessKind::Atomic).is_ok());
        assert_eq!(t.update_bits(base, 8, Entry::WL, 0).unwrap(), 1);
        assert!(o.check(base, 8, AccessKind::Put).unwrap().active, "W=1, WL=1: written and logged");
        assert!(!o.check(base, 8, AccessKind::Get).unwrap().active, "put logging leaves gets plain");
        assert!(o.check(base, 8, AccessKind::Atomic).unwrap().active, "W=1, WL=1: a writing atomic is logged as a put of its word");
        assert!(!o.check(base, 8, AccessKind::AtomicRead).unwrap().active, "a fetch reads plainly where no get is logged");
        t.update_bits(base, 8, Entry::WLD, 0).unwrap();
        assert!(matches!(o.check(base, 8, AccessKind::Atomic), Err(Error::Unsupported(_))), "atomics on pages logging put data");
        t.update_bits(base, 8, 0, Entry::WLD).unwrap();
        t.update_bits(base, 8, Entry::WLD, Entry::W | Entry::WL).unwrap();
        assert!(o.check(base, 8, AccessKind::Put).unwrap().active, "W=0, WLD=1: an active put");
        t.update_bits(base, 8, 0, Entry::WLD).unwrap();
        assert!(matches!(o.check(base, 8, AccessKind::Put), Err(Error::Protection { .. })), "W=0 without logging: a fault");
        t.update_bits(base, 8, Entry::RL, 0).unwrap();
        assert!(o.check(base, 8, AccessKind::Get).unwrap().active, "R=1, RL=1: a logged get");
        assert_eq!(o.log_arena(), None, "no log arena before one is published");
        let home = LogArenaHome { pid: 77, fd: 5, bytes: 16 * 1024 };
        t.publish_log_arena(home);
        assert_eq!(o.log_arena(), Some(home), "the log arena is found");
        t.unexpose(id2).unwrap();
    }

    fn with_strategy(w: Window, strategy: Strategy) -> (TargetTable, Arc<crate::registration::CountingPinner>) {
        let mut t = TargetTable::init(w, 0x1000_0000, 4 * page_size(), 8).unwrap();
        let fake = Arc::new(crate::registration::CountingPinner::new());
        t.set_registrar(Registrar::new(strategy, fake.clone(), 0, Arc::new(RegistrationStats::default())));
        (t, fake)
    }

    #[test]
    fn strategies_decide_what_expose_registers() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        for (strategy, registered, pinned) in
            [(Strategy::None, true, 0), (Strategy::PinAll, true, 3), (Strategy::Bounce, false, 0), (Strategy::Rendezvous, false, 0)]
        {
            let (t, fake) = with_strategy(w, strategy);
            let o = OriginTable::attach(w, 1).unwrap();
            let id = t.expose(0x3000_0100, 2 * p, Prot::ReadWrite).unwrap();
            let l = o.check(0x3000_0100, 2 * p, AccessKind::Put).unwrap();
            assert_eq!(o.registered(&l, 0x3000_0100, 2 * p), registered, "{strategy:?}");
            assert_eq!(fake.live(), pinned, "{strategy:?}");
            drop(l);
            t.unexpose(id).unwrap();
            assert_eq!(fake.live(), 0, "{strategy:?}: unexpose unpins");
        }
    }

    #[test]
    fn rendezvous_registers_on_demand_and_unexpose_invalidates() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        let (t, fake) = with_strategy(w, Strategy::RendezvousUnpin);
        let o = OriginTable::attach(w, 1).unwrap();
        let base = 0x3000_0000;
        let id = t.expose(base, 4 * p, Prot::ReadWrite).unwrap();
        let reg = |a: usize, l: usize| {
            let lk = o.check(a, l, AccessKind::Get).unwrap();
            o.registered(&lk, a, l)
        };
        // Two operations hold page 1 at once; the first release keeps it registered.
        let g1 = t.register(base + p, p, true).unwrap();
        let g2 = t.register(base + p, 2 * p, true).unwrap();
        assert_eq!(g1, g2);
        assert!(reg(base + p, 2 * p) && !reg(base, 8));
        assert_eq!(fake.live(), 2);
        assert!(t.release_registration(base + p, p, g1).unwrap());
        assert!(reg(base + p, 2 * p), "still held by the second operation");
        assert!(t.release_registration(base + p, 2 * p, g2).unwrap());
        assert!(!reg(base + p, 8) && fake.live() == 0);
        // Registered pages are unpinned by unexpose; a late release for the old exposure is
        // ignored and does not touch a new exposure of the same addresses.
        let g = t.register(base, 4 * p, true).unwrap();
        t.unexpose(id).unwrap();
        assert_eq!(fake.live(), 0);
        let id2 = t.expose(base, 4 * p, Prot::ReadWrite).unwrap();
        let g3 = t.register(base, p, true).unwrap();
        assert_ne!(g, g3);
        assert!(!t.release_registration(base, 4 * p, g).unwrap(), "stale release ignored");
        assert!(reg(base, 8), "the new exposure keeps its registration");
        assert!(t.register(base + 4 * p, 1, true).is_err(), "outside every exposure");
        t.unexpose(id2).unwrap();
        assert_eq!(fake.live(), 0);
        assert_eq!(fake.violations(), 0);
        assert_eq!(t.registrar().stats().invalidated_pages.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn firehose_buckets_register_exactly_their_exposed_pages() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        let (t, fake) = with_strategy(w, Strategy::Firehose);
        let o = OriginTable::attach(w, 1).unwrap();
        let base = 0x3000_0000;
        let id = t.expose(base + 100, 2 * p, Prot::ReadWrite).unwrap(); // pages 0, 1, 2
        let reg = |a: usize| {
            let lk = o.check(a, 1, AccessKind::Get).unwrap();
            o.registered(&lk, a, 1)
        };
        assert!(!reg(base + 100), "firehose registers on demand");
        // A two-page bucket run starting one page below the exposure: only page 0 is exposed.
        t.firehose_pin(base - p, 2 * p).unwrap();
        assert_eq!(fake.live(), 1, "pages outside every exposure are not pinned");
        assert!(reg(base + 100) && !reg(base + p));
        t.firehose_pin(base + p, 2 * p).unwrap();
        assert_eq!(fake.live(), 3);
        assert!(reg(base + 2 * p + 99));
        t.firehose_unpin(base - p, 2 * p).unwrap();
        assert!(!reg(base + 100) && reg(base + p));
        assert_eq!(fake.live(), 2);
        // unexpose unpins what is left; the later unpin of the bucket (invalidation) is a no-op.
        t.unexpose(id).unwrap();
        assert_eq!(fake.live(), 0);
        t.firehose_unpin(base + p, 2 * p).unwrap();
        assert_eq!(fake.violations(), 0);
        assert_eq!(t.registrar().stats().pinned_peak.load(Ordering::Relaxed), 3 * p as u64);
    }

    #[test]
    fn pin_all_exposure_that_does_not_fit_leaves_nothing_exposed() {
        let p = page_size();
        let (w, _keep) = window(64 * 1024);
        let mut t = TargetTable::init(w, 0x1000_0000, 4 * p, 8).unwrap();
        let fake = Arc::new(crate::registration::CountingPinner::new());
        t.set_registrar(Registrar::new(Strategy::PinAll, fake.clone(), 2 * p as u64, Arc::new(RegistrationStats::default())));
        let o = OriginTable::attach(w, 1).unwrap();
        let e = t.expose(0x3000_0000, 3 * p, Prot::ReadWrite).unwrap_err().to_string();
        assert!(e.contains("ACTIVERMA_PIN_LIMIT"), "{e}");
        assert!(matches!(o.check(0x3000_0000, 8, AccessKind::Get), Err(Error::NotExposed { .. })));
        assert_eq!(fake.live(), 0);
        // The slot and entries were not consumed: a fitting exposure still works.
        let id = t.expose(0x3000_0000, 2 * p, Prot::ReadWrite).unwrap();
        t.unexpose(id).unwrap();
    }

    #[test]
    fn unexpose_waits_for_inflight_origin() {
        let (w, _keep) = window(64 * 1024);
        let t = TargetTable::init(w, 0x1000_0000, 4 * page_size(), 8).unwrap();
        let o = OriginTable::attach(w, 1).unwrap();
        let id = t.expose(0x3000_0000, 64, Prot::ReadWrite).unwrap();
        let guard = o.check(0x3000_0000, 8, AccessKind::Put).unwrap();
        std::thread::scope(|s| {
            let h = s.spawn(|| t.unexpose(id).unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!h.is_finished(), "unexpose must wait for the copy in flight");
            drop(guard);
            h.join().unwrap();
        });
    }
}
