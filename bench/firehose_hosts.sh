#!/usr/bin/env bash
# firehose_hosts.sh - Bell & Bonachea's figure 3 between hosts: `activerma bench firehose-ws`
# with rank 0 on one emulated host and rank 1 (whose private memory it puts into) on another,
# MPI over TCP between them (scripts/emulated-hosts.sh). Firehose and pin-all reach rank 1's
# memory with a key and one-sided MPI_Put (proto/src/keyed_rma.rs), the rendezvous strategies
# register per put (ACTIVERMA_RMA_RENDEZVOUS_MIN=1). Checks, as ratios from the same run:
# firehose / pin-all for W <= M (target <= 1.05), firehose / rendezvous-unpin for
# W > M + MAXVICTIM (target <= 1), and rank 1's pinned memory never above M + MAXVICTIM.
# usage: bench/firehose_hosts.sh [--quick] [openmpi|mpich] [-- more arguments for the bench]
#        (needs root; brings target/<mpi>/release/activerma up to date; brings the emulated
#        hosts up, and down again if it did)
set -u -o pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mpi=openmpi
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) bench_args+=(--quick) ;;
        openmpi|mpich) mpi="$1" ;;
        --) shift; bench_args+=("$@"); break ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "firehose_hosts.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "firehose_hosts.sh: needs root (network namespaces)" >&2; exit 1; }
bin="$root/target/$mpi/release/activerma"
bash "$root/scripts/build-mpi.sh" "$mpi" >&2 || exit 1 # (up to date: a few seconds)
hosts=(bash "$root/scripts/emulated-hosts.sh")
brought_up=0
if [ ! -e /run/netns/arma-host0 ] || [ -e /run/netns/arma-host2 ]; then
    "${hosts[@]}" down >&2 || true
    "${hosts[@]}" up 2 >&2 || exit 1
    brought_up=1
fi
trap '[ $brought_up = 0 ] || "${hosts[@]}" down >&2' EXIT
echo "# firehose_hosts: $mpi, rank 0 and rank 1 on two emulated hosts"
EMULATED_HOSTS_TIMEOUT=300 ACTIVERMA_BENCH_LAUNCH="bash $root/scripts/emulated-hosts.sh mpirun $mpi 1 --" \
    "$bin" bench firehose-ws "${bench_args[@]}"
