#!/usr/bin/env bash
# The multi-process suite on the mpi conduit, under each MPI's own launcher: Open MPI and
# MPICH over their shared-memory paths, and Open MPI with all traffic forced through TCP; then
# the C API and ARMCI installed for each MPI, their C tests built with its mpicc, and Global
# Arrays' own test suite on the Open MPI build; then the suite again over two emulated hosts
# (scripts/emulated-hosts.sh: network namespaces, TCP between them), and the README's srun
# lines under a one-node Slurm (tests/slurm/run.sh). The last two need root.
# (Not MPICH over TCP: Debian's MPICH 4.0.2 with UCX_TLS=tcp,self hangs in MPI_Finalize even
# for a program that only creates and frees a window — see docs/NOTES.md.)
#   scripts/test-mpi.sh [openmpi|mpich ...]     (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --mpi
. scripts/env.sh
# The C API's temporary prefixes, removed however the run ends (a failed test included).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/activerma-test-mpi.XXXXXX")
hosts_up=0
trap '[ $hosts_up = 0 ] || bash scripts/emulated-hosts.sh down; rm -rf "$tmp"' EXIT
mpis=("$@")
[ ${#mpis[@]} -gt 0 ] || mpis=(openmpi mpich)
for mpi in "${mpis[@]}"; do
    transports=(0 1)
    [ "$mpi" = mpich ] && transports=(0)
    for tcp in "${transports[@]}"; do
        echo "== mpi conduit: $mpi$([ $tcp = 1 ] && echo ' over tcp')"
        MPICC=mpicc.$mpi CARGO_TARGET_DIR=target/$mpi ACTIVERMA_TEST_MPI=$mpi ACTIVERMA_TEST_MPI_TCP=$tcp \
            cargo test --release --features mpi $ARMA_PACKAGES --test multiprocess
    done
    echo "== C API on the mpi conduit: $mpi"
    prefix=$tmp/prefix-$mpi
    bash scripts/install.sh --prefix "$prefix" --mpi "$mpi" >/dev/null
    case "$mpi" in
        openmpi) launch="mpirun.openmpi --allow-run-as-root --oversubscribe -n" ;;
        mpich) launch="mpiexec.mpich -n" ;;
    esac
    PREFIX="$prefix" LAUNCH="$launch" PKG=activerma-$mpi CC=mpicc.$mpi bash tests/c/run.sh
    echo "== ARMCI on the mpi conduit: $mpi (libarmci and armci.h of the same prefix, built with mpicc)"
    PREFIX="$prefix" LAUNCH="$launch" CC=mpicc.$mpi bash tests/armci/run.sh
    if [ "$mpi" = openmpi ]; then
        # The settings of the multi-process suite's TCP run (crates/cli/tests/multiprocess/
        # driver.rs): every byte through TCP sockets, no rank mapping another's memory.
        echo "== ARMCI on the mpi conduit: openmpi over tcp"
        OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self OMPI_MCA_osc=ucx UCX_TLS=tcp,self ACTIVERMA_MPI_SHARED=off \
            PREFIX="$prefix" LAUNCH="$launch" CC=mpicc.$mpi bash tests/armci/run.sh
        # The real client: Global Arrays built on this libarmci, its own make check (says SKIP
        # when GA's source archive is not beside the repository; tests/ga/run.sh).
        echo "== Global Arrays on ARMCI: openmpi"
        PREFIX="$prefix" MPI=openmpi bash tests/ga/run.sh
        # GA's classic ARMCI test programs, on ours and on ARMCI-MPI side by side.
        echo "== GA's ARMCI test programs: openmpi, beside ARMCI-MPI"
        PREFIX="$prefix" MPI=openmpi PEER=1 bash tests/ga/armci_testing.sh
    fi
done

if [ "$(id -u)" != 0 ]; then
    echo "== SKIP emulated hosts and Slurm: they need root (network namespaces, daemons)"
    exit 0
fi
bash scripts/emulated-hosts.sh up 2
hosts_up=1
for mpi in "${mpis[@]}"; do
    # Ranks split over the two hosts; same-host ranks map each other, the others use TCP.
    echo "== mpi conduit: $mpi over 2 emulated hosts"
    MPICC=mpicc.$mpi CARGO_TARGET_DIR=target/$mpi ACTIVERMA_TEST_MPI=$mpi ACTIVERMA_TEST_MPI_HOSTS=2 \
        cargo test --release --features mpi $ARMA_PACKAGES --test multiprocess
done
bash scripts/emulated-hosts.sh down
hosts_up=0
echo "== Slurm: the README's srun lines, the C example and a killed rank under a one-node Slurm"
PREFIX_OPENMPI=$tmp/prefix-openmpi PREFIX_MPICH=$tmp/prefix-mpich bash tests/slurm/run.sh "${mpis[@]}"
