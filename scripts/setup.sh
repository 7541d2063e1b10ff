#!/usr/bin/env bash
# Installs what building and testing activerma needs on a Debian machine, only if missing: a C
# toolchain and pkg-config (C API tests), gdb (a hung test's stacks), a Rust toolchain
# (Debian's cargo-web / rustc-web when no cargo is on the PATH) and a font for the report's
# plots. With --mpi, also what the mpi conduit needs: Open MPI and MPICH (libraries, headers,
# launchers) and libclang (the MPI bindings are generated at build time). With --browser, also
# what checking the report page needs: Debian's headless Chromium, its chromedriver and
# Selenium for Debian's /usr/bin/python3. With --autotools, what building Global Arrays from
# its source needs (tests/ga/run.sh). With --armci-mpi, ARMCI-MPI (Debian's libarmci-mpi-dev,
# on Open MPI): the peer of tests/ga/armci_testing.sh PEER=1. The flags combine. Safe to run
# again.
set -euo pipefail

mpi=0 browser=0 autotools=0 armci_mpi=0
for arg in "$@"; do
    case "$arg" in
        --mpi) mpi=1 ;;
        --browser) browser=1 ;;
        --autotools) autotools=1 ;;
        --armci-mpi) armci_mpi=1 ;;
        *) echo "setup: unknown option $arg (known: --mpi, --browser, --autotools, --armci-mpi)" >&2; exit 2 ;;
    esac
done

need=()
if [ $mpi = 1 ]; then
    command -v mpicc.openmpi >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
    command -v mpicc.mpich >/dev/null 2>&1 || need+=(mpich libmpich-dev)
    ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
fi
if [ $armci_mpi = 1 ]; then
    [ -f /usr/include/armci.h ] || need+=(libarmci-mpi-dev)
fi
if [ $browser = 1 ]; then
    [ -x /usr/bin/chromium ] || need+=(chromium)
    [ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
    # Debian's interpreter, not whichever python3 is first on the PATH (it may not see
    # Debian's python3-* packages).
    { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import selenium' >/dev/null 2>&1; } || need+=(python3 python3-selenium)
fi
if [ $autotools = 1 ]; then
    command -v autoreconf >/dev/null 2>&1 || need+=(autoconf)
    command -v automake >/dev/null 2>&1 || need+=(automake)
    command -v libtoolize >/dev/null 2>&1 || need+=(libtool)
    command -v make >/dev/null 2>&1 || need+=(make)
fi
# The report's plots name their axes: resvg draws the PNGs with the system's fonts.
ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || need+=(fonts-dejavu-core)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || need+=(cargo-web rustc-web)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The multi-process tests print a hung job's stacks (gdb) before its time limit kills it.
command -v gdb >/dev/null 2>&1 || need+=(gdb)

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" ca-certificates >/dev/null
fi
