//! A modelled IOTLB: the translation cache in front of a rank's translation table.
//!
//! In the Active Access design the NIC's IOMMU translates every page a remote access touches;
//! translations come from a small IOTLB, and a miss costs a page-table walk. Our translation
//! table is read directly by the origin, so nothing in the software path behaves like that
//! cache. This model puts one back: every translation lookup (one per page an access touches)
//! goes through `Iotlb::lookup`, which keeps hit/miss counters and can charge a modelled cost
//! per miss by busy-waiting on the caller's thread. Size, associativity and eviction policy are
//! the knobs of the paper's IOTLB study (Figure 7c).
//!
//! The model is off by default (`entries` = 0); then `lookup` is a single branch and counts
//! nothing, so the normal path pays nothing for it being here.
//!
//! Organisation, as in hardware: `entries / ways` sets of `ways` entries each. A translation
//! `(rank, page)` lives in set `(page + h(rank)) mod sets`: consecutive pages of one rank go to
//! consecutive sets (like the low virtual-page-number bits a hardware IOTLB indexes with), and
//! the multiplicative hash `h` staggers ranks so page 0 of every rank does not land in set 0.

use activerma_core::clock::{now_ns, spin_until};
use activerma_core::{Error, Result};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Which entry of a full set a miss replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// The least recently used entry of the set.
    Lru,
    /// An entry of the set chosen by a pseudo-random generator (cheap in hardware, immune to
    /// the cyclic-scan pathology of LRU).
    Random,
}

/// The shape of a modelled IOTLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IotlbConfig {
    /// Number of cached translations; 0 turns the model off.
    pub entries: usize,
    /// Entries per set: 1 = direct-mapped, `entries` = fully associative. Must divide `entries`.
    pub ways: usize,
    pub eviction: Eviction,
    /// Modelled cost of one miss (the page-table walk), paid by busy-waiting; 0 = free.
    pub miss_cost_ns: u64,
}

impl Default for IotlbConfig {
    /// The model off.
    fn default() -> IotlbConfig {
        IotlbConfig { entries: 0, ways: 1, eviction: Eviction::Lru, miss_cost_ns: 0 }
    }
}

const WAYS_ACCEPTED: &str = "\"direct\", \"full\", or a number of ways (\"2\", \"4-way\", ...) that divides the entry count";

impl IotlbConfig {
    /// Builds a configuration from settings strings: `entries` a count ("64"; "0" = off),
    /// `ways` "direct" | "full" | a number, optionally with a "-way" suffix ("4", "4-way"),
    /// `eviction` "lru" | "random", `miss_cost_ns` a number of nanoseconds.
    /// With the model off, `ways` and `eviction` are still checked, so a typo does not go
    /// unnoticed until the model is turned on.
    pub fn parse(entries: &str, ways: &str, eviction: &str, miss_cost_ns: &str) -> Result<IotlbConfig> {
        let bad = |what: &str, value: &str, accepted: &str| {
            Error::InvalidArgument(format!("IOTLB {what} \"{value}\" is not valid; accepted: {accepted}"))
        };
        let n: usize = entries.trim().parse().map_err(|_| bad("entries", entries, "a whole number of entries, e.g. \"64\" (0 = off)"))?;
        let w = match ways.trim().to_ascii_lowercase().as_str() {
            "direct" | "direct-mapped" | "1-way" => 1,
            "full" | "fully" | "fully-associative" => n,
            t => match t.strip_suffix("-way").unwrap_or(t).parse::<usize>() {
                Ok(w) if w > 0 => w,
                _ => return Err(bad("ways", ways, WAYS_ACCEPTED)),
            },
        };
        let eviction = match eviction.trim().to_ascii_lowercase().as_str() {
            "lru" => Eviction::Lru,
            "random" => Eviction::Random,
            _ => return Err(bad("eviction policy", eviction, "\"lru\", \"random\"")),
        };
        let miss_cost_ns = miss_cost_ns
            .trim()
            .parse()
            .map_err(|_| bad("miss cost", miss_cost_ns, "a whole number of nanoseconds, e.g. \"100\" (0 = free)"))?;
        if n > 0 && (w > n || !n.is_multiple_of(w)) {
            return Err(Error::InvalidArgument(format!(
                "IOTLB ways \"{ways}\" is not valid for {n} entries: {n} entries do not split into sets of {w} ways; \
                 accepted: {WAYS_ACCEPTED}"
            )));
        }
        Ok(IotlbConfig { entries: n, ways: w.max(1), eviction, miss_cost_ns })
    }

    /// True when the configuration describes a working model (`Iotlb::new` accepts it).
    fn valid(&self) -> bool {
        self.entries == 0 || (self.ways > 0 && self.ways <= self.entries && self.entries.is_multiple_of(self.ways))
    }

    /// One line for reports, e.g. "64 entries, 4-way, LRU, 100 ns per miss", or "off".
    pub fn describe(&self) -> String {
        if self.entries == 0 {
            return "off".into();
        }
        let shape = if self.ways == 1 {
            "direct-mapped".to_string()
        } else if self.ways == self.entries {
            "fully associative".to_string()
        } else {
            format!("{}-way", self.ways)
        };
        let eviction = match self.eviction {
            Eviction::Lru => "LRU",
            Eviction::Random => "random",
        };
        let cost = if self.miss_cost_ns == 0 { "no miss cost".to_string() } else { format!("{} ns per miss", self.miss_cost_ns) };
        format!("{} entries, {shape}, {eviction}, {cost}", self.entries)
    }
}

/// Counters of a model since creation or the last `reset_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IotlbStats {
    pub hits: u64,
    pub misses: u64,
    /// `invalidate` calls (IOTLB invalidation commands), not translations dropped.
    pub invalidations: u64,
}

impl IotlbStats {
    /// Hits over lookups, or 1 when nothing was looked up (nothing missed).
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            1.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// A cached translation: which rank's page.
type Key = (u32, u64);

/// The cached translations. Sets are ranges of `slots` (`ways` each); `index` finds a key's
/// slot in O(1) whatever the associativity, so that a hit costs the simulator the same time
/// in every configuration (hardware compares a set's tags in parallel) and only the modelled
/// miss cost separates them.
struct Sets {
    index: HashMap<Key, usize, BuildHasherDefault<rustc_hash::FxHasher>>,
    /// (key, last use) per slot; `None` = empty.
    slots: Vec<Option<(Key, u64)>>,
    clock: u64,
    /// xorshift64 state for random eviction; fixed seed so a study is reproducible run to run.
    rng: u64,
}

struct Model {
    sets: Mutex<Sets>,
    nsets: u64,
    ways: usize,
    eviction: Eviction,
    miss_cost_ns: u64,
}

impl Model {
    #[inline]
    fn set_of(&self, rank: u32, page: u64) -> usize {
        // Fibonacci hashing of the rank: ranks land far apart, pages of a rank stay consecutive.
        let stagger = (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        (page.wrapping_add(stagger) % self.nsets) as usize
    }

    /// The slot a missing key replaces in its set: an empty one, else the least recently
    /// used (LRU) or a random one.
    fn victim(&self, s: &mut Sets, set: usize) -> usize {
        let range = set * self.ways..(set + 1) * self.ways;
        if let Some(i) = range.clone().find(|&i| s.slots[i].is_none()) {
            return i;
        }
        match self.eviction {
            Eviction::Lru => range.min_by_key(|&i| s.slots[i].map_or(0, |(_, t)| t)).unwrap(),
            Eviction::Random => {
                s.rng ^= s.rng << 13;
                s.rng ^= s.rng >> 7;
                s.rng ^= s.rng << 17;
                set * self.ways + (s.rng % self.ways as u64) as usize
            }
        }
    }
}

/// A modelled IOTLB shared by the threads of a rank. See the module documentation.
pub struct Iotlb {
    /// `None` when the model is off: `lookup` then tests this and returns.
    model: Option<Box<Model>>,
    cfg: IotlbConfig,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
}

impl Iotlb {
    /// # Panics
    /// If `cfg` has `entries` > 0 and `ways` is 0, larger than `entries` or does not divide it;
    /// `IotlbConfig::parse` never returns such a configuration.
    pub fn new(cfg: IotlbConfig) -> Iotlb {
        assert!(cfg.valid(), "invalid IOTLB configuration {cfg:?}: ways must be in 1..=entries and divide entries");
        let model = (cfg.entries > 0).then(|| {
            let nsets = cfg.entries / cfg.ways;
            Box::new(Model {
                sets: Mutex::new(Sets { index: HashMap::default(), slots: vec![None; cfg.entries], clock: 0, rng: 0x2545_f491_4f6c_dd1d }),
                nsets: nsets as u64,
                ways: cfg.ways,
                eviction: cfg.eviction,
                miss_cost_ns: cfg.miss_cost_ns,
            })
        });
        Iotlb { model, cfg, hits: AtomicU64::new(0), misses: AtomicU64::new(0), invalidations: AtomicU64::new(0) }
    }

    pub fn enabled(&self) -> bool {
        self.model.is_some()
    }

    pub fn config(&self) -> IotlbConfig {
        self.cfg
    }

    /// Looks up the translation of `(rank, page)`; true on a hit. A miss inserts it (evicting
    /// per the policy) and then busy-waits the modelled miss cost. With the model off: true,
    /// nothing counted.
    #[inline]
    pub fn lookup(&self, rank: u32, page: u64) -> bool {
        let Some(m) = &self.model else { return true };
        self.lookup_modelled(m, rank, page)
    }

    #[inline(never)]
    fn lookup_modelled(&self, m: &Model, rank: u32, page: u64) -> bool {
        // A miss costs `miss_cost_ns` from here, the simulator's own work included.
        let start = if m.miss_cost_ns > 0 { now_ns() } else { 0 };
        let key = (rank, page);
        let hit = {
            let mut g = m.sets.lock().unwrap();
            let s = &mut *g;
            s.clock += 1;
            let now = s.clock;
            match s.index.get(&key) {
                Some(&slot) => {
                    if m.eviction == Eviction::Lru {
                        s.slots[slot] = Some((key, now));
                    }
                    true
                }
                None => {
                    let slot = m.victim(s, m.set_of(rank, page));
                    if let Some((old, _)) = s.slots[slot].replace((key, now)) {
                        s.index.remove(&old);
                    }
                    s.index.insert(key, slot);
                    false
                }
            }
        };
        if hit {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            // Paid outside the lock: the cost is this access's latency, and holding the lock
            // would also serialise the other threads' hits behind our page walk.
            if m.miss_cost_ns > 0 {
                spin_until(start + m.miss_cost_ns);
            }
        }
        hit
    }

    /// Drops every cached translation of `rank` in pages `[first, first + count)`: the IOTLB
    /// invalidation the target issues when it changes a page's bits or unexposes memory.
    pub fn invalidate(&self, rank: u32, first: u64, count: u64) {
        let Some(m) = &self.model else { return };
        self.invalidations.fetch_add(1, Ordering::Relaxed);
        if count == 0 {
            return;
        }
        let end = first.saturating_add(count);
        let mut g = m.sets.lock().unwrap();
        let s = &mut *g;
        let slots = &mut s.slots;
        s.index.retain(|&(r, p), slot| {
            let stale = r == rank && p >= first && p < end;
            if stale {
                slots[*slot] = None;
            }
            !stale
        });
    }

    pub fn stats(&self) -> IotlbStats {
        IotlbStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
        }
    }

    /// Zeroes the counters; cached translations stay (e.g. to measure after a warm-up pass).
    pub fn reset_stats(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
        self.invalidations.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn tlb(entries: usize, ways: usize, eviction: Eviction) -> Iotlb {
        Iotlb::new(IotlbConfig { entries, ways, eviction, miss_cost_ns: 0 })
    }

    /// Looks up every page of `pages` once; returns how many hit.
    fn pass(t: &Iotlb, rank: u32, pages: impl IntoIterator<Item = u64>) -> usize {
        pages.into_iter().filter(|&p| t.lookup(rank, p)).count()
    }

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Iotlb>();
    }

    #[test]
    fn off_model_always_hits_and_counts_nothing() {
        let t = Iotlb::new(IotlbConfig::default());
        assert!(!t.enabled());
        assert_eq!(pass(&t, 0, 0..1000), 1000);
        t.invalidate(0, 0, 10);
        assert_eq!(t.stats(), IotlbStats::default());
        assert_eq!(t.config().describe(), "off");
    }

    #[test]
    fn working_set_that_fits_hits_after_first_pass() {
        for (ways, eviction) in [(64, Eviction::Lru), (64, Eviction::Random), (4, Eviction::Lru), (4, Eviction::Random)] {
            let t = tlb(64, ways, eviction);
            assert_eq!(pass(&t, 2, 100..164), 0, "{ways}-way {eviction:?}: cold pass misses");
            for _ in 0..5 {
                assert_eq!(pass(&t, 2, 100..164), 64, "{ways}-way {eviction:?}: warm passes hit");
            }
            assert_eq!(t.stats(), IotlbStats { hits: 5 * 64, misses: 64, invalidations: 0 });
        }
    }

    #[test]
    fn cyclic_scan_one_past_capacity_defeats_lru_not_random() {
        let lru = tlb(64, 64, Eviction::Lru);
        let random = tlb(64, 64, Eviction::Random);
        for _ in 0..20 {
            pass(&lru, 0, 0..65);
            pass(&random, 0, 0..65);
        }
        assert_eq!(lru.stats().hits, 0, "LRU evicts exactly the page needed next");
        eprintln!("cyclic 65 pages over 64 entries: LRU hit rate {:.3}, random {:.3}", lru.stats().hit_rate(), random.stats().hit_rate());
        assert!(random.stats().hits > 0);
    }

    #[test]
    fn direct_mapped_conflict_pages_evict_each_other() {
        let t = tlb(8, 1, Eviction::Lru);
        let m = t.model.as_deref().unwrap();
        let (a, b) = (3, 3 + 8);
        assert_eq!(m.set_of(1, a), m.set_of(1, b));
        for _ in 0..10 {
            assert!(!t.lookup(1, a));
            assert!(!t.lookup(1, b));
        }
        // Pages in different sets coexist.
        assert!(!t.lookup(1, 4));
        assert!(!t.lookup(1, 5));
        assert!(t.lookup(1, 4) && t.lookup(1, 5));
        // Two ways hold the conflicting pair.
        let t2 = tlb(8, 2, Eviction::Lru);
        pass(&t2, 1, [a, a + 4, a, a + 4]);
        assert_eq!(t2.stats(), IotlbStats { hits: 2, misses: 2, invalidations: 0 });
    }

    #[test]
    fn locality_favours_lru_and_associativity() {
        // 90% of lookups to 48 hot pages (fit in 64 entries), 10% uniform over 1 Mi pages.
        let run = |ways: usize, eviction: Eviction| {
            let t = tlb(64, ways, eviction);
            let mut rng = XorShift(0x1234_5678_9abc_def1);
            for _ in 0..200_000 {
                let r = rng.next();
                let page = if r % 10 < 9 { 1000 + (r >> 8) % 48 } else { (r >> 8) % (1 << 20) };
                t.lookup(0, page);
            }
            t.stats().hit_rate()
        };
        let (full_lru, full_random) = (run(64, Eviction::Lru), run(64, Eviction::Random));
        let (four_lru, direct) = (run(4, Eviction::Lru), run(1, Eviction::Lru));
        eprintln!("locality hit rates: full LRU {full_lru:.4}, full random {full_random:.4}, 4-way LRU {four_lru:.4}, direct {direct:.4}");
        assert!(full_lru >= full_random);
        assert!(full_lru >= four_lru && four_lru >= direct);
    }

    #[test]
    fn invalidate_drops_exactly_the_range_of_that_rank() {
        let t = tlb(64, 64, Eviction::Lru);
        pass(&t, 0, 0..16);
        pass(&t, 1, 0..16);
        t.invalidate(0, 4, 4);
        let hits: Vec<bool> = (0..16).map(|p| t.lookup(0, p)).collect();
        assert_eq!(hits, (0..16).map(|p| !(4..8).contains(&p)).collect::<Vec<_>>());
        assert_eq!(pass(&t, 1, 0..16), 16, "the other rank is untouched");
        // A range longer than the number of sets takes the scan-everything path.
        let t = tlb(64, 4, Eviction::Lru);
        pass(&t, 0, 0..32);
        pass(&t, 1, 0..32);
        t.invalidate(1, 10, 20);
        assert_eq!(pass(&t, 1, 0..32), 12);
        assert_eq!(pass(&t, 0, 0..32), 32);
        t.invalidate(0, 0, u64::MAX);
        assert_eq!(pass(&t, 0, 0..32), 0);
        assert_eq!(t.stats().invalidations, 2);
    }

    #[test]
    fn parse_accepts_the_documented_forms() {
        let c = IotlbConfig::parse("64", "4", "lru", "100").unwrap();
        assert_eq!(c, IotlbConfig { entries: 64, ways: 4, eviction: Eviction::Lru, miss_cost_ns: 100 });
        assert_eq!(c.describe(), "64 entries, 4-way, LRU, 100 ns per miss");
        let c = IotlbConfig::parse("64", "full", "random", "0").unwrap();
        assert_eq!((c.ways, c.eviction), (64, Eviction::Random));
        assert_eq!(c.describe(), "64 entries, fully associative, random, no miss cost");
        assert_eq!(IotlbConfig::parse("32", "direct", "LRU", "0").unwrap().ways, 1);
        assert_eq!(IotlbConfig::parse("32", "8-way", "lru", "0").unwrap().ways, 8);
        assert_eq!(IotlbConfig::parse("0", "full", "lru", "0").unwrap().describe(), "off");
    }

    #[test]
    fn parse_errors_name_the_bad_value_and_the_accepted_ones() {
        let msg = |r: Result<IotlbConfig>| match r {
            Err(e @ Error::InvalidArgument(_)) => e.to_string(),
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        let m = msg(IotlbConfig::parse("64", "3-way", "lru", "0"));
        assert!(m.contains("\"3-way\"") && m.contains("64 entries") && m.contains("direct"), "{m}");
        let m = msg(IotlbConfig::parse("64", "128", "lru", "0"));
        assert!(m.contains("\"128\""), "{m}");
        let m = msg(IotlbConfig::parse("64", "4", "fifo", "0"));
        assert!(m.contains("\"fifo\"") && m.contains("\"lru\"") && m.contains("\"random\""), "{m}");
        let m = msg(IotlbConfig::parse("abc", "4", "lru", "0"));
        assert!(m.contains("\"abc\"") && m.contains("entries"), "{m}");
        let m = msg(IotlbConfig::parse("64", "abc", "lru", "0"));
        assert!(m.contains("\"abc\"") && m.contains("full"), "{m}");
        let m = msg(IotlbConfig::parse("64", "0", "lru", "0"));
        assert!(m.contains("\"0\""), "{m}");
        let m = msg(IotlbConfig::parse("64", "4", "lru", "1us"));
        assert!(m.contains("\"1us\"") && m.contains("nanoseconds"), "{m}");
        // With the model off, the shape is not checked against the entry count, but typos are caught.
        assert!(IotlbConfig::parse("0", "3", "lru", "0").is_ok());
        assert!(IotlbConfig::parse("0", "4", "fifo", "0").is_err());
    }

    #[test]
    fn misses_pay_the_modelled_cost() {
        let t = Iotlb::new(IotlbConfig { entries: 16, ways: 16, eviction: Eviction::Lru, miss_cost_ns: 20_000 });
        let start = Instant::now();
        assert_eq!(pass(&t, 0, 0..10), 0);
        let took = start.elapsed();
        assert!(took.as_micros() >= 200, "10 misses at 20 µs took only {took:?}");
        assert_eq!(t.stats().misses, 10);
    }

    #[test]
    fn concurrent_lookups_count_every_lookup() {
        let t = tlb(64, 4, Eviction::Random);
        std::thread::scope(|s| {
            for th in 0..4u64 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        t.lookup(0, (i * 7 + th) % 100);
                    }
                });
            }
        });
        let st = t.stats();
        assert_eq!(st.hits + st.misses, 40_000);
        t.reset_stats();
        assert_eq!(t.stats(), IotlbStats::default());
    }
}
