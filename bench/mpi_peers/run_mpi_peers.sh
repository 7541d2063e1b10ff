#!/usr/bin/env bash
# run_mpi_peers.sh - build and run the OSU-style one-sided (RMA) peer benchmarks
# with Debian's Open MPI and MPICH (2 ranks on this machine) and collect JSON lines.
#
# usage: bench/mpi_peers/run_mpi_peers.sh [--quick] [OUT.jsonl]
#   OUT.jsonl  file that receives all JSON lines (default: stdout)
#   --quick    fewer iterations/repetitions, max size 1 MiB (CI smoke test, < 1 min)
# Human-readable tables and progress go to stderr.
#
# environment:
#   MPI_PEERS_BUILD_DIR  build directory (default: bench/mpi_peers/build, git-ignored)
#   MPI_PEERS_IMPLS      which MPIs to run (default: "openmpi mpich")
#   MPI_PEERS_OMPI_OSC   Open MPI one-sided component (default: sm = shared-memory
#                        fast path; "rdma"/"ucx" also work; "" = Open MPI's choice)
#   MPI_PEERS_TIMEOUT    per-program time limit in seconds (default 90, quick 30)
#   MPI_PEERS_BUDGET     time limit for all runs together, seconds (default 170,
#                        quick 50); programs that would start after it are skipped
#   MPI_PEERS_NO_INSTALL=1  never call apt-get
#   MPI_PEERS_BENCHES    which programs (default: "put_latency get_latency put_bw fop_latency")
#   MPI_PEERS_LAUNCH     the launcher command for 2 ranks, replacing mpirun / mpiexec (one
#                        MPI in MPI_PEERS_IMPLS), e.g. "bash scripts/emulated-hosts.sh mpirun
#                        openmpi 1 --": a rank on each of two emulated hosts
# exit status: 0 if every program ran and verified, 1 otherwise (lines of the
# programs that did succeed are still written).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
quick=0
out=""
for a in "$@"; do
    case "$a" in
        --quick) quick=1 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        -*) echo "run_mpi_peers.sh: unknown option $a" >&2; exit 2 ;;
        *) if [ -n "$out" ]; then echo "run_mpi_peers.sh: one output file only" >&2; exit 2; fi
           out="$a" ;;
    esac
done

log() { echo "[mpi_peers] $*" >&2; }

# ---------------------------------------------------------------- install ----
need_install=0
for c in mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich; do
    command -v "$c" >/dev/null 2>&1 || need_install=1
done
# headers (libopenmpi-dev / libmpich-dev) are what mpicc.* need
[ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -n "$(compgen -G '/usr/lib/*/openmpi/include/mpi.h')" ] || need_install=1
[ -n "$(compgen -G '/usr/include/*/mpich/mpi.h')" ] || need_install=1
if [ "$need_install" = 1 ]; then
    if [ "${MPI_PEERS_NO_INSTALL:-0}" = 1 ]; then
        log "MPI packages missing and MPI_PEERS_NO_INSTALL=1"; exit 1
    fi
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
            log "MPI packages missing; run as root or install: openmpi-bin libopenmpi-dev mpich libmpich-dev"; exit 1
        fi
    fi
    log "installing openmpi-bin libopenmpi-dev mpich libmpich-dev (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
               openmpi-bin libopenmpi-dev mpich libmpich-dev; } >&2; then
        log "apt-get failed"; exit 1
    fi
fi

# ------------------------------------------------------------------ build ----
build="${MPI_PEERS_BUILD_DIR:-$here/build}"
mkdir -p "$build"
benches="${MPI_PEERS_BENCHES:-put_latency get_latency put_bw fop_latency}"
impls="${MPI_PEERS_IMPLS:-openmpi mpich}"
# every program is its source plus osu_style_common.c; put and get latency are
# one source, built twice (-DOSU_OP_GET selects MPI_Get)
bench_src() {
    case "$1" in
        put_latency) echo "osu_style_putget_latency.c" ;;
        get_latency) echo "osu_style_putget_latency.c -DOSU_OP_GET" ;;
        *)           echo "osu_style_$1.c" ;;
    esac
}
deps=("$here/osu_style_common.c" "$here/osu_style_common.h" "$here/run_mpi_peers.sh")
pids=()
for impl in $impls; do
    for b in $benches; do
        read -r src_name defs <<<"$(bench_src "$b")"
        src="$here/$src_name"
        bin="$build/osu_style_${b}.$impl"
        stale=0
        [ -x "$bin" ] || stale=1
        for f in "$src" "${deps[@]}"; do [ "$f" -nt "$bin" ] && stale=1; done
        if [ "$stale" = 1 ]; then
            # shellcheck disable=SC2086  # $defs: zero or one -D flag
            "mpicc.$impl" -O2 -Wall -Wextra $defs -o "$bin" "$src" "$here/osu_style_common.c" >&2 &
            pids+=($!)
        fi
    done
done
for p in "${pids[@]}"; do
    wait "$p" || { log "build failed"; exit 1; }
done
log "built into $build"

# -------------------------------------------------------------------- run ----
if [ "$quick" = 1 ]; then
    bargs=(--quick); tmo="${MPI_PEERS_TIMEOUT:-30}"; budget="${MPI_PEERS_BUDGET:-50}"
else
    bargs=(); tmo="${MPI_PEERS_TIMEOUT:-90}"; budget="${MPI_PEERS_BUDGET:-170}"
fi
osc="${MPI_PEERS_OMPI_OSC-sm}"
# Open MPI refuses to run as root without these (flags are harmless otherwise)
ompi_launch=(mpirun.openmpi --allow-run-as-root --oversubscribe -n 2)
[ -n "$osc" ] && ompi_launch+=(--mca osc "$osc")
# Open MPI binds 2 ranks to 2 cores by default; do the same for MPICH
mpich_launch=(mpiexec.mpich -n 2 -bind-to core)

jsonl="$(mktemp "${TMPDIR:-/tmp}/mpi_peers.XXXXXX")"
trap 'rm -f "$jsonl"' EXIT
fail=0
start=$SECONDS
for impl in $impls; do
    case "$impl" in
        openmpi) launch=("${ompi_launch[@]}"); name=openmpi
                 [ "$osc" = sm ] || name="openmpi-osc-${osc:-default}"
                 log "Open MPI: $(ompi_info --version 2>/dev/null | head -1); one-sided component: osc/${osc:-<default>}" ;;
        mpich)   launch=("${mpich_launch[@]}"); name=mpich
                 log "MPICH: $(mpichversion 2>/dev/null | head -1 | tr -s '\t ' ' '); device ch4:ucx (RMA goes through UCX)" ;;
        *) log "unknown impl $impl"; fail=1; continue ;;
    esac
    if [ -n "${MPI_PEERS_LAUNCH:-}" ]; then
        read -ra launch <<<"$MPI_PEERS_LAUNCH"
    fi
    for b in $benches; do
        left=$((start + budget - SECONDS))
        if [ "$left" -lt 5 ]; then
            log "ERROR: time budget (${budget}s) used up, skipping $impl $b"; fail=1; continue
        fi
        t=$((left < tmo ? left : tmo))
        log "running $impl $b"
        rc=0
        timeout -k 5 "$t" "${launch[@]}" "$build/osu_style_${b}.$impl" \
            -i "$name" "${bargs[@]}" --json >>"$jsonl" </dev/null || rc=$?
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            log "ERROR: $impl $b timed out after ${t}s"; fail=1
        elif [ "$rc" != 0 ]; then
            log "ERROR: $impl $b failed (exit $rc)"; fail=1
        fi
    done
done
log "done in $((SECONDS - start)) s, $(grep -c '^{' "$jsonl") JSON lines$([ $fail = 1 ] && echo ', WITH ERRORS')"

# keep only JSON lines (MPI runtimes may print noise on stdout)
if [ -n "$out" ]; then
    grep '^{' "$jsonl" >"$out" || true
else
    grep '^{' "$jsonl" || true
fi
exit $fail
