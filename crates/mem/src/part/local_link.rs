//! An in-process link: origin and target are threads of one process (cross-memory attach to
//! one's own pid takes the same kernel fault path as to another process). For tests,
//! benchmarks, and a rank that accesses its own private memory through PART.

use super::handler::PartTarget;
use super::msg::{ErrMsg, ErrSink, Nack, OriginLink};
use activerma_core::{Rank, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct LocalLink {
    target: Arc<PartTarget>,
    errs: Mutex<Vec<ErrMsg>>,
    /// Mirror of `errs.len()`: the origin polls this while waiting.
    nerrs: AtomicUsize,
    /// Run the target's fault handling inside the origin's waits (single-threaded tests);
    /// otherwise a [`super::HandlerThread`] or the caller runs `target.progress(link)`.
    inline: bool,
}

impl LocalLink {
    pub fn new(target: Arc<PartTarget>, inline: bool) -> Arc<LocalLink> {
        Arc::new(LocalLink { target, errs: Mutex::new(Vec::new()), nerrs: AtomicUsize::new(0), inline })
    }

    pub fn target(&self) -> &Arc<PartTarget> {
        &self.target
    }
}

impl OriginLink for LocalLink {
    fn send_nack(&self, _target: Rank, nack: &Nack) -> Result<()> {
        self.target.on_nack(*nack);
        Ok(())
    }

    fn take_errs(&self, xfer: u64, out: &mut Vec<ErrMsg>) {
        if self.nerrs.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut v = self.errs.lock().unwrap_or_else(|e| e.into_inner());
        // Other transfers' ERRs stay for their own origins.
        out.extend(v.extract_if(.., |e| e.xfer == xfer));
        self.nerrs.store(v.len(), Ordering::Release);
    }

    fn progress(&self) {
        if self.inline {
            // Errors here mean only that an ERR could not be queued, which cannot happen locally.
            let _ = self.target.progress(self);
        }
    }
}

impl ErrSink for LocalLink {
    fn send_err(&self, _origin: Rank, err: &ErrMsg) -> Result<()> {
        let mut v = self.errs.lock().unwrap_or_else(|e| e.into_inner());
        v.push(*err);
        self.nerrs.store(v.len(), Ordering::Release);
        Ok(())
    }
}
