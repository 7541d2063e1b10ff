#!/usr/bin/env bash
# The main job: set up, build, and run the demo with 4 ranks on the shared-memory conduit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
cargo build --release --quiet -p activerma-cli -p activerma --examples --bins
exec target/release/activerma run -n "${RANKS:-4}" --label -- target/release/examples/demo
