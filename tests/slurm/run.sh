#!/usr/bin/env bash
# The README's `srun` lines under a real Slurm on this machine (scripts/slurm-local.sh starts a
# one-node controller and daemon, and stops them at the end):
#   - the demo built for each MPI (scripts/build-mpi.sh), srun -n 4: Open MPI through PMIx,
#     MPICH through PMI2 (Debian's MPICH has only a PMI-1 client, which Slurm's pmi2 serves);
#   - with PREFIX_OPENMPI / PREFIX_MPICH (scripts/install.sh --prefix P --mpi openmpi|mpich):
#     the C example built with that MPI's mpicc against libactiverma-openmpi / -mpich, srun -n 4;
#     and a rank that dies (dies.c): the step ends well within the time limit, non-zero, and
#     srun names the task.
#   tests/slurm/run.sh [openmpi|mpich ...]      (default: both; needs root)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mpis=("$@")
[ ${#mpis[@]} -gt 0 ] || mpis=(openmpi mpich)
bash "$root/scripts/slurm-local.sh" up || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/activerma-slurm.XXXXXX")
trap 'bash "$root/scripts/slurm-local.sh" down >/dev/null 2>&1; rm -rf "$work"' EXIT
# report WHAT LOG STATUS: one PASS or FAIL line, counted (the C tests' helper).
. "$here/../prefix_tests.sh"
passed=0
failed=0
for mpi in "${mpis[@]}"; do
    case $mpi in
        openmpi) plugin=pmix ;;
        mpich) plugin=pmi2 ;;
        *) echo "run.sh: openmpi or mpich, not $mpi" >&2; exit 2 ;;
    esac
    log=$work/build-$mpi.log
    bash "$root/scripts/build-mpi.sh" "$mpi" >"$log" 2>&1
    report "build the demo for $mpi" "$log" $?
    demo=$root/target/$mpi/release/examples/demo
    # The README's line, with 4 ranks: every rank reports its put, get and ticket.
    log=$work/demo-$mpi.log
    timeout 120 srun -Q -n 4 --mpi=$plugin "$demo" >"$log" 2>&1
    status=$?
    [ $status -ne 0 ] || [ "$(grep -c '^atomic: rank' "$log")" = 4 ] || status=1
    report "srun -n 4 --mpi=$plugin target/$mpi/release/examples/demo" "$log" $status
    prefix_var=PREFIX_${mpi^^}
    prefix=${!prefix_var:-}
    if [ -n "$prefix" ]; then
        flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs "activerma-$mpi")
        # shellcheck disable=SC2086 # pkg-config output is a list of flags
        "mpicc.$mpi" "$root/tests/c/hello.c" -o "$work/hello-$mpi" $flags >"$work/cc.log" 2>&1
        report "mpicc.$mpi tests/c/hello.c \$(pkg-config --cflags --libs activerma-$mpi)" "$work/cc.log" $?
        (cd "$work" && env -u LD_LIBRARY_PATH timeout 120 srun -Q -n 4 --mpi=$plugin "./hello-$mpi") >"$work/hello.log" 2>&1
        report "srun -n 4 --mpi=$plugin ./hello (C, libactiverma-$mpi)" "$work/hello.log" $?
        # shellcheck disable=SC2086
        "mpicc.$mpi" "$here/dies.c" -o "$work/dies-$mpi" $flags >"$work/cc-dies.log" 2>&1 || { report "build dies.c" "$work/cc-dies.log" 1; continue; }
        # A rank that dies: the step must end by itself (well before the time limit),
        # non-zero, naming the task.
        log=$work/dies-$mpi.log
        start=$(date +%s)
        timeout 60 srun -Q -n 3 --mpi=$plugin "$work/dies-$mpi" >"$log" 2>&1
        status=$?
        took=$(($(date +%s) - start))
        ok=1
        if [ $status -ne 0 ] && [ $status -ne 124 ] && [ $took -lt 30 ] && grep -q "task 1" "$log"; then ok=0; fi
        echo "(exit status $status after ${took} s)" >>"$log"
        report "a rank killed under srun --mpi=$plugin ends the step in ${took} s, naming it" "$log" $ok
    fi
done
echo "slurm: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
