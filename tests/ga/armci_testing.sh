#!/usr/bin/env bash
# The classic ARMCI test programs Global Arrays ships (armci/testing/*.c in its source archive,
# unmodified), built against an installed libarmci as any ARMCI program is and run on it; with
# PEER=1 also against ARMCI-MPI (Debian's libarmci-mpi-dev, Open MPI) in the same run, so the
# table shows which pass on each.
#
#   scripts/install.sh --prefix /tmp/p && PREFIX=/tmp/p tests/ga/armci_testing.sh
#   scripts/install.sh --prefix /tmp/q --mpi openmpi && PREFIX=/tmp/q PEER=1 tests/ga/armci_testing.sh
#
# An smp build runs the programs under the prefix's `activerma run`, an MPI build (armci.h with
# ARMCI_ACTIVERMA_MPI 1) under that MPI's launcher (MPI=openmpi|mpich, default openmpi).
# GA_TARBALL names the archive (default ../shared/ext/ga-*.tar.gz beside the repository;
# without one: SKIP, exit 0). TIMEOUT bounds each run (default 300 s). Exits non-zero if a
# program fails on ours (with PEER=1: also if ARMCI-MPI's build or run breaks the script).
#
# Which programs, and with how many ranks (GA's Makefile.am runs its ARMCI_PARALLEL_TESTS on
# any count; some of them check against formulas that hold only for some counts):
#   test, perf, perf_aggr, perf_nb, perf2, simplelock, msgcheck, testnotify   2 ranks
#   test2 (its sums use nproc/2 and a sign rule that hold for 4), test_groups (needs 4)  4 ranks
#   simple, perf_strided (include mpi.h): MPI builds only
# Not ARMCI programs (they include GA's ARMCI internals: iterator.h, utils.h, gpc.h, armcip.h,
# its checkpoint types): testitr, test_mt, gpctest, ipctest, fttest; shmtest probes System V
# shared memory without calling ARMCI.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${PREFIX:?PREFIX must name a prefix that scripts/install.sh filled}"
limit=${TIMEOUT:-300}
peer=${PEER:-0}
. "$here/tarball.sh" "GA's ARMCI test programs"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if grep -q '^#define ARMCI_ACTIVERMA_MPI 1$' "$PREFIX/include/armci.h"; then
    mpi=${MPI:-openmpi}
    cc=(mpicc."$mpi")
    case "$mpi" in
        openmpi) ours_launch=(mpiexec.openmpi --allow-run-as-root --oversubscribe -n) ;;
        mpich) ours_launch=(mpiexec.mpich -n) ;;
        *) echo "armci_testing.sh: MPI is openmpi or mpich, not $mpi" >&2; exit 2 ;;
    esac
    build_kind="the $mpi build"
else
    mpi=""
    cc=(cc)
    ours_launch=("$PREFIX/bin/activerma" run --timeout "$limit" -n)
    build_kind="the smp build"
fi
if [ "$peer" = 1 ]; then
    bash "$root/scripts/setup.sh" --mpi --armci-mpi >/dev/null || { echo "armci_testing.sh: installing ARMCI-MPI failed" >&2; exit 1; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ga-armci-testing.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tar -xzf "$tarball" -C "$work" ga/armci/testing || { echo "armci_testing.sh: $tarball has no ga/armci/testing" >&2; exit 1; }
src=$work/ga/armci/testing
# The programs include config.h when HAVE_CONFIG_H is set and guard their system headers
# with HAVE_*: what GA's configure would find on Linux.
for h in STDIO_H STDLIB_H ASSERT_H UNISTD_H MATH_H STRING_H STRINGS_H TIME_H SYS_TIME_H SYS_TYPES_H; do
    echo "#define HAVE_$h 1"
done >"$work/config.h"

programs="test:2 perf:2 perf_aggr:2 perf_nb:2 perf2:2 simplelock:2 msgcheck:2 testnotify:2 test2:4 test_groups:4"
[ -n "$mpi" ] && programs="$programs simple:2 perf_strided:2"

# build WHICH PROG: compiles PROG for ours (pkg-config armci) or ARMCI-MPI's (its static
# library; GA's replacements of armci_msg_init / finalize, which ARMCI-MPI lacks, beside it).
build() {
    local which=$1 prog=$2 out=$work/$1.$2
    if [ "$which" = ours ]; then
        # shellcheck disable=SC2046 # pkg-config output is a list of flags
        "${cc[@]}" -O2 -w -DHAVE_CONFIG_H -I"$work" "$src/$prog.c" -o "$out" $(pkg-config --cflags --libs armci) -lm
    else
        mpicc.openmpi -O2 -w -DHAVE_CONFIG_H -I"$work" "$src/$prog.c" "$src/rpl_armci_msg_init.c" \
            "$src/rpl_armci_msg_finalize.c" -o "$out" -larmci-openmpi -lm
    fi
}

# run WHICH PROG N: "PASS 12s", "FAIL 3s" (the log's tail is printed), "no build"
run() {
    local which=$1 prog=$2 n=$3 log=$work/$1.$2.log start st
    if ! build "$which" "$prog" >"$log.cc" 2>&1; then
        echo "no build"
        return
    fi
    start=$(date +%s)
    if [ "$which" = ours ]; then
        (cd "$work" && timeout -k 5 "$limit" "${ours_launch[@]}" "$n" "$work/$which.$prog") >"$log" 2>&1
    else
        (cd "$work" && timeout -k 5 "$limit" mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$n" "$work/$which.$prog") >"$log" 2>&1
    fi
    st=$?
    if [ $st -eq 0 ]; then echo "PASS $(($(date +%s) - start))s"; else echo "FAIL $(($(date +%s) - start))s (exit $st)"; fi
}

echo "== GA's ARMCI test programs ($(basename "$tarball"), armci/testing) on $build_kind in $PREFIX"
printf '%-14s %5s  %-22s %s\n' program ranks "activerma" "$([ "$peer" = 1 ] && echo "ARMCI-MPI (Open MPI)")"
failed=0
for p in $programs; do
    prog=${p%%:*} n=${p##*:}
    ours=$(run ours "$prog" "$n")
    theirs=""
    [ "$peer" = 1 ] && theirs=$(run theirs "$prog" "$n")
    printf '%-14s %5s  %-22s %s\n' "$prog" "$n" "$ours" "$theirs"
    case "$ours" in
        PASS*) ;;
        *)
            failed=$((failed + 1))
            { tail -n 20 "$work/ours.$prog.log.cc"; tail -n 20 "$work/ours.$prog.log"; } 2>/dev/null | sed 's/^/    /'
            ;;
    esac
done
echo "not built (GA's ARMCI internals, not the ARMCI API): testitr test_mt gpctest ipctest fttest; shmtest (no ARMCI calls)"
if [ $failed -gt 0 ]; then
    echo "armci_testing.sh: $failed program(s) failed on activerma"
    exit 1
fi
echo "armci_testing.sh: every program passed on activerma"
