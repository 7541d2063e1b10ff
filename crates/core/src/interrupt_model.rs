//! The modelled interrupt (`ACTIVERMA_NET_INTERRUPT_NS`; the paper measured 3 µs and stalled
//! its emulated handlers by that much). Handler threads that are woken by an "interrupt" —
//! wake-mode access logs (AA-Int) and the wake progress mode (AM-Ints) — normally sleep on a
//! futex, and a futex wake-up costs what the kernel and the hypervisor make it (26–38 µs on
//! the 2-CPU VM in docs/NOTES.md). With the model on they wait by polling instead and busy-wait
//! the modelled cost on the handler's
//! CPU, one interrupt per `every` items handled — the paper's AA-Int and AM-Ints raise an
//! interrupt every 10 inserts (its section 5.2.1):
//!
//! ```text
//! loop:
//!     if work waiting (an access log: at least its threshold of entries; messages: any):
//!         run the handlers over everything waiting: n items
//!         owed += n; spin(cost * (owed / every)); owed %= every     -- the interrupts
//!     else: poll again (IdlePoll: spin briefly, then yield)
//! ```
//! Only the CPU time of the interrupts is modelled, not their latency: the handler thread
//! polls, so it sees work within a poll (or a scheduler's turn on a shared CPU).

use crate::clock;

#[derive(Clone, Copy, Debug)]
pub struct ModelledInterrupt {
    cost_ns: u64,
    every: u64,
    /// Items handled since the last interrupt.
    owed: u64,
}

impl ModelledInterrupt {
    /// An interrupt of `cost_ns` (the network model's `interrupt_ns`) per `every` items; `None`
    /// when the cost is 0: the model is off (real futex wake-ups).
    pub fn new(cost_ns: u64, every: u64) -> Option<ModelledInterrupt> {
        (cost_ns != 0).then_some(ModelledInterrupt { cost_ns, every: every.max(1), owed: 0 })
    }

    /// The handlers ran over `items` more items: takes the interrupts they raised (busy-waits).
    pub fn handled(&mut self, items: u64) {
        self.owed += items;
        let interrupts = self.owed / self.every;
        self.owed %= self.every;
        if interrupts > 0 {
            clock::spin_until(clock::now_ns() + self.cost_ns * interrupts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_interrupt_per_every_items() {
        let mut m = ModelledInterrupt { cost_ns: 1_000_000, every: 10, owed: 0 };
        let t = clock::now_ns();
        m.handled(9); // none yet
        assert!(clock::now_ns() - t < 1_000_000);
        m.handled(12); // 21 items: two interrupts, one item owed
        assert!(clock::now_ns() - t >= 2_000_000);
        assert_eq!(m.owed, 1);
    }
}
