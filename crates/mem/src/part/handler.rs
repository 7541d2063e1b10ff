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

    /// Pages in what `nack` asks for; returns the ERR to send, if one is due.
    pub fn resolve(&self, nack: &Nack) -> Option<ErrMsg> {
        PartStats::add(&self.stats.nacks_received, 1);
        let status = match registry::lookup(nack.fault_addr) {
            None => ErrStatus::NotPart,
            Some(h) => {
                let r = h.region();
                let ps = page_size();
                let first = (nack.fault_addr - r.base) / ps;
                // End of what the policy pages in, as an address, clipped to this region: an
                // extent that spans two regions only pages in this one; the next region's first
                // fault will NACK on its own.
                let end = match nack.page_in {
                    PageIn::One => nack.fault_addr + 1,
                    PageIn::Block => nack.block_addr.saturating_add(nack.block_len),
                    PageIn::All => nack.xfer_addr.saturating_add(nack.xfer_len),
                }
                .max(nack.fault_addr + 1)
                .min(r.base + r.len);
                let last = (end - 1 - r.base) / ps;
                match r.install_range(first..last + 1) {
                    Ok(n) => {
                        PartStats::add(&self.stats.pages_paged_in, n as u64);
                        ErrStatus::Resolved { pages: n as u32 }
                    }
                    Err(errno) => ErrStatus::Failed { errno },
                }
            }
        };
        let resolved = matches!(status, ErrStatus::Resolved { .. });
        (nack.want_err || !resolved).then_some(ErrMsg { xfer: nack.xfer, block: nack.block, status })
    }

    /// Resolves every queued fault, sending ERRs through `sink`; returns how many it handled.
    pub fn progress(&self, sink: &dyn ErrSink) -> Result<usize> {
        let mut n = 0;
        while let Some(nack) = self.queue.pop() {
            n += 1;
            if let Some(err) = self.resolve(&nack) {
                sink.send_err(nack.origin, &err)?;
                PartStats::add(&self.stats.errs_sent, 1);
            }
        }
        Ok(n)
    }
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
