//! Firehose parameters (the paper's M, MAXVICTIM, f) and the bucket arithmetic.
//!
//! Everything is counted in *buckets*: the unit one firehose covers and the unit of pinning.
//! A bucket of one page is the paper's page-based firehose; a bucket of several pages is the
//! region flavour (one firehose maps a contiguous, aligned run of pages, so a large transfer
//! needs fewer firehoses and fewer move messages, at the price of pinning coarser units).

use activerma_core::page::page_size;
use activerma_core::{Error, Rank, Result};
use std::time::Duration;

/// A byte range `[addr, addr + len)` of one rank's virtual memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub addr: usize,
    pub len: usize,
}

impl Region {
    pub fn new(addr: usize, len: usize) -> Region {
        Region { addr, len }
    }

    pub fn end(&self) -> usize {
        self.addr + self.len
    }
}

/// Parameters of one rank's Firehose instance. Every rank of a job must use the same
/// `bucket_bytes` (a move names buckets by address); the rest may differ per rank.
#[derive(Clone, Debug)]
pub struct Config {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the job.
    pub nranks: usize,
    /// Bytes per bucket: a power of two, a multiple of the page size.
    pub bucket_bytes: usize,
    /// M: buckets this rank keeps pinned at most on behalf of remote firehoses.
    pub max_remote_buckets: usize,
    /// MAXVICTIM: buckets this rank may pin for its own local operations plus the victim FIFO
    /// of unused pinned buckets (lazy deregistration). Pinned buckets <= M + MAXVICTIM.
    pub max_victim_buckets: usize,
    /// f: firehoses this rank may hold on each other rank. Every rank must satisfy
    /// f * (nranks - 1) <= M of its targets, or a target could be asked to pin more than M.
    pub firehoses_per_rank: usize,
    /// Failed attempts a remote request makes before it claims the per-rank deadlock-avoidance
    /// token (the paper's DA_LIMIT).
    pub da_limit: u32,
    /// Longest blocking wait (for firehoses, budget or a move reply); `None` waits forever.
    /// The runtime sets it from ACTIVERMA_TIMEOUT_S.
    pub wait_timeout: Option<Duration>,
    /// Regions the client pinned before init (e.g. a symmetric heap pinned whole): never pinned
    /// or unpinned by Firehose and not counted in M or MAXVICTIM. Must be bucket aligned, since
    /// munlock is not reference counted and unpinning a shared bucket would unpin them.
    pub prepinned: Vec<Region>,
}

impl Config {
    /// Page-based firehose with M = `max_pinned_bytes`, MAXVICTIM = `max_victim_bytes`, and
    /// f = M / (nranks - 1) as in the paper (the whole of M is shared out evenly).
    pub fn new(rank: Rank, nranks: usize, max_pinned_bytes: usize, max_victim_bytes: usize) -> Config {
        let bucket = page_size();
        let m = max_pinned_bytes / bucket;
        Config {
            rank,
            nranks,
            bucket_bytes: bucket,
            max_remote_buckets: m,
            max_victim_buckets: max_victim_bytes / bucket,
            firehoses_per_rank: m / nranks.saturating_sub(1).max(1),
            da_limit: 8,
            wait_timeout: None,
            prepinned: Vec::new(),
        }
    }

    /// Region flavour: each firehose covers `pages` contiguous pages. Keeps M and MAXVICTIM in
    /// bytes (rounded down to whole buckets) and recomputes f.
    pub fn with_bucket_pages(mut self, pages: usize) -> Config {
        let (m_bytes, v_bytes) = (self.max_remote_buckets * self.bucket_bytes, self.max_victim_buckets * self.bucket_bytes);
        self.bucket_bytes = page_size() * pages.max(1);
        self.max_remote_buckets = m_bytes / self.bucket_bytes;
        self.max_victim_buckets = v_bytes / self.bucket_bytes;
        self.firehoses_per_rank = self.max_remote_buckets / self.nranks.saturating_sub(1).max(1);
        self
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("firehose config: {why}")));
        if self.rank >= self.nranks {
            return Err(Error::InvalidRank { rank: self.rank, size: self.nranks });
        }
        if !self.bucket_bytes.is_power_of_two() || !self.bucket_bytes.is_multiple_of(page_size()) {
            return bad(format!(
                "bucket of {} bytes: must be a power of two and a multiple of the page size ({})",
                self.bucket_bytes,
                page_size()
            ));
        }
        if self.nranks > 1 && self.firehoses_per_rank == 0 {
            return bad("f = 0 firehoses per rank: raise M (max pinned bytes) or lower the rank count".into());
        }
        let promised = self.firehoses_per_rank * self.nranks.saturating_sub(1);
        if promised > self.max_remote_buckets {
            return bad(format!(
                "f * (nranks - 1) = {} * {} = {promised} buckets exceeds M = {} buckets: a target \
                 could be asked to pin more than M",
                self.firehoses_per_rank,
                self.nranks - 1,
                self.max_remote_buckets
            ));
        }
        if self.max_victim_buckets == 0 {
            return bad("MAXVICTIM = 0: local pins need at least one bucket".into());
        }
        if self.da_limit == 0 {
            return bad("da_limit = 0: a request needs at least one attempt".into());
        }
        for r in &self.prepinned {
            if r.addr % self.bucket_bytes != 0 || r.len % self.bucket_bytes != 0 {
                return bad(format!("prepinned region {:#x}+{} is not aligned to the {}-byte bucket", r.addr, r.len, self.bucket_bytes));
            }
        }
        Ok(())
    }

    /// Buckets `[addr, addr+len)` touches, as bucket base addresses (len 0 touches one bucket).
    pub fn buckets(&self, addr: usize, len: usize) -> Buckets {
        let first = addr & !(self.bucket_bytes - 1);
        let last = if len == 0 { first } else { (addr + len - 1) & !(self.bucket_bytes - 1) };
        Buckets { first, count: (last - first) / self.bucket_bytes + 1, bytes: self.bucket_bytes }
    }
}

/// A run of consecutive buckets; requests always cover one run, so membership is a range check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buckets {
    pub first: usize,
    pub count: usize,
    pub bytes: usize,
}

impl Buckets {
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).map(move |i| self.first + i * self.bytes)
    }

    pub fn contains(&self, bucket: usize) -> bool {
        bucket >= self.first && bucket < self.first + self.count * self.bytes
    }

    pub fn nth(&self, i: usize) -> usize {
        self.first + i * self.bytes
    }

    pub fn sub(&self, start: usize, count: usize) -> Buckets {
        Buckets { first: self.nth(start), count, bytes: self.bytes }
    }

    /// The part of `r` that lies inside these buckets.
    pub fn clip(&self, r: Region) -> Region {
        let lo = r.addr.max(self.first);
        let hi = r.end().min(self.first + self.count * self.bytes);
        Region { addr: lo, len: hi.saturating_sub(lo) }
    }
}
