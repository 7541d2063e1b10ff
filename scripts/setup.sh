#!/usr/bin/env bash
# Installs what building and testing activerma needs on a Debian machine, only if missing:
# a C toolchain and pkg-config (C API tests), and a Rust toolchain (Debian's cargo-web /
# rustc-web when no cargo is on the PATH). With --mpi, also what the mpi conduit needs: Open
# MPI and MPICH (libraries, headers, launchers) and libclang (the MPI bindings are generated
# at build time). Safe to run again.
set -euo pipefail

need=()
if [ "${1:-}" = "--mpi" ]; then
    command -v mpicc.openmpi >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
    command -v mpicc.mpich >/dev/null 2>&1 || need+=(mpich libmpich-dev)
    ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
fi
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || need+=(cargo-web rustc-web)
command -v python3 >/dev/null 2>&1 || need+=(python3)

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" ca-certificates >/dev/null
fi
