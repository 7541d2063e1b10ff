//! A Coral-style parallel sort over RMA gets, made fault tolerant by logging its gets (Active
//! Access, ICS'15, sections 4.4 and 5.2.4, Figure 9b):
//!
//! ```text
//! 1 local     generate this rank's keys (seeded), sort them into the `keys` segment; sample,
//!             allgather the samples, pick P-1 splitters; every rank's bucket bounds to all
//! checkpoint  keys and bounds (activerma-checkpoint, full scheme); logs are trimmed
//! 2 exchange  every rank gets its bucket from every other rank, `chunk` bytes per get, each
//!             get logged at its target as the variant says (activerma-recovery)
//!             (ends with a barrier: a target that went on would leave records unfiled)
//! 3 merge     sort what arrived; check the whole job's output is sorted and holds every key
//! ```
//! A rank that dies (`activerma run --respawn N`) is replaced: the replacement finds its
//! segments, restores the checkpoint, fetches the records of the gets it had made since and
//! replays them in their order (their bytes from the logs, not from the targets), rejoins,
//! and goes on with live gets — reaching the state a failure-free run has, so the output is
//! the same byte for byte. Survivors that touch it meanwhile get `RankFailed`, wait for it
//! and retry.

pub use activerma_recovery::{Record, Variant};

use activerma::{Error, Result, World};
use activerma_checkpoint::{Checkpointer, Options, Scheme};
use activerma_recovery::{AaLog, GetLog};
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

/// Failure injection: `rank` (its first incarnation) dies during the exchange.
#[derive(Clone, Copy, Debug)]
pub struct Kill {
    pub rank: usize,
    pub when: When,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Right after its n-th get, logged.
    AfterGets(u64),
    /// At whatever it is doing this many nanoseconds into its exchange (a get, an append to a
    /// log, a message half sent) — or as the exchange ends, if it ends before.
    AfterNs(u64),
    /// The rma design: right after it claimed room in a target's log for its n-th logged get,
    /// before the record goes in (`GetLog::kill_after_claims`). No effect on the others.
    AfterClaims(u64),
}

/// A timer that kills this process (`When::AfterNs`); `expire` at the end of the exchange kills
/// it then if the timer has not. The lock makes the two exclusive: the process dies once, and
/// never after `expire` returned (it does not return).
struct KillTimer {
    /// Held by whichever of the two kills the process.
    lock: std::sync::Arc<std::sync::Mutex<()>>,
}

impl KillTimer {
    fn start(after: std::time::Duration) -> KillTimer {
        let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
        let l = lock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let _held = l.lock();
            // SAFETY: raise(2) on our own process.
            unsafe { libc::raise(libc::SIGKILL) };
        });
        KillTimer { lock }
    }

    fn expire(&self) -> ! {
        let _held = self.lock.lock();
        // SAFETY: raise(2) on our own process.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL")
    }
}

#[derive(Clone, Debug)]
pub struct Params {
    pub keys_per_rank: usize,
    pub seed: u64,
    /// Bytes per get of the exchange (a multiple of 8).
    pub chunk: usize,
    pub variant: Variant,
    /// The checkpoint store (shared by the job's ranks, as `activerma-checkpoint` expects);
    /// None: no checkpoint (a benchmark of the exchange alone; a replacement cannot recover).
    pub ckpt_dir: Option<PathBuf>,
    pub kill: Option<Kill>,
}

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// This rank's exchange, and the slowest rank's.
    pub exchange_seconds: f64,
    pub slowest_exchange_seconds: f64,
    /// Keys this rank ends with, and the CRC-32 of their bytes.
    pub keys: usize,
    pub crc: u32,
    /// Gets of the exchange: made, replayed from the logs (a replacement only).
    pub gets: u64,
    pub replayed: u64,
    /// Bytes sent back to targets to log gets (rma, am).
    pub bytes_sent_back: u64,
}

const SAMPLES_PER_RANK: usize = 64;

fn le_words(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// This rank's keys, sorted (the same for a seed and rank in every run).
fn local_keys(p: &Params, rank: usize) -> Vec<u64> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(p.seed ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut keys: Vec<u64> = (0..p.keys_per_rank).map(|_| rng.gen()).collect();
    keys.sort_unstable();
    keys
}

/// Phase 1: sorted keys into `keys`; returns the bucket bounds table, `bounds[s][d]` = first
/// index in rank s's keys that belongs to rank d (`bounds[s][n]` = its key count).
fn partition(w: &World, p: &Params, keys: &activerma::Segment) -> Result<Vec<Vec<u64>>> {
    let n = w.size();
    let mine = local_keys(p, w.rank());
    keys.write_local(0, &le_words(&mine));
    let step = (mine.len() / SAMPLES_PER_RANK).max(1);
    let samples: Vec<u64> = mine.iter().step_by(step).copied().collect();
    let mut all: Vec<u64> = w.allgather(&le_words(&samples))?.iter().flat_map(|b| words_of(b)).collect();
    all.sort_unstable();
    let splitters: Vec<u64> = (1..n).map(|d| all[d * all.len() / n]).collect();
    let mut bounds = vec![0u64];
    bounds.extend(splitters.iter().map(|s| mine.partition_point(|k| k < s) as u64));
    bounds.push(mine.len() as u64);
    Ok(w.allgather(&le_words(&bounds))?.iter().map(|b| words_of(b)).collect())
}

/// A job's sorter: its segments, logs and checkpointer, made once (collective), then `run`
/// as often as wanted with the same sizes (the designs side by side in one job).
pub struct Sorter {
    w: World,
    keys_per_rank: usize,
    chunk: usize,
    keys: activerma::Segment,
    table: activerma::Segment,
    log: GetLog,
    ck: Option<Checkpointer>,
}

/// Sorts once (every rank calls it with the same parameters); returns this rank's outcome.
pub fn sort(w: &World, p: &Params) -> Result<Outcome> {
    Sorter::new(w, p.keys_per_rank, p.chunk, p.ckpt_dir.as_deref())?.run(p.variant, p.seed, p.kill)
}

impl Sorter {
    pub fn new(w: &World, keys_per_rank: usize, chunk: usize, ckpt_dir: Option<&std::path::Path>) -> Result<Sorter> {
        let n = w.size();
        if chunk == 0 || !chunk.is_multiple_of(8) {
            return Err(Error::InvalidArgument(format!("sort: chunk of {chunk} bytes: a positive multiple of 8")));
        }
        // The same segments in the same order in every incarnation (a replacement finds them).
        let keys = w.alloc_segment((keys_per_rank * 8).max(8))?;
        let table = w.alloc_segment(n * (n + 1) * 8)?;
        let max_gets = n * (keys_per_rank * 8 / chunk + n + 1);
        // Every key is fetched once per exchange.
        let log = GetLog::new(w, max_gets, keys.len(), AaLog::Hold)?;
        let ck = match ckpt_dir {
            Some(dir) => {
                let mut ck = Checkpointer::new(w, dir, Options::new(Scheme::Full))?;
                ck.protect(&keys)?;
                ck.protect(&table)?;
                Some(ck)
            }
            None => None,
        };
        Ok(Sorter { w: w.clone(), keys_per_rank, chunk, keys, table, log, ck })
    }

    /// One sort of `seed`'s keys with `variant`'s logging (collective).
    pub fn run(&mut self, variant: Variant, seed: u64, kill: Option<Kill>) -> Result<Outcome> {
        let w = &self.w.clone();
        let (me, n) = (w.rank(), w.size());
        let p = Params { keys_per_rank: self.keys_per_rank, seed, chunk: self.chunk, variant, ckpt_dir: None, kill };
        let (keys, table) = (&self.keys, &self.table);
        let recovering = w.is_recovering();
        let bounds: Vec<Vec<u64>> = if recovering {
            let restored = match &mut self.ck {
                Some(ck) => ck.restore()?,
                None => None,
            };
            if restored.is_none() {
                return Err(Error::InvalidArgument("sort: a replacement found no checkpoint to restore".into()));
            }
            let mut b = vec![0u8; n * (n + 1) * 8];
            table.read_local(0, &mut b);
            words_of(&b).chunks(n + 1).map(|c| c.to_vec()).collect()
        } else {
            let bounds = partition(w, &p, keys)?;
            table.write_local(0, &le_words(&bounds.concat()));
            if let Some(ck) = &mut self.ck {
                ck.checkpoint()?;
            }
            self.log.trim()?;
            bounds
        };
        let max_bucket = (0..n).filter(|&d| d != me).map(|d| (bounds[me][d + 1] - bounds[me][d]) as usize * 8).max().unwrap_or(0);
        self.log.arm(variant, keys, max_bucket, self.chunk)?;
        let log = &mut self.log;
        // A replacement replays the gets it had made, in their order, from the logs.
        let mut replay: Vec<VecDeque<Record>> =
            if recovering { log.my_records(variant)?.into_iter().map(VecDeque::from).collect() } else { Vec::new() };

        // Phase 2: the exchange (every rank has armed its pages first).
        if !recovering {
            w.surviving(|| w.barrier())?;
        }
        let sizes: Vec<usize> = (0..n).map(|s| (bounds[s][me + 1] - bounds[s][me]) as usize).collect();
        // Resident before the clock starts, as a sort's reused buffers are: the exchange
        // measures moving data, not first-touch page faults.
        let mut out = vec![0xffu8; sizes.iter().sum::<usize>() * 8];
        let mut out_at = 0;
        let mut outcome = Outcome::default();
        let timer = match p.kill {
            Some(Kill { rank, when: When::AfterNs(ns) }) if rank == me && w.incarnation() == 0 => {
                Some(KillTimer::start(std::time::Duration::from_nanos(ns)))
            }
            Some(Kill { rank, when: When::AfterClaims(n) }) if rank == me && w.incarnation() == 0 => {
                log.kill_after_claims = n;
                None
            }
            _ => None,
        };
        let t0 = Instant::now();
        for s in (1..=n).map(|i| (me + i) % n) {
            let (from, len) = (bounds[s][me] as usize * 8, sizes[s] * 8);
            if s == me {
                keys.read_local(from, &mut out[out_at..out_at + len]);
                out_at += len;
                continue;
            }
            let mut off = 0;
            while off < len {
                let piece = p.chunk.min(len - off);
                let at = keys.remote(s, from + off);
                let dst = &mut out[out_at + off..out_at + off + piece];
                if let Some(r) = replay.get_mut(s).and_then(VecDeque::pop_front) {
                    if r.addr != at.addr as u64 || r.data.len() != piece {
                        return Err(Error::InvalidArgument(format!(
                        "sort: replaying rank {me}'s gets from rank {s}: the log holds {} bytes at {:#x}, the get is {piece} bytes at {:#x}",
                        r.data.len(),
                        r.addr,
                        at.addr
                    )));
                    }
                    dst.copy_from_slice(&r.data);
                    outcome.replayed += 1;
                } else {
                    if w.is_recovering() && replay.iter().all(VecDeque::is_empty) {
                        // The state before the failure is reached: the others may go on.
                        w.rejoin()?;
                    }
                    w.surviving(|| w.get(at, &mut *dst))?;
                    w.surviving(|| log.after_get(variant, at, dst))?;
                }
                outcome.gets += 1;
                off += piece;
                if p.kill.is_some_and(|k| k.rank == me && k.when == When::AfterGets(outcome.gets) && w.incarnation() == 0) {
                    // SAFETY: raise(2) on our own process.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                // Serve others' requests and file their records (a get of `chunk` bytes dwarfs it).
                w.progress();
            }
            out_at += len;
        }
        if let Some(t) = timer {
            t.expire();
        }
        w.surviving(|| w.flush_all())?;
        // Under a modelled network, whatever the exchange booked on the link has arrived only
        // when the link is idle (the am design's records each wait for their own arrival):
        // the exchange ends then, and the next one starts on a free link.
        w.wait_link_idle();
        if w.is_recovering() {
            w.rejoin()?;
        }
        // The exchange ends together: a rank that went on to merge would leave the others'
        // records unfiled (aa, am: its CPU files them) and their gets waiting for room.
        w.surviving(|| w.barrier())?;
        // Every rank's records have arrived (its link is idle): file the ones sent here.
        while w.progress() > 0 {}
        outcome.exchange_seconds = t0.elapsed().as_secs_f64();
        outcome.bytes_sent_back = std::mem::take(&mut log.bytes_sent_back);

        // Phase 3: merge, then check the whole job's output.
        let mut sorted = words_of(&out);
        sorted.sort_unstable();
        let bytes = le_words(&sorted);
        outcome.keys = sorted.len();
        outcome.crc = crc32fast::hash(&bytes);
        let input_sum = {
            let mut b = vec![0u8; p.keys_per_rank * 8];
            keys.read_local(0, &mut b);
            words_of(&b).iter().fold(0u64, |a, k| a.wrapping_add(*k))
        };
        let summary = [
            sorted.len() as u64,
            sorted.first().copied().unwrap_or(u64::MAX),
            sorted.last().copied().unwrap_or(0),
            sorted.iter().fold(0u64, |a, k| a.wrapping_add(*k)),
            input_sum,
            outcome.exchange_seconds.to_bits(),
        ];
        let all: Vec<Vec<u64>> = w.surviving(|| w.allgather(&le_words(&summary)))?.iter().map(|b| words_of(b)).collect();
        let total: u64 = all.iter().map(|s| s[0]).sum();
        if total != (n * p.keys_per_rank) as u64 {
            return Err(Error::InvalidArgument(format!("sort: the job ends with {total} keys, it started with {}", n * p.keys_per_rank)));
        }
        if all.iter().fold(0u64, |a, s| a.wrapping_add(s[3])) != all.iter().fold(0u64, |a, s| a.wrapping_add(s[4])) {
            return Err(Error::InvalidArgument("sort: the keys that arrived are not the keys that were sent (sums differ)".into()));
        }
        let nonempty: Vec<&Vec<u64>> = all.iter().filter(|s| s[0] > 0).collect();
        if nonempty.windows(2).any(|pair| pair[0][2] > pair[1][1]) {
            return Err(Error::InvalidArgument("sort: a rank holds a key larger than the next rank's smallest".into()));
        }
        outcome.slowest_exchange_seconds = all.iter().map(|s| f64::from_bits(s[5])).fold(0.0, f64::max);
        Ok(outcome)
    }
}
