//! What `activerma report` knows without running anything: the figures of the papers that
//! benchmarks reproduce (`figures.toml`, read into [`Registry`]), the one schema of a measured
//! row ([`Row`]), and how a folder of rows becomes plots, `index.html` and `summary.md`.
//!
//! This crate does not depend on the runtime: the benchmarks (`activerma-bench`) measure and
//! write rows, this crate reads them. So a report can be re-drawn, or two compared, on a
//! machine without the runtime's build.

pub mod compare;
pub mod data;
pub mod format;
mod html;
pub mod plot;
pub mod png;
mod reading;
pub mod render;
pub mod row;
pub mod run;
pub mod spec;
mod summary;
#[cfg(test)]
mod tests;

pub use compare::compare;
pub use render::{render, Rendered};
pub use row::{read_rows, Machine, Row};
pub use run::{BenchmarkRun, RunInfo};
pub use spec::{Benchmark, Check, Figure, Registry, Select};
