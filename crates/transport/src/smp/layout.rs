//! Layout of the job's control memory (one memfd shared by every rank of a job on this host):
//!
//! ```text
//! page 0        Header: magic, parameters, offsets
//! ranks         RankInfo[n]: pid, state, heap base, wake word, sleeping flag,
//!               failures acknowledged                                          (128 B each)
//! lives         n × u32 life words (incarnation << 1 | down), read on every access
//!               to a peer in a respawn job: apart from the busy RankInfo lines
//! barrier       arrival counter and generation                                 (own lines)
//! exchange      n × EXCHANGE_CHUNK bytes for allgather rounds
//! inboxes       n AM inboxes, inbox(dst) = InboxCtl + slots (every sender's fragments)
//! tables        n × table_bytes, each rank's translation table (format owned by `mem`)
//! ```
//! The symmetric heaps live in a second memfd, n × heap_size, mapped contiguously.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

pub const MAGIC: u64 = 0x6163_7469_7665_524d; // "activeRM"
pub const VERSION: u32 = 3;
pub const EXCHANGE_CHUNK: usize = 4096;
const LINE: usize = 128; // two cache lines: keeps adjacent-line prefetch from false sharing

/// Parameters fixed when the job is created; the creator writes them into the header so every
/// rank uses the same ones whatever its own environment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobParams {
    pub nranks: u32,
    pub heap_size: u64,
    pub am_slots: u32,
    pub am_slot_size: u32,
    pub table_bytes: u64,
    /// The launcher replaces ranks that die (`activerma run --respawn N`).
    pub respawn: bool,
}

#[repr(C)]
pub struct Header {
    pub magic: u64,
    pub version: u32,
    pub nranks: u32,
    pub heap_size: u64,
    pub am_slots: u32,
    pub am_slot_size: u32,
    pub table_bytes: u64,
    /// Address the creator hopes every rank maps the heaps at (symmetric addresses).
    pub heap_hint: u64,
    /// 1 in a job whose launcher replaces ranks that die.
    pub respawn: u32,
    /// Deaths so far (respawn jobs): a rank that has seen every one of them is out of every
    /// collective, which a replacement's rejoin waits for before it resets the barrier.
    pub failures: AtomicU32,
}

/// Rank states.
pub const STATE_EMPTY: u32 = 0;
pub const STATE_RUNNING: u32 = 1;
pub const STATE_FINALIZED: u32 = 2;
/// Set by the launcher when the process has exited; `exit_info` says how.
pub const STATE_EXITED: u32 = 3;

#[repr(C, align(128))]
pub struct RankInfo {
    pub pid: AtomicU32,
    pub state: AtomicU32,
    /// Exit status (>= 0) or minus the signal number, once STATE_EXITED.
    pub exit_info: AtomicI32,
    pub sleeping: AtomicU32,
    pub heap_base: AtomicU64,
    pub wake_word: AtomicU32,
    /// How many of the job's failures (`Header::failures`) this rank has acknowledged.
    pub acked_failures: AtomicU32,
    /// 1 while the rank's progress engine runs on its own (`Conduit::announce_serving`).
    pub serving: AtomicU32,
}

#[repr(C, align(128))]
pub struct Line32(pub AtomicU32);

#[repr(C)]
pub struct BarrierCtl {
    pub count: Line32,
    pub generation: Line32,
}

fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

#[derive(Clone, Copy, Debug)]
pub struct Offsets {
    pub ranks: usize,
    pub lives: usize,
    pub barrier: usize,
    pub exchange: usize,
    pub inboxes: usize,
    pub inbox_bytes: usize,
    pub tables: usize,
    pub table_bytes: usize,
    pub total: usize,
}

impl JobParams {
    pub fn offsets(&self) -> Offsets {
        let n = self.nranks as usize;
        let page = activerma_core::page::page_size();
        let ranks = page;
        let lives = round_up(ranks + n * std::mem::size_of::<RankInfo>(), LINE);
        let barrier = round_up(lives + n * 4, LINE);
        let exchange = round_up(barrier + std::mem::size_of::<BarrierCtl>(), LINE);
        let inboxes = round_up(exchange + n * EXCHANGE_CHUNK + LINE, page);
        let inbox_bytes = round_up(crate::inbox::Inbox::bytes(self.am_slots as usize, self.am_slot_size as usize), page);
        let tables = round_up(inboxes + n * inbox_bytes, page);
        let table_bytes = round_up(self.table_bytes as usize, page);
        Offsets { ranks, lives, barrier, exchange, inboxes, inbox_bytes, tables, table_bytes, total: tables + n * table_bytes }
    }
}
