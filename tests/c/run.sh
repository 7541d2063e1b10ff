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
# takes the rank count last, e.g. LAUNCH="mpiexec.mpich -n" (a library built with --mpi).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# As the README tells a user of a prefix of their own: PATH and PKG_CONFIG_PATH, and no
# LD_LIBRARY_PATH, which would hide a program that cannot find the library by itself.
if [ -n "${PREFIX:-}" ]; then
    export PATH="$PREFIX/bin:$PATH"
    export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
command -v activerma >/dev/null 2>&1 || { echo "run.sh: no activerma launcher on PATH; run scripts/install.sh or set PREFIX" >&2; exit 2; }
pkg-config --exists activerma || { echo "run.sh: pkg-config does not know activerma; run scripts/install.sh or set PREFIX" >&2; exit 2; }

cc=${CC:-cc}
limit=${TIMEOUT:-120}
cflags=$(pkg-config --cflags activerma)
libs=$(pkg-config --libs activerma)
build=$(mktemp -d "${TMPDIR:-/tmp}/activerma-c-tests.XXXXXX")
# sh runs the EXIT trap on exit only: a signal exits first (and so removes the folder too).
trap 'rm -rf "$build"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

passed=0
failed=0
# report WHAT LOG STATUS: one PASS or FAIL line (with the log on failure), counted.
report() {
    if [ "$3" -eq 0 ]; then
        echo "PASS $1"
        passed=$((passed + 1))
    else
        echo "FAIL $1: exit status $3"
        sed 's/^/    /' "$2"
        failed=$((failed + 1))
    fi
}
tests="hello test_rma test_errors active_access"
for t in $tests; do
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    $cc -std=c11 -pedantic -Wall -Wextra -Werror $cflags "$here/$t.c" -o "$build/$t" $libs >"$build/$t.cc" 2>&1
    built=$?
    for n in 2 3 4; do
        if [ $built -ne 0 ]; then
            echo "FAIL $t ($n ranks): does not compile"
            [ "$n" -eq 2 ] && sed 's/^/    /' "$build/$t.cc"
            failed=$((failed + 1))
            continue
        fi
        # The launcher's own timeout names the stuck job; `timeout` is the backstop.
        if [ -n "${LAUNCH:-}" ]; then
            # shellcheck disable=SC2086 # LAUNCH is a command and its options
            timeout "$limit" $LAUNCH "$n" "$build/$t" >"$build/$t.$n.log" 2>&1
        else
            timeout "$limit" activerma run -n "$n" --label --timeout "$((limit - 5))" -- "$build/$t" >"$build/$t.$n.log" 2>&1
        fi
        report "$t ($n ranks)" "$build/$t.$n.log" $?
    done
done
# The README's C example, built and run exactly as the README says (its "C" block), with no
# LD_LIBRARY_PATH even if the caller has one: the program must find libactiverma by itself.
readme() (
    cd "$build" || exit 1
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    cc "$here/hello.c" -o hello $(pkg-config --cflags --libs activerma) || exit 1
    env -u LD_LIBRARY_PATH timeout "$limit" activerma run -n 4 -- ./hello
)
readme >"$build/readme.log" 2>&1
report "readme (built and run as the README says, no LD_LIBRARY_PATH)" "$build/readme.log" $?

echo "c-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
