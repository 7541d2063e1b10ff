//! What Firehose needs from the active-message layer: send a move request, and poll.
//!
//! A firehose miss sends one *move* to the target: "unpin these buckets I had firehoses on,
//! pin these instead". The target's AM handler runs `Firehose::serve_move` (which never blocks:
//! it only takes the table lock and pins) and sends the returned `MoveReply` back; the origin's
//! reply handler runs `Firehose::move_done`. Hits send nothing.

use activerma_core::{Rank, Result};

/// A firehose move, origin -> target. Buckets are named by their base address in the
/// target's address space; every rank uses the same bucket size.
#[derive(Clone, Debug, PartialEq)]
pub struct MoveRequest {
    /// Chosen by the origin, echoed in the reply.
    pub move_id: u64,
    pub bucket_bytes: usize,
    /// Buckets the origin stops using (applied first, so pins never exceed the target's M).
    pub release: Vec<usize>,
    /// Buckets to pin for the origin.
    pub pin: Vec<usize>,
    /// Argument for the target-side callback (the paper's optional callback run at the target
    /// once the pin is done); `None` = do not run it.
    pub target_arg: Option<u64>,
}

/// A move's reply, target -> origin.
#[derive(Clone, Debug, PartialEq)]
pub struct MoveReply {
    pub move_id: u64,
    /// On error the releases took effect and none of the pins did.
    pub result: Result<()>,
    /// True when the target ran its callback.
    pub target_callback_ran: bool,
}

/// Implemented by the AM layer (and by fakes in tests).
pub trait MoveTransport: Send + Sync {
    /// Sends `req` to `target`. Must not wait for the reply. May deliver the reply at once
    /// (calling `move_done` from inside this call): Firehose calls it without holding its lock.
    /// Moves from one origin to one target may be delivered in any order.
    fn send_move(&self, target: Rank, req: MoveRequest) -> Result<()>;

    /// Runs pending active-message handlers (replies to our moves, moves from others). Called
    /// by threads that wait for a reply or for firehoses to be released; must return promptly.
    /// A no-op is fine when a progress thread runs the handlers.
    fn poll(&self);
}
