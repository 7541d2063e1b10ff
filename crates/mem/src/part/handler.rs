//! Target side: resolve queued faults by the page-in policy the NACK names, then answer with an
//! ERR (or, in time-out mode, only when the fault cannot be resolved).

use super::fault_queue::FaultQueue;
use super::msg::{ErrMsg, ErrSink, ErrStatus, Nack};
use super::policy::PageIn;
use super::registry;
use super::stats::PartStats;
use activerma_core::page::page_size;
use activerma_core::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct PartTarget {
    queue: FaultQueue,
    stats: Arc<PartStats>,
}

impl PartTarget {
    pub fn new(stats: Arc<PartStats>) -> Arc<PartTarget> {
        Arc::new(PartTarget { queue: FaultQueue::new(), stats })
    }

    pub fn stats(&self) -> &Arc<PartStats> {
        &self.stats
    }

    /// The NACK active-message handler: queue the fault; cheap, never pages in.
    pub fn on_nack(&self, nack: Nack) {
        self.queue.push(nack);
    }

    /// Faults queued and not yet resolved.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Pages in what `nack` asks for before its ERR; returns the ERR to send, if one is due,
    /// and what is left to page in after it (PIA with an early ERR: the rest of the transfer,
    /// paged in while the origin already resends).
    pub fn resolve(&self, nack: &Nack) -> (Option<ErrMsg>, Option<Rest>) {
        PartStats::add(&self.stats.nacks_received, 1);
        let mut rest = None;
        let status = match registry::lookup(nack.fault_addr) {
            None => ErrStatus::NotPart,
            Some(h) => {
                let r = h.region();
                let ps = page_size();
                let first = (nack.fault_addr - r.base) / ps;
                // Ends of what the policy pages in, as addresses, clipped to this region: an
                // extent that spans two regions only pages in this one; the next region's first
                // fault will NACK on its own.
                let clip = |end: usize| end.max(nack.fault_addr + 1).min(r.base + r.len);
                let block_end = clip(nack.block_addr.saturating_add(nack.block_len));
                let xfer_end = clip(nack.xfer_addr.saturating_add(nack.xfer_len));
                let end = match nack.page_in {
                    PageIn::One => clip(nack.fault_addr + 1),
                    PageIn::Block | PageIn::AllEarlyErr => block_end,
                    PageIn::All => xfer_end,
                };
                let last = (end - 1 - r.base) / ps;
                if nack.page_in == PageIn::AllEarlyErr {
                    rest = (xfer_end > end).then(|| Rest { fault_addr: end, pages: last + 1..(xfer_end - 1 - r.base) / ps + 1 });
                }
                match r.install_range(first..last + 1) {
                    Ok(n) => {
                        PartStats::add(&self.stats.pages_paged_in, n as u64);
                        ErrStatus::Resolved { pages: n as u32 }
                    }
                    Err(errno) => {
                        rest = None;
                        ErrStatus::Failed { errno }
                    }
                }
            }
        };
        let resolved = matches!(status, ErrStatus::Resolved { .. });
        ((nack.want_err || !resolved).then_some(ErrMsg { xfer: nack.xfer, block: nack.block, status }), rest)
    }

    /// Pages in the rest of an early-ERR PIA extent (after the ERR went out). A page the origin reaches
    /// first just NACKs again; a page installed meanwhile is skipped.
    fn page_in_rest(&self, rest: Rest) {
        if let Some(h) = registry::lookup(rest.fault_addr) {
            if let Ok(n) = h.region().install_range(rest.pages) {
                PartStats::add(&self.stats.pages_paged_in, n as u64);
            }
        }
    }

    /// Resolves every queued fault, sending ERRs through `sink`; returns how many it handled.
    pub fn progress(&self, sink: &dyn ErrSink) -> Result<usize> {
        let mut n = 0;
        while let Some(nack) = self.queue.pop() {
            n += 1;
            let (err, rest) = self.resolve(&nack);
            if let Some(err) = err {
                sink.send_err(nack.origin, &err)?;
                PartStats::add(&self.stats.errs_sent, 1);
            }
            if let Some(rest) = rest {
                self.page_in_rest(rest);
            }
        }
        Ok(n)
    }
}

/// Pages of a PIA extent still to page in after the ERR: `pages` of the region holding
/// `fault_addr` (an address in it, to find the region again).
pub struct Rest {
    fault_addr: usize,
    pages: std::ops::Range<usize>,
}

/// A thread that busy-polls a target's fault queue (the paper's tasklet + user-space ERR
/// sender, without the wake-up: waking a sleeping thread costs 26–38 µs here, more than the
/// whole fault path). Stopped and joined on drop.
pub struct HandlerThread {
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl HandlerThread {
    pub fn spawn(target: Arc<PartTarget>, sink: Arc<dyn ErrSink + Send + Sync>) -> HandlerThread {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let join = std::thread::Builder::new()
            .name("part-handler".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    match target.progress(&*sink) {
                        Ok(0) => std::hint::spin_loop(),
                        Ok(_) => {}
                        // The origin is gone or the link is down: nothing to answer.
                        Err(_) => std::thread::yield_now(),
                    }
                }
            })
            .expect("spawn PART handler thread");
        HandlerThread { stop, join: Some(join) }
    }
}

impl Drop for HandlerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
