//! The table every run prints: rates per variant and their ratio to AA-Poll.

use crate::run::Outcome;
use crate::variant::Variant;
use std::fmt::Write;

pub fn table(outcomes: &[Outcome]) -> String {
    let base = outcomes.iter().find(|o| o.variant == Variant::AaPoll).map(|o| o.inserts_per_s);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>14} {:>14} {:>12} {:>8} {:>13}",
        "variant", "inserts/s", "deletes/s", "AA-Poll/this", "R_comp", "IOTLB misses"
    );
    for o in outcomes {
        let ratio = base.map_or("-".to_string(), |b| format!("{:.2}", b / o.inserts_per_s));
        let _ = writeln!(
            s,
            "{:<10} {:>14.0} {:>14.0} {:>12} {:>7.0}% {:>13}",
            o.variant.name(),
            o.inserts_per_s,
            o.deletes_per_s,
            ratio,
            o.comp_ratio * 100.0,
            o.iotlb_misses
        );
    }
    if let Some(o) = outcomes.first() {
        let keys: u64 = o.contents.iter().map(|c| c.keys).sum();
        let _ = writeln!(s, "all {} variants end with the same contents: {keys} keys in {} volumes", outcomes.len(), o.ranks);
    }
    s
}
