/*
 * osu_style_fop_latency.c - MPI_Fetch_and_op latency, following the OSU
 * micro-benchmark one-sided methodology (osu_fop_latency, default "flush"
 * synchronization).
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 *
 * Method (2 ranks, rank 0 = origin, rank 1 = target):
 *   - window: MPI_Win_allocate on both ranks, padded to 4 KiB (-p BYTES).  Debian's
 *     MPICH 4.0.2 loses MPI_Fetch_and_op updates on MPI_Win_allocate windows
 *     smaller than 16 bytes per rank, so the window is never that small.
 *   - origin: MPI_Win_lock(MPI_LOCK_SHARED, 1) once (or -s exclusive / lockall),
 *     then skip+iters times { MPI_Fetch_and_op(+1, 64-bit integer
 *     (MPI_LONG_LONG) at displacement 0 of rank 1, MPI_SUM); MPI_Win_flush(1) },
 *     clock started after the skip warm-up iterations, stopped before unlock
 *   - target: idle in MPI_Barrier (passive target)
 *   - latency = elapsed / iters; repeated -r times; "latency_us" is over all
 *     timed iterations of all repetitions, "median_us" the median of the
 *     per-repetition averages.
 *   - verification: at the end the target's counter must equal the number of
 *     operations issued and every fetched value must be the previous count;
 *     otherwise an ERROR is printed and the exit status is 3.
 *
 * Usage: mpirun -n 2 ./osu_style_fop_latency [-i IMPL] [-n ITERS] [-x SKIP]
 *        [-r REPS] [-p WINDOW_BYTES] [-s shared|exclusive|lockall]
 *        [--quick] [--json]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "osu_fop_latency"
#define MAX_REPS 64
#define MIN_WINDOW_BYTES 4096

enum sync_mode { SYNC_SHARED, SYNC_EXCLUSIVE, SYNC_LOCKALL };
static const char *sync_names[] = {"shared", "exclusive", "lockall"};

typedef struct {
    const char *impl;
    long iters, skip;
    int reps, json;
    size_t win_bytes;
    enum sync_mode sync;
} opts_t;

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != MPI_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__,     \
                    #call, rc_);                                               \
            MPI_Abort(MPI_COMM_WORLD, 2);                                      \
        }                                                                      \
    } while (0)

static void usage(void)
{
    fprintf(stderr,
            "usage: " BENCH_NAME " [-i IMPL] [-n ITERS] [-x SKIP] [-r REPS]\n"
            "       [-p WINDOW_BYTES] [-s shared|exclusive|lockall] [--quick] [--json]\n"
            "  defaults: iters 10000, skip 100, reps 5, window 4096 bytes (-p < 16 only to\n"
            "  reproduce the MPICH 4.0.2 lost-update bug), "
            "lock shared + flush per op.\n  --quick: iters 1000, skip 10, reps 3.\n"
            "  --json: JSON lines on stdout, table on stderr.\n");
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    o->impl = "unknown";
    o->iters = 10000; o->skip = 100; o->reps = 5; o->json = 0;
    o->win_bytes = MIN_WINDOW_BYTES; o->sync = SYNC_SHARED;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *v = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--json")) { o->json = 1; continue; }
        if (!strcmp(s, "--quick")) { o->iters = 1000; o->skip = 10; o->reps = 3; continue; }
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) return 1;
        if (!v) return -1;
        if (!strcmp(s, "-i")) o->impl = v;
        else if (!strcmp(s, "-n")) o->iters = atol(v);
        else if (!strcmp(s, "-x")) o->skip = atol(v);
        else if (!strcmp(s, "-r")) o->reps = atoi(v);
        else if (!strcmp(s, "-p")) o->win_bytes = (size_t)strtoull(v, NULL, 10);
        else if (!strcmp(s, "-m")) { /* accepted for symmetry; fop is 8 bytes */ }
        else if (!strcmp(s, "-s")) {
            if (!strcmp(v, "shared")) o->sync = SYNC_SHARED;
            else if (!strcmp(v, "exclusive")) o->sync = SYNC_EXCLUSIVE;
            else if (!strcmp(v, "lockall")) o->sync = SYNC_LOCKALL;
            else return -1;
        }
        else return -1;
        a++;
    }
    if (o->win_bytes < sizeof(long long)) o->win_bytes = sizeof(long long);
    if (o->iters < 1 || o->skip < 0 || o->reps < 1 || o->reps > MAX_REPS) return -1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    opts_t o;
    MPI_CHECK(MPI_Init(&argc, &argv));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nprocs));

    int pr = parse_args(argc, argv, &o);
    if (pr != 0) {
        if (rank == 0) usage();
        MPI_Finalize();
        return pr > 0 ? 0 : 1;
    }
    if (nprocs != 2) {
        if (rank == 0) fprintf(stderr, BENCH_NAME ": needs exactly 2 ranks\n");
        MPI_Finalize();
        return 1;
    }

    FILE *tab = o.json ? stderr : stdout;
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        fprintf(tab, "# OSU-style MPI_Fetch_and_op (MPI_SUM, 64-bit) Latency Test "
                     "(activerma peer bench)\n");
        fprintf(tab, "# impl: %s | %s\n", o.impl, lib);
        fprintf(tab, "# Window creation: MPI_Win_allocate (%zu bytes per rank)\n",
                o.win_bytes);
        fprintf(tab, "# Synchronization: %s + MPI_Win_flush per op\n",
                o.sync == SYNC_LOCKALL ? "MPI_Win_lock_all"
                : o.sync == SYNC_SHARED ? "MPI_Win_lock(shared)"
                                        : "MPI_Win_lock(exclusive)");
        fprintf(tab, "%-10s%20s%14s%14s%16s\n", "# Size", "Avg Latency(us)",
                "Median(us)", "Min(us)", "iters x reps");
        fflush(tab);
    }

    long long *wbase = NULL;
    MPI_Win win;
    MPI_CHECK(MPI_Win_allocate((MPI_Aint)o.win_bytes, 1, MPI_INFO_NULL,
                               MPI_COMM_WORLD, &wbase, &win));
    memset(wbase, 0, o.win_bytes);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    const long long one = 1;
    long long fetched = -1, expect = 0;
    long bad_fetch = 0;
    double per_rep[MAX_REPS], total = 0.0;
    for (int r = 0; r < o.reps; r++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
            double t0 = 0.0, t1;
            if (o.sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_lock_all(0, win));
            else MPI_CHECK(MPI_Win_lock(o.sync == SYNC_SHARED ? MPI_LOCK_SHARED
                                                             : MPI_LOCK_EXCLUSIVE,
                                        1, 0, win));
            for (long i = 0; i < o.skip + o.iters; i++) {
                if (i == o.skip) t0 = MPI_Wtime();
                MPI_CHECK(MPI_Fetch_and_op(&one, &fetched, MPI_LONG_LONG, 1, 0,
                                           MPI_SUM, win));
                MPI_CHECK(MPI_Win_flush(1, win));
                /* untimed-cost check: one compare per op, no extra MPI call */
                if (fetched != expect) bad_fetch++;
                expect++;
            }
            t1 = MPI_Wtime();
            if (o.sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_unlock_all(win));
            else MPI_CHECK(MPI_Win_unlock(1, win));
            per_rep[r] = (t1 - t0) * 1e6 / (double)o.iters;
            total += t1 - t0;
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* verification: the target's counter must equal the number of ops */
    int errors = 0;
    long long expected_total = (long long)(o.skip + o.iters) * o.reps;
    long long final_value = -1;
    if (rank == 1) {
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
        MPI_CHECK(MPI_Win_sync(win));
        final_value = wbase[0];
        MPI_CHECK(MPI_Win_unlock(1, win));
    }
    MPI_CHECK(MPI_Bcast(&final_value, 1, MPI_LONG_LONG, 1, MPI_COMM_WORLD));
    if (rank == 0) {
        if (final_value != expected_total) {
            fprintf(stderr, BENCH_NAME ": ERROR: lost updates: target counter = %lld, "
                    "expected %lld (%lld lost)\n", final_value, expected_total,
                    expected_total - final_value);
            errors++;
        }
        if (bad_fetch) {
            fprintf(stderr, BENCH_NAME ": ERROR: %ld fetched values were not the "
                    "previous counter value\n", bad_fetch);
            errors++;
        }
        double avg = total * 1e6 / ((double)o.iters * o.reps);
        double med = median(per_rep, o.reps);
        fprintf(tab, "%-10d%20.4f%14.4f%14.4f%10ld x %d\n", 8, avg, med, per_rep[0],
                o.iters, o.reps);
        fprintf(tab, "# verification: counter %lld / expected %lld: %s\n", final_value,
                expected_total, errors ? "FAILED" : "ok");
        fflush(tab);
        if (o.json && !errors) {
            printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"size\": 8, "
                   "\"latency_us\": %.4f, \"median_us\": %.4f, \"min_us\": %.4f, "
                   "\"iters\": %ld, \"reps\": %d, \"sync\": \"%s\"}\n",
                   o.impl, BENCH_NAME, avg, med, per_rep[0], o.iters, o.reps,
                   sync_names[o.sync]);
            fflush(stdout);
        }
    }

    MPI_CHECK(MPI_Win_free(&win));
    MPI_CHECK(MPI_Bcast(&errors, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return errors ? 3 : 0;
}
