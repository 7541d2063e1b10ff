#!/usr/bin/env bash
# Builds activerma with the mpi conduit against one MPI from Debian:
#   scripts/build-mpi.sh openmpi|mpich [cargo args...]
# into target/<mpi>/ (each MPI needs its own build: MPI has no common binary interface).
# Run programs with that MPI's launcher, e.g.
#   mpirun.openmpi -n 64 target/openmpi/release/examples/demo     (on a cluster: mpirun / srun)
#   mpiexec.mpich  -n 4  target/mpich/release/examples/demo
set -euo pipefail
cd "$(dirname "$0")/.."
mpi=${1:?usage: scripts/build-mpi.sh openmpi|mpich [cargo args...]}
shift
case "$mpi" in
    openmpi|mpich) ;;
    *) echo "build-mpi.sh: unknown MPI '$mpi' (openmpi or mpich)" >&2; exit 2 ;;
esac
bash scripts/setup.sh --mpi
. scripts/env.sh
export MPICC=mpicc.$mpi CARGO_TARGET_DIR=target/$mpi
# shellcheck disable=SC2086 # a list of flags (scripts/env.sh says why these)
cargo build --release --features mpi $ARMA_PACKAGES --examples --bins "$@"
echo "built target/$mpi/release/activerma and target/$mpi/release/examples/ with the mpi conduit ($mpi)"
