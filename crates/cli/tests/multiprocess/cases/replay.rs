//! Recovery by replay of a get-heavy workload whose targets change (activerma-recovery): in
//! every step each rank gets words from random other ranks' tables, folds them into its state,
//! then every rank rewrites its whole table. A rank killed in the middle of a step is replaced,
//! restores the last checkpoint and replays the steps since — its gets from the records their
//! targets logged, because the targets' tables have changed since it read them — and must end
//! with the state a failure-free run ends with. Without logs (no-ft) the replacement reads the
//! tables as they are now: no-ft cannot recover this workload, so it is not run here.
//!
//! Driven by the environment: REPLAY_VARIANT (aa | aa-hold | rma | am), REPLAY_DIR (the
//! checkpoint store), REPLAY_KILL (`rank:step:get`: that rank dies after that get of that
//! step; `rank:step:get:append`: inside that get's log append), REPLAY_AA_LOG (bytes of an aa log drained by progress; small: back-pressure),
//! REPLAY_OUT (a file each rank appends `rank state replayed incarnation` to).

use super::env;
use activerma::{Error, Result};
use activerma_checkpoint::{Checkpointer, Options, Scheme};
use activerma_recovery::{AaLog, GetLog, Record, Variant};
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

const WORDS: usize = 1024;
const GETS: usize = 64;
const STEPS: u64 = 12;
const CKPT_EVERY: u64 = 4;

/// Word `i` of `rank`'s table after step `k`.
fn word(rank: usize, k: u64, i: usize) -> u64 {
    (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ k.wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ (i as u64).wrapping_mul(0x94D0_49BB_1331_11EB)
}

fn fill(table: &activerma::Segment, rank: usize, k: u64) {
    let bytes: Vec<u8> = (0..WORDS).flat_map(|i| word(rank, k, i).to_le_bytes()).collect();
    table.write_local(0, &bytes);
}

pub fn replay_gets() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let variant_name = env("REPLAY_VARIANT").unwrap_or("aa".into());
    let (variant, aa) = match variant_name.as_str() {
        "aa-hold" => (Variant::Aa, AaLog::Hold),
        v => (Variant::parse(v)?, AaLog::Poll { bytes: env("REPLAY_AA_LOG").map_or(1 << 16, |b| b.parse().unwrap()) }),
    };
    if variant == Variant::NoFt {
        return Err(Error::InvalidArgument("replay_gets: no-ft logs nothing, so a replacement cannot replay this workload".into()));
    }
    let kill: Option<(usize, u64, usize)> = env("REPLAY_KILL").map(|k| {
        let f: Vec<&str> = k.split(':').collect();
        (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
    });
    // `rank:step:get:append`: that rank dies inside that get's append to its target's access
    // log (aa, on one host: the origin appends), between the claim and the publish.
    let in_append = env("REPLAY_KILL").is_some_and(|k| k.ends_with(":append"));
    let table = w.alloc_segment(WORDS * 8)?;
    let state = w.alloc_segment(16)?;
    // The last step whose closing barriers this rank passed, in memory no checkpoint protects:
    // a replacement finds its predecessor's (segments outlive the process). It tells a
    // replacement whose replay ends with a step whether its predecessor had finished that step
    // with the others (then they are past its barriers) or died before.
    let passed = w.alloc_segment(8)?;
    let predecessor_passed = passed.read_u64(0);
    // Every target serves at most n-1 origins' 8-byte gets of CKPT_EVERY steps between trims.
    let gets = n * GETS * CKPT_EVERY as usize;
    let mut log = GetLog::new(&w, gets, gets * 8, aa)?;
    let mut ck = Checkpointer::new(&w, std::path::Path::new(&env("REPLAY_DIR").expect("REPLAY_DIR")), Options::new(Scheme::Full))?;
    ck.protect(&table)?;
    ck.protect(&state)?;
    let (mut acc, start) = if w.is_recovering() {
        ck.restore()?.ok_or_else(|| Error::InvalidArgument("replay: the replacement found no checkpoint".into()))?;
        (state.read_u64(0), state.read_u64(8))
    } else {
        fill(&table, me, 0);
        ck.checkpoint()?;
        log.trim()?;
        (0u64, 0u64)
    };
    // A target serves `GETS * (n-1)` 8-byte gets a step; a Hold log holds CKPT_EVERY steps.
    log.arm(variant, &table, GETS * n * CKPT_EVERY as usize * 8, 8)?;
    let mut replay: Vec<VecDeque<Record>> =
        if w.is_recovering() { log.my_records(variant)?.into_iter().map(VecDeque::from).collect() } else { Vec::new() };
    let replaying = |replay: &Vec<VecDeque<Record>>| replay.iter().any(|q| !q.is_empty());
    let mut replayed = 0u64;
    if !w.is_recovering() {
        w.surviving(|| w.barrier())?;
    }
    for k in start + 1..=STEPS {
        // Gets: what the others' tables hold after step k-1.
        let mut rng = rand::rngs::SmallRng::seed_from_u64((me as u64) << 32 | k);
        for g in 0..GETS {
            let t = (me + 1 + rng.gen_range(0..n - 1)) % n;
            let at = table.remote(t, rng.gen_range(0..WORDS) * 8);
            let mut b = [0u8; 8];
            if in_append && kill == Some((me, k, g + 1)) && w.incarnation() == 0 {
                activerma::kill_in_log_append(1);
            }
            if let Some(r) = replay.get_mut(t).and_then(VecDeque::pop_front) {
                if r.addr != at.addr as u64 || r.data.len() != 8 {
                    return Err(Error::InvalidArgument(format!("replay: step {k} get {g}: the log holds {:#x}+{}", r.addr, r.data.len())));
                }
                b.copy_from_slice(&r.data);
                replayed += 1;
            } else {
                if w.is_recovering() && !replaying(&replay) {
                    w.rejoin()?;
                }
                w.surviving(|| w.get(at, &mut b))?;
                w.surviving(|| log.after_get(variant, at, &b))?;
            }
            acc = (acc ^ u64::from_le_bytes(b)).rotate_left(7).wrapping_mul(0x100_0000_01B3);
            if kill == Some((me, k, g + 1)) && w.incarnation() == 0 {
                // SAFETY: raise(2) on our own process.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            w.progress();
        }
        if w.is_recovering() && !replaying(&replay) && k > predecessor_passed {
            w.rejoin()?;
        }
        // A replacement replaying an earlier step meets nobody at its barriers: it is alone.
        if !w.is_recovering() {
            w.surviving(|| w.barrier())?;
        }
        fill(&table, me, k);
        state.write_local(0, &acc.to_le_bytes());
        state.write_local(8, &k.to_le_bytes());
        if !w.is_recovering() {
            w.surviving(|| w.barrier())?;
            if k % CKPT_EVERY == 0 {
                ck.checkpoint()?;
                log.trim()?;
            }
            passed.write_local(0, &k.to_le_bytes());
        }
    }
    super::append_line("REPLAY_OUT", &format!("{me} {acc:016x} {replayed} {}\n", w.incarnation()))?;
    w.surviving(|| w.barrier())?;
    w.finalize()
}

/// A rank that dies just before `GetLog::trim` (after a checkpoint, with gets logged since):
/// the survivors' trim fails at once with RankFailed naming it — the fences it owed never
/// come — rather than hang; they wait for its replacement and the job goes on: the next trim,
/// with the replacement, completes. REPLAY_VARIANT: aa | aa-hold | rma | am.
pub fn trim_rank_dies() -> Result<()> {
    const VICTIM: usize = 1;
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let variant_name = env("REPLAY_VARIANT").unwrap_or("aa".into());
    let (variant, aa) = match variant_name.as_str() {
        "aa-hold" => (Variant::Aa, AaLog::Hold),
        v => (Variant::parse(v)?, AaLog::Poll { bytes: 1 << 16 }),
    };
    let table = w.alloc_segment(WORDS * 8)?;
    let mut log = GetLog::new(&w, n * GETS, n * GETS * 8, aa)?;
    if w.incarnation() > 0 {
        w.rejoin()?;
        w.barrier()?;
        log.trim()?; // the next trim, with everybody
        return w.finalize();
    }
    fill(&table, me, 0);
    log.arm(variant, &table, GETS * n * 8, 8)?;
    w.barrier()?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(me as u64);
    for _ in 0..GETS {
        let at = table.remote((me + 1 + rng.gen_range(0..n - 1)) % n, rng.gen_range(0..WORDS) * 8);
        let mut b = [0u8; 8];
        w.get(at, &mut b)?;
        log.after_get(variant, at, &b)?;
    }
    w.barrier()?;
    if me == VICTIM {
        // SAFETY: raise(2) on our own process.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let began = std::time::Instant::now();
    match log.trim() {
        Err(Error::RankFailed { rank: VICTIM, .. }) => {}
        other => {
            return Err(Error::InvalidArgument(format!("a trim while rank {VICTIM} is dead: expected RankFailed naming it, got {other:?}")))
        }
    }
    // The launcher notices a death within milliseconds; the trim's own timeout is 60 s.
    if began.elapsed() > std::time::Duration::from_secs(20) {
        return Err(Error::InvalidArgument(format!("the trim took {:?} to see rank {VICTIM}'s death", began.elapsed())));
    }
    w.wait_for_rank(VICTIM)?;
    w.barrier()?;
    // The next trim, the replacement with us: no fence of the failed one is left to pass for
    // one of this.
    log.trim()?;
    w.finalize()
}
