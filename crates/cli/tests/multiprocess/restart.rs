//! Checkpoint and restart through the launcher (or mpirun): a job whose rank 1 dies in the
//! middle of its third checkpoint, then the same program restarted from the store, which must
//! find the second checkpoint — every byte — and finish; then a restart of the finished job,
//! and the store must hold the last chain only.

use crate::driver::{launch, launch_mpi_with, show, Job, Tally};

/// A run: the scheme, the ranks, and settings of its own.
type Run<'a> = (&'a str, u32, Vec<(&'a str, &'a str)>);

/// Every checkpoint scheme, each with 2 and 3 ranks, on the conduit the tests run under;
/// without MPI also with the cross-host paths (ACTIVERMA_SMP_EMULATE_REMOTE=1).
pub fn checks(t: &mut Tally, mpi: Option<&str>, label: &str, filter: Option<&str>) {
    let mut runs: Vec<Run> = Vec::new();
    for scheme in ["incremental", "full", "trap-first-write"] {
        for ranks in [2, 3] {
            runs.push((scheme, ranks, vec![]));
        }
    }
    if mpi.is_none() {
        for scheme in ["incremental", "trap-first-write"] {
            runs.push((scheme, 3, vec![("ACTIVERMA_SMP_EMULATE_REMOTE", "1")]));
        }
    }
    for (scheme, ranks, extra) in runs {
        let name = format!(
            "{label}: checkpoint_restart ({ranks} ranks, {scheme}{})",
            extra.iter().map(|(k, v)| format!(", {k}={v}")).collect::<String>()
        );
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = dir.path().to_str().unwrap().to_string();
        let job = |steps: &'static str, kill: Option<&'static str>, restored: Option<&'static str>| {
            let mut env: Vec<(&str, &str)> = vec![("CKPT_DIR", store.as_str()), ("CKPT_SCHEME", scheme), ("CKPT_STEPS", steps)];
            env.extend(extra.iter().copied());
            env.extend(kill.map(|k| ("CKPT_KILL", k)));
            env.extend(restored.map(|e| ("CKPT_EXPECT_RESTORED", e)));
            let job = Job { case: "checkpoint_restart", ranks, env };
            match (mpi, restored) {
                (Some(m), Some(_)) => launch_mpi_with(m, &job, &[("ACTIVERMA_RESTART_FROM", store.as_str())]),
                (Some(m), None) => launch_mpi_with(m, &job, &[]),
                (None, Some(_)) => launch(&job, &["--restart-from", store.as_str()]),
                (None, None) => launch(&job, &[]),
            }
        };
        let (died, _) = job("5", Some("1:3"), None);
        let err = String::from_utf8_lossy(&died.stderr);
        let named = mpi.is_some() || err.contains("rank 1 was killed by signal 9");
        let (resumed, took) = job("5", None, Some("2"));
        let (again, _) = job("5", None, Some("5"));
        // What the store keeps: the chain of the last checkpoint (the full base 4, then 5) and
        // the markers' file; the partial file of the killed checkpoint was rewritten,
        // everything older pruned.
        let names = |d: std::path::PathBuf| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            v.sort();
            v
        };
        let leftovers: Vec<String> = names(dir.path().join("rank-1"))
            .into_iter()
            .chain(names(dir.path().to_path_buf()).into_iter().filter(|n| n.starts_with("complete")))
            .filter(|n| !["0000000004.pages", "0000000005.pages", "complete"].contains(&n.as_str()))
            .collect();
        t.check(
            format!("{name}: killed in checkpoint 3, restarted from 2, finished, restarted from 5 [{:.1} s]", took.as_secs_f64()),
            !died.status.success() && named && resumed.status.success() && again.status.success() && leftovers.is_empty(),
            || {
                format!(
                    "killed job:\n{}\nrestarted job:\n{}\nsecond restart:\n{}\nleftovers: {leftovers:?}",
                    show(&died),
                    show(&resumed),
                    show(&again)
                )
            },
        );
    }
}
