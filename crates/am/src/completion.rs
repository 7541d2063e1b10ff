//! Completion cells for request/reply protocols: the origin takes a cell, sends its index as
//! the token, and the reply handler fills it. A fixed pool, so a burst of outstanding requests
//! waits for a free cell instead of growing memory without bound.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Completion {
    done: AtomicBool,
    /// Whether `data` holds bytes (so `take` only locks it when there is something to clear).
    has_data: AtomicBool,
    /// 0 = success, otherwise an `Error::code()` produced at the target.
    pub status: AtomicI32,
    pub value: AtomicU64,
    pub data: Mutex<Vec<u8>>,
}

impl Completion {
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
    pub fn complete(&self, status: i32, value: u64, data: &[u8]) {
        self.status.store(status, Ordering::Relaxed);
        self.value.store(value, Ordering::Relaxed);
        if !data.is_empty() {
            self.data.lock().unwrap().extend_from_slice(data);
            self.has_data.store(true, Ordering::Relaxed);
        }
        self.done.store(true, Ordering::Release);
    }
}

pub struct Completions {
    cells: Vec<Completion>,
    free: Mutex<Vec<u32>>,
}

impl Completions {
    pub fn new(n: usize) -> Completions {
        Completions { cells: (0..n).map(|_| Completion::default()).collect(), free: Mutex::new((0..n as u32).rev().collect()) }
    }

    /// Takes a free cell; `None` when all are in use (the caller makes progress and retries).
    pub fn take(&self) -> Option<u32> {
        let i = self.free.lock().unwrap().pop()?;
        let c = &self.cells[i as usize];
        c.done.store(false, Ordering::Relaxed);
        if c.has_data.swap(false, Ordering::Relaxed) {
            c.data.lock().unwrap().clear();
        }
        Some(i)
    }

    pub fn get(&self, token: u64) -> Option<&Completion> {
        self.cells.get(token as usize)
    }

    pub fn give_back(&self, i: u32) {
        self.free.lock().unwrap().push(i);
    }
}
