#!/bin/sh
# Global Arrays, the main real client of ARMCI, built from its unmodified source on an
# installed MPI build of libarmci, and its own test suite (`make check`: 38 programs) run on
# 2 ranks under that MPI's launcher.
#
#   scripts/install.sh --prefix /tmp/p --mpi openmpi
#   PREFIX=/tmp/p MPI=openmpi tests/ga/run.sh
#
# GA_TARBALL names GA's source archive (default: ../shared/ext/ga-*.tar.gz beside the
# repository, the snapshot described in its README); without one the script says SKIP and
# exits 0. TIMEOUT (seconds, default 300, GA's own recipe) bounds each test program but those
# GA_SLOW names (default: sprs_test), which SLOW_TIMEOUT bounds (default 900); GA_SKIP lists
# programs to skip (default: cache_test, see below); KEEP=1 keeps the build folder.
# Prints GA's summary; exits non-zero if a test failed.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${PREFIX:?PREFIX must name a prefix that scripts/install.sh --mpi filled}"
mpi=${MPI:-openmpi}
limit=${TIMEOUT:-300}
# cache_test multiplies matrices of up to 4096² in its own loops, twice: compute-bound, about
# 10 minutes on a 2-vCPU machine whatever the ARMCI (it passed in 626 s with TIMEOUT raised), so
# it cannot pass GA's 300 s limit there. GA_SKIP= runs it (with TIMEOUT=1500).
skip=${GA_SKIP-cache_test}
# sprs_test is compute-bound too: `perf record` of a rank puts 94 % of its time in the test's
# own matrix_test loops (its serial reference products), and a quiet run took 228 s here —
# under GA's 300 s with little to spare, so a loaded machine (CI's other jobs) pushed it past
# (its log then stops in the int section, as if it hung: three CI runs so far). It gets
# SLOW_TIMEOUT (default 900 s) instead of TIMEOUT.
slow=${GA_SLOW-sprs_test}
slow_limit=${SLOW_TIMEOUT:-900}
case "$mpi" in
    openmpi) launch="mpiexec.openmpi --allow-run-as-root --oversubscribe" ;;
    mpich) launch="mpiexec.mpich" ;;
    *) echo "ga/run.sh: MPI is openmpi or mpich, not $mpi" >&2; exit 2 ;;
esac
. "$here/tarball.sh" "Global Arrays"
grep -q '^#define ARMCI_ACTIVERMA_MPI 1$' "$PREFIX/include/armci.h" ||
    { echo "ga/run.sh: $PREFIX/include/armci.h is not an MPI build (scripts/install.sh --mpi $mpi)" >&2; exit 2; }
bash "$root/scripts/setup.sh" --mpi --autotools >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/ga-test.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "== Global Arrays ($(basename "$tarball")) on $PREFIX, $mpi, in $work"
tar -xzf "$tarball" -C "$work"
cd "$work/ga"
autoreconf -if >"$work/autoreconf.log" 2>&1 || { tail -n 20 "$work/autoreconf.log"; exit 1; }
mkdir build && cd build
# The rpath lets GA's programs find libarmci without LD_LIBRARY_PATH, as pkg-config's would.
../configure CC=mpicc.$mpi MPICC=mpicc.$mpi MPICXX=mpicxx.$mpi LDFLAGS="-Wl,-rpath,$PREFIX/lib" \
    --disable-f77 --without-blas --without-lapack --without-scalapack --with-armci="$PREFIX" \
    >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log"; exit 1; }
grep -i "ARMCI_Group.comm\|library containing ARMCI_Init" "$work/configure.log" | sed 's/^/    /'
make -j2 >"$work/make.log" 2>&1 || { grep -B2 -A10 "rror" "$work/make.log" | head -n 60; exit 1; }
make -j2 checkprogs >"$work/checkprogs.log" 2>&1 || { grep -B2 -A10 "rror" "$work/checkprogs.log" | head -n 60; exit 1; }
# Debian's automake test driver runs LOG_COMPILER with the program (GA's own launcher hook
# does not work with it: every test would exit 127).
# A program named in GA_SKIP exits 77, which the driver counts as SKIP.
cat >"$work/launch.sh" <<EOF
#!/bin/sh
for program; do :; done
case " $skip " in
    *" \$(basename "\$program" .x) "*) echo "skipped by GA_SKIP"; exit 77 ;;
esac
case " $slow " in
    *" \$(basename "\$program" .x) "*) exec timeout $slow_limit $launch "\$@" ;;
esac
exec timeout $limit $launch "\$@"
EOF
chmod +x "$work/launch.sh"
status=0
make -k check LOG_COMPILER="$work/launch.sh" LOG_FLAGS="-n 2" >"$work/check.log" 2>&1 || status=$?
grep '^PASS\|^FAIL\|^ERROR\|^XPASS\|^SKIP' "$work/check.log" || true
sed -n '/^# TOTAL/,/^# ERROR/p' test-suite.log
# GA's test-suite.log holds the log of every failed program.
[ $status -eq 0 ] || grep -A 30 '^FAIL: \|^ERROR: ' test-suite.log | head -n 200
exit $status
