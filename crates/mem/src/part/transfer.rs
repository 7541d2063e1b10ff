//! Origin side: move a transfer block by block with cross-memory attach; a block that meets a
//! missing remote page is NACKed and resent when the target's ERR arrives (or after the
//! time-out). Meanwhile later blocks keep going (as the paper's engine overlaps them), except
//! under PIA, where the target is paging in the rest of the transfer and sending ahead would
//! only collect NACKs for pages about to arrive.
//!
//! Faults in the origin's *own* buffer (a put's source, a get's destination) are resolved on
//! the spot: the node that faults resolves, and here that node is also the one that resends,
//! so no message is needed — page the local page in (it lies in one of our PART regions, the
//! only local memory that can fail a cross-memory copy) and continue the copy where it stopped.
//!
//! Resending a whole block rewrites bytes that already landed with the same bytes, so a put or
//! get stays idempotent. Accumulates must not use this path.

use super::msg::{ErrStatus, Nack, OriginLink};
use super::policy::{PageIn, PartConfig, Retransmit};
use super::registry;
use super::stats::PartStats;
use activerma_core::clock::{now_ns, spin_until};
use activerma_core::page::page_size;
use activerma_core::{Error, Rank, Result};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Where a transfer goes: the target's rank and its process id (for cross-memory attach).
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub rank: Rank,
    pub pid: i32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Put,
    Get,
}

struct Xfer {
    id: u64,
    peer: Peer,
    dir: Dir,
    local: usize,
    remote: usize,
    len: usize,
    /// The page-in policy its NACKs ask for, read once when it starts.
    page_in: PageIn,
}

/// A NACKed block waiting to be resent.
struct Pending {
    block: usize,
    attempts: u32,
    /// When it may be resent (ns); `WAIT_ERR` until its ERR arrives, 0 once it has.
    ready_at: u64,
    /// When it first faulted (ns).
    since: u64,
}
const WAIT_ERR: u64 = u64::MAX;

/// Transfer ids are unique per process so ERRs can be routed to the right transfer.
static NEXT_XFER: AtomicU64 = AtomicU64::new(1);

/// The PART origin engine of one rank.
pub struct Origin {
    me: Rank,
    cfg: PartConfig,
    /// `cfg.page_in` until `set_page_in` changes it (a `PageIn` as u8): the policy is the
    /// origin's choice per transfer, so an application may switch it between phases.
    page_in: AtomicU8,
    stats: Arc<PartStats>,
}

impl Origin {
    pub fn new(me: Rank, cfg: PartConfig, stats: Arc<PartStats>) -> Result<Origin> {
        cfg.validate()?;
        Ok(Origin { me, page_in: AtomicU8::new(cfg.page_in as u8), cfg, stats })
    }

    /// The page-in policy that transfers started from now on ask for.
    pub fn set_page_in(&self, p: PageIn) {
        self.page_in.store(p as u8, Ordering::Relaxed);
    }

    pub fn page_in(&self) -> PageIn {
        PageIn::from_u8(self.page_in.load(Ordering::Relaxed)).unwrap_or(self.cfg.page_in)
    }

    pub fn config(&self) -> &PartConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &Arc<PartStats> {
        &self.stats
    }

    /// Writes `src` to `remote` in `peer`'s memory. Returns when every block has landed.
    pub fn put(&self, link: &dyn OriginLink, peer: Peer, remote: usize, src: &[u8]) -> Result<()> {
        self.run(link, peer, Dir::Put, src.as_ptr() as usize, remote, src.len())
    }

    /// Reads `dst.len()` bytes at `remote` in `peer`'s memory into `dst`.
    pub fn get(&self, link: &dyn OriginLink, peer: Peer, remote: usize, dst: &mut [u8]) -> Result<()> {
        self.run(link, peer, Dir::Get, dst.as_mut_ptr() as usize, remote, dst.len())
    }

    fn run(&self, link: &dyn OriginLink, peer: Peer, dir: Dir, local: usize, remote: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        if remote.checked_add(len).is_none() {
            return Err(Error::NotExposed { rank: peer.rank, addr: remote, len });
        }
        PartStats::add(&self.stats.transfers, 1);
        if len <= self.cfg.pretouch_max {
            self.pretouch(local, len);
        }
        let x = Xfer { id: NEXT_XFER.fetch_add(1, Ordering::Relaxed), peer, dir, local, remote, len, page_in: self.page_in() };
        let bs = self.cfg.block_size;
        let nblocks = (remote % bs + len).div_ceil(bs);
        let mut pending: Vec<Pending> = Vec::new();
        let mut errs = Vec::new();
        let mut next = 0usize;
        let mut idle_since: Option<u64> = None;
        loop {
            let mut progressed = false;
            if !pending.is_empty() {
                link.take_errs(x.id, &mut errs);
                for e in errs.drain(..) {
                    PartStats::add(&self.stats.errs_received, 1);
                    let (addr, blen) = self.block_range(&x, e.block as usize);
                    match e.status {
                        ErrStatus::Resolved { .. } => {
                            if let Some(p) = pending.iter_mut().find(|p| p.block == e.block as usize && p.ready_at == WAIT_ERR) {
                                p.ready_at = 0;
                            }
                        }
                        ErrStatus::NotPart => return Err(Error::NotExposed { rank: peer.rank, addr, len: blen }),
                        ErrStatus::Failed { errno } => {
                            return Err(Error::Os {
                                call: "PART page-in at the target",
                                errno_text: format!(
                                    "{} (rank {}, block at {addr:#x})",
                                    std::io::Error::from_raw_os_error(errno),
                                    peer.rank
                                ),
                            })
                        }
                    }
                }
                let now = now_ns();
                let mut i = 0;
                while i < pending.len() {
                    if pending[i].ready_at > now {
                        i += 1;
                        continue;
                    }
                    progressed = true;
                    if pending[i].ready_at != 0 {
                        PartStats::add(&self.stats.timeouts, 1);
                    }
                    PartStats::add(&self.stats.retransmissions, 1);
                    match self.send_block(link, &x, pending[i].block)? {
                        None => {
                            pending.swap_remove(i);
                        }
                        Some(fault) => {
                            let p = &mut pending[i];
                            p.attempts += 1;
                            // With ERR every resend follows a confirmed page-in, so a count
                            // bounds a livelock. With time-outs a resend may simply beat a
                            // busy (or descheduled) handler: only the give-up time bounds it.
                            let stuck = match self.cfg.retransmit {
                                Retransmit::Err => p.attempts > self.cfg.max_attempts,
                                Retransmit::Timeout(_) => now - p.since > self.cfg.give_up.as_nanos() as u64,
                            };
                            if stuck {
                                return Err(self.livelock(&x, p.block));
                            }
                            self.nack(link, &x, p.block, fault)?;
                            p.ready_at = self.rearm();
                            i += 1;
                        }
                    }
                }
            }
            let hold = x.page_in.holds_while_pending() && !pending.is_empty();
            if next < nblocks && !hold {
                // Fast path: every block left in one copy; the blocks it landed whole are done,
                // and the block it stopped in (if any) goes through `send_block` below.
                // (Not over a modelled link: there each block is booked on it by itself.)
                if nblocks - next > 1 && !link.paces() {
                    let landed = self.send_rest(&x, next)?;
                    PartStats::add(&self.stats.blocks_sent, landed as u64);
                    next += landed;
                    if next == nblocks {
                        idle_since = None;
                        continue;
                    }
                }
                PartStats::add(&self.stats.blocks_sent, 1);
                if let Some(fault) = self.send_block(link, &x, next)? {
                    self.nack(link, &x, next, fault)?;
                    pending.push(Pending { block: next, attempts: 1, ready_at: self.rearm(), since: now_ns() });
                }
                next += 1;
                idle_since = None;
                continue;
            }
            if pending.is_empty() {
                return Ok(());
            }
            if progressed {
                idle_since = None;
            } else {
                let now = now_ns();
                let since = *idle_since.get_or_insert(now);
                if now - since > self.cfg.give_up.as_nanos() as u64 {
                    return Err(Error::Timeout {
                        what: format!("PART retransmission requests from rank {} ({} blocks pending)", peer.rank, pending.len()),
                        secs: self.cfg.give_up.as_secs_f64(),
                    });
                }
            }
            link.progress();
            std::hint::spin_loop();
        }
    }

    /// Remote range of a block. Blocks are aligned in the target's address space (the first
    /// and last may be short), so no page belongs to two blocks: a missing page is met by one
    /// block only, and "the rest of the block" (PI4) never overlaps a neighbour.
    fn block_range(&self, x: &Xfer, block: usize) -> (usize, usize) {
        let bs = self.cfg.block_size;
        let a0 = x.remote - x.remote % bs;
        let start = x.remote.max(a0 + block * bs);
        let end = (x.remote + x.len).min(a0 + (block + 1) * bs);
        (start, end.saturating_sub(start))
    }

    fn rearm(&self) -> u64 {
        match self.cfg.retransmit {
            Retransmit::Err => WAIT_ERR,
            Retransmit::Timeout(d) => now_ns() + d.as_nanos() as u64,
        }
    }

    /// Copies one block (when its turn on a modelled link comes). `Ok(None)`: it landed.
    /// `Ok(Some(addr))`: it stopped at a missing remote page at `addr` (bytes before it landed).
    fn send_block(&self, link: &dyn OriginLink, x: &Xfer, block: usize) -> Result<Option<usize>> {
        let (start, blen) = self.block_range(x, block);
        if let Some(at) = link.book_block(blen) {
            spin_until(at);
        }
        let off = start - x.remote;
        let mut done = 0;
        let mut local_fixes = 0;
        loop {
            let n = cma(x.dir, x.peer.pid, x.local + off + done, x.remote + off + done, blen - done);
            if n >= 0 {
                done += n as usize;
                if done == blen {
                    return Ok(None);
                }
            } else {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EFAULT) => {}
                    Some(libc::ESRCH) => return Err(Error::PeerGone { rank: x.peer.rank, how: "process no longer exists".into() }),
                    _ => return Err(Error::Os { call: cma_name(x.dir), errno_text: e.to_string() }),
                }
            }
            // A short count or EFAULT: the page at `done` is missing on one side. Ours first.
            if self.fix_local(x.dir, x.local + off + done) {
                local_fixes += 1;
                if local_fixes > blen / page_size() + 2 {
                    return Err(self.livelock(x, block));
                }
                continue;
            }
            return Ok(Some(x.remote + off + done));
        }
    }

    /// Copies blocks `from..` with one system call (the common case: nothing is missing, and
    /// one call per 16 KiB block would cost a large transfer ~1.6x); returns how many blocks
    /// landed whole. The block it stopped in, if any, is then sent by `send_block`, which
    /// finds the fault (or the local page to install) again: a resend of bytes that landed is
    /// harmless, and it keeps one place that decides what a short copy means.
    fn send_rest(&self, x: &Xfer, from: usize) -> Result<usize> {
        let (start, _) = self.block_range(x, from);
        let off = start - x.remote;
        let len = x.len - off;
        let n = cma(x.dir, x.peer.pid, x.local + off, x.remote + off, len);
        let n = if n >= 0 {
            n as usize
        } else {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EFAULT) => 0,
                Some(libc::ESRCH) => return Err(Error::PeerGone { rank: x.peer.rank, how: "process no longer exists".into() }),
                _ => return Err(Error::Os { call: cma_name(x.dir), errno_text: e.to_string() }),
            }
        };
        let nblocks = (x.remote % self.cfg.block_size + x.len).div_ceil(self.cfg.block_size);
        let mut landed = 0;
        while from + landed < nblocks {
            let (a, l) = self.block_range(x, from + landed);
            if a + l > start + n {
                break;
            }
            landed += 1;
        }
        Ok(landed)
    }

    /// If `addr` is a missing page of one of this process's PART regions, install it.
    fn fix_local(&self, dir: Dir, addr: usize) -> bool {
        let ps = page_size();
        // A kernel copy routine may stop a few bytes short of the faulting local byte (exact on
        // x86, not promised everywhere), so a stop just before a page boundary also checks the
        // next page.
        let mut cands = [addr, usize::MAX];
        let next = activerma_core::page::page_floor(addr) + ps;
        if next - addr <= 256 {
            cands[1] = next;
        }
        for a in cands.into_iter().filter(|&a| a != usize::MAX) {
            let Some(h) = registry::lookup(a) else { continue };
            let r = h.region();
            if r.install_one((a - r.base) / ps) == Ok(1) {
                PartStats::add(&self.stats.pages_paged_in, 1);
                PartStats::add(if dir == Dir::Put { &self.stats.faults_src } else { &self.stats.faults_dst }, 1);
                return true;
            }
        }
        false
    }

    fn nack(&self, link: &dyn OriginLink, x: &Xfer, block: usize, fault_addr: usize) -> Result<()> {
        PartStats::add(&self.stats.nacks_sent, 1);
        PartStats::add(if x.dir == Dir::Put { &self.stats.faults_dst } else { &self.stats.faults_src }, 1);
        let (block_addr, block_len) = self.block_range(x, block);
        link.send_nack(
            x.peer.rank,
            &Nack {
                xfer: x.id,
                origin: self.me,
                block: block as u32,
                write: x.dir == Dir::Put,
                want_err: self.cfg.retransmit == Retransmit::Err,
                page_in: x.page_in,
                fault_addr,
                block_addr,
                block_len,
                xfer_addr: x.remote,
                xfer_len: x.len,
            },
        )
    }

    /// Pages in the parts of `[addr, addr+len)` that lie in our own PART regions.
    fn pretouch(&self, addr: usize, len: usize) {
        let ps = page_size();
        let end = addr + len;
        let mut a = addr;
        while a < end {
            let Some(h) = registry::lookup(a) else {
                a = activerma_core::page::page_floor(a) + ps;
                continue;
            };
            let r = h.region();
            let stop = end.min(r.base + r.len);
            let pages = activerma_core::page::pages_spanned(r.base, a, stop - a);
            // A failure here is not fatal: the transfer's own fault path will retry the page.
            if let Ok(n) = r.install_range(pages) {
                PartStats::add(&self.stats.pages_pretouched, n as u64);
            }
            a = stop;
        }
    }

    fn livelock(&self, x: &Xfer, block: usize) -> Error {
        let (addr, _) = self.block_range(x, block);
        Error::Os {
            call: "PART transfer",
            errno_text: format!(
                "block at {addr:#x} (rank {}) still faults after {}: its pages are evicted again as fast \
                 as they are paged in, the target does not page them in, or a buffer lies in a userfaultfd range that \
                 activerma does not manage",
                x.peer.rank,
                match self.cfg.retransmit {
                    Retransmit::Err => format!("{} retransmissions", self.cfg.max_attempts),
                    Retransmit::Timeout(_) => format!("{:.0} s of retransmissions", self.cfg.give_up.as_secs_f64()),
                }
            ),
        }
    }
}

fn cma_name(d: Dir) -> &'static str {
    match d {
        Dir::Put => "process_vm_writev",
        Dir::Get => "process_vm_readv",
    }
}

/// One cross-memory copy; bytes copied, or -1 with errno set.
fn cma(dir: Dir, pid: i32, local: usize, remote: usize, len: usize) -> isize {
    let l = libc::iovec { iov_base: local as *mut _, iov_len: len };
    let r = libc::iovec { iov_base: remote as *mut _, iov_len: len };
    // SAFETY: the local iovec covers the caller's buffer (a slice); the kernel checks the
    // remote one and reports missing pages as EFAULT / a short count.
    unsafe {
        match dir {
            Dir::Put => libc::process_vm_writev(pid, &l, 1, &r, 1, 0),
            Dir::Get => libc::process_vm_readv(pid, &l, 1, &r, 1, 0),
        }
    }
}
