//! The accesses of one rank, identical for every variant (same seed, same targets, same words):
//! 8-byte puts and gets to random ranks, pages and words of the target's array, with a given
//! share of puts. The workload also says how many puts and gets it sends to every (rank, page):
//! what every counting variant must count.
//!
//! Values: put `i` of origin `o` writes `value(o, i)`, which names its writer; a rank's array
//! starts with `initial(rank, word)`, which names no writer. So any word (read by a get, or
//! looked at after the run) can be checked: it holds its initial value or one that a put to
//! exactly that (rank, word) wrote.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Bytes of a counted page of the array.
pub const PAGE: usize = 4096;
/// 8-byte words per page.
pub const WORDS_PER_PAGE: usize = PAGE / 8;

const INITIAL: u64 = 1 << 63;
const ORIGIN_SHIFT: u32 = 40;

#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub ranks: usize,
    /// Accesses per rank.
    pub accesses: usize,
    /// Share of accesses that are puts (0.0..=1.0); the others are gets.
    pub puts: f64,
    /// Pages of the array on every rank.
    pub pages: usize,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Put,
    Get,
}

/// One 8-byte access to word `word` of `target`'s array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub kind: Kind,
    pub target: u32,
    pub word: u32,
}

impl Access {
    pub fn target(&self) -> usize {
        self.target as usize
    }
    pub fn page(&self) -> usize {
        self.word as usize / WORDS_PER_PAGE
    }
}

pub struct Workload {
    pub origin: usize,
    pub pages: usize,
    pub accesses: Vec<Access>,
    /// Puts this origin sends to each (rank, page), at `rank * pages + page`; and gets.
    pub puts_to: Vec<u64>,
    pub gets_to: Vec<u64>,
}

impl Workload {
    pub fn puts(&self) -> u64 {
        self.puts_to.iter().sum()
    }
    pub fn gets(&self) -> u64 {
        self.gets_to.iter().sum()
    }
}

impl Mix {
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.puts) {
            return Err(format!("the put share {} is not between 0 and 1", self.puts));
        }
        if self.ranks == 0 || self.ranks >= (1 << (63 - ORIGIN_SHIFT)) - 1 {
            return Err(format!("{} ranks: values cannot name that many origins", self.ranks));
        }
        if self.pages == 0 || (self.pages * WORDS_PER_PAGE) as u64 > u32::MAX as u64 {
            return Err(format!("{} pages per rank: need 1 to {}", self.pages, u32::MAX as usize / WORDS_PER_PAGE));
        }
        if self.accesses as u64 >= 1 << ORIGIN_SHIFT {
            return Err(format!("{} accesses per rank: values cannot number that many", self.accesses));
        }
        Ok(())
    }

    pub fn workload(&self, origin: usize) -> Result<Workload, String> {
        self.check()?;
        let (p, pages) = (self.ranks, self.pages);
        let mut rng = SmallRng::seed_from_u64(self.seed ^ (origin as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut w = Workload {
            origin,
            pages,
            accesses: Vec::with_capacity(self.accesses),
            puts_to: vec![0; p * pages],
            gets_to: vec![0; p * pages],
        };
        for _ in 0..self.accesses {
            let target = rng.gen_range(0..p);
            let word = rng.gen_range(0..pages * WORDS_PER_PAGE);
            let kind = if rng.gen_bool(self.puts) { Kind::Put } else { Kind::Get };
            let a = Access { kind, target: target as u32, word: word as u32 };
            let at = target * pages + a.page();
            match kind {
                Kind::Put => w.puts_to[at] += 1,
                Kind::Get => w.gets_to[at] += 1,
            }
            w.accesses.push(a);
        }
        Ok(w)
    }
}

/// What put `i` of `origin` writes.
pub fn value(origin: usize, i: usize) -> u64 {
    ((origin as u64 + 1) << ORIGIN_SHIFT) | i as u64
}

/// The (origin, index) of the put that wrote `v`, if `v` is a put's value.
pub fn writer(v: u64) -> Option<(usize, usize)> {
    let o = v >> ORIGIN_SHIFT;
    (v & INITIAL == 0 && o != 0).then(|| ((o - 1) as usize, (v & ((1 << ORIGIN_SHIFT) - 1)) as usize))
}

/// What word `word` of `rank`'s array holds before any put.
pub fn initial(rank: usize, word: usize) -> u64 {
    INITIAL | (rank as u64) << 32 | word as u64
}

/// Whether `v`, read from word `word` of `rank`'s array, is its initial value or the value of a
/// put to exactly that word (`writers[o]` are the accesses of origin `o`).
pub fn legal(writers: &[Vec<Access>], rank: usize, word: usize, v: u64) -> bool {
    if v == initial(rank, word) {
        return true;
    }
    let Some((o, i)) = writer(v) else { return false };
    writers.get(o).and_then(|w| w.get(i)).is_some_and(|a| a.kind == Kind::Put && a.target() == rank && a.word as usize == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix() -> Mix {
        Mix { ranks: 3, accesses: 20_000, puts: 0.3, pages: 64, seed: 11 }
    }

    #[test]
    fn workload_is_deterministic() {
        let m = mix();
        for o in 0..3 {
            let (a, b) = (m.workload(o).unwrap(), m.workload(o).unwrap());
            assert_eq!(a.accesses, b.accesses);
            assert_eq!(a.puts_to, b.puts_to);
            assert_eq!(a.gets_to, b.gets_to);
        }
        assert_ne!(m.workload(0).unwrap().accesses, m.workload(1).unwrap().accesses);
        assert_ne!(m.workload(0).unwrap().accesses, Mix { seed: 12, ..m }.workload(0).unwrap().accesses);
    }

    #[test]
    fn counts_match_accesses_and_share() {
        let m = mix();
        let w = m.workload(2).unwrap();
        assert_eq!((w.puts() + w.gets()) as usize, m.accesses);
        let mut puts = vec![0u64; m.ranks * m.pages];
        for a in &w.accesses {
            assert!(a.target() < m.ranks && a.page() < m.pages);
            if a.kind == Kind::Put {
                puts[a.target() * m.pages + a.page()] += 1;
            }
        }
        assert_eq!(puts, w.puts_to);
        let share = w.puts() as f64 / m.accesses as f64;
        assert!((share - 0.3).abs() < 0.02, "{share}");
        assert_eq!(Mix { puts: 0.0, ..m }.workload(0).unwrap().puts(), 0);
        assert_eq!(Mix { puts: 1.0, ..m }.workload(0).unwrap().gets(), 0);
    }

    #[test]
    fn values_name_their_writer() {
        let m = mix();
        let all: Vec<Vec<Access>> = (0..3).map(|o| m.workload(o).unwrap().accesses).collect();
        for (o, w) in all.iter().enumerate() {
            for (i, a) in w.iter().enumerate() {
                assert_eq!(writer(value(o, i)), Some((o, i)));
                assert_eq!(legal(&all, a.target(), a.word as usize, value(o, i)), a.kind == Kind::Put);
            }
        }
        assert_eq!(writer(initial(2, 77)), None);
        assert!(legal(&all, 2, 77, initial(2, 77)));
        assert!(!legal(&all, 1, 77, initial(2, 77)));
        assert!(!legal(&all, 0, 0, 0));
    }

    #[test]
    fn bad_mixes_are_refused() {
        assert!(Mix { puts: 1.5, ..mix() }.workload(0).is_err());
        assert!(Mix { pages: 0, ..mix() }.workload(0).is_err());
    }
}
