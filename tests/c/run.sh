#!/bin/sh
# Builds the C tests against the INSTALLED activerma (header, library and launcher, as a user
# would) and runs each through the launcher with 2, 3 and 4 ranks; then builds and runs the
# README's C example exactly as the README says.
#
#   scripts/install.sh --prefix /tmp/arma-prefix && PREFIX=/tmp/arma-prefix tests/c/run.sh
#
# Without PREFIX, activerma must be on PATH and known to pkg-config. Prints one PASS/FAIL line
# per run and a summary line; exits non-zero on any failure. TIMEOUT (seconds, default 120)
# bounds each run; CC picks the compiler. LAUNCH replaces the launcher with another one that
# takes the rank count last, e.g. LAUNCH="mpiexec.mpich -n", with PKG the library built for that
# MPI (PKG=activerma-mpich: scripts/install.sh --mpi mpich) and CC its mpicc.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../prefix_tests.sh"
pkg=${PKG:-activerma}
prefix_setup "$pkg"
build_and_run "hello test_rma test_errors active_access test_dsm"

# The DSM's C test under the protocols other than the default (invalidate-rdma), 3 ranks.
for protocol in invalidate update-in-place update-diff; do
    (export ACTIVERMA_DSM_PROTOCOL=$protocol && launch 3 "$build/test_dsm.$protocol.log" "$build/test_dsm")
    report "test_dsm (3 ranks, ACTIVERMA_DSM_PROTOCOL=$protocol)" "$build/test_dsm.$protocol.log" $?
done
# And the page-granular mode (first accesses by the MMU), under the default protocol.
(export ACTIVERMA_DSM_ACCESS=mmu && launch 3 "$build/test_dsm.mmu.log" "$build/test_dsm")
report "test_dsm (3 ranks, ACTIVERMA_DSM_ACCESS=mmu)" "$build/test_dsm.mmu.log" $?

# The C contract under every registration strategy and progress mode (test_rma: segments and
# exposed heap and stack memory of the other ranks, every byte checked), and Active Access
# under every notification mode of its logs and every progress mode; which pairs run under a
# LAUNCH: prefix_tests.sh (pairs).
for pair in $(pairs "none pin-all bounce rendezvous rendezvous-unpin firehose part" "app thread wake" 0); do
    reg=${pair%/*} progress=${pair#*/}
    (export ACTIVERMA_REGISTRATION=$reg ACTIVERMA_PROGRESS=$progress && launch 3 "$build/test_rma.$reg.$progress.log" "$build/test_rma")
    report "test_rma (3 ranks, ACTIVERMA_REGISTRATION=$reg ACTIVERMA_PROGRESS=$progress)" "$build/test_rma.$reg.$progress.log" $?
done
for pair in $(pairs "poll wake thread" "app thread wake" 0); do
    notify=${pair%/*} progress=${pair#*/}
    (export ACTIVERMA_AA_NOTIFY=$notify ACTIVERMA_PROGRESS=$progress && launch 3 "$build/aa.$notify.$progress.log" "$build/active_access")
    report "active_access (3 ranks, ACTIVERMA_AA_NOTIFY=$notify ACTIVERMA_PROGRESS=$progress)" "$build/aa.$notify.$progress.log" $?
done

# A rank that dies and is replaced: the launcher's --respawn (one host; not under LAUNCH).
if [ -z "${LAUNCH:-}" ]; then
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    $cc -std=c11 -pedantic -Wall -Wextra -Werror -D_DEFAULT_SOURCE $cflags "$here/test_respawn.c" -o "$build/test_respawn" $libs >"$build/test_respawn.cc" 2>&1
    built=$?
    for n in 2 3; do
        if [ $built -ne 0 ]; then
            report "test_respawn ($n ranks): does not compile" "$build/test_respawn.cc" 1
            continue
        fi
        timeout "$limit" activerma run -n "$n" --respawn 1 --label --timeout "$((limit - 5))" -- "$build/test_respawn" >"$build/test_respawn.$n.log" 2>&1
        report "test_respawn ($n ranks, --respawn 1)" "$build/test_respawn.$n.log" $?
    done
fi

# The README's C example, built and run exactly as the README says (its "C" block; under
# LAUNCH its "C across hosts" block: that MPI's mpicc and launcher), with no LD_LIBRARY_PATH
# even if the caller has one: the program must find libactiverma by itself.
readme() (
    cd "$build" || exit 1
    if [ -n "${LAUNCH:-}" ]; then
        # shellcheck disable=SC2046 # pkg-config output is a list of flags
        $cc "$here/hello.c" -o hello $(pkg-config --cflags --libs "$pkg") || exit 1
        # shellcheck disable=SC2086 # LAUNCH is a command and its options
        env -u LD_LIBRARY_PATH timeout "$limit" $LAUNCH 4 ./hello
    else
        # shellcheck disable=SC2046 # pkg-config output is a list of flags
        cc "$here/hello.c" -o hello $(pkg-config --cflags --libs activerma) || exit 1
        env -u LD_LIBRARY_PATH timeout "$limit" activerma run -n 4 -- ./hello
    fi
)
readme >"$build/readme.log" 2>&1
report "readme (built and run as the README says, no LD_LIBRARY_PATH)" "$build/readme.log" $?

echo "c-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
