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
. "$here/../prefix_tests.sh"
prefix_setup armci
build_and_run "test_contiguous test_strided test_vector test_accumulate test_rmw test_mutex test_values test_handles test_msg
               test_consistency test_errors" -lm
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
