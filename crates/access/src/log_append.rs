//! What Active Access does with a checked access, page run by page run: the part of the
//! paper's extended IOMMU that decides, from a page's bits, whether the bytes are written
//! (W) or read (R), and whether the access is logged — metadata (WL / RL) or metadata and data
//! (WLD / RLD) — into the domain's access log (E = 1) or the default fault log (E = 0).
//!
//! The same code runs at the origin when it reaches the target's table (one host) and in the
//! target's progress engine when the access came as an active message (another host), so an
//! access means the same on both conduits.
//!
//! ```text
//! for each run of pages with the same bits (one entry load per page):
//!     put: if W { write run }            get: (data was read for the whole access)
//!          if WL|WLD { append(run, data if WLD) }     if RL|RLD { append(run, copy if RLD) }
//! append: slot = E ? domain's log : fault log; chunks of max_chunk; while full: progress
//!         (back-pressure, never a drop); then wake the log's thread if it sleeps
//!         modelled IOMMU: wait LOG_NS per entry now (the origin's CPU plays the IOMMU, one
//!         entry after another); a put's also go into owed_ns: its entry lands after its data
//! ```
//! A page's bits are read once per access: an access racing with `assoc_pages` sees, page by
//! page, either the old bits or the new ones.

use crate::log_ring::LogOp;
use crate::log_table::LogArena;
use crate::ActiveTable;
use activerma_core::page::page_size;
use activerma_core::{Rank, Result};
use activerma_mem::{Entry, Lookup};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Failure injection (`kill_in_append`): logged accesses this process still makes before it
/// dies between claiming one's first entry and publishing it; 0 = off.
static KILL_IN_APPEND: AtomicU64 = AtomicU64::new(0);

/// Makes this process die (SIGKILL) between claiming the first entry of its `n`-th logged
/// access from now (a put or get into any rank's log) and publishing it, as a crash mid-append
/// would; 0 turns it off. For tests of recovery (`activerma::kill_in_log_append`).
pub fn kill_in_append(n: u64) {
    KILL_IN_APPEND.store(n, Ordering::Relaxed);
}

/// Counts one claimed access against `kill_in_append`, and dies on the last.
fn count_down_to_death() {
    if KILL_IN_APPEND.load(Ordering::Relaxed) != 0 && KILL_IN_APPEND.fetch_sub(1, Ordering::Relaxed) == 1 {
        // SAFETY: raise(2) on our own process.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}

/// Who is logging what: the target's table and logs, and the access's identity.
pub struct Logged<'a> {
    pub table: &'a ActiveTable,
    pub lookup: &'a Lookup<'a>,
    pub target: Rank,
    pub origin: Rank,
    pub seq: u64,
    /// The modelled IOMMU's cost per entry written (0 when off): a memory access, or for a log
    /// a dedicated thread polls, a scratchpad access (the paper's "direct CPU access", which
    /// bypasses main memory).
    pub log_ns: u64,
    pub scratchpad_ns: u64,
    /// The modelled IOTLB's translation of the log address written (None: model off).
    pub translate_log: Option<&'a dyn Fn(usize)>,
    /// The modelled cost of the log entries this access's puts appended (waited for by the
    /// origin's CPU in `append` already): the target's IOMMU writes a put's entries after its
    /// data has landed, so the caller's completion time is at least the wire time plus this
    /// (`put_active`). A get's entries are written while the reply travels: nothing owed.
    pub owed_ns: Cell<u64>,
}

impl<'a> Logged<'a> {
    /// The identity of an access a target logs for an origin on another host (put_am /
    /// get_am handlers). No modelled IOMMU costs: on one host the origins charge them. (An
    /// origin on this host logging into the target's table itself fills in the costs too:
    /// proto's put_active / get_active.)
    pub fn at_target(table: &'a ActiveTable, lookup: &'a Lookup<'a>, target: Rank, origin: Rank, seq: u64) -> Logged<'a> {
        Logged { table, lookup, target, origin, seq, log_ns: 0, scratchpad_ns: 0, translate_log: None, owed_ns: Cell::new(0) }
    }
}

/// Calls `f(start, end, bits)` for each run of pages of `[addr, addr+len)` whose entries have
/// the same control bits and domain.
fn runs(l: &Logged, addr: usize, len: usize, mut f: impl FnMut(usize, usize, u32) -> Result<()>) -> Result<()> {
    let end = addr + len;
    let mut start = addr;
    let mut bits = l.table.entry_of(l.lookup, start) as u32;
    let mut at = start;
    loop {
        let next_page = (at / page_size() + 1) * page_size();
        if next_page >= end {
            return f(start, end, bits);
        }
        let b = l.table.entry_of(l.lookup, next_page) as u32;
        if b != bits {
            f(start, next_page, bits)?;
            start = next_page;
            bits = b;
        }
        at = next_page;
    }
}

/// Appends one run to the log its bits name, with its data if the bits say so (WLD / RLD);
/// returns the slot used (for active flush). `before_publish`: see `LogRing::append_access`.
#[allow(clippy::too_many_arguments)] // the run, where it goes, and the hook
fn append(
    l: &Logged,
    logs: &LogArena,
    op: LogOp,
    bits: u32,
    addr: usize,
    data: &[u8],
    wait: &mut dyn FnMut() -> Result<()>,
    before_publish: &mut dyn FnMut(),
) -> Result<usize> {
    let with_data = bits & if op == LogOp::Put { Entry::WLD } else { Entry::RLD } != 0;
    let domain = (bits & Entry::E != 0).then_some((bits >> Entry::DOMAIN_SHIFT) as u16);
    let slot = logs.slot_of(domain, l.target)?;
    let ring = l
        .table
        .log_ring(slot)?
        .ok_or_else(|| activerma_core::Error::InvalidArgument(format!("rank {}'s access log {slot} is gone", l.target)))?;
    let mut wait_for_room = || {
        logs.slot(slot).origin_blocked();
        wait()
    };
    let entries =
        ring.append_access(op, l.origin as u32, l.seq, addr as u64, data, with_data, data.len() as u64, &mut wait_for_room, &mut || {
            before_publish();
            count_down_to_death();
        })?;
    let entry_ns = if logs.slot(slot).in_scratchpad() { l.scratchpad_ns } else { l.log_ns };
    let model_ns = entry_ns * entries as u64;
    if model_ns != 0 {
        // This CPU plays the IOMMU, which writes entries one after another: a stream of
        // non-blocking active puts is paced by it as by the copies.
        activerma_core::clock::spin_until(activerma_core::clock::now_ns() + model_ns);
        if op == LogOp::Put {
            l.owed_ns.set(l.owed_ns.get() + model_ns);
        }
    }
    if let Some(translate) = l.translate_log {
        // The IOMMU writes the entry through its own translation: the log's page (where the
        // last entry went, near enough) costs an IOTLB lookup like the data page did.
        translate(ring.last_claimed_address(ring.lane_of(l.origin as u32)));
    }
    logs.slot(slot).notify(&ring);
    Ok(slot)
}

/// Whether an access of `len` bytes at `addr` would find room in every log its pages append
/// to (see `LogRing::has_room_for`): a target's handler that must not wait for its own drain
/// asks this first and, if not, retries the message later (`AmCtx::retry_later`).
pub fn has_room(l: &Logged, op: LogOp, addr: usize, len: usize) -> Result<bool> {
    let (log_bits, data_bit) = if op == LogOp::Put { (Entry::WL | Entry::WLD, Entry::WLD) } else { (Entry::RL | Entry::RLD, Entry::RLD) };
    let mut room = true;
    runs(l, addr, len, |s, e, bits| {
        if room && bits & log_bits != 0 {
            let domain = (bits & Entry::E != 0).then_some((bits >> Entry::DOMAIN_SHIFT) as u16);
            // A missing log is the append's error to report, not a reason to wait.
            let logs = l.table.logs().ok();
            if let Some(ring) = logs.and_then(|logs| logs.slot_of(domain, l.target).ok().and_then(|slot| logs.ring(slot))) {
                room = ring.has_room_for(l.origin as u32, e - s, bits & data_bit != 0);
            }
        }
        Ok(())
    })?;
    Ok(room)
}

/// An active put: writes where W=1, logs where WL / WLD. `write(addr, bytes)` stores into the
/// target's memory; `direct` says it cannot fail (a copy into memory mapped here), and then a
/// logged run is written between claiming its entry and publishing it: the claim's locked
/// instruction would otherwise wait for the write's cache misses (the modelled network's 8-byte
/// tracked put, `bench checkpoint`: 1.13-1.2x an untracked one before, about 1.08x after), and
/// the handler still sees the data with the entry. Returns the mask of log slots appended to;
/// the entries' modelled cost is also left in `l.owed_ns`, for the caller's completion time.
pub fn put(
    l: &Logged,
    addr: usize,
    src: &[u8],
    direct: bool,
    write: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    wait: &mut dyn FnMut() -> Result<()>,
) -> Result<u64> {
    let mut touched = 0u64;
    runs(l, addr, src.len(), |s, e, bits| {
        let data = &src[s - addr..e - addr];
        let logged = bits & (Entry::WL | Entry::WLD) != 0;
        let writes = bits & Entry::W != 0;
        if writes && !(logged && direct) {
            write(s, data)?;
        }
        if logged {
            let mut write_here = || {
                if writes && direct {
                    // `direct`: the caller's promise that this cannot fail.
                    let _ = write(s, data);
                }
            };
            touched |= 1 << append(l, l.table.logs()?, LogOp::Put, bits, s, data, wait, &mut write_here)?;
        }
        Ok(())
    })?;
    Ok(touched)
}

/// An active get, after the data was read into `got`: logs where RL / RLD (RLD: a copy of the
/// bytes returned). Returns the mask of log slots appended to.
pub fn get(l: &Logged, addr: usize, got: &[u8], wait: &mut dyn FnMut() -> Result<()>) -> Result<u64> {
    let mut touched = 0u64;
    runs(l, addr, got.len(), |s, e, bits| {
        if bits & (Entry::RL | Entry::RLD) != 0 {
            touched |= 1 << append(l, l.table.logs()?, LogOp::Get, bits, s, &got[s - addr..e - addr], wait, &mut || {})?;
        }
        Ok(())
    })?;
    Ok(touched)
}
