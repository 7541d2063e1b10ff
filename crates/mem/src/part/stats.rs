//! PART counters. Fault handling is a slow path, so these use real atomic adds (unlike the
//! put-path counters in core): the tests check them exactly.

use std::sync::atomic::{AtomicU64, Ordering};

activerma_core::counter_set! {
    /// Counters of one rank's PART activity (origin and target side).
    pub struct PartStats {
        transfers: "transfers started by this origin",
        blocks_sent: "blocks sent for the first time",
        faults_dst: "faults at the destination (put: target memory, NACKed; get: the origin's buffer, resolved locally)",
        faults_src: "faults at the source (put: the origin's buffer, resolved locally; get: target memory, NACKed)",
        nacks_sent: "NACKs sent by this origin (one per remote fault met)",
        nacks_received: "NACKs resolved by this target",
        errs_sent: "ERRs (explicit retransmission requests) sent by this target",
        errs_received: "ERRs received by this origin",
        retransmissions: "blocks resent after a NACK",
        timeouts: "retransmissions triggered by the time-out (no ERR)",
        pages_paged_in: "pages installed to resolve faults (target handler and origin's own buffer)",
        pages_pretouched: "pages of small transfers paged in before sending",
        regions_registered: "exposed ranges registered with userfaultfd by this target (the whole pages inside each exposure)",
        regions_unmanaged: "exposures left to the kernel's own paging (no whole page inside, or userfaultfd refused the mapping: e.g. file-backed)",
        pages_injected: "pages this target evicted on an origin's fault-injection request (ACTIVERMA_PART_FAULT_PROB)",
    }
}

impl PartStats {
    #[inline]
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Pages installed by the SIGBUS handler in this process (the owner's CPU touched a missing
/// page of a PART region). Process-wide: the signal handler has no other place to count.
pub fn sigbus_resolved() -> u64 {
    super::registry::sigbus_resolved()
}
