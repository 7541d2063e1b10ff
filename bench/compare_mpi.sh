#!/usr/bin/env bash
# compare_mpi.sh - activerma vs MPI one-sided (Open MPI osc/sm and MPICH) on this host, in one run:
# runs `activerma bench --json`, then bench/mpi_peers/run_mpi_peers.sh, then prints the ratio
# table (bench/compare_mpi.py) with PASS/MISS per target and the load average.
#
# usage: bench/compare_mpi.sh [--quick] [--out DIR] [--json FILE]
#   --quick      smoke run: fewer sizes and iterations on both sides, max 1 MiB (about 30 s)
#   --out DIR    keep the JSON lines in DIR (default: a new /tmp/activerma-compare.XXXXXX)
#   --json FILE  also write our rows and the ratios as rows of the report schema to FILE
#                (`activerma report` runs it so: benchmark "mpi-peers")
# The binary is target/release/activerma (or $ACTIVERMA_BIN, as `activerma report` sets it);
# it is built with `cargo build --release` if missing.
# Exit status: 0 when everything ran (MISS included: benchmarks report, they don't gate);
# 1 when the build, a benchmark or the comparison failed to run.
set -u -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=()
out=""
rows=""
made_out=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick) ;;
        --out) [ $# -ge 2 ] || { echo "compare_mpi.sh: --out needs a directory" >&2; exit 2; }
               out="$2"; shift ;;
        --json) [ $# -ge 2 ] || { echo "compare_mpi.sh: --json needs a file" >&2; exit 2; }
                rows="$2"; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "compare_mpi.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

log() { echo "[compare_mpi] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

bin="${ACTIVERMA_BIN:-$root/target/release/activerma}"
if [ ! -x "$bin" ]; then
    log "building $bin (cargo build --release)"
    (cd "$root" && cargo build --release) >&2 || { log "ERROR: cargo build --release failed"; exit 1; }
fi
if [ -n "$out" ]; then
    mkdir -p "$out" || exit 1
else
    out="$(mktemp -d "${TMPDIR:-/tmp}/activerma-compare.XXXXXX")" || exit 1
    made_out=1
fi
command -v python3 >/dev/null 2>&1 || { log "ERROR: python3 is needed for the ratio table"; exit 1; }

fail=0
load_start="$(loadavg)"
log "load average at start: $load_start"

log "running: activerma bench ${quick[*]} --json $out/activerma.jsonl"
if ! "$bin" bench "${quick[@]}" --json "$out/activerma.jsonl"; then
    log "ERROR: activerma bench failed"; fail=1
fi

log "running: bench/mpi_peers/run_mpi_peers.sh ${quick[*]} $out/mpi_peers.jsonl"
if ! "$root/bench/mpi_peers/run_mpi_peers.sh" "${quick[@]}" "$out/mpi_peers.jsonl"; then
    log "ERROR: the MPI peer benchmarks failed (partial results are still compared)"; fail=1
fi
load_end="$(loadavg)"

rows_out=()
[ -n "$rows" ] && rows_out=(--rows-out "$rows")
if ! python3 "$root/bench/compare_mpi.py" "$out/activerma.jsonl" "$out/mpi_peers.jsonl" \
        --load-start "$load_start" --load-end "$load_end" "${rows_out[@]}"; then
    log "ERROR: the comparison failed"; fail=1
fi
if [ -n "$rows" ] && [ "$made_out" = 1 ]; then
    rm -rf "$out"   # the rows went to --json; a folder nobody asked for is not left behind
else
    log "JSON lines kept in $out"
fi
exit $fail
