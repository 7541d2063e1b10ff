//! `water`: Water (SPLASH-2 nsquared, the Jackal paper's layout) on the object DSM, checked
//! against a serial run. Start it with `activerma run -n 4 -- target/release/water
//! --protocol invalidate-rdma` (any number of ranks).

use activerma_dsm::{config_with, Dsm};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Water on the object DSM: wall time of the steps, checked against a serial run")]
struct Args {
    /// The DSM's protocol: invalidate, invalidate-rdma, update-in-place, update-diff (default:
    /// ACTIVERMA_DSM_PROTOCOL's).
    #[arg(long)]
    protocol: Option<String>,
    /// How first accesses are seen: checks or mmu (default: ACTIVERMA_DSM_ACCESS's).
    #[arg(long)]
    access: Option<String>,
    /// Molecules (the paper's 1728).
    #[arg(long, default_value_t = 1728)]
    molecules: usize,
    #[arg(long, default_value_t = 20)]
    steps: usize,
}

fn main() {
    if let Err(e) = run(&Args::parse()) {
        eprintln!("water: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let world = activerma::init_with(config_with(a.protocol.as_deref(), a.access.as_deref())?)?;
    let mut dsm = Dsm::new(&world)?;
    let p = activerma_water::Params { molecules: a.molecules, ..activerma_water::Params::paper(a.steps) };
    let got = activerma_water::run(&mut dsm, p)?;
    if world.rank() == 0 {
        let dev = activerma_water::deviation(&got.positions, &activerma_water::serial(p))?;
        let access = if dsm.page_granular() { "mmu" } else { "checks" };
        println!(
            "water: {} molecules, {} steps, {} ranks, protocol {}, access {access}: {:.3} s; {dev:.1e} of the lattice spacing from the serial run",
            p.molecules,
            p.steps,
            world.size(),
            dsm.protocol().name(),
            got.seconds
        );
        println!("rank 0's DSM: {:?}", dsm.stats());
        if dev > 1e-9 {
            return Err(format!("the positions differ from the serial run's by {dev:e}").into());
        }
    }
    drop(got);
    dsm.barrier()?;
    drop(dsm);
    world.finalize()?;
    Ok(())
}
