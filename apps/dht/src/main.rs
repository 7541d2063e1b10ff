//! `dht`: runs the hash-table variants side by side in one job and prints their rates.
//! Start it with `activerma run -n 2 -- target/release/dht` (any number of ranks).

use activerma_dht::{report, run_all, Dht, Layout, Mix, Variant};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "The Active Access distributed hash table: every variant on the same inserts, deletes and lookups")]
struct Args {
    /// Variants to run (default: all eight).
    #[arg(long, value_enum, value_delimiter = ',')]
    variants: Vec<Variant>,
    /// Inserts per rank.
    #[arg(long, default_value_t = 100_000)]
    inserts: usize,
    /// Share of inserts that collide, in percent.
    #[arg(long, default_value_t = 5.0)]
    collisions: f64,
    /// Busy computation after every insert, in ns.
    #[arg(long, default_value_t = 0)]
    comp_ns: u64,
    /// Table cells per volume, as a power of two.
    #[arg(long, default_value_t = 18)]
    table_log2: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Zipf exponent of the table pages' popularity (0 = uniform).
    #[arg(long, default_value_t = 0.0)]
    skew: f64,
    /// Rounds over all variants; rates are the medians.
    #[arg(long, default_value_t = 3)]
    reps: usize,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("dht: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if !(0.0..=100.0).contains(&a.collisions) {
        return Err("--collisions is a percentage, 0 to 100".into());
    }
    let world = activerma::init()?;
    let mix = Mix {
        ranks: world.size(),
        inserts: a.inserts,
        collisions: a.collisions / 100.0,
        table: 1 << a.table_log2,
        seed: a.seed,
        delete_every: 8,
        skew: a.skew,
    };
    let workload = mix.workload(world.rank())?;
    let mut dht = Dht::new(&world, Layout::new(mix.table, mix.heap_cells()))?;
    let variants = if a.variants.is_empty() { Variant::ALL.to_vec() } else { a.variants.clone() };
    let out = run_all(&mut dht, &variants, &workload, a.comp_ns, a.reps)?;
    if world.rank() == 0 {
        println!(
            "DHT: {} ranks x {} inserts, {}% collisions, {} ns computation per insert, network model {}",
            world.size(),
            a.inserts,
            a.collisions,
            a.comp_ns,
            world.net_model()
        );
        print!("{}", report::table(&out));
    }
    world.finalize()?;
    Ok(())
}
