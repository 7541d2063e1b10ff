//! How a waiting rank spends its time: spin briefly (a hand-off between cores takes ~0.1 us),
//! then keep spinning but yield the CPU on every 64th round, so that when ranks outnumber cores
//! the rank being waited for gets to run instead of losing its time slice to our spinning.
//!
//! Not a yield on every round: under CFS a sched_yield beside a runnable process of another job
//! (a CPU hog, a compiler) gives that process a whole slice, milliseconds. A rank waiting in a
//! barrier that way over TCP, where every operation needs the target's MPI progress, turned an
//! 8-byte put into 6.8 ms with two hogs on 2 CPUs; yielding every 64th round made it 0.24 ms,
//! ARMCI-MPI's time (bench/armci_peers/run.sh --tcp --quick beside two `yes > /dev/null`).

pub struct Backoff {
    rounds: u32,
}

/// Rounds spent spinning before yielding (a few microseconds).
const SPIN_ROUNDS: u32 = 2000;

/// After SPIN_ROUNDS, one round in this many yields (a power of two: the test is a mask).
const YIELD_EVERY: u32 = 64;

impl Backoff {
    pub fn new() -> Backoff {
        Backoff { rounds: 0 }
    }

    /// Waits a little; returns true every 1024 rounds, when callers should run their slow checks
    /// (peer alive? deadline passed?).
    #[inline]
    pub fn snooze(&mut self) -> bool {
        self.rounds = self.rounds.wrapping_add(1);
        if self.rounds < SPIN_ROUNDS || !self.rounds.is_multiple_of(YIELD_EVERY) {
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
