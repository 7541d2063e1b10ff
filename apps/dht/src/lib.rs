//! The distributed hash table of the Active Access paper (section 4.1), in the eight designs
//! it is evaluated with (section 5.2.1): AA-Poll, AA-Int, AA-SP, RMA, AM, AM-Exp, AM-Onload,
//! AM-Ints. Every design runs the same inserts, deletes and lookups, and must end with the
//! same contents in every volume.
//!
//! Run it with `activerma run -n 2 -- target/release/dht`; `activerma bench dht` sweeps the
//! parameters and prints the paper's ratios beside ours.

pub mod dht;
pub mod report;
pub mod run;
pub mod variant;
pub mod volume;
pub mod workload;

pub use dht::Dht;
pub use run::{run_all, run_variant, Outcome};
pub use variant::Variant;
pub use volume::{Contents, Layout, Volume};
pub use workload::{Mix, Workload};
