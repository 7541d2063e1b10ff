//! Multi-process tests through the launcher. Started by `cargo test`, this binary is the
//! driver: it runs `activerma run -n N -- <itself> <case>` for every case and rank count and
//! checks the outcome. Started by the launcher (ACTIVERMA_RANK set), it is a rank running one
//! case. Prints `multiprocess: N passed, M failed` and fails if any case failed.

mod cases;
mod command_line;
mod driver;
mod forwarding;
mod hang_stacks;
mod report;
mod respawn;
mod restart;

fn main() {
    if std::env::var("ACTIVERMA_RANK").is_ok() || std::env::args().nth(1).as_deref() == Some("--rank") {
        let case = std::env::args().skip(1).find(|a| a != "--rank").expect("case name");
        std::process::exit(cases::run(&case));
    }
    std::process::exit(driver::main());
}
