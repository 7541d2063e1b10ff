#!/usr/bin/env bash
# run.sh - activerma's ARMCI (libarmci, smp conduit) vs ARMCI-MPI over Open MPI, in one run:
# builds bench/armci_peers/armci_bench.c twice (unchanged), runs ours under `activerma run -n 2`
# and ARMCI-MPI under `mpirun.openmpi -n 2` back to back, then prints the ratio table
# (bench/armci_peers/compare.py) with PASS/MISS per target.
#
# usage: bench/armci_peers/run.sh [--quick] [--tcp | --hosts openmpi|mpich] [--rounds N] [--json FILE]
#   --quick      smoke run: fewer iterations and repetitions (a few seconds)
#   --rounds N   pairs of jobs (ours, then ARMCI-MPI right after): each ratio is the median of
#                the pairs' ratios, with their range (default 3 across hosts, where one pair moves
#                by 2x on a small VM; 1 otherwise and with --quick)
#   --tcp        across hosts: ours from an Open MPI build of libarmci (scripts/install.sh --mpi
#                openmpi, into a temporary prefix) on the mpi conduit with ACTIVERMA_MPI_SHARED=off,
#                both under mpirun.openmpi with every byte through TCP (pml ob1, btl tcp, osc ucx
#                over UCX tcp), judged by the across-host targets
#   --hosts MPI  across two emulated hosts (scripts/emulated-hosts.sh: network namespaces, TCP
#                between them; needs root): ours from the MPI build of libarmci for MPI (openmpi
#                or mpich; installed as for --tcp), ARMCI-MPI for the same MPI (libarmci-MPI),
#                one rank on each host, judged by the across-host targets; not with --json
#   --json FILE  append the ratios as rows of the report schema to FILE (benchmark "armci-check";
#                `activerma report` runs it so)
# environment:
#   ACTIVERMA_BIN     the launcher (default target/release/activerma; built if missing)
#   ACTIVERMA_PREFIX  an installed prefix (scripts/install.sh --prefix) to build ours against with
#                     pkg-config; default: the libarmci.so of the launcher's target/release
#   ARMCI_PEERS_TIMEOUT  per-run time limit in seconds (default 120, quick 60)
#   LAYER_ROUNDS         rounds of jobs (ARMCI, then the core from Rust and from C) for the layer
#                        table (default 3, quick 1)
#   MPI_PEERS_NO_INSTALL=1  never call apt-get (ARMCI-MPI is installed when missing otherwise)
# Exit status: 0 when everything ran (MISS included: benchmarks report, they don't gate);
# 1 when a build, a run or the comparison failed.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
quick=()
rows=""
tcp=0
hosts_mpi=""
rounds_arg=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick) ;;
        --tcp) tcp=1 ;;
        --hosts) case "${2:-}" in
                     openmpi|mpich) hosts_mpi="$2"; shift ;;
                     *) echo "run.sh: --hosts needs openmpi or mpich" >&2; exit 2 ;;
                 esac ;;
        --json) [ $# -ge 2 ] || { echo "run.sh: --json needs a file" >&2; exit 2; }
                rows="$2"; shift ;;
        --rounds) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null ||
                      { echo "run.sh: --rounds needs a count of at least 1" >&2; exit 2; }
                  rounds_arg="$2"; shift ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [ -n "$hosts_mpi" ]; then
    [ $tcp = 0 ] || { echo "run.sh: --tcp or --hosts, not both" >&2; exit 2; }
    [ -z "$rows" ] || { echo "run.sh: --json is for the runs on this host and --tcp" >&2; exit 2; }
    [ "$(id -u)" = 0 ] || { echo "run.sh: --hosts needs root (network namespaces)" >&2; exit 1; }
fi
# Across hosts (--tcp or --hosts): the MPI builds, the across-host targets, no layer table.
across=$([ $tcp = 1 ] || [ -n "$hosts_mpi" ] && echo 1 || echo 0)
mpi="${hosts_mpi:-openmpi}"

log() { echo "[armci_peers] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

limit="${ARMCI_PEERS_TIMEOUT:-$([ ${#quick[@]} -gt 0 ] && echo 60 || echo 120)}"
bin="${ACTIVERMA_BIN:-$root/target/release/activerma}"
if [ ! -x "$bin" ]; then
    log "building $bin (cargo build --release)"
    (cd "$root" && . scripts/env.sh && cargo build --release $ARMA_PACKAGES) >&2 ||
        { log "ERROR: cargo build --release failed"; exit 1; }
fi
command -v python3 >/dev/null 2>&1 || { log "ERROR: python3 is needed for the ratio table"; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/armci-peers.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail=0
cflags=(-O2 -std=c11 -Wall -Wextra)

# ---- ours: against an installed prefix, or the libarmci.so next to the launcher -------------
if [ $across = 1 ] && [ -z "${ACTIVERMA_PREFIX:-}" ]; then
    log "installing the $mpi build of libarmci into $work/prefix (scripts/install.sh --mpi $mpi)"
    bash "$root/scripts/install.sh" --prefix "$work/prefix" --mpi "$mpi" >"$work/install.log" 2>&1 ||
        { cat "$work/install.log" >&2; log "ERROR: installing the MPI build failed"; exit 1; }
    ACTIVERMA_PREFIX="$work/prefix"
fi
. "$here/../armci_link.sh"
armci_link_flags || exit 1
if [ $across = 1 ]; then
    ours_cc=("mpicc.$mpi" "${cflags[@]}" -DWITH_MPI)
else
    ours_cc=(cc "${cflags[@]}")
fi
ours_cc+=("$here/armci_bench.c" -o "$work/armci_bench.activerma" "${armci_link[@]}")
log "building ours: ${ours_cc[*]}"
"${ours_cc[@]}" >&2 || { log "ERROR: building the benchmark against activerma's libarmci failed"; fail=1; }
# The core as C programs reach it (the layer table's third column; one host only).
if [ $across = 0 ]; then
    core_link_flags || exit 1
    core_cc=(cc "${cflags[@]}" "$here/core_c_bench.c" -o "$work/core_c_bench" "${core_link[@]}")
    log "building the core's C benchmark: ${core_cc[*]}"
    "${core_cc[@]}" >&2 || { log "ERROR: building core_c_bench against libactiverma failed"; fail=1; }
fi

# ---- theirs: ARMCI-MPI (Debian's static libarmci-openmpi.a / libarmci-mpich.a) -------------
theirs_impl="armci-mpi-$mpi"
theirs_cc=("mpicc.$mpi" "${cflags[@]}" -DWITH_MPI "$here/armci_bench.c" -o "$work/armci_bench.armci-mpi"
           "-larmci-$mpi")
mpi_packages=(openmpi-bin libopenmpi-dev)
[ "$mpi" = mpich ] && mpi_packages=(mpich libmpich-dev)
if { ! command -v "mpicc.$mpi" >/dev/null 2>&1 || [ ! -f /usr/include/armci.h ]; } &&
   [ "${MPI_PEERS_NO_INSTALL:-0}" != 1 ]; then
    # The peer is a Debian package, installed here as bench/mpi_peers installs the MPIs.
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    log "installing libarmci-mpi-dev ${mpi_packages[*]} (apt-get)"
    { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libarmci-mpi-dev "${mpi_packages[@]}"; } >&2 ||
        log "installing ARMCI-MPI failed"
fi
if ! command -v "mpicc.$mpi" >/dev/null 2>&1 || [ ! -f /usr/include/armci.h ]; then
    log "ERROR: ARMCI-MPI for $mpi is missing (apt-get install libarmci-mpi-dev ${mpi_packages[*]})"; fail=1
else
    log "building ARMCI-MPI: ${theirs_cc[*]}"
    "${theirs_cc[@]}" >&2 || { log "ERROR: building the benchmark against ARMCI-MPI failed"; fail=1; }
fi

load_start="$(loadavg)"
log "load average at start: $load_start"
# Across hosts: both under Open MPI's launcher, every byte through TCP sockets (the settings of
# the multi-process suite's TCP run); ours also keeps every access on MPI (no shared heap).
# With --hosts: one rank on each of two emulated hosts, started by the MPI's own launcher
# through scripts/emulated-hosts.sh (which brings the hosts up for the run if they are not).
mpirun=(mpirun.openmpi --allow-run-as-root --oversubscribe)
[ $tcp = 1 ] && mpirun+=(-x OMPI_MCA_pml=ob1 -x OMPI_MCA_btl=tcp,self -x OMPI_MCA_osc=ucx -x UCX_TLS=tcp,self)
if [ -n "$hosts_mpi" ]; then
    hosts=(bash "$root/scripts/emulated-hosts.sh")
    if [ ! -e /run/netns/arma-host0 ] || [ ! -e /run/netns/arma-host1 ] || [ -e /run/netns/arma-host2 ]; then
        "${hosts[@]}" down >&2 || true
        "${hosts[@]}" up 2 >&2 || { log "ERROR: bringing up two emulated hosts failed"; exit 1; }
        trap '"${hosts[@]}" down >&2; rm -rf "$work"' EXIT
    fi
    export EMULATED_HOSTS_TIMEOUT="$limit"
    mpirun=("${hosts[@]}" mpirun "$mpi")
fi
peer_rounds="${rounds_arg:-$([ $across = 1 ] && [ ${#quick[@]} = 0 ] && echo 3 || echo 1)}"
pairs=()
for r in $(seq 1 "$peer_rounds"); do
    ours_out="$work/activerma.jsonl" theirs_out="$work/armci-mpi.jsonl"
    [ "$r" -gt 1 ] && ours_out="$work/activerma.$r.jsonl" theirs_out="$work/armci-mpi.$r.jsonl"
    if [ -x "$work/armci_bench.activerma" ]; then
        if [ $tcp = 1 ]; then
            log "round $r: running ours: ${mpirun[*]} -x ACTIVERMA_MPI_SHARED=off -n 2 armci_bench ${quick[*]} (timeout ${limit}s)"
            timeout -k 5 "$limit" "${mpirun[@]}" -x ACTIVERMA_MPI_SHARED=off -n 2 \
                "$work/armci_bench.activerma" "${quick[@]}" -i activerma >"$ours_out" ||
                { log "ERROR: the activerma run failed"; fail=1; }
        elif [ -n "$hosts_mpi" ]; then
            log "round $r: running ours: ${mpirun[*]} -n 2 -- armci_bench ${quick[*]} (timeout ${limit}s)"
            "${mpirun[@]}" -n 2 -- "$work/armci_bench.activerma" "${quick[@]}" -i activerma >"$ours_out" ||
                { log "ERROR: the activerma run failed"; fail=1; }
        else
            log "round $r: running ours: activerma run -n 2 armci_bench ${quick[*]} (timeout ${limit}s)"
            timeout -k 5 "$limit" "$bin" run -n 2 --timeout "$((limit - 5))" -- \
                "$work/armci_bench.activerma" "${quick[@]}" -i activerma >"$ours_out" ||
                { log "ERROR: the activerma run failed"; fail=1; }
        fi
    fi
    if [ -x "$work/armci_bench.armci-mpi" ]; then
        log "round $r: running ARMCI-MPI: ${mpirun[*]} -n 2 armci_bench ${quick[*]} (timeout ${limit}s)"
        if [ -n "$hosts_mpi" ]; then
            "${mpirun[@]}" -n 2 -- "$work/armci_bench.armci-mpi" "${quick[@]}" -i "$theirs_impl" >"$theirs_out"
        else
            timeout -k 5 "$limit" "${mpirun[@]}" -n 2 \
                "$work/armci_bench.armci-mpi" "${quick[@]}" -i "$theirs_impl" >"$theirs_out"
        fi || { log "ERROR: the ARMCI-MPI run failed"; fail=1; }
    fi
    [ "$r" -gt 1 ] && pairs+=(--pair "$ours_out" "$theirs_out")
done
# The ARMCI layer's own cost: the core's blocking put / get latency on the same conduit, in
# the same run (one host only: across hosts both sides are MPI's latency), from Rust (the
# judged column) and from C through the core's C API (core_c_bench.c). Its 8-byte figures
# are 10-30 ns and this kind of VM moves them by up to 2x from one job to the next, so the
# comparison is made in rounds — the core's two right after an ARMCI job — and the table takes
# the median of the rounds' ratios: LAYER_ROUNDS rounds (default 3, 1 with --quick), the first
# with the full ARMCI job above, the others with only its contiguous tests.
core=()
if [ $across = 0 ]; then
    rounds="${LAYER_ROUNDS:-$([ ${#quick[@]} -gt 0 ] && echo 1 || echo 3)}"
    for r in $(seq 1 "$rounds"); do
        if [ "$r" -gt 1 ]; then
            log "layer round $r: activerma run -n 2 armci_bench --contiguous ${quick[*]}"
            timeout -k 5 "$limit" "$bin" run -n 2 --timeout "$((limit - 5))" -- \
                "$work/armci_bench.activerma" --contiguous "${quick[@]}" -i activerma >"$work/layer.$r.jsonl" ||
                { log "ERROR: the activerma run failed"; fail=1; continue; }
        else
            cp "$work/activerma.jsonl" "$work/layer.$r.jsonl" 2>/dev/null || continue
        fi
        log "layer round $r: activerma bench ${quick[*]} put-latency get-latency"
        if ! "$bin" bench "${quick[@]}" put-latency get-latency --json "$work/core.$r.jsonl" >"$work/core.txt" 2>&1; then
            cat "$work/core.txt" >&2; log "ERROR: activerma bench put-latency get-latency failed"; fail=1; continue
        fi
        log "layer round $r: activerma run -n 2 core_c_bench ${quick[*]}"
        timeout -k 5 "$limit" "$bin" run -n 2 --timeout "$((limit - 5))" -- \
            "$work/core_c_bench" "${quick[@]}" >"$work/capi.$r.jsonl" ||
            { log "ERROR: the core_c_bench run failed"; fail=1; continue; }
        core+=(--layer-round "$work/layer.$r.jsonl" "$work/core.$r.jsonl" "$work/capi.$r.jsonl")
    done
fi
load_end="$(loadavg)"

rows_out=()
[ -n "$rows" ] && rows_out=(--rows-out "$rows")
[ $tcp = 1 ] && rows_out+=(--across-hosts)
[ -n "$hosts_mpi" ] && rows_out+=(--hosts-mpi "$hosts_mpi")
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! python3 "$here/compare.py" "$work/activerma.jsonl" "$work/armci-mpi.jsonl" --commit "$commit" \
        --load-start "$load_start" --load-end "$load_end" "${pairs[@]}" "${rows_out[@]}" "${core[@]}"; then
    log "ERROR: the comparison failed"; fail=1
fi
exit $fail
