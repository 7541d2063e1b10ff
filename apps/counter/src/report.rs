//! The table every run prints: rates per variant and their ratio to AA-Poll.

use crate::run::Outcome;
use crate::variant::Variant;
use std::fmt::Write;

pub fn table(outcomes: &[Outcome]) -> String {
    let base = outcomes.iter().find(|o| o.variant == Variant::AaPoll).map(|o| o.accesses_per_s);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>14} {:>12} {:>14} {:>14} {:>13}",
        "variant", "accesses/s", "AA-Poll/this", "puts counted", "gets counted", "IOTLB misses"
    );
    for o in outcomes {
        let ratio = base.map_or("-".to_string(), |b| format!("{:.2}", b / o.accesses_per_s));
        let (puts, gets) = match &o.tallies {
            Some(t) => (t.iter().map(|t| t.puts).sum::<u64>().to_string(), t.iter().map(|t| t.gets).sum::<u64>().to_string()),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = writeln!(
            s,
            "{:<10} {:>14.0} {:>12} {:>14} {:>14} {:>13}",
            o.variant.name(),
            o.accesses_per_s,
            ratio,
            puts,
            gets,
            o.iotlb_misses
        );
    }
    let counting: Vec<&Outcome> = outcomes.iter().filter(|o| o.tallies.is_some()).collect();
    match counting.first() {
        Some(o) => {
            let t = o.tallies.as_ref().unwrap();
            let _ = writeln!(
                s,
                "all {} counting variants agree: {} puts and {} gets counted over {} pages x {} ranks, page by page as the origins sent them",
                counting.len(),
                t.iter().map(|t| t.puts).sum::<u64>(),
                t.iter().map(|t| t.gets).sum::<u64>(),
                o.pages,
                o.ranks
            );
        }
        None => {
            let _ = writeln!(s, "no counting variant ran");
        }
    }
    if let Some(o) = outcomes.first() {
        let _ = writeln!(
            s,
            "data intact in every variant: every get and every word of the arrays held its initial value or one a put to it wrote ({} gets and {} overwritten words checked in {})",
            o.reads_checked,
            o.words_written,
            o.variant.name()
        );
    }
    s
}
