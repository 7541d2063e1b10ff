//! A target's table as an origin that may log into it sees it: the translation table (the
//! memory layer's `OriginTable`, reached through `Deref`) and the access-log arena at its end,
//! with a view of each log made on first use.

use crate::log_ring::LogRing;
use crate::log_table::{LogArena, MAX_LOGS};
use activerma_core::{Error, Result};
use activerma_mem::OriginTable;
use std::sync::OnceLock;

pub struct ActiveTable {
    table: OriginTable,
    logs: Option<LogArena>,
    /// Views of the target's logs, made on first use: a log is never destroyed (an origin may
    /// hold a view at any time), so a view of an active one stays valid, and appends need not
    /// find and check the log's header again each time.
    rings: Box<[OnceLock<LogRing>]>,
}

impl ActiveTable {
    /// The view of `table`'s logs (its owner formatted them before publishing the table).
    pub fn attach(table: OriginTable) -> Result<ActiveTable> {
        // SAFETY: the arena lies inside the table's window, formatted by its owner.
        let logs = table.log_arena().map(|(start, bytes)| unsafe { LogArena::attach(start, bytes, table.rank()) }).transpose()?;
        Ok(ActiveTable { table, logs, rings: (0..MAX_LOGS).map(|_| OnceLock::new()).collect() })
    }

    /// The ring of the target's log `slot`, or None while that slot holds no log.
    #[inline]
    pub fn log_ring(&self, slot: usize) -> Result<Option<LogRing>> {
        if let Some(r) = self.rings.get(slot).and_then(|c| c.get()) {
            return Ok(Some(*r));
        }
        let ring = self.logs()?.ring(slot);
        if let (Some(r), Some(cache)) = (ring, self.rings.get(slot)) {
            let _ = cache.set(r);
        }
        Ok(ring)
    }

    /// A respawned `origin` (of `origins` ranks) covers the holes its dead predecessor left in
    /// its lanes of every log of this target; returns how many.
    pub fn cover_holes_of(&self, origin: u32, origins: usize) -> usize {
        (0..MAX_LOGS).filter_map(|slot| self.log_ring(slot).ok().flatten()).map(|r| r.cover_holes_of(origin, origins)).sum()
    }

    /// The target's access-log table.
    pub fn logs(&self) -> Result<&LogArena> {
        self.logs.as_ref().ok_or_else(|| Error::Unsupported(format!("rank {} has no access-log arena", self.table.rank())))
    }
}

impl std::ops::Deref for ActiveTable {
    type Target = OriginTable;

    fn deref(&self) -> &OriginTable {
        &self.table
    }
}
