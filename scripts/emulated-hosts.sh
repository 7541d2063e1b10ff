#!/usr/bin/env bash
# Emulated hosts on this one Linux machine, for MPI jobs of several "nodes" (needs root).
#   scripts/emulated-hosts.sh up N        N network namespaces arma-host0..N-1, each with a
#                                         veth "arma0" (10.77.0.K+1/24) joined by the bridge
#                                         arma-br0 (10.77.0.254/24) in the root namespace
#   scripts/emulated-hosts.sh down        removes all of it (and kills what still runs there)
#   scripts/emulated-hosts.sh mpirun openmpi|mpich K -- PROGRAM ARGS...
#                                         N*K ranks, K per host: ranks 0..K-1 on arma-host0, ...
#   scripts/emulated-hosts.sh mpirun openmpi|mpich -n T -- PROGRAM ARGS...
#                                         T ranks, ceil(T/N) per host, host by host
# The launcher (mpirun.openmpi / mpiexec.mpich) runs in the root namespace, like on a login
# node, and starts its daemons (orted / hydra_pmi_proxy) on each host through
# scripts/emulated-host-agent.sh, in place of ssh: host's network namespace, own hostname
# (UTS namespace), own /dev/shm, /etc/hosts and boot id (see there). So the MPI puts the
# ranks of different hosts in different MPI_COMM_TYPE_SHARED communicators, and their traffic
# goes through TCP over the veths (the root-side ends arma-vethK count its bytes); ranks of
# one host share memory as on a real node. Nothing outside is edited (no /etc/hosts): the
# hosts are named by address in the launchers' host lists.
# The caller's environment reaches the ranks (the agent inherits the launcher's; hydra's
# -genvall). Transport defaults, each only when the caller has not set the variable:
#   Open MPI: OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,vader,self OMPI_MCA_osc=sm,ucx
#             UCX_TLS=tcp,sm,self UCX_NET_DEVICES=arma0 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24
#   MPICH:    UCX_TLS=tcp,sm,self UCX_NET_DEVICES=arma0, and a finalize fix (see
#             mpich_finalize_fix; EMULATED_HOSTS_MPICH_FINALIZE_FIX=0 to run without it)
# (Open MPI's osc/ucx may print "UCX ERROR ... error during flush: Endpoint timeout" in
# MPI_Finalize, a peer having left first; as on one host over TCP; the job still succeeds.)
# EMULATED_HOSTS_TIMEOUT (seconds, default 600) bounds a job: the launcher is sent TERM, then
# KILL 10 s later; the exit status is then 124 (or 137).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=/run/activerma-emulated-hosts
bridge=arma-br0
prefix=arma-host

die() { echo "emulated-hosts: $*" >&2; exit 1; }
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
hosts_up() {
    local n=0
    while [ -e "/run/netns/$prefix$n" ]; do n=$((n + 1)); done
    echo "$n"
}
remove_host() { # K
    local ns=$prefix$1 pids
    if [ -e "/run/netns/$ns" ]; then
        pids=$(ip netns pids "$ns" || true)
        if [ -n "$pids" ]; then
            # shellcheck disable=SC2086
            kill -KILL $pids 2>/dev/null || true
        fi
        ip netns del "$ns"
    fi
    ip link del "arma-veth$1" 2>/dev/null || true
    rm -rf "${state:?}/$ns"
}

cmd_up() {
    local n=${1:-}
    if ! [[ $n =~ ^[1-9][0-9]*$ ]] || [ "$n" -gt 200 ]; then die "up N: N from 1 to 200"; fi
    [ "$(id -u)" = 0 ] || die "needs root"
    local k ns ip had
    had=$(hosts_up)
    mkdir -p "$state"
    ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
    [ ! -e /proc/sys/net/ipv6 ] || sysctl -qw "net.ipv6.conf.$bridge.disable_ipv6=1"
    ip addr replace 10.77.0.254/24 dev "$bridge"
    ip link set "$bridge" up
    {
        echo "127.0.0.1 localhost"
        for ((k = 0; k < n; k++)); do echo "10.77.0.$((k + 1)) $prefix$k"; done
        echo "10.77.0.254 arma-launcher"
    } >"$state/hosts.new"
    for ((k = 0; k < n; k++)); do
        ns=$prefix$k
        ip=10.77.0.$((k + 1))
        [ -e "/run/netns/$ns" ] || ip netns add "$ns"
        if ! ip link show "arma-veth$k" >/dev/null 2>&1; then
            ip -n "$ns" link del arma0 2>/dev/null || true
            ip link add "arma-veth$k" type veth peer name arma0 netns "$ns"
        fi
        if [ -e /proc/sys/net/ipv6 ]; then # no IPv6 chatter on the links being counted
            ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
            sysctl -qw "net.ipv6.conf.arma-veth$k.disable_ipv6=1"
        fi
        ip -n "$ns" addr replace "$ip/24" dev arma0
        ip -n "$ns" link set lo up
        ip -n "$ns" link set arma0 up
        ip link set "arma-veth$k" master "$bridge" up
        mkdir -p "$state/$ns"
        [ -s "$state/$ns/boot_id" ] || cat /proc/sys/kernel/random/uuid >"$state/$ns/boot_id"
        cp "$state/hosts.new" "$state/$ns/hosts"
    done
    rm -f "$state/hosts.new"
    for ((k = n; k < had; k++)); do remove_host "$k"; done
    echo "emulated-hosts: $n up: $prefix{0..$((n - 1))} at 10.77.0.{1..$n}/24, bridge $bridge 10.77.0.254"
}

cmd_down() {
    local k n
    n=$(hosts_up)
    for ns in /run/netns/"$prefix"*; do # also any left beyond a gap
        [ -e "$ns" ] || continue
        k=${ns#/run/netns/"$prefix"}
        [ "$k" -ge "$n" ] && n=$((k + 1))
    done
    for ((k = 0; k < n; k++)); do remove_host "$k"; done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$state"
}

# Debian's MPICH 4.0.2 (ch4:ucx) closes every UCX endpoint in flush mode in MPI_Finalize, then
# waits in a PMI barrier; a flush that still needs the peer (an unfinished wire-up over TCP)
# then waits for a peer that no longer progresses: about one job in two hangs there (fixed
# upstream by pmodels/mpich#6596, MPICH 4.2). This preload, for the ranks only, still closes
# each endpoint in flush mode but progresses it for at most 1 s in all, then lets
# ucp_worker_destroy tear down what is left. EMULATED_HOSTS_MPICH_FINALIZE_FIX=0 disables it.
mpich_finalize_fix() {
    local so=$state/mpich-finalize-fix.so
    [ ! -s "$so" ] || return 0
    command -v cc >/dev/null || die "cc is needed for the MPICH finalize fix (or EMULATED_HOSTS_MPICH_FINALIZE_FIX=0)"
    cc -shared -fPIC -O2 -o "$so.tmp" -x c - <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
typedef void *ptr;
static ptr worker;
static double deadline;
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
unsigned ucp_worker_progress(ptr w) {
    static unsigned (*real)(ptr);
    if (!real) real = (unsigned (*)(ptr))dlsym(RTLD_NEXT, "ucp_worker_progress");
    worker = w;
    return real(w);
}
ptr ucp_disconnect_nb(ptr ep) {
    static ptr (*close_nb)(ptr, unsigned);
    static int (*is_completed)(ptr);
    static void (*request_free)(ptr);
    if (!close_nb) {
        close_nb = (ptr (*)(ptr, unsigned))dlsym(RTLD_NEXT, "ucp_ep_close_nb");
        is_completed = (int (*)(ptr))dlsym(RTLD_NEXT, "ucp_request_is_completed");
        request_free = (void (*)(ptr))dlsym(RTLD_NEXT, "ucp_request_free");
    }
    ptr req = close_nb(ep, 1 /* UCP_EP_CLOSE_MODE_FLUSH */);
    if (req == 0 || (unsigned long)req >= (unsigned long)-100) return req; /* a status */
    if (deadline == 0) deadline = now() + 1.0;
    while (!is_completed(req) && worker && now() < deadline) ucp_worker_progress(worker);
    request_free(req); /* freed now if complete, else when UCX completes it */
    return 0;          /* UCS_OK */
}
EOF
    mv "$so.tmp" "$so"
}

cmd_mpirun() {
    local mpi=$1 k n hosts="" i total=""
    if [ "${2:-}" = -n ]; then
        # -n TOTAL: TOTAL ranks, ceil(TOTAL / hosts) per host, filled host by host.
        if [ $# -lt 5 ] || [ "$4" != -- ]; then usage; fi
        total=$3
        [[ $total =~ ^[1-9][0-9]*$ ]] || die "-n needs a positive rank count"
        shift 4
    else
        if [ $# -lt 4 ] || [ "$3" != -- ]; then usage; fi
        k=$2
        shift 3
        [[ $k =~ ^[1-9][0-9]*$ ]] || die "RANKS_PER_HOST must be a positive integer"
    fi
    n=$(hosts_up)
    [ "$n" -gt 0 ] || die "no emulated hosts: run $0 up N first"
    if [ -n "$total" ]; then k=$(((total + n - 1) / n)); else total=$((n * k)); fi
    for ((i = 0; i < n; i++)); do hosts+="${hosts:+,}10.77.0.$((i + 1)):$k"; done
    local agent=$here/emulated-host-agent.sh
    [ -x "$agent" ] || agent="$(command -v bash) $agent" # Open MPI splits the agent on spaces
    local -a launch
    case $mpi in
        openmpi)
            export OMPI_MCA_pml=${OMPI_MCA_pml-ob1}
            export OMPI_MCA_btl=${OMPI_MCA_btl-tcp,vader,self}
            export OMPI_MCA_osc=${OMPI_MCA_osc-sm,ucx}
            export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include-10.77.0.0/24}
            export UCX_TLS=${UCX_TLS-tcp,sm,self}
            export UCX_NET_DEVICES=${UCX_NET_DEVICES-arma0}
            launch=(mpirun.openmpi --allow-run-as-root --bind-to none --map-by slot
                --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
                --host "$hosts" -n "$total")
            ;;
        mpich)
            export UCX_TLS=${UCX_TLS-tcp,sm,self}
            export UCX_NET_DEVICES=${UCX_NET_DEVICES-arma0}
            launch=(mpiexec.mpich -launcher rsh -launcher-exec "$agent" -localhost 10.77.0.254
                -genvall -hosts "$hosts" -n "$total")
            if [ "${EMULATED_HOSTS_MPICH_FINALIZE_FIX:-1}" = 1 ]; then
                mpich_finalize_fix
                launch+=(-genv LD_PRELOAD "$state/mpich-finalize-fix.so${LD_PRELOAD:+:$LD_PRELOAD}")
            fi
            ;;
        *) usage ;;
    esac
    # timeout runs the launcher in a process group of its own and signals that whole group,
    # except from a terminal (stdin is forwarded to rank 0: a background group could not read
    # it), where it signals the launcher alone, which then ends its job.
    local -a fg=()
    if [ -t 0 ]; then fg=(--foreground); fi
    exec timeout "${fg[@]}" -k 10 "${EMULATED_HOSTS_TIMEOUT:-600}" "${launch[@]}" "$@"
}

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    down) [ $# = 1 ] || usage; cmd_down ;;
    mpirun) shift; cmd_mpirun "$@" ;;
    *) usage ;;
esac
