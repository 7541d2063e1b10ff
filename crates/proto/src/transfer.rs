//! Contiguous transfer protocols (the ARMCI paper's §4): how one contiguous put or get moves,
//! chosen per call from the target memory's registration state and the size, forced per run
//! (ACTIVERMA_TRANSFER) or per call (`put_by` / `get_by`). Design: docs/design/transfer.md.
//!
//! ```text
//! zero-copy             the origin's engine moves the bytes between the user buffer and the
//!                       target memory: CPU copy into a segment mapped here, process_vm_writev/
//!                       readv into private memory on this host, the conduit's one-sided engine
//!                       (MPI RMA) across hosts. No CPU of the target is involved.
//! buffered              one active message: the origin copies into its message buffers, the
//!                       target's CPU copies out of them into place (gets: the other way).
//! pipelined             buffered in chunks of ACTIVERMA_PIPELINE_CHUNK with up to PIPELINE_DEPTH
//!                       in flight, so the target copies one chunk while the next travels.
//! dynamic-registration  the user buffer is pinned here for the call (this rank's Registrar:
//!                       mlock, counted per page), moved zero-copy, then released.
//!
//! auto(rank, addr, len, kind):
//!     the core's choice for the access (select.rs, nothing moved or counted):
//!         one-sided path (direct, cma, rma, active, firehose) -> zero-copy
//!         through the target (bounce, active message)          -> len >= PIPELINE_MIN ? pipelined : buffered
//!         the target registers for the call (rendezvous, PART) -> that path, counted dynamic-registration
//! ```
//!
//! The user buffer's own registration never decides in `auto`: no engine here needs it (the CPU
//! reaches any memory of its process, the kernel pins pages for process_vm_* by itself, an MPI
//! registers or bounces origin buffers inside MPI_Put), so registering it would only add the
//! cost `bench armci-protocols` measures (the paper's Figure 2). Forcing a protocol that cannot
//! apply falls back, counted as what ran: buffered or pipelined to this rank's own memory run
//! zero-copy (the target's CPU is ours); a dynamic registration the pin limit refuses runs
//! pipelined.

use crate::select::{Pass, Protocol};
use crate::{completion, get_am, get_direct, put_am, put_direct, Proto};
use activerma_core::counters::bump;
use activerma_core::{settings, Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast};
use std::sync::atomic::AtomicU64;

/// Chunk requests a pipelined get keeps in flight: enough that the target always has the next
/// chunk to copy while the origin copies the previous answer out.
const PIPELINE_DEPTH: usize = 4;

/// A contiguous transfer protocol (ACTIVERMA_TRANSFER).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transfer {
    Auto,
    ZeroCopy,
    Buffered,
    Pipelined,
    DynamicRegistration,
}

impl Transfer {
    pub const ALL: [Transfer; 5] =
        [Transfer::Auto, Transfer::ZeroCopy, Transfer::Buffered, Transfer::Pipelined, Transfer::DynamicRegistration];

    /// The setting's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Transfer::Auto => "auto",
            Transfer::ZeroCopy => "zero-copy",
            Transfer::Buffered => "buffered",
            Transfer::Pipelined => "pipelined",
            Transfer::DynamicRegistration => "dynamic-registration",
        }
    }
}

/// The run's protocol and pipeline sizes, read once at init.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TransferSettings {
    pub protocol: Transfer,
    pub chunk: usize,
    pub pipeline_min: usize,
}

impl TransferSettings {
    pub fn from_settings() -> Result<TransferSettings> {
        let word = settings::get_enum(settings::TRANSFER)?;
        let protocol = Transfer::ALL.into_iter().find(|t| t.name() == word).expect("the setting's words are the protocols' names");
        let chunk = settings::get_u64(settings::PIPELINE_CHUNK)?;
        if chunk == 0 {
            return Err(Error::BadSetting {
                name: settings::PIPELINE_CHUNK.into(),
                value: "0".into(),
                why: "a pipelined transfer needs chunks of at least one byte".into(),
            });
        }
        Ok(TransferSettings { protocol, chunk: chunk as usize, pipeline_min: settings::get_u64(settings::PIPELINE_MIN)? as usize })
    }
}

impl Proto {
    /// The protocol this run's contiguous transfers use (ACTIVERMA_TRANSFER).
    pub fn transfer(&self) -> Transfer {
        self.transfer.protocol
    }

    /// Blocking put of `src` to `rank`'s `addr` by protocol `t` (Auto: chosen for this call);
    /// returns the protocol that moved it (never Auto), counted in the `transfer_*` counters.
    #[inline]
    pub fn put_by(&self, t: Transfer, rank: Rank, addr: usize, src: &[u8]) -> Result<Transfer> {
        // The common case first and without a call: a plain segment page mapped here.
        if matches!(t, Transfer::Auto | Transfer::ZeroCopy) {
            if let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, src.len(), AccessKind::Put) {
                put_direct::run(self, local, src);
                completion::spin_until(self.net.completion_time(src.len()));
                return Ok(self.count(Transfer::ZeroCopy, src.len()));
            }
        }
        self.check_rank(rank)?;
        if src.is_empty() {
            return Ok(Transfer::ZeroCopy);
        }
        let (run, mut used) = self.resolve(t, rank, addr, src.len(), AccessKind::Put)?;
        match run {
            Run::Core => self.put(rank, addr, src)?,
            Run::Buffered => put_am::run(self, rank, addr, src)?,
            Run::Pipelined => self.put_pipelined(rank, addr, src)?,
            Run::PinUserBuffer => {
                used = self.pinning_user_buffer(src.as_ptr() as usize, src.len(), |pinned| {
                    if pinned {
                        self.put(rank, addr, src)
                    } else {
                        self.put_pipelined(rank, addr, src)
                    }
                })?
            }
        }
        Ok(self.count(used, src.len()))
    }

    /// Blocking get into `dst` from `rank`'s `addr` by protocol `t`; as `put_by`.
    #[inline]
    pub fn get_by(&self, t: Transfer, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<Transfer> {
        if matches!(t, Transfer::Auto | Transfer::ZeroCopy) {
            if let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, dst.len(), AccessKind::Get) {
                get_direct::run(self, local, dst);
                completion::spin_until(self.net.completion_time(dst.len()));
                return Ok(self.count(Transfer::ZeroCopy, dst.len()));
            }
        }
        self.check_rank(rank)?;
        if dst.is_empty() {
            return Ok(Transfer::ZeroCopy);
        }
        let len = dst.len();
        let (run, mut used) = self.resolve(t, rank, addr, len, AccessKind::Get)?;
        match run {
            Run::Core => self.get(rank, addr, dst)?,
            Run::Buffered => get_am::run(self, rank, addr, dst)?,
            Run::Pipelined => self.get_pipelined(rank, addr, dst)?,
            Run::PinUserBuffer => {
                used = self.pinning_user_buffer(dst.as_ptr() as usize, len, |pinned| {
                    if pinned {
                        self.get(rank, addr, dst)
                    } else {
                        self.get_pipelined(rank, addr, dst)
                    }
                })?
            }
        }
        Ok(self.count(used, len))
    }

    /// What protocol `t` means for this access: what to run, and what to count it as. Auto and
    /// ZeroCopy run the core's own path, counted as its class (Auto pipelines large transfers
    /// the core would send through the target in one message); a forced protocol runs as
    /// forced, except that buffering through the target's CPU to our own memory is a copy by
    /// our CPU, so it runs (and counts) zero-copy.
    fn resolve(&self, t: Transfer, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<(Run, Transfer)> {
        let own = rank == self.conduit.rank();
        Ok(match t {
            Transfer::Buffered | Transfer::Pipelined if own => (Run::Core, Transfer::ZeroCopy),
            Transfer::Buffered => (Run::Buffered, t),
            Transfer::Pipelined => (Run::Pipelined, t),
            Transfer::DynamicRegistration => (Run::PinUserBuffer, t),
            Transfer::Auto | Transfer::ZeroCopy => match self.choose_for(rank, addr, len, kind, Pass::Explain)?.protocol {
                Protocol::PutAm | Protocol::GetAm | Protocol::PutBounce | Protocol::GetBounce if !own => {
                    if t == Transfer::Auto && len >= self.transfer.pipeline_min {
                        (Run::Pipelined, Transfer::Pipelined)
                    } else {
                        (Run::Core, Transfer::Buffered)
                    }
                }
                Protocol::PutRendezvous
                | Protocol::GetRendezvous
                | Protocol::PutRmaRendezvous
                | Protocol::GetRmaRendezvous
                | Protocol::PutPart
                | Protocol::GetPart => (Run::Core, Transfer::DynamicRegistration),
                _ => (Run::Core, Transfer::ZeroCopy),
            },
        })
    }

    fn put_pipelined(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        for (i, chunk) in src.chunks(self.transfer.chunk).enumerate() {
            put_am::post(self, rank, addr + i * self.transfer.chunk, chunk)?;
        }
        put_am::wait_acknowledged(self, Some(rank))
    }

    fn get_pipelined(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        let chunk = self.transfer.chunk;
        let mut asked = std::collections::VecDeque::with_capacity(PIPELINE_DEPTH);
        let mut chunks = dst.chunks_mut(chunk).enumerate();
        let mut failed = None;
        loop {
            while failed.is_none() && asked.len() < PIPELINE_DEPTH {
                let Some((i, piece)) = chunks.next() else { break };
                let at = addr + i * chunk;
                match get_am::ask(self, rank, at, piece.len()) {
                    Ok(cell) => asked.push_back((cell, at, piece)),
                    Err(e) => failed = Some(e),
                }
            }
            // Every request sent is answered and its cell given back, even after a failure.
            let Some((cell, at, piece)) = asked.pop_front() else { break };
            if let Err(e) = get_am::receive(self, rank, at, cell, piece) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Runs `moved(true)` with this rank's pages under `[addr, addr + len)` (the user buffer)
    /// pinned for the call, then releases them; when the pin limit (RLIMIT_MEMLOCK,
    /// ACTIVERMA_PIN_LIMIT) refuses them, runs `moved(false)`, the pipelined fallback. Returns
    /// the protocol that ran.
    fn pinning_user_buffer(&self, addr: usize, len: usize, moved: impl FnOnce(bool) -> Result<()>) -> Result<Transfer> {
        let Some(table) = &self.own_table else {
            return Err(Error::Unsupported(
                "dynamic registration needs this rank's own table (a Proto made with its table handlers)".into(),
            ));
        };
        match table.registrar().hold(addr, len) {
            Ok(()) => {
                let result = moved(true);
                table.registrar().release(addr, len)?;
                result.map(|_| Transfer::DynamicRegistration)
            }
            Err(Error::OutOfResources(_)) => moved(false).map(|_| Transfer::Pipelined),
            Err(e) => Err(e),
        }
    }

    fn count(&self, used: Transfer, len: usize) -> Transfer {
        let (calls, bytes): (&AtomicU64, &AtomicU64) = match used {
            Transfer::Buffered => (&self.counters.transfer_buffered, &self.counters.transfer_buffered_bytes),
            Transfer::Pipelined => (&self.counters.transfer_pipelined, &self.counters.transfer_pipelined_bytes),
            Transfer::DynamicRegistration => (&self.counters.transfer_dynamic, &self.counters.transfer_dynamic_bytes),
            Transfer::ZeroCopy | Transfer::Auto => (&self.counters.transfer_zero_copy, &self.counters.transfer_zero_copy_bytes),
        };
        bump(calls, 1);
        bump(bytes, len as u64);
        used
    }
}

/// What `put_by` / `get_by` run for a resolved protocol.
#[derive(Clone, Copy)]
enum Run {
    /// The core's own path (`put` / `get`).
    Core,
    Buffered,
    Pipelined,
    /// Pin the user buffer, the core's path, unpin.
    PinUserBuffer,
}
