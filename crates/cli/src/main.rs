//! `activerma`: the launcher (`run`), the settings table (`info`) and the benchmarks (`bench`).

mod bench;
mod info;
mod launcher;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "activerma", version, about = "one-sided communication runtime: launcher, settings and benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start N ranks of PROGRAM on this host (like mpirun).
    Run(launcher::RunArgs),
    /// Print the settings by layer, conduit, page size, memlock limit, progress mode, registration and network model.
    Info(info::InfoArgs),
    /// OSU-style benchmarks (2 ranks) with ratios to physical limits measured in the same run.
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(args) => launcher::run(args),
        Cmd::Info(args) => info::print(args),
        Cmd::Bench(args) => bench::main(args),
    };
    std::process::exit(code);
}
