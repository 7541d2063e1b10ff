#!/usr/bin/env bash
# A real, one-node Slurm (Debian's slurm-wlm 22.05 + munge) on this machine,
# for running MPI programs with `srun` in CI and by hand.
#
#   scripts/slurm-local.sh up      install packages if missing, write the
#                                  config, start munged/slurmctld/slurmd and
#                                  wait until the node is idle (idempotent)
#   scripts/slurm-local.sh down    stop what `up` started, remove its state
#                                  and config (idempotent)
#   scripts/slurm-local.sh status  one line
#
# Then, as root on this machine:
#   srun -n 4 --mpi=pmix ./prog   # Open MPI 4.1 (Debian): PMIx only
#   srun -n 4 --mpi=pmi2 ./prog   # MPICH 4.0 (Debian): its built-in PMI-1
#                                 # client talks to Slurm's pmi2 plugin
# MpiDefault is pmix, so `srun -n 4 ./prog` works for Open MPI as is.
#
# No systemd: the daemons are started directly and tracked by PID files in
# the state directory. The node claims ACTIVERMA_SLURM_CPUS CPUs (default
# 8, or the real count if larger) with SlurmdParameters=config_overrides,
# so `srun -n 4` fits on a 2-core machine. No cgroups are used
# (proctrack/linuxproc, task/none), so it works in containers and VMs.
# KillOnBadExit=1: a task killed by a signal or exiting non-zero ends the
# whole step within about a second (MPICH's ranks would hang otherwise).
#
# Back-to-back `srun`s may wait ~1 s for the previous job to finish
# completing ("srun: job N queued and waiting for resources"; -Q hides it);
# steps inside one allocation do not: salloc -Q -n 4 bash -c 'srun ...; srun ...'
# Open MPI does not know it is oversubscribed under srun: with more ranks
# than cores, OMPI_MCA_mpi_yield_when_idle=1 makes it start ~2x faster.
#
# Environment:
#   ACTIVERMA_SLURM_DIR   state directory (default /var/spool/activerma-slurm)
#   ACTIVERMA_SLURM_CPUS  CPUs the node claims (default max(8, real))
#   ACTIVERMA_SLURM_MPI   MpiDefault (default pmix)
#   ACTIVERMA_SLURM_WAIT  seconds to wait for the node to be idle (default 30)
set -euo pipefail

STATE_DIR=${ACTIVERMA_SLURM_DIR:-/var/spool/activerma-slurm}
[[ $STATE_DIR == /?*/?* ]] || { echo "slurm-local: ACTIVERMA_SLURM_DIR must be an absolute path at least two levels deep" >&2; exit 2; }
CONF=/etc/slurm/slurm.conf
MARKER="# Written by activerma scripts/slurm-local.sh; removed by its 'down'."
WAIT_SECS=${ACTIVERMA_SLURM_WAIT:-30}
MPI_DEFAULT=${ACTIVERMA_SLURM_MPI:-pmix}
PACKAGES=(slurmctld slurmd slurm-client munge)
MUNGE_SOCKET=/run/munge/munge.socket.2
# munged runs as user munge, so its PID file goes where it may write.
MUNGE_PID=/run/munge/munged.pid

die() {
    echo "slurm-local: $*" >&2
    exit 1
}
log() { echo "slurm-local: $*" >&2; }

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (installs packages, starts daemons)"
}

# PID from a PID file if that process is alive, else nothing.
live_pid() {
    local f=$1 pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$STATE_DIR/apt.log" 2>&1; then
        apt-get update >>"$STATE_DIR/apt.log" 2>&1 || true
        apt-get install -y --no-install-recommends "${missing[@]}" >>"$STATE_DIR/apt.log" 2>&1 ||
            { tail -20 "$STATE_DIR/apt.log" >&2; die "apt-get install failed (log: $STATE_DIR/apt.log)"; }
    fi
}

start_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0 # a munged (ours or the system's) already answers
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID" \
        --socket="$MUNGE_SOCKET" ||
        die "munged failed to start (see /var/log/munge/munged.log)"
    touch "$STATE_DIR/munged.ours"
    local i
    for ((i = 0; i < 50; i++)); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged does not answer on $MUNGE_SOCKET"
}

write_conf() {
    local host=$1 cpus=$2 mem=$3
    if [[ -e $CONF ]] && ! grep -qxF "$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; move it away first"
    fi
    local tmp
    tmp=$(mktemp "$CONF.XXXXXX")
    cat >"$tmp" <<EOF
$MARKER
ClusterName=activerma
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdLogFile=$STATE_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: works in containers and VMs without a delegated cgroup tree.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=$MPI_DEFAULT
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The node claims more CPUs than it has (config_overrides keeps slurmd from
# draining it), so several tasks share a core.
SlurmdParameters=config_overrides
ReturnToService=2
# A task that dies (signal or non-zero exit) ends the whole step at once.
KillOnBadExit=1
KillWait=2
InactiveLimit=0
MinJobAge=30
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    chmod 0644 "$tmp"
    mv "$tmp" "$CONF"
}

node_state() {
    sinfo -h -N -o '%T' 2>/dev/null | head -n1
}

cmd_up() {
    need_root
    if [[ -e $CONF ]] && ! grep -qxF "$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; move it away first"
    fi
    install -d -m 0755 "$STATE_DIR"
    install_packages

    if live_pid "$STATE_DIR/slurmctld.pid" >/dev/null &&
        live_pid "$STATE_DIR/slurmd.pid" >/dev/null && [[ -e $CONF ]]; then
        log "already running"
    else
        cmd_down_daemons
        local host real cpus mem
        host=$(hostname -s)
        real=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
        mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
        cpus=${ACTIVERMA_SLURM_CPUS:-$((real > 8 ? real : 8))}
        [[ $cpus =~ ^[0-9]+$ && ${mem:-x} =~ ^[0-9]+$ ]] || die "cannot read CPUs/memory from 'slurmd -C'"
        install -d -m 0755 "$STATE_DIR/ctld" "$STATE_DIR/slurmd"
        start_munge
        write_conf "$host" "$cpus" "$mem"
        # -c: start from a clean state (no jobs or node states carried over).
        slurmctld -c || die "slurmctld failed to start (log: $STATE_DIR/slurmctld.log)"
        slurmd -c || die "slurmd failed to start (log: $STATE_DIR/slurmd.log)"
    fi

    local deadline=$((SECONDS + WAIT_SECS)) state=""
    while ((SECONDS < deadline)); do
        state=$(node_state)
        case $state in
        idle | mixed | allocated | completing) break ;;
        esac
        sleep 0.5
    done
    case $state in
    idle | mixed | allocated | completing) ;;
    *)
        tail -n 15 "$STATE_DIR/slurmctld.log" "$STATE_DIR/slurmd.log" >&2 || true
        die "node not ready after ${WAIT_SECS}s (state: '${state:-no answer}')"
        ;;
    esac
    cmd_status
}

# Stop daemons from their PID files: TERM to all, then KILL after a bounded
# wait (slurmd and slurmctld each take about 2 s to shut down).
stop_pid_files() {
    local f pid pids=() i alive
    for f in "$@"; do
        if pid=$(live_pid "$f"); then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
        rm -f "$f"
    done
    for ((i = 0; i < 100; i++)); do
        alive=0
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive)) || return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
}

cmd_down_daemons() {
    local i
    if live_pid "$STATE_DIR/slurmctld.pid" >/dev/null; then
        # End jobs first so that no slurmstepd/tasks outlive slurmd.
        scancel --quiet --partition=local 2>/dev/null || true
        for ((i = 0; i < 40; i++)); do
            [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.25
        done
    fi
    stop_pid_files "$STATE_DIR/slurmd.pid" "$STATE_DIR/slurmctld.pid"
}

cmd_down() {
    need_root
    cmd_down_daemons
    if [[ -e $STATE_DIR/munged.ours ]]; then
        stop_pid_files "$MUNGE_PID"
        rm -f "$STATE_DIR/munged.ours"
    fi
    if [[ -e $CONF ]] && grep -qxF "$MARKER" "$CONF"; then
        rm -f "$CONF"
    fi
    rm -rf "$STATE_DIR"
    echo "slurm-local: down"
}

cmd_status() {
    local ctld=no slurmd=no state
    live_pid "$STATE_DIR/slurmctld.pid" >/dev/null && ctld=yes
    live_pid "$STATE_DIR/slurmd.pid" >/dev/null && slurmd=yes
    if [[ $ctld == yes ]]; then
        state=$(sinfo -h -N -o '%N %T %c' 2>/dev/null | head -n1)
        echo "slurm-local: up (slurmctld=$ctld slurmd=$slurmd node: ${state:-no answer}; state in $STATE_DIR)"
    elif [[ $slurmd == yes ]]; then
        echo "slurm-local: broken (slurmd running without slurmctld; run 'down' then 'up')"
    else
        echo "slurm-local: down"
    fi
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
