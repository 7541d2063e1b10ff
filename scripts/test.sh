#!/usr/bin/env bash
# The whole test suite: unit tests of every layer, the multi-process tests through the
# launcher (2, 3 and 4 ranks, every progress mode, faults, the randomized test), the same
# suite on the mpi conduit under Open MPI and MPICH, and the C tests against an installed copy
# of the C API.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh

echo "== unit and multi-process tests (cargo test)"
cargo test --workspace --release

echo "== benchmark smoke run (checks the data it moves; timings are reported, not judged)"
target/release/activerma bench --quick > /tmp/activerma-bench-smoke.txt
tail -n 3 /tmp/activerma-bench-smoke.txt
# The applications' benchmarks check their own results (every design ends with the same
# contents / counts) and fail otherwise.
target/release/activerma bench dht counter stencil --quick --ops 5000 > /tmp/activerma-bench-apps.txt
grep -A 20 "^# Summary" /tmp/activerma-bench-apps.txt | head -n 12

echo "== the mpi conduit: the same multi-process suite under Open MPI and MPICH (shared memory, then TCP)"
bash scripts/test-mpi.sh

echo "== C API: install into a temporary prefix, then build and run the C tests against it"
prefix=$(mktemp -d /tmp/activerma-prefix.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
bash scripts/install.sh --prefix "$prefix"
PREFIX="$prefix" bash tests/c/run.sh
