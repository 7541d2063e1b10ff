//! PART with injected faults (ACTIVERMA_PART_FAULT_PROB): every byte lands, and every injected
//! page is met as a fault, resolved and paged in exactly once.

use super::share_u64;
use activerma::{Prot, RemotePtr, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const LEN: usize = 256 << 10;
const ROUNDS: usize = 8;

fn stat(s: &[(&'static str, u64)], name: &str) -> u64 {
    s.iter().find(|&&(k, _)| k == name).map(|&(_, v)| v).unwrap_or_else(|| panic!("no PART counter {name}"))
}

pub fn faults_counted() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    // Every page written before it is exposed: the only missing pages are the injected ones.
    let mut mem: Vec<u8> = (0..LEN).map(|i| (i * 7 + me) as u8).collect();
    let exposed = w.expose(&mut mem, Prot::ReadWrite)?;
    let addrs = share_u64(&w, exposed.addr() as u64)?;
    // A ring: each target is accessed by exactly one origin, so its counters pair with it.
    let t = (me + 1) % n;
    let mut rng = SmallRng::seed_from_u64(0x9a27 + me as u64);
    let mut data = vec![0u8; LEN];
    let mut back = vec![0u8; LEN];
    for round in 0..ROUNDS {
        let off = rng.gen_range(0..4096);
        let len = rng.gen_range(LEN / 2..LEN - off);
        rng.fill(&mut data[..len]);
        w.put(RemotePtr::new(t, addrs[t] as usize + off), &data[..len])?;
        w.get(RemotePtr::new(t, addrs[t] as usize + off), &mut back[..len])?;
        assert!(data[..len] == back[..len], "round {round}: rank {t} gave back other bytes");
    }
    w.barrier()?;
    let prob: f64 = std::env::var("ACTIVERMA_PART_FAULT_PROB").ok().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let err_mode = std::env::var("ACTIVERMA_PART_RETRANSMIT").map_or(true, |v| v == "err");
    let pio = std::env::var("ACTIVERMA_PART_PAGEIN").map_or(true, |v| v == "pio");
    let names = [
        "pages_injected",
        "pages_paged_in",
        "nacks_received",
        "errs_sent",
        "nacks_sent",
        "errs_received",
        "retransmissions",
        "timeouts",
        "faults_dst",
        "faults_src",
        "regions_registered",
    ];
    let mine = w.part_stats().snapshot();
    let mut bytes = Vec::new();
    for k in names {
        bytes.extend_from_slice(&stat(&mine, k).to_le_bytes());
    }
    let all: Vec<Vec<u64>> =
        w.allgather(&bytes)?.iter().map(|b| b.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()).collect();
    let get = |r: usize, k: &str| all[r][names.iter().position(|&x| x == k).unwrap()];
    // My target's side against my origin side.
    let injected = get(t, "pages_injected");
    let nacks = get(me, "nacks_sent");
    let ctx = format!("rank {me} -> rank {t}: target {:?}, origin {:?}", all[t], all[me]);
    assert!(get(t, "regions_registered") >= 1, "{ctx}");
    assert_eq!(get(t, "pages_paged_in"), injected, "every injected page paged in exactly once; {ctx}");
    assert_eq!(get(me, "faults_dst") + get(me, "faults_src"), nacks, "each remote fault is one NACK; {ctx}");
    if prob > 0.0 {
        assert!(injected > 0, "{ctx}");
        assert!(nacks >= 1 && get(me, "retransmissions") >= 1, "{ctx}");
    } else {
        assert_eq!(injected + nacks, 0, "{ctx}");
    }
    if err_mode {
        assert_eq!(get(t, "nacks_received"), nacks, "{ctx}");
        assert_eq!(get(t, "errs_sent"), nacks, "{ctx}");
        assert_eq!(get(me, "errs_received"), nacks, "{ctx}");
        assert_eq!(get(me, "retransmissions"), nacks, "one resend per NACK; {ctx}");
        assert_eq!(get(me, "timeouts"), 0, "{ctx}");
        if pio {
            assert_eq!(nacks, injected, "PIO + ERR: every injected page is exactly one fault; {ctx}");
        } else {
            assert!(nacks <= injected, "{ctx}");
        }
    } else {
        assert_eq!(get(t, "errs_sent"), 0, "{ctx}");
        assert_eq!(get(me, "timeouts"), get(me, "retransmissions"), "{ctx}");
        assert!(nacks >= injected.min(1), "{ctx}");
    }
    w.barrier()?;
    drop(exposed);
    w.finalize()
}

/// PART over the modelled network (2 ranks; ACTIVERMA_NET_BANDWIDTH_MBS set, PAGEIN pio):
/// each block, every resend included, is booked on the link, so a put cannot complete before
/// the wire time of everything it sent; and the bytes land intact.
pub fn modelled_link() -> Result<()> {
    const BLOCK: usize = 16 << 10; // ACTIVERMA_PART_BLOCK's default
    let w = activerma::init()?;
    let me = w.rank();
    let mbs: f64 = std::env::var("ACTIVERMA_NET_BANDWIDTH_MBS").ok().and_then(|v| v.parse().ok()).expect("a modelled bandwidth");
    let wire_us = |bytes: usize| bytes as f64 / mbs;
    let mut mem = vec![me as u8; LEN + BLOCK];
    let exposed = w.expose(&mut mem, Prot::ReadWrite)?;
    // Block-aligned, so the put is LEN / BLOCK whole blocks.
    let base = exposed.addr().next_multiple_of(BLOCK);
    let addrs = share_u64(&w, base as u64)?;
    let resends = || stat(&w.part_stats().snapshot(), "retransmissions");
    let mut rng = SmallRng::seed_from_u64(0x11f);
    let mut data = vec![0u8; LEN];
    let mut back = vec![0u8; LEN];
    let ps = activerma_core::page::page_size();
    for evicted in [false, true] {
        if me == 1 && evicted {
            assert_eq!(w.part_evict(base, LEN)? as usize, LEN / ps);
        }
        w.barrier()?;
        if me == 0 {
            rng.fill(&mut data[..]);
            let r0 = resends();
            let t = std::time::Instant::now();
            w.put(RemotePtr::new(1, addrs[1] as usize), &data)?;
            let took = t.elapsed().as_secs_f64() * 1e6;
            let r = (resends() - r0) as usize;
            // PIO: a block with every page missing is resent once per page.
            assert_eq!(r, if evicted { LEN / ps } else { 0 }, "resends of a put with evicted = {evicted}");
            let sent = LEN + r * BLOCK;
            assert!(took >= wire_us(sent), "a put that sent {sent} bytes took {took:.0} us < their wire time at {mbs} MB/s");
            w.get(RemotePtr::new(1, addrs[1] as usize), &mut back)?;
            assert!(data == back, "evicted = {evicted}: rank 1 gave back other bytes");
        }
        w.barrier()?;
    }
    drop(exposed);
    w.finalize()
}
