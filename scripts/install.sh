#!/bin/sh
# Builds activerma in release and installs the C library, header, pkg-config file and the
# `activerma` launcher:  scripts/install.sh [--prefix DIR] [--mpi openmpi|mpich]
# (default prefix /usr/local; --mpi builds the library with the mpi conduit against that MPI:
# libactiverma-openmpi / -mpich with pkg-config name activerma-openmpi / activerma-mpich, which
# can sit beside the default build in one prefix; libarmci and armci.h are one per prefix)
# Safe to run again: every file is replaced (unlinked first, so running programs keep theirs).
set -eu

prefix=/usr/local
mpi=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) [ $# -ge 2 ] || { echo "install.sh: --mpi needs openmpi or mpich" >&2; exit 2; }
               mpi=$2; shift 2 ;;
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
                  prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        -h|--help) echo "usage: scripts/install.sh [--prefix DIR] [--mpi openmpi|mpich]   (default /usr/local)"; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (usage: scripts/install.sh [--prefix DIR] [--mpi openmpi|mpich])" >&2; exit 2 ;;
    esac
done
case "$prefix" in
    /*) ;;
    *) prefix=$(pwd)/$prefix ;;   # the .pc file needs an absolute prefix
esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
features=""
setup=""
if [ -n "$mpi" ]; then
    case "$mpi" in openmpi|mpich) ;; *) echo "install.sh: --mpi takes openmpi or mpich" >&2; exit 2 ;; esac
    setup=--mpi
    export MPICC=mpicc.$mpi CARGO_TARGET_DIR=$root/target/$mpi
    features="--features mpi"
fi
# The README runs this first on a fresh machine: install what building needs, if missing.
# shellcheck disable=SC2086 # empty or one flag
bash scripts/setup.sh $setup
. scripts/env.sh
# shellcheck disable=SC2086 # lists of flags (scripts/env.sh says why these packages)
cargo build --release $ARMA_PACKAGES $features
target=${CARGO_TARGET_DIR:-$root/target}/release
# "path+file:///…/crates/capi#activerma-capi@0.1.0" (or "…#0.1.0" on older cargo)
version=$(cargo pkgid -p activerma-capi | sed 's/.*[#@]//')

install -d "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/bin"
# The build is libactiverma_capi.*; C programs know it as libactiverma (SONAME libactiverma.so.0),
# or, built for an MPI, as libactiverma-openmpi / -mpich (crates/capi/build.rs sets the SONAME).
lib=activerma${mpi:+-$mpi}
soname=$(objdump -p "$target/libactiverma_capi.so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "lib$lib.so.0" ] || { echo "install.sh: the library's SONAME is '$soname', expected lib$lib.so.0" >&2; exit 1; }
install -m 755 "$target/libactiverma_capi.so" "$prefix/lib/lib$lib.so.$version"
ln -sfn "lib$lib.so.$version" "$prefix/lib/lib$lib.so.0"
ln -sfn "lib$lib.so.0" "$prefix/lib/lib$lib.so"
install -m 644 "$target/libactiverma_capi.a" "$prefix/lib/lib$lib.a"
install -m 644 include/activerma.h "$prefix/include/activerma.h"
# The launcher of the default build (an MPI build's programs start under mpirun / srun).
if [ -z "$mpi" ] || [ ! -e "$prefix/bin/activerma" ]; then
    install -m 755 "$target/activerma" "$prefix/bin/activerma"
fi
# ARMCI (crates/armci): libarmci.so.0 (its SONAME, set in crates/armci/build.rs), armci.h,
# message.h and armcix.h, for existing ARMCI programs.
install -m 755 "$target/libarmci.so" "$prefix/lib/libarmci.so.$version"
ln -sfn "libarmci.so.$version" "$prefix/lib/libarmci.so.0"
ln -sfn "libarmci.so.0" "$prefix/lib/libarmci.so"
install -m 644 "$target/libarmci.a" "$prefix/lib/libarmci.a"
# The MPI builds' armci.h includes <mpi.h> and declares the calls that take a communicator.
if [ -n "$mpi" ]; then
    sed 's/^#define ARMCI_ACTIVERMA_MPI 0$/#define ARMCI_ACTIVERMA_MPI 1/' crates/armci/include/armci.h > "$prefix/include/armci.h.tmp"
    grep -q '^#define ARMCI_ACTIVERMA_MPI 1$' "$prefix/include/armci.h.tmp" || { echo "install.sh: armci.h has no ARMCI_ACTIVERMA_MPI line" >&2; exit 1; }
    chmod 644 "$prefix/include/armci.h.tmp"
    mv -f "$prefix/include/armci.h.tmp" "$prefix/include/armci.h"
else
    install -m 644 crates/armci/include/armci.h "$prefix/include/armci.h"
fi
install -m 644 crates/armci/include/message.h "$prefix/include/message.h"
install -m 644 crates/armci/include/armcix.h "$prefix/include/armcix.h"
esc=$(printf '%s' "$prefix" | sed 's/[\\&|]/\\&/g')
# How the installed libraries' programs start (said in the .pc descriptions).
launcher="activerma run"
[ -z "$mpi" ] || launcher="mpirun of $mpi"

# Programs built with `pkg-config --libs activerma` record where the library is (an rpath),
# so they start without LD_LIBRARY_PATH. Not for /usr: /usr/lib is in the dynamic linker's
# built-in search path. /usr/local/lib is found only through ld.so.cache, which is stale until
# ldconfig runs (below, as root; a non-root member of group staff may install there without
# it), so it keeps the rpath. Debian's linker writes it as DT_RUNPATH, which LD_LIBRARY_PATH
# still overrides.
# shellcheck disable=SC2016 # ${libdir} is pkg-config's variable, written as it is
rpath=' -Wl,-rpath,${libdir}'
if [ "$prefix" = /usr ]; then rpath=""; fi
for pc in crates/capi/activerma.pc.in crates/armci/armci.pc.in; do
    name=$(basename "$pc" .in)
    [ "$name" = activerma.pc ] && name=$lib.pc
    sed -e "s|@PREFIX@|$esc|g" -e "s|@VERSION@|$version|g" -e "s|@RPATH@|$rpath|g" -e "s|@LAUNCHER@|$launcher|g" \
        -e "s|@LIB@|$lib|g" "$pc" > "$prefix/lib/pkgconfig/$name.tmp"
    mv -f "$prefix/lib/pkgconfig/$name.tmp" "$prefix/lib/pkgconfig/$name"
    chmod 644 "$prefix/lib/pkgconfig/$name"
done

# The dynamic linker only finds a new library in a system directory after ldconfig.
case "$prefix" in
    /usr|/usr/local)
        if [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then
            ldconfig
        else
            echo "install.sh: run 'ldconfig' as root so that programs find $prefix/lib/libactiverma.so" >&2
        fi ;;
    *)
        echo "install.sh: $prefix is not a system prefix; to use it:"
        echo "  export PATH=$prefix/bin:\$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig" ;;
esac
echo "installed $lib $version (pkg-config $lib; and libarmci, pkg-config armci) into $prefix (lib, include, lib/pkgconfig, bin)"
