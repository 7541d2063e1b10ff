//! A fair (FIFO) lock on one 64-bit word of a segment: the high half hands out tickets, the
//! low half says whose turn it is. Used by the accumulate calls, ARMCI mutexes and
//! armci_lockmem. One word, so that taking a free lock is one remote fetch-add, which returns
//! the ticket drawn and the turn together (with two words it was a fetch-add and then a fetch:
//! two round trips across hosts). Both halves count modulo 2^32.
//!
//! ```text
//! acquire: old = fetch_add(word, 1 << 32); mine = high(old)
//!          while low(old) != mine: old = fetch(word)                (progress, yield)
//! release(mine): fetch_add(word, mine == 2^32 - 1 ? 1 - 2^32 : 1)
//!          (only the holder releases, and the turn is its ticket: the one add whose carry out
//!          of the low half would bump the tickets takes that carry back in the same atomic)
//! try:     s = fetch(word); high(s) == low(s) and compare_swap(word, s, s + (1 << 32)) == s
//! ```
//!
//! The holder keeps its ticket (`Ticket`) to release with.

use crate::errors::R;
use crate::state::rt;
use activerma::{RemotePtr, World};
use std::sync::atomic::{fence, Ordering};

const TICKET: u64 = 1 << 32;

fn next(word: u64) -> u32 {
    (word >> 32) as u32
}

fn serving(word: u64) -> u32 {
    word as u32
}

/// A held lock's ticket, which `release` needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ticket(u32);

/// Takes the lock whose word is at `at`.
pub(crate) fn acquire(w: &World, at: RemotePtr) -> R<Ticket> {
    let mut seen = w.fetch_add(at, TICKET).map_err(rt)?;
    let mine = next(seen);
    let mut spins = 0u32;
    while serving(seen) != mine {
        // Serve our own incoming requests (progress mode `app`) and let the holder run: with
        // more ranks than cores a busy wait would starve it.
        w.progress();
        spins += 1;
        if spins > 16 {
            std::thread::yield_now();
        }
        seen = w.fetch(at).map_err(rt)?;
    }
    // The holder's data movement must not be reordered before the lock is ours.
    fence(Ordering::SeqCst);
    Ok(Ticket(mine))
}

/// Takes the lock only if nobody holds it or waits for it: true when taken. The ticket is
/// drawn by a compare-and-swap of the whole word, so a busy lock is left untouched.
pub(crate) fn try_acquire(w: &World, at: RemotePtr) -> R<Option<Ticket>> {
    let seen = w.fetch(at).map_err(rt)?;
    if next(seen) != serving(seen) || w.compare_swap(at, seen, seen.wrapping_add(TICKET)).map_err(rt)? != seen {
        return Ok(None);
    }
    fence(Ordering::SeqCst);
    Ok(Some(Ticket(next(seen))))
}

/// Releases the lock held with `held`: hands it to the next ticket.
pub(crate) fn release(w: &World, at: RemotePtr, held: Ticket) -> R {
    fence(Ordering::SeqCst);
    w.fetch_add(at, turn_after(held)).map_err(rt)?;
    Ok(())
}

/// What the release adds: 1 to the turn, which is the holder's ticket; from 2^32 - 1 that
/// carries into the tickets, so the same add takes the carry back.
fn turn_after(held: Ticket) -> u64 {
    if held.0 == u32::MAX {
        1u64.wrapping_sub(TICKET)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_wrap_apart() {
        // The holder of ticket 2^32 - 1 releases while one more ticket (0, wrapped) was drawn:
        // the turn becomes 0 and the tickets stay where they were.
        let word = u32::MAX as u64; // tickets at 0 (wrapped), the turn at 2^32 - 1
        let after = word.wrapping_add(turn_after(Ticket(u32::MAX)));
        assert_eq!((next(after), serving(after)), (0, 0));
        let word = (7u64 << 32) | 5;
        let after = word.wrapping_add(turn_after(Ticket(5)));
        assert_eq!((next(after), serving(after)), (7, 6));
        let drawn = (u32::MAX as u64) << 32 | 3;
        assert_eq!((next(drawn.wrapping_add(TICKET)), serving(drawn.wrapping_add(TICKET))), (0, 3), "tickets wrap within the high half");
    }
}
