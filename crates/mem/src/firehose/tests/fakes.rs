//! Fake transports. `Loopback` connects an origin Firehose to a target Firehose: moves are
//! served by the target either inline (inside send_move) or by a server thread, and replies
//! wait in a queue until some origin thread polls, as AM replies do under the `app` progress
//! mode.

use crate::firehose::{Config, CountingPinner, Firehose, MoveReply, MoveRequest, MoveTransport};
use activerma_core::page::page_size;
use activerma_core::{Error, Rank, Result};
use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Addresses in the target's (fake) memory and the origin's; the counting pinner never
/// touches them.
pub const REMOTE_BASE: usize = 1 << 40;
pub const LOCAL_BASE: usize = 1 << 41;

pub fn page() -> usize {
    page_size()
}

/// A page-based config with everything in buckets, and a timeout so a bug fails instead of
/// hanging.
pub fn cfg(rank: Rank, nranks: usize, m: usize, maxvictim: usize, f: usize) -> Config {
    let mut c = Config::new(rank, nranks, m * page(), maxvictim * page());
    c.firehoses_per_rank = f;
    c.da_limit = 4;
    c.wait_timeout = Some(Duration::from_secs(30));
    c
}

/// For ranks that never send (the target in these tests).
pub struct NoTransport;

impl MoveTransport for NoTransport {
    fn send_move(&self, target: Rank, _req: MoveRequest) -> Result<()> {
        Err(Error::Unsupported(format!("test transport: no moves to rank {target}")))
    }
    fn poll(&self) {}
}

type Replies = Arc<Mutex<VecDeque<MoveReply>>>;

pub struct Loopback {
    origin_rank: Rank,
    target_rank: Rank,
    target: Arc<Firehose>,
    origin: OnceLock<Weak<Firehose>>,
    replies: Replies,
    server: Option<Mutex<mpsc::Sender<MoveRequest>>>,
    /// Every move sent, in order.
    pub log: Mutex<Vec<MoveRequest>>,
    /// Fail every send (the AM layer could not send).
    pub fail_sends: std::sync::atomic::AtomicBool,
}

impl Loopback {
    pub fn new(origin_rank: Rank, target: Arc<Firehose>, threaded: bool) -> Arc<Loopback> {
        let replies: Replies = Arc::default();
        let target_rank = target.config().rank;
        let server = threaded.then(|| {
            let (tx, rx) = mpsc::channel::<MoveRequest>();
            let (t, q) = (target.clone(), replies.clone());
            std::thread::spawn(move || {
                while let Ok(req) = rx.recv() {
                    let reply = t.serve_move(origin_rank, req);
                    q.lock().unwrap().push_back(reply);
                }
            });
            Mutex::new(tx)
        });
        Arc::new(Loopback {
            origin_rank,
            target_rank,
            target,
            origin: OnceLock::new(),
            replies,
            server,
            log: Mutex::new(Vec::new()),
            fail_sends: Default::default(),
        })
    }

    pub fn connect(&self, origin: &Arc<Firehose>) {
        assert!(self.origin.set(Arc::downgrade(origin)).is_ok(), "connected twice");
    }

    pub fn moves(&self) -> Vec<MoveRequest> {
        self.log.lock().unwrap().clone()
    }
}

impl MoveTransport for Loopback {
    fn send_move(&self, target: Rank, req: MoveRequest) -> Result<()> {
        assert_eq!(target, self.target_rank);
        if self.fail_sends.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::PeerGone { rank: target, how: "test: sends fail".into() });
        }
        self.log.lock().unwrap().push(req.clone());
        match &self.server {
            Some(tx) => tx.lock().unwrap().send(req).expect("server thread alive"),
            None => {
                let reply = self.target.serve_move(self.origin_rank, req);
                self.replies.lock().unwrap().push_back(reply);
            }
        }
        Ok(())
    }

    fn poll(&self) {
        let Some(origin) = self.origin.get().and_then(Weak::upgrade) else { return };
        loop {
            let Some(reply) = self.replies.lock().unwrap().pop_front() else { break };
            origin.move_done(self.target_rank, reply);
        }
    }
}

/// An origin (rank 0) and a target (rank 1) with counting pinners, joined by a `Loopback`.
pub struct Pair {
    pub origin: Arc<Firehose>,
    pub target: Arc<Firehose>,
    pub opin: Arc<CountingPinner>,
    pub tpin: Arc<CountingPinner>,
    pub net: Arc<Loopback>,
}

impl Pair {
    pub fn new(ocfg: Config, tcfg: Config, threaded: bool) -> Pair {
        Pair::with(ocfg, tcfg, threaded, CountingPinner::new(), CountingPinner::new(), None)
    }

    pub fn with(
        ocfg: Config,
        tcfg: Config,
        threaded: bool,
        opin: CountingPinner,
        tpin: CountingPinner,
        target_cb: Option<crate::firehose::TargetCallback>,
    ) -> Pair {
        let (opin, tpin) = (Arc::new(opin), Arc::new(tpin));
        let mut target = Firehose::new(tcfg, tpin.clone(), Arc::new(NoTransport)).unwrap();
        if let Some(cb) = target_cb {
            target = target.with_target_callback(cb);
        }
        let target = Arc::new(target);
        let net = Loopback::new(ocfg.rank, target.clone(), threaded);
        let origin = Arc::new(Firehose::new(ocfg, opin.clone(), net.clone()).unwrap());
        net.connect(&origin);
        Pair { origin, target, opin, tpin, net }
    }

    /// Both instances consistent, both pinners within M + MAXVICTIM, no bookkeeping violation.
    pub fn check(&self) {
        for (fh, pin, who) in [(&self.origin, &self.opin, "origin"), (&self.target, &self.tpin, "target")] {
            fh.check_invariants().unwrap_or_else(|e| panic!("{who}: {e}"));
            let c = fh.config();
            let bound = (c.max_remote_buckets + c.max_victim_buckets) * c.bucket_bytes / page();
            assert!(pin.live() <= bound, "{who}: {} pages pinned > M + MAXVICTIM = {bound}", pin.live());
            assert_eq!(pin.live(), fh.pinned_buckets() * c.bucket_bytes / page(), "{who}: table and pinner disagree");
            assert_eq!(pin.violations(), 0, "{who}: pinned twice or unpinned unpinned pages");
        }
    }
}
