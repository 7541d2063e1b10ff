//! Firehose: distributed page registration (Bell & Bonachea 2003; the SMP variant of Bell &
//! Nishtala 2004). Any virtual address can be the target of one-sided access without pinning
//! everything: each rank may hold up to `f` *firehoses* on every other rank — buckets of that
//! rank's memory it keeps pinned for us. A request whose buckets all have firehoses (a hit)
//! proceeds one-sided; a miss sends one *move* message ("unpin these, pin those") and waits for
//! the reply. Pinned memory per rank never exceeds M + MAXVICTIM buckets.
//!
//! Pseudo-code and the reasoning behind the bounds: `docs/design/firehose.md`.
//!
//! ```text
//! config.rs        M, MAXVICTIM, f, bucket size (1 page = page-based; more = region flavour)
//! page_table.rs    local buckets: refcounts (local ops, remote firehoses), victim FIFO, budgets
//! remote_table.rs  one table per remote rank: firehose states, victim FIFO, slot accounting
//! victims.rs       the FIFO both tables use
//! bucket_map.rs    a remote table's entries, grouped so a run of buckets costs a lookup per group
//! smp.rs           remote requests of many threads: estimate, easy path, deadlock avoidance
//! api.rs           the Firehose object: the API, the AM-handler entry points, invalidation
//! (pinner)         trait Pinner, mlock/munlock and a counting fake: `crate::registration::pin`,
//!                  shared with the other registration strategies, re-exported here
//! transport.rs     trait MoveTransport, which the AM layer implements
//! stats.rs         counters
//! ```
//!
//! Plugging it in: the AM layer implements `MoveTransport` (send a `MoveRequest`, poll), its
//! request handler calls `Firehose::serve_move` and sends the `MoveReply` back, and its reply
//! handler calls `Firehose::move_done`.

mod api;
mod bucket_map;
mod config;
mod page_table;
mod remote_table;
mod smp;
mod stats;
mod transport;
mod victims;

pub use crate::registration::pin::{pin_error, CountingPinner, MlockPinner, Pinner};
pub use api::{Firehose, LocalPin, RemotePin, TargetCallback};
pub use config::{Config, Region};
pub use remote_table::FirehoseState;
pub use smp::DoneCallback;
pub use stats::FirehoseStats;
pub use transport::{MoveReply, MoveRequest, MoveTransport};

#[cfg(test)]
mod tests;
