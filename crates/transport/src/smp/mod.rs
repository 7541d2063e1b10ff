//! The `smp` conduit: ranks are processes on one host. Segments and the translation tables live
//! in shared memory that every rank maps; private memory is reached by cross-memory attach;
//! active messages travel through each rank's inbox in shared memory (one many-producer queue
//! per rank, `inbox.rs`); a sleeping progress thread is woken with a futex.

pub mod cma;
pub mod files;
pub mod layout;

use crate::inbox::{Inbox, Receiver, SLOT_HEADER};
use crate::liveness::{self, Liveness, DOWN};
use crate::mapping::{Mapping, HEAP_HINT};
use crate::{Conduit, FragHeader, PeerStatus, Window};
use activerma_core::backoff::Backoff;
use activerma_core::clock::Deadline;
use activerma_core::{futex, settings, Config, Error, Rank, Result};
use layout::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Environment variables the launcher hands to each rank (not user settings).
pub const ENV_RANK: &str = "ACTIVERMA_RANK";
pub const ENV_SIZE: &str = "ACTIVERMA_SIZE";
pub const ENV_CTRL_FD: &str = "ACTIVERMA_SMP_CTRL_FD";
pub const ENV_HEAP_FD: &str = "ACTIVERMA_SMP_HEAP_FD";
/// Set by the launcher for a replacement of a rank that died (`--respawn`): 1, 2, ...
pub const ENV_INCARNATION: &str = "ACTIVERMA_INCARNATION";

/// The job's two memfds, as created by the launcher (or by a rank started without one).
pub struct JobFiles {
    pub ctrl: OwnedFd,
    pub heaps: OwnedFd,
    pub params: JobParams,
}

impl JobFiles {
    pub fn create(params: JobParams, inheritable: bool) -> Result<JobFiles> {
        if params.nranks == 0 || params.nranks > 4096 {
            return Err(Error::InvalidArgument(format!("{} ranks: a job has 1 to 4096 ranks", params.nranks)));
        }
        crate::inbox::check_settings(params.am_slots as u64, params.am_slot_size as u64)?;
        let page = activerma_core::page::page_size() as u64;
        if params.heap_size == 0 || !params.heap_size.is_multiple_of(page) {
            return Err(Error::BadSetting {
                name: settings::SEGMENT_SIZE.into(),
                value: params.heap_size.to_string(),
                why: format!("must be a positive multiple of the page size ({page})"),
            });
        }
        let off = params.offsets();
        let ctrl = files::memfd("activerma-ctrl", off.total as u64, inheritable)?;
        let heaps = files::memfd("activerma-heaps", params.heap_size * params.nranks as u64, inheritable)?;
        let map = Mapping::shared(&ctrl, off.total, 0)?;
        // SAFETY: the mapping is fresh, zeroed and at least a page long.
        unsafe {
            std::ptr::write(
                map.ptr as *mut Header,
                Header {
                    magic: MAGIC,
                    version: VERSION,
                    nranks: params.nranks,
                    heap_size: params.heap_size,
                    am_slots: params.am_slots,
                    am_slot_size: params.am_slot_size,
                    table_bytes: params.table_bytes,
                    heap_hint: HEAP_HINT as u64,
                    respawn: params.respawn as u32,
                    failures: AtomicU32::new(0),
                },
            );
        }
        Ok(JobFiles { ctrl, heaps, params })
    }

    /// Job parameters from the configuration; `table_bytes` comes from the layer that owns tables.
    pub fn params_from_config(cfg: &Config, nranks: u32, table_bytes: u64) -> Result<JobParams> {
        Ok(JobParams {
            nranks,
            heap_size: cfg.heap_bytes()? as u64,
            am_slots: cfg.get_u64(settings::AM_SLOTS)? as u32,
            am_slot_size: cfg.get_u64(settings::AM_SLOT_SIZE)? as u32,
            table_bytes,
            respawn: false,
        })
    }

    /// Lets the launcher record what it knows about a rank's process.
    pub fn control(&self) -> Result<JobControl> {
        let off = self.params.offsets();
        Ok(JobControl { map: Mapping::shared(&self.ctrl, off.total, 0)?, off })
    }
}

/// The launcher's view of the control memory: it records pids and exits.
pub struct JobControl {
    map: Mapping,
    off: Offsets,
}

impl JobControl {
    fn info(&self, rank: Rank) -> &RankInfo {
        // SAFETY: rank < nranks (checked by the caller's loop); RankInfo is all atomics.
        unsafe { &*(self.map.ptr.add(self.off.ranks) as *const RankInfo).add(rank) }
    }
    fn header(&self) -> &Header {
        // SAFETY: the header is at offset 0.
        unsafe { &*(self.map.ptr as *const Header) }
    }
    fn life(&self, rank: Rank) -> &AtomicU32 {
        // SAFETY: rank < nranks; n life words at `lives`.
        unsafe { &*(self.map.ptr.add(self.off.lives) as *const AtomicU32).add(rank) }
    }
    /// Records that `rank` died and will be replaced (respawn jobs): its next incarnation is
    /// down until the replacement rejoins, which every survivor sees at its next access to it
    /// or collective. Returns the replacement's incarnation.
    pub fn mark_failed(&self, rank: Rank, exit_info: i32) -> u32 {
        let next = liveness::incarnation_of(self.life(rank).load(Ordering::Acquire)) + 1;
        self.life(rank).store(next << 1 | DOWN, Ordering::Release);
        self.header().failures.fetch_add(1, Ordering::AcqRel);
        self.set_exited(rank, exit_info);
        next
    }
    pub fn set_pid(&self, rank: Rank, pid: u32) {
        self.info(rank).pid.store(pid, Ordering::Release);
    }
    /// `exit_info`: exit status, or minus the signal number.
    pub fn set_exited(&self, rank: Rank, exit_info: i32) {
        let i = self.info(rank);
        i.exit_info.store(exit_info, Ordering::Release);
        i.state.store(STATE_EXITED, Ordering::Release);
        // A peer sleeping in wake mode should notice promptly.
        for r in 0..self.off_nranks() {
            let w = self.info(r);
            w.wake_word.fetch_add(1, Ordering::AcqRel);
            futex::wake_all(&w.wake_word);
        }
    }
    fn off_nranks(&self) -> usize {
        self.header().nranks as usize
    }
}

pub struct SmpConduit {
    rank: Rank,
    nranks: usize,
    ctrl: Arc<Mapping>,
    heaps: Mapping,
    params: JobParams,
    off: Offsets,
    /// Taken by the thread that polls the inbox (one at a time: fragments of a message must be
    /// handled in order).
    poll_lock: AtomicBool,
    receiver: Receiver,
    /// Per destination, its inbox's head as this rank last read it (`Inbox::try_push`).
    seen_heads: Vec<AtomicU64>,
    timeout_s: f64,
    /// Emulated hosts of this many consecutive ranks each (0: one host): heaps and tables of
    /// ranks on other emulated hosts are not offered to upper layers, which then take the
    /// cross-host paths (ACTIVERMA_SMP_RANKS_PER_HOST, ACTIVERMA_SMP_EMULATE_REMOTE).
    ranks_per_host: usize,
    /// What went through the emulated engine, per target.
    traffic: crate::traffic::Traffic,
    /// Respawn jobs: the incarnations this process talks to.
    liveness: Option<Arc<Liveness>>,
    incarnation: u32,
    /// Per peer, the newest incarnation a message came from: replies go to it (a request from
    /// a dead incarnation gets a reply its replacement drops).
    heard: Vec<AtomicU32>,
}

fn env_fd(name: &str) -> Result<RawFd> {
    let v = std::env::var(name)
        .map_err(|_| Error::InvalidArgument(format!("{name} is not set: start the program with `activerma run -n N -- PROGRAM`")))?;
    v.parse().map_err(|_| Error::InvalidArgument(format!("{name}={v} is not a file descriptor")))
}

/// A program started without the launcher is a one-rank job; launcher variables left in its
/// environment (set by hand, or inherited from a job it was started from) would be silently
/// ignored, so they are refused unless they agree with one rank.
fn check_no_stray_launcher_variables() -> Result<()> {
    let not_a_job = |name: &str, v: &str| {
        Error::InvalidArgument(format!(
            "{name}={v} is set, but {ENV_RANK} is not: this program was not started by the launcher and runs as a one-rank job; \
             start it with `activerma run -n N PROGRAM`, or unset {name}"
        ))
    };
    if let Ok(size) = std::env::var(ENV_SIZE) {
        match size.trim().parse::<usize>() {
            Ok(1) => {}
            Ok(_) => return Err(not_a_job(ENV_SIZE, &size)),
            Err(_) => {
                return Err(Error::InvalidArgument(format!("{ENV_SIZE}={size} is not a number of ranks (set by the launcher; unset it)")))
            }
        }
    }
    for name in [ENV_CTRL_FD, ENV_HEAP_FD] {
        if let Ok(v) = std::env::var(name) {
            return Err(not_a_job(name, &v));
        }
    }
    Ok(())
}

impl SmpConduit {
    /// Joins the job the launcher created (ACTIVERMA_RANK etc. set), or returns `None` when
    /// the program was started without the launcher.
    pub fn from_env(cfg: &Config) -> Result<Option<SmpConduit>> {
        let Ok(rank_text) = std::env::var(ENV_RANK) else {
            check_no_stray_launcher_variables()?;
            return Ok(None);
        };
        let rank: Rank = rank_text.parse().map_err(|_| Error::InvalidArgument(format!("{ENV_RANK}={rank_text} is not a rank number")))?;
        // SAFETY: the launcher passed these descriptors to us; we take ownership exactly once.
        let ctrl = unsafe { OwnedFd::from_raw_fd(env_fd(ENV_CTRL_FD)?) };
        let heaps = unsafe { OwnedFd::from_raw_fd(env_fd(ENV_HEAP_FD)?) };
        let incarnation = match std::env::var(ENV_INCARNATION) {
            Ok(v) => v.parse().map_err(|_| Error::InvalidArgument(format!("{ENV_INCARNATION}={v} is not an incarnation number")))?,
            Err(_) => 0,
        };
        let c = Self::attach(cfg, rank, incarnation, ctrl, heaps)?;
        if let Ok(size) = std::env::var(ENV_SIZE) {
            if size.parse::<usize>().ok() != Some(c.nranks) {
                return Err(Error::InvalidArgument(format!("{ENV_SIZE}={size} disagrees with the job's {} ranks", c.nranks)));
            }
        }
        Ok(Some(c))
    }

    /// A one-rank job of our own, for programs started without the launcher.
    pub fn standalone(cfg: &Config, table_bytes: u64) -> Result<SmpConduit> {
        let files = JobFiles::create(JobFiles::params_from_config(cfg, 1, table_bytes)?, false)?;
        Self::attach(cfg, 0, 0, files.ctrl, files.heaps)
    }

    fn attach(cfg: &Config, rank: Rank, incarnation: u32, ctrl_fd: OwnedFd, heap_fd: OwnedFd) -> Result<SmpConduit> {
        // Before any peer can learn of this rank: its exposed private memory is theirs to reach.
        cma::allow_peer_attach();
        let total = files::file_len(ctrl_fd.as_raw_fd())? as usize;
        if total < activerma_core::page::page_size() {
            return Err(Error::InvalidArgument("job control memory is too small: not an activerma job".into()));
        }
        let ctrl = Arc::new(Mapping::shared(&ctrl_fd, total, 0)?);
        // SAFETY: at least one page is mapped; the header is plain data written before spawn.
        let h = unsafe { &*(ctrl.ptr as *const Header) };
        if h.magic != MAGIC || h.version != VERSION {
            return Err(Error::InvalidArgument(
                "job control memory has a foreign format (launcher and program from different activerma versions?)".into(),
            ));
        }
        let params = JobParams {
            nranks: h.nranks,
            heap_size: h.heap_size,
            am_slots: h.am_slots,
            am_slot_size: h.am_slot_size,
            table_bytes: h.table_bytes,
            respawn: h.respawn != 0,
        };
        let off = params.offsets();
        if off.total != total {
            return Err(Error::InvalidArgument("job control memory size does not match its header".into()));
        }
        if rank >= params.nranks as usize {
            return Err(Error::InvalidRank { rank, size: params.nranks as usize });
        }
        let heaps = Mapping::shared(&heap_fd, (params.heap_size * params.nranks as u64) as usize, h.heap_hint as usize)?;
        let n = params.nranks as usize;
        // SAFETY: n life words at `lives`, inside the mapping.
        let lives = unsafe { ctrl.ptr.add(off.lives) as *const AtomicU32 };
        let liveness = params.respawn.then(|| Arc::new(unsafe { Liveness::new(ctrl.clone(), lives, n) }));
        let life = unsafe { (*lives.add(rank)).load(Ordering::Acquire) };
        if liveness::incarnation_of(life) != incarnation {
            return Err(Error::InvalidArgument(format!(
                "{ENV_INCARNATION}={incarnation}, but the job's rank {rank} is at incarnation {} (set by the launcher; unset it)",
                liveness::incarnation_of(life)
            )));
        }
        let c = SmpConduit {
            rank,
            nranks: n,
            ctrl,
            heaps,
            params,
            off,
            poll_lock: AtomicBool::new(false),
            receiver: Receiver::default(),
            seen_heads: (0..n).map(|_| AtomicU64::new(0)).collect(),
            timeout_s: cfg.get_f64(settings::TIMEOUT_S)?,
            ranks_per_host: emulated_hosts(cfg)?,
            traffic: crate::traffic::Traffic::new(n),
            liveness,
            incarnation,
            heard: (0..n).map(|_| AtomicU32::new(0)).collect(),
        };
        let me = c.info(rank);
        me.pid.store(std::process::id(), Ordering::Release);
        // A replacement starts without the progress thread its predecessor may have announced.
        me.serving.store(0, Ordering::Release);
        me.heap_base.store(c.heaps.ptr as u64 + (rank as u64 * params.heap_size), Ordering::Release);
        // A replacement has seen every failure so far (its own included).
        me.acked_failures.store(c.header().failures.load(Ordering::Acquire), Ordering::Release);
        me.state.store(STATE_RUNNING, Ordering::Release);
        Ok(c)
    }

    pub fn params(&self) -> JobParams {
        self.params
    }

    fn header(&self) -> &Header {
        // SAFETY: the header is at offset 0 of the mapping.
        unsafe { &*(self.ctrl.ptr as *const Header) }
    }

    #[inline]
    fn info(&self, rank: Rank) -> &RankInfo {
        // SAFETY: callers pass rank < nranks; the array lies inside the mapping.
        unsafe { &*(self.ctrl.ptr.add(self.off.ranks) as *const RankInfo).add(rank) }
    }

    fn barrier_ctl(&self) -> &BarrierCtl {
        // SAFETY: inside the mapping, all atomics.
        unsafe { &*(self.ctrl.ptr.add(self.off.barrier) as *const BarrierCtl) }
    }

    fn exchange_slot(&self, rank: Rank) -> *mut u8 {
        // SAFETY: n slots of EXCHANGE_CHUNK lie inside the mapping.
        unsafe { self.ctrl.ptr.add(self.off.exchange + rank * EXCHANGE_CHUNK) }
    }

    fn inbox(&self, rank: Rank) -> Inbox {
        // SAFETY: rank's inbox lies inside the mapping (page-aligned), and is used as nothing else.
        unsafe {
            let base = self.ctrl.ptr.add(self.off.inboxes + rank * self.off.inbox_bytes);
            Inbox::new(base, self.params.am_slots as usize, self.params.am_slot_size as usize)
        }
    }

    /// Whether `incarnation` of `rank` has died (respawn jobs: a replacement is counted once
    /// it dies), for the inbox's holes (`Inbox::drain`). Without respawn a death ends the job.
    fn incarnation_dead(&self, rank: u32, incarnation: u32) -> bool {
        let Some(l) = &self.liveness else { return false };
        (rank as usize) < self.nranks && liveness::incarnation_of(l.word(rank as usize).load(Ordering::Acquire)) & 0xffff > incarnation
    }

    /// Why a collective cannot complete: a peer that failed (respawn jobs) or is gone.
    fn first_lost_peer(&self) -> Option<Error> {
        if let Some(f) = self.liveness.as_ref().and_then(|l| l.first_failed(self.rank)) {
            return Some(f);
        }
        (0..self.nranks).filter(|&r| r != self.rank).find_map(|r| match self.peer_status(r) {
            PeerStatus::Gone(how) => Some(Error::PeerGone { rank: r, how }),
            _ => None,
        })
    }

    /// The tag a message to `dst` carries in a respawn job: the incarnation of `dst` it is
    /// meant for (the newest this process agreed to or heard from) and our own.
    fn tag_for(&self, dst: Rank) -> u32 {
        let Some(l) = &self.liveness else { return 0 };
        let to = liveness::incarnation_of(l.known(dst)).max(self.heard[dst].load(Ordering::Relaxed));
        (to & 0xffff) << 16 | (self.incarnation & 0xffff)
    }

    /// Whether a message with `tag` from `src` is for this incarnation (a message meant for a
    /// dead one, still in the ring, is dropped); notes the sender's incarnation.
    fn accept_tag(&self, src: Rank, tag: u32) -> bool {
        if self.liveness.is_none() {
            return true;
        }
        if tag >> 16 != self.incarnation & 0xffff {
            return false;
        }
        self.heard[src].fetch_max(tag & 0xffff, Ordering::Relaxed);
        true
    }

    /// Spins until `done()` holds, running `progress`, failing if a peer dies or time runs out.
    fn wait_until(&self, what: &str, progress: &mut dyn FnMut(), done: &mut dyn FnMut() -> bool) -> Result<()> {
        let deadline = Deadline::after_secs(self.timeout_s);
        let mut backoff = Backoff::new();
        while !done() {
            progress();
            if backoff.snooze() {
                if let Some(lost) = self.first_lost_peer() {
                    if done() {
                        break;
                    }
                    return Err(lost);
                }
                if deadline.expired() {
                    return Err(Error::Timeout { what: what.into(), secs: deadline.secs() });
                }
            }
        }
        Ok(())
    }
}

fn describe_exit(info: i32) -> String {
    if info >= 0 {
        format!("exited with status {info}")
    } else {
        // SAFETY: strsignal returns a static string for any number.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(-info)) }.to_string_lossy().into_owned();
        format!("killed by signal {} ({name})", -info)
    }
}

impl Conduit for SmpConduit {
    fn name(&self) -> &'static str {
        "smp"
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.nranks
    }

    fn barrier(&self, progress: &mut dyn FnMut()) -> Result<()> {
        let b = self.barrier_ctl();
        // A rank that failed will not arrive: say so before counting ourselves in.
        if let Some(f) = self.liveness.as_ref().and_then(|l| l.first_failed(self.rank)) {
            return Err(f);
        }
        let gen = b.generation.0.load(Ordering::Acquire);
        if b.count.0.fetch_add(1, Ordering::AcqRel) + 1 == self.nranks as u32 {
            b.count.0.store(0, Ordering::Relaxed);
            b.generation.0.store(gen.wrapping_add(1), Ordering::Release);
            return Ok(());
        }
        self.wait_until("a barrier", progress, &mut || b.generation.0.load(Ordering::Acquire) != gen)
    }

    fn allgather(&self, mine: &[u8], progress: &mut dyn FnMut()) -> Result<Vec<Vec<u8>>> {
        // Rounds of EXCHANGE_CHUNK bytes: the first carries each length up front.
        let chunk = EXCHANGE_CHUNK - 8;
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); self.nranks];
        let mut lens = vec![0usize; self.nranks];
        let mut round = 0;
        loop {
            let start = round * chunk;
            let piece = &mine[start.min(mine.len())..(start + chunk).min(mine.len())];
            // SAFETY: our own exchange slot; nobody reads it until the barrier below.
            unsafe {
                std::ptr::write_unaligned(self.exchange_slot(self.rank) as *mut u64, mine.len() as u64);
                std::ptr::copy_nonoverlapping(piece.as_ptr(), self.exchange_slot(self.rank).add(8), piece.len());
            }
            self.barrier(progress)?;
            for r in 0..self.nranks {
                // SAFETY: everyone finished writing before the barrier.
                unsafe {
                    lens[r] = std::ptr::read_unaligned(self.exchange_slot(r) as *const u64) as usize;
                    let take = lens[r].saturating_sub(start).min(chunk);
                    out[r].extend_from_slice(std::slice::from_raw_parts(self.exchange_slot(r).add(8), take));
                }
            }
            self.barrier(progress)?;
            round += 1;
            if lens.iter().all(|&l| l <= round * chunk) {
                return Ok(out);
            }
        }
    }

    fn am_fragment_capacity(&self, _dst: Rank) -> usize {
        self.params.am_slot_size as usize - SLOT_HEADER
    }

    fn am_try_send(&self, dst: Rank, header: FragHeader, payload: &[u8], deliver_at_ns: u64) -> Result<bool> {
        debug_assert!(payload.len() <= self.am_fragment_capacity(dst));
        let who = (self.incarnation & 0xffff) << 16 | self.rank as u32;
        let sent = self.inbox(dst).try_push(who, &self.seen_heads[dst], header, payload, deliver_at_ns, self.tag_for(dst));
        if sent {
            self.wake_if_sleeping(dst);
        }
        Ok(sent)
    }

    fn am_poll(&self, budget: usize, f: &mut dyn FnMut(Rank, FragHeader, &[u8])) -> usize {
        let inbox = self.inbox(self.rank);
        if !self.receiver.holding() && inbox.idle() {
            return 0; // the common idle step: no locked instruction
        }
        if self.poll_lock.swap(true, Ordering::Acquire) {
            return 0; // another thread of this rank is polling
        }
        let handled = self.receiver.poll(&inbox, budget, &|r, i| self.incarnation_dead(r, i), &mut |frag| {
            if self.accept_tag(frag.src as Rank, frag.tag) {
                f(frag.src as Rank, frag.am, frag.payload)
            }
        });
        self.poll_lock.store(false, Ordering::Release);
        handled
    }

    fn heap_window(&self, rank: Rank) -> Option<Window> {
        if !self.same_host(rank) {
            return None;
        }
        self.mapped_heap(rank)
    }

    fn heap_base(&self, rank: Rank) -> usize {
        self.mapped_heap(rank).map(|w| w.remote_base).unwrap_or(0)
    }

    /// Emulating other hosts, the engine also reaches private memory a target registered for
    /// a rendezvous (the target checked the range before confirming it).
    fn rma_reaches_registered(&self) -> bool {
        self.ranks_per_host != 0
    }

    fn rma_put(&self, rank: Rank, addr: usize, src: &[u8], _complete: bool) -> Result<()> {
        self.traffic.rma(rank, src.len());
        if !self.same_host(rank) && self.outside_heap(rank, addr) {
            return self.cma_write(rank, addr, src);
        }
        let dst = self.emulated_engine(rank, addr, src.len())?;
        // SAFETY: the engine checked the range lies in rank's heap mapping.
        unsafe { activerma_core::copy::copy_bytes(src.as_ptr(), dst, src.len()) };
        std::sync::atomic::fence(Ordering::Release);
        Ok(())
    }

    fn rma_get(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        self.traffic.rma(rank, dst.len());
        if !self.same_host(rank) && self.outside_heap(rank, addr) {
            return self.cma_read(rank, addr, dst);
        }
        let src = self.emulated_engine(rank, addr, dst.len())?;
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: as above.
        unsafe { activerma_core::copy::copy_bytes(src, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn rma_atomic(&self, rank: Rank, addr: usize, op: crate::AtomicOp, width: crate::Width) -> Result<u64> {
        self.traffic.rma(rank, width.bytes());
        let p = self.emulated_engine(rank, addr, width.bytes())?;
        // SAFETY: inside the mapping; the caller checked the alignment to the width.
        Ok(unsafe { crate::apply_atomic_at(p, op, width) })
    }

    fn table_window(&self, rank: Rank) -> Option<Window> {
        if !self.same_host(rank) {
            return None;
        }
        // SAFETY: rank's table lies inside the control mapping.
        let local = unsafe { self.ctrl.ptr.add(self.off.tables + rank * self.off.table_bytes) };
        Some(Window { local, remote_base: 0, len: self.off.table_bytes })
    }

    fn cma_write(&self, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
        cma::write(self.info(rank).pid.load(Ordering::Acquire) as i32, rank, addr, src)
    }

    fn cma_read(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        cma::read(self.info(rank).pid.load(Ordering::Acquire) as i32, rank, addr, dst)
    }

    fn cma_writev(&self, rank: Rank, pieces: &[(usize, &[u8])], max_iov: usize) -> Result<usize> {
        cma::writev(self.info(rank).pid.load(Ordering::Acquire) as i32, rank, pieces, max_iov)
    }

    fn cma_readv(&self, rank: Rank, pieces: &mut [(usize, &mut [u8])], max_iov: usize) -> Result<usize> {
        cma::readv(self.info(rank).pid.load(Ordering::Acquire) as i32, rank, pieces, max_iov)
    }

    fn node_of(&self, rank: Rank) -> usize {
        rank.checked_div(self.ranks_per_host).unwrap_or(0)
    }

    fn traffic(&self) -> Option<&crate::traffic::Traffic> {
        Some(&self.traffic)
    }

    /// One control file for the whole job (every rank's inbox, table, logs; the collectives).
    fn control_memory(&self) -> Option<crate::ControlMemory> {
        Some(crate::ControlMemory { bytes: self.ctrl.len, resident: self.ctrl.resident_bytes().ok()?, ranks: self.size() })
    }

    unsafe fn zero_heap(&self, ptr: *mut u8, len: usize) {
        // The heaps are one memfd, mapped by the job's processes only (no device holds their
        // pages, which a punched page would leave stale): punching pages is safe here, and
        // a large allocation (ARMCI's group pool, 128 MiB by default) costs no memory.
        // SAFETY: the caller's contract.
        unsafe { crate::mapping::zero_shared(ptr as usize, len) }
    }

    fn peer_pid(&self, rank: Rank) -> Option<i32> {
        Some(self.info(rank).pid.load(Ordering::Acquire) as i32)
    }

    fn wake(&self, rank: Rank) {
        let i = self.info(rank);
        i.wake_word.fetch_add(1, Ordering::AcqRel);
        futex::wake_all(&i.wake_word);
    }

    fn announce_serving(&self, on_its_own: bool) {
        self.info(self.rank).serving.store(on_its_own as u32, Ordering::Release);
    }

    fn serves_on_its_own(&self, rank: Rank) -> bool {
        rank < self.nranks && self.info(rank).serving.load(Ordering::Acquire) != 0
    }

    fn sleep(&self, timeout_ns: u64, still_idle: &mut dyn FnMut() -> bool) {
        let me = self.info(self.rank);
        let word = me.wake_word.load(Ordering::Acquire);
        me.sleeping.store(1, Ordering::SeqCst);
        if still_idle() {
            futex::wait(&me.wake_word, word, timeout_ns);
        }
        me.sleeping.store(0, Ordering::Release);
    }

    fn peer_status(&self, rank: Rank) -> PeerStatus {
        let i = self.info(rank);
        match i.state.load(Ordering::Acquire) {
            STATE_EXITED => PeerStatus::Gone(describe_exit(i.exit_info.load(Ordering::Acquire))),
            STATE_FINALIZED => PeerStatus::Finalized,
            _ => PeerStatus::Running,
        }
    }

    fn mark_finalized(&self) {
        self.info(self.rank).state.store(STATE_FINALIZED, Ordering::Release);
    }

    fn liveness(&self) -> Option<Arc<Liveness>> {
        self.liveness.clone()
    }

    fn incarnation(&self) -> u32 {
        self.incarnation
    }

    fn rejoin(&self, progress: &mut dyn FnMut()) -> Result<()> {
        let Some(l) = &self.liveness else { return Ok(()) };
        let mine = l.word(self.rank).load(Ordering::Acquire);
        if mine & DOWN == 0 {
            return Ok(()); // an original rank, or rejoined already
        }
        // Every other rank must have seen the failures up to ours: then none is inside a
        // barrier (it left it with RankFailed, or never entered it) and the counter can restart.
        let failures = self.info(self.rank).acked_failures.load(Ordering::Acquire);
        self.wait_until("every rank to see the failure (wait_for_rank)", progress, &mut || {
            (0..self.nranks).filter(|&r| r != self.rank).all(|r| {
                let i = self.info(r);
                i.acked_failures.load(Ordering::Acquire) >= failures
                    || matches!(i.state.load(Ordering::Acquire), STATE_EXITED | STATE_FINALIZED)
                    || l.word(r).load(Ordering::Acquire) & DOWN != 0
            })
        })?;
        self.barrier_ctl().count.0.store(0, Ordering::Release);
        l.word(self.rank).store(mine & !DOWN, Ordering::Release);
        l.adopt_if_up(self.rank);
        for r in 0..self.nranks {
            self.wake(r);
        }
        Ok(())
    }

    fn wait_for_rank(&self, rank: Rank, progress: &mut dyn FnMut()) -> Result<u32> {
        if rank >= self.nranks {
            return Err(Error::InvalidRank { rank, size: self.nranks });
        }
        let Some(l) = &self.liveness else { return crate::never_replaced(self.peer_status(rank), rank) };
        if l.usable(rank) {
            return Ok(liveness::incarnation_of(l.known(rank)));
        }
        let me = self.info(self.rank);
        let deadline = Deadline::after_secs(self.timeout_s);
        let mut backoff = Backoff::new();
        loop {
            // Out of every collective until the replacement is up: tell it so.
            me.acked_failures.fetch_max(self.header().failures.load(Ordering::Acquire), Ordering::AcqRel);
            if let Some(life) = l.adopt_if_up(rank) {
                return Ok(liveness::incarnation_of(life));
            }
            progress();
            if backoff.snooze() && deadline.expired() {
                return Err(Error::Timeout { what: format!("rank {rank}'s replacement to rejoin"), secs: deadline.secs() });
            }
        }
    }
}

/// Ranks per emulated host (0: every rank on one host): ACTIVERMA_SMP_RANKS_PER_HOST, or 1
/// under ACTIVERMA_SMP_EMULATE_REMOTE (every rank a host of its own).
fn emulated_hosts(cfg: &Config) -> Result<usize> {
    let per_host = cfg.get_u64(settings::SMP_RANKS_PER_HOST)? as usize;
    if !cfg.get_bool(settings::SMP_EMULATE_REMOTE)? {
        return Ok(per_host);
    }
    if per_host > 1 {
        return Err(Error::BadSetting {
            name: settings::SMP_RANKS_PER_HOST.into(),
            value: per_host.to_string(),
            why: "with ACTIVERMA_SMP_EMULATE_REMOTE=1 every rank is a host of its own: 0 or 1".into(),
        });
    }
    Ok(1)
}

impl SmpConduit {
    /// Whether `rank` runs on this rank's (emulated) host.
    #[inline]
    fn same_host(&self, rank: Rank) -> bool {
        self.node_of(rank) == self.node_of(self.rank)
    }

    /// Rank's heap as mapped here (every heap of the job is).
    fn mapped_heap(&self, rank: Rank) -> Option<Window> {
        let base = self.info(rank).heap_base.load(Ordering::Acquire) as usize;
        // SAFETY: rank's heap lies inside our mapping of all heaps.
        let local = unsafe { self.heaps.ptr.add(rank * self.params.heap_size as usize) };
        Some(Window { local, remote_base: if base == 0 { local as usize } else { base }, len: self.params.heap_size as usize })
    }

    /// The emulated one-sided engine's address check: like a NIC, it only reaches the
    /// target's registered heap (upper layers have checked the segment map already).
    /// Whether `addr` lies outside `rank`'s heap (private memory: reached by cross-memory
    /// attach when emulating another host's engine).
    fn outside_heap(&self, rank: Rank, addr: usize) -> bool {
        self.mapped_heap(rank).is_none_or(|w| addr.checked_sub(w.remote_base).is_none_or(|off| off >= w.len))
    }

    fn emulated_engine(&self, rank: Rank, addr: usize, len: usize) -> Result<*mut u8> {
        self.mapped_heap(rank).and_then(|w| w.translate(addr, len)).ok_or(Error::NotExposed { rank, addr, len })
    }

    #[inline]
    fn wake_if_sleeping(&self, dst: Rank) {
        // Pairs with the SeqCst store of `sleeping` in `sleep`: either the sleeper sees our
        // message when it rechecks, or we see it sleeping and wake it.
        fence(Ordering::SeqCst);
        if self.info(dst).sleeping.load(Ordering::Relaxed) != 0 {
            self.wake(dst);
        }
    }
}
