//! The registry of outstanding non-blocking operations behind `arma_handle_t`.
//!
//! A C handle is a plain value the program can copy, forget or fill with garbage, so the
//! runtime keeps the truth: every nb call takes a slot and records the operation there, and the
//! handle names the slot and the slot's generation. `arma_wait` / `arma_test` accept only a
//! handle whose slot holds an operation of that generation; completing it frees the slot and
//! bumps its generation, so a copy of a completed handle, a zeroed handle (never issued, or
//! already completed) and a forged value are all refused with ARMA_ERR_INVALID_HANDLE instead
//! of "succeeding" on an operation that does not exist.
//!
//! ```text
//! issue(op):  slot = free.pop() or grow; slots[slot] = (gen, op);  handle = gen << 32 | slot
//! take(h):    (gen, slot) = split(h); slots[slot] holds gen ? its op : InvalidHandle
//! finish(h):  slots[slot] = empty; gen += 1 (never 0, so no live handle is 0); free.push(slot)
//! ```

use crate::status::{Fail, ARMA_ERR_INVALID_HANDLE};
use activerma::OpHandle;
use std::sync::Mutex;

struct Slot {
    generation: u32,
    /// The operation's completion token while outstanding.
    op: Option<u64>,
}

#[derive(Default)]
struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { slots: Vec::new(), free: Vec::new() });

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A panic elsewhere while holding the lock leaves the registry consistent (each update is
    // one assignment): keep using it.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn split(handle: u64) -> (u32, usize) {
    ((handle >> 32) as u32, handle as u32 as usize)
}

/// Records an issued operation and returns its handle value (never 0).
pub(crate) fn issue(op: OpHandle) -> u64 {
    let mut r = registry();
    let slot = match r.free.pop() {
        Some(s) => s as usize,
        None => {
            r.slots.push(Slot { generation: 1, op: None });
            r.slots.len() - 1
        }
    };
    let s = &mut r.slots[slot];
    s.op = Some(op.into_raw());
    (u64::from(s.generation) << 32) | slot as u64
}

fn invalid_handle(handle: u64) -> Fail {
    Fail {
        code: ARMA_ERR_INVALID_HANDLE,
        msg: format!(
            "handle {handle:#x} names no outstanding operation: it was never filled by arma_put_nb / arma_get_nb \
             (or that call failed), or its operation already completed (arma_wait, or arma_test reporting done)"
        ),
        failed_rank: None,
    }
}

/// The outstanding operation behind `handle`, still registered.
pub(crate) fn outstanding(handle: u64) -> Result<OpHandle, Fail> {
    let (generation, slot) = split(handle);
    let r = registry();
    match r.slots.get(slot) {
        Some(Slot { generation: g, op: Some(op) }) if *g == generation => Ok(OpHandle::from_raw(*op)),
        _ => Err(invalid_handle(handle)),
    }
}

/// Forgets a completed operation: its handle (and every copy of it) is invalid from now on.
pub(crate) fn finish(handle: u64) {
    let (generation, slot) = split(handle);
    let mut r = registry();
    if let Some(s) = r.slots.get_mut(slot).filter(|s| s.generation == generation && s.op.is_some()) {
        s.op = None;
        s.generation = s.generation.wrapping_add(1).max(1);
        r.free.push(slot as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_valid_until_finished_and_never_zero() {
        let a = issue(OpHandle::from_raw(0));
        let b = issue(OpHandle::from_raw(0));
        assert!(a != 0 && b != 0 && a != b);
        assert!(outstanding(a).is_ok() && outstanding(b).is_ok());
        finish(a);
        assert_eq!(outstanding(a).err().map(|f| f.code), Some(ARMA_ERR_INVALID_HANDLE), "a completed handle");
        let c = issue(OpHandle::from_raw(0)); // reuses a's slot with a new generation
        assert_ne!(c, a);
        assert!(outstanding(a).is_err(), "a copy of the completed handle stays invalid after its slot is reused");
        for forged in [0u64, u64::MAX, 0xdead_beef, b ^ (1 << 40)] {
            assert!(outstanding(forged).is_err(), "forged handle {forged:#x}");
        }
        finish(b);
        finish(c);
    }
}
