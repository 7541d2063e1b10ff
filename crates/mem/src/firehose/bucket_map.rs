//! A remote table's firehose entries by bucket address. Buckets are grouped GROUP at a time
//! (consecutive, aligned) under one hash-map key, so a put's run of buckets — 16 or 17 for 64
//! KiB over 4 KiB pages — costs one or two hash lookups on the hit path instead of one per
//! bucket; the rest is array indexing.

use super::config::Buckets;
use rustc_hash::FxHashMap;

/// Buckets per group.
const GROUP: usize = 64;

struct Group<V> {
    slots: [Option<V>; GROUP],
    used: usize,
}

pub(crate) struct BucketMap<V> {
    /// log2 of the bucket size: bucket address >> shift = bucket number.
    shift: u32,
    groups: FxHashMap<usize, Group<V>>,
    len: usize,
}

impl<V> BucketMap<V> {
    pub fn new(bucket_bytes: usize) -> Self {
        debug_assert!(bucket_bytes.is_power_of_two());
        BucketMap { shift: bucket_bytes.trailing_zeros(), groups: FxHashMap::default(), len: 0 }
    }

    fn key(&self, b: usize) -> (usize, usize) {
        let n = b >> self.shift;
        (n / GROUP, n % GROUP)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, b: &usize) -> Option<&V> {
        let (g, i) = self.key(*b);
        self.groups.get(&g)?.slots[i].as_ref()
    }

    pub fn get_mut(&mut self, b: &usize) -> Option<&mut V> {
        let (g, i) = self.key(*b);
        self.groups.get_mut(&g)?.slots[i].as_mut()
    }

    pub fn contains_key(&self, b: &usize) -> bool {
        self.get(b).is_some()
    }

    /// Inserts or replaces; returns the entry replaced.
    pub fn insert(&mut self, b: usize, v: V) -> Option<V> {
        let (g, i) = self.key(b);
        let group = self.groups.entry(g).or_insert_with(|| Group { slots: std::array::from_fn(|_| None), used: 0 });
        let old = group.slots[i].replace(v);
        if old.is_none() {
            group.used += 1;
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, b: &usize) -> Option<V> {
        let (g, i) = self.key(*b);
        let group = self.groups.get_mut(&g)?;
        let old = group.slots[i].take()?;
        group.used -= 1;
        self.len -= 1;
        if group.used == 0 {
            self.groups.remove(&g);
        }
        Some(old)
    }

    /// Every (bucket address, entry), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &V)> + '_ {
        self.groups.iter().flat_map(move |(&g, group)| {
            group.slots.iter().enumerate().filter_map(move |(i, v)| v.as_ref().map(|v| ((g * GROUP + i) << self.shift, v)))
        })
    }

    /// Calls `f(bucket, entry)` for the buckets of `bk` in order, one hash lookup per group,
    /// until `f` returns false; returns whether it never did.
    pub fn run_mut(&mut self, bk: Buckets, mut f: impl FnMut(usize, Option<&mut V>) -> bool) -> bool {
        debug_assert_eq!(bk.bytes, 1 << self.shift);
        let shift = self.shift;
        let (mut n, end) = (bk.first >> shift, (bk.first >> shift) + bk.count);
        while n < end {
            let g = n / GROUP;
            let stop = ((g + 1) * GROUP).min(end);
            let mut group = self.groups.get_mut(&g);
            for m in n..stop {
                if !f(m << shift, group.as_mut().and_then(|grp| grp.slots[m % GROUP].as_mut())) {
                    return false;
                }
            }
            n = stop;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cross_groups_and_empty_groups_go() {
        let bytes = 4096;
        let mut m: BucketMap<u32> = BucketMap::new(bytes);
        // Buckets 60..70 straddle the boundary between groups 0 and 1; 65 stays empty.
        for n in (60..70).filter(|&n| n != 65) {
            assert_eq!(m.insert(n * bytes, n as u32), None);
        }
        assert_eq!(m.len(), 9);
        assert_eq!(m.insert(61 * bytes, 161), Some(61));
        let mut seen = Vec::new();
        let all = m.run_mut(Buckets { first: 58 * bytes, count: 14, bytes }, |b, v| {
            seen.push((b / bytes, v.map(|v| *v)));
            true
        });
        assert!(all);
        assert_eq!(seen.len(), 14);
        assert_eq!(seen[0], (58, None));
        assert_eq!(seen[3], (61, Some(161)));
        assert_eq!(seen[7], (65, None));
        assert_eq!(seen[8], (66, Some(66)));
        // Stops where f says so.
        let mut n = 0;
        assert!(!m.run_mut(Buckets { first: 60 * bytes, count: 10, bytes }, |_, _| {
            n += 1;
            n < 3
        }));
        assert_eq!(n, 3);
        let mut keys: Vec<usize> = m.iter().map(|(b, _)| b / bytes).collect();
        keys.sort_unstable();
        assert_eq!(keys, [60, 61, 62, 63, 64, 66, 67, 68, 69]);
        for n in (60..70).filter(|&n| n != 65) {
            assert!(m.remove(&(n * bytes)).is_some());
        }
        assert_eq!((m.len(), m.groups.len()), (0, 0), "empty groups are dropped");
        assert!(m.get(&(60 * bytes)).is_none() && !m.contains_key(&(61 * bytes)));
    }
}
