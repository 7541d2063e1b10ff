# Sourced by tests/c/run.sh and tests/armci/run.sh: C test programs built against an INSTALLED
# prefix, as a user builds them (pkg-config), and run through the launcher. Defines
#   prefix_setup PACKAGE   PATH / PKG_CONFIG_PATH from PREFIX; cc, limit, cflags, libs, build
#   report WHAT LOG STATUS one PASS or FAIL line (the log on failure), counted in passed/failed
#   launch N LOG PROG ...  PROG on N ranks (LAUNCH="mpiexec.mpich -n" replaces the launcher)
#   build_and_run "TESTS" [EXTRA_LIBS]   each $here/T.c compiled, run with 2, 3 and 4 ranks
#   pairs "AS" "BS" ROTATION             the settings pairs A/B a program runs under
# The caller sets `here` (its folder) first.

prefix_setup() {
    # As the README tells a user of a prefix of their own: PATH and PKG_CONFIG_PATH, and no
    # LD_LIBRARY_PATH, which would hide a program that cannot find the library by itself.
    if [ -n "${PREFIX:-}" ]; then
        export PATH="$PREFIX/bin:$PATH"
        export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    fi
    command -v activerma >/dev/null 2>&1 || { echo "run.sh: no activerma launcher on PATH; run scripts/install.sh or set PREFIX" >&2; exit 2; }
    pkg-config --exists "$1" || { echo "run.sh: pkg-config does not know $1; run scripts/install.sh or set PREFIX" >&2; exit 2; }
    cc=${CC:-cc}
    limit=${TIMEOUT:-120}
    cflags=$(pkg-config --cflags "$1")
    libs=$(pkg-config --libs "$1")
    build=$(mktemp -d "${TMPDIR:-/tmp}/$1-c-tests.XXXXXX")
    # sh runs the EXIT trap on exit only: a signal exits first (and so removes the folder too).
    trap 'rm -rf "$build"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    passed=0
    failed=0
}

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

launch() {
    n=$1 log=$2
    shift 2
    # The launcher's own timeout names the stuck job; `timeout` is the backstop.
    if [ -n "${LAUNCH:-}" ]; then
        # shellcheck disable=SC2086 # LAUNCH is a command and its options
        timeout "$limit" $LAUNCH "$n" "$@" >"$log" 2>&1
    else
        timeout "$limit" activerma run -n "$n" --label --timeout "$((limit - 5))" -- "$@" >"$log" 2>&1
    fi
}

build_and_run() {
    for t in $1; do
        # shellcheck disable=SC2086 # pkg-config output and EXTRA_LIBS are lists of flags
        $cc -std=c11 -pedantic -Wall -Wextra -Werror $cflags "$here/$t.c" -o "$build/$t" $libs ${2:-} >"$build/$t.cc" 2>&1
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
}

# pairs "AS" "BS" ROTATION: the pairs A/B of two settings' values a program runs under, one word
# each. On the launcher (a run starts in a fraction of a second) every pair; under LAUNCH (an
# MPI start-up costs seconds per run) every A once, its B rotating, starting at B number
# ROTATION: programs given successive rotations cover every pair between them.
pairs() {
    nb=$(echo "$2" | wc -w)
    ia=0
    for a in $1; do
        ib=0
        for b in $2; do
            if [ -z "${LAUNCH:-}" ] || [ $(((ia + $3) % nb)) -eq $ib ]; then
                echo "$a/$b"
            fi
            ib=$((ib + 1))
        done
        ia=$((ia + 1))
    done
}
