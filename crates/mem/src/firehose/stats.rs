//! Firehose counters, for the runtime to print. Plain relaxed atomics: statistics only, never
//! used for synchronisation. Most are bumped under the table lock anyway.

use std::sync::atomic::{AtomicU64, Ordering};

activerma_core::counter_set! {
    /// Counters of one Firehose instance.
    pub struct FirehoseStats {
        pins: "pin calls made to the pinner (one per contiguous run of buckets)",
        unpins: "unpin calls made to the pinner",
        bytes_pinned: "bytes pinned, cumulative",
        bytes_unpinned: "bytes unpinned, cumulative (pinned now = bytes_pinned - bytes_unpinned)",
        local_hits: "local pin requests satisfied without pinning anything",
        local_misses: "local pin requests that had to pin",
        local_waits: "local pin requests that waited for budget (M + MAXVICTIM bound)",
        victim_reuses: "buckets taken back from the victim FIFO by a local pin or a move served (a re-pin avoided)",
        remote_hits: "remote pin requests fully covered by committed firehoses (no message)",
        remote_pending_hits: "remote pin requests covered by firehoses whose move was in flight (no extra message)",
        remote_misses: "remote pin requests that sent a move",
        moves_sent: "move requests sent",
        moves_served: "move requests served for other ranks",
        firehoses_moved: "firehoses re-pointed by moves (buckets pinned remotely)",
        easy_path: "remote requests the estimate found satisfiable at once (no polling)",
        token_waits: "remote requests that found another request holding the deadlock-avoidance token and queued for it (once per request)",
        da_retries: "remote request attempts that could not complete and polled (deadlock-avoidance retries)",
        da_claims: "times a request took the deadlock-avoidance token of a rank",
        rollbacks: "remote requests that returned what they had gathered (lost to the token holder or hit an uncommitted firehose)",
        invalidated_buckets: "buckets dropped or marked stale by invalidate_local / invalidate_remote",
    }
}

impl FirehoseStats {
    #[inline]
    pub(crate) fn add(c: &AtomicU64, by: u64) {
        c.fetch_add(by, Ordering::Relaxed);
    }

    /// Bytes pinned by Firehose right now.
    pub fn pinned_bytes(&self) -> u64 {
        self.bytes_pinned.load(Ordering::Relaxed) - self.bytes_unpinned.load(Ordering::Relaxed)
    }
}
