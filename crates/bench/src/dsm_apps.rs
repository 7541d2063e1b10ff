//! `activerma bench dsm-apps`: the Jackal paper's Table 2 — Water and LU wall time under each
//! protocol (no-RDMA invalidation, RDMA-request invalidation, in-place update, diff-array
//! update), for 1, 2 and 4 ranks, on the raw conduit and the modelled platform
//! (`dsm_micro::JACKAL_MODEL`). Every run is checked against the serial computation (rank 0
//! runs it after the timed part) and fails otherwise.
//!
//! Sizes: Water with the paper's 1728 molecules, 20 steps; LU of a 1024 x 1024 matrix in 16 x 16
//! blocks (2 KiB chunks, as the paper's). --quick: 216 molecules, 1 step; 128 x 128.

use super::dsm_micro::{check, find, networks, rank_counts, run_jobs, variant, MMU_VARIANT, QUICK_ENV};
use super::rows;
use super::timing::Measured;
use super::{BResult, BenchArgs};
use activerma_dsm::Dsm;
use serde_json::json;

pub(crate) const APP_ENV: &str = "ACTIVERMA_BENCH_DSM_APPS";

pub fn is_worker() -> bool {
    std::env::var_os(APP_ENV).is_some()
}

fn sizes(quick: bool) -> (activerma_water::Params, activerma_lu::Params) {
    if quick {
        (activerma_water::Params { molecules: 216, steps: 1, dt: 2e-4 }, activerma_lu::Params { n: 128, block: 16 })
    } else {
        (activerma_water::Params::paper(20), activerma_lu::Params { n: 1024, block: 16 })
    }
}

/// The parent: a job per network, rank count and protocol; then Table 2 and the checks.
pub fn dsm_apps(args: &BenchArgs) -> BResult<()> {
    let (water, lu) = sizes(args.quick);
    println!(
        "activerma bench dsm-apps: Water ({} molecules, {} steps) and LU ({n} x {n}, blocks of {b}) on the object DSM (the Jackal paper's Table 2); load {}",
        water.molecules,
        water.steps,
        super::load_avg(),
        n = lu.n,
        b = lu.block
    );
    println!("{}", super::machine::header_line());
    let ranks = rank_counts(args);
    let lines = run_jobs(args, "dsm-apps", &ranks, &[(APP_ENV, "1")], true, 3600.0)?;
    // The paper's Table 2 (seconds at 1, 2, 8 machines), by protocol.
    // Beyond the paper: RDMA-request invalidation with first accesses seen by the MMU, page by
    // page (ACTIVERMA_DSM_ACCESS=mmu), beside the same protocol with access checks.
    let paper: [(&str, &str, [f64; 3]); 10] = [
        ("water", "invalidate", [56.4, 41.2, 16.5]),
        ("water", "invalidate-rdma", [56.4, 40.2, 13.1]),
        ("water", "update-in-place", [56.9, 41.1, 26.8]),
        ("water", "update-diff", [56.9, 36.6, 20.0]),
        ("lu", "invalidate", [47.3, 30.1, 19.6]),
        ("lu", "invalidate-rdma", [47.3, 32.9, 18.9]),
        ("lu", "update-in-place", [47.0, 37.5, 26.1]),
        ("lu", "update-diff", [47.0, 41.1, 23.2]),
        ("water", MMU_VARIANT, [f64::NAN; 3]),
        ("lu", MMU_VARIANT, [f64::NAN; 3]),
    ];
    for (net, _) in networks() {
        println!(
            "# Table 2, {net}: wall time (s) at {} ranks; / no-RDMA invalidation | the paper's ratio at 1, 2, 8 machines",
            ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
        );
        for (app, protocol, secs) in paper {
            let base = |i: usize| paper.iter().find(|r| r.0 == app && r.1 == "invalidate").unwrap().2[i];
            let ours: Vec<String> = ranks
                .iter()
                .map(|&n| match (find(&lines, net, n, protocol, app), find(&lines, net, n, "invalidate", app)) {
                    (Some(t), Some(b)) => format!("{t:.3} ({:.2})", t / b),
                    _ => "—".into(),
                })
                .collect();
            let theirs: Vec<String> =
                (0..3).map(|i| if secs[i].is_nan() { "—".into() } else { format!("{:.2}", secs[i] / base(i)) }).collect();
            println!("  {app:<6} {protocol:<19} {:>48} | {}", ours.join("  "), theirs.join("  "));
            for &n in &ranks {
                if let Some(t) = find(&lines, net, n, protocol, app) {
                    let params =
                        rows::params([("network", json!(net)), ("ranks", json!(n)), ("protocol", json!(protocol)), ("app", json!(app))]);
                    rows::emit("dsm-apps", &format!("{net}-{n}-{protocol}-{app}"), params, "s", Measured::single(t), &[]);
                }
            }
        }
    }
    for (net, _) in networks() {
        let per_rank: Vec<String> = ranks
            .iter()
            .map(|&n| {
                let ratio = |app| Some(find(&lines, net, n, MMU_VARIANT, app)? / find(&lines, net, n, "invalidate-rdma", app)?);
                let show = |r: Option<f64>| r.map_or("—".into(), |r| format!("{r:.2}"));
                format!("{n} ranks: water {}, lu {}", show(ratio("water")), show(ratio("lu")))
            })
            .collect();
        println!("# the page-granular mode (MMU) / access checks, RDMA-request invalidation, {net}: {}", per_rank.join("; "));
    }
    let n = *ranks.iter().max().unwrap_or(&4);
    let t = |p: &str, app: &str| find(&lines, "modelled", n, p, app);
    if let (Some(rdma), Some(plain)) = (t("invalidate-rdma", "water"), t("invalidate", "water")) {
        check(
            "dsm-apps-check",
            &format!("Water, RDMA-request / no-RDMA invalidation, modelled, {n} ranks"),
            rdma / plain,
            "< 1",
            rdma < plain,
        );
    }
    for app in ["water", "lu"] {
        for update in ["update-in-place", "update-diff"] {
            if let (Some(rdma), Some(u)) = (t("invalidate-rdma", app), t(update, app)) {
                check(
                    "dsm-apps-check",
                    &format!("{app}, RDMA-request invalidation / {update}, modelled, {n} ranks"),
                    rdma / u,
                    "< 1",
                    rdma < u,
                );
            }
        }
    }
    Ok(())
}

/// One rank of a job: Water, then LU, each checked against its serial run.
pub fn worker() -> BResult<()> {
    let quick = std::env::var_os(QUICK_ENV).is_some();
    let (water, lu) = sizes(quick);
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let got = activerma_water::run(&mut dsm, water)?;
    let seconds_water = got.seconds;
    if w.rank() == 0 {
        let dev = activerma_water::deviation(&got.positions, &activerma_water::serial(water))?;
        if dev > 1e-9 {
            return Err(format!("water under {} ends {dev:e} away from the serial run", dsm.protocol().name()).into());
        }
    }
    drop(got);
    let got = activerma_lu::run(&mut dsm, lu)?;
    if w.rank() == 0 {
        let dev = activerma_lu::deviation(&got.matrix, &activerma_lu::serial(lu)?);
        if dev > 1e-12 {
            return Err(format!("lu under {} ends {dev:e} away from the serial factors", dsm.protocol().name()).into());
        }
        super::dsm_micro::report(&[("water".into(), seconds_water), ("lu".into(), got.seconds)], variant(&dsm), w.size())?;
    }
    dsm.barrier()?;
    Ok(w.finalize()?)
}
