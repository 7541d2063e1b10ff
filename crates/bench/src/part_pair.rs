//! The 2-rank job both PART benchmarks run (`part-latency`, the sweeps): each rank exposes a
//! buffer of its private memory, and rank 0 times puts into rank 1's while rank 1 (the owner)
//! prepares each put (evicts, touches, ...) outside the timed region. One hand-off per put:
//!
//! ```text
//! rank 1: prepare; go(seq) -> wait for done(seq), serving rank 0's faults (progress)
//! rank 0: [own preparation]; wait for go(seq); time the put; done(seq)
//! ```

use super::BResult;
use activerma::{Exposed, Prot, Segment, World};

pub(super) struct Pair<'w> {
    pub w: &'w World,
    pub me: usize,
    /// First whole page of this rank's exposed buffer, and of the other rank's.
    pub base: usize,
    pub peer_base: usize,
    /// [0]: rank 1's "go" sequence, [8]: rank 0's "done" sequence.
    ctrl: Segment,
    // Dropped before `mem` (the exposure refers to it).
    exposed: Exposed<'w>,
    mem: Vec<u8>,
}

/// Joins the job: 2 ranks, each bound to its own CPU (as the other benchmarks).
pub(super) fn join(bench: &str) -> BResult<World> {
    let w = activerma::init()?;
    if w.size() != 2 {
        return Err(format!("{bench} runs on 2 ranks").into());
    }
    super::bind_to_cpu(w.rank());
    Ok(w)
}

impl<'w> Pair<'w> {
    /// Exposes `len` bytes from a whole page on (resident: written) on both ranks.
    pub fn expose(w: &'w World, len: usize) -> BResult<Pair<'w>> {
        let me = w.rank();
        let ps = activerma_core::page::page_size();
        let mut mem = vec![me as u8 + 1; len + 2 * ps];
        // SAFETY: `mem` outlives the exposure (a field dropped after it).
        let exposed = unsafe { w.expose_raw(mem.as_mut_ptr(), mem.len(), Prot::ReadWrite)? };
        let base = activerma_core::page::page_ceil(exposed.addr());
        let all = w.allgather(&(base as u64).to_le_bytes())?;
        let peer_base = u64::from_le_bytes(all[1 - me][..8].try_into().unwrap()) as usize;
        let ctrl = w.alloc_segment(16)?;
        Ok(Pair { w, me, base, peer_base, ctrl, exposed, mem })
    }

    fn flag(&self, off: usize) -> u64 {
        // SAFETY: inside our own 16-byte control segment; the other rank writes it by put.
        unsafe { std::ptr::read_volatile(self.ctrl.as_ptr().add(off) as *const u64) }
    }

    /// Rank 1, once put `seq` is prepared: lets rank 0 go and serves it until the put is done.
    pub fn owner_go(&self, seq: u64) -> BResult<()> {
        self.w.put(self.ctrl.remote(0, 0), &seq.to_le_bytes())?;
        while self.flag(8) != seq {
            self.w.progress();
        }
        Ok(())
    }

    /// Rank 0: waits until rank 1 has prepared put `seq`.
    pub fn origin_wait(&self, seq: u64) {
        while self.flag(0) != seq {
            self.w.progress();
        }
    }

    /// Rank 0: put `seq` is done.
    pub fn origin_done(&self, seq: u64) -> BResult<()> {
        Ok(self.w.put(self.ctrl.remote(1, 8), &seq.to_le_bytes())?)
    }

    /// Rank 0: appends result rows to the file the parent reads (`env` names it).
    pub fn append_rows(&self, env: &str, rows: &str) -> BResult<()> {
        use std::io::Write;
        std::fs::OpenOptions::new().create(true).append(true).open(std::env::var(env)?)?.write_all(rows.as_bytes())?;
        Ok(())
    }

    /// Withdraws the exposure and leaves the job.
    pub fn finish(self) -> BResult<()> {
        let Pair { w, exposed, mem, ctrl, .. } = self;
        drop(exposed);
        drop(mem);
        w.barrier()?;
        w.finalize()?;
        drop(ctrl);
        Ok(())
    }
}
