//! Respawn through the launcher (`activerma run --respawn N`): rank 1 dies and comes back
//! under every progress mode, on one host and across emulated hosts, under the registration
//! strategies that change how peers reach a segment; a budget of N replacements is kept; and
//! without --respawn a death still ends the job.

use crate::driver::{launch, show, Job, Tally};
use std::process::Output;
use std::time::Duration;

/// Two runs of `case` through `activerma run --respawn 1`, each with a store and an output file
/// of its own (named by the case's `dir_var` and `out_var`): one failure-free, one with
/// `kill_var=kill`.
#[allow(clippy::too_many_arguments)] // the case, its job, and the three variables it reads
fn twin_runs(case: &str, ranks: u32, env: &[(&str, String)], dir_var: &str, out_var: &str, kill_var: &str, kill: String) -> Twins {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |tag: &str, kill: Option<&str>| {
        let out = dir.path().join(format!("{tag}.out"));
        let store = dir.path().join(tag);
        let mut all: Vec<(&str, String)> = env.to_vec();
        all.push((dir_var, store.to_string_lossy().into_owned()));
        all.push((out_var, out.to_string_lossy().into_owned()));
        all.extend(kill.map(|k| (kill_var, k.to_string())));
        let env_refs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (o, took) = launch(&Job { case, ranks, env: env_refs }, &["--respawn", "1"]);
        let mut lines: Vec<String> = std::fs::read_to_string(&out).unwrap_or_default().lines().map(String::from).collect();
        lines.sort();
        (o, took, lines)
    };
    let (clean, _, want) = run("clean", None);
    let (killed, took, got) = run("killed", Some(&kill));
    Twins { clean, killed, took, want, got }
}

/// A failure-free run and a run with a death: outcomes, the second's time, each run's output
/// lines (sorted by rank).
struct Twins {
    clean: Output,
    killed: Output,
    took: Duration,
    want: Vec<String>,
    got: Vec<String>,
}

impl Twins {
    /// Both runs succeeded, rank 1 was replaced once, and every one of the `ranks` ranks
    /// printed the same first `k` fields in both.
    fn agree(&self, ranks: u32, k: usize) -> bool {
        self.clean.status.success()
            && self.killed.status.success()
            && replaced(&self.killed)
            && self.want.len() == ranks as usize
            && self.got.len() == ranks as usize
            && self.want.iter().zip(&self.got).all(|(a, b)| fields(a)[..k] == fields(b)[..k])
    }

    /// The run with the death's output lines, split into fields.
    fn got_fields(&self) -> impl Iterator<Item = Vec<String>> + '_ {
        self.got.iter().map(|l| fields(l))
    }

    fn detail(&self) -> String {
        format!("failure-free run:\n{}\n{:?}\nrun with a death:\n{}\n{:?}", show(&self.clean), self.want, show(&self.killed), self.got)
    }
}

/// How many seeded kill points each configuration tries: `var`, 2 by default.
fn seeds(var: &str) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

/// The words of an output line.
fn fields(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}

/// Whether the launcher said it replaced rank 1 once.
fn replaced(killed: &Output) -> bool {
    replaced_rank(killed, 1)
}

fn replaced_rank(killed: &Output, rank: u32) -> bool {
    String::from_utf8_lossy(&killed.stderr)
        .contains(&format!("rank {rank} was killed by signal 9 (Killed); starting its replacement (incarnation 1"))
}

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
    let seeds = seeds("SORT_SEEDS");
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
                let env = [
                    ("SORT_VARIANT", variant.to_string()),
                    ("SORT_SEED", seed.to_string()),
                    ("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string()),
                ];
                let runs = twin_runs("ft_sort", ranks, &env, "SORT_DIR", "SORT_OUT", "SORT_KILL", format!("1:{kill_after}"));
                // `rank crc keys replayed incarnation`: the same crc and keys per rank.
                let replayed_ok = runs.got_fields().all(|f| {
                    let (rank, replayed, inc) = (&f[0], f[3].parse::<u64>().unwrap_or(u64::MAX), &f[4]);
                    match (rank.as_str(), variant) {
                        ("1", "no-ft") => inc == "1" && replayed == 0,
                        ("1", _) => inc == "1" && replayed == kill_after,
                        _ => inc == "0" && replayed == 0,
                    }
                });
                t.check(
                    format!("{name}: output identical, gets replayed [{:.1} s]", runs.took.as_secs_f64()),
                    runs.agree(ranks, 3) && replayed_ok,
                    || runs.detail(),
                );
            }
        }
    }
}

/// The rma design's hole, made on purpose: rank 1 dies right after it claimed room in a
/// target's log for its n-th logged get and before the record went in. With 3 ranks the other
/// origin's records follow the hole in that log. Readers must step over it: the replacement
/// replays exactly the n - 1 gets whose records are whole, makes the n-th again, and every
/// rank's output is the failure-free one.
pub fn ft_sort_claim_hole_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds = seeds("SORT_SEEDS");
    for (ranks, remote) in [(2, "0"), (3, "0"), (3, "1")] {
        for seed in 1..=seeds {
            let claims = 1 + (seed * 29 + ranks as u64 * 13) % (128 * (ranks as u64 - 1) / ranks as u64 * 4 / 5);
            let name = format!(
                "ft_sort ({ranks} ranks, rma, ACTIVERMA_SMP_EMULATE_REMOTE={remote}, seed {seed}: rank 1 dies between claim {claims} and its record)"
            );
            if filter.is_some_and(|f| !name.contains(f)) {
                continue;
            }
            let env = [
                ("SORT_VARIANT", "rma".to_string()),
                ("SORT_SEED", seed.to_string()),
                ("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string()),
            ];
            let runs = twin_runs("ft_sort", ranks, &env, "SORT_DIR", "SORT_OUT", "SORT_KILL", format!("1:{claims}claims"));
            let replayed_ok = runs.got_fields().all(|f| {
                let (replayed, inc) = (f[3].parse::<u64>().unwrap_or(u64::MAX), &f[4]);
                if f[0] == "1" {
                    inc == "1" && replayed == claims - 1
                } else {
                    inc == "0" && replayed == 0
                }
            });
            t.check(
                format!("{name}: output identical, {} gets replayed [{:.1} s]", claims - 1, runs.took.as_secs_f64()),
                runs.agree(ranks, 3) && replayed_ok,
                || runs.detail(),
            );
        }
    }
}

/// The sort again, rank 1 killed at a seeded moment of its exchange rather than between two
/// gets: in the middle of a get, of an append to a target's access log (a claimed entry never
/// published, which its replacement must cover or the target's log stays blocked), of an
/// active message, or between the rma design's claim of room in a target's log and its put of
/// the record (a hole of unknown length in a log others read, which readers must step over).
/// The output must still be the failure-free one.
pub fn ft_sort_random_kill_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds = seeds("SORT_SEEDS");
    for variant in ["no-ft", "aa", "rma", "am"] {
        for (ranks, remote) in [(2, "0"), (3, "0"), (3, "1")] {
            for seed in 1..=seeds {
                // 2^20 keys of 8 bytes per rank in 4 KiB gets: an exchange of about a
                // millisecond (a rank that gets to its end first dies there).
                let ns = 20_000 + (seed * 7919 + ranks as u64 * 104_729) % 300_000;
                let name = format!(
                    "ft_sort ({ranks} ranks, {variant}, ACTIVERMA_SMP_EMULATE_REMOTE={remote}: rank 1 dies {ns} ns into its exchange)"
                );
                if filter.is_some_and(|f| !name.contains(f)) {
                    continue;
                }
                let env = [
                    ("SORT_VARIANT", variant.to_string()),
                    ("SORT_SEED", seed.to_string()),
                    ("SORT_KEYS", (1 << 20).to_string()),
                    ("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string()),
                    ("ACTIVERMA_LOG_ARENA", "64M".to_string()),
                ];
                let runs = twin_runs("ft_sort", ranks, &env, "SORT_DIR", "SORT_OUT", "SORT_KILL", format!("1:{ns}ns"));
                let incarnations_ok = runs.got_fields().all(|f| f[4] == if f[0] == "1" { "1" } else { "0" });
                t.check(
                    format!("{name}: output identical [{:.1} s]", runs.took.as_secs_f64()),
                    runs.agree(ranks, 3) && incarnations_ok,
                    || runs.detail(),
                );
            }
        }
    }
}

/// Replay of a get-heavy workload whose targets rewrite their tables every step: rank 1 dies
/// in the middle of a step (seeded), is replaced, restores the checkpoint of the last fourth
/// step and replays the gets since from the logs; every rank must end with the failure-free
/// run's state and the replacement must have replayed exactly the gets it had made since the
/// checkpoint. The aa design with a log drained by progress (64 KiB, and 4 KiB: origins wait
/// for room all the time, nothing may be lost) and with a Hold log; rma; am. REPLAY_SEEDS
/// (default 2) sets how many kill points each configuration tries.
pub fn replay_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds = seeds("REPLAY_SEEDS");
    let designs: [(&str, Option<&str>); 5] = [("aa", None), ("aa", Some("4096")), ("aa-hold", None), ("rma", None), ("am", None)];
    for (variant, aa_log) in designs {
        for (ranks, remote) in [(2, "0"), (3, "0"), (3, "1")] {
            for seed in 1..=seeds {
                // Steps 1-12, a checkpoint after 0, 4, 8; the death after get g of step j.
                let j = 2 + (seed * 5 + ranks as u64) % 10;
                let g = 1 + (seed * 13 + ranks as u64 * 7) % 64;
                replay_run(t, filter, (variant, aa_log), (ranks, remote), (j, g), false);
            }
        }
    }
}

/// A death inside an append to an access log (`activerma::kill_in_log_append`): rank 1 dies
/// between claiming the entry that logs its get g of step j and publishing it, so the target's
/// log holds a hole. Its replacement must cover it before anyone waits on it for good — in a
/// lane of its own (a 64 KiB log, a Hold log) and in a lane it shares with the other origins
/// (a 4 KiB log has one lane: the live origins' claims in flight look the same) — and then
/// replay exactly the g - 1 gets of that step whose records are whole, plus the steps since
/// the checkpoint, to the failure-free state. One host: there the origin appends itself.
pub fn replay_hole_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds = seeds("REPLAY_SEEDS");
    for design in [("aa", None), ("aa", Some("4096")), ("aa-hold", None)] {
        for ranks in [2, 3] {
            for seed in 1..=seeds {
                let j = 2 + (seed * 7 + ranks as u64) % 10;
                let g = 1 + (seed * 29 + ranks as u64 * 3) % 64;
                replay_run(t, filter, design, (ranks, "0"), (j, g), true);
            }
        }
    }
}

/// One `replay_gets` pair of runs: rank 1 dies after get g of step j (or inside its log
/// append, `in_append`); the replacement must replay exactly the gets whose records are whole.
fn replay_run(
    t: &mut Tally,
    filter: Option<&str>,
    (variant, aa_log): (&str, Option<&str>),
    (ranks, remote): (u32, &str),
    (j, g): (u64, u64),
    in_append: bool,
) {
    let since = (j - 1) / 4 * 4;
    let expect = (j - 1 - since) * 64 + g - in_append as u64;
    let log = aa_log.map(|b| format!(" with a {b}-byte log")).unwrap_or_default();
    let name = if in_append {
        format!("replay_gets ({ranks} ranks, {variant}{log}: rank 1 dies inside the log append of get {g} of step {j})")
    } else {
        format!("replay_gets ({ranks} ranks, {variant}{log}, ACTIVERMA_SMP_EMULATE_REMOTE={remote}: rank 1 dies at get {g} of step {j})")
    };
    if filter.is_some_and(|f| !name.contains(f)) {
        return;
    }
    let mut env = vec![("REPLAY_VARIANT", variant.to_string()), ("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string())];
    env.extend(aa_log.map(|b| ("REPLAY_AA_LOG", b.to_string())));
    let kill = format!("1:{j}:{g}{}", if in_append { ":append" } else { "" });
    let runs = twin_runs("replay_gets", ranks, &env, "REPLAY_DIR", "REPLAY_OUT", "REPLAY_KILL", kill);
    let replayed_ok = runs.got_fields().all(|f| match f[0].as_str() {
        "1" => f[3] == "1" && f[2] == expect.to_string(),
        _ => f[3] == "0" && f[2] == "0",
    });
    t.check(
        format!("{name}: the failure-free state, {expect} gets replayed [{:.1} s]", runs.took.as_secs_f64()),
        runs.agree(ranks, 2) && replayed_ok,
        || runs.detail(),
    );
}

/// A death just before `GetLog::trim`: the survivors' trim fails with RankFailed at once (no
/// hang), they wait for the replacement, the job finishes; every design, 2 and 3 ranks.
pub fn trim_death_checks(t: &mut Tally, filter: Option<&str>) {
    for variant in ["aa", "aa-hold", "rma", "am"] {
        for ranks in [2, 3] {
            let name = format!("trim_rank_dies ({ranks} ranks, {variant}): the survivors' trim fails with RankFailed, the job goes on");
            if filter.is_some_and(|f| !name.contains(f)) {
                continue;
            }
            let job = Job { case: "trim_rank_dies", ranks, env: vec![("REPLAY_VARIANT", variant)] };
            let (out, took) = launch(&job, &["--respawn", "1"]);
            t.check(format!("{name} [{:.1} s]", took.as_secs_f64()), out.status.success() && replaced(&out), || show(&out));
        }
    }
}

/// A death inside a checkpoint of a job that goes on (case `checkpoint_retry`): rank 1 on its
/// first page of checkpoint 3 (not marked complete), or rank 0 right after marking checkpoint
/// 3 complete; the survivors retry, the job finishes, and a job restarted from the store must
/// find the last checkpoint, every byte. Every scheme, 2 and 3 ranks; across emulated hosts too.
/// A `checkpoint_retry` run: scheme, ranks, kill, ACTIVERMA_SMP_EMULATE_REMOTE, one more setting.
type RetryRun<'a> = (&'a str, u32, &'a str, &'a str, Option<(&'a str, &'a str)>);

pub fn checkpoint_retry_checks(t: &mut Tally, filter: Option<&str>) {
    let mut runs: Vec<RetryRun> = Vec::new();
    for scheme in ["incremental", "full", "trap-first-write"] {
        for ranks in [2, 3] {
            for kill in ["pages:1:3", "marker:3"] {
                runs.push((scheme, ranks, kill, "0", None));
            }
        }
    }
    for kill in ["pages:1:3", "marker:3"] {
        runs.push(("incremental", 3, kill, "1", None));
        // The tracking's log drained by other progress modes; peers reached through the
        // registration strategies that change how a segment is reached across hosts.
        for setting in [("ACTIVERMA_PROGRESS", "thread"), ("ACTIVERMA_PROGRESS", "wake")] {
            runs.push(("incremental", 3, kill, "0", Some(setting)));
        }
        for strategy in ["pin-all", "bounce", "firehose", "part"] {
            runs.push(("trap-first-write", 3, kill, "1", Some(("ACTIVERMA_REGISTRATION", strategy))));
        }
    }
    for (scheme, ranks, kill, remote, setting) in runs {
        let name = format!(
            "checkpoint_retry ({ranks} ranks, {scheme}, ACTIVERMA_SMP_EMULATE_REMOTE={remote}{}, kill {kill})",
            setting.map(|(k, v)| format!(", {k}={v}")).unwrap_or_default()
        );
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = dir.path().to_str().unwrap();
        let mut env = vec![("CKPT_DIR", store), ("CKPT_SCHEME", scheme), ("ACTIVERMA_SMP_EMULATE_REMOTE", remote)];
        env.extend(setting);
        let with = |extra: (&'static str, &'static str)| Job { case: "checkpoint_retry", ranks, env: [env.clone(), vec![extra]].concat() };
        let (killed, took) = launch(&with(("CKPT_KILL", kill)), &["--respawn", "1"]);
        let dead = if kill.starts_with("marker") { 0 } else { 1 };
        // The job's last checkpoint is 5, or 6 when the failed third had been marked complete.
        let last = if dead == 0 { "6:5" } else { "5:5" };
        let (restarted, _) = launch(&with(("CKPT_EXPECT_RESTORED", last)), &["--restart-from", store]);
        t.check(
            format!("{name}: the survivors' retry wrote every changed page; restarted, every byte [{:.1} s]", took.as_secs_f64()),
            killed.status.success() && replaced_rank(&killed, dead) && restarted.status.success(),
            || format!("job with a death:\n{}\nrestarted job:\n{}", show(&killed), show(&restarted)),
        );
    }
}

/// Replay of the DHT's inserts (sender-based logging of puts): rank 1 dies in the middle of a
/// step (seeded), is replaced, restores the last checkpoint, inserts what the others had sent
/// it since and skips what of its own they had applied; every volume must end with the
/// failure-free contents (keys and digest). DHTR_SEEDS (default 2) kill points per shape.
pub fn dht_replay_checks(t: &mut Tally, filter: Option<&str>) {
    let seeds = seeds("DHTR_SEEDS");
    for (ranks, remote) in [(2, "0"), (3, "0"), (3, "1")] {
        for seed in 1..=seeds {
            let j = 1 + (seed * 3 + ranks as u64) % 8;
            let i = 1 + (seed * 37 + ranks as u64 * 5) % 200;
            let name =
                format!("dht_replay ({ranks} ranks, ACTIVERMA_SMP_EMULATE_REMOTE={remote}: rank 1 dies after insert {i} of step {j})");
            if filter.is_some_and(|f| !name.contains(f)) {
                continue;
            }
            let env = [("ACTIVERMA_SMP_EMULATE_REMOTE", remote.to_string())];
            let runs = twin_runs("dht_replay", ranks, &env, "DHTR_DIR", "DHTR_OUT", "DHTR_KILL", format!("1:{j}:{i}"));
            // `rank keys digest skipped replayed incarnation`: the same keys and digest per rank.
            // The replacement skipped exactly what it had inserted since the checkpoint (after
            // steps 0, 3, 6): the steps since, and step j up to insert i.
            let since = (j - 1) / 3 * 3;
            let expect = (j - 1 - since) * 200 + i;
            let recovered = runs.got_fields().any(|f| f[0] == "1" && f[5] == "1" && f[3] == expect.to_string());
            t.check(
                format!("{name}: the failure-free contents in every volume [{:.1} s]", runs.took.as_secs_f64()),
                runs.agree(ranks, 3) && recovered,
                || runs.detail(),
            );
        }
    }
}
