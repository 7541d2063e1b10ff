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

/// How a dedicated handler thread (an access log's, the progress thread) polls: after a short
/// burst of empty polls it yields on every further one. On a core of its own the yield returns
/// at once (work waits at most one system call longer); on a core shared with the rank's own
/// thread (2 ranks on 2 CPUs) it hands the CPU over instead of burning the time slice
/// (measured with `bench dht`: AA-SP went from 0.84x to about 1x AA-Poll on this 2-CPU VM).
#[derive(Default)]
pub struct IdlePoll {
    empty: u32,
}

/// Empty polls before the thread starts yielding.
const EMPTY_POLLS_BEFORE_YIELD: u32 = 16;

impl IdlePoll {
    /// A poll found work.
    #[inline]
    pub fn busy(&mut self) {
        self.empty = 0;
    }

    /// A poll found nothing: waits a little.
    #[inline]
    pub fn idle(&mut self) {
        self.empty = self.empty.saturating_add(1);
        std::hint::spin_loop();
        if self.empty > EMPTY_POLLS_BEFORE_YIELD {
            std::thread::yield_now();
        }
    }

    /// Empty polls since the last busy one.
    pub fn empty_polls(&self) -> u32 {
        self.empty
    }
}
