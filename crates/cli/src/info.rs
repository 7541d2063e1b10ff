//! `activerma info`: the settings table with effective values, and the facts a user needs to
//! understand performance: conduit, page size, memlock limit, progress mode, registration,
//! network model, protocols. Gathered once into `Info`, then shown for people (`text`, grouped
//! by layer, 100 columns) or for tools (`--json`, one JSON document).

mod text;

use activerma_core::settings::{self, Kind, Layer, TABLE};
use activerma_transport::netmodel::NetModel;
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// Print one JSON document (settings with group, type, default, value and description, and
    /// the other facts) for tools.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Group {
    key: &'static str,
    title: &'static str,
}

#[derive(Serialize)]
struct SettingRow {
    name: &'static str,
    group: &'static str,
    #[serde(rename = "type")]
    kind: String,
    default: &'static str,
    /// The effective value: the environment's, else the default.
    value: String,
    /// Whether the value comes from the environment.
    set: bool,
    description: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Registration {
    /// None when ACTIVERMA_REGISTRATION is bad (see `error`).
    strategy: Option<&'static str>,
    /// Bytes a rank may keep pinned; None: no budget of our own, the memlock limit only.
    pin_budget: Option<u64>,
    pins_segments: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Counters each rank keeps (printed by `activerma bench`).
    counters: Vec<&'static str>,
}

/// Whether a registration strategy is the one in force, and the counters it keeps (its settings
/// are in the table, in its own group).
#[derive(Serialize)]
struct StrategyFacts {
    active: bool,
    counters: Vec<&'static str>,
}

#[derive(Serialize)]
struct Network {
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Protocols {
    when: &'static str,
    names: &'static [&'static str],
}

/// The contiguous transfer protocols (ACTIVERMA_TRANSFER): the one in force, how `auto`
/// chooses, and the counters that say which served how many calls and bytes.
#[derive(Serialize)]
struct TransferFacts {
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<String>,
    rule: &'static [&'static str],
    counters: Vec<&'static str>,
}

#[derive(Serialize)]
struct Info {
    version: &'static str,
    groups: Vec<Group>,
    settings: Vec<SettingRow>,
    conduit: String,
    conduits_built: Vec<&'static str>,
    mpi_launcher_detected: bool,
    page_size: usize,
    /// Bytes; None: unlimited.
    memlock_limit: Option<u64>,
    /// Root ignores the memlock limit.
    memlock_enforced: bool,
    progress: String,
    registration: Registration,
    part: StrategyFacts,
    firehose: StrategyFacts,
    network: Network,
    protocols: &'static [Protocols],
    transfer: TransferFacts,
}

/// Which protocol moves a put/get/atomic, by where the target is and what memory it reaches.
static PROTOCOLS: &[Protocols] = &[
    Protocols { when: "same host, segment", names: &["put_direct", "get_direct", "atomic_direct"] },
    Protocols { when: "same host, private memory", names: &["put_cma", "get_cma", "atomic_am"] },
    Protocols { when: "other host, segment", names: &["put_rma", "get_rma", "atomic_rma"] },
    Protocols { when: "other host, private memory", names: &["put_am", "get_am", "atomic_am"] },
    Protocols {
        when: "other host, private memory, from ACTIVERMA_RMA_RENDEZVOUS_MIN on",
        names: &["put_rma_rendezvous", "get_rma_rendezvous"],
    },
    Protocols {
        when: "other host, private memory, under firehose and pin-all (a key per exposure)",
        names: &["put_keyed_rma", "get_keyed_rma"],
    },
    Protocols { when: "registration miss (same host, private memory) under bounce", names: &["put_bounce", "get_bounce"] },
    Protocols { when: "registration miss under rendezvous and rendezvous-unpin", names: &["put_rendezvous", "get_rendezvous"] },
    Protocols { when: "registration miss under part", names: &["put_part", "get_part"] },
    Protocols { when: "registration miss under firehose", names: &["put_firehose", "get_firehose"] },
];

/// How ACTIVERMA_TRANSFER=auto picks (crates/proto/src/transfer.rs).
static TRANSFER_RULE: &[&str] = &[
    "target memory registered (segment; exposed memory the strategy registered): zero-copy",
    "through the target's CPU (bounce; other host's private memory): buffered, pipelined from ACTIVERMA_PIPELINE_MIN",
    "target registers for the call (rendezvous, PART): dynamic registration",
];

fn counter_names(snapshot: Vec<(&'static str, u64)>) -> Vec<&'static str> {
    snapshot.into_iter().map(|(k, _)| k).collect()
}

/// The error of a setting set in the environment, if its value is bad.
fn setting_error(name: &'static str, kind: Kind) -> Option<String> {
    let check = match kind {
        Kind::Bool => settings::get_bool(name).map(drop),
        Kind::Int | Kind::Size => settings::get_u64(name).map(drop),
        Kind::Float => settings::get_f64(name).map(drop),
        Kind::Enum(_) => settings::get_enum(name).map(drop),
        Kind::Path => Ok(()),
    };
    check.err().map(|e| e.to_string())
}

fn gather() -> Info {
    let settings = TABLE
        .iter()
        .map(|s| {
            let set = std::env::var(s.name).is_ok_and(|v| !v.trim().is_empty());
            SettingRow {
                name: s.name,
                group: s.layer.key(),
                kind: s.kind.name(),
                default: s.default,
                value: settings::raw(s.name),
                set,
                description: s.description,
                error: if set { setting_error(s.name, s.kind) } else { None },
            }
        })
        .collect();
    let strategy = settings::get_enum(settings::REGISTRATION).and_then(activerma::Strategy::parse);
    let registration = Registration {
        strategy: strategy.as_ref().ok().map(|s| s.name()),
        pin_budget: settings::get_u64(settings::PIN_LIMIT).ok().filter(|&b| b > 0),
        pins_segments: strategy.as_ref().is_ok_and(|s| s.pins_segments()),
        error: strategy.as_ref().err().map(|e| e.to_string()),
        counters: counter_names(activerma::RegistrationStats::default().snapshot()),
    };
    let part = StrategyFacts {
        active: strategy.as_ref().is_ok_and(|&s| s == activerma::Strategy::Part),
        counters: counter_names(activerma::PartStats::default().snapshot()),
    };
    let firehose = StrategyFacts {
        active: strategy.as_ref().is_ok_and(|&s| s == activerma::Strategy::Firehose),
        counters: counter_names(activerma::FirehoseStats::default().snapshot()),
    };
    // The model from the network's own settings, so that a bad value elsewhere is not its error.
    let network_config = (|| {
        let mut c = activerma::Config::defaults();
        for s in settings::TABLE.iter().filter(|s| s.layer == Layer::Network && settings::is_set(s.name)) {
            c.set(s.name, &settings::raw(s.name))?;
        }
        Ok(c)
    })();
    let network = match network_config.and_then(|c| NetModel::from_config(&c)) {
        Ok(n) => Network { description: Some(n.describe()), error: None },
        Err(e) => Network { description: None, error: Some(e.to_string()) },
    };
    Info {
        version: env!("CARGO_PKG_VERSION"),
        groups: Layer::ALL.iter().map(|l| Group { key: l.key(), title: l.title() }).collect(),
        settings,
        conduit: settings::raw(settings::CONDUIT),
        conduits_built: if cfg!(feature = "mpi") { vec!["smp", "mpi"] } else { vec!["smp"] },
        mpi_launcher_detected: activerma_transport::started_by_mpi_launcher(),
        page_size: activerma_core::page::page_size(),
        memlock_limit: activerma_core::page::memlock_limit(),
        // SAFETY: geteuid has no preconditions.
        memlock_enforced: unsafe { libc::geteuid() } != 0,
        progress: settings::raw(settings::PROGRESS),
        registration,
        part,
        firehose,
        network,
        protocols: PROTOCOLS,
        transfer: TransferFacts {
            protocol: settings::get_enum(settings::TRANSFER).ok().map(str::to_string),
            rule: TRANSFER_RULE,
            counters: counter_names(activerma::Counters::default().snapshot()).into_iter().filter(|n| n.starts_with("transfer_")).collect(),
        },
    }
}

/// Prints the information; exit status 1 if a setting (or the registration strategy) is bad.
pub fn print(args: InfoArgs) -> i32 {
    let info = gather();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info).expect("info serializes"));
    } else {
        print!("{}", text::render(&info));
    }
    let bad = info.settings.iter().filter(|s| s.error.is_some()).count() + usize::from(info.registration.error.is_some());
    i32::from(bad > 0)
}
