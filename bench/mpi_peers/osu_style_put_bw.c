/*
 * osu_style_put_bw.c - MPI_Put bandwidth, following the OSU micro-benchmark
 * one-sided methodology (osu_put_bw, default "flush" synchronization).
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 *
 * Method (per message size, 2 ranks, rank 0 = origin, rank 1 = target):
 *   - window: MPI_Win_allocate(max(size * W, 4 KiB)) on both ranks (new window
 *     per size), W = window size (-w, default 64 like OSU)
 *   - origin: MPI_Win_lock(MPI_LOCK_SHARED, 1) once (or -s exclusive / lockall),
 *     then skip+iters times { W x MPI_Put(size bytes -> rank 1, offset j*size);
 *     MPI_Win_flush(1) }, clock started after the skip warm-up iterations
 *   - target: idle in MPI_Barrier (passive target)
 *   - bandwidth = size * W * iters / elapsed, in MB/s (10^6 bytes/s, like OSU)
 *   - repeated -r times; "bandwidth_mbs" is over all timed iterations of all
 *     repetitions, "median_mbs" the median of the per-repetition values.
 *
 * Usage: mpirun -n 2 ./osu_style_put_bw [-i IMPL] [-m [MIN:]MAX] [-w WINDOW]
 *        [-n ITERS] [-N ITERS_LARGE] [-x SKIP] [-X SKIP_LARGE] [-r REPS]
 *        [-s shared|exclusive|lockall] [--quick] [--json]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "osu_put_bw"
#define LARGE_MESSAGE_SIZE 8192 /* above this: iters_large / skip_large */
#define MAX_REPS 64
#define MIN_WINDOW_BYTES 4096 /* window padding, see below */

enum sync_mode { SYNC_SHARED, SYNC_EXCLUSIVE, SYNC_LOCKALL };
static const char *sync_names[] = {"shared", "exclusive", "lockall"};

typedef struct {
    const char *impl;
    size_t min_size, max_size;
    long iters, skip, iters_large, skip_large;
    int reps, json, window;
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
            "usage: " BENCH_NAME " [-i IMPL] [-m [MIN:]MAX] [-w WINDOW] [-n ITERS] [-N ITERS_LARGE]\n"
            "       [-x SKIP] [-X SKIP_LARGE] [-r REPS] [-s shared|exclusive|lockall]\n"
            "       [--quick] [--json]\n"
            "  defaults: sizes 8..4M, window 64, iters 100 (20 above 8 KiB), skip 10 (2),\n"
            "  reps 3, lock shared + flush per window.  --quick: iters 20/5, skip 2/1,\n"
            "  reps 2, max 1M.  --json: JSON lines on stdout, table on stderr.\n");
}

/* returns 0 ok, 1 = exit(0), -1 = error */
static int parse_args(int argc, char **argv, opts_t *o)
{
    o->impl = "unknown";
    o->min_size = 8;
    o->max_size = 4u << 20;
    o->iters = 100; o->skip = 10;
    o->iters_large = 20; o->skip_large = 2;
    o->reps = 3; o->json = 0; o->sync = SYNC_SHARED; o->window = 64;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *v = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--json")) { o->json = 1; continue; }
        if (!strcmp(s, "--quick")) {
            o->iters = 20; o->skip = 2; o->iters_large = 5; o->skip_large = 1;
            o->reps = 2; o->max_size = 1u << 20;
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
        else if (!strcmp(s, "-w")) o->window = atoi(v);
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
        o->reps < 1 || o->reps > MAX_REPS || o->window < 1)
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
        fprintf(tab, "# OSU-style MPI_Put Bandwidth Test (activerma peer bench)\n");
        fprintf(tab, "# impl: %s | %s\n", o.impl, lib);
        fprintf(tab, "# Window creation: MPI_Win_allocate\n");
        fprintf(tab, "# Window size: %d puts per flush\n", o.window);
        fprintf(tab, "# Synchronization: %s + MPI_Win_flush per window\n",
                o.sync == SYNC_LOCKALL ? "MPI_Win_lock_all"
                : o.sync == SYNC_SHARED ? "MPI_Win_lock(shared)"
                                        : "MPI_Win_lock(exclusive)");
        fprintf(tab, "%-10s%20s%14s%14s%16s\n", "# Size", "Bandwidth(MB/s)",
                "Median(MB/s)", "Max(MB/s)", "iters x reps");
        fflush(tab);
    }

    char *sbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, o.max_size * (size_t)o.window) != 0) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a' + rank, o.max_size * (size_t)o.window);

    int errors = 0;
    for (size_t size = o.min_size; size <= o.max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? o.iters_large : o.iters;
        long skip = size > LARGE_MESSAGE_SIZE ? o.skip_large : o.skip;
        char *wbase = NULL;
        MPI_Win win;
        size_t wbytes = size * (size_t)o.window;
        /* pad: Debian MPICH 4.0.2 mishandles MPI_Win_allocate windows < 16 B */
        size_t alloc = wbytes < MIN_WINDOW_BYTES ? MIN_WINDOW_BYTES : wbytes;
        MPI_CHECK(MPI_Win_allocate((MPI_Aint)alloc, 1, MPI_INFO_NULL,
                                   MPI_COMM_WORLD, &wbase, &win));
        memset(wbase, 0, alloc);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

        double per_rep[MAX_REPS], total = 0.0;
        for (int r = 0; r < o.reps; r++) {
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank == 0) {
                double t0 = 0.0, t1;
                lock_target(&o, win);
                for (long i = 0; i < skip + iters; i++) {
                    if (i == skip) t0 = MPI_Wtime();
                    for (int j = 0; j < o.window; j++)
                        MPI_CHECK(MPI_Put(sbuf + (size_t)j * size, (int)size, MPI_CHAR,
                                          1, (MPI_Aint)j * (MPI_Aint)size, (int)size,
                                          MPI_CHAR, win));
                    MPI_CHECK(MPI_Win_flush(1, win));
                }
                t1 = MPI_Wtime();
                unlock_target(&o, win);
                per_rep[r] = (double)wbytes * (double)iters / 1e6 / (t1 - t0);
                total += t1 - t0;
            }
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        }

        /* sanity check (untimed): the target must see the origin's bytes */
        if (rank == 1) {
            MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
            MPI_CHECK(MPI_Win_sync(win));
            if (wbase[0] != 'a' || wbase[wbytes - 1] != 'a') {
                fprintf(stderr, BENCH_NAME ": ERROR: size %zu: put data not "
                        "visible at target\n", size);
                errors++;
            }
            MPI_CHECK(MPI_Win_unlock(1, win));
        }

        if (rank == 0) {
            double bw = (double)wbytes * (double)iters * o.reps / 1e6 / total;
            double med = median(per_rep, o.reps); /* sorts per_rep */
            double best = per_rep[o.reps - 1];
            fprintf(tab, "%-10zu%20.2f%14.2f%14.2f%10ld x %d\n", size, bw, med,
                    best, iters, o.reps);
            fflush(tab);
            if (o.json) {
                printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"size\": %zu, "
                       "\"bandwidth_mbs\": %.2f, \"median_mbs\": %.2f, \"max_mbs\": %.2f, "
                       "\"window\": %d, \"iters\": %ld, \"reps\": %d, \"sync\": \"%s\"}\n",
                       o.impl, BENCH_NAME, size, bw, med, best, o.window, iters,
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
