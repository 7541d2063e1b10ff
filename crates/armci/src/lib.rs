//! ARMCI on activerma: the C library `libarmci` behind `include/armci.h` and `message.h`.
//!
//! One process-global `World` (state.rs) stands behind the calls. ARMCI reports bad input by
//! ending the job (ARMCI_Error), so every entry point runs its body through `errors::entry`,
//! which turns a failure, or a caught panic, into that exit: nothing unwinds into C and no
//! call returns after a bad argument.

// Every entry point takes raw pointers from C; their contracts are ARMCI's, stated in the
// header, and a Rust `# Safety` section on each would repeat them.
#![allow(clippy::missing_safety_doc)]

mod acc_active;
mod accumulate;
mod atomics;
mod contiguous;
mod errors;
mod group_memory;
mod group_pool;
mod groups;
mod in_flight;
mod memory;
mod message;
#[cfg(feature = "mpi")]
mod mpi_comm;
mod mutexes;
mod notify;
mod point_to_point;
mod profiling;
mod state;
mod strided;
mod sync;
mod ticket;
mod topology;
mod values;
mod vector;

pub use accumulate::*;
pub use atomics::*;
pub use contiguous::*;
pub use errors::*;
pub use groups::*;
pub use memory::*;
pub use message::*;
#[cfg(feature = "mpi")]
pub use mpi_comm::*;
pub use mutexes::*;
pub use notify::*;
pub use point_to_point::*;
pub use profiling::*;
pub use state::*;
pub use strided::*;
pub use sync::*;
pub use topology::*;
pub use values::*;
pub use vector::*;
