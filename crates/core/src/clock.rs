//! Monotonic nanosecond clock shared by all processes on a host (CLOCK_MONOTONIC is system-wide,
//! so a timestamp written by one rank can be compared by another — the modelled network needs it).

#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Busy-waits until the monotonic clock reaches `deadline_ns`.
#[inline]
pub fn spin_until(deadline_ns: u64) {
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// A deadline for blocking waits; `None` seconds means wait forever.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at_ns: Option<u64>,
    secs: f64,
}

impl Deadline {
    pub fn after_secs(secs: f64) -> Deadline {
        if secs <= 0.0 {
            Deadline { at_ns: None, secs }
        } else {
            Deadline { at_ns: Some(now_ns() + (secs * 1e9) as u64), secs }
        }
    }

    pub fn expired(&self) -> bool {
        matches!(self.at_ns, Some(t) if now_ns() >= t)
    }

    pub fn secs(&self) -> f64 {
        self.secs
    }
}
