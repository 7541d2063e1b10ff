//! activerma-dsm: an object DSM on activerma, after Jackal (Veldema & Philippsen, "Evaluation
//! of RDMA opportunities in an Object-Oriented DSM").
//!
//! ```no_run
//! use activerma_dsm::Dsm;
//! let w = activerma::init()?;
//! let mut dsm = Dsm::new(&w)?;                   // collective
//! let counter = dsm.alloc_at(0, 8)?;             // a region homed at rank 0
//! dsm.lock(counter)?;                            // Java's synchronized (counter) { .. }
//! let v: u64 = dsm.read(counter)?.get(0)?;
//! dsm.write(counter)?.set(0, v + 1)?;
//! dsm.unlock(counter)?;                          // the change is published
//! dsm.barrier()?;
//! # Ok::<(), activerma::Error>(())
//! ```
//! Regions have a home rank; a `GlobalRef` names one anywhere (store it in other regions to
//! build linked structures). Each rank reads and writes its own copy through access checks
//! (`read`, `write`); synchronization (`lock`, `unlock`, `wait`, `notify`, `barrier`) makes
//! changes visible under release consistency, by the protocol the run chose
//! (`ACTIVERMA_DSM_PROTOCOL`). Design: `docs/design/dsm.md`.

mod cache;
mod diff;
mod diff_array;
mod dsm;
mod global_ref;
mod handlers;
mod heap;
mod home;
mod lock_cache;
mod mailbox;
mod mirrors;
mod protocol;
mod shared;
mod sync;
mod update_in_place;
mod view;
mod wire;

pub use dsm::{Dsm, Stats};
pub use global_ref::{ArrayRef, GlobalRef};
pub use protocol::{config_with, Protocol};
pub use view::{ReadView, WriteView};
