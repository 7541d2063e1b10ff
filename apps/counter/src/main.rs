//! `counter`: runs the access-counter variants side by side in one job and prints their rates.
//! Start it with `activerma run -n 2 -- target/release/counter` (any number of ranks).

use activerma_counter::{report, run_all, Counter, Mix, Variant};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "The Active Access access counter: every variant counts the same puts and gets, page by page")]
struct Args {
    /// Variants to run (default: all five).
    #[arg(long, value_enum, value_delimiter = ',')]
    variants: Vec<Variant>,
    /// Accesses (8-byte puts and gets) per rank.
    #[arg(long, default_value_t = 100_000)]
    accesses: usize,
    /// Share of accesses that are puts, in percent (the rest are gets).
    #[arg(long, default_value_t = 50.0)]
    puts: f64,
    /// Pages of the counted array on every rank.
    #[arg(long, default_value_t = 256)]
    pages: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("counter: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if !(0.0..=100.0).contains(&a.puts) {
        return Err("--puts is a percentage, 0 to 100".into());
    }
    let world = activerma::init()?;
    let mix = Mix { ranks: world.size(), accesses: a.accesses, puts: a.puts / 100.0, pages: a.pages, seed: a.seed };
    let workload = mix.workload(world.rank())?;
    let mut counter = Counter::new(&world, mix)?;
    let variants = if a.variants.is_empty() { Variant::ALL.to_vec() } else { a.variants.clone() };
    let out = run_all(&mut counter, &variants, &workload)?;
    if world.rank() == 0 {
        println!(
            "Access counter: {} ranks x {} accesses of 8 B ({}% puts) to {} pages per rank, network model {}",
            world.size(),
            a.accesses,
            a.puts,
            a.pages,
            world.net_model()
        );
        print!("{}", report::table(&out));
    }
    world.finalize()?;
    Ok(())
}
