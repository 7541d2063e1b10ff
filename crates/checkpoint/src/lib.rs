//! Incremental checkpointing with Active Access (Besta & Hoefler, ICS'15, section 4.3).
//!
//! A rank protects segments (`protect`); `checkpoint()` (collective) writes what changed in
//! them since the last checkpoint to a store on disk (`store`), and `restore()` (collective)
//! loads the newest complete checkpoint back — on a restarted job (`activerma run
//! --restart-from DIR` sets ACTIVERMA_RESTART_FROM) or on demand. Three schemes
//! (`Scheme`), side by side in `activerma bench checkpoint`:
//! - `Incremental`: remote writes tracked by metadata-only access logging (W=1, WL=1, WLD=0:
//!   `remote`), local writes by the MMU (`mmu`); only the pages either found are written,
//!   plus a full base every `full_every` checkpoints.
//! - `Full`: every protected page, every time.
//! - `TrapFirstWrite`: the dirty-bit scheme — the target write-protects its pages and its
//!   handler mediates the first remote write to each (see `remote`); an origin asks it to
//!   lift a page's trap before an atomic there (`lift`).
//!
//! The design note is docs/design/checkpoint.md.

mod dirty;
mod lift;
pub mod mmu;
mod remote;
pub mod store;

use activerma::{settings, Error, Notify, RemotePtr, Result, Segment, World};
use dirty::{DirtyPages, Region};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use store::{Marker, Store};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Full,
    Incremental,
    TrapFirstWrite,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Full => "full",
            Scheme::Incremental => "incremental",
            Scheme::TrapFirstWrite => "trap-first-write",
        }
    }

    pub fn parse(text: &str) -> Result<Scheme> {
        [Scheme::Full, Scheme::Incremental, Scheme::TrapFirstWrite]
            .into_iter()
            .find(|s| s.name() == text)
            .ok_or_else(|| Error::InvalidArgument(format!("checkpoint scheme {text:?}: expected full, incremental or trap-first-write")))
    }
}

/// How a checkpointer works.
#[derive(Clone, Debug)]
pub struct Options {
    pub scheme: Scheme,
    /// Every this many checkpoints one is a full base (the first always is); 0 = only the first.
    pub full_every: u64,
    /// The Active Access domain of the tracking log (the application must not use it).
    pub domain: u16,
    /// Bytes of the tracking log (a power of two); a full log makes origins wait, never drops.
    pub log_bytes: usize,
    /// Failure injection: this rank kills itself after writing this many pages (counted over
    /// all its checkpoints), before the checkpoint is complete. `None`: the setting
    /// ACTIVERMA_CKPT_KILL_PAGES (0 = off).
    pub kill_after_pages: Option<u64>,
    /// Failure injection: rank 0 kills itself right after writing the marker of this
    /// checkpoint (0 = off): the checkpoint is complete on disk, but the others' `checkpoint()`
    /// fails.
    pub kill_after_marker: u64,
}

impl Options {
    pub fn new(scheme: Scheme) -> Options {
        Options {
            scheme,
            full_every: 0,
            domain: (activerma::MAX_DOMAINS - 1) as u16,
            log_bytes: 1 << 20,
            kill_after_pages: None,
            kill_after_marker: 0,
        }
    }
}

/// What one checkpoint did, on this rank.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub epoch: u64,
    pub full: bool,
    /// Pages found changed by others' puts (the access log) and by this rank's stores (the MMU).
    pub remote_pages: u64,
    pub local_pages: u64,
    /// Pages written, and the bytes of the file that holds them (record headers included).
    pub pages_written: u64,
    pub bytes_written: u64,
    pub seconds: f64,
    /// Of `seconds`, the commit once this rank's file is durable: a barrier, rank 0's marker,
    /// a barrier (the fixed cost every checkpoint pays, whatever it wrote).
    pub commit_seconds: f64,
}

/// Where local writes are seen: the MMU, or (where the kernel refuses userfaultfd) by comparing
/// each page's checksum with the last checkpoint's.
enum LocalWrites {
    Mmu(mmu::WriteTracker),
    Checksums(Vec<Vec<u32>>),
}

pub struct Checkpointer {
    world: World,
    store: Store,
    opts: Options,
    page: usize,
    dirty: Arc<DirtyPages>,
    local: Option<LocalWrites>,
    /// The last complete checkpoint and its chain's base (0: none yet).
    epoch: u64,
    base: u64,
    kill_after_pages: u64,
    pages_so_far: u64,
    log_created: bool,
    /// The tracked pages carry the tracking marks (`arm_marks` ran).
    armed: bool,
    /// Runs `(addr, len)` of protected pages carrying the checkpoint's own marks (the others
    /// are the application's W=0 pages: `remote::tracked_runs`).
    tracked: Vec<(usize, usize)>,
    /// A checkpoint failed here, or this replacement restored alone: whether the last one
    /// became complete is for the markers to say once every rank is in the next one (`settle`).
    unsettled: bool,
    /// Trap scheme, once tracking: our pages, which origins may ask us to lift (`lift`).
    trapped: Option<Arc<lift::Trapped>>,
    /// Trap scheme: the pages of others we had lifted since our last checkpoint.
    lifted: lift::Lifted,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl Checkpointer {
    /// A checkpointer writing to `dir` (created if missing). Collective only in that every rank
    /// makes one before its first `checkpoint`.
    pub fn new(world: &World, dir: &Path, opts: Options) -> Result<Checkpointer> {
        if !opts.log_bytes.is_power_of_two() {
            return Err(Error::InvalidArgument(format!("checkpoint log of {} bytes: a power of two", opts.log_bytes)));
        }
        Ok(Checkpointer {
            world: world.clone(),
            store: Store::open(dir, world.rank())?,
            page: page_size(),
            dirty: Arc::new(DirtyPages::new(page_size())),
            local: None,
            epoch: 0,
            base: 0,
            kill_after_pages: match opts.kill_after_pages {
                Some(n) => n,
                None => world.config().get_u64(settings::CKPT_KILL_PAGES)?,
            },
            pages_so_far: 0,
            log_created: false,
            armed: false,
            tracked: Vec::new(),
            unsettled: false,
            trapped: None,
            lifted: lift::Lifted::default(),
            opts,
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.opts.scheme
    }

    /// How local writes are tracked here: "userfaultfd" or "checksums" (the fallback).
    pub fn local_tracking(&self) -> &'static str {
        match self.local {
            Some(LocalWrites::Checksums(_)) => "checksums",
            _ => "userfaultfd",
        }
    }

    /// The last complete checkpoint this rank took part in or restored (0: none).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Protects this rank's copy of `seg`: its contents go into every checkpoint. Call on every
    /// rank, with the same segments in the same order, before the first checkpoint.
    pub fn protect(&mut self, seg: &Segment) -> Result<()> {
        if self.epoch != 0 {
            return Err(Error::InvalidArgument("protect: segments are added before the first checkpoint".into()));
        }
        let len = seg.len().div_ceil(self.page) * self.page;
        let region = Region { addr: seg.as_ptr() as usize, heap_offset: seg.heap_offset(), len };
        if !region.addr.is_multiple_of(self.page) {
            return Err(Error::InvalidArgument("protect: the segment does not start at a page".into()));
        }
        let Some(dirty) = Arc::get_mut(&mut self.dirty) else {
            return Err(Error::InvalidArgument("protect: the tracking log's handler holds the page set".into()));
        };
        dirty.add(region);
        Ok(())
    }

    /// Starts tracking (once): the log and its handler, the page marks, the MMU. `arm_now`:
    /// mark the pages at once; else the checkpoint marks them at its end (the trap scheme's
    /// first checkpoint, see `checkpoint_or_fail`).
    fn start_tracking(&mut self, arm_now: bool) -> Result<()> {
        let regions: Vec<Region> = self.dirty.regions().copied().collect();
        if self.opts.scheme == Scheme::Full {
            return Ok(());
        }
        if !self.log_created {
            let trap = self.opts.scheme == Scheme::TrapFirstWrite;
            let handler = remote::handler(self.dirty.clone(), trap.then(|| self.world.clone()), self.page);
            self.world.create_log(self.opts.domain, self.opts.log_bytes, Notify::Poll, handler)?;
            self.log_created = true;
            if trap {
                let t = Arc::new(lift::Trapped {
                    world: self.world.clone(),
                    dirty: self.dirty.clone(),
                    page: self.page,
                    domain: self.opts.domain,
                });
                lift::start(t.clone())?;
                self.trapped = Some(t);
            }
            self.local = Some(match mmu::WriteTracker::new() {
                Ok(mut t) => {
                    regions.iter().try_for_each(|r| t.track(r.addr, r.len))?;
                    LocalWrites::Mmu(t)
                }
                Err(_) => LocalWrites::Checksums(regions.iter().map(|r| self.checksums(r)).collect()),
            });
        }
        self.tracked = self.tracked_runs(&regions, true)?;
        if arm_now {
            self.arm_marks()?;
        }
        Ok(())
    }

    /// The protected pages the checkpoint marks itself, from their marks now (see
    /// `remote::tracked_runs`; `arming`: unmarked pages are taken). Under the trap scheme an
    /// unmarked page counts as one its handler unprotected if the handler marked it dirty.
    fn tracked_runs(&self, regions: &[Region], arming: bool) -> Result<Vec<(usize, usize)>> {
        let trap = self.opts.scheme == Scheme::TrapFirstWrite;
        let dirty = &self.dirty;
        remote::tracked_runs(&self.world, regions, self.page, trap, self.opts.domain, arming, &|a| dirty.is_marked(a))
    }

    /// Puts the tracking marks on the pages the checkpoint tracks (again, after a trap scheme
    /// lifted some).
    fn arm_marks(&mut self) -> Result<()> {
        // Whatever we had lifted elsewhere is trapped again by the same collective.
        self.lifted.clear();
        let marks = remote::tracking_marks(self.opts.scheme == Scheme::TrapFirstWrite);
        for &(addr, len) in &self.tracked {
            self.world.assoc_pages(addr as *const u8, len, marks, Some(self.opts.domain))?;
        }
        self.armed = true;
        Ok(())
    }

    fn checksums(&self, r: &Region) -> Vec<u32> {
        (0..r.pages(self.page)).map(|p| crc32fast::hash(r.page_bytes(p, self.page))).collect()
    }

    /// The trap scheme's contract with an origin: after a put to a protected page of `target`,
    /// wait until the target has mediated it (a no-op for the other schemes, and cheap once
    /// the page is unprotected: nothing was logged).
    pub fn after_remote_write(&self, target: activerma::Rank) -> Result<()> {
        if self.opts.scheme == Scheme::TrapFirstWrite {
            self.world.active_flush(target)?;
        }
        Ok(())
    }

    /// The trap scheme's contract for atomics: before an atomic on a protected page of
    /// `at.rank` (whose W=0 pages refuse atomics: a protection error), ask that rank to lift
    /// the page's trap, as its handler does for the first put, and wait until it has (once
    /// per page and checkpoint interval: later calls return at once). A no-op for the other
    /// schemes, before the first checkpoint, and for memory the checkpoint does not trap.
    pub fn before_remote_atomic(&self, at: RemotePtr) -> Result<()> {
        if self.trapped.is_none() {
            return Ok(()); // not the trap scheme, or not tracking yet
        }
        self.lifted.lift(&self.world, self.page, at, 8)
    }

    /// Takes a checkpoint (collective): every rank's puts complete, every rank finds the pages
    /// that changed and writes them; returns when the checkpoint is complete for the whole job.
    ///
    /// If a rank dies during it (`--respawn`), the survivors' call fails with
    /// `Error::RankFailed` and nothing it found is forgotten: once the replacement has restored
    /// and rejoined (`World::wait_for_rank`), calling `checkpoint()` again on every rank writes
    /// everything changed since the last complete checkpoint. That may be the failed one —
    /// when the death came after rank 0 had marked it complete — and then the call takes the
    /// next epoch (`Stats::epoch` says which).
    pub fn checkpoint(&mut self) -> Result<Stats> {
        let outcome = self.checkpoint_or_fail();
        if outcome.is_err() {
            self.unsettled = true;
        }
        outcome
    }

    /// After a failed checkpoint, or in a replacement that restored alone (while rank 0 may
    /// still have been writing a marker): the last complete checkpoint is the newest the
    /// markers hold, read once every rank is past the failed one (every rank reached the
    /// barrier before this, so rank 0's marker is written or never will be). Every rank reads
    /// the same file, so every rank adopts the same epoch. A marker newer than ours can only
    /// be the failed checkpoint's: every rank wrote its file for it before rank 0 marked it, and
    /// what the failed call had taken to write was put back, so the next one (incremental
    /// after it) still writes whatever changed since.
    fn settle(&mut self) -> Result<()> {
        let ranks = self.world.size() as u64;
        if let Some(m) = self.store.markers()?.into_iter().filter(|m| m.ranks == ranks).max_by_key(|m| m.epoch) {
            if m.epoch > self.epoch {
                self.epoch = m.epoch;
                self.base = m.base;
            }
        }
        self.unsettled = false;
        Ok(())
    }

    fn checkpoint_or_fail(&mut self) -> Result<Stats> {
        let started = Instant::now();
        if !self.log_created {
            // The trap scheme traps its pages at the end of its first checkpoint, when every
            // rank is in it: an atomic of the interval before it, still on its way, would meet
            // a trap its origin could not know of (`before_remote_atomic` is a no-op then).
            // That checkpoint is a full one: nothing needs tracking before it.
            self.start_tracking(self.opts.scheme != Scheme::TrapFirstWrite)?;
        }
        let w = &self.world.clone();
        // Every put into protected memory has been made, and logged, once all ranks are here.
        w.flush_all()?;
        w.barrier()?;
        if self.unsettled {
            self.settle()?;
        }
        w.drain_logs()?;
        let regions: Vec<Region> = self.dirty.regions().copied().collect();
        if self.opts.scheme != Scheme::Full && self.armed {
            // Every tracked page still tracked (or left to the application's W=0 handlers).
            self.tracked = self.tracked_runs(&regions, false)?;
        }
        let epoch = self.epoch + 1;
        let full =
            self.opts.scheme == Scheme::Full || self.base == 0 || (self.opts.full_every > 0 && epoch - self.base >= self.opts.full_every);
        let mut stats = Stats { epoch, full, ..Default::default() };
        // Pages per region to write: remote ones from the log, local ones from the MMU (one
        // scan for every region: it protects what it reports again).
        let mut local_runs = Vec::new();
        if let Some(LocalWrites::Mmu(t)) = &self.local {
            t.take_written(&mut |a, l| local_runs.push((a, l)))?;
        }
        let page = self.page;
        let mut pages: Vec<Vec<usize>> = Vec::with_capacity(regions.len());
        for (i, r) in regions.iter().enumerate() {
            let mut set = self.dirty.take(i);
            stats.remote_pages += set.len() as u64;
            let local_from = set.len();
            match &mut self.local {
                Some(LocalWrites::Mmu(_)) => {
                    for &(a, l) in local_runs.iter().filter(|&&(a, _)| a >= r.addr && a < r.addr + r.len) {
                        set.extend((a - r.addr) / page..((a + l - r.addr) / page).min(r.pages(page)));
                    }
                }
                Some(LocalWrites::Checksums(sums)) => {
                    for (p, sum) in sums[i].iter_mut().enumerate() {
                        let now = crc32fast::hash(r.page_bytes(p, page));
                        if now != *sum {
                            *sum = now;
                            set.push(p);
                        }
                    }
                }
                None => {}
            }
            stats.local_pages += (set.len() - local_from) as u64;
            set.sort_unstable();
            set.dedup();
            pages.push(set);
        }
        let committed = self.write_and_commit(epoch, full, &regions, &pages, &mut stats);
        if committed.is_err() {
            // Not complete: what was found changed still is (the tracking found it once).
            for (i, set) in pages.iter().enumerate() {
                self.dirty.put_back(i, set);
            }
        }
        let base = committed?;
        self.epoch = epoch;
        self.base = base;
        if full {
            self.store.prune_before(base)?;
        }
        if self.opts.scheme == Scheme::TrapFirstWrite {
            self.arm_marks()?;
            w.barrier()?; // nobody writes before every page is trapped again
        }
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// Writes this rank's pages of checkpoint `epoch` (every page of `regions` if `full`,
    /// else `changed`), then commits it with the others: a barrier once every file is
    /// durable, rank 0's marker, a barrier. Returns the epoch of the chain's base.
    fn write_and_commit(&mut self, epoch: u64, full: bool, regions: &[Region], changed: &[Vec<usize>], stats: &mut Stats) -> Result<u64> {
        let w = &self.world;
        let page = self.page;
        let all: Vec<Vec<usize>>;
        let pages = if full {
            all = regions.iter().map(|r| (0..r.pages(page)).collect()).collect();
            &all
        } else {
            changed
        };
        let kill_after = self.kill_after_pages;
        let mut written = 0u64;
        let before = self.pages_so_far;
        stats.bytes_written = self.store.write_pages(epoch, full, &mut |f| {
            for (r, list) in regions.iter().zip(pages.iter()) {
                for &p in list {
                    f.record((r.heap_offset + p * page) as u64, r.page_bytes(p, page))?;
                    written += 1;
                    if kill_after > 0 && before + written == kill_after {
                        // Failure injection: die in the middle of the checkpoint, as a crash would.
                        // SAFETY: signalling ourselves.
                        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                    }
                }
            }
            Ok(())
        })?;
        stats.pages_written = written;
        self.pages_so_far += written;
        let base = if full { epoch } else { self.base };
        // Every rank's file is durable before the marker says the checkpoint is complete.
        let commit = Instant::now();
        w.barrier()?;
        if w.rank() == 0 {
            self.store.write_marker(Marker { epoch, ranks: w.size() as u64, base })?;
            if self.opts.kill_after_marker == epoch && w.incarnation() == 0 {
                // Failure injection: complete on disk, but the others never hear it here.
                // SAFETY: signalling ourselves.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
        }
        w.barrier()?;
        stats.commit_seconds = commit.elapsed().as_secs_f64();
        Ok(base)
    }

    /// The store a restarted job restores from: ACTIVERMA_RESTART_FROM (`activerma run
    /// --restart-from DIR`), if set.
    pub fn restart_dir(&self) -> Option<PathBuf> {
        self.world.config().get_path(settings::RESTART_FROM)
    }

    /// Loads the newest complete checkpoint of ACTIVERMA_RESTART_FROM into the protected
    /// segments, if that is set (collective); `None` when it is not (a fresh start). In a
    /// replacement rank (`activerma run --respawn`, `World::is_recovering`) it loads, alone, the
    /// newest checkpoint complete in this checkpointer's own store — the one the survivors
    /// took last — or returns `None` if the job has none yet.
    pub fn restore(&mut self) -> Result<Option<u64>> {
        if self.world.is_recovering() {
            if self.store.markers()?.into_iter().all(|m| m.ranks != self.world.size() as u64) {
                return Ok(None);
            }
            let own = self.store.dir().to_path_buf();
            return self.restore_from(&own).map(Some);
        }
        match self.restart_dir() {
            Some(dir) => self.restore_from(&dir).map(Some),
            None => Ok(None),
        }
    }

    /// Loads the newest checkpoint of `dir` that is complete for this job's ranks (collective;
    /// every rank must find the same one — a replacement rank loads alone). Returns its epoch;
    /// later checkpoints follow it.
    pub fn restore_from(&mut self, dir: &Path) -> Result<u64> {
        let w = self.world.clone();
        let alone = w.is_recovering();
        let from = Store::open(dir, w.rank())?;
        let marker = from.markers()?.into_iter().rev().find(|m| m.ranks == w.size() as u64);
        let mine = marker.map_or(0, |m| m.epoch);
        let all = if alone { vec![mine.to_le_bytes().to_vec()] } else { w.allgather(&mine.to_le_bytes())? };
        if let Some((r, _)) = all.iter().enumerate().find(|(_, b)| b.as_slice() != mine.to_le_bytes()) {
            return Err(Error::CollectiveMismatch(format!(
                "restore: rank {} finds checkpoint {mine} complete in {} but rank {r} finds {}",
                w.rank(),
                dir.display(),
                u64::from_le_bytes(all[r][..8].try_into().unwrap())
            )));
        }
        let Some(m) = marker else {
            return Err(Error::InvalidArgument(format!("restore: {} holds no complete checkpoint of {} ranks", dir.display(), w.size())));
        };
        let regions: Vec<Region> = self.dirty.regions().copied().collect();
        for epoch in m.base..=m.epoch {
            from.read_pages(epoch, &mut |offset, bytes| {
                let off = offset as usize;
                let r = regions
                    .iter()
                    .find(|r| off >= r.heap_offset && off + bytes.len() <= r.heap_offset + r.len)
                    .ok_or_else(|| Error::InvalidArgument(format!(
                        "restore: checkpoint {epoch} holds heap offset {off:#x}, outside the segments this rank protects (protect the same segments, in the same order, as the job that wrote it)"
                    )))?;
                // SAFETY: inside a protected segment (checked just above).
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (r.addr + off - r.heap_offset) as *mut u8, bytes.len()) };
                Ok(())
            })?;
        }
        // What was loaded is the checkpoint's state: nothing is dirty relative to it.
        self.start_tracking(true)?;
        let fresh: Vec<Vec<u32>> = regions.iter().map(|r| self.checksums(r)).collect();
        match &mut self.local {
            Some(LocalWrites::Mmu(t)) => t.take_written(&mut |_, _| {})?,
            Some(LocalWrites::Checksums(sums)) => *sums = fresh,
            None => {}
        }
        self.dirty.clear();
        self.epoch = m.epoch;
        self.base = m.base;
        // Alone, this may have read the markers while rank 0 was writing the next one.
        self.unsettled = alone;
        let same = |a: &Path, b: &Path| std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b);
        if !same(dir, self.store.dir()) && !alone {
            // Checkpoints go on into our own store: its first one is a full base, numbered
            // after anything complete there already (never rewriting a file under a marker).
            self.base = 0;
            let own = self.store.markers()?.last().map_or(0, |m| m.epoch);
            let all = w.allgather(&own.to_le_bytes())?;
            self.epoch = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap())).fold(self.epoch, u64::max);
        }
        if !alone {
            w.barrier()?;
        }
        Ok(m.epoch)
    }
}

impl Drop for Checkpointer {
    /// Stops tracking: the MMU's protection goes with the userfaultfd (closing it unregisters
    /// its ranges), and the pages lose the tracking marks, so that the segments work as plain
    /// memory again (or under another checkpointer).
    fn drop(&mut self) {
        if let Some(t) = &self.trapped {
            lift::stop(t);
        }
        if self.opts.scheme != Scheme::Full && !self.world.is_finalized() {
            // Only the pages that carry our marks: the application's own stay as it set them.
            let regions: Vec<Region> = self.dirty.regions().copied().collect();
            let runs = self.tracked_runs(&regions, false).unwrap_or_else(|_| self.tracked.clone());
            for (addr, len) in runs {
                let _ = self.world.assoc_pages(addr as *const u8, len, remote::untracked_marks(), None);
            }
        }
    }
}
