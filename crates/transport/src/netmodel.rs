//! The modelled network (off by default): a per-operation latency and a per-origin bandwidth
//! limit added to every remote operation, so that a single host can emulate a cluster network.
//! Transfers from one origin share one modelled link and are serialized on it.

use activerma_core::clock::now_ns;
use activerma_core::settings;
use activerma_core::{Config, Result};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct NetModel {
    pub latency_ns: u64,
    /// Bytes per second; 0 = unlimited.
    pub bandwidth_bps: u64,
    /// CPU time a target spends receiving one active message (0: off).
    pub recv_ns: u64,
    /// The IOMMU's memory access per log entry written (0: off).
    pub log_ns: u64,
    /// The IOMMU's update of a log's pointers in the CPU's scratchpad (0: off).
    pub scratchpad_ns: u64,
    /// One interrupt (0: real futex wake-ups; see activerma_core::interrupt_model).
    pub interrupt_ns: u64,
    /// When the modelled link of this origin is free again.
    link_free_at: AtomicU64,
}

impl NetModel {
    /// The model the ACTIVERMA_NET_* settings describe (all 0: off).
    pub fn from_config(cfg: &Config) -> Result<NetModel> {
        Ok(NetModel {
            latency_ns: cfg.get_u64(settings::NET_LATENCY_NS)?,
            bandwidth_bps: cfg.get_u64(settings::NET_BANDWIDTH_MBS)?.saturating_mul(1_000_000),
            recv_ns: cfg.get_u64(settings::NET_RECV_NS)?,
            log_ns: cfg.get_u64(settings::NET_LOG_NS)?,
            scratchpad_ns: cfg.get_u64(settings::NET_SCRATCHPAD_NS)?,
            interrupt_ns: cfg.get_u64(settings::NET_INTERRUPT_NS)?,
            link_free_at: AtomicU64::new(0),
        })
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.latency_ns != 0 || self.bandwidth_bps != 0
    }

    /// When everything booked on this origin's link so far has arrived (0 if off).
    pub fn idle_at(&self) -> u64 {
        if !self.enabled() {
            return 0;
        }
        self.link_free_at.load(Ordering::Acquire) + self.latency_ns
    }

    /// Books `bytes` on the link and returns when the operation completes remotely (0 if off).
    #[inline]
    pub fn completion_time(&self, bytes: usize) -> u64 {
        if !self.enabled() {
            return 0;
        }
        self.book(bytes)
    }

    #[cold]
    fn book(&self, bytes: usize) -> u64 {
        let (_, sent) = self.book_span(bytes);
        sent + self.latency_ns
    }

    /// Books `bytes` on the link: (when they start on it, when the last byte has left); the
    /// last byte arrives `latency_ns` later.
    pub fn book_span(&self, bytes: usize) -> (u64, u64) {
        let now = now_ns();
        let wire = if self.bandwidth_bps == 0 { 0 } else { (bytes as u128 * 1_000_000_000 / self.bandwidth_bps as u128) as u64 };
        let mut free = self.link_free_at.load(Ordering::Relaxed);
        loop {
            let start = free.max(now);
            match self.link_free_at.compare_exchange_weak(free, start + wire, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return (start, start + wire),
                Err(cur) => free = cur,
            }
        }
    }

    /// Charges the receive overhead of `messages` active messages (busy-waits).
    #[inline]
    pub fn charge_receive(&self, messages: u64) {
        if self.recv_ns != 0 {
            spin_for(self.recv_ns * messages);
        }
    }

    pub fn describe(&self) -> String {
        if !self.enabled() && self.recv_ns == 0 && self.log_ns == 0 && self.scratchpad_ns == 0 && self.interrupt_ns == 0 {
            return "off".into();
        }
        let mut s = format!(
            "on: latency {} ns, bandwidth {}",
            self.latency_ns,
            if self.bandwidth_bps == 0 { "unlimited".to_string() } else { format!("{} MB/s", self.bandwidth_bps / 1_000_000) }
        );
        if self.recv_ns != 0 {
            s += &format!(", message receive {} ns", self.recv_ns);
        }
        if self.log_ns != 0 {
            s += &format!(", log write {} ns", self.log_ns);
        }
        if self.scratchpad_ns != 0 {
            s += &format!(", scratchpad {} ns", self.scratchpad_ns);
        }
        if self.interrupt_ns != 0 {
            s += &format!(", interrupt {} ns", self.interrupt_ns);
        }
        s
    }
}

#[cold]
fn spin_for(ns: u64) {
    activerma_core::clock::spin_until(now_ns() + ns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_transfers_on_the_link() {
        let m = NetModel {
            latency_ns: 1000,
            bandwidth_bps: 1_000_000_000,
            recv_ns: 0,
            log_ns: 0,
            scratchpad_ns: 0,
            interrupt_ns: 0,
            link_free_at: AtomicU64::new(0),
        };
        let t0 = now_ns();
        let a = m.completion_time(1_000_000); // 1 ms on the wire
        let b = m.completion_time(1_000_000);
        assert!(a >= t0 + 1_001_000);
        assert!(b >= a + 1_000_000 - 10, "second transfer queues behind the first");
        let off = NetModel::default();
        assert_eq!(off.completion_time(100), 0);
    }
}
