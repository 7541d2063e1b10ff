//! `activerma`: the launcher (`run`), the settings table (`info`), the benchmarks (`bench`)
//! and the report that reproduces the papers' figures (`report`). Each lives in its own crate;
//! this is the command layer only.

mod info;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "activerma", version, about = "one-sided communication runtime: launcher, settings, benchmarks and the papers' report")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start N ranks of PROGRAM on this host (like mpirun).
    Run(activerma_launcher::RunArgs),
    /// Print the settings by layer, conduit, page size, memlock limit, progress mode, registration and network model.
    Info(info::InfoArgs),
    /// OSU-style benchmarks (2 ranks) with ratios to physical limits measured in the same run.
    Bench(activerma_bench::BenchArgs),
    /// Run every benchmark that stands for a paper figure or table and write a report folder:
    /// rows as JSON lines, one plot per figure (SVG and PNG), index.html and summary.md.
    Report(activerma_bench::ReportArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(args) => activerma_launcher::run(args),
        Cmd::Info(args) => info::print(args),
        Cmd::Bench(args) => activerma_bench::main(args),
        Cmd::Report(args) => activerma_bench::report_main(args),
    };
    std::process::exit(code);
}
