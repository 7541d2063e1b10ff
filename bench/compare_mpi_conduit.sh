#!/usr/bin/env bash
# compare_mpi_conduit.sh - activerma's mpi conduit vs plain MPI one-sided on the same MPI, in one run:
# runs `activerma bench --json` as 2 ranks under the MPI's own launcher, then the MPI peer kit
# (bench/mpi_peers/run_mpi_peers.sh) on that MPI with the same launcher options and the same
# one-sided (osc) component, then prints the ratio table (bench/compare_mpi_conduit.py):
# put/get latency at 8 B, 4 KiB, 64 KiB, 1 MiB (target ours/theirs <= 1.20), put bandwidth at
# 64 KiB and 1 MiB (target >= 0.95), 8 B fetch-add (info), PASS/MISS and the load average.
#
# usage: bench/compare_mpi_conduit.sh [--quick] [--rounds N] [--no-tcp] [--out DIR] [openmpi|mpich]
#   openmpi    (default) shared memory (osc/rdma), then everything over TCP (osc/ucx, see below)
#   mpich      shared memory only (ch4:ucx): Debian's MPICH 4.0.2 over UCX_TLS=tcp,self hangs in
#              MPI_Finalize even for a trivial program, so there is no MPICH TCP case
#   --quick    fewer sizes, repetitions and iterations on both sides, max 1 MiB
#   --rounds N run both sides N times, alternating, and compare each side's best round (min
#              latency, max bandwidth): over TCP loopback single runs move by up to 2x
#   --no-tcp   skip the Open MPI TCP case
#   --out DIR  keep the JSON lines and logs in DIR (default: a new /tmp/activerma-mpi-conduit.XXXXXX)
# environment:
#   COMPARE_OMPI_OSC  Open MPI osc component for the shared-memory case, on both sides (default
#                     rdma: what Open MPI 4.1 picks on one host; the conduit also keeps a
#                     dynamic window, which osc/sm cannot make)
#   COMPARE_TIMEOUT   time limit of one `activerma bench` run, seconds (default 900, quick 300)
# Open MPI TCP case, for both sides: OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self OMPI_MCA_osc=ucx
# UCX_TLS=tcp,self (osc/rdma cannot make dynamic windows over the tcp BTL).
# The binary is target/<mpi>/release/activerma, built with scripts/build-mpi.sh <mpi> when it is
# missing or older than a file under crates/.
# Exit status: 0 when everything ran (MISS included: benchmarks report, they don't gate);
# 1 when the build, a benchmark run or the comparison failed (the other cases still run).
set -u -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=()
rounds=1
out=""
tcp=1
mpi=openmpi
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick) ;;
        --rounds) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || { echo "compare_mpi_conduit.sh: --rounds needs a count >= 1" >&2; exit 2; }
                  rounds="$2"; shift ;;
        --no-tcp) tcp=0 ;;
        --out) [ $# -ge 2 ] || { echo "compare_mpi_conduit.sh: --out needs a directory" >&2; exit 2; }
               out="$2"; shift ;;
        openmpi|mpich) mpi="$1" ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "compare_mpi_conduit.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ "$mpi" = mpich ] && tcp=0

log() { echo "[compare_mpi_conduit] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

command -v python3 >/dev/null 2>&1 || { log "ERROR: python3 is needed for the ratio table"; exit 1; }
if [ -n "$out" ]; then
    mkdir -p "$out" || exit 1
else
    out="$(mktemp -d "${TMPDIR:-/tmp}/activerma-mpi-conduit.XXXXXX")" || exit 1
fi
if [ ${#quick[@]} -gt 0 ]; then tmo="${COMPARE_TIMEOUT:-300}"; else tmo="${COMPARE_TIMEOUT:-900}"; fi

# ------------------------------------------------------------------ build ----
bin="$root/target/$mpi/release/activerma"
if [ ! -x "$bin" ] || [ -n "$(find "$root/crates" "$root/Cargo.toml" "$root/Cargo.lock" -type f -newer "$bin" -print -quit 2>/dev/null)" ]; then
    log "building $bin (scripts/build-mpi.sh $mpi)"
    if ! timeout -k 10 1800 bash "$root/scripts/build-mpi.sh" "$mpi" >&2; then
        log "ERROR: scripts/build-mpi.sh $mpi failed"; exit 1
    fi
fi
case "$mpi" in
    openmpi) command -v mpirun.openmpi >/dev/null 2>&1 || { log "ERROR: mpirun.openmpi not found (scripts/setup.sh --mpi)"; exit 1; }
             version="$(ompi_info --version 2>/dev/null | head -1)" ;;
    mpich)   command -v mpiexec.mpich >/dev/null 2>&1 || { log "ERROR: mpiexec.mpich not found (scripts/setup.sh --mpi)"; exit 1; }
             version="$(mpichversion 2>/dev/null | head -1 | tr -s '\t ' ' ') (device ch4:ucx)" ;;
esac

fail=0
tables="$out/ratio_tables.txt"
: >"$tables"
: >"$out/ratios.jsonl"

# run_case NAME "CASE TEXT" PEER_IMPL "PEER ENV..." -- LAUNCH...
#   runs our bench under LAUNCH, then the peer kit with PEER ENV (VAR=value words), then the table
run_case() {
    local name="$1" text="$2" impl="$3" penv="$4"
    shift 5
    local launch=("$@")
    local ours="$out/activerma-$name.jsonl" peers="$out/mpi_peers-$name.jsonl"
    local l0 l1 rc k
    rm -f "$ours" "$peers"
    : >"$out/activerma-$name.log"
    l0="$(loadavg)"
    log "== $text; load average $l0"
    for ((k = 1; k <= rounds; k++)); do
        # Rounds alternate the two sides, so a slow spell of the machine hits both alike.
        [ "$rounds" -gt 1 ] && log "round $k of $rounds"
        log "running: ${launch[*]} $bin bench ${quick[*]} --json $ours.round   (time limit ${tmo}s)"
        rc=0
        timeout -k 10 "$tmo" "${launch[@]}" "$bin" bench "${quick[@]}" --json "$ours.round" </dev/null \
            | tee -a "$out/activerma-$name.log" || rc=$?
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            log "ERROR: activerma bench timed out after ${tmo}s"; fail=1
        elif [ "$rc" != 0 ]; then
            log "ERROR: activerma bench failed (exit $rc)"; fail=1
        fi
        [ -f "$ours.round" ] && cat "$ours.round" >>"$ours" && rm -f "$ours.round"
        log "running: env $penv bench/mpi_peers/run_mpi_peers.sh ${quick[*]} $peers.round"
        # shellcheck disable=SC2086  # $penv: VAR=value words
        if ! env $penv "$root/bench/mpi_peers/run_mpi_peers.sh" "${quick[@]}" "$peers.round" </dev/null; then
            log "ERROR: the MPI peer benchmarks failed (partial results are still compared)"; fail=1
        fi
        [ -f "$peers.round" ] && cat "$peers.round" >>"$peers" && rm -f "$peers.round"
    done
    l1="$(loadavg)"
    if [ -s "$ours" ]; then
        if ! python3 "$root/bench/compare_mpi_conduit.py" "$ours" "$peers" --impl "$impl" --case "$text" --rounds "$rounds" \
                --load-start "$l0" --load-end "$l1" --json-out "$out/ratios.jsonl" >>"$tables"; then
            log "ERROR: the comparison failed"; fail=1
        fi
    else
        echo -e "\n# $text: no activerma results (the run failed), nothing to compare" >>"$tables"
        fail=1
    fi
}

ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe -n 2)
# activerma settings given here reach the ranks (Open MPI: -x; MPICH's hydra passes the environment)
for v in $(compgen -e | grep '^ACTIVERMA_' || true); do ompi+=(-x "$v"); done
case "$mpi" in
    openmpi)
        osc="${COMPARE_OMPI_OSC:-rdma}"
        impl="openmpi-osc-$osc"; [ "$osc" = sm ] && impl=openmpi
        # Ours may also use osc/sm: MPI_Win_allocate_shared (the one-host heap every rank maps,
        # ACTIVERMA_MPI_SHARED=auto) needs it; the one-sided operations stay on "$osc".
        run_case openmpi-shm "$version, shared memory, osc/$osc" "$impl" \
            "MPI_PEERS_IMPLS=openmpi MPI_PEERS_OMPI_OSC=$osc" -- "${ompi[@]}" --mca osc "$osc,sm"
        if [ "$tcp" = 1 ]; then
            tcp_env="OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self OMPI_MCA_osc=ucx UCX_TLS=tcp,self"
            # The peer kit runs mpirun in this environment: Open MPI's mpirun reads OMPI_MCA_*,
            # and the ranks it starts here inherit UCX_TLS. Over TCP the kit needs more time.
            if [ ${#quick[@]} -gt 0 ]; then pt=60; pb=200; else pt=300; pb=900; fi
            # shellcheck disable=SC2086  # $tcp_env: VAR=value words
            export $tcp_env
            run_case openmpi-tcp "$version, TCP (pml ob1, btl tcp,self, osc/ucx, UCX_TLS=tcp,self)" openmpi-osc-ucx \
                "MPI_PEERS_IMPLS=openmpi MPI_PEERS_OMPI_OSC=ucx MPI_PEERS_TIMEOUT=${MPI_PEERS_TIMEOUT:-$pt} MPI_PEERS_BUDGET=${MPI_PEERS_BUDGET:-$pb}" \
                -- "${ompi[@]}" -x OMPI_MCA_pml -x OMPI_MCA_btl -x OMPI_MCA_osc -x UCX_TLS --mca osc ucx \
                -x ACTIVERMA_MPI_SHARED=off  # the TCP case stands for two hosts: no shared heap
            unset OMPI_MCA_pml OMPI_MCA_btl OMPI_MCA_osc UCX_TLS
        fi
        ;;
    mpich)
        # The peer kit binds MPICH's ranks to cores (Open MPI's default for 2 ranks): so do we.
        run_case mpich-shm "$version, shared memory" mpich "MPI_PEERS_IMPLS=mpich" -- mpiexec.mpich -n 2 -bind-to core
        ;;
esac

cat "$tables"
log "JSON lines, logs and the tables ($(basename "$tables")) kept in $out"
exit $fail
