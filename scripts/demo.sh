#!/usr/bin/env bash
# The main job: set up, build, and run the demo with 4 ranks on the shared-memory conduit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
# shellcheck disable=SC2086 # a list of flags (scripts/env.sh says why these)
cargo build --release --quiet $ARMA_PACKAGES --examples --bins
exec target/release/activerma run -n "${RANKS:-4}" --label -- target/release/examples/demo
