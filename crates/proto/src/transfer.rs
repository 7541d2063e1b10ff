//! Contiguous transfer protocols (the ARMCI paper's §4): how one contiguous put or get moves,
//! chosen per call from the target memory's registration state and the size, forced per run
//! (ACTIVERMA_TRANSFER) or per call (`put_by` / `get_by`). Design: docs/design/transfer.md.
//!
//! ```text
//! zero-copy             the origin's engine moves the bytes between the user buffer and the
//!                       target memory: CPU copy into a segment mapped here, process_vm_writev/
//!                       readv into private memory on this host, the conduit's one-sided engine
//!                       (MPI RMA) across hosts. No CPU of the target is involved.
//! buffered              through the target's landing zone (landing.rs), one chunk at a time:
//!                       the origin puts a chunk into its slot there zero-copy, the target's CPU
//!                       copies it into place (gets: the other way). Without a landing zone
//!                       (ACTIVERMA_LANDING_ZONE=0) the bytes travel inside one active message.
//! pipelined             buffered with up to PIPELINE_DEPTH chunks (landing slots, or chunks of
//!                       ACTIVERMA_PIPELINE_CHUNK in active messages) in flight, so the target
//!                       copies one chunk while the next travels.
//! dynamic-registration  the user buffer is pinned here for the call (this rank's Registrar:
//!                       mlock, counted per page), moved zero-copy, then released.
//!
//! auto(rank, addr, len, kind):
//!     the core's choice for the access (select.rs, nothing moved or counted):
//!         one-sided path (direct, cma, rma, active, firehose) -> zero-copy
//!         through the target (bounce, active message)          -> len >= PIPELINE_MIN ? pipelined : buffered
//!                                                                 (from LANDED_MIN through the
//!                                                                 landing zone, below it the
//!                                                                 core's one message)
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

use crate::landing::Slot;
use crate::noncontig_target::StridedAsk;
use crate::select::{Pass, Protocol};
use crate::strided::{Direction, StridedPattern};
use crate::{completion, get_am, get_direct, noncontig, noncontig_target, put_am, put_direct, rma_conduit, Proto};
use activerma_access::LogOp;
use activerma_core::counters::bump;
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast};
use activerma_transport::StartedGet;
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Transfers through the target's CPU from this size on take the landing zone rather than the
/// core's one active message: a message of a few fragments costs about what a put into the
/// slot and a short message do (8 B: 0.8 us either way), while at 4 KiB (16 fragments of 256
/// bytes) the landing zone is 2.8x faster (`bench armci-protocols`, buffered 4 KiB put,
/// before and after the zone, session 21).
const LANDED_MIN: usize = 1024;

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
    pub fn from_config(cfg: &Config) -> Result<TransferSettings> {
        let word = cfg.get_enum(settings::TRANSFER)?;
        let protocol = Transfer::ALL.into_iter().find(|t| t.name() == word).expect("the setting's words are the protocols' names");
        let chunk = cfg.get_u64(settings::PIPELINE_CHUNK)?;
        if chunk == 0 {
            return Err(Error::BadSetting {
                name: settings::PIPELINE_CHUNK.into(),
                value: "0".into(),
                why: "a pipelined transfer needs chunks of at least one byte".into(),
            });
        }
        Ok(TransferSettings { protocol, chunk: chunk as usize, pipeline_min: cfg.get_u64(settings::PIPELINE_MIN)? as usize })
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
        if matches!(t, Transfer::Auto | Transfer::ZeroCopy) && self.put_plain(rank, addr, src) {
            return Ok(Transfer::ZeroCopy);
        }
        self.put_nb_by(t, rank, addr, src)?.wait()
    }

    /// Blocking get into `dst` from `rank`'s `addr` by protocol `t`; as `put_by`.
    #[inline]
    pub fn get_by(&self, t: Transfer, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<Transfer> {
        if matches!(t, Transfer::Auto | Transfer::ZeroCopy) && self.get_plain(rank, addr, dst) {
            return Ok(Transfer::ZeroCopy);
        }
        self.get_nb_by(t, rank, addr, dst)?.wait()
    }

    /// The common case of a zero-copy put, inlined: a non-empty put to plain segment
    /// pages mapped here (no Active Access bits on them) is copied, completed and counted, and
    /// true returned. False moves nothing and tells nothing: every other case (another host,
    /// private memory, logged pages, a bad address or rank) is `put_by`'s, which says why.
    #[inline]
    pub fn put_plain(&self, rank: Rank, addr: usize, src: &[u8]) -> bool {
        let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, src.len(), AccessKind::Put) else {
            return false;
        };
        // Booked at issue, as `put_start` books it: the copy stands for the NIC's DMA.
        let at = self.net.completion_time(src.len());
        put_direct::run(self, local, src);
        completion::spin_until(at);
        self.count(Transfer::ZeroCopy, src.len());
        true
    }

    /// The get of `put_plain`.
    #[inline]
    pub fn get_plain(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> bool {
        let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, dst.len(), AccessKind::Get) else {
            return false;
        };
        let at = self.net.completion_time(dst.len());
        get_direct::run(self, local, dst);
        completion::spin_until(at);
        self.count(Transfer::ZeroCopy, dst.len());
        true
    }

    /// A read-modify-write in place (an accumulate), inlined like `put_plain`: when all of
    /// `rank`'s `addr .. addr + len` is plain, readable and writable segment memory mapped
    /// here, `update` runs on those bytes and true is returned — one pass over the target's
    /// memory instead of a get, a local combine and a put. Counted as a get and a put, and
    /// the modelled network books both. False runs nothing: the caller takes its own path.
    /// Concurrent updates of the same bytes are the caller's to exclude (ARMCI's accumulate
    /// lock); readers may see the update half done, as with any put.
    #[inline]
    pub fn update_plain(&self, rank: Rank, addr: usize, len: usize, update: impl FnOnce(&mut [u8])) -> bool {
        let Some((local, HeapFast::Plain)) = self.segment_fast(rank, addr, len, AccessKind::Atomic) else {
            return false;
        };
        // SAFETY: `local` was translated from a checked segment range of `len` bytes, mapped
        // for the life of the job; nobody else holds a Rust reference into another process's
        // segment (the memory is shared, as for put_direct's copy).
        fence(Ordering::Acquire);
        update(unsafe { std::slice::from_raw_parts_mut(local, len) });
        fence(Ordering::Release);
        completion::spin_until(self.net.completion_time(len));
        completion::spin_until(self.net.completion_time(len));
        bump(&self.counters.get_direct, 1);
        bump(&self.counters.bytes_got, len as u64);
        bump(&self.counters.put_direct, 1);
        bump(&self.counters.bytes_put, len as u64);
        self.count(Transfer::ZeroCopy, len);
        self.count(Transfer::ZeroCopy, len);
        true
    }

    /// Non-blocking put by protocol `t`: `src` may be reused when this returns; the transfer is
    /// complete (visible at the target) when the returned handle's `wait` returns. Zero-copy
    /// moves the bytes now (complete at the modelled network's time), or to a segment of
    /// another host starts them on the conduit's one-sided engine (complete at the flush that
    /// `test` and `wait` make); buffered and pipelined
    /// send their messages now and complete when the target acknowledged them; a dynamic
    /// registration is done when this returns.
    pub fn put_nb_by(&self, t: Transfer, rank: Rank, addr: usize, src: &[u8]) -> Result<PendingTransfer<'_>> {
        self.check_rank(rank)?;
        if src.is_empty() {
            return Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy));
        }
        let (run, mut used) = self.resolve(t, rank, addr, src.len(), AccessKind::Put)?;
        let state = match run {
            Run::Core if rma_conduit::put_started(self, rank, addr, src)? => Pending::OneSided(self.net.completion_time(src.len())),
            Run::Core => Pending::At(self.put_nb(rank, addr, src)?.into_raw()),
            Run::Buffered => {
                match self.landing() {
                    Some(l) => self.post_landed_chunks(l, rank, addr, src, true)?,
                    None => put_am::post(self, rank, addr, src)?,
                }
                Pending::Posted
            }
            Run::Pipelined => {
                self.post_chunks(rank, addr, src)?;
                Pending::Posted
            }
            Run::PinUserBuffer => {
                used = self.pinning_user_buffer(src.as_ptr() as usize, src.len(), |pinned| {
                    if pinned {
                        self.put(rank, addr, src)
                    } else {
                        self.post_chunks(rank, addr, src).and_then(|_| put_am::wait_acknowledged(self, Some(rank)))
                    }
                })?;
                Pending::Done
            }
        };
        self.count(used, src.len());
        Ok(PendingTransfer { p: self, rank, used, state, not_before: 0 })
    }

    /// Non-blocking get by protocol `t` into `dst`, which holds the bytes once the returned
    /// handle's `wait` returns (it borrows `dst` until then; it must not be forgotten with
    /// `mem::forget`, since the conduit or the target may still write `dst`). Zero-copy from
    /// a segment of another host is started on the conduit's one-sided engine and moves while
    /// the caller computes (MPI_Rget: `test` asks whether it landed, `wait` waits for it);
    /// one of ACTIVERMA_NB_TARGET_FROM bytes or more from a segment mapped here goes to the
    /// copy engine where the run has one (copy_engine.rs), and is copied at issue otherwise.
    /// Buffered and pipelined send
    /// their requests now; the answers are copied into `dst` by `test` and `wait` — on the
    /// critical path, as the paper's buffered get copies in its wait.
    pub fn get_nb_by<'a>(&'a self, t: Transfer, rank: Rank, addr: usize, dst: &'a mut [u8]) -> Result<PendingTransfer<'a>> {
        self.check_rank(rank)?;
        let len = dst.len();
        if len == 0 {
            return Ok(PendingTransfer::done(self, rank, Transfer::ZeroCopy));
        }
        let (run, mut used) = self.resolve(t, rank, addr, len, AccessKind::Get)?;
        let dst_at = dst.as_mut_ptr();
        let mut not_before = 0;
        let state = match run {
            // SAFETY: `dst` stays borrowed by the PendingTransfer, whose test, wait and drop
            // complete the get (the conduit's, or the copy engine's job).
            Run::Core => match unsafe { rma_conduit::get_started(self, rank, addr, dst_at, len)? } {
                Some(get) => Pending::StartedGet(get, self.net.completion_time(len)),
                None => match unsafe {
                    self.copy_engine_job(rank, addr, &StridedPattern::new(len, vec![], vec![], vec![])?, dst_at, len, Direction::Get)?
                } {
                    Some((job, at)) => {
                        not_before = at;
                        Pending::Engine(job)
                    }
                    None => Pending::At(self.get_nb(rank, addr, dst)?.into_raw()),
                },
            },
            Run::Buffered => self.pending_gets(addr, dst, false),
            Run::Pipelined => self.pending_gets(addr, dst, true),
            Run::PinUserBuffer => {
                used = self.pinning_user_buffer(dst.as_ptr() as usize, len, |pinned| {
                    if pinned {
                        self.get(rank, addr, dst)
                    } else {
                        PendingTransfer {
                            p: self,
                            rank,
                            used: Transfer::Pipelined,
                            state: self.pending_gets(addr, dst, true),
                            not_before: 0,
                        }
                        .wait()
                        .map(drop)
                    }
                })?;
                Pending::Done
            }
        };
        self.count(used, len);
        let mut pending = PendingTransfer { p: self, rank, used, state, not_before };
        pending.ask_more(false);
        Ok(pending)
    }

    /// What protocol `t` means for this access: what to run, and what to count it as. Auto and
    /// ZeroCopy run the core's own path, counted as its class (Auto pipelines large transfers
    /// the core would send through the target in one message); a forced protocol runs as
    /// forced, except that buffering through the target's CPU to our own memory is a copy by
    /// our CPU, so it runs (and counts) zero-copy.
    pub(crate) fn resolve(&self, t: Transfer, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<(Run, Transfer)> {
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
                    } else if len >= LANDED_MIN && self.landing().is_some() {
                        (Run::Buffered, Transfer::Buffered)
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

    /// Posts `src` to the target in chunks, several in flight (acknowledged later): through
    /// the landing zone, else in active messages of ACTIVERMA_PIPELINE_CHUNK.
    fn post_chunks(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        if let Some(l) = self.landing() {
            return self.post_landed_chunks(l, rank, addr, src, false);
        }
        for (i, chunk) in src.chunks(self.transfer.chunk).enumerate() {
            put_am::post(self, rank, addr + i * self.transfer.chunk, chunk)?;
        }
        Ok(())
    }

    /// Posts `src` through the landing zone, a slot at a time; `one_at_a_time` (buffered):
    /// each chunk after the previous one was copied into place.
    fn post_landed_chunks(&self, l: &crate::landing::Landing, rank: Rank, addr: usize, src: &[u8], one_at_a_time: bool) -> Result<()> {
        for (i, chunk) in src.chunks(l.slot_bytes()).enumerate() {
            self.post_landed(l, rank, addr + i * l.slot_bytes(), chunk, one_at_a_time)?;
        }
        Ok(())
    }

    /// The requests of a get through the target's CPU: landing slots (one in flight, or
    /// `pipelined`: PIPELINE_DEPTH), else active-message answers (the whole get in one, or
    /// `pipelined`: chunks of ACTIVERMA_PIPELINE_CHUNK).
    fn pending_gets<'a>(&self, addr: usize, dst: &'a mut [u8], pipelined: bool) -> Pending<'a> {
        let depth = if pipelined { PIPELINE_DEPTH } else { 1 };
        match self.landing() {
            Some(l) => Pending::asking(
                dst.chunks_mut(l.slot_bytes()).enumerate().map(|(i, piece)| Ask::Landed(addr + i * l.slot_bytes(), piece, None)).collect(),
                depth,
            ),
            None if pipelined => Pending::gets(addr, dst, self.transfer.chunk),
            None => Pending::gets(addr, dst, dst.len()),
        }
    }

    /// Runs `moved(true)` with this rank's pages under `[addr, addr + len)` (the user buffer)
    /// pinned for the call, then releases them; when the pin limit (RLIMIT_MEMLOCK,
    /// ACTIVERMA_PIN_LIMIT) refuses them, runs `moved(false)`, the pipelined fallback. Returns
    /// the protocol that ran.
    pub(crate) fn pinning_user_buffer(&self, addr: usize, len: usize, moved: impl FnOnce(bool) -> Result<()>) -> Result<Transfer> {
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

    #[inline]
    pub(crate) fn count(&self, used: Transfer, len: usize) -> Transfer {
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

/// What `put_nb_by` / `get_nb_by` run for a resolved protocol.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// The core's own path (`put_nb` / `get_nb`).
    Core,
    Buffered,
    Pipelined,
    /// Pin the user buffer, the core's path, unpin.
    PinUserBuffer,
}

/// A transfer started by `put_nb_by` / `get_nb_by`. `wait` completes it and names the protocol
/// that moved it; dropping it without `wait` completes it too (its requests must be answered
/// before `dst` is free again), ignoring the outcome.
#[must_use = "a non-blocking transfer must be waited for (dropping it waits and drops its error)"]
pub struct PendingTransfer<'a> {
    p: &'a Proto,
    rank: Rank,
    used: Transfer,
    state: Pending<'a>,
    /// Not complete before this modelled time (0: no such bound): bytes the target moved by
    /// cross-memory attach still take the modelled wire's time.
    not_before: u64,
}

enum Pending<'a> {
    Done,
    /// Moved; complete at this modelled time (0: now).
    At(u64),
    /// A put started on the conduit's one-sided engine (MPI across hosts), which moves it
    /// while the caller computes; complete once the conduit flushed the rank, and at this
    /// modelled time. MPI can only complete it, not ask whether it is: `test` flushes too.
    OneSided(u64),
    /// A get started on the conduit's one-sided engine (MPI_Rget): complete once the conduit
    /// says so (tested without waiting), and at this modelled time.
    StartedGet(StartedGet, u64),
    /// Strided pieces this process's copy engine copies (copy_engine.rs): complete once the
    /// job is done (the wait copies it if the engine has not started it), and at the
    /// transfer's `not_before`.
    Engine(std::sync::Arc<crate::copy_engine::Job>),
    /// Puts posted to the target: complete when it acknowledged every one.
    Posted,
    /// Requests through the target's CPU in flight (cell, request) and those not sent yet, at
    /// most `depth` in flight; the first refusal, kept until all are answered.
    Asking {
        asked: VecDeque<(u32, Ask<'a>)>,
        rest: VecDeque<Ask<'a>>,
        failed: Option<Error>,
        depth: usize,
    },
}

impl<'a> Pending<'a> {
    fn gets(addr: usize, dst: &'a mut [u8], chunk: usize) -> Pending<'a> {
        Pending::asking(dst.chunks_mut(chunk).enumerate().map(|(i, piece)| Ask::Range(addr + i * chunk, piece)).collect(), PIPELINE_DEPTH)
    }

    fn asking(rest: VecDeque<Ask<'a>>, depth: usize) -> Pending<'a> {
        Pending::Asking { asked: VecDeque::with_capacity(depth), rest, failed: None, depth }
    }
}

/// One request through the target's CPU: a get of a contiguous range, a get of a list of
/// pieces packed into one message and answered in one (a strided get's rows), or a put of such
/// a list, its bytes in the message (a strided put's rows).
pub(crate) enum Ask<'a> {
    Range(usize, &'a mut [u8]),
    /// A get of a contiguous range through a slot of the target's landing zone (landing.rs):
    /// the slot once asked; None with a request, for a plain `Range` request instead.
    Landed(usize, &'a mut [u8], Option<Slot>),
    Pieces(crate::strided::Pieces<'a>),
    PutPieces(Vec<(usize, &'a [u8])>),
    /// Lists through a slot of the target's landing zone (landing.rs): the slot once asked;
    /// None with a request, for a plain `Pieces` / `PutPieces` request instead.
    LandedPieces(crate::strided::Pieces<'a>, Option<Slot>),
    LandedPutPieces(Vec<(usize, &'a [u8])>, Option<Slot>),
    /// A list the target moves into (get) or out of (put) our buffers itself.
    TargetGet(crate::strided::Pieces<'a>),
    TargetPut(Vec<(usize, &'a [u8])>),
    /// The same for a strided pattern, sent as the pattern.
    TargetGetStrided(StridedAsk<&'a mut [u8]>),
    TargetPutStrided(StridedAsk<&'a [u8]>),
}

impl Ask<'_> {
    /// Sends the request, or None (nothing sent) while no completion cell (or landing slot) is
    /// free. `alone`: no other request of this transfer is in flight — then a landed get that
    /// finds every slot taken asks without one, since the slots may be held by this thread's
    /// own transfers that it has not waited for yet.
    fn try_send(&mut self, p: &Proto, rank: Rank, alone: bool) -> Result<Option<u32>> {
        match self {
            Ask::Range(at, piece) => get_am::try_ask(p, rank, *at, piece.len()),
            Ask::Landed(at, piece, slot) => {
                let l = p.landing().expect("landed gets only where there is a landing zone");
                let tried = p.try_ask_landed(l, rank, *at, piece.len())?;
                in_slot_or_plain(slot, tried, alone, || get_am::try_ask(p, rank, *at, piece.len()))
            }
            Ask::Pieces(pieces) => {
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                noncontig::try_ask_packed_get(p, rank, &list)
            }
            Ask::PutPieces(pieces) => noncontig::try_ask_packed_put(p, rank, pieces),
            Ask::LandedPieces(pieces, slot) => {
                let l = p.landing().expect("landed lists only where there is a landing zone");
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                let tried = p.try_ask_landed_pieces(l, rank, &list, None)?;
                in_slot_or_plain(slot, tried, alone, || noncontig::try_ask_packed_get(p, rank, &list))
            }
            Ask::LandedPutPieces(pieces, slot) => {
                let l = p.landing().expect("landed lists only where there is a landing zone");
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                let data: Vec<&[u8]> = pieces.iter().map(|x| x.1).collect();
                let tried = p.try_ask_landed_pieces(l, rank, &list, Some(&data))?;
                in_slot_or_plain(slot, tried, alone, || noncontig::try_ask_packed_put(p, rank, pieces))
            }
            Ask::TargetGet(pieces) => noncontig_target::try_ask_get(p, rank, pieces),
            Ask::TargetPut(pieces) => noncontig_target::try_ask_put(p, rank, pieces),
            Ask::TargetGetStrided(ask) => {
                noncontig_target::try_ask_strided(p, rank, noncontig_target::GET_TARGETED_STRIDED, ask, ask.local.as_ptr() as usize)
            }
            Ask::TargetPutStrided(ask) => {
                noncontig_target::try_ask_strided(p, rank, noncontig_target::PUT_TARGETED_STRIDED, ask, ask.local.as_ptr() as usize)
            }
        }
    }

    fn receive(&mut self, p: &Proto, rank: Rank, cell: u32) -> Result<()> {
        match self {
            Ask::Range(at, piece) | Ask::Landed(at, piece, None) => get_am::receive(p, rank, *at, cell, piece),
            Ask::Landed(at, piece, Some(s)) => {
                let l = p.landing().expect("landed gets only where there is a landing zone");
                p.receive_landed(l, rank, *at, cell, *s, piece)
            }
            Ask::Pieces(pieces) => noncontig::receive_packed_get(p, rank, cell, pieces),
            Ask::PutPieces(pieces) | Ask::LandedPutPieces(pieces, None) => noncontig::receive_packed_put(p, rank, cell, pieces),
            Ask::LandedPieces(pieces, None) => noncontig::receive_packed_get(p, rank, cell, pieces),
            Ask::LandedPieces(pieces, Some(s)) => {
                let l = p.landing().expect("landed lists only where there is a landing zone");
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                p.receive_landed_pieces(l, rank, cell, *s, &list, Some(pieces))
            }
            Ask::LandedPutPieces(pieces, Some(s)) => {
                let l = p.landing().expect("landed lists only where there is a landing zone");
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                p.receive_landed_pieces(l, rank, cell, *s, &list, None)
            }
            Ask::TargetGet(pieces) => {
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                noncontig_target::receive(p, rank, cell, &list, LogOp::Get)
            }
            Ask::TargetPut(pieces) => {
                let list: Vec<(usize, usize)> = pieces.iter().map(|(at, piece)| (*at, piece.len())).collect();
                noncontig_target::receive(p, rank, cell, &list, LogOp::Put)
            }
            Ask::TargetGetStrided(ask) => noncontig_target::receive_strided(p, rank, cell, ask, LogOp::Get),
            Ask::TargetPutStrided(ask) => noncontig_target::receive_strided(p, rank, cell, ask, LogOp::Put),
        }
    }
}

/// A landed request's outcome (`tried`: Some((cell, slot)) when sent through a slot): its
/// cell, with the slot noted in `slot`; with no slot free, the `plain` request when `alone`
/// (nothing else of the transfer in flight: see `Ask::try_send`), else None (ask later).
fn in_slot_or_plain(
    slot: &mut Option<Slot>,
    tried: Option<(u32, Slot)>,
    alone: bool,
    plain: impl FnOnce() -> Result<Option<u32>>,
) -> Result<Option<u32>> {
    match tried {
        Some((cell, s)) => {
            *slot = Some(s);
            Ok(Some(cell))
        }
        None if alone => plain(),
        None => Ok(None),
    }
}

impl<'a> PendingTransfer<'a> {
    pub(crate) fn done(p: &'a Proto, rank: Rank, used: Transfer) -> PendingTransfer<'a> {
        PendingTransfer { p, rank, used, state: Pending::Done, not_before: 0 }
    }

    /// Moved already; complete at modelled time `at` (0: now).
    pub(crate) fn at(p: &'a Proto, rank: Rank, used: Transfer, at: u64) -> PendingTransfer<'a> {
        PendingTransfer { p, rank, used, state: Pending::At(at), not_before: 0 }
    }

    /// Requests through the target's CPU: `asks` are sent, at most `depth` in flight (None:
    /// PIPELINE_DEPTH), and their answers taken by `test` and `wait`.
    pub(crate) fn asking(p: &'a Proto, rank: Rank, used: Transfer, asks: VecDeque<Ask<'a>>, depth: Option<usize>) -> PendingTransfer<'a> {
        let mut pending = PendingTransfer { p, rank, used, state: Pending::asking(asks, depth.unwrap_or(PIPELINE_DEPTH)), not_before: 0 };
        pending.ask_more(false);
        pending
    }

    /// A list the target moves itself (`Ask::TargetGet` / `TargetPut`, one request), complete
    /// once it answered and the modelled network would have carried `bytes` after the request.
    pub(crate) fn target_moving(p: &'a Proto, rank: Rank, used: Transfer, ask: Ask<'a>, bytes: usize) -> PendingTransfer<'a> {
        let mut pending = PendingTransfer { p, rank, used, state: Pending::asking(VecDeque::from([ask]), 1), not_before: 0 };
        pending.ask_more(false);
        // Booked once the request is on the link (a request still waiting for a cell books
        // the bytes now: later, not sooner, than the network would carry them).
        pending.not_before = p.net.completion_time(bytes);
        pending
    }

    /// A get started on the conduit's one-sided engine (a list's: `Proto::get_list_started`);
    /// complete once the conduit says so and at modelled time `at`.
    pub(crate) fn started_get(p: &'a Proto, rank: Rank, used: Transfer, get: StartedGet, at: u64) -> PendingTransfer<'a> {
        PendingTransfer { p, rank, used, state: Pending::StartedGet(get, at), not_before: 0 }
    }

    /// Pieces handed to the copy engine; complete when it copied them and at modelled time
    /// `at`.
    pub(crate) fn by_engine(
        p: &'a Proto,
        rank: Rank,
        used: Transfer,
        job: std::sync::Arc<crate::copy_engine::Job>,
        at: u64,
    ) -> PendingTransfer<'a> {
        PendingTransfer { p, rank, used, state: Pending::Engine(job), not_before: at }
    }

    /// The protocol that moves this transfer (never Auto).
    pub fn protocol(&self) -> Transfer {
        self.used
    }

    /// The target rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Sends requests until `depth` are in flight, none is left or one failed. While
    /// every completion cell is taken the rest wait for a later call, except in `finish` with
    /// none of ours in flight (`must`): then it makes progress for up to a second (other
    /// threads' requests give cells back within microseconds) and otherwise fails — the cells
    /// are held by transfers this thread has not waited for, and waiting could never end.
    fn ask_more(&mut self, must: bool) {
        let Pending::Asking { asked, rest, failed, depth } = &mut self.state else { return };
        let mut since: Option<std::time::Instant> = None;
        while failed.is_none() && asked.len() < *depth {
            let Some(mut ask) = rest.pop_front() else { break };
            match ask.try_send(self.p, self.rank, asked.is_empty()) {
                Ok(Some(cell)) => asked.push_back((cell, ask)),
                Ok(None) if must && asked.is_empty() => {
                    rest.push_front(ask);
                    if since.get_or_insert_with(std::time::Instant::now).elapsed().as_secs() >= 1 {
                        *failed = Some(Error::OutOfResources(format!(
                            "a non-blocking get from rank {}: every request slot of this rank is held by non-blocking transfers not waited for yet; wait for some first",
                            self.rank
                        )));
                    }
                    self.p.am.progress();
                }
                Ok(None) => {
                    rest.push_front(ask);
                    break;
                }
                Err(e) => *failed = Some(e),
            }
        }
    }

    /// `test`, except that a transfer on the conduit's one-sided engine (MPI across hosts)
    /// reads false without a call to the conduit: for a caller that wants to know, right after
    /// starting it, whether to keep the handle. Such a put only a flush can complete (it would
    /// be waited for), and testing such a get lets MPI work on it inside the call (over TCP,
    /// `bench/armci_peers/run.sh --tcp`: NbGet's issue took longer and hid less).
    pub fn test_without_conduit(&mut self) -> Result<bool> {
        if matches!(self.state, Pending::OneSided(_) | Pending::StartedGet(..)) {
            return Ok(false);
        }
        self.test()
    }

    /// Makes progress and reports whether the transfer is complete (then `wait` returns at
    /// once). Answers that arrived are copied out, and further chunks asked for. A put on the
    /// conduit's one-sided engine is completed here (MPI can only complete it); a get there is
    /// asked about.
    pub fn test(&mut self) -> Result<bool> {
        self.p.am.progress();
        let (p, rank) = (self.p, self.rank);
        self.settle_one_sided(false)?;
        let complete = match &mut self.state {
            Pending::Done => true,
            Pending::At(at) => *at == 0 || activerma_core::clock::now_ns() >= *at,
            Pending::OneSided(_) => unreachable!("settle_one_sided made it At"),
            // Still on the wire: settle_one_sided found it incomplete.
            Pending::StartedGet(..) => false,
            Pending::Posted => !p.posted.any_to(rank),
            Pending::Engine(job) => job.is_done(),
            Pending::Asking { asked, rest, failed, .. } => {
                while let Some((cell, _)) = asked.front() {
                    if !p.am.completions.get(*cell as u64).is_some_and(|c| c.is_done()) {
                        break;
                    }
                    let (cell, mut ask) = asked.pop_front().unwrap();
                    if let Err(e) = ask.receive(p, rank, cell) {
                        failed.get_or_insert(e);
                    }
                }
                asked.is_empty() && (rest.is_empty() || failed.is_some())
            }
        };
        self.ask_more(false);
        Ok(complete && (self.not_before == 0 || activerma_core::clock::now_ns() >= self.not_before))
    }

    /// Waits until the transfer is complete; returns the protocol that moved it, or the first
    /// refusal of the target.
    pub fn wait(mut self) -> Result<Transfer> {
        let outcome = self.finish();
        self.state = Pending::Done;
        outcome.map(|_| self.used)
    }

    /// Settles a transfer on the conduit's one-sided engine: a put is completed by a flush of
    /// its rank (MPI can only complete it); a get's request is waited for (`wait`) or only
    /// asked about. Once landed, only its modelled time is left (At). Failed, it is done (the
    /// conduit gave up on it and spent the ticket).
    fn settle_one_sided(&mut self, wait: bool) -> Result<()> {
        let (get, at) = match self.state {
            Pending::OneSided(at) => (None, at),
            Pending::StartedGet(get, at) => (Some(get), at),
            _ => return Ok(()),
        };
        self.state = Pending::Done;
        let conduit = self.p.conduit();
        let landed = match get {
            None => conduit.rma_flush(Some(self.rank)).map(|_| true)?,
            Some(get) if wait => conduit.rma_wait_get(get).map(|_| true)?,
            Some(get) => conduit.rma_test_get(get)?,
        };
        self.state = match get {
            Some(get) if !landed => Pending::StartedGet(get, at),
            _ => Pending::At(at),
        };
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let (p, rank) = (self.p, self.rank);
        self.settle_one_sided(true)?;
        // Gets: every request sent is answered and its cell given back, even after a failure.
        loop {
            self.ask_more(true);
            let Pending::Asking { asked, failed, .. } = &mut self.state else { break };
            let Some((cell, mut ask)) = asked.pop_front() else { break };
            if let Err(e) = ask.receive(p, rank, cell) {
                failed.get_or_insert(e);
            }
        }
        match std::mem::replace(&mut self.state, Pending::Done) {
            Pending::Done => Ok(()),
            Pending::At(at) => {
                completion::spin_until(at);
                Ok(())
            }
            Pending::OneSided(_) | Pending::StartedGet(..) => unreachable!("settle_one_sided made it At"),
            Pending::Posted => put_am::wait_acknowledged(p, Some(rank)),
            Pending::Engine(job) => {
                if crate::copy_engine::complete(&job) {
                    bump(&p.counters.copy_engine_taken_back, 1);
                }
                completion::spin_until(self.not_before);
                Ok(())
            }
            Pending::Asking { failed, .. } => {
                completion::spin_until(self.not_before);
                failed.map_or(Ok(()), Err)
            }
        }
    }
}

impl Drop for PendingTransfer<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
