//! Error values. Every failure a user can cause is one of these, with a message that says what
//! to change; the C API maps each kind to a stable status code.

use crate::Rank;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("invalid rank {rank}: the job has {size} ranks, numbered 0 to {}", size.saturating_sub(1))]
    InvalidRank { rank: Rank, size: usize },

    #[error("address {addr:#x}+{len} on rank {rank} is not exposed memory (not inside any segment allocation or exposed private range)")]
    NotExposed { rank: Rank, addr: usize, len: usize },

    #[error("{op} of {addr:#x}+{len} on rank {rank} violates its protection (the target exposed it {prot})")]
    Protection { rank: Rank, addr: usize, len: usize, op: &'static str, prot: &'static str },

    #[error("atomic at {addr:#x} on rank {rank} is misaligned: 64-bit atomics need 8-byte alignment")]
    Misaligned { rank: Rank, addr: usize },

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error("size limit: {0}")]
    SizeLimit(String),

    #[error("out of resources: {0}")]
    OutOfResources(String),

    #[error("the runtime was finalized; no operation is allowed after finalize")]
    Finalized,

    #[error("rank {rank} is gone ({how}); the operation cannot complete")]
    PeerGone { rank: Rank, how: String },

    /// A rank of a job started with `activerma run --respawn N` died: operations to it fail
    /// until this rank has called `wait_for_rank(rank)` (its replacement is back).
    #[error(
        "rank {rank} (incarnation {incarnation}) failed; its replacement is being started: wait_for_rank({rank}) waits until it is back"
    )]
    RankFailed { rank: Rank, incarnation: u32 },

    #[error("timed out after {secs} s waiting for {what} (raise ACTIVERMA_TIMEOUT_S, or 0 to wait forever)")]
    Timeout { what: String, secs: f64 },

    #[error("bad setting {name}={value}: {why}")]
    BadSetting { name: String, value: String, why: String },

    #[error("not supported: {0}")]
    Unsupported(String),

    #[error("collective mismatch: {0}")]
    CollectiveMismatch(String),

    #[error("system call {call} failed: {errno_text}")]
    Os { call: &'static str, errno_text: String },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Builds an `Os` error from the current `errno`.
    pub fn last_os(call: &'static str) -> Error {
        Error::Os { call, errno_text: std::io::Error::last_os_error().to_string() }
    }

    /// Stable numeric code used by the C API (`ARMA_ERR_*`); 0 is success.
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidRank { .. } => 1,
            Error::NotExposed { .. } => 2,
            Error::Protection { .. } => 3,
            Error::Misaligned { .. } => 4,
            Error::InvalidArgument(_) => 5,
            Error::SizeLimit(_) => 6,
            Error::OutOfResources(_) => 7,
            Error::Finalized => 8,
            Error::PeerGone { .. } => 9,
            Error::Timeout { .. } => 10,
            Error::BadSetting { .. } => 11,
            Error::Unsupported(_) => 12,
            Error::CollectiveMismatch(_) => 13,
            Error::Os { .. } => 14,
            Error::RankFailed { .. } => 17,
        }
    }
}
