#!/usr/bin/env bash
# run.sh - the ARMCI paper's applications (§6) on activerma's libarmci, per protocol, in one run:
# builds bench/armci_apps/summa.c (matrix multiplication, non-blocking gets overlapped with the
# local product) and mg.c (NAS-MG-style 3-D halo exchange with strided puts) against our
# libarmci, runs each on 2 ranks under every protocol that moves its data, checks every result
# against the serial computation (inside the programs), and prints times and ratios. With
# ARMCI-MPI installed (libarmci-mpi-dev, Open MPI), the same sources built against it run too.
#
#   summa: ACTIVERMA_TRANSFER = zero-copy, buffered, pipelined, dynamic-registration
#          (non-blocking gets), and zero-copy with blocking gets (what the overlap saves)
#   mg:    ACTIVERMA_NONCONTIG = host-assisted, per-piece, packed
#   and again with the modelled network at the paper's InfiniBand numbers (7 us, 730 MB/s)
#
# usage: bench/armci_apps/run.sh [--quick] [--json FILE]
#   --quick      smaller problems and fewer repetitions (a few seconds)
#   --json FILE  append the times and ratios as rows of the report schema to FILE
#                (benchmarks "armci-apps" and "armci-apps-check"; `activerma report` runs it so)
# environment:
#   ACTIVERMA_BIN     the launcher (default target/release/activerma; built if missing)
#   ACTIVERMA_PREFIX  an installed prefix (scripts/install.sh --prefix) to build against with
#                     pkg-config; default: the libarmci.so of the launcher's target/release
#   ARMCI_APPS_TIMEOUT  per-run time limit in seconds (default 300)
# Exit status: 0 when everything ran and every result was right; 1 otherwise.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
quick=0
rows=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --json) [ $# -ge 2 ] || { echo "run.sh: --json needs a file" >&2; exit 2; }
                rows="$2"; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

log() { echo "[armci_apps] $*" >&2; }
limit="${ARMCI_APPS_TIMEOUT:-300}"
bin="${ACTIVERMA_BIN:-$root/target/release/activerma}"
if [ ! -x "$bin" ]; then
    log "building $bin (cargo build --release)"
    (cd "$root" && . scripts/env.sh && cargo build --release $ARMA_PACKAGES) >&2 ||
        { log "ERROR: cargo build --release failed"; exit 1; }
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/armci-apps.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
cflags=(-O2 -std=c11 -Wall -Wextra)

. "$here/../armci_link.sh"
armci_link_flags || exit 1
for app in summa mg; do
    cc "${cflags[@]}" "$here/$app.c" -o "$work/$app" "${armci_link[@]}" >&2 ||
        { log "ERROR: building $app against activerma's libarmci failed"; exit 1; }
done
theirs=0
if command -v mpicc.openmpi >/dev/null 2>&1 && [ -f /usr/include/armci.h ]; then
    theirs=1
    for app in summa mg; do
        mpicc.openmpi "${cflags[@]}" -DWITH_MPI "$here/$app.c" -o "$work/$app.armci-mpi" -larmci-openmpi >&2 ||
            { log "ERROR: building $app against ARMCI-MPI failed"; theirs=0; fail=1; }
    done
else
    log "ARMCI-MPI for Open MPI is not installed (apt-get install libarmci-mpi-dev openmpi-bin): our runs only"
fi

if [ $quick = 1 ]; then
    summa_args=(-n 256 -r 3); mg_args=(-n 32 -s 10 -r 3)
else
    summa_args=(-n 768 -r 5); mg_args=(-n 96 -s 10 -r 5)
fi
# The machine line every benchmark header carries (CPU model, memcpy bandwidth).
"$bin" bench limits --quick --json "$work/machine.jsonl" >/dev/null 2>&1 || log "no machine line (activerma bench limits failed)"

# run LABEL "SETTINGS" PROG ARGS...: one 2-rank run of ours under SETTINGS (NAME=VALUE ...)
run() {
    local label=$1 settings=$2
    shift 2
    log "running $label: $settings activerma run -n 2 $(basename "$1") ${*:2}"
    # shellcheck disable=SC2086 # the settings are words
    if ! env $settings timeout -k 5 "$limit" "$bin" run -n 2 --timeout "$((limit - 5))" -- "$@" -i "$label" >>"$work/runs.jsonl"; then
        log "ERROR: $label failed"
        fail=1
    fi
}
for t in zero-copy buffered pipelined dynamic-registration; do
    run "summa-$t" "ACTIVERMA_TRANSFER=$t" "$work/summa" "${summa_args[@]}"
done
run "summa-zero-copy-blocking" "ACTIVERMA_TRANSFER=zero-copy" "$work/summa" "${summa_args[@]}" -b
for m in host-assisted per-piece packed; do
    run "mg-$m" "ACTIVERMA_NONCONTIG=$m" "$work/mg" "${mg_args[@]}"
done
# The same with a network in between: the modelled one at the paper's InfiniBand numbers, where
# a get takes time the product can hide and every piece of a strided put pays the latency.
net="ACTIVERMA_NET_LATENCY_NS=7000 ACTIVERMA_NET_BANDWIDTH_MBS=730"
for t in zero-copy buffered; do
    run "summa-$t-modelled" "ACTIVERMA_TRANSFER=$t $net" "$work/summa" "${summa_args[@]}"
done
run "summa-zero-copy-blocking-modelled" "ACTIVERMA_TRANSFER=zero-copy $net" "$work/summa" "${summa_args[@]}" -b
for m in host-assisted per-piece packed; do
    run "mg-$m-modelled" "ACTIVERMA_NONCONTIG=$m $net" "$work/mg" "${mg_args[@]}"
done
if [ $theirs = 1 ]; then
    for app in summa mg; do
        args=("${summa_args[@]}")
        [ $app = mg ] && args=("${mg_args[@]}")
        log "running $app-armci-mpi: mpirun.openmpi -n 2 $app ${args[*]}"
        timeout -k 5 "$limit" mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 \
            "$work/$app.armci-mpi" "${args[@]}" -i "$app-armci-mpi" >>"$work/runs.jsonl" ||
            { log "ERROR: $app under ARMCI-MPI failed"; fail=1; }
    done
fi
rows_out=()
[ -n "$rows" ] && rows_out=(--rows-out "$rows")
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 "$here/table.py" "$work/runs.jsonl" "$work/machine.jsonl" --commit "$commit" "${rows_out[@]}" || fail=1
exit $fail
