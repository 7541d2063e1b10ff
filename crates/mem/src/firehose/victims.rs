//! Victim FIFO: pinned buckets (local table) or committed firehoses (remote tables) that nobody
//! uses. They stay valid, so a later request hits them for free; when room is needed the oldest
//! goes first. A doubly linked list in a slab, indexed by a hash map, gives O(1) removal when a
//! hit takes a victim back, which the paper's table 2 asks for — with one hash operation per
//! push or removal: every firehose hit takes a victim out and its release puts it back, so this
//! sits on the hit path of every bucket of every put.

use rustc_hash::FxHashMap;
use std::hash::Hash;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node<K> {
    key: K,
    newer: u32,
    older: u32,
}

#[derive(Debug)]
pub(crate) struct VictimFifo<K> {
    index: FxHashMap<K, u32>,
    slab: Vec<Node<K>>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
}

impl<K: Copy + Eq + Hash> VictimFifo<K> {
    pub fn new() -> Self {
        VictimFifo { index: FxHashMap::default(), slab: Vec::new(), free: Vec::new(), newest: NIL, oldest: NIL }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn contains(&self, k: K) -> bool {
        self.index.contains_key(&k)
    }

    fn alloc(&mut self, node: Node<K>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = node;
                i
            }
            None => {
                self.slab.push(node);
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// A bucket that just became unused: evicted last.
    pub fn push_newest(&mut self, k: K) {
        debug_assert!(!self.contains(k));
        let i = self.alloc(Node { key: k, newer: NIL, older: self.newest });
        match self.newest {
            NIL => self.oldest = i,
            n => self.slab[n as usize].newer = i,
        }
        self.newest = i;
        self.index.insert(k, i);
    }

    /// A bucket to evict first (a replacement handed back by a rollback).
    pub fn push_oldest(&mut self, k: K) {
        debug_assert!(!self.contains(k));
        let i = self.alloc(Node { key: k, newer: self.oldest, older: NIL });
        match self.oldest {
            NIL => self.newest = i,
            o => self.slab[o as usize].older = i,
        }
        self.oldest = i;
        self.index.insert(k, i);
    }

    pub fn remove(&mut self, k: K) -> bool {
        let Some(i) = self.index.remove(&k) else { return false };
        self.unlink(i);
        true
    }

    fn unlink(&mut self, i: u32) {
        let Node { newer, older, .. } = self.slab[i as usize];
        match newer {
            NIL => self.newest = older,
            n => self.slab[n as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slab[o as usize].newer = newer,
        }
        self.free.push(i);
    }

    pub fn pop_oldest(&mut self) -> Option<K> {
        self.pop_oldest_where(|_| true)
    }

    /// Removes and returns the oldest victim that `ok` accepts (a request never reaps a
    /// firehose it is about to use itself).
    pub fn pop_oldest_where(&mut self, ok: impl Fn(K) -> bool) -> Option<K> {
        let mut cur = self.oldest;
        while cur != NIL {
            let node = self.slab[cur as usize];
            if ok(node.key) {
                self.index.remove(&node.key);
                self.unlink(cur);
                return Some(node.key);
            }
            cur = node.newer;
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
