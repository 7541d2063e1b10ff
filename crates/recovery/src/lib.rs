//! Recovery by replay (Active Access, ICS'15, section 4.4, Figure 5): a rank that dies is
//! replaced (`activerma run --respawn N`), restores its last checkpoint (activerma-checkpoint)
//! and replays what it did since — its gets from the records their targets logged, in their
//! order, so that it reads what it read before even where targets have changed since.
//!
//! `PutLog` keeps a rank's puts at their senders and counts them where they were applied, so
//! that a replacement applies again what others put into it and repeats none of its own.
//!
//! `GetLog` logs a rank's gets at their targets in one of four designs (`Variant`) and hands a
//! replacement its records. Programs that use it: `apps/sort` (the fault-tolerant sort) and the
//! multi-process tests `replay_gets` (GetLog) and `dht_replay` (PutLog). Design: `docs/design/recovery.md`.

mod ask;
mod getlog;
mod putlog;

pub use getlog::{AaLog, GetLog, Record, Variant};
pub use putlog::{Applied, Incoming, PutLog};
