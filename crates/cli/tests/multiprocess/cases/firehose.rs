//! Firehose under a small M and MAXVICTIM (the driver sets them): every rank puts and gets at
//! random places of every other rank's exposed private memory, far more pages than f, so that
//! firehoses move and released ones come back from the victim FIFO. Every byte is verified,
//! and at every target the pinned memory never exceeded M + MAXVICTIM.

use super::share_u64;
use activerma::{FirehoseStats, Prot, RemotePtr, Result, Strategy, World};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Bytes of every target's memory each origin owns (64+ pages: well beyond a small f).
const REGION: usize = 256 * 1024 + 77;
const OPS: usize = 3000;

fn reg(w: &World, name: &str) -> u64 {
    w.registration_stats().snapshot().into_iter().find(|&(k, _)| k == name).map(|(_, v)| v).unwrap()
}

fn fh(s: &FirehoseStats, name: &str) -> u64 {
    s.snapshot().into_iter().find(|&(k, _)| k == name).map(|(_, v)| v).unwrap()
}

pub fn bound_holds() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    assert_eq!(w.registration_strategy(), Strategy::Firehose, "run with ACTIVERMA_REGISTRATION=firehose");
    let cfg = w.firehose_config().expect("a firehose").clone();
    let bound = ((cfg.max_remote_buckets + cfg.max_victim_buckets) * cfg.bucket_bytes) as u64;
    let seed = std::env::var("ACTIVERMA_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xf1e);
    let mut rng = SmallRng::seed_from_u64(seed ^ (me as u64 * 0x9e37_79b9));
    let mut mem = vec![0u8; n * REGION];
    let ex = w.expose(&mut mem, Prot::ReadWrite)?;
    let addrs = share_u64(&w, ex.addr() as u64)?;
    let mut shadow = vec![vec![0u8; REGION]; n];
    let mut buf = vec![0u8; REGION];
    let max_piece = cfg.firehoses_per_rank * cfg.bucket_bytes;
    for op in 0..OPS {
        let t = if n == 1 { 0 } else { (me + rng.gen_range(1..n)) % n };
        let len = match rng.gen_range(0..20) {
            0..=7 => rng.gen_range(1..64),
            8..=14 => rng.gen_range(1..3 * 4096),
            15..=18 => rng.gen_range(1..max_piece.min(REGION)),
            _ => rng.gen_range(1..REGION), // more than f buckets: moved in pieces
        };
        let off = rng.gen_range(0..=REGION - len);
        let at = RemotePtr::new(t, addrs[t] as usize + me * REGION + off);
        if rng.gen_bool(0.5) {
            rng.fill(&mut buf[..len]);
            w.put(at, &buf[..len])?;
            shadow[t][off..off + len].copy_from_slice(&buf[..len]);
        } else {
            w.get(at, &mut buf[..len])?;
            assert!(buf[..len] == shadow[t][off..off + len], "op {op}: get from rank {t} at {off}+{len} saw other bytes");
        }
        let now = w.registration_stats().pinned_now();
        assert!(now <= bound, "op {op}: rank {me} has {now} bytes pinned, above M + MAXVICTIM = {bound}");
    }
    w.barrier()?;
    // Each origin reads back its whole region of every target in one last pass.
    for t in (0..n).filter(|&t| t != me) {
        let mut got = vec![0u8; REGION];
        w.get(RemotePtr::new(t, addrs[t] as usize + me * REGION), &mut got)?;
        assert!(got == shadow[t], "final read-back of my region at rank {t}");
    }
    w.barrier()?;

    let s = w.firehose_stats().expect("firehose stats");
    let peak = reg(&w, "pinned_peak");
    assert!(peak <= bound, "rank {me}: pinned peak {peak} bytes above M + MAXVICTIM = {bound}");
    assert!(s.pinned_bytes() <= bound);
    // Summed over the job: moves happened, and released firehoses were reused as victims.
    let all = |v: u64| -> Result<u64> { Ok(share_u64(&w, v)?.iter().sum()) };
    let moves = all(fh(s, "moves_sent"))?;
    let served = all(fh(s, "moves_served"))?;
    let reused = all(fh(s, "victim_reuses"))?;
    let misses = all(reg(&w, "misses"))?;
    let hits = all(reg(&w, "hits"))?;
    let peaks = share_u64(&w, peak)?;
    if me == 0 {
        println!("firehose: M + MAXVICTIM = {bound} B, f = {}, pinned peaks {peaks:?}, moves {moves}, victims reused {reused}, hits {hits}, misses {misses}", cfg.firehoses_per_rank);
    }
    if n > 1 {
        assert!(moves > 0 && moves == served, "moves sent {moves}, served {served}");
        assert!(reused > 0, "no victim was ever reused");
        assert!(hits > 0 && misses > 0);
        assert!(peaks.iter().all(|&p| p > 0), "every target pinned something: {peaks:?}");
    }
    w.barrier()?;
    ex.unexpose()?;
    assert_eq!(w.registration_stats().pinned_now(), 0, "unexpose unpinned everything");
    w.barrier()?;
    w.finalize()
}
