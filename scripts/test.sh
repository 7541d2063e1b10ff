#!/usr/bin/env bash
# The whole test suite: unit tests of every layer, the multi-process tests through the
# launcher (2, 3 and 4 ranks, every progress mode, faults, the randomized test), the report
# page in headless Chromium, the same suite on the mpi conduit under Open MPI and MPICH, and
# the C tests against an installed copy of the C API and of ARMCI (libarmci).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
# What this run writes outside the tree goes in a folder of its own, removed however it ends:
# nothing is left in /tmp, and two runs at once do not write each other's files.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/activerma-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== unit and multi-process tests (cargo test)"
cargo test --workspace --release

echo "== benchmark smoke run (checks the data it moves; timings are reported, not judged)"
# A failed run prints what it wrote: the folder goes with the exit.
bench_into() { "${@:2}" >"$1" || { cat "$1"; return 1; }; }
bench_into "$tmp/bench-smoke.txt" target/release/activerma bench --quick
tail -n 3 "$tmp/bench-smoke.txt"
# The applications' benchmarks check their own results (every design ends with the same
# contents / counts) and fail otherwise.
bench_into "$tmp/bench-apps.txt" target/release/activerma bench dht counter stencil --quick --ops 5000
grep -A 20 "^# Summary" "$tmp/bench-apps.txt" | head -n 12

echo "== the object DSM's applications as the README starts them (each checks itself against a serial run)"
cargo build --release --quiet --workspace --bins # (cargo test builds the applications' libraries only)
target/release/activerma run -n 4 -- target/release/water --protocol invalidate-rdma --molecules 216 --steps 2
target/release/activerma run -n 3 -- target/release/lu --protocol update-diff --n 128
target/release/activerma run -n 3 -- target/release/lu --access mmu --n 128

echo "== the report: activerma report --quick on two benchmarks, opened in headless Chromium"
# The page must load with no console error, every image drawn and every link alive; the
# checker itself is tested on good and broken pages first.
bash scripts/setup.sh --browser
bash tests/report/page_check_test.sh
bench_into "$tmp/report.txt" target/release/activerma report --quick --only core,counter --out "$tmp/report"
/usr/bin/python3 scripts/check_report_page.py "$tmp/report" --screenshot "$tmp/report.png"

echo "== the mpi conduit: the same multi-process suite under Open MPI and MPICH (shared memory, then TCP)"
bash scripts/test-mpi.sh

echo "== C API: install into a temporary prefix, then build and run the C tests against it"
bash scripts/install.sh --prefix "$tmp/prefix"
PREFIX="$tmp/prefix" bash tests/c/run.sh
echo "== ARMCI: the C tests of armci.h / libarmci against the same installed prefix"
PREFIX="$tmp/prefix" bash tests/armci/run.sh
echo "== ARMCI: Global Arrays' own ARMCI test programs (armci/testing) on the same prefix"
PREFIX="$tmp/prefix" bash tests/ga/armci_testing.sh
echo "== ARMCI: the paper's protocol study and applications, quick (the applications check their results)"
bench_into "$tmp/bench-armci.txt" target/release/activerma bench armci-protocols armci-overlap --quick
grep -E "PASS|MISS" "$tmp/bench-armci.txt" | head -n 8
ACTIVERMA_PREFIX="$tmp/prefix" bench_into "$tmp/bench-armci-apps.txt" bash bench/armci_apps/run.sh --quick
tail -n 15 "$tmp/bench-armci-apps.txt"
