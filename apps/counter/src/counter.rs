//! The access counter over activerma: one array per rank, and a put or get to it in each of the
//! five designs, counted per page.
//!
//! - AA-Poll: the target marks its array's pages `W=1, WL=1, WLD=0` and `R=1, RL=1, RLD=0`
//!   (section 4.2), logging into one access log: a plain put writes its data and logs only its
//!   metadata, a plain get is served and logs its metadata; the log's handler counts the entry
//!   for the page it names. The handler runs when the application polls; an active flush to
//!   every rank at the end has every count taken.
//! - RMA: plain accesses; after each, a remote atomic add on the target's counter of the page.
//! - A-KV: every access is an active message whose handler performs it (a get replies with the
//!   value, the origin polls until the reply is there) and counts it.
//! - Allreduce: plain accesses counted at the origin per (target, page), summed at the end.
//! - No-Cnt: plain accesses.

use crate::array::{Array, Layout, PageCounts};
use crate::variant::Variant;
use crate::workload::{value, Access, Kind, Mix};
use activerma::{Actions, AmCtx, Error, HandlerId, LogEntry, LogOp, Notify, Result, World, FIRST_USER_HANDLER};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PUT_AM: HandlerId = FIRST_USER_HANDLER + 50;
const GET_AM: HandlerId = FIRST_USER_HANDLER + 51;
const REPLY_AM: HandlerId = FIRST_USER_HANDLER + 52;
/// The access-log domain of the array's pages (the DHT uses 1).
pub const DOMAIN: u16 = 2;
const LOG_BYTES: usize = 1 << 20;
/// Accesses between two polls in AA-Poll and A-KV.
pub const POLL_EVERY: u32 = 16;
const COMPLETE_TIMEOUT: Duration = Duration::from_secs(120);
/// Empty polls before a waiting rank starts yielding its CPU.
const SPIN_POLLS: u32 = 100;

/// The reply to this rank's outstanding A-KV get (one at a time: the origin waits for it).
#[derive(Default)]
struct Reply {
    token: AtomicU64,
    value: AtomicU64,
}

pub struct Counter {
    pub world: World,
    pub arr: Arc<Array>,
    /// Counts taken by this rank's handlers (AA-Poll, A-KV).
    pub counts: Arc<PageCounts>,
    /// A-KV accesses this rank's handlers served.
    served: Arc<AtomicU64>,
    /// Log entries and messages that named no word of the array, or log entries that carried
    /// data although the pages say WLD=0, RLD=0 (the run is then invalid).
    pub stray: Arc<AtomicU64>,
    reply: Arc<Reply>,
    next_token: u64,
    /// Allreduce: this origin's counts per (target, page), puts then gets.
    origin_counts: Vec<u64>,
    /// Allreduce: the reduced counts of this rank's pages, puts then gets.
    reduced: Vec<u64>,
    /// Every origin's accesses, to check that values read or left in the arrays were written
    /// by a put to that very word.
    pub writers: Vec<Vec<Access>>,
    poll_left: u32,
}

impl Counter {
    /// Collective: allocates the arrays, installs the handlers and the access log.
    pub fn new(world: &World, mix: Mix) -> Result<Counter> {
        if mix.ranks != world.size() {
            return Err(Error::InvalidArgument(format!("the mix is for {} ranks, the job has {}", mix.ranks, world.size())));
        }
        let writers = (0..mix.ranks).map(|o| mix.workload(o).map(|w| w.accesses)).collect::<std::result::Result<_, _>>();
        let writers = writers.map_err(Error::InvalidArgument)?;
        let arr = Arc::new(Array::alloc(world, Layout::new(mix.pages))?);
        let counts = Arc::new(PageCounts::new(mix.pages));
        let served = Arc::new(AtomicU64::new(0));
        let stray = Arc::new(AtomicU64::new(0));
        let reply = Arc::new(Reply::default());
        let words = arr.layout.words();
        {
            let (a, c, s, x) = (arr.clone(), counts.clone(), served.clone(), stray.clone());
            world.register_handler(
                PUT_AM,
                Arc::new(move |_: &AmCtx, msg: &[u8]| {
                    let (w, v) = (word_of(msg), u64_at(msg, 4));
                    if w >= words {
                        x.fetch_add(1, Ordering::Relaxed);
                    } else {
                        a.word(w).store(v, Ordering::Relaxed);
                        c.bump(Kind::Put, w / crate::workload::WORDS_PER_PAGE);
                    }
                    s.fetch_add(1, Ordering::Release);
                }),
            )?;
            let (a, c, s, x) = (arr.clone(), counts.clone(), served.clone(), stray.clone());
            world.register_handler(
                GET_AM,
                Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
                    let w = word_of(msg);
                    let v = if w >= words {
                        x.fetch_add(1, Ordering::Relaxed);
                        0
                    } else {
                        c.bump(Kind::Get, w / crate::workload::WORDS_PER_PAGE);
                        a.word(w).load(Ordering::Relaxed)
                    };
                    s.fetch_add(1, Ordering::Release);
                    ctx.reply(REPLY_AM, ctx.token, &v.to_le_bytes());
                }),
            )?;
            let r = reply.clone();
            world.register_handler(
                REPLY_AM,
                Arc::new(move |ctx: &AmCtx, msg: &[u8]| {
                    r.value.store(u64_at(msg, 0), Ordering::Relaxed);
                    r.token.store(ctx.token, Ordering::Release);
                }),
            )?;
        }
        let (a, c, x) = (arr.clone(), counts.clone(), stray.clone());
        world.create_log(
            DOMAIN,
            LOG_BYTES,
            Notify::Poll,
            Arc::new(move |e: &LogEntry| {
                // Metadata only (WLD = RLD = 0): one entry per access and page run; our accesses
                // are aligned words, so one entry per access.
                if e.meta.offset != 0 {
                    return;
                }
                let kind = match e.meta.op {
                    LogOp::Put => Kind::Put,
                    LogOp::Get => Kind::Get,
                };
                match a.page_of_addr(e.meta.addr) {
                    Some(page) if e.data().is_empty() => c.bump(kind, page),
                    _ => {
                        x.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }),
        )?;
        world.barrier()?;
        let p = world.size();
        Ok(Counter {
            world: world.clone(),
            counts,
            served,
            stray,
            reply,
            next_token: 0,
            origin_counts: vec![0; 2 * p * mix.pages],
            reduced: Vec::new(),
            writers,
            poll_left: POLL_EVERY,
            arr,
        })
    }

    pub fn pages(&self) -> usize {
        self.arr.layout.pages
    }

    /// Collective: resets the arrays and counts and sets up `v`'s page marks.
    pub fn begin(&mut self, v: Variant) -> Result<()> {
        self.world.barrier()?;
        self.arr.reset(self.world.rank());
        self.counts.reset();
        self.served.store(0, Ordering::Relaxed);
        self.stray.store(0, Ordering::Relaxed);
        self.origin_counts.fill(0);
        self.reduced.clear();
        self.poll_left = POLL_EVERY;
        if v.is_aa() {
            let (base, len) = (self.arr.seg.as_ptr(), self.arr.layout.data_bytes());
            self.world.assoc_pages(base, len, Actions::W | Actions::R | Actions::WL | Actions::RL, Some(DOMAIN))?;
        }
        self.world.barrier()
    }

    /// Collective: back to plain pages.
    pub fn end(&mut self, v: Variant) -> Result<()> {
        self.world.barrier()?;
        if v.is_aa() {
            self.world.assoc_pages(self.arr.seg.as_ptr(), self.arr.layout.data_bytes(), Actions::W | Actions::R, None)?;
        }
        self.world.barrier()
    }

    /// Access `i` of this origin, `a`; returns the value a get read.
    #[inline]
    pub fn access(&mut self, v: Variant, i: usize, a: &Access) -> Result<Option<u64>> {
        let (t, w) = (a.target(), a.word as usize);
        let got = match (v, a.kind) {
            (Variant::AKv, Kind::Put) => {
                let mut msg = [0u8; 12];
                msg[..4].copy_from_slice(&a.word.to_le_bytes());
                msg[4..].copy_from_slice(&value(self.world.rank(), i).to_le_bytes());
                self.world.send_am(t, PUT_AM, 0, &msg)?;
                None
            }
            (Variant::AKv, Kind::Get) => Some(self.akv_get(t, a.word)?),
            (_, Kind::Put) => {
                self.world.put_nbi(self.arr.word_at(t, w), &value(self.world.rank(), i).to_le_bytes())?;
                None
            }
            (_, Kind::Get) => {
                let mut b = [0u8; 8];
                self.world.get(self.arr.word_at(t, w), &mut b)?;
                Some(u64::from_le_bytes(b))
            }
        };
        match v {
            Variant::Rma => self.world.add(self.arr.counter_at(t, a.kind, a.page()), 1)?,
            Variant::Allreduce => {
                let (p, pages) = (self.world.size(), self.pages());
                let half = if a.kind == Kind::Put { 0 } else { p * pages };
                self.origin_counts[half + t * pages + a.page()] += 1;
            }
            _ => {}
        }
        self.tick(v);
        Ok(got)
    }

    /// An A-KV get: a message to the target's handler, then polling until its reply is here.
    fn akv_get(&mut self, t: usize, word: u32) -> Result<u64> {
        self.next_token += 1;
        let token = self.next_token;
        self.world.send_am(t, GET_AM, token, &word.to_le_bytes())?;
        let reply = &self.reply;
        wait_for(
            &self.world,
            || reply.token.load(Ordering::Acquire) == token,
            || format!("A-KV: the reply of rank {t} to get {token} of rank {}", self.world.rank()),
        )?;
        Ok(self.reply.value.load(Ordering::Relaxed))
    }

    /// The application's polling in AA-Poll and A-KV (the only variants with handlers).
    fn tick(&mut self, v: Variant) {
        if !matches!(v, Variant::AaPoll | Variant::AKv) {
            return;
        }
        self.poll_left -= 1;
        if self.poll_left == 0 {
            self.world.progress();
            self.poll_left = POLL_EVERY;
        }
    }

    /// Returns when every access this rank issued has been carried out and counted (for A-KV:
    /// when this rank's handlers served the `expected` accesses sent here); then all ranks
    /// meet in a barrier. Allreduce reduces its counts here, inside the timed part.
    pub fn complete(&mut self, v: Variant, expected: u64) -> Result<()> {
        match v {
            Variant::AaPoll => {
                for t in 0..self.world.size() {
                    self.world.active_flush(t)?;
                }
            }
            Variant::AKv => {
                let served = &self.served;
                wait_for(
                    &self.world,
                    || served.load(Ordering::Acquire) >= expected,
                    || format!("A-KV: {} of {expected} accesses served at rank {}", served.load(Ordering::Acquire), self.world.rank()),
                )?
            }
            Variant::Allreduce => self.reduce()?,
            Variant::Rma | Variant::NoCnt => {}
        }
        // Completes the implicit puts (and, for RMA, nothing is left: atomics are blocking).
        self.world.barrier()
    }

    /// Sums every origin's counts of this rank's pages. The API has no allreduce (nor reduce),
    /// so this is an allgather of every origin's whole count array, of which each rank sums
    /// its own part — more data than an allreduce would move, but one collective, like it.
    fn reduce(&mut self) -> Result<()> {
        let (me, p, pages) = (self.world.rank(), self.world.size(), self.pages());
        let mut b = Vec::with_capacity(self.origin_counts.len() * 8);
        for c in &self.origin_counts {
            b.extend(c.to_le_bytes());
        }
        let all = self.world.allgather(&b)?;
        self.reduced = vec![0; 2 * pages];
        for r in &all {
            for (half, out) in self.reduced.chunks_mut(pages).enumerate() {
                let from = (half * p + me) * pages;
                for (pg, o) in out.iter_mut().enumerate() {
                    *o += u64_at(r, (from + pg) * 8);
                }
            }
        }
        Ok(())
    }

    /// The per-page (puts, gets) counts of this rank's array that `v` took (None: No-Cnt).
    /// Call after `complete`.
    pub fn page_counts(&self, v: Variant) -> Option<(Vec<u64>, Vec<u64>)> {
        match v {
            Variant::AaPoll | Variant::AKv => Some(self.counts.snapshot()),
            Variant::Rma => Some(self.arr.rma_counts()),
            Variant::Allreduce => {
                let (puts, gets) = self.reduced.split_at(self.pages());
                Some((puts.to_vec(), gets.to_vec()))
            }
            Variant::NoCnt => None,
        }
    }
}

/// Polls (runs this rank's handlers) until `done`: spins while that is cheap, then yields the
/// CPU between polls, so that with more ranks than cores the rank we wait for can run.
fn wait_for(world: &World, done: impl Fn() -> bool, what: impl Fn() -> String) -> Result<()> {
    let mut idle = 0u32;
    let mut deadline = None;
    while !done() {
        if world.progress() > 0 {
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        if idle < SPIN_POLLS {
            std::hint::spin_loop();
            continue;
        }
        std::thread::yield_now();
        if idle & 1023 == 0 && Instant::now() > *deadline.get_or_insert_with(|| Instant::now() + COMPLETE_TIMEOUT) {
            return Err(Error::Timeout { what: what(), secs: COMPLETE_TIMEOUT.as_secs_f64() });
        }
    }
    Ok(())
}

fn word_of(msg: &[u8]) -> usize {
    u32::from_le_bytes(msg[..4].try_into().unwrap()) as usize
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
