//! Remote writes, seen by Active Access (the paper's section 4.3): the protected pages carry
//! W=1, WL=1, WLD=0 in the checkpoint's domain, so every put into them writes memory and
//! leaves a metadata-only entry (origin, address, length) in the domain's access log; the
//! handler marks the pages dirty. The origin pays one log append per put; nothing waits for the
//! target.
//!
//! The baseline the paper says RMA cannot use directly, the dirty bit: the target write-
//! protects its pages (W=0, WL=1, WLD=1: a put is not written but logged with its data) and
//! mediates the first remote write to each page — its handler writes the data, marks the page
//! dirty and lifts the protection (W=1, unlogged), so later writes in the interval go direct.
//! An origin must wait for that mediation before its next access to the page
//! (`Checkpointer::after_remote_write` does an active flush), or a later direct write could
//! land before the earlier logged one.
//!
//! A page has one set of marks, and the application may have marked protected pages itself
//! (`tracked_runs`): a page it marked W=0 is written only by its own handlers, which the MMU
//! sees, so it keeps the application's marks; an unmarked page gets the tracking marks; a page
//! whose puts write memory directly while the application logs something on it cannot carry
//! both, and is refused with an error naming it. At every checkpoint the marks are read again:
//! a page whose tracking the application took away (marked it plain, or W=1 with its own log)
//! fails the checkpoint, since puts into it may have gone unseen.

use crate::dirty::{DirtyPages, Region};
use activerma::{Actions, Error, LogEntry, LogHandler, LogOp, Result, World};
use std::sync::Arc;

/// The marks a protected page carries between checkpoints.
pub fn tracking_marks(trap: bool) -> Actions {
    if trap {
        Actions::R | Actions::WL | Actions::WLD
    } else {
        Actions::W | Actions::R | Actions::WL
    }
}

/// What a tracked page becomes once the trap handler has written it.
pub fn untracked_marks() -> Actions {
    Actions::W | Actions::R
}

/// The handler of the checkpoint's access log.
pub fn handler(dirty: Arc<DirtyPages>, trap: Option<World>, page: usize) -> LogHandler {
    Arc::new(move |e: &LogEntry| {
        if e.meta.op != LogOp::Put {
            return;
        }
        let chunk_addr = e.meta.addr as usize;
        match &trap {
            None => {
                // Metadata only: the entry names the whole access.
                let start = chunk_addr - e.meta.offset as usize;
                dirty.mark(start, e.meta.total_len as usize);
            }
            Some(world) => {
                let data = e.data();
                // SAFETY: the address is in this rank's protected region (the page carried
                // our marks), and the origin waits for this handler before touching it again.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), chunk_addr as *mut u8, data.len()) };
                dirty.mark(chunk_addr, data.len());
                let first = chunk_addr / page * page;
                let end = (chunk_addr + data.len().max(1)).div_ceil(page) * page;
                // Here only: a handler must not wait for other ranks (origins on other hosts go on
                // routing through us, and we write directly). A page the handler cannot
                // unprotect stays trapped: slower, still correct.
                let _ = world.assoc_pages_here(first as *const u8, end - first, untracked_marks(), None);
            }
        }
    })
}

/// Reads the marks of every protected page and returns the runs `(addr, len)` of pages the
/// checkpoint tracks with its own marks (`domain`): unmarked pages on the first call
/// (`arming`), pages that carry the tracking marks later (under the trap scheme also the pages
/// its handler unprotected, which read as unmarked: those `lifted` says). Pages the
/// application marked W=0 are left to it. Anything else is an error: such a page's puts would
/// write memory unseen.
pub fn tracked_runs(
    world: &World,
    regions: &[Region],
    page: usize,
    trap: bool,
    domain: u16,
    arming: bool,
    lifted: &dyn Fn(usize) -> bool,
) -> Result<Vec<(usize, usize)>> {
    let tracking = (tracking_marks(trap), Some(domain));
    let plain = (untracked_marks(), None);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for r in regions {
        for (p, marks) in world.page_marks(r.addr as *const u8, r.len)?.into_iter().enumerate() {
            let addr = r.addr + p * page;
            let ours = marks == tracking || (marks == plain && (arming || (trap && lifted(addr))));
            if ours {
                match runs.last_mut() {
                    Some((a, l)) if *a + *l == addr => *l += page,
                    _ => runs.push((addr, page)),
                }
            } else if marks.0.contains(Actions::W) {
                let why = if arming {
                    "puts write it directly while the application logs accesses to it, and a page has one set of marks: mark it W=0 (its handler writes it, which the MMU sees) or leave it unmarked"
                } else {
                    "the application changed them while the checkpoint tracked the page, so puts into it since the last checkpoint may have gone unseen"
                };
                return Err(Error::InvalidArgument(format!(
                    "checkpoint: protected page {addr:#x} carries marks {:?} (domain {:?}): {why}",
                    marks.0, marks.1
                )));
            }
        }
    }
    Ok(runs)
}
