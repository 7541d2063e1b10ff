//! Strided and vector transfers (lists of pieces) under every ACTIVERMA_NONCONTIG method, to
//! segments and to exposed private memory: every byte arrives where the pattern says and
//! nowhere else, a refused piece is named by its own address, and — where the whole list is
//! checked first (host-assisted, packed) — a refused list writes nothing.

use super::{offer, pattern, same_host, Offered};
use activerma::{Error, Noncontig, RemotePtr, Result, StridedPattern, World};
use std::sync::atomic::Ordering;

/// Bytes of target memory each origin owns (its pieces stay inside).
const REGION: usize = 128 << 10;
/// A 2-D patch: ROWS rows of PIECE bytes, STRIDE bytes apart at the target, packed locally.
const ROWS: usize = 300;
const PIECE: usize = 24;
const STRIDE: usize = 200;
/// A vector of more pieces than the kernel's IOV_MAX (1024), so lists are chunked even at the
/// default SGE_MAX; pieces of odd sizes at scattered offsets.
const VECTOR_PIECES: usize = 1500;
const VECTOR_PIECE: usize = 13;

/// The counters that say how a list moved: scatter/gather calls, packed messages, one-sided
/// list operations, lists the target moved.
const LIST_COUNTERS: [&str; 4] = ["noncontig_sg_calls", "noncontig_packed", "noncontig_rma_lists", "noncontig_target_assisted"];

fn counter(w: &World, name: &str) -> u64 {
    w.counters().snapshot().into_iter().find(|&(k, _)| k == name).map(|(_, v)| v).unwrap()
}

/// Offsets (inside one origin's region) of the vector's pieces: every 40th byte, reversed in
/// pairs so the list is not sorted.
fn vector_offsets() -> Vec<usize> {
    (0..VECTOR_PIECES).map(|i| (i ^ 1) * 40 + 3).collect()
}

pub fn lists_of_pieces() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let mut private = vec![0u8; n * REGION];
    let read_only = vec![7u8; 4096];
    let Offered { exposed, ro, seg, priv_addr, ro_addr } = offer(&w, &mut private, &read_only, n * REGION)?;
    let method = w.noncontig()?;
    let sge_max: u64 = activerma::settings::get_u64(activerma::settings::SGE_MAX)?;
    let strategy = std::env::var("ACTIVERMA_REGISTRATION").unwrap_or_default();
    w.barrier()?;

    let patch = StridedPattern::new(PIECE, vec![ROWS], vec![STRIDE], vec![PIECE])?;
    let offsets = vector_offsets();
    for (t, &priv_base) in priv_addr.iter().enumerate() {
        let same_host = same_host(&w, t);
        for (kind, base) in [("segment", seg.remote(t, 0).addr), ("private", priv_base as usize)] {
            let mine = base + me * REGION;
            // Strided: ROWS rows into the first half of our region, read back the same way.
            let src: Vec<u8> = (0..ROWS * PIECE).map(|i| pattern(me, t, i)).collect();
            let moved_before = counter(&w, "noncontig_target_assisted");
            w.put_strided(RemotePtr::new(t, mine), &patch, &src)?;
            let mut back = vec![0u8; ROWS * PIECE];
            w.get_strided(RemotePtr::new(t, mine), &patch, &mut back)?;
            assert_eq!(back, src, "rank {me}: strided round trip with rank {t}'s {kind} memory");
            if method == Noncontig::TargetAssisted && t != me && same_host && w.conduit_name() == "smp" {
                // Sent as the pattern, moved by the target: one request each way.
                assert_eq!(counter(&w, "noncontig_target_assisted") - moved_before, 2, "rank {me}: rank {t} moved both patches");
            }
            // Vector: many small pieces into the second half, counted where the method shows.
            let vbase = mine + REGION / 2;
            let data: Vec<Vec<u8>> = (0..VECTOR_PIECES).map(|i| (0..VECTOR_PIECE).map(|j| pattern(me, i, j + 1000)).collect()).collect();
            let list: Vec<(usize, &[u8])> = offsets.iter().zip(&data).map(|(&o, d)| (vbase + o, &d[..])).collect();
            let before: Vec<u64> = LIST_COUNTERS.iter().map(|c| counter(&w, c)).collect();
            w.put_vector(t, &list)?;
            let [calls, packed, rma_lists, target_moved] = std::array::from_fn(|i| counter(&w, LIST_COUNTERS[i]) - before[i]);
            let mut got = vec![vec![0u8; VECTOR_PIECE]; VECTOR_PIECES];
            let mut glist: Vec<(usize, &mut [u8])> = offsets.iter().zip(got.iter_mut()).map(|(&o, d)| (vbase + o, &mut d[..])).collect();
            w.get_vector(t, &mut glist)?;
            assert_eq!(got, data, "rank {me}: vector round trip with rank {t}'s {kind} memory");
            match method {
                // Private memory of another rank on this host: one kernel call per SGE_MAX
                // pieces — registered already, or (rendezvous, firehose) the dense list's range
                // registered at once first; PART copies block by block, bounce through the target.
                Noncontig::HostAssisted
                    if kind == "private"
                        && t != me
                        && same_host
                        && ["", "none", "pin-all", "rendezvous", "rendezvous-unpin", "firehose"].contains(&strategy.as_str()) =>
                {
                    assert_eq!(
                        calls,
                        (VECTOR_PIECES as u64).div_ceil(sge_max),
                        "rank {me}: scatter/gather calls for {VECTOR_PIECES} pieces"
                    )
                }
                Noncontig::Packed if t != me => assert_eq!(packed, 1, "rank {me}: one packed message to rank {t}"),
                // The target moves the list itself when it maps our memory's host (one host on
                // smp; MPI with the node's shared memory); otherwise it gets the list packed.
                Noncontig::TargetAssisted if t != me => {
                    assert_eq!(target_moved + packed, 1, "rank {me}: one request to rank {t}");
                    if same_host && w.conduit_name() == "smp" {
                        assert_eq!(target_moved, 1, "rank {me}: rank {t} of this host moved the list itself");
                    }
                    if !same_host {
                        assert_eq!(packed, 1, "rank {me}: rank {t} of another host cannot reach our memory");
                    }
                }
                // Another host: private memory travels packed, a segment as one MPI operation.
                Noncontig::HostAssisted if t != me && !same_host && kind == "private" => {
                    assert_eq!(packed, 1, "rank {me}: packed to rank {t}")
                }
                Noncontig::HostAssisted if t != me && !same_host && w.conduit_name() == "mpi" => {
                    assert_eq!(rma_lists, 1, "rank {me}: one MPI operation for the list to rank {t}")
                }
                _ => {}
            }
        }
    }
    w.barrier()?;
    // Every target checks what each origin left in its memory: the patch rows and the vector
    // pieces hold the origin's bytes, and the gaps between them were never written.
    let mut local = vec![0u8; n * REGION];
    exposed.read(0, &mut local);
    let mut seg_local = vec![0u8; n * REGION];
    seg.read_local(0, &mut seg_local);
    for (kind, mem) in [("private", &local[..]), ("segment", &seg_local[..])] {
        for src in 0..n {
            let region = &mem[src * REGION..(src + 1) * REGION];
            let mut expect = vec![0u8; REGION];
            for r in 0..ROWS {
                for j in 0..PIECE {
                    expect[r * STRIDE + j] = pattern(src, me, r * PIECE + j);
                }
            }
            for (i, &o) in offsets.iter().enumerate() {
                for j in 0..VECTOR_PIECE {
                    expect[REGION / 2 + o + j] = pattern(src, i, j + 1000);
                }
            }
            if let Some(i) = (0..REGION).find(|&i| region[i] != expect[i]) {
                panic!("rank {me}: byte {i} of rank {src}'s {kind} region is {} not {}", region[i], expect[i]);
            }
        }
    }
    w.barrier()?;

    // Refusals: a piece past the exposure, and a put into read-only memory, each named by
    // the refused piece's own address.
    for t in 0..n {
        let mine = priv_addr[t] as usize + me * REGION;
        let bad_at = priv_addr[t] as usize + n * REGION + 64;
        let mut before = [0u8; 64];
        w.get(RemotePtr::new(t, mine), &mut before)?;
        let fresh = [0xA5u8; 8];
        let list: Vec<(usize, &[u8])> = vec![(mine, &fresh), (mine + 8, &fresh), (bad_at, &fresh)];
        match w.put_vector(t, &list) {
            Err(Error::NotExposed { addr, .. }) => assert_eq!(addr, bad_at, "rank {me}: the error names the refused piece"),
            other => panic!("rank {me}: a vector put past rank {t}'s exposure gave {other:?}"),
        }
        // Nothing moved: host-assisted and packed lists are checked whole before anything moves
        // (private memory of another host travels packed under host-assisted too).
        if method != Noncontig::PerPiece {
            let mut after = [0u8; 64];
            w.get(RemotePtr::new(t, mine), &mut after)?;
            assert_eq!(after, before, "rank {me}: a refused list wrote to rank {t}");
        }
        let list: Vec<(usize, &[u8])> = vec![(ro_addr[t] as usize, &fresh)];
        match w.put_vector(t, &list) {
            Err(Error::Protection { .. }) => {}
            other => panic!("rank {me}: a vector put into rank {t}'s read-only memory gave {other:?}"),
        }
        // A strided patch whose last row lies past the exposure: refused, named by that row.
        let rows = 3;
        let stride = (bad_at - mine) / (rows - 1);
        let past = StridedPattern::new(8, vec![rows], vec![stride], vec![8])?;
        let last_row = mine + (rows - 1) * stride;
        match w.put_strided(RemotePtr::new(t, mine), &past, &[0xA5u8; 24]) {
            Err(Error::NotExposed { addr, .. }) => assert_eq!(addr, last_row, "rank {me}: the error names the refused row"),
            other => panic!("rank {me}: a strided put past rank {t}'s exposure gave {other:?}"),
        }
        if method != Noncontig::PerPiece {
            let mut row0 = [0u8; 8];
            w.get(RemotePtr::new(t, mine), &mut row0)?;
            assert_eq!(row0, before[..8], "rank {me}: a refused strided put wrote its first row to rank {t}");
        }
        let mut rows_back = [0u8; 24];
        match w.get_strided(RemotePtr::new(t, mine), &past, &mut rows_back) {
            Err(Error::NotExposed { addr, .. }) => assert_eq!(addr, last_row, "rank {me}: the error names the refused row"),
            other => panic!("rank {me}: a strided get past rank {t}'s exposure gave {other:?}"),
        }
        let mut one = [0u8; 8];
        let mut glist: Vec<(usize, &mut [u8])> = vec![(bad_at, &mut one[..])];
        match w.get_vector(t, &mut glist) {
            Err(Error::NotExposed { addr, .. }) => assert_eq!(addr, bad_at),
            other => panic!("rank {me}: a vector get past rank {t}'s exposure gave {other:?}"),
        }
        w.flush(t)?;
    }
    w.barrier()?;
    // The read-only memory still holds what its owner put there.
    assert!(read_only.iter().all(|&b| b == 7), "rank {me}: read-only memory was written");
    let pieces = w.counters().noncontig_pieces.load(Ordering::Relaxed);
    assert!(pieces >= (n * 2 * (2 * ROWS + 2 * VECTOR_PIECES)) as u64, "rank {me}: pieces counted: {pieces}");
    drop(ro);
    drop(exposed);
    w.barrier()?;
    w.finalize()
}

/// Non-blocking strided gets and puts (what ARMCI_NbGetS / NbPutS call) of 16 KiB to 256 KiB
/// of 1 KiB rows: the bytes arrive intact, and the target's CPU moved them (one
/// `noncontig_target_assisted` count each) exactly when it should under host-assisted — from
/// ACTIVERMA_NB_TARGET_FROM bytes on, to another rank of this host whose table is mapped here
/// and whose progress engine runs on its own (ACTIVERMA_PROGRESS=thread or wake); otherwise
/// this rank copied them at issue. Those it would copy at issue go to its copy engine instead
/// (one `copy_engine_jobs` count each) when it has one (ACTIVERMA_COPY_ENGINE) and the target's
/// segment is mapped here, as do contiguous non-blocking gets of as many bytes.
pub fn nb_strided_by_target() -> Result<()> {
    const ROW: usize = 1024;
    const MAX_ROWS: usize = 256;
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let from = activerma::settings::get_u64(activerma::settings::NB_TARGET_FROM)? as usize;
    let serving = std::env::var("ACTIVERMA_PROGRESS").is_ok_and(|m| m == "thread" || m == "wake");
    let mapped_here = w.conduit_name() == "smp" || std::env::var("ACTIVERMA_MPI_SHARED").map_or(true, |v| v != "off");
    let engine = w.has_copy_engine()?;
    match std::env::var("ACTIVERMA_COPY_ENGINE").as_deref() {
        Ok("on") => assert!(engine, "rank {me}: ACTIVERMA_COPY_ENGINE=on, and no engine"),
        Ok("off") => assert!(!engine, "rank {me}: ACTIVERMA_COPY_ENGINE=off, and an engine"),
        _ => {}
    }
    let seg = w.alloc_segment(n * 2 * MAX_ROWS * ROW)?;
    w.barrier()?;
    for step in 1..n {
        let t = (me + step) % n;
        let region = seg.remote(t, me * 2 * MAX_ROWS * ROW).addr;
        for rows in [16, 64, 256] {
            let patch = StridedPattern::new(ROW, vec![rows], vec![2 * ROW], vec![ROW])?;
            let bytes = rows * ROW;
            let large_and_mapped = from > 0 && bytes >= from && same_host(&w, t) && mapped_here;
            let moved_off_origin = w.noncontig()? == Noncontig::HostAssisted && large_and_mapped;
            let by_target = moved_off_origin && serving;
            let by_engine = moved_off_origin && !serving && engine;
            let src: Vec<u8> = (0..bytes).map(|i| pattern(me, t + rows, i)).collect();
            let before = (counter(&w, "noncontig_target_assisted"), counter(&w, "copy_engine_jobs"));
            let used = w.put_strided_nb_by(activerma::Transfer::Auto, RemotePtr::new(t, region), &patch, &src)?.wait()?;
            let put_moved = (counter(&w, "noncontig_target_assisted") - before.0, counter(&w, "copy_engine_jobs") - before.1);
            let mut back = vec![0u8; bytes];
            let before = (counter(&w, "noncontig_target_assisted"), counter(&w, "copy_engine_jobs"));
            let started_before = counter(&w, "noncontig_rma_lists_started");
            let got_by = w.get_strided_nb_by(activerma::Transfer::Auto, RemotePtr::new(t, region), &patch, &mut back)?.wait()?;
            let get_moved = (counter(&w, "noncontig_target_assisted") - before.0, counter(&w, "copy_engine_jobs") - before.1);
            assert!(back == src, "rank {me}: non-blocking strided round trip of {bytes} B with rank {t}");
            // From a rank of another host over MPI, the host-assisted list is one MPI_Rget
            // left in flight until the wait.
            let one_sided = !same_host(&w, t)
                && w.conduit_name() == "mpi"
                && w.noncontig()? == Noncontig::HostAssisted
                && got_by == activerma::Transfer::ZeroCopy;
            assert_eq!(
                counter(&w, "noncontig_rma_lists_started") - started_before,
                one_sided as u64,
                "rank {me}: non-blocking strided get of {bytes} B from rank {t} ({}): started on the one-sided engine",
                if same_host(&w, t) { "this host" } else { "another host" }
            );
            let zero_copy = used == activerma::Transfer::ZeroCopy;
            let want = ((by_target && zero_copy) as u64, (by_engine && zero_copy) as u64);
            assert_eq!(
                (put_moved, get_moved),
                (want, want),
                "rank {me}: non-blocking strided put and get of {bytes} B to rank {t} (progress on its own: {serving}, \
                 copy engine: {engine}, ACTIVERMA_NB_TARGET_FROM={from}): (moves by the target, jobs of the copy engine)"
            );
            // The patch's span as one contiguous non-blocking get: no target moves those, so the
            // engine takes every large one from a mapped segment, whatever the target's progress.
            let mut whole = vec![0u8; bytes];
            let before = counter(&w, "copy_engine_jobs");
            let used = w.get_nb_by(activerma::Transfer::Auto, RemotePtr::new(t, region), &mut whole)?.wait()?;
            let jobs = counter(&w, "copy_engine_jobs") - before;
            // The patch's rows lie every other row there (the rows between are not ours to check).
            for (row, got) in whole.chunks(ROW).enumerate().step_by(2) {
                assert!(
                    got == &src[row / 2 * ROW..(row / 2 + 1) * ROW],
                    "rank {me}: contiguous non-blocking get of {bytes} B from rank {t}, row {row}"
                );
            }
            let want = (large_and_mapped && engine && used == activerma::Transfer::ZeroCopy) as u64;
            assert_eq!(
                jobs, want,
                "rank {me}: contiguous non-blocking get of {bytes} B from rank {t} (copy engine: {engine}): jobs of the engine"
            );
            // The patch's rows as a vector (what ARMCI_NbPutV / NbGetV call): moved by the
            // target or the copy engine as the strided transfer is, or started on MPI from
            // another host.
            let rows_at = |i: usize| region + i * 2 * ROW;
            let vsrc: Vec<u8> = (0..bytes).map(|i| pattern(me, t + rows + 1, i)).collect();
            let before =
                (counter(&w, "noncontig_target_assisted"), counter(&w, "noncontig_rma_lists_started"), counter(&w, "copy_engine_jobs"));
            let list: Vec<(usize, &[u8])> = vsrc.chunks(ROW).enumerate().map(|(i, c)| (rows_at(i), c)).collect();
            w.put_vector_nb(t, list)?.wait()?;
            let mut vback = vec![0u8; bytes];
            let list: Vec<(usize, &mut [u8])> = vback.chunks_mut(ROW).enumerate().map(|(i, c)| (rows_at(i), c)).collect();
            w.get_vector_nb(t, list)?.wait()?;
            assert!(vback == vsrc, "rank {me}: non-blocking vector round trip of {bytes} B with rank {t}");
            let moved = (
                counter(&w, "noncontig_target_assisted") - before.0,
                counter(&w, "noncontig_rma_lists_started") - before.1,
                counter(&w, "copy_engine_jobs") - before.2,
            );
            assert_eq!(
                moved,
                (2 * by_target as u64, one_sided as u64, 2 * by_engine as u64),
                "rank {me}: non-blocking vector put and get of {bytes} B with rank {t}: (moves by the target, gets started on \
                 MPI, jobs of the copy engine)"
            );
        }
    }
    w.barrier()?;
    w.finalize()
}
