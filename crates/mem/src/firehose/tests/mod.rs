//! Firehose tests, against a fake pinner (`CountingPinner`) and a fake transport whose target
//! is a second Firehose instance. Run: cargo test -p activerma-mem --release firehose

mod da;
mod fakes;
mod invalidate;
mod mlock;
mod single;
mod stress;

/// Small deterministic generator (xorshift64*), so failures reproduce.
pub(super) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
