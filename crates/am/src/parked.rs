//! Messages whose handler could not finish without waiting for this rank's own progress — a
//! put into an access log that is full, while the log's drain is suspended further up this
//! very stack (a log handler that sends a reply whose send polls the inbox). Waiting inside
//! the handler would deadlock; the handler calls `AmCtx::retry_later` instead, and the message
//! is kept here and handed to its handler again from a later progress step.
//!
//! ```text
//! arrival from src:  if parked[src] not empty: append a copy (order per pair is kept)
//!                    else run handler; if it asked to retry: append a copy
//! progress step:     one thread at a time, for each src: run the handler on the front;
//!                    stop at the first that asks to retry again, else pop it
//! ```
//! Nothing here bounds the queue: the origins do (posted puts: proto/src/put_am.rs; requests:
//! one outstanding per completion cell).

use crate::HandlerId;
use activerma_core::Rank;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Clone)]
pub(crate) struct ParkedMsg {
    pub handler: HandlerId,
    pub token: u64,
    pub payload: Vec<u8>,
}

pub(crate) struct Parked {
    per_src: Vec<Mutex<VecDeque<ParkedMsg>>>,
    /// Messages parked over all sources (the common case, none, costs one load).
    count: AtomicUsize,
    /// Held by the thread retrying, so a handler run by a retry that makes progress itself
    /// does not retry the same message again underneath.
    retrying: AtomicBool,
}

impl Parked {
    pub fn new(ranks: usize) -> Parked {
        Parked {
            per_src: (0..ranks).map(|_| Mutex::new(VecDeque::new())).collect(),
            count: AtomicUsize::new(0),
            retrying: AtomicBool::new(false),
        }
    }

    /// Whether messages from `src` wait here (later ones from `src` must queue behind them).
    #[inline]
    pub fn holds(&self, src: Rank) -> bool {
        self.count.load(Ordering::Acquire) != 0 && !self.per_src[src].lock().unwrap().is_empty()
    }

    pub fn push(&self, src: Rank, msg: ParkedMsg) {
        self.per_src[src].lock().unwrap().push_back(msg);
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// Runs `dispatch` (Some: the handler asked to retry again, maybe with a new payload) over
    /// the parked messages in order per source; returns how many finished. Returns 0 at once
    /// if another retry runs.
    pub fn retry(&self, mut dispatch: impl FnMut(Rank, &ParkedMsg) -> Option<Option<Vec<u8>>>) -> usize {
        if self.count.load(Ordering::Acquire) == 0 || self.retrying.swap(true, Ordering::AcqRel) {
            return 0;
        }
        let mut done = 0;
        for (src, q) in self.per_src.iter().enumerate() {
            loop {
                // Run the front without the lock (the handler may park messages behind it).
                let Some(front) = q.lock().unwrap().front().cloned() else { break };
                if let Some(replaced) = dispatch(src, &front) {
                    if let (Some(p), Some(f)) = (replaced, q.lock().unwrap().front_mut()) {
                        f.payload = p;
                    }
                    break;
                }
                q.lock().unwrap().pop_front();
                self.count.fetch_sub(1, Ordering::AcqRel);
                done += 1;
            }
        }
        self.retrying.store(false, Ordering::Release);
        done
    }
}
