//! The memory layer: what a remote rank may touch, and how. Every rank has a translation table
//! — the software stand-in for its IOMMU page table — in memory origins can read; every remote
//! access is checked against it. Segments come from a per-rank symmetric heap.
//! Registration strategies decide which exposed pages the zero-copy path may touch
//! (`registration`); Firehose (`firehose`) and PART (`part`) are two of them, driven by the
//! protocol layer (`activerma-proto`'s firehose.rs and part.rs) on a registration miss.

pub mod entry;
pub mod firehose;
pub mod iotlb;
pub mod part;
pub mod registration;
pub mod symheap;
pub mod table;

pub use entry::{Entry, Prot};
pub use iotlb::{Eviction, Iotlb, IotlbConfig, IotlbStats};
pub use registration::{Registrar, RegistrationStats, Strategy};
pub use table::{AccessKind, HeapFast, LogArenaHome, Lookup, OriginTable, TableLayout, TargetTable};
