//! Recovery by replay of the DHT's inserts (activerma-dht's volume, its AA-Poll insert: an
//! 8-byte put to the key's cell, marked W=0 WL=1 WLD=1, that the target's log handler
//! inserts). Puts are logged by their senders (`activerma_recovery::PutLog`): each rank keeps
//! the keys it sent since the last checkpoint, and each target counts the inserts it applied
//! per origin. A rank killed in the middle of a step is replaced; the replacement
//! restores the last checkpoint, asks every other rank for the keys it sent here since (and
//! inserts them) and for how many of its own inserts it applied (and skips that many when it
//! runs its steps again), rejoins, and goes on. Every volume must end with the failure-free
//! run's contents: no insert lost, none applied twice.
//!
//! Driven by the environment: DHTR_DIR (the checkpoint store), DHTR_KILL (`rank:step:insert`),
//! DHTR_OUT (a file each rank appends `rank keys digest skipped replayed incarnation` to).

use super::env;
use activerma::{Actions, Error, LogEntry, Notify, Result, World};
use activerma_checkpoint::{Checkpointer, Options, Scheme};
use activerma_dht::{Layout, Volume};
use activerma_recovery::PutLog;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const STEPS: u64 = 8;
const CKPT_EVERY: u64 = 3;
const INSERTS: usize = 200;
const DOMAIN: u16 = 12;

pub fn dht_replay() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let kill: Option<(usize, u64, usize)> = env("DHTR_KILL").map(|k| {
        let f: Vec<&str> = k.split(':').collect();
        (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
    });
    let layout = Layout::new(4096, 8192);
    let vol = Arc::new(Volume::alloc(&w, layout)?);
    let mut ck = Checkpointer::new(&w, std::path::Path::new(&env("DHTR_DIR").expect("DHTR_DIR")), Options::new(Scheme::Full))?;
    ck.protect(&vol.seg)?;
    let wc = w.clone();
    // Whatever the dead process had put here is applied (and counted) before a survivor answers.
    let log = PutLog::new(&w, move || {
        let _ = wc.drain_log(DOMAIN);
    })?;
    let (v, applied) = (vol.clone(), log.applied());
    w.create_log(
        DOMAIN,
        1 << 16,
        Notify::Poll,
        Arc::new(move |e: &LogEntry| {
            let key = u64::from_le_bytes(e.data()[..8].try_into().unwrap());
            v.local_insert(key).expect("the test's volume has room for every insert");
            applied.count(e.meta.origin as usize);
        }),
    )?;
    // The last step whose closing barrier this rank passed, in memory no checkpoint protects:
    // a replacement whose replay ends with a step rejoins there only if its predecessor had
    // not passed that step's barrier with the others (see replay.rs).
    let passed = w.alloc_segment(8)?;
    let predecessor_passed = passed.read_u64(0);
    let mark = |w: &World| w.assoc_pages(vol.seg.as_ptr(), layout.cells_bytes(), Actions::R | Actions::WL | Actions::WLD, Some(DOMAIN));

    let mut skip = vec![0u64; n];
    let (mut skipped, mut replayed) = (0u64, 0u64);
    let start = if w.is_recovering() {
        let epoch = ck.restore()?.ok_or_else(|| Error::InvalidArgument("dht_replay: the replacement found no checkpoint".into()))?;
        mark(&w)?;
        for (t, incoming) in log.recover()?.into_iter().enumerate() {
            skip[t] = incoming.applied;
            for key in incoming.records {
                vol.local_insert(u64::from_le_bytes(key.try_into().expect("an 8-byte key"))).expect("room");
                replayed += 1;
            }
        }
        // Checkpoints follow every CKPT_EVERY-th step, the first before step 1.
        (epoch - 1) * CKPT_EVERY
    } else {
        mark(&w)?;
        ck.checkpoint()?;
        0
    };
    if !w.is_recovering() {
        w.surviving(|| w.barrier())?;
    }
    for k in start + 1..=STEPS {
        let mut rng = rand::rngs::SmallRng::seed_from_u64((me as u64) << 32 | k);
        for i in 0..INSERTS {
            let t = (me + 1 + rng.gen_range(0..n - 1)) % n;
            let key = rng.gen::<u64>() | 1;
            if skip[t] > 0 {
                // Applied at t before this rank died: running the step again must not repeat it.
                skip[t] -= 1;
                skipped += 1;
                continue;
            }
            if w.is_recovering() && skip.iter().all(|&s| s == 0) {
                w.rejoin()?; // the state before the failure is reached
            }
            let at = vol.elem_at(t, layout.position(key));
            w.surviving(|| w.put_nbi(at, &key.to_le_bytes()))?;
            log.sent(t, &key.to_le_bytes());
            if kill == Some((me, k, i + 1)) && w.incarnation() == 0 {
                // SAFETY: raise(2) on our own process.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            if i % 16 == 15 {
                w.progress();
            }
        }
        if w.is_recovering() && skip.iter().all(|&s| s == 0) && k > predecessor_passed {
            w.rejoin()?;
        }
        if w.is_recovering() {
            continue; // an earlier step, run again alone
        }
        // Every insert of the step applied at its target, then a checkpoint every few steps.
        for t in (0..n).filter(|&t| t != me) {
            w.surviving(|| w.active_flush(t))?;
        }
        w.surviving(|| w.barrier())?;
        if k % CKPT_EVERY == 0 {
            ck.checkpoint()?;
            log.trim();
            w.surviving(|| w.barrier())?;
        }
        passed.write_local(0, &k.to_le_bytes());
    }
    let c = vol.contents().map_err(|e| Error::InvalidArgument(format!("dht_replay: rank {me}'s volume: {e}")))?;
    super::append_line("DHTR_OUT", &format!("{me} {} {:016x} {skipped} {replayed} {}\n", c.keys, c.digest, w.incarnation()))?;
    w.surviving(|| w.barrier())?;
    w.finalize()
}
