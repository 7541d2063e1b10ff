/*
 * osu_style_put_latency.c - MPI_Put latency, following the OSU micro-benchmark
 * one-sided methodology (osu_put_latency, default "flush" synchronization).
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 *
 * Method (per message size, 2 ranks, rank 0 = origin, rank 1 = target):
 *   - window: MPI_Win_allocate(max(size, 4 KiB)) on both ranks, new window per
 *     size (padded: Debian MPICH 4.0.2 loses/misplaces data on windows < 16 B)
 *   - origin: MPI_Win_lock(MPI_LOCK_SHARED, 1) once (or -s exclusive / lockall),
 *     then skip+iters times { MPI_Put(size bytes -> rank 1); MPI_Win_flush(1) },
 *     clock started after the skip warm-up iterations, stopped before unlock
 *   - target: idle in MPI_Barrier (passive target)
 *   - latency = elapsed / iters  (what OSU prints: an average)
 *   - this is repeated -r times; the reported "latency_us" is the average over
 *     all timed iterations of all repetitions, "median_us" the median of the
 *     per-repetition averages.
 *
 * Usage: mpirun -n 2 ./osu_style_put_latency [-i IMPL] [-m [MIN:]MAX] [-n ITERS]
 *        [-N ITERS_LARGE] [-x SKIP] [-X SKIP_LARGE] [-r REPS]
 *        [-s shared|exclusive|lockall] [--quick] [--json]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "osu_put_latency"
#define LARGE_MESSAGE_SIZE 8192 /* above this: iters_large / skip_large */
#define MAX_REPS 64
#define MIN_WINDOW_BYTES 4096 /* window padding, see below */

enum sync_mode { SYNC_SHARED, SYNC_EXCLUSIVE, SYNC_LOCKALL };
static const char *sync_names[] = {"shared", "exclusive", "lockall"};

typedef struct {
    const char *impl;
    size_t min_size, max_size;
    long iters, skip, iters_large, skip_large;
    int reps, json;
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

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10;
    else if (*end == 'm' || *end == 'M') v <<= 20;
    return (size_t)v;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: " BENCH_NAME " [-i IMPL] [-m [MIN:]MAX] [-n ITERS] [-N ITERS_LARGE]\n"
            "       [-x SKIP] [-X SKIP_LARGE] [-r REPS] [-s shared|exclusive|lockall]\n"
            "       [--quick] [--json]\n"
            "  defaults: sizes 8..4M, iters 10000 (1000 above 8 KiB), skip 100 (10),\n"
            "  reps 5, lock shared + flush per op.  --quick: iters 1000/100, skip 10/2,\n"
            "  reps 3, max 1M.  --json: JSON lines on stdout, table on stderr.\n");
}

/* returns 0 ok, 1 = exit(0), -1 = error */
static int parse_args(int argc, char **argv, opts_t *o)
{
    o->impl = "unknown";
    o->min_size = 8;
    o->max_size = 4u << 20;
    o->iters = 10000; o->skip = 100;
    o->iters_large = 1000; o->skip_large = 10;
    o->reps = 5; o->json = 0; o->sync = SYNC_SHARED;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *v = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--json")) { o->json = 1; continue; }
        if (!strcmp(s, "--quick")) {
            o->iters = 1000; o->skip = 10; o->iters_large = 100; o->skip_large = 2;
            o->reps = 3; o->max_size = 1u << 20;
            continue;
        }
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) return 1;
        if (!v) return -1;
        if (!strcmp(s, "-i")) o->impl = v;
        else if (!strcmp(s, "-m")) {
            const char *c = strchr(v, ':');
            if (c) { o->min_size = parse_size(v); o->max_size = parse_size(c + 1); }
            else o->max_size = parse_size(v);
        }
        else if (!strcmp(s, "-n")) o->iters = atol(v);
        else if (!strcmp(s, "-N")) o->iters_large = atol(v);
        else if (!strcmp(s, "-x")) o->skip = atol(v);
        else if (!strcmp(s, "-X")) o->skip_large = atol(v);
        else if (!strcmp(s, "-r")) o->reps = atoi(v);
        else if (!strcmp(s, "-s")) {
            if (!strcmp(v, "shared")) o->sync = SYNC_SHARED;
            else if (!strcmp(v, "exclusive")) o->sync = SYNC_EXCLUSIVE;
            else if (!strcmp(v, "lockall")) o->sync = SYNC_LOCKALL;
            else return -1;
        }
        else return -1;
        a++;
    }
    if (o->min_size < 1 || o->max_size < o->min_size || o->iters < 1 ||
        o->iters_large < 1 || o->skip < 0 || o->skip_large < 0 ||
        o->reps < 1 || o->reps > MAX_REPS)
        return -1;
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

static void lock_target(const opts_t *o, MPI_Win win)
{
    if (o->sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_lock_all(0, win));
    else MPI_CHECK(MPI_Win_lock(o->sync == SYNC_SHARED ? MPI_LOCK_SHARED
                                                     : MPI_LOCK_EXCLUSIVE, 1, 0, win));
}

static void unlock_target(const opts_t *o, MPI_Win win)
{
    if (o->sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_unlock_all(win));
    else MPI_CHECK(MPI_Win_unlock(1, win));
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
        fprintf(tab, "# OSU-style MPI_Put Latency Test (activerma peer bench)\n");
        fprintf(tab, "# impl: %s | %s\n", o.impl, lib);
        fprintf(tab, "# Window creation: MPI_Win_allocate\n");
        fprintf(tab, "# Synchronization: %s + MPI_Win_flush per op\n",
                o.sync == SYNC_LOCKALL ? "MPI_Win_lock_all"
                : o.sync == SYNC_SHARED ? "MPI_Win_lock(shared)"
                                        : "MPI_Win_lock(exclusive)");
        fprintf(tab, "%-10s%20s%14s%14s%16s\n", "# Size", "Avg Latency(us)",
                "Median(us)", "Min(us)", "iters x reps");
        fflush(tab);
    }

    char *sbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, o.max_size) != 0) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a' + rank, o.max_size);

    int errors = 0;
    for (size_t size = o.min_size; size <= o.max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? o.iters_large : o.iters;
        long skip = size > LARGE_MESSAGE_SIZE ? o.skip_large : o.skip;
        char *wbase = NULL;
        MPI_Win win;
        /* pad: Debian MPICH 4.0.2 mishandles MPI_Win_allocate windows < 16 B */
        size_t wbytes = size < MIN_WINDOW_BYTES ? MIN_WINDOW_BYTES : size;
        MPI_CHECK(MPI_Win_allocate((MPI_Aint)wbytes, 1, MPI_INFO_NULL,
                                   MPI_COMM_WORLD, &wbase, &win));
        memset(wbase, 0, wbytes);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

        double per_rep[MAX_REPS], total = 0.0;
        for (int r = 0; r < o.reps; r++) {
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank == 0) {
                double t0 = 0.0, t1;
                lock_target(&o, win);
                for (long i = 0; i < skip + iters; i++) {
                    if (i == skip) t0 = MPI_Wtime();
                    MPI_CHECK(MPI_Put(sbuf, (int)size, MPI_CHAR, 1, 0, (int)size,
                                      MPI_CHAR, win));
                    MPI_CHECK(MPI_Win_flush(1, win));
                }
                t1 = MPI_Wtime();
                unlock_target(&o, win);
                per_rep[r] = (t1 - t0) * 1e6 / (double)iters;
                total += t1 - t0;
            }
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        }

        /* sanity check (untimed): the target must see the origin's bytes */
        if (rank == 1) {
            MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
            MPI_CHECK(MPI_Win_sync(win));
            if (wbase[0] != 'a' || wbase[size - 1] != 'a') {
                fprintf(stderr, BENCH_NAME ": ERROR: size %zu: put data not "
                        "visible at target\n", size);
                errors++;
            }
            MPI_CHECK(MPI_Win_unlock(1, win));
        }

        if (rank == 0) {
            double avg = total * 1e6 / ((double)iters * o.reps);
            double med = median(per_rep, o.reps); /* sorts per_rep */
            fprintf(tab, "%-10zu%20.4f%14.4f%14.4f%10ld x %d\n", size, avg, med,
                    per_rep[0], iters, o.reps);
            fflush(tab);
            if (o.json) {
                printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"size\": %zu, "
                       "\"latency_us\": %.4f, \"median_us\": %.4f, \"min_us\": %.4f, "
                       "\"iters\": %ld, \"reps\": %d, \"sync\": \"%s\"}\n",
                       o.impl, BENCH_NAME, size, avg, med, per_rep[0], iters,
                       o.reps, sync_names[o.sync]);
                fflush(stdout);
            }
        }
        MPI_CHECK(MPI_Win_free(&win));
        if (size > o.max_size / 2) break; /* avoid overflow on huge -m */
    }

    free(sbuf);
    int all_errors = 0;
    MPI_CHECK(MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return all_errors ? 3 : 0;
}
