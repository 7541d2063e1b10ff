//! Active Access on the public API: mark pages, create access logs with handlers, active flush.
//! Puts and gets themselves are unchanged (the paper's Listing 1): whether one is active is
//! decided by the target's marks on the pages it touches.

use crate::World;
use activerma_access::{Access, Actions, LogHandler, Notify};
use activerma_core::{Rank, Result};
use activerma_mem::IotlbStats;
use std::sync::Arc;

impl World {
    pub(crate) fn access(&self) -> Result<&Arc<Access>> {
        Ok(&self.live_inner()?.access)
    }

    /// The paper's `assoc_page`, over a range: gives every page of `[addr, addr+len)` of this
    /// rank's segments or exposed memory the control bits `actions`, logging into `domain`'s
    /// access log (E=1) or, with `None`, into the default fault log (E=0). Callable at any time;
    /// an access in flight sees a page's old bits or its new ones. Returns the pages changed.
    /// On segments, with ranks on other hosts, every rank learns of the change before this
    /// returns (a message to each): it is a collective-cost call there, not a local one. On
    /// exposed memory under firehose, the origins on other hosts holding keys to it are told.
    pub fn assoc_pages(&self, addr: *const u8, len: usize, actions: Actions, domain: Option<u16>) -> Result<usize> {
        let i = self.live_inner()?;
        let a = addr as usize;
        let changed = i.access.assoc_pages(&i.table, a, len, actions, domain)?;
        if self.in_own_heap(a) && !i.proto.all_tables_visible() {
            // Origins on other hosts reach segments one-sidedly: tell them to route accesses
            // to this range through us while it is marked.
            let plain = actions == (Actions::W | Actions::R) && domain.is_none();
            i.proto.publish_marks(a - self.heap_base(self.rank()), len, !plain)?;
        } else if !self.in_own_heap(a) {
            // Exposed memory: origins on other hosts holding keys to it (firehose) give them
            // back and ask anew, so that they see the new bits.
            i.proto.pages_changed(a, len)?;
        }
        Ok(changed)
    }

    /// The marks of every page of `[addr, addr+len)` of this rank's own memory (a segment or
    /// exposed private memory), one per page: the actions `assoc_pages` last set and the
    /// domain of the log they go to (None: the default fault log). Unmarked pages read
    /// `(W | R, None)`.
    pub fn page_marks(&self, addr: *const u8, len: usize) -> Result<Vec<(Actions, Option<u16>)>> {
        let i = self.live_inner()?;
        activerma_access::page_marks(&i.table, addr as usize, len)
    }

    /// `assoc_pages` that never waits for another rank, so a log handler may call it
    /// (`assoc_pages` may not: with ranks on other hosts it waits for their acknowledgements,
    /// which a handler running inside a wait would never see). Origins on this host see the
    /// new bits at once. On other hosts: in segment memory, origins keep routing the accesses
    /// to a range that `assoc_pages` marked through this rank, which applies the new bits when
    /// they arrive (a range never marked so is reached one-sided there: mark it with
    /// `assoc_pages` first); in exposed memory, the keys origins hold to it are revoked
    /// without waiting for their answers, so each sees the new bits from the first access it
    /// starts after it has run the revocation.
    pub fn assoc_pages_here(&self, addr: *const u8, len: usize, actions: Actions, domain: Option<u16>) -> Result<usize> {
        let i = self.live_inner()?;
        let a = addr as usize;
        let changed = i.access.assoc_pages(&i.table, a, len, actions, domain)?;
        if !self.in_own_heap(a) {
            i.proto.pages_changed_posted(a, len)?;
        }
        Ok(changed)
    }

    /// Creates the access log of `domain` (`capacity` bytes, a power of two ≥ 256, split into a
    /// lane per origin rank: see `activerma_access::log_ring::lanes_for`) whose entries
    /// run through `handler`, notified as `notify` says (`Notify::from_settings()` for the
    /// ACTIVERMA_AA_NOTIFY default).
    pub fn create_log(&self, domain: u16, capacity: usize, notify: Notify, handler: LogHandler) -> Result<()> {
        let i = self.live_inner()?;
        i.access.create_log(domain, capacity, notify, handler)
    }

    /// Changes how the handler of `domain`'s log (None: the fault log) is notified from now on.
    pub fn set_log_notify(&self, domain: Option<u16>, notify: Notify) -> Result<()> {
        let i = self.live_inner()?;
        i.access.set_notify(self.rank(), domain, notify)
    }

    /// Sets the handler of the default fault log (pages marked with no domain).
    pub fn set_fault_handler(&self, notify: Notify, handler: LogHandler) -> Result<()> {
        self.access()?.set_fault_handler(notify, handler)
    }

    /// Returns once `rank` has run the handlers of every active access this rank made there.
    /// Independent of `flush`, which completes plain RMA.
    pub fn active_flush(&self, rank: Rank) -> Result<()> {
        self.live_inner()?.proto.active_flush(rank)
    }

    /// Runs the handler of `domain`'s log over every entry it holds now, whatever its
    /// notification (the only way a `Notify::Hold` log is drained); returns the entries handled.
    pub fn drain_log(&self, domain: u16) -> Result<usize> {
        let i = self.live_inner()?;
        i.access.drain_log(self.rank(), domain)
    }

    /// Runs the handlers of this rank's poll-mode logs now, until they hold no entry (as every
    /// progress step does, but without serving active messages); returns the entries handled.
    pub fn drain_logs(&self) -> Result<usize> {
        Ok(self.access()?.drain_polled())
    }

    /// Hits and misses of this rank's modelled IOTLB (ACTIVERMA_IOTLB_*), and its shape.
    pub fn iotlb(&self) -> (IotlbStats, String) {
        let t = &self.inner_ref().proto.iotlb;
        (t.stats(), t.config().describe())
    }

    /// Zeroes the IOTLB counters (cached translations stay: warm up, then measure).
    pub fn reset_iotlb_stats(&self) {
        self.inner_ref().proto.iotlb.reset_stats();
    }
}
