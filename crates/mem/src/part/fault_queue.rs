//! The target's queue of reported faults (the paper's NI fault FIFO). The NACK's active-message
//! handler only enqueues — it may run in a context that should not do page-ins — and whoever
//! runs the target's PART progress (a handler thread, or the rank's progress engine) drains it.

use super::msg::Nack;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct FaultQueue {
    q: Mutex<VecDeque<Nack>>,
    /// Length mirror so an idle poller reads one cache line instead of taking the lock.
    len: AtomicUsize,
}

impl FaultQueue {
    pub fn new() -> FaultQueue {
        FaultQueue::default()
    }

    pub fn push(&self, n: Nack) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(n);
        self.len.store(q.len(), Ordering::Release);
    }

    pub fn pop(&self) -> Option<Nack> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        let n = q.pop_front();
        self.len.store(q.len(), Ordering::Release);
        n
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
