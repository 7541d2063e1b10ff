//! A rank's DSM: allocation, global references, and the access checks that hand out views of
//! local copies (paper Fig. 1's `start_read` / `start_write`).
//!
//! ```text
//! read(r):   copy = table[r.home][r.id]
//!            hit:  copy valid (or this rank is r's home)            -> view
//!            miss: fetch r from its home into the copy (allocated on first touch) -> view
//! write(r):  as read, and on the first write of the interval: twin = copy; r joins the dirty
//!            list (at the home, the master is written in place: no twin)
//! ```

use crate::cache::{Cache, Copy, State};
use crate::diff_array::DiffArrays;
use crate::global_ref::{ArrayRef, GlobalRef};
use crate::handlers;
use crate::heap::Heap;
use crate::home::Home;
use crate::lock_cache::LockCache;
use crate::mailbox::Mailbox;
use crate::mirrors::Mirrors;
use crate::protocol::Protocol;
use crate::shared::{twin_at, Shared};
use crate::view::{ReadView, WriteView};
use crate::wire::{self, word};
use activerma::{settings, Error, Rank, Result, World};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What a rank's DSM did (counted on the rank's own thread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Access checks that found a usable copy.
    pub hits: u64,
    /// Objects fetched from their homes: as reply messages, and put into the receive buffer.
    pub fetches_message: u64,
    pub fetches_rdma: u64,
    pub fetched_bytes: u64,
    /// Diffs sent to homes (invalidation) and their bytes.
    pub diffs: u64,
    pub diff_bytes: u64,
    /// Lock requests that went to another rank.
    pub remote_locks: u64,
    /// Locks taken again without a message: kept here since this rank's own unlock (lock
    /// caching; home.rs).
    pub kept_locks: u64,
    /// Copies dropped by acquires.
    pub invalidations: u64,
    /// Update protocols: bytes put into other ranks' copies and twins (in place), or
    /// diff-arrays put and their bytes (diff-arrays).
    pub update_bytes: u64,
    pub arrays: u64,
    /// The page-granular mode: pages the pager got from their homes, and pages acquires
    /// dropped.
    pub pages_fetched: u64,
    pub pages_dropped: u64,
}

#[derive(Default)]
pub(crate) struct Counts {
    pub hits: Cell<u64>,
    pub fetches_message: Cell<u64>,
    pub fetches_rdma: Cell<u64>,
    pub fetched_bytes: Cell<u64>,
    pub diffs: Cell<u64>,
    pub diff_bytes: Cell<u64>,
    pub remote_locks: Cell<u64>,
    pub kept_locks: Cell<u64>,
    pub invalidations: Cell<u64>,
    pub update_bytes: Cell<u64>,
    pub arrays: Cell<u64>,
    pub pages_dropped: Cell<u64>,
}

/// `fit_lease`: round trips timed (their median is taken), the lease's multiple of one, and
/// its bound.
const PINGS: usize = 32;
const LEASE_ROUND_TRIPS: u32 = 20;
const MAX_LEASE: std::time::Duration = std::time::Duration::from_millis(20);

pub(crate) fn bump(c: &Cell<u64>, by: u64) {
    c.set(c.get() + by);
}

pub struct Dsm {
    pub(crate) w: World,
    pub(crate) me: Rank,
    pub(crate) n: usize,
    pub(crate) protocol: Protocol,
    pub(crate) chunk: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) cache: RefCell<Cache>,
    /// Locks this rank holds, with their re-entry counts.
    pub(crate) held: HashMap<GlobalRef, u32>,
    /// The receive buffer for RDMA object replies: (heap offset, bytes).
    rdma: Option<(usize, usize)>,
    seq: Cell<u64>,
    /// The count of free notices as this rank's table last saw it.
    frees_seen: Cell<u64>,
    /// update-diff: arrays put to each rank so far.
    pub(crate) sent: Vec<u64>,
    pub(crate) counts: Counts,
    pub(crate) timeout_s: f64,
    /// Views opened through begin_read / begin_write and not ended (the C API).
    open_views: Cell<usize>,
    /// Invalidation: the regions this rank wrote since the last barrier, its write notices
    /// (sync.rs: a barrier drops only copies others wrote).
    pub(crate) written: RefCell<Vec<GlobalRef>>,
    /// The page-granular mode (ACTIVERMA_DSM_ACCESS=mmu): the mirrors of other homes' heaps,
    /// where each starts (indexed by home, for the views), and the pages this rank's releases
    /// changed since the last barrier (its page notices).
    pub(crate) mirrors: Option<Mirrors>,
    mirror_bases: Vec<usize>,
    /// The run asked for the page-granular mode (a job of one rank needs no mirrors).
    page_granular: bool,
    pub(crate) page_notices: Vec<u64>,
}

impl Dsm {
    /// Collective: every rank makes its DSM (its heap, handlers, receive buffer), with the
    /// protocol and sizes of the job's settings (`ACTIVERMA_DSM_*`).
    pub fn new(w: &World) -> Result<Dsm> {
        let cfg = w.config();
        let protocol = Protocol::from_config(cfg)?;
        Dsm::with_protocol(w, protocol)
    }

    /// As `new`, with the protocol given (every rank must give the same).
    pub fn with_protocol(w: &World, protocol: Protocol) -> Result<Dsm> {
        let cfg = w.config();
        let (me, n) = (w.rank(), w.size());
        if n > GlobalRef::MAX_HOME + 1 {
            return Err(Error::Unsupported(format!("dsm: a job of {n} ranks (references name at most {} homes)", GlobalRef::MAX_HOME + 1)));
        }
        let heap = Heap::new(w, cfg.get_u64(settings::DSM_HEAP)? as usize)?;
        let chunk = (cfg.get_u64(settings::DSM_CHUNK)? as usize).max(8);
        let rdma = match protocol {
            Protocol::InvalidateRdma => {
                let cap = (cfg.get_u64(settings::DSM_RDMA_BUFFER)? as usize).max(64);
                Some((heap.alloc(cap, "the receive buffer")?, cap))
            }
            _ => None,
        };
        let arrays = match protocol {
            Protocol::UpdateDiff => Some(DiffArrays::new(&heap, n, cfg.get_u64(settings::DSM_DIFF_ARRAY)? as usize)?),
            _ => None,
        };
        // Receive buffers and diff-array slots lie at the same offsets at every rank only if
        // every rank made its heap the same way: check it (a rank with other settings).
        let layout = heap.alloc(0, "the layout check")?;
        let all = w.allgather(&(layout as u64).to_le_bytes())?;
        if all.iter().any(|b| b[..8] != (layout as u64).to_le_bytes()) {
            return Err(Error::InvalidArgument("dsm: the ranks made their DSM with different protocols or ACTIVERMA_DSM_* sizes".into()));
        }
        let lease = std::time::Duration::from_micros(cfg.get_u64(settings::DSM_LOCK_LEASE_US)?);
        let shared = Arc::new(Shared {
            w: w.clone(),
            me,
            n,
            protocol,
            heap,
            home: std::sync::Mutex::new(Home::new(me, lease)),
            locks: LockCache::new(lease),
            locks_wanted: AtomicBool::new(false),
            kept_looks: AtomicU64::new(0),
            mail: Mailbox::default(),
            copies: Default::default(),
            freed: Default::default(),
            frees: AtomicU64::new(0),
            arrays,
            pending: Default::default(),
        });
        handlers::install(&shared)?;
        let page_granular = cfg.get_enum(settings::DSM_ACCESS)? == "mmu";
        if page_granular && !protocol.invalidates() {
            return Err(Error::Unsupported(format!(
                "dsm: the page-granular mode (ACTIVERMA_DSM_ACCESS=mmu) runs the invalidation protocols only, not {}",
                protocol.name()
            )));
        }
        let mirrors = if page_granular && n > 1 { Some(Mirrors::new(&shared)?) } else { None };
        let mirror_bases = mirrors.as_ref().map(Mirrors::bases).unwrap_or_default();
        let timeout_s = cfg.get_f64(settings::TIMEOUT_S)?;
        let dsm = Dsm {
            w: w.clone(),
            me,
            n,
            protocol,
            chunk,
            shared,
            cache: RefCell::new(Cache::new(n)),
            held: HashMap::new(),
            rdma,
            seq: Cell::new(0),
            frees_seen: Cell::new(0),
            sent: vec![0; n],
            counts: Counts::default(),
            timeout_s,
            open_views: Cell::new(0),
            written: RefCell::new(Vec::new()),
            mirrors,
            mirror_bases,
            page_granular,
            page_notices: Vec::new(),
        };
        w.barrier()?; // every rank's handlers are in place before anyone sends
        dsm.fit_lease(lease)?;
        Ok(dsm)
    }

    /// Fits the locks' lease to this job: at least the setting (`least`), and LEASE_ROUND_TRIPS
    /// message round trips to a neighbour, measured now. Handing a contended lock on costs
    /// about two round trips (RECALL and UNLOCK, GRANT, and the asker's LOCK before them);
    /// an owner that keeps it for nine times that keeps a lock two ranks loop on taken 90 %
    /// of the time on any network and progress mode (a fixed lease does so only where a
    /// round trip is as cheap as where the setting was chosen). Waiting ranks wait up to the
    /// lease, so it is bounded by MAX_LEASE. A setting of 0 asks for no lease (strict turns).
    fn fit_lease(&self, least: std::time::Duration) -> Result<()> {
        let mut lease = least;
        if self.n > 1 && !least.is_zero() {
            let peer = (self.me + 1) % self.n;
            let mut trips: Vec<std::time::Duration> = Vec::with_capacity(PINGS);
            for i in 0..PINGS + 8 {
                let t = Instant::now();
                self.ask(peer, wire::PING, &[])?;
                if i >= 8 {
                    trips.push(t.elapsed()); // (the first few warm the path up)
                }
            }
            trips.sort_unstable();
            lease = lease.max((trips[PINGS / 2] * LEASE_ROUND_TRIPS).min(MAX_LEASE));
        }
        self.shared.home.lock().unwrap().set_lease(lease);
        self.shared.locks.set_lease(lease);
        self.w.barrier() // nobody's lock traffic meets another's measurement
    }

    /// How long an owner keeps a lock others wait for (`fit_lease`).
    pub fn lock_lease(&self) -> std::time::Duration {
        self.shared.locks.lease()
    }

    pub fn world(&self) -> &World {
        &self.w
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Whether first accesses are seen by the MMU, page by page (ACTIVERMA_DSM_ACCESS=mmu:
    /// mirrors.rs), rather than by the access checks.
    pub fn page_granular(&self) -> bool {
        self.page_granular
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counts;
        Stats {
            hits: c.hits.get(),
            fetches_message: c.fetches_message.get(),
            fetches_rdma: c.fetches_rdma.get(),
            fetched_bytes: c.fetched_bytes.get(),
            diffs: c.diffs.get(),
            diff_bytes: c.diff_bytes.get(),
            remote_locks: c.remote_locks.get(),
            kept_locks: c.kept_locks.get(),
            invalidations: c.invalidations.get(),
            update_bytes: c.update_bytes.get(),
            arrays: c.arrays.get(),
            pages_fetched: self.mirrors.as_ref().map_or(0, Mirrors::pages_fetched),
            pages_dropped: c.pages_dropped.get(),
        }
    }

    /// Collective: every rank gets the reference rank `root` passes (the others pass `None`) —
    /// how a region one rank made becomes known to all.
    pub fn share(&self, root: Rank, r: Option<GlobalRef>) -> Result<GlobalRef> {
        let all = self.w.allgather(&r.map_or(u64::MAX, GlobalRef::to_bits).to_le_bytes())?;
        Ok(GlobalRef::from_bits(word(&all[root], 0).unwrap_or(u64::MAX)))
    }

    /// As `share`, for an array.
    pub fn share_array(&self, root: Rank, a: Option<ArrayRef>) -> Result<ArrayRef> {
        let all = self.w.allgather(&wire::words(&a.map_or([u64::MAX; 2], |a| a.to_words())))?;
        Ok(ArrayRef::from_words([word(&all[root], 0).unwrap_or(u64::MAX), word(&all[root], 1).unwrap_or(0)]))
    }

    /// A region of `bytes` homed at this rank, zeroed.
    pub fn alloc(&self, bytes: usize) -> Result<GlobalRef> {
        Ok(self.shared.alloc_here(bytes, None)?.0)
    }

    /// An array of `bytes` homed at this rank, split into chunks of `ACTIVERMA_DSM_CHUNK`.
    pub fn alloc_array(&self, bytes: usize) -> Result<ArrayRef> {
        self.alloc_array_chunked(bytes, self.chunk)
    }

    /// An array homed at this rank in chunks of `chunk` bytes (a program that knows its access
    /// pattern: LU's blocks).
    pub fn alloc_array_chunked(&self, bytes: usize, chunk: usize) -> Result<ArrayRef> {
        if chunk == 0 || chunk >= 1 << 24 {
            return Err(Error::InvalidArgument(format!("dsm: a chunk of {chunk} bytes (1 byte to 16 MiB)")));
        }
        let (first, _) = self.shared.alloc_here(bytes, Some(chunk))?;
        Ok(ArrayRef { first, len: bytes as u64, chunk: chunk.min(bytes.max(1)) as u64 })
    }

    /// A region of `bytes` homed at rank `home` (placement by the program).
    pub fn alloc_at(&self, home: Rank, bytes: usize) -> Result<GlobalRef> {
        self.alloc_remote(home, bytes, 0)
    }

    /// An array homed at rank `home`.
    pub fn alloc_array_at(&self, home: Rank, bytes: usize) -> Result<ArrayRef> {
        let first = self.alloc_remote(home, bytes, self.chunk)?;
        Ok(ArrayRef { first, len: bytes as u64, chunk: self.chunk.min(bytes.max(1)) as u64 })
    }

    fn alloc_remote(&self, home: Rank, bytes: usize, chunk: usize) -> Result<GlobalRef> {
        if home == self.me {
            let chunk = Some(chunk).filter(|&c| c > 0);
            return Ok(self.shared.alloc_here(bytes, chunk)?.0);
        }
        GlobalRef::new(home, 0, 0).check(self.n)?;
        let answer = self.ask(home, wire::ALLOC, &wire::words(&[bytes as u64, chunk as u64]))?;
        Ok(GlobalRef::from_bits(word(&answer, 0).unwrap_or(u64::MAX)))
    }

    /// Frees a region (at its home). Every rank has taken the notice in when this returns:
    /// references to it are refused everywhere from then on (a view of it made before stays
    /// as it is until dropped).
    pub fn free(&self, r: GlobalRef) -> Result<()> {
        r.check(self.n)?;
        if r.home() == self.me {
            self.shared.free_here(r).map_err(|why| Error::InvalidArgument(format!("dsm: {why}")))?;
        } else {
            self.ask(r.home(), wire::FREE, &r.to_bits().to_le_bytes())?;
            self.shared.note_freed(r);
        }
        // Every other rank takes the notice in before free returns.
        let before = self.shared.mail.notice_acks.load(Ordering::Acquire);
        let others: Vec<Rank> = (0..self.n).filter(|&p| p != self.me && p != r.home()).collect();
        for &p in &others {
            self.w.send_am(p, wire::FREED_NOTICE, 0, &r.to_bits().to_le_bytes())?;
        }
        for &p in &others {
            let want = others.len() as u64;
            self.wait_message("free notices taken in", p, || self.shared.mail.notice_acks.load(Ordering::Acquire) - before >= want)?;
        }
        Ok(())
    }

    /// Sends a request whose answer lands in the mailbox's `answer`, and waits for it.
    pub(crate) fn ask(&self, to: Rank, id: u16, payload: &[u8]) -> Result<Vec<u8>> {
        *self.shared.mail.answer.lock().unwrap() = None;
        self.w.send_am(to, id, 0, payload)?;
        let mut got = None;
        self.wait_message("an answer from the home", to, || {
            got = self.shared.mail.answer.lock().unwrap().take();
            got.is_some()
        })?;
        wire::body(&got.unwrap()).map(<[u8]>::to_vec).map_err(|why| Error::InvalidArgument(format!("dsm: {why}")))
    }

    /// A view of `r`'s bytes to read (fetching them if this rank's copy is missing or stale).
    pub fn read(&self, r: GlobalRef) -> Result<ReadView<'_>> {
        let (ptr, len, borrow) = self.check(r, false)?;
        // SAFETY: the flag lives as long as views of the copy can (cache.rs: the graveyard).
        let flag = unsafe { &*borrow };
        if flag.get() < 0 {
            return Err(Error::InvalidArgument(format!("dsm: {r} is being written through a view of this rank: drop it first")));
        }
        flag.set(flag.get() + 1);
        Ok(ReadView { ptr, len, borrow, _dsm: PhantomData })
    }

    /// A view of `r`'s bytes to write; the changes reach other ranks at this rank's next
    /// release (unlock, wait, barrier).
    pub fn write(&self, r: GlobalRef) -> Result<WriteView<'_>> {
        let (ptr, len, borrow) = self.check(r, true)?;
        // SAFETY: as in `read`.
        let flag = unsafe { &*borrow };
        if flag.get() != 0 {
            return Err(Error::InvalidArgument(format!("dsm: {r} already has a view at this rank: drop it first")));
        }
        flag.set(-1);
        Ok(WriteView { ptr: ptr as *mut u8, len, borrow, _dsm: PhantomData })
    }

    /// For foreign callers (the C API), which cannot borrow: opens a view of `r` to read and
    /// returns where its bytes are, valid until `end_view(r)`. Synchronization fails while
    /// any such view is open.
    pub fn begin_read(&self, r: GlobalRef) -> Result<(*const u8, usize)> {
        let v = self.read(r)?;
        let (ptr, len) = (v.ptr, v.len);
        std::mem::forget(v); // its borrow stays until end_view
        self.open_views.set(self.open_views.get() + 1);
        Ok((ptr, len))
    }

    /// As `begin_read`, to write.
    pub fn begin_write(&self, r: GlobalRef) -> Result<(*mut u8, usize)> {
        let v = self.write(r)?;
        let (ptr, len) = (v.ptr, v.len);
        std::mem::forget(v);
        self.open_views.set(self.open_views.get() + 1);
        Ok((ptr, len))
    }

    /// Closes a view `begin_read` or `begin_write` opened.
    pub fn end_view(&self, r: GlobalRef) -> Result<()> {
        let cache = self.cache.borrow();
        match cache.get(r).filter(|c| c.tag == r.tag()).map(|c| &*c.borrow) {
            Some(f) if f.get() != 0 && self.open_views.get() > 0 => {
                // What the forgotten view's drop would have done.
                f.set(if f.get() < 0 { 0 } else { f.get() - 1 });
                self.open_views.set(self.open_views.get() - 1);
                Ok(())
            }
            _ => Err(Error::InvalidArgument(format!("dsm: no view of {r} is open at this rank"))),
        }
    }

    /// Views opened by `begin_read` / `begin_write` and not ended.
    pub(crate) fn check_no_open_views(&self, what: &str) -> Result<()> {
        match self.open_views.get() {
            0 => Ok(()),
            k => Err(Error::InvalidArgument(format!(
                "dsm: {what} with {k} view(s) still open: end them first (they would not see the synchronization)"
            ))),
        }
    }

    /// The access check: where the usable copy is.
    #[inline]
    fn check(&self, r: GlobalRef, write: bool) -> Result<(*const u8, usize, *const Cell<isize>)> {
        {
            let cache = self.cache.borrow();
            if let Some(c) = cache.get(r) {
                let usable = match c.state {
                    // A home's first write since the barrier goes the slow way once: noted.
                    State::Home => !write || c.noted,
                    State::Dirty => true,
                    State::Valid => !write,
                    State::Invalid => false,
                    State::Mapped => true,
                };
                if usable && c.tag == r.tag() && self.frees_seen.get() == self.shared.frees.load(Ordering::Acquire) {
                    bump(&self.counts.hits, 1);
                    return Ok((self.bytes_of(r, c), c.len, &*c.borrow as *const Cell<isize>));
                }
            }
        }
        self.miss(r, write)
    }

    #[cold]
    fn miss(&self, r: GlobalRef, write: bool) -> Result<(*const u8, usize, *const Cell<isize>)> {
        r.check(self.n)?;
        self.forget_freed();
        let known = self.cache.borrow().get(r).map(|c| (c.tag, c.state));
        match known {
            Some((tag, _)) if tag != r.tag() => {
                return Err(Error::InvalidArgument(format!(
                    "dsm: {r} is not a reference rank {} handed out (forged or corrupted)",
                    r.home()
                )));
            }
            Some((_, State::Valid | State::Dirty | State::Home | State::Mapped)) => {}
            _ if r.home() == self.me => self.adopt_master(r)?,
            _ if self.mirrors.is_some() => {
                let answer = self.ask(r.home(), wire::PLACE, &r.to_bits().to_le_bytes())?;
                let (off, len) = (word(&answer, 0).unwrap_or(0) as usize, word(&answer, 1).unwrap_or(0) as usize);
                self.cache.borrow_mut().insert(r, Copy::new(off, len, r.tag(), State::Mapped));
            }
            _ if self.protocol == Protocol::UpdateInPlace => {
                let (off, len, meta) = self.subscribe(r)?;
                let mut copy = Copy::new(off, len, r.tag(), State::Valid);
                (copy.twin, copy.meta) = (Some(twin_at(off, len)), Some(meta));
                self.cache.borrow_mut().insert(r, copy);
            }
            _ => self.fetch(r)?,
        }
        let mut cache = self.cache.borrow_mut();
        let c = cache.get_mut(r).expect("a copy was made");
        if write && !c.noted && self.protocol.invalidates() && c.state != State::Mapped {
            c.noted = true;
            self.written.borrow_mut().push(r);
        }
        if write && c.state == State::Valid {
            if self.protocol.invalidates() {
                let twin = match c.twin {
                    Some(t) => t,
                    None => *c.twin.insert(self.shared.heap.alloc(c.len, "a twin")?),
                };
                // SAFETY: copy and twin are distinct allocations of c.len bytes in this heap.
                unsafe { std::ptr::copy_nonoverlapping(self.shared.heap.ptr(c.off), self.shared.heap.ptr(twin), c.len) };
            } // (update protocols: the twin already equals the copy)
            c.state = State::Dirty;
            cache.dirty.push(r);
        }
        let c = cache.get(r).unwrap();
        Ok((self.bytes_of(r, c), c.len, &*c.borrow as *const Cell<isize>))
    }

    /// Where a usable copy's bytes are: in this rank's heap, or (Mapped) in its home's mirror.
    #[inline]
    fn bytes_of(&self, r: GlobalRef, c: &Copy) -> *const u8 {
        match c.state {
            State::Mapped => (self.mirror_bases[r.home()] + c.off) as *const u8,
            _ => self.shared.heap.ptr(c.off),
        }
    }

    /// A region homed here enters this rank's table: the master is its copy.
    fn adopt_master(&self, r: GlobalRef) -> Result<()> {
        let place = self.shared.home.lock().unwrap().region(r).map_err(|why| Error::InvalidArgument(format!("dsm: {why}")))?.place;
        let state = if self.protocol.invalidates() { State::Home } else { State::Valid };
        let mut copy = Copy::new(place.off, place.len, r.tag(), state);
        (copy.twin, copy.meta) = (place.twin, place.meta);
        self.cache.borrow_mut().insert(r, copy);
        Ok(())
    }

    /// Drops copies of regions their homes freed since this rank last looked.
    fn forget_freed(&self) {
        let frees = self.shared.frees.load(Ordering::Acquire);
        if frees == self.frees_seen.get() {
            return;
        }
        let freed = self.shared.freed.lock().unwrap();
        let mut cache = self.cache.borrow_mut();
        for &r in freed.iter() {
            cache.remove(r);
        }
        self.frees_seen.set(frees);
    }

    /// Brings `r`'s bytes from its home into this rank's copy (made on first touch, with a
    /// twin under update-diff); the copy is Valid after. Under update-diff the request says
    /// which arrays this rank has applied, and what arrives meanwhile for `r` is applied on top
    /// (see diff_array.rs).
    fn fetch(&self, r: GlobalRef) -> Result<()> {
        let shared = self.shared.clone();
        let mut request = Vec::new();
        if let Some(a) = &shared.arrays {
            let done = a.receive_lock();
            shared.pending.lock().unwrap().insert(r, Vec::new());
            request.extend(done.iter().flat_map(|d| d.to_le_bytes()));
        }
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        let (buffer, cap) = self.rdma.map_or((wire::NONE, 0), |(off, cap)| (off as u64, cap as u64));
        if let Some((off, _)) = self.rdma {
            // SAFETY: the receive buffer's sequence word, ours until we send the request.
            unsafe { (self.shared.heap.ptr(off) as *mut u64).write_volatile(0) };
        }
        *self.shared.mail.reply.lock().unwrap() = None;
        let mut head = wire::words(&[r.to_bits(), seq, buffer, cap]);
        head.extend_from_slice(&request);
        let sent = self.w.send_am(r.home(), wire::FETCH, 0, &head);
        let waited = sent.and_then(|_| self.await_object(seq, r));
        let receiving = shared.arrays.as_ref().map(|a| a.receive_lock());
        let kept = shared.pending.lock().unwrap().remove(&r).unwrap_or_default();
        let by_message = waited?;
        self.take_object(r, by_message, &kept)?;
        drop(receiving);
        Ok(())
    }

    /// Waits for the object reply `seq`: by message (returned) or in the receive buffer.
    fn await_object(&self, seq: u64, r: GlobalRef) -> Result<Option<Vec<u8>>> {
        let mut by_message: Option<Vec<u8>> = None;
        let flag = self.rdma.map(|(off, _)| self.shared.heap.ptr(off) as *const AtomicU64);
        let wait = if self.rdma.is_some() { Dsm::wait_until } else { Dsm::wait_message };
        wait(self, "an object from its home", r.home(), || {
            // SAFETY: the receive buffer's first word, aligned.
            if flag.is_some_and(|f| unsafe { &*f }.load(Ordering::Acquire) == seq) {
                return true;
            }
            let mut reply = self.shared.mail.reply.lock().unwrap();
            if reply.as_ref().is_some_and(|(s, _)| *s == seq) {
                by_message = reply.take().map(|(_, b)| b);
                return true;
            }
            false
        })?;
        Ok(by_message)
    }

    /// The reply's bytes into this rank's copy (made on first touch), then `kept` diff ranges
    /// on top (update-diff); the copy is Valid after.
    fn take_object(&self, r: GlobalRef, by_message: Option<Vec<u8>>, kept: &[(usize, Vec<u8>)]) -> Result<()> {
        let body: &[u8] = match &by_message {
            Some(b) => {
                bump(&self.counts.fetches_message, 1);
                b
            }
            None => {
                bump(&self.counts.fetches_rdma, 1);
                let (off, cap) = self.rdma.unwrap();
                // SAFETY: the home put the body there before the sequence word we saw.
                unsafe { self.shared.heap.bytes(off + wire::RDMA_FLAG, cap - wire::RDMA_FLAG) }
            }
        };
        let data = object_bytes(wire::body(body).map_err(|why| Error::InvalidArgument(format!("dsm: {why}")))?)?;
        bump(&self.counts.fetched_bytes, data.len() as u64);
        let update = !self.protocol.invalidates();
        let mut cache = self.cache.borrow_mut();
        let off = match cache.get(r) {
            Some(c) if c.len == data.len() => c.off,
            _ => {
                let bytes = if update { 2 * data.len().max(1).next_multiple_of(64) } else { data.len() };
                let off = self.shared.heap.alloc(bytes, "a cached copy")?;
                let mut copy = Copy::new(off, data.len(), r.tag(), State::Invalid);
                copy.twin = update.then(|| twin_at(off, data.len()));
                cache.insert(r, copy);
                off
            }
        };
        let c = cache.get_mut(r).unwrap();
        for at in [Some(off), c.twin.filter(|_| update)].into_iter().flatten() {
            // SAFETY: the copy's (and twin's) bytes in this heap; no view of it is alive (a miss).
            let dst = unsafe { self.shared.heap.bytes_mut(at, data.len()) };
            dst.copy_from_slice(data);
            let len = dst.len();
            for (o, bytes) in kept.iter().filter(|(o, b)| o + b.len() <= len) {
                dst[*o..*o + bytes.len()].copy_from_slice(bytes);
            }
        }
        c.state = State::Valid;
        if update {
            let place = crate::home::Place { off, len: data.len(), twin: c.twin, meta: None };
            self.shared.copies.lock().unwrap().insert(r, place);
        } else {
            cache.valid.push(r);
        }
        Ok(())
    }

    /// Waits for `done` on memory others write by RMA (a reply buffer, an acknowledgement
    /// word, a lock word): polls, serving requests, yielding the CPU after a while (ranks may
    /// outnumber CPUs); fails if `peer` dies or the job's timeout passes.
    pub(crate) fn wait_until(&self, what: &str, peer: Rank, done: impl FnMut() -> bool) -> Result<()> {
        self.wait_for(what, peer, done, false)
    }

    /// Waits for `done` on something a handler delivers (a reply, a grant, an acknowledgement):
    /// with a progress thread the rank sleeps until a handler ran (Jackal's requesting thread
    /// on its condition variable); in app progress mode it polls, as nobody else runs handlers.
    pub(crate) fn wait_message(&self, what: &str, peer: Rank, done: impl FnMut() -> bool) -> Result<()> {
        let sleeps = self.w.progress_mode() != activerma::ProgressMode::App;
        self.wait_for(what, peer, done, sleeps)
    }

    fn wait_for(&self, what: &str, peer: Rank, mut done: impl FnMut() -> bool, sleeps: bool) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let seen = self.shared.mail.events();
            if done() {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if sleeps && self.shared.locks_wanted.load(Ordering::Acquire) {
                // A lock this rank keeps is wanted elsewhere: progress steps (whose hook hands
                // it on once this rank stopped taking it) rather than a sleep that a sleeping
                // progress thread might never end.
                self.w.progress();
                std::thread::yield_now();
            } else if sleeps {
                self.shared.mail.sleep(seen, std::time::Duration::from_millis(5));
            } else {
                self.w.progress();
                if spins > 256 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            if sleeps || spins.is_multiple_of(1024) {
                self.w.check_alive(peer)?;
                if self.timeout_s > 0.0 && start.elapsed().as_secs_f64() > self.timeout_s {
                    return Err(Error::Timeout {
                        what: format!("dsm: rank {} waited for {what} from rank {peer}", self.me),
                        secs: self.timeout_s,
                    });
                }
            }
        }
    }
}

/// An object reply's payload is `[len u64][bytes]` (an RDMA reply is followed by whatever the
/// receive buffer held before).
fn object_bytes(data: &[u8]) -> Result<&[u8]> {
    let len = word(data, 0).ok_or_else(|| Error::InvalidArgument("dsm: a short RDMA reply".into()))? as usize;
    data.get(8..8 + len).ok_or_else(|| Error::InvalidArgument("dsm: an object reply shorter than the length it gives".into()))
}
