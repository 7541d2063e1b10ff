//! Per-process operation counters, printed by the benchmarks. They are statistics, never used
//! for synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};

/// Declares a struct of named statistics counters (relaxed `AtomicU64`s) with `snapshot()`,
/// which lists (name, value) in declaration order. Used by every layer's counters.
#[macro_export]
macro_rules! counter_set {
    ($(#[$meta:meta])* $vis:vis struct $ty:ident { $($name:ident: $doc:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Default, Debug)]
        $vis struct $ty { $(#[doc = $doc] pub $name: std::sync::atomic::AtomicU64,)* }

        impl $ty {
            /// (name, value) pairs in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(std::sync::atomic::Ordering::Relaxed)),)*]
            }
        }
    };
}

crate::counter_set! {
    /// Operation counters of one process.
    pub struct Counters {
        put_direct: "puts copied straight into a shared segment",
        put_streamed: "of those, implicit puts copied with non-temporal stores (a window past ACTIVERMA_PUT_STREAM_AFTER)",
        put_cma: "puts into private memory by cross-memory attach",
        get_direct: "gets copied straight from a shared segment",
        get_cma: "gets from private memory by cross-memory attach",
        bytes_put: "bytes written by puts",
        bytes_got: "bytes read by gets",
        put_rma: "puts by the conduit's one-sided engine (segment on another host)",
        get_rma: "gets by the conduit's one-sided engine",
        put_am: "puts carried out by the target on request",
        get_am: "gets answered by the target on request",
        atomic_direct: "atomics executed on shared memory by the origin",
        atomic_rma: "atomics by the conduit's one-sided engine",
        atomic_am: "atomics executed by the target on request (private memory)",
        accumulate_rma: "accumulates added at the target by the conduit's one-sided engine (MPI_Accumulate)",
        am_sent: "active messages sent",
        am_received: "active messages handled",
        am_fragments: "active-message fragments sent",
        wakeups_sent: "futex wake-ups sent to sleeping targets",
        put_active: "puts to pages marked for Active Access (written and/or logged)",
        get_active: "gets from pages marked for Active Access (logged)",
        atomic_active: "atomics on pages marked to log puts' metadata (W, WL): run, and logged as a write of the word",
        log_entries_handled: "access-log entries run through their handler here",
        active_flushes: "active flushes",
        iotlb_hits: "modelled IOTLB hits (translation lookups of this rank)",
        iotlb_misses: "modelled IOTLB misses",
        noncontig_host_assisted: "strided/vector transfers moved as one list (ACTIVERMA_NONCONTIG=host-assisted)",
        noncontig_sg_calls: "scatter/gather kernel calls those made (process_vm_writev/readv of up to ACTIVERMA_SGE_MAX pieces)",
        noncontig_rma_lists: "of the host-assisted lists to another host's segments, those moved as one one-sided operation (MPI: an hindexed datatype)",
        noncontig_rma_lists_started: "of those, non-blocking strided gets left in flight on the one-sided engine (MPI_Rget), which moved them while the program went on",
        noncontig_sieved: "of the host-assisted gets, those of small pieces read as their whole bounding range, then scattered here (data sieving)",
        noncontig_registered_lists: "of the host-assisted lists into unregistered private memory, those whose bounding range the strategy registered at once (rendezvous, firehose) before one scatter/gather move",
        noncontig_per_piece: "strided/vector transfers moved one blocking put/get per piece (per-piece)",
        noncontig_packed: "strided/vector transfers packed into one active message the target unpacks (packed)",
        noncontig_target_assisted: "strided/vector transfers whose pieces the target moved between its memory and this rank's buffers, asked with one message (target-assisted)",
        noncontig_target_moves: "lists this rank, as a target, moved into or out of an origin's buffers (target-assisted)",
        copy_engine_jobs: "non-blocking strided transfers handed to this rank's copy engine (ACTIVERMA_COPY_ENGINE), which copied them while the program went on",
        copy_engine_taken_back: "of those, the ones the wait copied itself because the engine had not started them yet",
        noncontig_pieces: "pieces in all strided/vector transfers",
        transfer_zero_copy: "contiguous transfers of the protocol API (put_by/get_by, ARMCI) moved zero-copy by the origin's engine",
        transfer_zero_copy_bytes: "bytes those moved",
        transfer_buffered: "contiguous transfers moved through the target's CPU one chunk at a time (buffered)",
        transfer_buffered_bytes: "bytes those moved",
        transfer_pipelined: "contiguous transfers moved in chunks through the target's CPU (pipelined buffered)",
        transfer_pipelined_bytes: "bytes those moved",
        landed_put: "buffered/pipelined chunks put into a target's landing zone, then copied into place by its CPU",
        landed_get: "buffered/pipelined chunks a target copied into its landing zone, then got from there",
        transfer_dynamic: "contiguous transfers that registered memory for the call (the user buffer here, or the target's range by the registration strategy)",
        transfer_dynamic_bytes: "bytes those moved",
    }
}

/// Adds to a counter with a plain load and store, not a locked read-modify-write: counters sit
/// on the 8-byte put path, where a locked instruction would cost a third of the operation.
/// Two threads of one rank bumping the same counter at the same instant may lose one count.
#[inline]
pub fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}
