//! Single-producer single-consumer message rings in shared memory, one per ordered pair of
//! ranks. A slot is published by writing its stamp (ticket + 1) last, so the consumer never sees
//! a half-written slot, and a short message moves in one cache-line hand-off. The producer only
//! reads the consumer's head when its cached view says the ring is full (back-pressure).

use super::layout::{RingCtl, SlotHeader, SLOT_HEADER};
use crate::FragHeader;
use std::sync::atomic::Ordering;

pub struct Ring {
    ctl: *mut RingCtl,
    slots: *mut u8,
    nslots: usize,
    slot_size: usize,
}

impl Ring {
    pub fn new(base: *mut u8, nslots: usize, slot_size: usize) -> Ring {
        // SAFETY: the layout places the slots right after the control block.
        Ring { ctl: base as *mut RingCtl, slots: unsafe { base.add(std::mem::size_of::<RingCtl>()) }, nslots, slot_size }
    }

    #[inline]
    fn slot(&self, ticket: u64) -> *mut SlotHeader {
        // SAFETY: index is reduced modulo the slot count.
        unsafe { self.slots.add((ticket as usize & (self.nslots - 1)) * self.slot_size) as *mut SlotHeader }
    }

    /// Producer side; the caller holds the per-destination send lock.
    #[inline]
    /// `tag`: who the message is for and from, in a job that replaces dead ranks (mod.rs).
    pub fn try_push(&self, am: FragHeader, payload: &[u8], deliver_at: u64, tag: u32) -> bool {
        // SAFETY: ctl and slots point into the shared mapping; only this producer writes tail.
        unsafe {
            let ctl = &*self.ctl;
            let tail = ctl.tail.load(Ordering::Relaxed);
            if tail - ctl.head.load(Ordering::Acquire) >= self.nslots as u64 {
                return false;
            }
            let s = self.slot(tail);
            (*s).len = payload.len() as u32;
            (*s).tag = tag;
            (*s).deliver_at = deliver_at;
            (*s).am = am;
            std::ptr::copy_nonoverlapping(payload.as_ptr(), (s as *mut u8).add(SLOT_HEADER), payload.len());
            (*s).stamp.store(tail + 1, Ordering::Release);
            ctl.tail.store(tail + 1, Ordering::Relaxed);
            true
        }
    }

    /// Consumer side; hands up to `budget` complete slots to `f`, in order.
    #[inline]
    pub fn drain(&self, budget: usize, f: &mut dyn FnMut(FragHeader, &[u8], u32)) -> usize {
        // SAFETY: as above; only this consumer writes head.
        unsafe {
            let ctl = &*self.ctl;
            let mut head = ctl.head.load(Ordering::Relaxed);
            let mut n = 0;
            while n < budget {
                let s = self.slot(head);
                if (*s).stamp.load(Ordering::Acquire) != head + 1 {
                    break;
                }
                let at = (*s).deliver_at;
                if at != 0 && activerma_core::clock::now_ns() < at {
                    break; // the modelled network has not delivered it yet
                }
                let payload = std::slice::from_raw_parts((s as *const u8).add(SLOT_HEADER), (*s).len as usize);
                f((*s).am, payload, (*s).tag);
                head += 1;
                ctl.head.store(head, Ordering::Release);
                n += 1;
            }
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_backpressure() {
        let nslots = 4;
        let slot_size = 128;
        let layout = std::alloc::Layout::from_size_align(std::mem::size_of::<RingCtl>() + nslots * slot_size, 4096).unwrap();
        // SAFETY: zeroed, suitably aligned, freed at the end of the test.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        let r = Ring::new(mem, nslots, slot_size);
        for i in 0..4u64 {
            assert!(r.try_push([i, 0], &[i as u8; 10], 0, 0));
        }
        assert!(!r.try_push([9, 0], &[], 0, 0), "full ring refuses");
        let mut seen = vec![];
        assert_eq!(r.drain(2, &mut |h, p, _| seen.push((h[0], p.to_vec()))), 2);
        assert!(r.try_push([4, 0], &[4; 10], 0, 0));
        r.drain(10, &mut |h, p, _| seen.push((h[0], p.to_vec())));
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert!(seen.iter().all(|(i, p)| p == &vec![*i as u8; 10]));
        // SAFETY: allocated above with the same layout.
        unsafe { std::alloc::dealloc(mem, layout) };
    }
}
