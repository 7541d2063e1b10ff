//! The fault-tolerant sort (apps/sort) as a rank runs it, driven by the environment:
//! SORT_VARIANT (no-ft | aa | rma | am), SORT_KEYS (per rank), SORT_CHUNK (bytes per get),
//! SORT_SEED, SORT_DIR (the checkpoint store), SORT_KILL (`rank:gets`: that rank dies after
//! that many gets of the exchange; `rank:NNNns`: that many nanoseconds into it, at whatever
//! it is doing; `rank:Nclaims`: rma, between its N-th claim of log room and the record), SORT_OUT (a file each rank appends `rank crc keys replayed
//! incarnation` to: the driver compares runs with it).

use super::env;
use activerma::Result;
use activerma_sort::{sort, Kill, Params, Variant, When};

pub fn ft_sort() -> Result<()> {
    let w = activerma::init()?;
    let kill = env("SORT_KILL").map(|k| {
        let (rank, at) = k.split_once(':').expect("rank:gets, rank:NNNns or rank:Nclaims");
        let when = if let Some(ns) = at.strip_suffix("ns") {
            When::AfterNs(ns.parse().unwrap())
        } else if let Some(n) = at.strip_suffix("claims") {
            When::AfterClaims(n.parse().unwrap())
        } else {
            When::AfterGets(at.parse().unwrap())
        };
        Kill { rank: rank.parse().unwrap(), when }
    });
    let p = Params {
        keys_per_rank: env("SORT_KEYS").map_or(1 << 16, |v| v.parse().unwrap()),
        seed: env("SORT_SEED").map_or(1, |v| v.parse().unwrap()),
        chunk: env("SORT_CHUNK").map_or(4096, |v| v.parse().unwrap()),
        variant: Variant::parse(&env("SORT_VARIANT").unwrap_or("aa".into()))?,
        ckpt_dir: Some(env("SORT_DIR").expect("SORT_DIR").into()),
        kill,
    };
    let o = sort(&w, &p)?;
    super::append_line("SORT_OUT", &format!("{} {:08x} {} {} {}\n", w.rank(), o.crc, o.keys, o.replayed, w.incarnation()))?;
    w.finalize()
}
