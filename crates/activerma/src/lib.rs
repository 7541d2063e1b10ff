//! activerma: one-sided communication for Linux clusters.
//!
//! ```no_run
//! let world = activerma::init()?;
//! let seg = world.alloc_segment(4096)?;            // collective, same size everywhere
//! let next = (world.rank() + 1) % world.size();
//! world.put(seg.remote(next, 0), &[1, 2, 3])?;     // lands in rank `next`'s segment
//! world.barrier()?;
//! let counter = seg.remote(0, 64);
//! let ticket = world.fetch_add(counter, 1)?;       // atomic on rank 0
//! world.finalize()?;
//! # Ok::<(), activerma::Error>(())
//! ```
//!
//! Start programs with `activerma run -n N -- PROGRAM`; started alone, a program is a
//! one-rank job.

mod active_access;
mod exposed;
mod remote_ptr;
mod respawn;
mod segment;
mod world;

pub use activerma_access::log_append::kill_in_append as kill_in_log_append;
pub use activerma_access::log_ring::capacity_to_hold as log_capacity_to_hold;
pub use activerma_access::MAX_DOMAINS;
pub use activerma_access::{Actions, EntryMeta, LogEntry, LogHandler, LogOp, Notify};
pub use activerma_am::{AmCtx, Handler, HandlerId, ProgressMode, FIRST_USER_HANDLER, MAX_HANDLERS};
pub use activerma_core::counters::Counters;
pub use activerma_core::{settings, Config, Error, Rank, Result};
pub use activerma_mem::firehose::FirehoseStats;
pub use activerma_mem::part::{PageIn, PartStats};
pub use activerma_mem::{IotlbStats, Prot, RegistrationStats, Strategy};
pub use activerma_proto::{AtomicOp, AtomicPath, Element, Noncontig, OpHandle, PendingTransfer, Protocol, StridedPattern, Transfer};
#[cfg(feature = "mpi")]
pub use activerma_transport::mpi::initialized_comm_size as mpi_comm_size;
pub use activerma_transport::traffic::TrafficTo;
pub use activerma_transport::ControlMemory;
pub use exposed::Exposed;
pub use remote_ptr::RemotePtr;
pub use segment::Segment;
#[cfg(feature = "mpi")]
pub use world::init_mpi_comm;
pub use world::{init, init_with, World};

/// Bytes of translation table a rank needs with these settings (the launcher sizes the job's
/// shared memory with it).
pub fn table_bytes(cfg: &Config, heap_size: usize) -> Result<u64> {
    Ok(activerma_mem::TableLayout::from_config(cfg, heap_size)?.bytes() as u64)
}
