//! PART registration (ACTIVERMA_REGISTRATION=part): nothing is pinned. A put or get to
//! another process's exposed private memory moves zero-copy (process_vm_writev/readv) straight
//! into unpinned memory, block by block; a block that meets a page missing at the target
//! stops there (the target registered its exposed pages with userfaultfd in SIGBUS mode, so
//! the copy fails fast instead of faulting the page in), the origin NACKs it and the target's
//! handler pages in (PIO / PI4 / PIA) and answers ERR, after which the origin resends the
//! block — or, under ACTIVERMA_PART_RETRANSMIT=timeout:<t>, resends after the time-out.
//!
//! ```text
//! origin (put_part / get_part):                 target:
//!   drop the table lookup                         (expose: UFFDIO_REGISTER of the whole pages
//!   [FAULT_PROB > 0: INJECT(addr,len) ------>      inside the range; unexpose: unregister)
//!                <------ evicted count ]           INJECT: evict pages of the range, kept
//!   per block: cma; short / EFAULT at page a:
//!     NACK(xfer, block, a, extents) -------->     handler (AM 9): queue the fault
//!                                                 progress poller: page in, then
//!                <-------- ERR(xfer, block)       ERR (AM 10) to the origin
//!   resend the block
//! ```
//!
//! The engine is `activerma_mem::part` (Origin, PartTarget); this file carries its messages
//! as active messages and runs the target's fault handler in every progress step (the app's
//! own calls, the progress thread, or the woken thread: whatever ACTIVERMA_PROGRESS says).
//! The lookup is dropped before the transfer, as for rendezvous: waiting for a target's ERR
//! while holding the region's in-flight count could deadlock with a target in `unexpose`.
//!
//! Fault injection (ACTIVERMA_PART_FAULT_PROB, tests and benchmarks) happens where eviction
//! is real: at the target, which owns the pages. Before each transfer the origin asks the
//! target (INJECT, a request on the NACK handler id, told apart by its length) to evict each
//! whole page inside the accessed range with the probability; the target answers once those
//! pages are missing, so the transfer meets every one of them as a real fault.

use crate::am_request::{self, respond, Asked};
use crate::Proto;
use activerma_am::{Am, AmCtx, HandlerId};
use activerma_core::counters::bump;
use activerma_core::{settings, Config, Error, Rank, Result};
use activerma_mem::part::{
    ErrMsg, ErrSink, FaultInjector, Nack, Origin, OriginLink, PageIn, PartConfig, PartStats, PartTarget, Peer, Retransmit, UffdRegion,
    NACK_BYTES,
};
use activerma_mem::TargetTable;
use std::sync::{Arc, Mutex};

/// Handler ids (7 and 8 are rendezvous.rs).
pub const NACK: HandlerId = 9;
pub const ERR: HandlerId = 10;

/// Length of an INJECT request (address, length), on the NACK handler id.
const INJECT_BYTES: usize = 16;

/// One rank's PART runtime: the origin engine, the target's fault queue, and the ERRs that
/// arrived for this rank's transfers.
pub(crate) struct PartRt {
    origin: Origin,
    target: Arc<PartTarget>,
    errs: Mutex<Vec<ErrMsg>>,
    fault_prob: f64,
}

/// The PART knobs of the job's configuration.
fn part_config(job: &Config) -> Result<PartConfig> {
    let cfg = PartConfig {
        block_size: job.get_u64(settings::PART_BLOCK)? as usize,
        page_in: PageIn::parse(job.get_enum(settings::PART_PAGEIN)?)?,
        retransmit: Retransmit::parse(job.get_enum(settings::PART_RETRANSMIT)?)?,
        pretouch_max: job.get_u64(settings::PART_PRETOUCH)? as usize,
        ..PartConfig::default()
    };
    cfg.validate().map_err(|e| Error::BadSetting {
        name: settings::PART_BLOCK.into(),
        value: job.raw(settings::PART_BLOCK).into(),
        why: e.to_string(),
    })?;
    Ok(cfg)
}

fn words<const N: usize>(msg: &[u8]) -> [u64; N] {
    std::array::from_fn(|i| u64::from_le_bytes(msg[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// The target's side (and the ERR handler of the origin side); only under PART. Returns the
/// runtime the origin side uses (handed to the Proto by `with_table_handlers`).
pub(crate) fn register(am: &Arc<Am>, table: Arc<TargetTable>, job: &Config) -> Result<Arc<PartRt>> {
    // Refuse at init, with how to fix it, when userfaultfd (SIGBUS mode) is not available.
    drop(UffdRegion::new(activerma_core::page::page_size())?);
    let me = am.conduit().rank();
    let stats: Arc<PartStats> = table.part_stats().clone();
    let fault_prob = job.get_f64(settings::PART_FAULT_PROB)?;
    let injector = Mutex::new(FaultInjector::new(fault_prob, 0x5041_5254 ^ me as u64).map_err(|e| Error::BadSetting {
        name: settings::PART_FAULT_PROB.into(),
        value: job.raw(settings::PART_FAULT_PROB).into(),
        why: e.to_string(),
    })?);
    let rt = Arc::new(PartRt {
        origin: Origin::new(me, part_config(job)?, stats.clone())?,
        target: PartTarget::new(stats),
        errs: Mutex::new(Vec::new()),
        fault_prob,
    });
    let r = rt.clone();
    am.register(
        NACK,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| match msg.len() {
            NACK_BYTES => match Nack::decode(msg) {
                Ok(n) => r.target.on_nack(n),
                Err(e) => eprintln!("activerma: rank {me}: malformed PART NACK from rank {}: {e}", ctx.src),
            },
            INJECT_BYTES => {
                let [addr, len] = words::<2>(msg);
                let mut inj = injector.lock().unwrap();
                respond(ctx, table.part_inject(addr as usize, len as usize, &mut inj).map(|n| (n, &[][..])));
            }
            n => eprintln!("activerma: rank {me}: PART message of {n} bytes from rank {} dropped", ctx.src),
        }),
    )?;
    let r = rt.clone();
    am.register(
        ERR,
        Arc::new(move |ctx: &AmCtx, msg: &[u8]| match ErrMsg::decode(msg) {
            Ok(e) => r.errs.lock().unwrap().push(e),
            Err(e) => eprintln!("activerma: rank {me}: malformed PART ERR from rank {}: {e}", ctx.src),
        }),
    )?;
    // The fault handler runs in every progress step; weak references: the poller lives in the
    // Am it would otherwise keep alive.
    let (weak_rt, weak_am) = (Arc::downgrade(&rt), Arc::downgrade(am));
    am.add_poller(Arc::new(move || {
        let (Some(rt), Some(am)) = (weak_rt.upgrade(), weak_am.upgrade()) else { return 0 };
        if rt.target.pending() == 0 {
            return 0;
        }
        match rt.target.progress(&AmSink(&am)) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("activerma: rank {me}: answering a PART fault failed: {e}");
                0
            }
        }
    }))?;
    Ok(rt)
}

impl Proto {
    /// Under PART: the page-in policy this rank's transfers started from now on ask their
    /// targets for (ACTIVERMA_PART_PAGEIN is the initial one). An error under other strategies.
    pub fn set_part_page_in(&self, p: PageIn) -> Result<()> {
        match &self.part {
            Some(rt) => {
                rt.origin.set_page_in(p);
                Ok(())
            }
            None => Err(Error::InvalidArgument(format!(
                "PART page-in policy '{}': this job does not use PART (set ACTIVERMA_REGISTRATION=part)",
                p.name()
            ))),
        }
    }
}

/// ERRs travel as active messages.
struct AmSink<'a>(&'a Am);

impl ErrSink for AmSink<'_> {
    fn send_err(&self, origin: Rank, err: &ErrMsg) -> Result<()> {
        self.0.send(origin, ERR, 0, &err.encode())
    }
}

/// NACKs travel as active messages; waiting makes AM progress (so ERRs arrive, and this rank
/// serves faults of others meanwhile). Under the modelled network the transfer's blocks are
/// booked on this rank's link one by one (NACKs and ERRs, as active messages, already are).
struct Link<'a> {
    p: &'a Proto,
    rt: &'a PartRt,
    /// When the last block booked on the modelled link arrives (0: none booked).
    arrival: std::cell::Cell<u64>,
}

impl<'a> Link<'a> {
    fn new(p: &'a Proto, rt: &'a PartRt) -> Link<'a> {
        Link { p, rt, arrival: std::cell::Cell::new(0) }
    }
}

impl OriginLink for Link<'_> {
    fn send_nack(&self, target: Rank, nack: &Nack) -> Result<()> {
        self.p.am.send(target, NACK, 0, &nack.encode())
    }
    fn take_errs(&self, xfer: u64, out: &mut Vec<ErrMsg>) {
        let mut errs = self.rt.errs.lock().unwrap();
        if errs.is_empty() {
            return;
        }
        out.extend(errs.extract_if(.., |e| e.xfer == xfer));
    }
    fn progress(&self) {
        self.p.am.progress();
    }
    fn paces(&self) -> bool {
        self.p.net.enabled()
    }
    fn book_block(&self, bytes: usize) -> Option<u64> {
        if !self.p.net.enabled() {
            return None;
        }
        let (start, sent) = self.p.net.book_span(bytes);
        self.arrival.set(sent + self.p.net.latency_ns);
        Some(start)
    }
}

fn prepare<'a>(p: &'a Proto, rank: Rank, addr: usize, len: usize, op: &'static str) -> Result<(&'a PartRt, Peer)> {
    let rt = p.part.as_deref().ok_or_else(|| Error::Unsupported("PART is not set up in this rank".into()))?;
    let pid = p
        .conduit
        .peer_pid(rank)
        .ok_or_else(|| Error::Unsupported(format!("PART: rank {rank} cannot be reached by cross-memory attach")))?;
    if rt.fault_prob > 0.0 {
        let mut m = [0u8; INJECT_BYTES];
        m[..8].copy_from_slice(&(addr as u64).to_le_bytes());
        m[8..].copy_from_slice(&(len as u64).to_le_bytes());
        am_request::request(p, NACK, &m, Asked { rank, addr, len, op })?;
    }
    Ok((rt, Peer { rank, pid }))
}

/// Returns when the put completes on the modelled network (0: it has; see `Link`).
pub(crate) fn put(p: &Proto, rank: Rank, addr: usize, src: &[u8]) -> Result<u64> {
    let (rt, peer) = prepare(p, rank, addr, src.len(), "put")?;
    let link = Link::new(p, rt);
    rt.origin.put(&link, peer, addr, src)?;
    bump(&p.counters.bytes_put, src.len() as u64);
    Ok(link.arrival.get())
}

/// As `put`.
pub(crate) fn get(p: &Proto, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<u64> {
    let (rt, peer) = prepare(p, rank, addr, dst.len(), "get")?;
    let link = Link::new(p, rt);
    rt.origin.get(&link, peer, addr, dst)?;
    bump(&p.counters.bytes_got, dst.len() as u64);
    Ok(link.arrival.get())
}
