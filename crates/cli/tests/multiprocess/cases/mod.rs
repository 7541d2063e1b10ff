//! The rank side: each case is a function run by every rank of a job.

mod active_access;
mod am;
mod apps;
mod checkpoint;
mod config;
mod dht_replay;
mod dsm;
mod faults;
mod firehose;
mod ft_sort;
mod keyed_rma;
mod landing;
mod nodes;
mod noncontig;
pub mod output;
mod part;
mod randomized;
mod registration;
mod replay;
mod respawn;
mod rma;
mod transfer;

use activerma::{Result, World};

pub fn run(case: &str) -> i32 {
    let r = match case {
        "put_get_segment" => rma::put_get_segment(),
        "nonblocking_and_flush" => rma::nonblocking_and_flush(),
        "private_memory" => rma::private_memory(),
        "private_large_transfers" => rma::private_large_transfers(),
        "atomics" => rma::atomics(),
        "passive_target_spins" => rma::passive_target_spins(),
        "active_messages" => am::active_messages(),
        "small_queues" => am::active_messages(),
        "progress_without_target_calls" => am::progress_without_target_calls(),
        "randomized" => randomized::run(),
        "lists_of_pieces" => noncontig::lists_of_pieces(),
        "nb_strided_by_target" => noncontig::nb_strided_by_target(),
        "transfer_protocols" => transfer::transfer_protocols(),
        "landing_zone" => landing::landing_zone(),
        "settings_without_environment" => config::settings_without_environment(),
        "bad_input" => faults::bad_input(),
        "modelled_network" => faults::modelled_network(),
        "peer_exits_early" => faults::peer_exits_early(),
        "rank_crashes" => faults::rank_crashes(),
        "rank_fails" => faults::rank_fails(),
        "sleep_forever" => faults::sleep_forever(),
        "hello" => faults::hello(),
        "echo_args" => output::echo_args(),
        "long_lines" => output::long_lines(),
        "same_stderr" => output::same_stderr(),
        "no_final_newline" => output::no_final_newline(),
        "binary_out" => output::binary_out(),
        "terminal_out" => output::terminal_out(),
        "aa_bit_combinations" => active_access::bit_combinations(),
        "aa_many_origins_tiny_log" => active_access::many_origins_tiny_log(),
        "aa_bits_change_under_load" => active_access::bits_change_under_load(),
        "aa_active_flush_orders" => active_access::active_flush_orders(),
        "aa_handler_replies" => active_access::handler_replies(),
        "single_rank_job" => faults::single_rank_job(),
        "dht_variants_agree" => apps::dht_variants_agree(),
        "counter_variants_agree" => apps::counter_variants_agree(),
        "stencil_untouched_equals_pretouched" => apps::stencil_untouched_equals_pretouched(),
        "reexpose_no_stale" => registration::reexpose_no_stale(),
        "memlock_exhaustion" => registration::memlock_exhaustion(),
        "firehose_bound_holds" => firehose::bound_holds(),
        "keyed_rma_across_hosts" => keyed_rma::across_hosts(),
        "part_faults_counted" => part::faults_counted(),
        "part_modelled_link" => part::modelled_link(),
        "checkpoint_restart" => checkpoint::checkpoint_restart(),
        "checkpoint_retry" => checkpoint::checkpoint_retry(),
        "checkpoint_with_app_marks" => checkpoint::checkpoint_with_app_marks(),
        "respawn_basic" => respawn::respawn_basic(),
        "ft_sort" => ft_sort::ft_sort(),
        "replay_gets" => replay::replay_gets(),
        "trim_rank_dies" => replay::trim_rank_dies(),
        "dht_replay" => dht_replay::dht_replay(),
        "dsm_contract" => dsm::dsm_contract(),
        "dsm_apps" => dsm::dsm_apps(),
        "dsm_lock_holder_dies" => dsm::dsm_lock_holder_dies(),
        "dsm_lock_handover" => dsm::dsm_lock_handover(),
        "node_paths" => nodes::node_paths(),
        "hint_range_taken" => nodes::hint_range_taken(),
        other => {
            eprintln!("unknown case {other}");
            return 2;
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("case {case} failed: {e}");
            1
        }
    }
}

/// The byte rank `src` writes at `offset` of region `region` (a pattern nobody else produces).
pub fn pattern(src: usize, region: usize, offset: usize) -> u8 {
    (src.wrapping_mul(131) ^ region.wrapping_mul(29) ^ offset.wrapping_mul(7) ^ (offset >> 8)) as u8
}

/// Whether `target` runs on this rank's host (node): then it is reached with the CPU, else
/// through the network (the mpi conduit across hosts, or the smp conduit emulating hosts).
pub fn same_host(w: &World, target: usize) -> bool {
    w.node_of(target).unwrap() == w.node_of(w.rank()).unwrap()
}

/// Whether some rank of the job runs on another host than this one.
pub fn spans_hosts(w: &World) -> bool {
    (0..w.size()).any(|r| !same_host(w, r))
}

/// The protocol expected towards `target`: the on-host one, or the cross-host one.
pub fn expect_protocol(w: &World, target: usize, on_host: &'static str, cross_host: &'static str) -> &'static str {
    if same_host(w, target) {
        on_host
    } else {
        cross_host
    }
}

/// The protocols a put/get to private memory of another rank on this host may take, by the
/// job's registration strategy, once this origin has accessed the range itself: a registration
/// hit (cma), the bounce path, or under rendezvous-unpin either (another origin's registration
/// may still hold the pages).
pub fn private_protocols(w: &World, target: usize, op: &str) -> Vec<String> {
    let strategy = std::env::var("ACTIVERMA_REGISTRATION").unwrap_or_default();
    if !same_host(w, target) {
        // Firehose and pin-all between hosts: a key per exposure, then the one-sided engine.
        return vec![if ["firehose", "pin-all"].contains(&strategy.as_str()) { format!("{op}_keyed_rma") } else { format!("{op}_am") }];
    }
    match strategy.as_str() {
        "bounce" => vec![format!("{op}_bounce")],
        "part" => vec![format!("{op}_part")],
        "rendezvous-unpin" => vec![format!("{op}_rendezvous"), format!("{op}_cma")],
        // Its firehose may have been moved away meanwhile (and the bucket evicted past MAXVICTIM).
        "firehose" => vec![format!("{op}_cma"), format!("{op}_firehose")],
        _ => vec![format!("{op}_cma")],
    }
}

/// Shares one u64 per rank (e.g. an address) with every rank.
/// The memory a rank offers the others in a transfer contract test: its exposed private
/// buffer (read-write), a read-only exposure, a segment of `seg_len` bytes, and every rank's
/// addresses of the first two.
pub struct Offered<'a> {
    pub exposed: activerma::Exposed<'a>,
    pub ro: activerma::Exposed<'a>,
    pub seg: activerma::Segment,
    pub priv_addr: Vec<u64>,
    pub ro_addr: Vec<u64>,
}

/// Exposes `private` and `read_only`, allocates the segment (collective), shares the addresses.
pub fn offer<'a>(w: &World, private: &'a mut [u8], read_only: &'a [u8], seg_len: usize) -> Result<Offered<'a>> {
    let exposed = w.expose(private, activerma::Prot::ReadWrite)?;
    let ro = w.expose_read_only(read_only)?;
    let seg = w.alloc_segment(seg_len)?;
    let priv_addr = share_u64(w, exposed.addr() as u64)?;
    let ro_addr = share_u64(w, ro.addr() as u64)?;
    Ok(Offered { exposed, ro, seg, priv_addr, ro_addr })
}

/// The value of environment variable `name`, if set and not empty (how the driver parameterizes
/// a case).
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Appends `line` to the file the environment variable `var` names, if it is set (cases that
/// report a result for the driver to compare between runs).
pub fn append_line(var: &str, line: &str) -> Result<()> {
    use std::io::Write;
    let Some(path) = std::env::var_os(var) else { return Ok(()) };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| activerma::Error::InvalidArgument(format!("{var}: {e}")))
}

pub fn share_u64(world: &World, v: u64) -> Result<Vec<u64>> {
    Ok(world.allgather(&v.to_le_bytes())?.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap())).collect())
}
