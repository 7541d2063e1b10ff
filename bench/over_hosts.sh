#!/usr/bin/env bash
# over_hosts.sh - runs an `activerma bench` whose jobs are jobs of their own (firehose-ws,
# scale, ...) with every job's ranks spread over two emulated hosts (scripts/emulated-hosts.sh:
# network namespaces, MPI over TCP between them, shared memory inside each), by the MPI
# build's binary: ACTIVERMA_BENCH_LAUNCH="bash scripts/emulated-hosts.sh mpirun MPI -n {n} --".
#   firehose-ws  Firehose's figure 3 between hosts: rank 0 on one host puts into rank 1's
#                private memory on the other (firehose and pin-all: a key and one-sided
#                MPI_Put, proto/src/keyed_rma.rs; the rendezvous strategies register per put)
#   scale        start-up, control memory per rank, barrier and all-to-all message rate for
#                jobs of 2 to 256 ranks (half on each host; all oversubscribed on 2 cores)
# usage: bench/over_hosts.sh [--quick] [openmpi|mpich] BENCH [-- more arguments for the bench]
#        (needs root; brings target/<mpi>/release/activerma up to date; brings the emulated
#        hosts up, and down again if it did)
set -u -o pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mpi=openmpi
bench=""
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) bench_args+=(--quick) ;;
        openmpi|mpich) mpi="$1" ;;
        --) shift; bench_args+=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        -*) echo "over_hosts.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) [ -z "$bench" ] || { echo "over_hosts.sh: one benchmark at a time ($bench, $1)" >&2; exit 2; }
           bench="$1" ;;
    esac
    shift
done
[ -n "$bench" ] || { echo "over_hosts.sh: which benchmark? (see --help)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "over_hosts.sh: needs root (network namespaces)" >&2; exit 1; }
bash "$root/scripts/build-mpi.sh" "$mpi" >&2 || exit 1 # (up to date: a few seconds)
hosts=(bash "$root/scripts/emulated-hosts.sh")
brought_up=0
if [ ! -e /run/netns/arma-host0 ] || [ ! -e /run/netns/arma-host1 ] || [ -e /run/netns/arma-host2 ]; then
    "${hosts[@]}" down >&2 || true
    "${hosts[@]}" up 2 >&2 || exit 1
    brought_up=1
fi
trap '[ $brought_up = 0 ] || "${hosts[@]}" down >&2' EXIT
echo "# over_hosts: $mpi, every job's ranks over two emulated hosts"
EMULATED_HOSTS_TIMEOUT=900 ACTIVERMA_BENCH_LAUNCH="bash $root/scripts/emulated-hosts.sh mpirun $mpi -n {n} --" \
    "$root/target/$mpi/release/activerma" bench "$bench" "${bench_args[@]}"
