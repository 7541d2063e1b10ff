//! Bottom layer of activerma: services every other layer uses and that know nothing about
//! communication — the settings table, error values, counters, clocks, page arithmetic and
//! futex-based wake-ups on shared memory.

pub mod backoff;
pub mod clock;
pub mod config;
pub mod copy;
pub mod counters;
pub mod error;
pub mod futex;
pub mod interrupt_model;
pub mod page;
pub mod prefetch;
pub mod settings;

pub use config::Config;
pub use error::{Error, Result};

/// A rank is one process of the job, numbered 0..size.
pub type Rank = usize;
