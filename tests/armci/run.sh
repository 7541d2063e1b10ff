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
build_and_run "test_contiguous test_strided test_vector test_accumulate test_rmw test_mutex test_values test_handles test_msg test_subgroups test_group_noncontig
               test_consistency test_in_flight test_errors test_armcix test_topology test_profiling" -lm
# counted_run WHAT N COUNTER "SETTINGS" PROG: PROG on N ranks under SETTINGS (NAME=VALUE ...)
# with ACTIVERMA_COUNTERS=1 must pass, and a rank's counters printed at finalize must show a
# non-zero COUNTER: the setting really took the path it names (!COUNTER: no rank may show it).
counted_run() {
    what=$1 n=$2 counter=$3 settings=$4 prog=$5
    log=$build/$(basename "$prog").$(echo "$settings" | tr -c 'A-Za-z0-9' _).$n.log
    (
        # shellcheck disable=SC2086 # the settings are words
        export ACTIVERMA_COUNTERS=1 $settings
        launch "$n" "$log" "$prog"
    )
    st=$?
    case $counter in
        !*) name=${counter#!} want=no ;;
        *) name=$counter want=yes ;;
    esac
    counted=no
    grep -q "counters:.* $name=[1-9]" "$log" && counted=yes
    if [ $st -eq 0 ] && [ $counted != $want ]; then
        echo "(a rank counted $name: $counted; expected $want)" >>"$log"
        st=1
    fi
    report "$what" "$log" $st
}
# Every contiguous transfer protocol forced for the whole run (ACTIVERMA_TRANSFER): the tests
# pass unchanged and the protocol moved their transfers.
for proto in buffered pipelined dynamic-registration; do
    counter=transfer_$(echo "$proto" | sed 's/dynamic-registration/dynamic/')
    for t in test_contiguous test_consistency test_values test_handles test_in_flight test_accumulate; do
        counted_run "$t, ACTIVERMA_TRANSFER=$proto (3 ranks)" 3 "$counter" \
            "ACTIVERMA_TRANSFER=$proto ACTIVERMA_PIPELINE_CHUNK=4K ACTIVERMA_PIPELINE_MIN=1" "$build/$t"
    done
done
# Strided and vector transfers moved by their targets (ACTIVERMA_NONCONTIG=target-assisted: the
# list in one message, the target's progress moves the pieces by scatter/gather calls): the
# tests pass unchanged and the targets moved lists (ranks that do not map each other's memory,
# ACTIVERMA_MPI_SHARED=off, get them packed instead).
moved_by=noncontig_target_moves
[ "${ACTIVERMA_MPI_SHARED:-auto}" = off ] && moved_by=noncontig_packed
for t in test_strided test_vector test_handles; do
    counted_run "$t, ACTIVERMA_NONCONTIG=target-assisted (3 ranks)" 3 $moved_by "ACTIVERMA_NONCONTIG=target-assisted" "$build/$t"
done
# Non-blocking strided transfers moved by the targets' data servers: ARMCI_Init starts one on
# every rank where the conduit allows a thread (the smp build; MPI programs at
# MPI_THREAD_MULTIPLE, which ARMCI_Init asks for when it initializes MPI itself), and a target
# of this host moves NbGetS / NbPutS patches from ACTIVERMA_NB_TARGET_FROM bytes on (1: every
# one); ranks that do not map each other's memory copy them themselves.
if [ "${ACTIVERMA_MPI_SHARED:-auto}" != off ]; then
    for t in test_in_flight test_handles; do
        counted_run "$t, ACTIVERMA_NB_TARGET_FROM=1: moved by the data servers (3 ranks)" 3 noncontig_target_moves \
            "ACTIVERMA_NB_TARGET_FROM=1" "$build/$t"
    done
fi
# The contract under every registration strategy and every progress mode. Group programs put
# their blocks in private memory each member exposes (ACTIVERMA_ARMCI_GROUP_POOL=0), which the
# strategy makes a target: on one host a put there is counted as the protocol the strategy
# implies (zero-copy where the pages count as registered or the origin holds a firehose,
# buffered through the target under bounce, dynamic registration where the target registers for
# the call). The world programs move non-blocking strided patches by their targets from the
# first byte (ACTIVERMA_NB_TARGET_FROM=1): on one host a progress thread (thread, wake) moves
# those of test_in_flight and test_handles; under app (no data server, as under a program that
# initialized MPI with plain MPI_Init) the origins copy them at issue. Under a LAUNCH
# the pairs rotate (prefix_tests.sh): test_in_flight, test_handles and test_strided cover them.
shared=yes
[ "${ACTIVERMA_MPI_SHARED:-auto}" = off ] && shared=no
rotation=0
for t in test_subgroups test_group_noncontig test_in_flight test_handles test_strided test_mutex; do
    for pair in $(pairs "none pin-all bounce rendezvous rendezvous-unpin firehose part" "app thread wake" $rotation); do
        reg=${pair%/*} progress=${pair#*/}
        case $t:$shared:$reg in
            test_subgroups:yes:bounce) counter=transfer_buffered ;;
            test_subgroups:yes:rendezvous* | test_subgroups:yes:part) counter=transfer_dynamic ;;
            test_subgroups:yes:*) counter=transfer_zero_copy ;;
            test_subgroups:*) counter=bytes_put ;;
            test_group_noncontig:* | test_strided:*) counter=noncontig_host_assisted ;;
            test_in_flight:yes:* | test_handles:yes:*)
                [ "$progress" = app ] && counter='!noncontig_target_moves' || counter=noncontig_target_moves ;;
            *) counter=bytes_got ;;
        esac
        case $t in
            test_subgroups | test_group_noncontig) settings="ACTIVERMA_ARMCI_GROUP_POOL=0" ;;
            *) settings="ACTIVERMA_NB_TARGET_FROM=1" ;;
        esac
        counted_run "$t, ACTIVERMA_REGISTRATION=$reg ACTIVERMA_PROGRESS=$progress (3 ranks)" 3 "$counter" \
            "$settings ACTIVERMA_REGISTRATION=$reg ACTIVERMA_PROGRESS=$progress" "$build/$t"
    done
    rotation=$((rotation + 1))
done
# The copy engine (ACTIVERMA_COPY_ENGINE=on) where no data server moves the patches
# (ACTIVERMA_PROGRESS=app, as under a program at MPI_THREAD_FUNNELED): it copies every
# non-blocking strided patch into or out of the targets' segments while the program goes on,
# under every registration strategy (ranks that do not map each other's memory copy them
# themselves). Under a LAUNCH the two programs share the strategies between them.
copied_by='copy_engine_jobs'
[ $shared = no ] && copied_by='!copy_engine_jobs'
i=0
for reg in none pin-all bounce rendezvous rendezvous-unpin firehose part; do
    for t in test_in_flight test_handles; do
        if [ -z "${LAUNCH:-}" ] || [ $((i % 2)) -eq "$([ $t = test_in_flight ] && echo 0 || echo 1)" ]; then
            counted_run "$t, ACTIVERMA_COPY_ENGINE=on ACTIVERMA_PROGRESS=app ACTIVERMA_REGISTRATION=$reg (3 ranks)" 3 "$copied_by" \
                "ACTIVERMA_NB_TARGET_FROM=1 ACTIVERMA_COPY_ENGINE=on ACTIVERMA_PROGRESS=app ACTIVERMA_REGISTRATION=$reg" "$build/$t"
        fi
    done
    i=$((i + 1))
done
# Accumulates through Active Access (ACTIVERMA_ARMCI_ACC=active): the targets' log handlers
# did the adding.
for t in test_accumulate test_consistency; do
    for n in 2 4; do
        counted_run "$t, ACTIVERMA_ARMCI_ACC=active ($n ranks)" "$n" log_entries_handled "ACTIVERMA_ARMCI_ACC=active" "$build/$t"
    done
done
# MPI builds, ranks that do not map each other's heaps (as across hosts): every accumulate is
# one MPI_Accumulate, those into a rank's own memory too; the tests pass unchanged.
if [ -n "${LAUNCH:-}" ]; then
    for t in test_accumulate test_consistency; do
        for n in 2 4; do
            counted_run "$t, ACTIVERMA_MPI_SHARED=off: MPI_Accumulate ($n ranks)" $n accumulate_rma "ACTIVERMA_MPI_SHARED=off" "$build/$t"
        done
    done
fi
# Emulated hosts (smp conduit, ACTIVERMA_SMP_EMULATE_REMOTE=1: every rank a host of its own,
# so an SMP domain of its own; nothing reaches another rank's memory by the CPU): the programs
# pass unchanged.
if [ -z "${LAUNCH:-}" ]; then
    for t in test_topology test_armcix test_accumulate test_contiguous test_vector test_subgroups; do
        log=$build/$t.emulated.log
        (
            export ACTIVERMA_SMP_EMULATE_REMOTE=1
            launch 3 "$log" "$build/$t"
        )
        report "$t, emulated hosts (3 ranks)" "$log" $?
    done
fi
# SMP domains: a job on one host is one domain, on the MPI builds too (their ranks map every
# heap at the owner's address: crates/transport/src/mpi/owner_views.rs), and one per rank
# where ranks share no memory (ACTIVERMA_MPI_SHARED=off).
for n in 2 4; do
    log=$build/test_topology.domains.$n.log
    if [ "${ACTIVERMA_MPI_SHARED:-auto}" = off ] || [ -n "${ACTIVERMA_SMP_EMULATE_REMOTE:-}" ]; then domains=$n; else domains=1; fi
    (
        export ARMCI_TEST_DOMAINS=$domains
        launch "$n" "$log" "$build/test_topology"
    )
    report "test_topology: $domains SMP domain(s) ($n ranks)" "$log" $?
done
if [ -n "${LAUNCH:-}" ]; then
    log=$build/test_topology.unshared.log
    (
        export ARMCI_TEST_DOMAINS=3 ACTIVERMA_MPI_SHARED=off
        launch 3 "$log" "$build/test_topology"
    )
    report "test_topology, ACTIVERMA_MPI_SHARED=off: a domain per rank (3 ranks)" "$log" $?
fi
# job_fails WHAT MESSAGE LOG N PROG [ARGS]: the job on N ranks must end with a non-zero status
# (not a timeout) and print MESSAGE.
job_fails() {
    what=$1 want=$2 log=$3 n=$4
    shift 4
    launch "$n" "$log" "$@"
    st=$?
    if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q "$want" "$log"; then
        report "$what" "$log" 0
    else
        echo "(the job exited $st; want non-zero, not a timeout, and the message)" >>"$log"
        report "$what" "$log" 1
    fi
}
# ARMCI_Error on one rank ends the whole job with a non-zero status and the message.
for n in 2 4; do
    job_fails "ARMCI_Error on one rank fails the job ($n ranks)" "deliberate failure of rank 1 (code 7)" \
        "$build/abort.$n.log" "$n" "$build/test_errors" abort
done
# Group blocks in their old home, private memory each member maps and exposes
# (ACTIVERMA_ARMCI_GROUP_POOL=0): reached through the owner's CPU or cross-memory attach.
for t in test_subgroups test_group_noncontig; do
    counted_run "$t, ACTIVERMA_ARMCI_GROUP_POOL=0 (3 ranks)" 3 bytes_put "ACTIVERMA_ARMCI_GROUP_POOL=0" "$build/$t"
done
# A group allocation that does not fit in the group pool fails on every member, with a message.
for n in 2 3; do
    job_fails "a group allocation past the group pool fails the job ($n ranks)" "does not fit in what is left of its group pool" \
        "$build/pool_full.$n.log" "$n" "$build/test_errors" pool_full
done
# The MPI builds (armci.h with ARMCI_ACTIVERMA_MPI 1): the program's own MPI beside ARMCI.
if printf '#include <armci.h>\nARMCI_ACTIVERMA_MPI\n' >"$build/is_mpi.c" &&
    $cc -E -P $cflags "$build/is_mpi.c" 2>/dev/null | tail -n 1 | grep -qx 1; then
    t=test_mpi_interplay
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    $cc -std=c11 -Wall -Wextra -Werror $cflags "$here/mpi/$t.c" -o "$build/$t" $libs >"$build/$t.cc" 2>&1
    built=$?
    for n in 2 3 4; do
        for mode in "" part; do
            if [ $built -ne 0 ]; then
                report "$t $mode ($n ranks): compiles" "$build/$t.cc" 1
                continue
            fi
            # shellcheck disable=SC2086 # the mode is one word or none
            launch "$n" "$build/$t$mode.$n.log" "$build/$t" $mode
            report "$t $mode($n ranks)" "$build/$t$mode.$n.log" $?
        done
    done
    # Refused with a message: a progress thread when the program initialized MPI with
    # MPI_THREAD_SINGLE.
    if [ $built -eq 0 ]; then
        job_fails "a progress thread under MPI_THREAD_SINGLE is refused" "only its own calls may enter MPI" \
            "$build/thread.log" 4 "$build/$t" thread
    fi
fi
# Every declared function links: a C file that takes each one's address (header and library
# agree on names and the static archive works too).
{
    echo '#include <armcix.h>'
    echo 'typedef void (*fp)(void);'
    echo 'int main(void) { volatile fp all[] = {'
    # The preprocessor drops the comments and pulls in armci.h and message.h (and mpi.h in an MPI build,
    # whose functions the grep leaves out).
    # (From a file: MPI's compiler wrappers add their flags only when they see a source file.)
    echo '#include <armcix.h>' >"$build/declared.c"
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    $cc -E -P $cflags "$build/declared.c" |
        tr '\n' ' ' | tr ';' '\n' | grep -v 'typedef\|enum' |
        sed -n 's/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\) *(.*/\1/p' |
        grep '^P\{0,1\}ARMCI\(X\)\{0,1\}_\|^armci_' | sort -u | sed 's/.*/(fp)\&&,/'
    echo '}; return all[0] == 0; }'
} >"$build/all.c"
if $cc -std=c11 $cflags "$build/all.c" -o "$build/all" $libs >"$build/all.log" 2>&1 && [ "$(grep -c '(fp)' "$build/all.c")" -gt 90 ]; then
    report "every function of armci.h, message.h and armcix.h links ($(grep -c '(fp)' "$build/all.c"))" "$build/all.log" 0
else
    cat "$build/all.c" >>"$build/all.log"
    report "every function of armci.h, message.h and armcix.h links" "$build/all.log" 1
fi

echo "armci-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
