//! Registration counters of one rank: the target side (pins, unpins, bytes) and the origin side
//! (hits, misses, which slow path served a miss). Printed by benchmarks and by the `info`
//! command's legend. Statistics only, never used for synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};

activerma_core::counter_set! {
    /// Registration counters of one rank.
    pub struct RegistrationStats {
        pins: "pin calls (mlock of one run of pages) made by this rank as a target",
        unpins: "unpin calls (munlock of one run of pages)",
        bytes_pinned: "bytes pinned, cumulative",
        bytes_unpinned: "bytes unpinned, cumulative (pinned now = bytes_pinned - bytes_unpinned)",
        pinned_peak: "most bytes pinned at once",
        pin_failures: "pins refused (RLIMIT_MEMLOCK or ACTIVERMA_PIN_LIMIT)",
        invalidated_pages: "registered pages dropped because their memory was unexposed or freed",
        hits: "origin: zero-copy accesses to private memory whose pages were all registered",
        misses: "origin: accesses to private memory that found a page not registered (a slow path ran)",
        bounce_ops: "origin: misses served by copying through the target's buffers (bounce)",
        rendezvous_requests: "origin: rendezvous requests asking a target to register pages",
        rendezvous_releases: "origin: requests asking a target to unpin after an operation (rendezvous-unpin)",
        rendezvous_fallbacks: "origin: rendezvous misses that fell back to bounce (the target could not pin)",
        registers_served: "target: rendezvous register requests served",
        releases_served: "target: rendezvous release requests served",
    }
}

impl RegistrationStats {
    #[inline]
    pub fn add(c: &AtomicU64, by: u64) {
        c.fetch_add(by, Ordering::Relaxed);
    }

    /// Bytes pinned right now.
    pub fn pinned_now(&self) -> u64 {
        self.bytes_pinned.load(Ordering::Relaxed).saturating_sub(self.bytes_unpinned.load(Ordering::Relaxed))
    }
}
