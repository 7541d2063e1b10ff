//! Surviving a rank's death (`activerma run --respawn N`, one host).
//!
//! ```text
//! survivor                                   replacement of rank r (incarnation k+1)
//! op to r, barrier  -> Err(RankFailed{r,k})  init: attach, empty table, no barrier
//! wait_for_rank(r):                          alloc_segment(..): finds its segments again
//!   says it is out of every collective       restore its memory (a checkpoint), replay
//!   waits until r is up; adopts k+1          rejoin(): waits until every rank is out of
//!                                              every collective, resets them, marks itself up
//! goes on                                    goes on
//! ```
//! The mechanism is the conduit's (transport/liveness.rs and smp/mod.rs); what a program
//! restores and replays is its own (activerma-checkpoint, docs/design/recovery.md).

use crate::World;
use activerma_core::{Error, Rank, Result};
use std::sync::atomic::Ordering;

impl World {
    /// This process's incarnation of its rank: 0 for a rank the job started with, k for its
    /// k-th replacement (`activerma run --respawn N`).
    pub fn incarnation(&self) -> u32 {
        self.inner_ref().conduit.incarnation()
    }

    /// True for a replacement rank that has not called `rejoin` yet: it restores its state
    /// alone — collectives are refused, `alloc_segment` finds the rank's segments again
    /// (same sizes, same order as the rank's first incarnation) without zeroing them.
    pub fn is_recovering(&self) -> bool {
        self.inner_ref().recovering.load(Ordering::Acquire)
    }

    pub(crate) fn not_recovering(&self, what: &str) -> Result<()> {
        if self.is_recovering() {
            return Err(Error::InvalidArgument(format!(
                "{what}: this rank is a replacement (incarnation {}) that has not rejoined the job: restore its state, then call rejoin()",
                self.incarnation()
            )));
        }
        Ok(())
    }

    /// A replacement announces that it is back (a no-op on any other rank): returns once every
    /// other rank has seen the failure, after which their `wait_for_rank` returns and the job's
    /// collectives work again. Call it after restoring this rank's memory: survivors' writes to
    /// it are refused until then.
    pub fn rejoin(&self) -> Result<()> {
        let i = self.live_inner()?;
        if !self.is_recovering() {
            return Ok(());
        }
        i.conduit.rejoin(&mut || {
            i.am.progress();
        })?;
        i.recovering.store(false, Ordering::Release);
        Ok(())
    }

    /// Runs `op` until it does not fail because a rank died: then waits for that rank to be
    /// back (`wait_for_rank`) and runs it again — a survivor's side of a recovery, for an
    /// operation that is right to repeat (a get, a barrier, a put of the same bytes).
    pub fn surviving<T>(&self, mut op: impl FnMut() -> Result<T>) -> Result<T> {
        loop {
            match op() {
                Err(Error::RankFailed { rank, .. }) => {
                    self.wait_for_rank(rank)?;
                }
                r => return r,
            }
        }
    }

    /// `Ok` while `rank` is up (always, outside respawn jobs, for a valid rank);
    /// `Error::RankFailed { rank, incarnation }` once the process this rank talks to as `rank`
    /// died. A loop that waits for something only `rank` can send (a message, a flag it puts)
    /// checks it, so that it fails at once when `rank` dies instead of at a deadline.
    pub fn check_alive(&self, rank: Rank) -> Result<()> {
        self.live_inner()?.proto.check_rank(rank)
    }

    /// After an operation failed with `Error::RankFailed { rank, .. }`: waits until `rank`'s
    /// replacement has rejoined and returns its incarnation; from then on operations to it
    /// work again (and reach the replacement). Returns at once if `rank` did not fail. Serves
    /// requests meanwhile (a replacement may read from this rank while it restores). Without
    /// `--respawn` a rank that died stays gone: `Error::PeerGone`.
    pub fn wait_for_rank(&self, rank: Rank) -> Result<u32> {
        let i = self.live_inner()?;
        let failed = i.proto.usable(rank).is_some_and(|up| !up);
        let incarnation = i.conduit.wait_for_rank(rank, &mut || {
            i.am.progress();
        })?;
        if failed {
            // Whatever was in flight to the dead process is gone with it.
            i.proto.forget_rank(rank);
        }
        Ok(incarnation)
    }
}
