//! The C API of activerma (`libactiverma.so` / `.a`, `include/activerma.h`).
//!
//! One process-global `World` stands behind the C calls (`arma_init` creates it). Every entry
//! point returns a status code, records the full message of a failure for `arma_last_error`,
//! and catches panics: nothing unwinds into C.
//!
//! The doc comments on the `extern "C"` items become the comments in the generated header.

// Each pointer's contract is stated in its function's doc comment, which is what C readers see
// in the header; a Rust-only `# Safety` section would repeat it there.
#![allow(clippy::missing_safety_doc)]

// cbindgen writes the header in the order it parses these modules; the blank lines keep rustfmt
// from sorting them.
mod status; // status codes, messages, the panic barrier

mod job; // init, finalize, rank, size, collectives

mod memory; // segments and exposed private memory

mod rma; // puts, gets, handles, flush

mod atomics;

mod active_access; // Active Access: page actions, access logs, active flush

mod respawn; // surviving a rank's death

mod dsm; // the object DSM

mod state; // the process-global World and registries (not in the header)

mod handles; // the registry of outstanding nb operations (not in the header)

#[cfg(test)]
mod one_rank_tests;

pub use active_access::*;
pub use atomics::*;
pub use dsm::*;
pub use job::*;
pub use memory::*;
pub use respawn::*;
pub use rma::*;
pub use status::*;
