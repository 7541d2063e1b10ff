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
#include "osu_style_common.h"

/* iterations {iters, skip, -, -, reps}: default, --quick (no sizes, so the
 * *_large values are never used) */
static const osu_bench_t bench = {
    .name = "osu_fop_latency",
    .title = "MPI_Fetch_and_op (MPI_SUM, 64-bit) Latency",
    .flags = OSU_WIN_BYTES,
    .defaults = {10000, 100, 1, 0, 5}, .quick = {1000, 10, 1, 0, 3},
    .usage = "[-i IMPL] [-n ITERS] [-x SKIP] [-r REPS]\n"
             "       [-p WINDOW_BYTES] [-s shared|exclusive|lockall] [--quick] [--json]\n"
             "  defaults: iters 10000, skip 100, reps 5, window 4096 bytes (-p < 16 only to\n"
             "  reproduce the MPICH 4.0.2 lost-update bug), lock shared + flush per op.\n"
             "  --quick: iters 1000, skip 10, reps 3.\n"
             "  --json: JSON lines on stdout, table on stderr.\n"};

typedef struct {
    long long *fetched;
    long long expect; /* previous counter value = ops issued so far */
    long bad_fetch;
} fetch_check_t;

static inline void fetch_add(void *ctx, MPI_Win win)
{
    static const long long one = 1;
    fetch_check_t *c = ctx;
    MPI_CHECK(MPI_Fetch_and_op(&one, c->fetched, MPI_LONG_LONG, 1, 0, MPI_SUM, win));
    MPI_CHECK(MPI_Win_flush(1, win));
    /* untimed-cost check: one compare per op, no extra MPI call */
    if (*c->fetched != c->expect) c->bad_fetch++;
    c->expect++;
}

int main(int argc, char **argv)
{
    osu_opts_t o;
    int rank = osu_init(&argc, &argv, &bench, &o);

    long long *wbase = NULL;
    MPI_Win win;
    osu_win_create(o.win_bytes, 0, &wbase, &win);

    long long fetched = -1;
    fetch_check_t check = {&fetched, 0, 0};
    double elapsed[MAX_REPS];
    osu_timed_reps(&o, rank, win, o.skip, o.iters, fetch_add, &check, elapsed);

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
            fprintf(stderr, "%s: ERROR: lost updates: target counter = %lld, "
                    "expected %lld (%lld lost)\n", bench.name, final_value,
                    expected_total, expected_total - final_value);
            errors++;
        }
        if (check.bad_fetch) {
            fprintf(stderr, "%s: ERROR: %ld fetched values were not the "
                    "previous counter value\n", bench.name, check.bad_fetch);
            errors++;
        }
        osu_result_t res = osu_result(&bench, &o, o.iters, 8, elapsed);
        osu_print_row(&bench, &o, 8, o.iters, &res);
        fprintf(osu_table(&o), "# verification: counter %lld / expected %lld: %s\n",
                final_value, expected_total, errors ? "FAILED" : "ok");
        fflush(osu_table(&o));
        if (!errors) osu_print_json(&bench, &o, 8, o.iters, &res);
    }
    MPI_CHECK(MPI_Win_free(&win));
    return osu_finish(errors);
}
