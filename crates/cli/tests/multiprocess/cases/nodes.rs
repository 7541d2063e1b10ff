//! A job over several hosts (nodes): ranks agree on the layout, traffic to ranks of this node
//! never takes the network path, and traffic to other nodes always does.

use super::{same_host, share_u64};
use activerma::{AmCtx, Prot, RemotePtr, Result, TrafficTo, FIRST_USER_HANDLER};
use activerma_transport::mapping::{ensure_mapped, HEAP_HINT};
use activerma_transport::smp::{ENV_RANK, ENV_SIZE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const OPS: usize = 40;
const LEN: usize = 64;

/// The layout the driver asked for: consecutive runs of this many ranks per node (on the mpi
/// conduit with ACTIVERMA_MPI_SHARED=off no rank maps another's memory: a node each).
fn expected_ranks_per_node() -> Option<usize> {
    if std::env::var("ACTIVERMA_MPI_SHARED").is_ok_and(|v| v == "off") && std::env::var("ACTIVERMA_CONDUIT").is_ok_and(|v| v == "mpi") {
        return Some(1);
    }
    ["ACTIVERMA_TEST_RANKS_PER_NODE", "ACTIVERMA_SMP_RANKS_PER_HOST"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse().ok()).filter(|&k: &usize| k > 0))
}

pub fn node_paths() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let nodes = share_u64(&w, w.node_of(me)? as u64)?;
    for (r, &node) in nodes.iter().enumerate() {
        assert_eq!(node, w.node_of(r)? as u64, "rank {me}: ranks disagree on the node of rank {r}");
        if let Some(k) = expected_ranks_per_node() {
            assert_eq!(node as usize, r / k, "rank {me}: rank {r} on node {node}, expected {} ({k} ranks per node)", r / k);
        }
    }
    assert!(w.node_of(n).is_err(), "a rank past the job has no node");
    let seg = w.alloc_segment(n * LEN + 8 * n)?;
    let mut private = vec![0u8; n * LEN];
    let exposed = w.expose(&mut private, Prot::ReadWrite)?;
    let private_at = share_u64(&w, exposed.addr() as u64)?;
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    w.register_handler(
        FIRST_USER_HANDLER,
        Arc::new(move |_: &AmCtx, _: &[u8]| {
            g.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    w.barrier()?;
    let before: Vec<TrafficTo> = (0..n).map(|t| w.traffic_to(t)).collect::<Result<_>>()?;
    let data: Vec<u8> = (0..LEN).map(|i| super::pattern(me, 9, i)).collect();
    for (t, &theirs) in private_at.iter().enumerate() {
        for _ in 0..OPS {
            w.put(seg.remote(t, me * LEN), &data)?;
            let mut back = vec![0u8; LEN];
            w.get(seg.remote(t, me * LEN), &mut back)?;
            assert_eq!(back, data, "rank {me}: segment round trip with rank {t}");
            w.fetch_add(seg.remote(t, n * LEN + 8 * me), 1)?;
            w.put(RemotePtr::new(t, theirs as usize + me * LEN), &data)?;
            w.get(RemotePtr::new(t, theirs as usize + me * LEN), &mut back)?;
            assert_eq!(back, data, "rank {me}: private round trip with rank {t}");
            w.send_am(t, FIRST_USER_HANDLER, 0, &data)?;
        }
    }
    w.flush_all()?;
    while got.load(Ordering::Relaxed) < (OPS * n) as u64 {
        w.progress();
    }
    let after: Vec<TrafficTo> = (0..n).map(|t| w.traffic_to(t)).collect::<Result<_>>()?;
    for t in 0..n {
        let (b, a) = (before[t], after[t]);
        let sent = TrafficTo {
            rma_ops: a.rma_ops - b.rma_ops,
            rma_bytes: a.rma_bytes - b.rma_bytes,
            am_fragments: a.am_fragments - b.am_fragments,
            am_bytes: a.am_bytes - b.am_bytes,
        };
        if same_host(&w, t) && !w.cpu_atomics() {
            // MPICH across nodes: this node's atomics go through MPI too (World::cpu_atomics),
            // and nothing else does.
            assert_eq!((sent.rma_ops, sent.rma_bytes), (OPS as u64, 8 * OPS as u64), "rank {me} -> {t}: only the atomics");
            assert_eq!(sent.am_fragments, 0, "rank {me} -> {t}: no messages inside the node");
        } else if same_host(&w, t) {
            assert_eq!(sent, TrafficTo::default(), "rank {me}: traffic to rank {t} of this node took the network");
        } else {
            // Segments: a put, a get and an atomic per round through the one-sided engine;
            // private memory through the target, at least a message per put and get; and
            // the round's own message.
            assert!(
                sent.rma_ops >= 3 * OPS as u64,
                "rank {me} -> {t}: {} one-sided operations across nodes, expected >= {}",
                sent.rma_ops,
                3 * OPS
            );
            assert!(sent.rma_bytes >= (OPS * (2 * LEN + 8)) as u64, "rank {me} -> {t}: {} bytes one-sided", sent.rma_bytes);
            assert!(
                sent.am_fragments >= 3 * OPS as u64 || w.conduit_name() == "smp",
                "rank {me} -> {t}: {} message fragments across nodes, expected >= {}",
                sent.am_fragments,
                3 * OPS
            );
        }
    }
    w.barrier()?;
    let counts: Vec<u64> = (0..n).map(|src| seg.read_u64(n * LEN + 8 * src)).collect();
    assert!(counts.iter().all(|&c| c == OPS as u64), "rank {me}: atomics of each origin {counts:?}, expected {OPS}");
    drop(exposed);
    w.finalize()
}

/// Where the program already has memory in the address range the runtime prefers for heaps
/// (`mapping::HEAP_HINT`; an MPI library's shared window lands there now and then, MPICH's
/// being at random addresses): init works around it and leaves that memory alone. The last
/// rank maps a page there first; once the node's owner views (mpi/owner_views.rs), found the
/// range taken and unmapped all of it, the MPI window included.
pub fn hint_range_taken() -> Result<()> {
    let page = activerma_core::page::page_size();
    // Before init, the rank and size only the launcher's environment tells (ours, MPICH's
    // Hydra, Open MPI's).
    let from_env = |keys: [&str; 3]| keys.iter().find_map(|k| std::env::var(k).ok()?.parse::<usize>().ok());
    let rank = from_env([ENV_RANK, "PMI_RANK", "OMPI_COMM_WORLD_RANK"]).expect("a rank started by a launcher");
    let size = from_env([ENV_SIZE, "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"]).expect("a rank started by a launcher");
    let at = HEAP_HINT + (16 << 20);
    let ours = rank + 1 == size;
    if ours {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE;
        // SAFETY: a fresh page of our own; MAP_FIXED_NOREPLACE never replaces a mapping.
        let p = unsafe { libc::mmap(at as *mut _, page, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        assert_eq!(p as usize, at, "rank {rank}: could not map the test's page at {at:#x}");
        // SAFETY: the page just mapped.
        unsafe { std::ptr::write_bytes(at as *mut u8, 0x5a, page) };
    }
    let w = activerma::init()?;
    let me = w.rank();
    if ours {
        ensure_mapped(at, "the program's own page")?;
        // SAFETY: mapped (checked), and ours.
        let kept = unsafe { std::slice::from_raw_parts(at as *const u8, page) };
        assert!(kept.iter().all(|&b| b == 0x5a), "rank {me}: init changed the program's page at {at:#x}");
    }
    // The job works all the same: every rank's segment from every rank.
    let n = w.size();
    let seg = w.alloc_segment(n * LEN)?;
    w.barrier()?;
    let data: Vec<u8> = (0..LEN).map(|i| super::pattern(me, 11, i)).collect();
    for t in 0..n {
        w.put(seg.remote(t, me * LEN), &data)?;
    }
    w.flush_all()?;
    w.barrier()?;
    for src in 0..n {
        let mut back = vec![0u8; LEN];
        w.get(seg.remote(me, src * LEN), &mut back)?;
        let want: Vec<u8> = (0..LEN).map(|i| super::pattern(src, 11, i)).collect();
        assert_eq!(back, want, "rank {me}: what rank {src} put");
    }
    w.barrier()?;
    if ours {
        // SAFETY: the test's page, no longer used.
        unsafe { libc::munmap(at as *mut _, page) };
    }
    w.finalize()
}
