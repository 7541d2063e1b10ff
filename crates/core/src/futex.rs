//! Cross-process futex wait/wake on a 32-bit word in shared memory: the "interrupt" of the
//! software NIC. Shared (not PRIVATE) futexes so that processes mapping the same memfd meet.

use std::sync::atomic::AtomicU32;

/// Sleeps while `*word == expected`, at most `timeout_ns`. Spurious returns are allowed.
pub fn wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t, tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: word points into a live mapping for the duration of the call.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec);
    }
}

/// Wakes every waiter on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: as above.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wake_releases_waiter() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 0 {
                wait(&w2, 0, 1_000_000_000);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        w.store(1, Ordering::Release);
        wake_all(&w);
        t.join().unwrap();
    }
}
