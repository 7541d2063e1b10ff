/*
 * armci_bench.c - OSU-style ARMCI benchmark, one source for two libraries:
 *
 *   activerma's libarmci (no MPI):  cc armci_bench.c -I.../include -L... -larmci
 *   ARMCI-MPI (Debian):             mpicc.openmpi -DWITH_MPI armci_bench.c -larmci-openmpi
 *
 * ARMCI-MPI needs MPI_Init before ARMCI_Init; its armci.h defines ARMCI_MPI, and the
 * compile line may set WITH_MPI: either one turns the MPI calls on.
 *
 * 2 ranks: rank 0 measures against rank 1, which waits in ARMCI_Barrier. Each test times
 * `reps` batches of `iters` operations (after `skip` untimed ones; fewer of both when one
 * operation is too slow for a 10 s budget, the same rule for every library) and reports the median,
 * min and max of the per-operation latency over the batches. The data is checked after each
 * test: one wrong byte ends the run with ARMCI_Error (non-zero exit status).
 *
 * Output: a table on stderr, JSON lines on stdout (one per test, plus a "machine" line).
 *
 * usage: armci_bench [--quick] [--contiguous] [-i IMPL]
 *
 * Independent implementation for the activerma peer benchmarks; no ARMCI-MPI, Global Arrays
 * or OSU code.
 */
#define _POSIX_C_SOURCE 200809L

#if defined(WITH_MPI) && !defined(ARMCI_MPI_BUILD)
#define ARMCI_MPI_BUILD 1
#endif
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include <armci.h>
#if defined(ARMCI_MPI) && !defined(ARMCI_MPI_BUILD)
#define ARMCI_MPI_BUILD 1
#endif
#if defined(ARMCI_MPI_BUILD) && !defined(WITH_MPI)
#include <mpi.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "osu_timing.h"

#ifdef ARMCI_MPI_BUILD
#define DEFAULT_IMPL "armci-mpi-openmpi"
#else
#define DEFAULT_IMPL "activerma"
#endif

#define KIB 1024
#define MIB (1024 * 1024)
#define ROWS 1024
#define REGION (4 * MIB) /* per rank: the largest strided pattern spans 2 MiB */

static int me, nproc;
static void **base;   /* base[r]: rank r's block of REGION bytes */
static char *local;   /* ARMCI_Malloc_local, REGION bytes */
static char *check;   /* ARMCI_Malloc_local, REGION bytes */
/* --contiguous: only the contiguous put and get tests (run.sh's extra rounds against the core). */
static int contiguous_only = 0;

static void fail(const char *test, const char *what, long at, long got, long want)
{
    char msg[256];
    snprintf(msg, sizeof msg, "armci_bench: %s: %s wrong at %ld: got %ld, want %ld", test, what, at, got, want);
    ARMCI_Error(msg, 3);
}

/* The byte at offset o of a pattern named by seed. */
static unsigned char pat(long o, int seed) { return (unsigned char)((o * 131 + (o >> 8) * 7 + seed * 29 + 1) & 0xff); }

static void fill(char *p, long n, int seed)
{
    for (long o = 0; o < n; o++) p[o] = (char)pat(o, seed);
}

/* Rank 1 zeroes the first 64 bytes of its block (the counters of rmw and mutex); everyone
 * waits until it is done. */
static void remote_zero_head(void)
{
    if (me == 1) {
        ARMCI_Access_begin(base[1]);
        memset(base[1], 0, 64);
        ARMCI_Access_end(base[1]);
    }
    ARMCI_Barrier();
}

/* Rank 1 fills its block with pattern seed; everyone waits until it is done. */
static void remote_fill(int seed)
{
    if (me == 1) {
        ARMCI_Access_begin(base[1]);
        fill((char *)base[1], REGION, seed);
        ARMCI_Access_end(base[1]);
    }
    ARMCI_Barrier();
}

/* Compares n bytes at p with the pattern seed at offsets off + k * stride (rows of row bytes). */
static void expect_rows(const char *test, const char *p, long rows, long row, long src_off, long src_stride, int seed)
{
    for (long r = 0; r < rows; r++)
        for (long b = 0; b < row; b++) {
            long o = src_off + r * src_stride + b;
            unsigned char got = (unsigned char)p[r * row + b];
            if (got != pat(o, seed)) fail(test, "byte", r * row + b, got, pat(o, seed));
        }
}

/* Every operation a test ran, timed or not: what the rmw and mutex tests check counters against. */
static long total_ops(const result_t *r) { return r->skipped + r->iters * r->reps; }

/* ---- the operations ---------------------------------------------------------------------- */

typedef struct {
    long size;
} contig_t;

static void op_put(long i, void *ctx)
{
    (void)i;
    contig_t *c = ctx;
    ARMCI_Put(local, base[1], (int)c->size, 1);
    ARMCI_Fence(1);
}

static void op_get(long i, void *ctx)
{
    (void)i;
    contig_t *c = ctx;
    ARMCI_Get(base[1], local, (int)c->size, 1);
}

static int last_old;
static void op_rmw(long i, void *ctx)
{
    (void)i;
    (void)ctx;
    ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &last_old, base[1], 1, 1);
}

typedef struct {
    int src_stride[1], dst_stride[1], count[2];
    double scale;
} strided_t;

static double acc_scale = 2.0;
static void op_acc(long i, void *ctx)
{
    (void)i;
    contig_t *c = ctx;
    ARMCI_Acc(ARMCI_ACC_DBL, &acc_scale, local, base[1], (int)c->size, 1);
}

/* ARMCI_GetV of ROWS pieces (one armci_giov_t), the descriptor built once. */
typedef struct {
    armci_giov_t iov;
} vector_t;

static void op_getv(long i, void *ctx)
{
    (void)i;
    vector_t *v = ctx;
    ARMCI_GetV(&v->iov, 1, 1);
}

static void op_gets(long i, void *ctx)
{
    (void)i;
    strided_t *s = ctx;
    ARMCI_GetS(base[1], s->src_stride, local, s->dst_stride, s->count, 1, 1);
}

static void op_accs(long i, void *ctx)
{
    (void)i;
    strided_t *s = ctx;
    ARMCI_AccS(ARMCI_ACC_DBL, &s->scale, local, s->src_stride, base[1], s->dst_stride, s->count, 1, 1);
}

static void op_mutex(long i, void *ctx)
{
    (void)i;
    (void)ctx;
    ARMCI_Lock(0, 1);
    ARMCI_Unlock(0, 1);
}

/* ---- the tests (rank 0 measures and checks; every test ends in a barrier) ------------------- */

static void test_put(long size, int seed)
{
    if (size < 1 || size >= REGION) ARMCI_Error("armci_bench: put size out of range", 2);
    remote_fill(seed);
    if (me == 0) {
        result_t r = {.test = "put", .size = size, .rows = 0, .iters = size > 8 * KIB ? iters_large : iters_small};
        contig_t c = {size};
        fill(local, size, seed + 1);
        measure(&r, op_put, &c);
        /* check: a fresh pattern put, then read back */
        fill(local, size, seed + 2);
        op_put(0, &c);
        memset(check, 0, REGION);
        ARMCI_Get(base[1], check, (int)size, 1);
        expect_rows("put", check, 1, size, 0, 0, seed + 2);
        report(&r);
    }
    ARMCI_Barrier();
    /* and at the target: its own memory holds the pattern, the byte after it is untouched */
    if (me == 1) {
        ARMCI_Access_begin(base[1]);
        expect_rows("put (at target)", (char *)base[1], 1, size, 0, 0, seed + 2);
        unsigned char after = (unsigned char)((char *)base[1])[size];
        if (after != pat(size, seed)) fail("put (at target)", "byte after", size, after, pat(size, seed));
        ARMCI_Access_end(base[1]);
    }
    ARMCI_Barrier();
}

static void test_get(long size, int seed)
{
    remote_fill(seed);
    if (me == 0) {
        result_t r = {.test = "get", .size = size, .rows = 0, .iters = size > 8 * KIB ? iters_large : iters_small};
        contig_t c = {size};
        measure(&r, op_get, &c);
        memset(local, 0, (size_t)size);
        op_get(0, &c);
        expect_rows("get", local, 1, size, 0, 0, seed);
        report(&r);
    }
    ARMCI_Barrier();
}

/* Starts a non-blocking get of `size` bytes from rank 1 into `local`: contiguous (row 0), or
 * rows of `row` bytes twice their length apart at rank 1 (ARMCI_NbGetS, as test_gets). */
static void start_nbget(long size, long row, armci_hdl_t *h)
{
    ARMCI_INIT_HANDLE(h);
    if (row == 0) {
        ARMCI_NbGet(base[1], local, (int)size, 1, h);
    } else {
        int src_stride = (int)(2 * row), dst_stride = (int)row, count[2] = {(int)row, (int)(size / row)};
        ARMCI_NbGetS(base[1], &src_stride, local, &dst_stride, count, 1, 1, h);
    }
}

/* Overlap of a non-blocking get with computation (the ARMCI paper's Fig. 7a; rows: 7b): comm =
 * median of NbGet + Wait; total = median of { NbGet; compute for comm without calling ARMCI;
 * Wait }; overlap = (2 comm - total) / comm, in [0, 1]. `polled`: the computation asks
 * ARMCI_Test every POLL_US until it says complete, as a program that does other work while it
 * waits does (test "nbget-polled-overlap"); time spent inside Test is not computation, so a
 * Test that waits for the transfer shows as lost overlap. Printed beside the latencies and written as a row
 * of its own (test "nbget-overlap", "nbgets-overlap" or "nbget-polled-overlap", median_us:
 * total); compare.py does not judge it (ARMCI-MPI's NbGet completes at issue: a ratio would
 * divide by its zero). */
#define POLL_US 10
static void test_nbget_overlap(long size, long row, int polled, int seed)
{
    const char *test = polled ? "nbget-polled-overlap" : row ? "nbgets-overlap" : "nbget-overlap";
    remote_fill(seed);
    if (me == 0) {
        enum { N = 11 };
        double comm[N], total[N], issue[N];
        for (int k = 0; k < N; k++) {
            armci_hdl_t h;
            double t0 = now();
            start_nbget(size, row, &h);
            ARMCI_Wait(&h);
            comm[k] = now() - t0;
        }
        qsort(comm, N, sizeof(double), cmp_double);
        double busy = comm[N / 2];
        for (int k = 0; k < N; k++) {
            memset(local, 0, (size_t)size);
            armci_hdl_t h;
            double t0 = now();
            start_nbget(size, row, &h);
            issue[k] = now() - t0;
            /* Computation of `busy` seconds that calls ARMCI at most to Test: time inside Test
             * is not computation, so it moves the end of the computation later. */
            int busy_handle = polled;
            double end = t0 + issue[k] + busy, next_poll = now() + POLL_US * 1e-6;
            while (now() < end)
                if (busy_handle && now() >= next_poll) {
                    double in_test = now();
                    busy_handle = ARMCI_Test(&h);
                    next_poll = now();
                    end += next_poll - in_test;
                    next_poll += POLL_US * 1e-6;
                }
            ARMCI_Wait(&h);
            total[k] = now() - t0;
            if (row) expect_rows(test, local, size / row, row, 0, 2 * row, seed);
            else expect_rows(test, local, 1, size, 0, 0, seed);
        }
        qsort(total, N, sizeof(double), cmp_double);
        qsort(issue, N, sizeof(double), cmp_double);
        double t = total[N / 2], overlap = (2.0 * busy - t) / busy;
        if (overlap < 0) overlap = 0;
        if (overlap > 1) overlap = 1;
        char what[64];
        if (row) snprintf(what, sizeof what, "%s %ldx%ld B", test, size / row, row);
        else snprintf(what, sizeof what, "%s %ld B", test, size);
        fprintf(stderr, "%-22s%14.4f%12.4f%12.4f   comm %.1f us, issue %.1f us: overlap %.0f %%\n", what, t * 1e6,
                total[0] * 1e6, total[N - 1] * 1e6, busy * 1e6, issue[N / 2] * 1e6, overlap * 100);
        printf("{\"impl\": \"%s\", \"test\": \"%s\", \"size\": %ld, \"rows\": %ld, \"median_us\": %.4f, "
               "\"comm_us\": %.4f, \"issue_us\": %.4f, \"overlap\": %.3f}\n",
               impl, test, size, row ? size / row : 0, t * 1e6, busy * 1e6, issue[N / 2] * 1e6, overlap);
        fflush(stdout);
        fflush(stderr);
    }
    ARMCI_Barrier();
}

static void test_rmw(void)
{
    remote_zero_head();
    if (me == 0) {
        result_t r = {.test = "rmw", .size = 4, .rows = 0, .iters = iters_small};
        measure(&r, op_rmw, NULL);
        long n = total_ops(&r);
        if (last_old != n - 1) fail("rmw", "last fetched value", n - 1, last_old, n - 1);
        int now_value = 0;
        ARMCI_Get(base[1], &now_value, (int)sizeof now_value, 1);
        if (now_value != n) fail("rmw", "counter", 0, now_value, n);
        report(&r);
    }
    ARMCI_Barrier();
}

/* size bytes of doubles from a local buffer added into rank 1 with scale 2: after n calls
 * element k holds 2 * n * src[k], and the double after them is untouched. */
static void test_acc(long size)
{
    const long count = size / (long)sizeof(double);
    if (me == 1) {
        ARMCI_Access_begin(base[1]);
        memset(base[1], 0, (size_t)size + sizeof(double));
        ARMCI_Access_end(base[1]);
    }
    ARMCI_Barrier();
    if (me == 0) {
        result_t r = {.test = "acc", .size = size, .rows = 0, .iters = size > 8 * KIB ? iters_large : iters_small};
        contig_t c = {size};
        double *src = (double *)local;
        for (long k = 0; k < count; k++) src[k] = (double)(k % 97 + 1);
        measure(&r, op_acc, &c);
        long n = total_ops(&r);
        double *got = (double *)check;
        ARMCI_Get(base[1], check, (int)size + (int)sizeof(double), 1);
        for (long k = 0; k < count; k++)
            if (got[k] != 2.0 * (double)n * src[k]) fail("acc", "element", k, (long)got[k], (long)(2.0 * (double)n * src[k]));
        if (got[count] != 0.0) fail("acc", "element after", count, (long)got[count], 0);
        report(&r);
    }
    ARMCI_Barrier();
}

/* ROWS pieces of row bytes from rank 1 (2*row apart) into a contiguous local buffer, as one
 * vector (ARMCI_GetV): the same data as test_gets, described piece by piece. */
static void test_getv(long row, int seed)
{
    remote_fill(seed);
    if (me == 0) {
        result_t r = {.test = "getv", .size = ROWS * row, .rows = ROWS, .iters = iters_large};
        void **src = malloc(sizeof(void *) * ROWS), **dst = malloc(sizeof(void *) * ROWS);
        if (!src || !dst) ARMCI_Error("armci_bench: out of memory", 2);
        for (long k = 0; k < ROWS; k++) {
            src[k] = (char *)base[1] + 2 * row * k;
            dst[k] = local + row * k;
        }
        vector_t v = {{.src_ptr_array = src, .dst_ptr_array = dst, .bytes = (int)row, .ptr_array_len = ROWS}};
        measure(&r, op_getv, &v);
        memset(local, 0, (size_t)(ROWS * row));
        op_getv(0, &v);
        expect_rows("getv", local, ROWS, row, 0, 2 * row, seed);
        report(&r);
        free(src);
        free(dst);
    }
    ARMCI_Barrier();
}

/* rows x row bytes from rank 1 (rows 2*row apart) into a contiguous local buffer. */
static void test_gets(long row, int seed)
{
    remote_fill(seed);
    if (me == 0) {
        result_t r = {.test = "gets", .size = ROWS * row, .rows = ROWS, .iters = iters_large};
        strided_t s = {{(int)(2 * row)}, {(int)row}, {(int)row, ROWS}, 1.0};
        measure(&r, op_gets, &s);
        memset(local, 0, (size_t)(ROWS * row));
        op_gets(0, &s);
        expect_rows("gets", local, ROWS, row, 0, 2 * row, seed);
        report(&r);
    }
    ARMCI_Barrier();
}

/* rows x row bytes of doubles from a contiguous local buffer added into rank 1 (rows 2*row
 * apart), scale 2: after n calls element k of the pattern holds 2 * n * src[k]. */
static void test_accs(long row)
{
    const long per_row = row / (long)sizeof(double);
    if (me == 1) {
        ARMCI_Access_begin(base[1]);
        memset(base[1], 0, (size_t)(2 * ROWS * row));
        ARMCI_Access_end(base[1]);
    }
    ARMCI_Barrier();
    if (me == 0) {
        result_t r = {.test = "accs", .size = ROWS * row, .rows = ROWS, .iters = iters_large};
        strided_t s = {{(int)row}, {(int)(2 * row)}, {(int)row, ROWS}, 2.0};
        double *src = (double *)local;
        for (long k = 0; k < ROWS * per_row; k++) src[k] = (double)(k % 97 + 1);
        measure(&r, op_accs, &s);
        long n = total_ops(&r);
        double *got = (double *)check;
        int get_stride[1] = {(int)(2 * row)}, put_stride[1] = {(int)row}, count[2] = {(int)row, ROWS};
        ARMCI_GetS(base[1], get_stride, check, put_stride, count, 1, 1);
        for (long k = 0; k < ROWS * per_row; k++)
            if (got[k] != 2.0 * (double)n * src[k]) fail("accs", "element", k, (long)got[k], (long)(2.0 * (double)n * src[k]));
        /* the gaps between the rows are untouched */
        double gap = 0.0;
        ARMCI_Get((char *)base[1] + row, &gap, (int)sizeof gap, 1);
        if (gap != 0.0) fail("accs", "gap between rows", row, (long)gap, 0);
        report(&r);
    }
    ARMCI_Barrier();
}

static void test_mutex(void)
{
    remote_zero_head();
    if (me == 0) {
        result_t r = {.test = "mutex", .size = 0, .rows = 0, .iters = iters_small};
        measure(&r, op_mutex, NULL);
        /* check: a counter at rank 1 incremented under the lock, 100 times */
        for (int k = 0; k < 100; k++) {
            long v = 0;
            ARMCI_Lock(0, 1);
            ARMCI_Get(base[1], &v, (int)sizeof v, 1);
            v++;
            ARMCI_Put(&v, base[1], (int)sizeof v, 1);
            ARMCI_Fence(1);
            ARMCI_Unlock(0, 1);
        }
        long v = 0;
        ARMCI_Get(base[1], &v, (int)sizeof v, 1);
        if (v != 100) fail("mutex", "counter", 0, v, 100);
        report(&r);
    }
    ARMCI_Barrier();
}

/* memcpy of 1 MiB, best of a few batches (GB/s): the machine's yardstick in the rows. */
static double memcpy_gbs(void)
{
    double best = 0.0;
    memset(local, 1, MIB);
    for (int b = 0; b < 5; b++) {
        double t0 = now();
        for (int k = 0; k < 20; k++) {
            memcpy(check, local, MIB);
            __asm__ __volatile__("" ::: "memory");
        }
        double gbs = 20.0 * MIB / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                c[strcspn(c, "\n")] = 0;
                /* JSON-safe: drop quotes and backslashes */
                size_t k = 0;
                for (; *c && k + 1 < n; c++)
                    if (*c != '"' && *c != '\\') out[k++] = *c;
                out[k] = 0;
            }
            break;
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
#ifdef ARMCI_MPI_BUILD
    MPI_Init(&argc, &argv);
#endif
    ARMCI_Init();
    impl = DEFAULT_IMPL;
    me = armci_msg_me();
    nproc = armci_msg_nproc();
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--quick")) {
            quick_settings();
        } else if (!strcmp(argv[a], "--contiguous")) {
            contiguous_only = 1;
        } else if (!strcmp(argv[a], "-i") && a + 1 < argc) {
            impl = argv[++a];
        } else {
            if (me == 0) fprintf(stderr, "usage: armci_bench [--quick] [--contiguous] [-i IMPL]\n");
            ARMCI_Error("armci_bench: bad arguments", 2);
        }
    }
    if (nproc != 2) ARMCI_Error("armci_bench: needs exactly 2 ranks", 2);

    base = malloc(sizeof(void *) * (size_t)nproc);
    if (!base || ARMCI_Malloc(base, REGION) != 0) ARMCI_Error("armci_bench: ARMCI_Malloc failed", 2);
    local = ARMCI_Malloc_local(REGION);
    check = ARMCI_Malloc_local(REGION);
    if (!local || !check) ARMCI_Error("armci_bench: ARMCI_Malloc_local failed", 2);
    ARMCI_Create_mutexes(1);

    if (me == 0) {
        char cpu[256];
        cpu_model(cpu, sizeof cpu);
        double gbs = memcpy_gbs();
        long cpus = 0;
        FILE *f = fopen("/proc/cpuinfo", "r");
        if (f) {
            char line[512];
            while (fgets(line, sizeof line, f))
                if (strncmp(line, "processor", 9) == 0) cpus++;
            fclose(f);
        }
        printf("{\"impl\": \"%s\", \"machine\": {\"cpu\": \"%s\", \"cpus\": %ld, \"memcpy_gbs\": %.2f}}\n", impl, cpu,
               cpus, gbs);
        fflush(stdout);
        fprintf(stderr, "# ARMCI OSU-style benchmark, impl %s, 2 ranks (rank 0 measures, rank 1 waits)\n", impl);
        fprintf(stderr, "# latency per operation in us: median / min / max over %d batches; MB/s = bytes / median\n",
                reps);
        fprintf(stderr, "%-22s%14s%12s%12s%14s%16s\n", "# test", "median(us)", "min(us)", "max(us)", "MB/s",
                "iters x reps");
    }
    ARMCI_Barrier();

    int seed = 10;
    const long sizes[] = {8, 64 * KIB, MIB};
    for (int k = 0; k < 3; k++) test_put(sizes[k], seed += 3);
    for (int k = 0; k < 3; k++) test_get(sizes[k], seed += 3);
    if (!contiguous_only) {
        test_nbget_overlap(64 * KIB, 0, 0, seed += 3);
        test_nbget_overlap(MIB, 0, 0, seed += 3);
        test_nbget_overlap(MIB, KIB, 0, seed += 3);
        test_nbget_overlap(64 * KIB, 0, 1, seed += 3);
        test_nbget_overlap(MIB, 0, 1, seed += 3);
        test_rmw();
        test_gets(64, seed += 3);
        test_gets(KIB, seed += 3);
        test_getv(64, seed += 3);
        for (int k = 0; k < 3; k++) test_acc(sizes[k]);
        test_accs(64);
        test_mutex();
    }

    ARMCI_Destroy_mutexes();
    ARMCI_Free_local(check);
    ARMCI_Free_local(local);
    ARMCI_Free(base[me]);
    free(base);
    ARMCI_Finalize();
#ifdef ARMCI_MPI_BUILD
    MPI_Finalize();
#endif
    return 0;
}
