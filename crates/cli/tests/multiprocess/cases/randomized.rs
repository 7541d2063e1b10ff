//! All ranks hammer each other with puts, gets and atomics of random sizes and offsets, on
//! segments and on private memory; every byte is verified at the end.
//!
//! Each origin owns one region of every target's memory (so the final content is known) and
//! keeps a shadow copy of what it wrote there. Atomic counters are shared by everyone: each
//! origin adds random amounts and the totals are compared at the end.

use super::share_u64;
use activerma::{Prot, RemotePtr, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const REGION: usize = 96 * 1024 + 123;
const OPS: usize = 4000;

pub fn run() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let seed = std::env::var("ACTIVERMA_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed);
    let mut rng = SmallRng::seed_from_u64(seed ^ (me as u64 * 0x9e37_79b9));
    let counters_at = (n * REGION).next_multiple_of(64); // atomics need aligned words
    let seg = w.alloc_segment(counters_at + 64 * n)?; // regions, then one counter per rank
    let mut private = vec![0u64; (counters_at + 64 * n) / 8]; // u64s: 8-byte aligned
                                                              // SAFETY: reinterpreting our own u64 buffer as bytes.
    let private = unsafe { std::slice::from_raw_parts_mut(private.as_mut_ptr() as *mut u8, private.len() * 8) };
    let exposed = w.expose(private, Prot::ReadWrite)?;
    let paddr = share_u64(&w, exposed.addr() as u64)?;

    // target address of byte `off` of my region on rank t, in segment or private memory
    let at = |t: usize, private: bool, off: usize| {
        if private {
            RemotePtr::new(t, paddr[t] as usize + me * REGION + off)
        } else {
            seg.remote(t, me * REGION + off)
        }
    };
    let counter = |t: usize, private: bool| {
        if private {
            RemotePtr::new(t, paddr[t] as usize + counters_at + 64 * me)
        } else {
            seg.remote(t, counters_at + 64 * me)
        }
    };
    let mut shadow = vec![vec![vec![0u8; REGION]; n]; 2]; // [private][target]
    let mut added = vec![vec![0u64; n]; 2];
    let mut buf = vec![0u8; REGION];

    for op in 0..OPS {
        let t = rng.gen_range(0..n);
        let p = rng.gen_bool(0.5);
        let len = match rng.gen_range(0..10) {
            0 => rng.gen_range(0..REGION),
            1..=3 => rng.gen_range(0..4096),
            _ => rng.gen_range(1..64),
        };
        let off = rng.gen_range(0..=REGION - len);
        match rng.gen_range(0..6) {
            0 | 1 => {
                rng.fill(&mut buf[..len]);
                w.put(at(t, p, off), &buf[..len])?;
                shadow[p as usize][t][off..off + len].copy_from_slice(&buf[..len]);
            }
            2 => {
                rng.fill(&mut buf[..len]);
                w.put_nbi(at(t, p, off), &buf[..len])?;
                shadow[p as usize][t][off..off + len].copy_from_slice(&buf[..len]);
                if rng.gen_bool(0.3) {
                    w.flush(t)?;
                }
            }
            3 | 4 => {
                w.get(at(t, p, off), &mut buf[..len])?;
                assert!(
                    buf[..len] == shadow[p as usize][t][off..off + len],
                    "op {op}: get from rank {t} (private={p}) {off}+{len} saw other bytes"
                );
            }
            _ => {
                let v = rng.gen_range(1..1000u64);
                w.add(counter(t, p), v)?;
                added[p as usize][t] += v;
            }
        }
    }
    w.barrier()?;

    // Every byte of every region I own, on every target, in both kinds of memory.
    for t in 0..n {
        for p in [false, true] {
            let mut got = vec![0u8; REGION];
            w.get(at(t, p, 0), &mut got)?;
            if let Some(i) = (0..REGION).find(|&i| got[i] != shadow[p as usize][t][i]) {
                panic!("rank {me}: byte {i} of my region on rank {t} (private={p}) is {} not {}", got[i], shadow[p as usize][t][i]);
            }
            assert_eq!(w.fetch(counter(t, p))?, added[p as usize][t], "rank {me}: atomic total on rank {t} (private={p})");
        }
    }
    w.barrier()?;
    drop(exposed);
    w.finalize()
}
