#!/bin/sh
# Builds the ARMCI C tests against the INSTALLED libarmci (armci.h, message.h, armci.pc and the
# launcher, as a user would) and runs each through the launcher with 2, 3 and 4 ranks.
#
#   scripts/install.sh --prefix /tmp/armci-prefix && PREFIX=/tmp/armci-prefix tests/armci/run.sh
#
# Without PREFIX, activerma must be on PATH and armci known to pkg-config. Prints one PASS/FAIL
# line per run and a summary line; exits non-zero on any failure. TIMEOUT (seconds, default
# 120) bounds each run; CC picks the compiler.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# As a user of a prefix of their own: PATH and PKG_CONFIG_PATH, no LD_LIBRARY_PATH (the
# programs must find libarmci through the rpath armci.pc gives them).
if [ -n "${PREFIX:-}" ]; then
    export PATH="$PREFIX/bin:$PATH"
    export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
command -v activerma >/dev/null 2>&1 || { echo "run.sh: no activerma launcher on PATH; run scripts/install.sh or set PREFIX" >&2; exit 2; }
pkg-config --exists armci || { echo "run.sh: pkg-config does not know armci; run scripts/install.sh or set PREFIX" >&2; exit 2; }

cc=${CC:-cc}
limit=${TIMEOUT:-120}
cflags=$(pkg-config --cflags armci)
libs=$(pkg-config --libs armci)
build=$(mktemp -d "${TMPDIR:-/tmp}/armci-tests.XXXXXX")
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
launch() { # launch N LOG PROGRAM [ARGS]: runs PROGRAM on N ranks, its output in LOG
    n=$1 log=$2
    shift 2
    timeout "$limit" activerma run -n "$n" --label --timeout "$((limit - 5))" -- "$@" >"$log" 2>&1
}
tests="test_contiguous test_strided test_vector test_accumulate test_rmw test_mutex test_values test_handles test_msg
       test_consistency test_errors"
for t in $tests; do
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    $cc -std=c11 -pedantic -Wall -Wextra -Werror $cflags "$here/$t.c" -o "$build/$t" $libs -lm >"$build/$t.cc" 2>&1
    built=$?
    for n in 2 3 4; do
        if [ $built -ne 0 ]; then
            echo "FAIL $t ($n ranks): does not compile"
            [ "$n" -eq 2 ] && sed 's/^/    /' "$build/$t.cc"
            failed=$((failed + 1))
            continue
        fi
        launch "$n" "$build/$t.$n.log" "$build/$t"
        report "$t ($n ranks)" "$build/$t.$n.log" $?
    done
done
# ARMCI_Error on one rank ends the whole job with a non-zero status and the message.
for n in 2 4; do
    launch "$n" "$build/abort.$n.log" "$build/test_errors" abort
    st=$?
    if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q "deliberate failure of rank 1 (code 7)" "$build/abort.$n.log"; then
        report "ARMCI_Error on one rank fails the job ($n ranks)" "$build/abort.$n.log" 0
    else
        echo "(the job exited $st; want non-zero, not a timeout, and the message)" >>"$build/abort.$n.log"
        report "ARMCI_Error on one rank fails the job ($n ranks)" "$build/abort.$n.log" 1
    fi
done
# Every declared function links: a C file that takes each one's address (header and library
# agree on names and the static archive works too).
{
    echo '#include <armci.h>'
    echo 'typedef void (*fp)(void);'
    echo 'int main(void) { volatile fp all[] = {'
    # The preprocessor drops the comments and pulls in message.h.
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    echo '#include <armci.h>' | $cc -E -P $cflags - |
        tr '\n' ' ' | tr ';' '\n' | grep -v 'typedef\|enum' |
        sed -n 's/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\) *(.*/\1/p' | sort -u | sed 's/.*/(fp)\&&,/'
    echo '}; return all[0] == 0; }'
} >"$build/all.c"
if $cc -std=c11 $cflags "$build/all.c" -o "$build/all" $libs >"$build/all.log" 2>&1 && [ "$(grep -c '(fp)' "$build/all.c")" -gt 90 ]; then
    report "every function of armci.h and message.h links ($(grep -c '(fp)' "$build/all.c"))" "$build/all.log" 0
else
    cat "$build/all.c" >>"$build/all.log"
    report "every function of armci.h and message.h links" "$build/all.log" 1
fi

echo "armci-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
