//! The access counter of the Active Access paper (section 4.2, evaluated in section 5.2.2):
//! counts the remote puts and gets to every page of a data structure (an array in a segment on
//! every rank), in the five designs the paper compares: AA-Poll, RMA, A-KV, Allreduce and
//! No-Cnt (no counting, the baseline). Every design runs the same accesses, and every counting
//! design must end with the same per-page counts at every rank — the ones the origins'
//! workloads say they sent.
//!
//! Run it with `activerma run -n 2 -- target/release/counter`.

pub mod array;
pub mod counter;
pub mod report;
pub mod run;
pub mod variant;
pub mod workload;

pub use array::{Array, Layout, PageCounts};
pub use counter::Counter;
pub use run::{run_all, run_variant, Outcome, Tally};
pub use variant::Variant;
pub use workload::{Access, Kind, Mix, Workload};
