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

use crate::dirty::DirtyPages;
use activerma::{Actions, LogEntry, LogHandler, LogOp, World};
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
