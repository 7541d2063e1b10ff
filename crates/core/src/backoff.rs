//! How a waiting rank spends its time: spin briefly (a hand-off between cores takes ~0.1 us),
//! then yield the CPU on every round, so that when ranks outnumber cores the rank being waited
//! for gets to run instead of losing its time slice to our spinning.

pub struct Backoff {
    rounds: u32,
}

/// Rounds spent spinning before yielding (a few microseconds).
const SPIN_ROUNDS: u32 = 2000;

impl Backoff {
    pub fn new() -> Backoff {
        Backoff { rounds: 0 }
    }

    /// Waits a little; returns true every 1024 rounds, when callers should run their slow checks
    /// (peer alive? deadline passed?).
    #[inline]
    pub fn snooze(&mut self) -> bool {
        self.rounds = self.rounds.wrapping_add(1);
        if self.rounds < SPIN_ROUNDS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        self.rounds.is_multiple_of(1024)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}
