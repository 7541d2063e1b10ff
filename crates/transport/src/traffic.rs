//! What left the node: per target rank, the one-sided operations and active-message fragments
//! that went through the conduit's network path (MPI between nodes; the smp conduit's emulated
//! engine between emulated hosts). Same-node traffic — CPU copies into mapped memory,
//! cross-memory attach, shared-memory message queues — never counts here, which is what a
//! test of a node-aware job checks (`World::traffic`).

use activerma_core::counters::bump;
use activerma_core::Rank;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct Traffic {
    rma_ops: Vec<AtomicU64>,
    rma_bytes: Vec<AtomicU64>,
    am_fragments: Vec<AtomicU64>,
    am_bytes: Vec<AtomicU64>,
}

/// One target's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficTo {
    /// One-sided operations (puts, gets, atomics, lists) through the network engine.
    pub rma_ops: u64,
    pub rma_bytes: u64,
    /// Active-message fragments through the network's messages.
    pub am_fragments: u64,
    pub am_bytes: u64,
}

impl Traffic {
    pub fn new(ranks: usize) -> Traffic {
        let zeros = || (0..ranks).map(|_| AtomicU64::new(0)).collect();
        Traffic { rma_ops: zeros(), rma_bytes: zeros(), am_fragments: zeros(), am_bytes: zeros() }
    }

    #[inline]
    pub fn rma(&self, to: Rank, bytes: usize) {
        bump(&self.rma_ops[to], 1);
        bump(&self.rma_bytes[to], bytes as u64);
    }

    #[inline]
    pub fn am(&self, to: Rank, bytes: usize) {
        bump(&self.am_fragments[to], 1);
        bump(&self.am_bytes[to], bytes as u64);
    }

    pub fn to(&self, rank: Rank) -> TrafficTo {
        let get = |v: &[AtomicU64]| v[rank].load(Ordering::Relaxed);
        TrafficTo {
            rma_ops: get(&self.rma_ops),
            rma_bytes: get(&self.rma_bytes),
            am_fragments: get(&self.am_fragments),
            am_bytes: get(&self.am_bytes),
        }
    }
}
