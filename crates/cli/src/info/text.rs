//! `activerma info` for people: settings grouped by layer (as Sandia OpenSHMEM's `oshmem_info`
//! groups its variables), each with its value on one line and its type, default and
//! description wrapped below, then the facts; nothing wider than `WIDTH` columns.

use super::Info;
use activerma_core::settings::Layer;
use std::fmt::Write;

/// Columns: a terminal that is not wider than usual still shows every line whole.
const WIDTH: usize = 100;
/// Where a setting's value starts (the longest name is 31 columns).
const VALUE_COLUMN: usize = 35;
/// Indent of a setting's description.
const DESCRIPTION_INDENT: &str = "      ";
/// Where a fact's value starts.
const FACT_COLUMN: usize = 19;

/// Appends `text` wrapped to `WIDTH`, its first line starting with `first`, the others indented
/// by `rest`.
fn wrap(out: &mut String, first: &str, rest: &str, text: &str) {
    // Break at spaces only: "direct-mapped" or "rendezvous-unpin" split at the hyphen reads as two words.
    let options =
        textwrap::Options::new(WIDTH).initial_indent(first).subsequent_indent(rest).word_splitter(textwrap::WordSplitter::NoHyphenation);
    for line in textwrap::wrap(text, options) {
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// A fact: `key` in its column, `value` wrapped beside it.
fn fact(out: &mut String, key: &str, value: &str) {
    let first = format!("  {key:<width$}", width = FACT_COLUMN - 2);
    wrap(out, &first, &" ".repeat(FACT_COLUMN), value);
}

pub fn render(info: &Info) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "activerma {}", info.version);
    out.push('\n');
    wrap(
        &mut out,
        "",
        "",
        "Settings (environment variables), by layer: the effective value, \"(set)\" when it comes from the environment; \
         below it the type, the default and what the setting does.",
    );
    for layer in Layer::ALL {
        out.push('\n');
        let _ = writeln!(out, "{}", layer.title());
        for s in info.settings.iter().filter(|s| s.group == layer.key()) {
            let first = format!("  {:<width$}", s.name, width = VALUE_COLUMN - 2);
            let shown = |v: &str| if v.is_empty() { "(none)".to_string() } else { v.to_string() };
            let value = if s.set { format!("{} (set)", s.value) } else { shown(&s.value) };
            wrap(&mut out, &first, &" ".repeat(VALUE_COLUMN), &value);
            let about = format!("[{}; default {}] {}", s.kind, shown(s.default), s.description);
            wrap(&mut out, DESCRIPTION_INDENT, DESCRIPTION_INDENT, &about);
            if let Some(e) = &s.error {
                wrap(&mut out, &format!("{DESCRIPTION_INDENT}error: "), DESCRIPTION_INDENT, e);
            }
        }
    }

    out.push('\n');
    out.push_str("this host and job\n");
    fact(&mut out, "conduit", &info.conduit);
    let mpi_hint = if info.conduits_built.contains(&"mpi") { "" } else { " (mpi: build with scripts/build-mpi.sh openmpi|mpich)" };
    fact(&mut out, "conduits built", &format!("{}{mpi_hint}", info.conduits_built.join(", ")));
    fact(&mut out, "MPI launcher", if info.mpi_launcher_detected { "detected" } else { "not detected" });
    fact(&mut out, "page size", &format!("{} B", info.page_size));
    let memlock = info.memlock_limit.map_or("unlimited".to_string(), |b| format!("{} KiB", b / 1024));
    fact(&mut out, "memlock limit", &format!("{memlock}{}", if info.memlock_enforced { "" } else { " (root: not enforced)" }));
    fact(&mut out, "progress mode", &info.progress);
    let r = &info.registration;
    match (r.strategy, &r.error) {
        (Some(name), _) => {
            let budget = r.pin_budget.map_or("memlock limit only".to_string(), |b| format!("{} KiB", b / 1024));
            fact(
                &mut out,
                "registration",
                &format!(
                    "{name}; pin budget: {budget}; governs exposed private memory only, segments are registered at allocation{}",
                    if r.pins_segments { " and pinned" } else { "" }
                ),
            );
        }
        (None, e) => fact(&mut out, "registration", &format!("error: {}", e.as_deref().unwrap_or("unknown"))),
    }
    fact(&mut out, "", &format!("counters per rank (printed by `activerma bench`): {}", r.counters.join(" ")));
    for (key, under, strategy) in [("PART", "under part", &info.part), ("firehose", "under firehose, prefixed firehose_", &info.firehose)] {
        let in_force = if strategy.active { ", in force" } else { "" };
        let counters = strategy.counters.join(" ");
        fact(&mut out, key, &format!("counters per rank (printed by `activerma bench` {under}{in_force}): {counters}"));
    }
    match (&info.network.description, &info.network.error) {
        (Some(d), _) => fact(&mut out, "modelled network", d),
        (None, e) => fact(&mut out, "modelled network", &format!("error: {}", e.as_deref().unwrap_or("unknown"))),
    }
    for (i, p) in info.protocols.iter().enumerate() {
        fact(&mut out, if i == 0 { "protocols" } else { "" }, &format!("{}: {}", p.when, p.names.join(" ")));
    }
    let t = &info.transfer;
    fact(
        &mut out,
        "transfers",
        &format!("contiguous put_by/get_by and ARMCI Put/Get: {}", t.protocol.as_deref().unwrap_or("(bad setting)")),
    );
    for rule in t.rule {
        fact(&mut out, "", &format!("auto, {rule}"));
    }
    fact(&mut out, "", &format!("counters per rank (ACTIVERMA_COUNTERS=1 prints them at finalize): {}", t.counters.join(" ")));
    out
}
