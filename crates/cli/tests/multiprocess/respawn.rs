//! Respawn through the launcher (`activerma run --respawn N`): rank 1 dies and comes back
//! under every progress mode, on one host and across emulated hosts, under the registration
//! strategies that change how peers reach a segment; a budget of N replacements is kept; and
//! without --respawn a death still ends the job.

use crate::driver::{launch, show, Job, Tally};

/// A run: ranks, the --respawn budget, settings.
type Run<'a> = (u32, &'a str, Vec<(&'a str, &'a str)>);

pub fn checks(t: &mut Tally, filter: Option<&str>) {
    let mut runs: Vec<Run> = Vec::new();
    for progress in ["app", "thread", "wake"] {
        for remote in ["0", "1"] {
            for ranks in [2, 3] {
                runs.push((ranks, "1", vec![("ACTIVERMA_PROGRESS", progress), ("ACTIVERMA_SMP_EMULATE_REMOTE", remote)]));
            }
        }
    }
    for strategy in ["pin-all", "bounce", "firehose", "part"] {
        runs.push((3, "1", vec![("ACTIVERMA_REGISTRATION", strategy), ("ACTIVERMA_SMP_EMULATE_REMOTE", "1")]));
    }
    runs.push((3, "1", vec![("ACTIVERMA_ATOMICS", "target")]));
    // The replacement dies too, before it rejoins: a second one takes over.
    runs.push((3, "2", vec![("RESPAWN_DEATHS", "2")]));
    for (ranks, respawn, env) in runs {
        let name = format!(
            "respawn_basic ({ranks} ranks, --respawn {respawn}{})",
            env.iter().map(|(k, v)| format!(", {k}={v}")).collect::<String>()
        );
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let deaths = env.iter().find(|(k, _)| *k == "RESPAWN_DEATHS").map_or(1, |(_, v)| v.parse::<u32>().unwrap());
        let job = Job { case: "respawn_basic", ranks, env: env.clone() };
        let (out, took) = launch(&job, &["--respawn", respawn]);
        let err = String::from_utf8_lossy(&out.stderr);
        let said = (1..=deaths)
            .all(|k| err.contains(&format!("rank 1 was killed by signal 9 (Killed); starting its replacement (incarnation {k}")));
        // Only the victim was replaced (a survivor that failed would have been too).
        let said = said && err.matches("starting its replacement").count() == deaths as usize;
        t.check(
            format!("{name}: survivors see RankFailed, the replacement rejoins [{:.1} s]", took.as_secs_f64()),
            out.status.success() && said,
            || show(&out),
        );
    }
    let name = "respawn_basic (3 ranks): a budget of one replacement, two deaths";
    if filter.is_none_or(|f| name.contains(f)) {
        let job = Job { case: "respawn_basic", ranks: 3, env: vec![("RESPAWN_DEATHS", "2")] };
        let (out, _) = launch(&job, &["--respawn", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = out.status.code() == Some(137) && err.contains("rank 1 was killed by signal 9 (Killed); stopping the other ranks");
        t.check(name.into(), ok, || show(&out));
    }
    let name = "respawn_basic (2 ranks): without --respawn a death ends the job";
    if filter.is_none_or(|f| name.contains(f)) {
        let job = Job { case: "respawn_basic", ranks: 2, env: vec![] };
        let (out, _) = launch(&job, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = out.status.code() == Some(137) && err.contains("rank 1 was killed by signal 9 (Killed); stopping the other ranks");
        t.check(name.into(), ok, || show(&out));
    }
}

/// The fault-tolerant sort: for every logging design, a failure-free run and a run whose rank
/// 1 dies in the middle of the exchange (after a seeded number of gets) and is replaced; every
/// rank's output must be the same byte for byte (CRC-32 and count), and the replacement must
/// have replayed exactly the gets it had made (none without logs: no-ft fetches them again).
/// SORT_SEEDS (default 2) sets how many kill points each configuration tries.
pub fn ft_sort_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds: u64 = std::env::var("SORT_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    for variant in ["no-ft", "aa", "rma", "am"] {
        for (ranks, remote) in [(2, "0"), (3, "0"), (3, "1")] {
            for seed in 1..=seeds {
                // Rank 1 makes about 128 (n-1)/n gets (2^16 keys of 8 bytes in 4 KiB gets, its
                // bucket from the n-1 others); it dies within the first 80 % of them.
                let kill_after = 1 + (seed * 37 + ranks as u64 * 11) % (128 * (ranks as u64 - 1) / ranks as u64 * 4 / 5);
                let name = format!("ft_sort ({ranks} ranks, {variant}, ACTIVERMA_SMP_EMULATE_REMOTE={remote}, seed {seed}: rank 1 dies after {kill_after} gets)");
                if filter.is_some_and(|f| !name.contains(f)) {
                    continue;
                }
                let dir = tempfile::tempdir().expect("a temporary directory");
                let run = |tag: &str, kill: Option<String>| {
                    let out = dir.path().join(format!("{tag}.out"));
                    let store = dir.path().join(tag);
                    let seed_text = seed.to_string();
                    let mut env = vec![
                        ("SORT_VARIANT", variant.to_string()),
                        ("SORT_SEED", seed_text),
                        ("SORT_DIR", store.to_string_lossy().into_owned()),
                        ("SORT_OUT", out.to_string_lossy().into_owned()),
                        ("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string()),
                    ];
                    env.extend(kill.map(|k| ("SORT_KILL", k)));
                    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    let job = Job { case: "ft_sort", ranks, env: env_refs };
                    let (o, took) = launch(&job, &["--respawn", "1"]);
                    let mut lines: Vec<String> = std::fs::read_to_string(&out).unwrap_or_default().lines().map(String::from).collect();
                    lines.sort();
                    (o, took, lines)
                };
                let (clean, _, want) = run("clean", None);
                let (killed, took, got) = run("killed", Some(format!("1:{kill_after}")));
                // `rank crc keys replayed incarnation`: the same crc and keys per rank.
                let fields = |l: &String| l.split(' ').map(String::from).collect::<Vec<String>>();
                let same = want.len() == ranks as usize
                    && got.len() == ranks as usize
                    && want.iter().zip(&got).all(|(a, b)| fields(a)[..3] == fields(b)[..3]);
                let replayed_ok = got.iter().map(fields).all(|f| {
                    let (rank, replayed, inc) = (&f[0], f[3].parse::<u64>().unwrap_or(u64::MAX), &f[4]);
                    match (rank.as_str(), variant) {
                        ("1", "no-ft") => inc == "1" && replayed == 0,
                        ("1", _) => inc == "1" && replayed == kill_after,
                        _ => inc == "0" && replayed == 0,
                    }
                });
                let err = String::from_utf8_lossy(&killed.stderr);
                let died = err.contains("rank 1 was killed by signal 9 (Killed); starting its replacement (incarnation 1");
                t.check(
                    format!("{name}: output identical, gets replayed [{:.1} s]", took.as_secs_f64()),
                    clean.status.success() && killed.status.success() && died && same && replayed_ok,
                    || format!("failure-free run:\n{}\n{want:?}\nrun with a death:\n{}\n{got:?}", show(&clean), show(&killed)),
                );
            }
        }
    }
}
