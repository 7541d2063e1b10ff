//! Completion of non-blocking operations. On one host the data moves when the operation is
//! issued; what remains is the modelled network's completion time (0 when it is off).

use activerma_core::clock::now_ns;

#[inline]
pub(crate) fn spin_until(at_ns: u64) {
    if at_ns != 0 {
        activerma_core::clock::spin_until(at_ns);
    }
}

/// The completion time of an operation whose wire time ends at `at` (0: no link modelled)
/// and whose target then does `ns` more of modelled work (an active put's log entries, which
/// land after its data; `put_active::run`). The origin's CPU has already waited those `ns`, so
/// without a link model there is nothing left to wait for.
#[inline]
pub(crate) fn plus_target_work(at: u64, ns: u64) -> u64 {
    if at == 0 || ns == 0 {
        at
    } else {
        (at + ns).max(now_ns())
    }
}

/// Handle of a non-blocking operation.
#[must_use = "a non-blocking operation must be waited for (or tested until complete)"]
#[derive(Debug)]
pub struct OpHandle {
    ready_at: u64,
}

impl OpHandle {
    pub(crate) fn new(ready_at: u64) -> OpHandle {
        OpHandle { ready_at }
    }
    /// The handle as a plain number (for the C API): its modelled completion time, 0 = done.
    pub fn into_raw(self) -> u64 {
        self.ready_at
    }
    pub fn from_raw(ready_at: u64) -> OpHandle {
        OpHandle { ready_at }
    }
    /// True once the operation is remotely complete.
    pub fn test(&self) -> bool {
        self.ready_at == 0 || now_ns() >= self.ready_at
    }
    /// Blocks until the operation is remotely complete.
    pub fn wait(self) {
        spin_until(self.ready_at);
    }
}
