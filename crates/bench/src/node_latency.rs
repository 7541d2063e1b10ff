//! `activerma bench node-latency`: blocking 8-byte put and get latency from rank 0 to every
//! other rank of the job, each labelled with whether the target shares rank 0's node. Run as
//! the ranks of any job — `mpirun` (or `scripts/emulated-hosts.sh mpirun`) of an MPI build,
//! `activerma run` — it measures that job; started alone it runs a 2-rank job on this host
//! and a 4-rank one over two emulated hosts of 2 ranks (`ACTIVERMA_SMP_RANKS_PER_HOST=2`).
//! `bench/compare_nodes.sh` sets the node-aware mpi conduit over two emulated hosts side by
//! side with the one-host smp job and with plain MPI_Put / MPI_Get over the same link.

use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use serde_json::json;
use std::time::Instant;

const WORKER_ENV: &str = "ACTIVERMA_BENCH_NODE_LATENCY";
const LAYOUT_ENV: &str = "ACTIVERMA_BENCH_NODE_LATENCY_LAYOUT";
const QUICK_ENV: &str = "ACTIVERMA_BENCH_NODE_LATENCY_QUICK";

pub fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some() || super::started_as_mpi_rank()
}

/// The parent: a one-host job of 2 ranks and one of 4 ranks over two emulated hosts.
pub fn node_latency(args: &BenchArgs) -> BResult<()> {
    println!("activerma bench node-latency: 8 B blocking put / get from rank 0 to each rank; load {}", super::load_avg());
    println!("{}", super::machine::header_line());
    for (layout, n, per_host) in [("smp, one host", 2, None), ("smp, 2 emulated hosts of 2", 4, Some("2"))] {
        let mut env = vec![(WORKER_ENV.to_string(), "1".to_string()), (LAYOUT_ENV.to_string(), layout.to_string())];
        if let Some(k) = per_host {
            env.push(("ACTIVERMA_SMP_RANKS_PER_HOST".to_string(), k.to_string()));
        }
        if args.quick {
            env.push((QUICK_ENV.to_string(), "1".to_string()));
        }
        let json = args.json.as_ref().map(|p| p.to_string_lossy().into_owned());
        let mut argv = vec!["bench", "node-latency", "--rank-worker"];
        if let Some(path) = &json {
            argv.extend(["--json", path.as_str()]); // rank 0 appends its rows there
        }
        let code = super::jobs::run_with_env(n, &argv, &env, 300.0)?;
        if code != 0 {
            return Err(format!("the {layout} job failed (exit code {code})").into());
        }
    }
    Ok(())
}

/// Median over `reps` batches of the time per call of `op`, in µs.
fn time_us(reps: usize, batch: usize, mut op: impl FnMut() -> activerma::Result<()>) -> BResult<Measured> {
    for _ in 0..batch / 10 {
        op()?; // warm-up: pages, caches, the first use of the path
    }
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..batch {
            op()?;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
    }
    Ok(Measured::of_samples(&samples))
}

/// One rank: rank 0 measures towards each rank in turn while the others wait in a barrier.
pub fn worker() -> BResult<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let quick = std::env::var_os(QUICK_ENV).is_some() || std::env::args().any(|a| a == "--quick");
    let (reps, batch) = if quick { (5, 2000) } else { (15, 20000) };
    let layout = std::env::var(LAYOUT_ENV).unwrap_or_else(|_| {
        let nodes = (0..n).filter_map(|r| w.node_of(r).ok()).max().map_or(1, |m| m + 1);
        format!("{}, {nodes} node(s)", w.conduit_name())
    });
    let seg = w.alloc_segment(4096)?;
    w.barrier()?;
    if me == 0 {
        println!("# {layout}: {n} ranks; rank 0 -> each rank, median of {reps} batches of {batch}");
    }
    for t in 1..n {
        w.barrier()?;
        if me == 0 {
            let same = w.node_of(t)? == w.node_of(0)?;
            let data = [7u8; 8];
            let put = time_us(reps, batch, || w.put(seg.remote(t, 0), &data))?;
            let mut back = [0u8; 8];
            let get = time_us(reps, batch, || w.get(seg.remote(t, 0), &mut back))?;
            let node = if same { "same node" } else { "other node" };
            println!("  to rank {t} ({node}): put 8 B {:.4} us, get 8 B {:.4} us", put.value, get.value);
            for (op, m) in [("put", put), ("get", get)] {
                let params = rows::params([
                    ("layout", json!(layout)),
                    ("op", json!(op)),
                    ("target", json!(t)),
                    ("same_node", json!(same)),
                    ("conduit", json!(w.conduit_name())),
                ]);
                rows::emit("node-latency", &format!("{layout}-{op}-{t}"), params, "us", m, &[]);
            }
        }
    }
    w.barrier()?;
    Ok(w.finalize()?)
}
