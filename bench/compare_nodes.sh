#!/usr/bin/env bash
# compare_nodes.sh - the node-aware mpi conduit over two emulated hosts, side by side in one run
# (rounds alternate the sides, so a slow spell of the machine hits all alike; each side's best
# round counts):
#   same node:  8 B put / get, rank 0 -> rank 1 of a job of 2 ranks on each of two emulated
#               hosts (activerma bench node-latency under scripts/emulated-hosts.sh mpirun)
#               against the same in a one-host smp job                     (target <= 1.10)
#   other node: rank 0 -> rank 1 of a job of 1 rank on each host, against plain MPI_Put /
#               MPI_Get + MPI_Win_flush of the same MPI in the same layout (bench/mpi_peers)
#               (target <= 1.20; both sides 2 ranks, so neither shares the 2 cores with idle
#               ranks)
# usage: bench/compare_nodes.sh [--quick] [--rounds N] [openmpi|mpich]     (needs root)
# Builds target/release/activerma and target/<mpi>/release/activerma if missing; brings the
# emulated hosts up (and down again if it did). Exit status: 0 when everything ran (MISS
# included: benchmarks report, they don't gate); 1 when a run failed.
set -u -o pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=()
rounds=3
mpi=openmpi
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick); rounds=1 ;;
        --rounds) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || { echo "compare_nodes.sh: --rounds needs a count >= 1" >&2; exit 2; }
                  rounds="$2"; shift ;;
        openmpi|mpich) mpi="$1" ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "compare_nodes.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
log() { echo "[compare_nodes] $*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (network namespaces)"; exit 1; }
smp_bin="$root/target/release/activerma"
mpi_bin="$root/target/$mpi/release/activerma"
[ -x "$smp_bin" ] || (cd "$root" && cargo build --release -p activerma-cli) >&2 || exit 1
[ -x "$mpi_bin" ] || bash "$root/scripts/build-mpi.sh" "$mpi" >&2 || exit 1
out="$(mktemp -d "${TMPDIR:-/tmp}/activerma-compare-nodes.XXXXXX")"
hosts=(bash "$root/scripts/emulated-hosts.sh")
brought_up=0
if [ ! -e /run/netns/arma-host0 ]; then
    "${hosts[@]}" up 2 >&2 || exit 1
    brought_up=1
fi
trap '[ $brought_up = 0 ] || "${hosts[@]}" down >&2' EXIT
fail=0
echo "# compare_nodes: $mpi over 2 emulated hosts; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$smp_bin" bench limits --quick 2>/dev/null | grep -m1 '^# machine:' || true
for ((k = 1; k <= rounds; k++)); do
    log "round $k of $rounds"
    "$smp_bin" bench node-latency "${quick[@]}" --json "$out/smp.$k.jsonl" >&2 || { log "ERROR: the smp job failed"; fail=1; }
    for per_host in 2 1; do
        EMULATED_HOSTS_TIMEOUT=300 "${hosts[@]}" mpirun "$mpi" $per_host -- "$mpi_bin" bench node-latency "${quick[@]}" --json "$out/mpi$per_host.$k.jsonl" >&2 ||
            { log "ERROR: the emulated-hosts job ($per_host per host) failed"; fail=1; }
    done
    MPI_PEERS_IMPLS=$mpi MPI_PEERS_BENCHES="put_latency get_latency" MPI_PEERS_TIMEOUT=300 MPI_PEERS_BUDGET=600 \
        MPI_PEERS_LAUNCH="bash $root/scripts/emulated-hosts.sh mpirun $mpi 1 --" \
        "$root/bench/mpi_peers/run_mpi_peers.sh" "${quick[@]}" "$out/peers.$k.jsonl" >&2 || { log "ERROR: the MPI peers failed"; fail=1; }
done
python3 - "$out" "$mpi" <<'PY' || fail=1
import glob, json, sys
out, mpi = sys.argv[1], sys.argv[2]
def rows(pattern):
    for f in sorted(glob.glob(f"{out}/{pattern}")):
        for line in open(f):
            if line.startswith("{"):
                yield json.loads(line)
def ours(files, op, same_node):
    vals = [r["value"] for r in rows(files)
            if r.get("benchmark") == "node-latency" and r["params"].get("op") == op and r["params"].get("target") == 1
            and r["params"].get("same_node") == same_node and not r["params"].get("layout", "").startswith("smp, 2")]
    return min(vals) if vals else None
def peer(op):
    vals = [r.get("median_us", r.get("latency_us")) for r in rows("peers.*.jsonl")
            if r.get("bench") == f"osu_{op}_latency" and r.get("size") == 8]
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None
print(f"# {'check':<58} {'ours':>10} {'against':>10} {'ratio':>7}  target  status")
ok = True
for op in ("put", "get"):
    for what, a, b, target in (
        (f"same node: 8 B {op}, 2x2 emulated hosts / one-host smp", ours("mpi2.*.jsonl", op, True), ours("smp.*.jsonl", op, True), 1.10),
        (f"other node: 8 B {op}, ours / MPI_{op.capitalize()} + flush ({mpi})", ours("mpi1.*.jsonl", op, False), peer(op), 1.20),
    ):
        if a is None or b is None:
            print(f"  {what:<58} {'—':>10} {'—':>10}    —    <= {target:.2f}  MISSING")
            ok = False
            continue
        r = a / b
        print(f"  {what:<58} {a:>8.4f}us {b:>8.4f}us {r:>7.2f}  <= {target:.2f}  {'PASS' if r <= target else 'MISS'}")
sys.exit(0 if ok else 1)
PY
log "rows kept in $out"
exit $fail
