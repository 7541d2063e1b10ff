//! Names the commit the benchmarks were built from (ACTIVERMA_COMMIT, e.g. "db2a628" or
//! "db2a628-dirty"), so every row says which source measured it; "unknown" outside a checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=ACTIVERMA_COMMIT={commit}");
    // A new commit or checkout moves HEAD's reflog; a changed work tree changes the index.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["logs/HEAD", "HEAD", "index"] {
            println!("cargo:rerun-if-changed={git_dir}/{f}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
