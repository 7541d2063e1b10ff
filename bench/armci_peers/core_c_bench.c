/*
 * core_c_bench.c - activerma's core as a C program reaches it: blocking arma_put / arma_get of
 * 8 B, 64 KiB and 1 MiB from rank 0 to rank 1's segment, timed by the same harness as
 * armci_bench.c (osu_timing.h), so that run.sh can set the ARMCI layer beside the core's own
 * C API as well as beside `activerma bench put-latency / get-latency`, whose Rust loops inline
 * the core into the timed loop.
 *
 *   cc core_c_bench.c $(pkg-config --cflags --libs activerma)
 *   activerma run -n 2 -- ./core_c_bench [--quick] [-i IMPL]
 *
 * Output: a table on stderr, JSON lines on stdout (test "put" / "get", as armci_bench.c's).
 * The data is checked after each test: a wrong byte ends the run with exit status 3.
 */
#define _POSIX_C_SOURCE 200809L

#include <activerma.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_timing.h"

#define KIB 1024
#define MIB (1024 * 1024)

static uint64_t remote; /* rank 1's segment, as rank 0 addresses it */
static char *local, *check;

static void die(const char *what, int rc)
{
    fprintf(stderr, "core_c_bench: %s: %s\n", what, arma_last_error());
    exit(rc);
}

static void must(int rc, const char *what)
{
    if (rc != ARMA_OK) die(what, 2);
}

static void op_put(long i, void *ctx)
{
    (void)i;
    if (arma_put(1, remote, local, (size_t)*(long *)ctx) != ARMA_OK) die("arma_put", 2);
}

static void op_get(long i, void *ctx)
{
    (void)i;
    if (arma_get(1, remote, local, (size_t)*(long *)ctx) != ARMA_OK) die("arma_get", 2);
}

/* The bytes put last read back from the target, and the get of them: both must be `local`'s. */
static void expect_roundtrip(const char *test, long size)
{
    memset(check, 0, (size_t)size);
    must(arma_get(1, remote, check, (size_t)size), "arma_get (check)");
    if (memcmp(check, local, (size_t)size) != 0) {
        fprintf(stderr, "core_c_bench: %s of %ld B: the target's bytes differ from the origin's\n", test, size);
        exit(3);
    }
}

int main(int argc, char **argv)
{
    must(arma_init(), "arma_init");
    impl = "activerma-c-api";
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--quick")) {
            quick_settings();
        } else if (!strcmp(argv[a], "-i") && a + 1 < argc) {
            impl = argv[++a];
        } else {
            fprintf(stderr, "usage: core_c_bench [--quick] [-i IMPL]\n");
            return 2;
        }
    }
    if (arma_size() != 2) {
        fprintf(stderr, "core_c_bench: needs exactly 2 ranks (activerma run -n 2)\n");
        return 2;
    }
    void *seg;
    must(arma_seg_alloc(MIB, &seg), "arma_seg_alloc");
    must(arma_seg_addr(seg, 1, &remote), "arma_seg_addr");
    local = malloc(MIB);
    check = malloc(MIB);
    if (!local || !check) die("malloc", 2);
    must(arma_barrier(), "arma_barrier");

    if (arma_rank() == 0) {
        fprintf(stderr, "# activerma core through its C API, impl %s, 2 ranks (rank 0 measures, rank 1 waits)\n",
                impl);
        fprintf(stderr, "%-22s%14s%12s%12s%14s%16s\n", "# test", "median(us)", "min(us)", "max(us)", "MB/s",
                "iters x reps");
        const long sizes[] = {8, 64 * KIB, MIB};
        for (int k = 0; k < 3; k++) {
            long size = sizes[k];
            for (long o = 0; o < size; o++) local[o] = (char)(o * 131 + k * 29 + 1);
            result_t r = {.test = "put", .size = size, .iters = size > 8 * KIB ? iters_large : iters_small};
            measure(&r, op_put, &size);
            expect_roundtrip("put", size);
            report(&r);
        }
        for (int k = 0; k < 3; k++) {
            long size = sizes[k];
            result_t r = {.test = "get", .size = size, .iters = size > 8 * KIB ? iters_large : iters_small};
            for (long o = 0; o < size; o++) local[o] = (char)(o * 7 + k * 13 + 5);
            must(arma_put(1, remote, local, (size_t)size), "arma_put (fill)");
            memcpy(check, local, (size_t)size);
            measure(&r, op_get, &size);
            if (memcmp(check, local, (size_t)size) != 0) {
                fprintf(stderr, "core_c_bench: get of %ld B: the bytes differ from the target's\n", size);
                return 3;
            }
            report(&r);
        }
    }
    must(arma_barrier(), "arma_barrier");
    must(arma_seg_free(seg), "arma_seg_free");
    free(local);
    free(check);
    must(arma_finalize(), "arma_finalize");
    return 0;
}
