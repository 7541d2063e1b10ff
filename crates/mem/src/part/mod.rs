//! PART — RMA into unpinned memory (Psistakis et al., "PART: Pinning Avoidance in RDMA
//! Technologies"). Nothing is pinned. A remote access that meets a page that is not resident
//! fails fast for that block (NACK); the fault is queued at the target, whose handler pages in
//! one page (PIO), the rest of the block (PI4) or the rest of the transfer (PIA) and sends an
//! explicit retransmission request (ERR); the origin resends the block — or, without ERR, after
//! a time-out.
//!
//! On Linux the fault path is real: a PART region ([`UffdRegion`]) is registered with
//! userfaultfd in SIGBUS mode, so `process_vm_writev/readv` into a missing page fails with
//! EFAULT or a short count, and the handler installs pages with UFFDIO_COPY.
//!
//! Pieces: [`UffdRegion`] (register, page in, evict), [`Origin`] (send, detect NACK, resend),
//! [`PartTarget`] + [`FaultQueue`] (queue and resolve faults, answer ERR), [`OriginLink`] /
//! [`ErrSink`] (how NACK and ERR travel; [`LocalLink`] in one process), [`FaultInjector`],
//! [`PartStats`]. Design note: docs/design/part.md.

mod fault_queue;
mod handler;
mod inject;
mod local_link;
mod msg;
mod policy;
mod registry;
mod stats;
mod sys;
mod transfer;
mod uffd_region;

#[cfg(test)]
mod cross_process;
#[cfg(test)]
mod measure;
#[cfg(test)]
mod tests;

pub use fault_queue::FaultQueue;
pub use handler::{HandlerThread, PartTarget};
pub use inject::FaultInjector;
pub use local_link::LocalLink;
pub use msg::{ErrMsg, ErrSink, ErrStatus, Nack, OriginLink, ERR_BYTES, NACK_BYTES};
pub use policy::{PageIn, PartConfig, Retransmit};
pub use registry::MAX_REGIONS;
pub use stats::{sigbus_resolved, PartStats};
pub use transfer::{Origin, Peer};
pub use uffd_region::UffdRegion;
