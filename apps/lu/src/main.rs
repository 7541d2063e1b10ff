//! `lu`: SPLASH-2's blocked dense LU on the object DSM, checked against a serial run. Start it
//! with `activerma run -n 4 -- target/release/lu --protocol invalidate-rdma` (any number of
//! ranks).

use activerma_dsm::{config_with, Dsm};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Blocked LU on the object DSM: wall time of the factorization, checked against a serial run")]
struct Args {
    /// The DSM's protocol: invalidate, invalidate-rdma, update-in-place, update-diff (default:
    /// ACTIVERMA_DSM_PROTOCOL's).
    #[arg(long)]
    protocol: Option<String>,
    /// How first accesses are seen: checks or mmu (default: ACTIVERMA_DSM_ACCESS's).
    #[arg(long)]
    access: Option<String>,
    /// The matrix's order.
    #[arg(long, default_value_t = 1024)]
    n: usize,
    /// The blocks' order (n must be a multiple).
    #[arg(long, default_value_t = 16)]
    block: usize,
}

fn main() {
    if let Err(e) = run(&Args::parse()) {
        eprintln!("lu: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let world = activerma::init_with(config_with(a.protocol.as_deref(), a.access.as_deref())?)?;
    let mut dsm = Dsm::new(&world)?;
    let p = activerma_lu::Params { n: a.n, block: a.block };
    let got = activerma_lu::run(&mut dsm, p)?;
    if world.rank() == 0 {
        let dev = activerma_lu::deviation(&got.matrix, &activerma_lu::serial(p)?);
        let access = if dsm.page_granular() { "mmu" } else { "checks" };
        println!(
            "lu: {n} x {n} in blocks of {b}, {} ranks, protocol {}, access {access}: {:.3} s; {dev:.1e} (relative) from the serial factors",
            world.size(),
            dsm.protocol().name(),
            got.seconds,
            n = p.n,
            b = p.block
        );
        println!("rank 0's DSM: {:?}", dsm.stats());
        if dev > 1e-12 {
            return Err(format!("the factors differ from the serial run's by {dev:e}").into());
        }
    }
    drop(got);
    dsm.barrier()?;
    drop(dsm);
    world.finalize()?;
    Ok(())
}
