//! `activerma info`: the settings table with effective values, and the facts a user needs to
//! understand performance: conduit, page size, memlock limit, progress mode, network model.

use activerma_core::settings::{self, TABLE};
use activerma_transport::netmodel::NetModel;

pub fn print() -> i32 {
    let mut bad = 0;
    println!("activerma {}", env!("CARGO_PKG_VERSION"));
    println!();
    println!("{:<30} {:<16} {:<9} {:<9} description", "setting", "type", "default", "effective");
    for s in TABLE {
        let set = std::env::var(s.name).ok().filter(|v| !v.trim().is_empty());
        let effective = settings::raw(s.name);
        println!("{:<30} {:<16} {:<9} {:<9} {}", s.name, s.kind.name(), s.default, effective, s.description);
        if set.is_some() {
            let check = match s.kind {
                settings::Kind::Bool => settings::get_bool(s.name).map(drop),
                settings::Kind::Int | settings::Kind::Size => settings::get_u64(s.name).map(drop),
                settings::Kind::Float => settings::get_f64(s.name).map(drop),
                settings::Kind::Enum(_) => settings::get_enum(s.name).map(drop),
            };
            if let Err(e) = check {
                println!("  ^ error: {e}");
                bad += 1;
            }
        }
    }
    println!();
    let memlock = match activerma_core::page::memlock_limit() {
        None => "unlimited".to_string(),
        Some(b) => format!("{} KiB", b / 1024),
    };
    println!("conduit          {}", settings::raw(settings::CONDUIT));
    println!(
        "conduits built   smp{}",
        if cfg!(feature = "mpi") { ", mpi" } else { " (mpi: build with scripts/build-mpi.sh openmpi|mpich)" }
    );
    println!("MPI launcher     {}", if activerma_transport::started_by_mpi_launcher() { "detected" } else { "not detected" });
    println!("page size        {} B", activerma_core::page::page_size());
    println!("memlock limit    {memlock}{}", if unsafe { libc::geteuid() } == 0 { " (root: not enforced)" } else { "" });
    println!("progress mode    {}", settings::raw(settings::PROGRESS));
    match activerma::Strategy::from_settings() {
        Ok(st) => {
            let budget = settings::get_u64(settings::PIN_LIMIT).unwrap_or(0);
            let budget = if budget == 0 { "memlock limit only".to_string() } else { format!("{} KiB", budget / 1024) };
            println!(
                "registration     {}; pin budget: {budget}; governs exposed private memory only, segments are registered at allocation{}",
                st.name(),
                if st.pins_segments() { " and pinned" } else { "" }
            );
        }
        Err(e) => {
            println!("registration     error: {e}");
            bad += 1;
        }
    }
    let names: Vec<&str> = activerma::RegistrationStats::default().snapshot().into_iter().map(|(k, _)| k).collect();
    println!("                 counters per rank (printed by `activerma bench`): {}", names.join(" "));
    if activerma::Strategy::from_settings().is_ok_and(|s| s == activerma::Strategy::Part) {
        println!(
            "PART             block {}; page-in {}; retransmit {}; pretouch {}; injected fault probability {}",
            settings::raw(settings::PART_BLOCK),
            settings::raw(settings::PART_PAGEIN),
            settings::raw(settings::PART_RETRANSMIT),
            settings::raw(settings::PART_PRETOUCH),
            settings::raw(settings::PART_FAULT_PROB)
        );
    }
    let part: Vec<&str> = activerma::PartStats::default().snapshot().into_iter().map(|(k, _)| k).collect();
    println!("                 PART counters per rank (printed by `activerma bench` under part): {}", part.join(" "));
    if activerma::Strategy::from_settings().is_ok_and(|s| s == activerma::Strategy::Firehose) {
        println!(
            "firehose         M {}; MAXVICTIM {}; bucket {} page(s); f = M / (ranks - 1) per origin and target; pinned per rank <= M + MAXVICTIM",
            settings::raw(settings::FIREHOSE_M),
            settings::raw(settings::FIREHOSE_MAXVICTIM),
            settings::raw(settings::FIREHOSE_BUCKET)
        );
    }
    let fh: Vec<&str> = activerma::FirehoseStats::default().snapshot().into_iter().map(|(k, _)| k).collect();
    println!(
        "                 firehose counters per rank (printed by `activerma bench` under firehose, prefixed firehose_): {}",
        fh.join(" ")
    );
    match NetModel::from_settings() {
        Ok(n) => println!("modelled network {}", n.describe()),
        Err(e) => println!("modelled network error: {e}"),
    }
    println!("protocols        same host: put_direct get_direct atomic_direct (segment) · put_cma get_cma atomic_am (private memory)");
    println!("                 other host: put_rma get_rma atomic_rma (segment) · put_am get_am atomic_am (private memory; from ACTIVERMA_RMA_RENDEZVOUS_MIN on put_rma_rendezvous get_rma_rendezvous)");
    println!("                 registration miss (same host, private memory): put_bounce get_bounce (bounce) · put_rendezvous get_rendezvous (rendezvous, rendezvous-unpin) · put_part get_part (part) · put_firehose get_firehose (firehose)");
    if bad > 0 {
        1
    } else {
        0
    }
}
