/*
 * osu_timing.h - the timing harness of the peer benchmarks in this folder (armci_bench.c,
 * core_c_bench.c): one program includes it once. Each test times `reps` batches of `iters`
 * operations after `skip` untimed ones and reports the median, min and max per-operation
 * latency over the batches: a table line on stderr, a JSON line on stdout.
 */
#ifndef OSU_TIMING_H
#define OSU_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_REPS 64

/* The program's settings: batches, untimed operations first, and the implementation's name
 * in every JSON line (main sets them from its arguments). */
static int reps = 11;
static long skip = 50;
static const char *impl = "unnamed";
/* Operations per batch: for transfers up to 8 KiB, and for larger ones. */
static long iters_small = 2000, iters_large = 50;

/* --quick: a smoke run of a few seconds, fewer operations and batches. */
static void quick_settings(void)
{
    iters_small = 300;
    iters_large = 10;
    skip = 10;
    reps = 5;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char *test; /* "put", "get", "acc", "rmw", "gets", "getv", "accs", "mutex" */
    long size;        /* bytes moved per operation */
    long rows;        /* strided: rows of size/rows bytes; 0 for contiguous */
    long iters;
    int reps;             /* batches timed (set by measure) */
    long skipped;         /* untimed operations before them (set by measure) */
    double med, min, max; /* us per operation */
} result_t;

/* Runs op skip times untimed, then reps batches of iters timed (fewer of both for an operation
 * too slow for BUDGET); fills med/min/max, reps and skipped. Always
 * inlined, so that each call site's op (a constant) is inlined into the timed loop: an indirect
 * call per operation would add the harness's own nanosecond to 8-byte latencies of ten, which
 * activerma's Rust benchmarks, whose loops inline the operation, do not pay. */
typedef void (*op_fn)(long i, void *ctx);

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Seconds one test may take: an operation slower than BUDGET / (skip + iters * reps) gets
 * fewer iterations (at least 1) and batches (at least 3), the same rule for every library
 * (ARMCI-MPI's accumulates over TCP take milliseconds each). */
#define BUDGET 10.0

static ALWAYS_INLINE void measure(result_t *r, op_fn op, void *ctx)
{
    double per[MAX_REPS];
    long i = 0;
    double t_first = now();
    op(i++, ctx);
    double one = now() - t_first;
    r->reps = reps;
    r->skipped = skip;
    if (one * (double)(skip + r->iters * reps) > BUDGET) {
        long fit = (long)(BUDGET / (one > 1e-9 ? one : 1e-9));
        r->skipped = fit / 10 < skip ? fit / 10 : skip;
        r->reps = 3;
        r->iters = (fit - r->skipped) / r->reps;
        if (r->iters < 1) r->iters = 1;
    }
    if (r->skipped < 1) r->skipped = 1; /* the first operation above */
    for (long k = 1; k < r->skipped; k++) op(i++, ctx);
    for (int rep = 0; rep < r->reps; rep++) {
        double t0 = now();
        for (long k = 0; k < r->iters; k++) op(i++, ctx);
        per[rep] = (now() - t0) * 1e6 / (double)r->iters;
    }
    qsort(per, (size_t)r->reps, sizeof(double), cmp_double);
    r->med = (r->reps & 1) ? per[r->reps / 2] : 0.5 * (per[r->reps / 2 - 1] + per[r->reps / 2]);
    r->min = per[0];
    r->max = per[r->reps - 1];
}

static void report(const result_t *r)
{
    double mbs = r->size > 0 ? (double)r->size / r->med : 0.0; /* bytes/us = MB/s */
    char what[64];
    if (r->rows) snprintf(what, sizeof what, "%s %ldx%ld B", r->test, r->rows, r->size / r->rows);
    else snprintf(what, sizeof what, "%s %ld B", r->test, r->size);
    fprintf(stderr, "%-22s%14.4f%12.4f%12.4f%14.2f%10ld x %d\n", what, r->med, r->min, r->max, mbs, r->iters, r->reps);
    printf("{\"impl\": \"%s\", \"test\": \"%s\", \"size\": %ld, \"rows\": %ld, \"median_us\": %.4f, "
           "\"min_us\": %.4f, \"max_us\": %.4f, \"median_mbs\": %.2f, \"iters\": %ld, \"reps\": %d}\n",
           impl, r->test, r->size, r->rows, r->med, r->min, r->max, mbs, r->iters, r->reps);
    fflush(stdout);
    fflush(stderr);
}

#endif
