//! One rank's local volume of the hash table (section 4.1 of the Active Access paper), in a
//! segment so that every variant can reach it: a table of `table` cells and an overflow heap of
//! `heap` cells (cells are `{elem, ptr}`, 16 bytes, in one array: the heap starts at index
//! `table`), the next free heap cell, the most recently inserted element of every table
//! position (`last_ptr`), and the page that active deletes are put to.
//!
//! ```text
//! | cells[table + heap] | next_free (own page) | last_ptr[table] | delete page |
//! ```
//!
//! An element is a non-zero u64 key whose low bits are its table position; `0` is an empty
//! cell and a null pointer (heap cells are never index 0), `TOMBSTONE` a deleted element.

use activerma::{RemotePtr, Segment, World};
use std::sync::atomic::{AtomicU64, Ordering};

pub const CELL: usize = 16;
pub const TOMBSTONE: u64 = u64::MAX;
const PAGE: usize = 4096;

/// Where the parts of a volume are, identical on every rank.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub table: usize,
    pub heap: usize,
    pub next_free_off: usize,
    pub last_ptr_off: usize,
    pub delete_off: usize,
    pub bytes: usize,
}

impl Layout {
    /// `table` must be a power of two (positions are the key's low bits).
    pub fn new(table: usize, heap: usize) -> Layout {
        assert!(table.is_power_of_two() && table >= 2, "table cells must be a power of two");
        let cells = ((table + heap) * CELL).next_multiple_of(PAGE);
        let next_free_off = cells;
        let last_ptr_off = next_free_off + PAGE;
        let delete_off = last_ptr_off + (table * 8).next_multiple_of(PAGE);
        Layout { table, heap, next_free_off, last_ptr_off, delete_off, bytes: delete_off + PAGE }
    }

    pub fn position(&self, key: u64) -> usize {
        (key & (self.table as u64 - 1)) as usize
    }

    pub fn cells_bytes(&self) -> usize {
        self.next_free_off
    }
}

/// Elements and chains of one volume could not take an insert.
#[derive(Debug)]
pub struct Full;

/// This rank's volume, and the addresses of everybody's.
pub struct Volume {
    pub layout: Layout,
    pub seg: Segment,
}

impl Volume {
    /// Collective: every rank allocates its volume.
    pub fn alloc(world: &World, layout: Layout) -> activerma::Result<Volume> {
        let seg = world.alloc_segment(layout.bytes)?;
        let v = Volume { layout, seg };
        v.reset();
        Ok(v)
    }

    /// Empties the local volume (no remote access may be in flight: call between barriers).
    pub fn reset(&self) {
        // SAFETY: our own segment, `bytes` long; nobody else writes it between the barriers.
        unsafe { std::ptr::write_bytes(self.seg.as_ptr(), 0, self.layout.bytes) };
        self.word(self.layout.next_free_off).store(self.layout.table as u64, Ordering::Relaxed);
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= self.layout.bytes);
        // SAFETY: 8-aligned inside our segment; every access to volume words (local CPU or a
        // remote rank's atomics and puts) is a whole aligned word.
        unsafe { &*(self.seg.as_ptr().add(off) as *const AtomicU64) }
    }
    fn elem(&self, cell: usize) -> &AtomicU64 {
        self.word(cell * CELL)
    }
    fn ptr(&self, cell: usize) -> &AtomicU64 {
        self.word(cell * CELL + 8)
    }

    // Addresses on rank `r`, for the RMA and Active Access variants.
    pub fn elem_at(&self, r: usize, cell: usize) -> RemotePtr {
        self.seg.remote(r, cell * CELL)
    }
    pub fn ptr_at(&self, r: usize, cell: usize) -> RemotePtr {
        self.seg.remote(r, cell * CELL + 8)
    }
    pub fn next_free_at(&self, r: usize) -> RemotePtr {
        self.seg.remote(r, self.layout.next_free_off)
    }
    pub fn last_ptr_at(&self, r: usize, pos: usize) -> RemotePtr {
        self.seg.remote(r, self.layout.last_ptr_off + pos * 8)
    }
    pub fn delete_page_at(&self, r: usize) -> RemotePtr {
        self.seg.remote(r, self.layout.delete_off)
    }
    /// True when `addr` (an address in this rank's memory, from a log entry) is in the delete page.
    pub fn is_delete_addr(&self, addr: u64) -> bool {
        let base = self.seg.as_ptr() as u64 + self.layout.delete_off as u64;
        (base..base + PAGE as u64).contains(&addr)
    }

    /// The paper's `local_insert` (Listing 3), run where the volume lives: the handlers of the
    /// Active Access and active-message variants. Local atomics make it safe against other
    /// local inserters (handler threads, several logs) and against remote RMA atomics.
    pub fn local_insert(&self, key: u64) -> Result<(), Full> {
        let pos = self.layout.position(key);
        if self.elem(pos).compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return Ok(());
        }
        let free = self.word(self.layout.next_free_off).fetch_add(1, Ordering::AcqRel) as usize;
        if free >= self.layout.table + self.layout.heap {
            return Err(Full);
        }
        self.elem(free).store(key, Ordering::Release);
        // Swapping last_ptr orders the inserters of one position: each links itself behind
        // exactly one predecessor (the table cell itself when there was none).
        let prev = self.word(self.layout.last_ptr_off + pos * 8).swap(free as u64, Ordering::AcqRel) as usize;
        let link = if prev == 0 { pos } else { prev };
        self.ptr(link).store(free as u64, Ordering::Release);
        Ok(())
    }

    /// Marks `key` deleted in its chain; false when it is not there.
    pub fn local_delete(&self, key: u64) -> bool {
        let mut cell = self.layout.position(key);
        loop {
            if self.elem(cell).compare_exchange(key, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return true;
            }
            match self.ptr(cell).load(Ordering::Acquire) as usize {
                0 => return false,
                next => cell = next,
            }
        }
    }

    /// The live keys of every chain, position by position, each chain sorted (which cell of
    /// a chain a key landed in depends on timing; which chain it is in does not). Also checks
    /// the chains' shape: every used heap cell is reached exactly once, from the right position.
    pub fn contents(&self) -> Result<Contents, String> {
        let l = &self.layout;
        let used_heap = (self.word(l.next_free_off).load(Ordering::Acquire) as usize).min(l.table + l.heap) - l.table;
        let mut reached = vec![false; used_heap];
        let mut c = Contents::default();
        let mut chain = Vec::new();
        for pos in 0..l.table {
            chain.clear();
            let mut cell = pos;
            loop {
                let e = self.elem(cell).load(Ordering::Acquire);
                if e != 0 && e != TOMBSTONE {
                    if l.position(e) != pos {
                        return Err(format!("key {e:#x} at position {pos} belongs to {}", l.position(e)));
                    }
                    chain.push(e);
                }
                c.tombstones += (e == TOMBSTONE) as u64;
                let next = self.ptr(cell).load(Ordering::Acquire) as usize;
                if next == 0 {
                    break;
                }
                if next < l.table || next >= l.table + used_heap || std::mem::replace(&mut reached[next - l.table], true) {
                    return Err(format!("chain of position {pos} reaches heap cell {next} twice or out of range"));
                }
                cell = next;
            }
            if !chain.is_empty() {
                chain.sort_unstable();
                c.keys += chain.len() as u64;
                c.digest = c.digest.wrapping_add(mix(pos as u64, &chain));
            }
        }
        if let Some(missing) = reached.iter().position(|r| !r) {
            return Err(format!("heap cell {} was taken but is in no chain (a lost insert)", l.table + missing));
        }
        Ok(c)
    }
}

/// What a volume holds, in a form that two runs can compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    pub keys: u64,
    pub tombstones: u64,
    /// Order-independent over positions; each position's chain hashed in sorted order.
    pub digest: u64,
}

fn mix(pos: u64, chain: &[u64]) -> u64 {
    // FNV-1a over the words, then a finalizer: cheap, and any changed key changes it.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ pos.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for &k in chain {
        h = (h ^ k).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}
