//! A target's table as an origin that may log into it sees it: the translation table (the
//! memory layer's `OriginTable`, reached through `Deref`) and the target's access-log arena,
//! mapped when this origin first needs it, with a view of each log made on first use.

use crate::log_ring::LogRing;
use crate::log_table::{LogArena, MAX_LOGS};
use activerma_core::{Error, Result};
use activerma_mem::{LogArenaHome, OriginTable};
use activerma_transport::liveness::Liveness;
use activerma_transport::mapping::SharedFile;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an origin that found a target's process gone waits for the launcher to say so.
const DEATH_NOTICE: Duration = Duration::from_secs(10);

pub struct ActiveTable {
    table: OriginTable,
    /// In a respawn job: an arena that cannot be mapped because its owner died is that rank's
    /// failure (`RankFailed`), as any other access to it is.
    liveness: Option<Arc<Liveness>>,
    /// The rank this process appends as (None: the target's own view, which appends for
    /// every origin into logs it made resident itself).
    appender: Option<u32>,
    /// The view of the target's arena in use (null: none yet, or forgotten since).
    view: AtomicPtr<ArenaView>,
    /// Every view made, kept until the table goes: a thread may still read one that
    /// `forget_logs` replaced (a few per job: one per incarnation of the target). Boxed: `view`
    /// points into them, so they must not move when the vector grows.
    #[allow(clippy::vec_box)]
    views: Mutex<Vec<Box<ArenaView>>>,
}

/// One incarnation's arena as mapped here, and views of its logs made on first use: a log is
/// never destroyed (an origin may hold a view at any time), so a view of an active one stays
/// valid, and appends need not find and check the log's header again each time.
struct ArenaView {
    arena: LogArena,
    rings: Box<[OnceLock<LogRing>]>,
    _file: SharedFile,
}

impl ActiveTable {
    /// An origin's view of `table`, for appends as rank `appender` (None: the target's own
    /// view); the arena is mapped on first use.
    pub fn attach(table: OriginTable, appender: Option<u32>, liveness: Option<Arc<Liveness>>) -> ActiveTable {
        ActiveTable { table, appender, liveness, view: AtomicPtr::new(std::ptr::null_mut()), views: Mutex::new(Vec::new()) }
    }

    /// The ring of the target's log `slot`, or None while that slot holds no log.
    #[inline]
    pub fn log_ring(&self, slot: usize) -> Result<Option<LogRing>> {
        let view = self.view()?;
        if let Some(r) = view.rings.get(slot).and_then(|c| c.get()) {
            return Ok(Some(*r));
        }
        let ring = view.arena.ring(slot);
        if let (Some(r), Some(cache)) = (ring, view.rings.get(slot)) {
            if cache.set(r).is_ok() {
                self.make_lane_resident(&r);
            }
        }
        Ok(ring)
    }

    /// On this process's first use of a log: the target made the log resident, and our page
    /// tables for our lane are made now too, in one call, rather than by a fault per 4 KiB of
    /// entries as appends first reach each page (a held log of a whole exchange: its first
    /// round ran 1.3x slower). The target's own view appends into logs it populated itself.
    fn make_lane_resident(&self, ring: &LogRing) {
        if let Some(me) = self.appender {
            let (at, len) = ring.lane_data_of(me);
            // SAFETY: the lane lies in the arena, mapped writable here while the view lives.
            unsafe { activerma_core::page::populate_for_write(at, len) };
        }
    }

    /// A respawned `origin` covers the holes its dead predecessor left in its lanes of every
    /// log of this target (`LogRing::cover_holes_of`; `alive` says which origins can still
    /// finish an append); returns how many.
    pub fn cover_holes_of(&self, origin: u32, alive: &dyn Fn(u32) -> bool) -> Result<usize> {
        (0..MAX_LOGS).filter_map(|slot| self.log_ring(slot).ok().flatten()).map(|r| r.cover_holes_of(origin, alive)).sum()
    }

    /// The target's access-log table; an error if it has made none (it has no logs, and no
    /// page of it is marked to log).
    #[inline]
    pub fn logs(&self) -> Result<&LogArena> {
        Ok(&self.view()?.arena)
    }

    /// The target's access-log table, None if it has made none.
    pub fn logs_if_any(&self) -> Result<Option<&LogArena>> {
        if self.table.log_arena().is_none() && self.view.load(Ordering::Acquire).is_null() {
            return Ok(None);
        }
        self.logs().map(Some)
    }

    /// Drops the view of the target's arena (its process died: a replacement makes its own),
    /// so that the next use maps the one the table names then.
    pub fn forget_logs(&self) {
        self.view.store(std::ptr::null_mut(), Ordering::Release);
    }

    #[inline]
    fn view(&self) -> Result<&ArenaView> {
        let p = self.view.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: views live in `views` until the table is dropped.
            return Ok(unsafe { &*p });
        }
        self.map_view()
    }

    #[cold]
    fn map_view(&self) -> Result<&ArenaView> {
        let mut views = self.views.lock().unwrap();
        let p = self.view.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: as in `view`.
            return Ok(unsafe { &*p });
        }
        let rank = self.table.rank();
        let LogArenaHome { pid, fd, bytes } = self
            .table
            .log_arena()
            .ok_or_else(|| Error::InvalidArgument(format!("rank {rank} has no access logs (it created none and marked no page to log)")))?;
        let file = match SharedFile::open(pid, fd, bytes) {
            Ok(f) => f,
            Err(e) => return Err(self.owner_gone(pid).unwrap_or(e)),
        };
        // SAFETY: the file is mapped for as long as the view (which owns it) lives.
        let arena = unsafe { LogArena::attach(file.map.ptr, bytes, rank) }?;
        let mut view = Box::new(ArenaView { arena, rings: (0..MAX_LOGS).map(|_| OnceLock::new()).collect(), _file: file });
        let p: *mut ArenaView = &mut *view;
        views.push(view);
        self.view.store(p, Ordering::Release);
        // SAFETY: just stored in `views`.
        Ok(unsafe { &*p })
    }

    /// In a respawn job, when the arena's owner `pid` has exited: waits until the launcher
    /// marks the rank down and returns its `RankFailed` (None: not a death we can name).
    #[cold]
    fn owner_gone(&self, pid: u32) -> Option<activerma_core::Error> {
        let l = self.liveness.as_ref()?;
        let rank = self.table.rank();
        let until = Instant::now() + DEATH_NOTICE;
        while Instant::now() < until {
            if let Err(e) = l.check(rank) {
                return Some(e);
            }
            if std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|mut d| d.next().is_some()) {
                return None; // alive, and still refusing: the open's error stands
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }
}

impl std::ops::Deref for ActiveTable {
    type Target = OriginTable;

    fn deref(&self) -> &OriginTable {
        &self.table
    }
}
