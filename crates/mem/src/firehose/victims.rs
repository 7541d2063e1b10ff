//! Victim FIFO: pinned buckets (local table) or committed firehoses (remote tables) that nobody
//! uses. They stay valid, so a later request hits them for free; when room is needed the oldest
//! goes first. A doubly linked list threaded through a hash map gives O(1) removal when a hit
//! takes a victim back, which the paper's table 2 asks for.

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Debug, Clone, Copy)]
struct Link<K> {
    newer: Option<K>,
    older: Option<K>,
}

#[derive(Debug)]
pub(crate) struct VictimFifo<K> {
    links: HashMap<K, Link<K>>,
    newest: Option<K>,
    oldest: Option<K>,
}

impl<K: Copy + Eq + Hash> VictimFifo<K> {
    pub fn new() -> Self {
        VictimFifo { links: HashMap::new(), newest: None, oldest: None }
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn contains(&self, k: K) -> bool {
        self.links.contains_key(&k)
    }

    /// A bucket that just became unused: evicted last.
    pub fn push_newest(&mut self, k: K) {
        debug_assert!(!self.contains(k));
        let link = Link { newer: None, older: self.newest };
        if let Some(n) = self.newest {
            self.links.get_mut(&n).unwrap().newer = Some(k);
        } else {
            self.oldest = Some(k);
        }
        self.newest = Some(k);
        self.links.insert(k, link);
    }

    /// A bucket to evict first (a replacement handed back by a rollback).
    pub fn push_oldest(&mut self, k: K) {
        debug_assert!(!self.contains(k));
        let link = Link { newer: self.oldest, older: None };
        if let Some(o) = self.oldest {
            self.links.get_mut(&o).unwrap().older = Some(k);
        } else {
            self.newest = Some(k);
        }
        self.oldest = Some(k);
        self.links.insert(k, link);
    }

    pub fn remove(&mut self, k: K) -> bool {
        let Some(link) = self.links.remove(&k) else { return false };
        match link.newer {
            Some(n) => self.links.get_mut(&n).unwrap().older = link.older,
            None => self.newest = link.older,
        }
        match link.older {
            Some(o) => self.links.get_mut(&o).unwrap().newer = link.newer,
            None => self.oldest = link.newer,
        }
        true
    }

    pub fn pop_oldest(&mut self) -> Option<K> {
        let k = self.oldest?;
        self.remove(k);
        Some(k)
    }

    /// Removes and returns the oldest victim that `ok` accepts (a request never reaps a
    /// firehose it is about to use itself).
    pub fn pop_oldest_where(&mut self, ok: impl Fn(K) -> bool) -> Option<K> {
        let mut cur = self.oldest;
        while let Some(k) = cur {
            if ok(k) {
                self.remove(k);
                return Some(k);
            }
            cur = self.links[&k].newer;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::VictimFifo;

    #[test]
    fn firehose_victim_fifo_order_and_removal() {
        let mut f = VictimFifo::new();
        for k in 1..=4 {
            f.push_newest(k);
        }
        assert!(f.remove(2));
        assert!(!f.remove(2));
        f.push_oldest(9);
        assert_eq!(f.pop_oldest_where(|k| k != 9), Some(1));
        assert_eq!(f.pop_oldest(), Some(9));
        assert_eq!(f.pop_oldest(), Some(3));
        assert_eq!(f.pop_oldest(), Some(4));
        assert_eq!(f.pop_oldest(), None);
        assert_eq!(f.len(), 0);
    }
}
