#!/usr/bin/env bash
# The "remote shell" of scripts/emulated-hosts.sh: what ssh would be on a cluster. Called by an
# MPI launcher (Open MPI's plm_rsh_agent, hydra's -launcher-exec) as
#   emulated-host-agent.sh [ssh-style options] HOST COMMAND...
# HOST is an emulated host's name (arma-hostK) or address (10.77.0.K+1). Like ssh, it joins
# COMMAND's words with spaces and has a shell run them, here inside that host: its network
# namespace (ip netns exec, which also gives a private mount namespace), a UTS namespace with
# the host's own hostname, and in that mount namespace its own /dev/shm (an empty tmpfs), its
# own /etc/hosts (every emulated host's name) and its own kernel boot id (UCX tells one machine
# from another by it, so without this UCX would pick its shared-memory transports between
# emulated hosts). The command inherits the launcher's environment (ssh would not), so every
# variable of the caller reaches the daemons and, through them, the ranks.
set -euo pipefail
state=/run/activerma-emulated-hosts
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
    case $1 in
        -l | -p | -o | -i | -F | -E) shift 2 ;;
        *) shift ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: $0 [options] HOST COMMAND..." >&2; exit 255; }
host=$1
shift
case $host in
    arma-host[0-9]*) ns=$host ;;
    10.77.0.[0-9]*) ns=arma-host$((${host#10.77.0.} - 1)) ;;
    *) echo "$0: $host is not an emulated host" >&2; exit 255 ;;
esac
if [ ! -e "/run/netns/$ns" ] || [ ! -f "$state/$ns/boot_id" ]; then
    echo "$0: emulated host $ns is not up (scripts/emulated-hosts.sh up N)" >&2
    exit 255
fi
# shellcheck disable=SC2016  # expanded by the inner shell
exec ip netns exec "$ns" unshare --uts -- /bin/bash -c '
    set -e
    hostname "$1"
    mount --bind "$2/boot_id" /proc/sys/kernel/random/boot_id
    mount --bind "$2/hosts" /etc/hosts
    mount -t tmpfs -o mode=1777,size=50% "$1-shm" /dev/shm
    set +e
    exec /bin/bash -c "$3"' emulated-host "$ns" "$state/$ns" "$*"
