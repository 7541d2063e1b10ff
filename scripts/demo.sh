#!/usr/bin/env bash
# The main job: set up, build, and run the demo with 4 ranks on the shared-memory conduit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
# Every binary the README starts (the launcher, the demo, and the applications: dht, counter,
# stencil, water, lu), in the default build (no MPI).
cargo build --release --quiet --workspace --examples --bins
exec target/release/activerma run -n "${RANKS:-4}" --label -- target/release/examples/demo
