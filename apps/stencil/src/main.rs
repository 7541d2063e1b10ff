//! `stencil`: the halo-exchange Jacobi stencil. Start it with
//! `activerma run -n 2 -- target/release/stencil` (with ACTIVERMA_REGISTRATION=part to run on
//! unpinned memory); `activerma bench stencil` compares PART with pre-touched buffers.

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Jacobi stencil with halo exchange into exposed private memory")]
struct Args {
    /// Grid size (n x n doubles; n divisible by the ranks).
    #[arg(long, default_value_t = 2048)]
    n: usize,
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Touch every page of the buffers before exposing them.
    #[arg(long)]
    pretouch: bool,
    /// Ask for 4 KiB pages (no transparent huge pages) for the buffers.
    #[arg(long)]
    no_huge_pages: bool,
}

fn main() {
    let a = Args::parse();
    let r = (|| -> activerma::Result<()> {
        let world = activerma::init()?;
        let o = activerma_stencil::run(&world, a.n, a.iters, a.pretouch, !a.no_huge_pages)?;
        if world.rank() == 0 {
            println!(
                "stencil {}x{}, {} iterations, {} ranks, buffers {}: {:.3} s, checksum {:.6}",
                a.n,
                a.n,
                a.iters,
                world.size(),
                if a.pretouch { "pre-touched" } else { "untouched" },
                o.seconds,
                o.checksum
            );
        }
        world.finalize()
    })();
    if let Err(e) = r {
        eprintln!("stencil: {e}");
        std::process::exit(1);
    }
}
