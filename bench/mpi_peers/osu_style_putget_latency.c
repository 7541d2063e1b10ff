/*
 * osu_style_putget_latency.c - MPI_Put latency (osu_style_put_latency) or,
 * built with -DOSU_OP_GET, MPI_Get latency (osu_style_get_latency), following
 * the OSU micro-benchmark one-sided methodology (osu_put_latency /
 * osu_get_latency, default "flush" synchronization).
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 *
 * Method (per message size, 2 ranks, rank 0 = origin, rank 1 = target):
 *   - window: MPI_Win_allocate(max(size, 4 KiB)) on both ranks, new window per
 *     size (padded: Debian MPICH 4.0.2 loses/misplaces data on windows < 16 B)
 *   - origin: MPI_Win_lock(MPI_LOCK_SHARED, 1) once (or -s exclusive / lockall),
 *     then skip+iters times { MPI_Put(size bytes -> rank 1) or
 *     MPI_Get(size bytes <- rank 1); MPI_Win_flush(1) },
 *     clock started after the skip warm-up iterations, stopped before unlock
 *   - target: idle in MPI_Barrier (passive target)
 *   - latency = elapsed / iters  (what OSU prints: an average)
 *   - this is repeated -r times; the reported "latency_us" is the average over
 *     all timed iterations of all repetitions, "median_us" the median of the
 *     per-repetition averages.
 *   - check (untimed): put - the target sees the origin's bytes; get - the
 *     origin got the target's bytes.
 *
 * Usage: mpirun -n 2 ./osu_style_put_latency [-i IMPL] [-m [MIN:]MAX] [-n ITERS]
 *        [-N ITERS_LARGE] [-x SKIP] [-X SKIP_LARGE] [-r REPS]
 *        [-s shared|exclusive|lockall] [--quick] [--json]
 *        (same options for ./osu_style_get_latency)
 */
#include "osu_style_common.h"

#ifdef OSU_OP_GET
#define OP_BENCH "osu_get_latency"
#define OP_TITLE "MPI_Get Latency"
#define OP_FLAGS (OSU_SIZES | OSU_FILL_RANK) /* the target's window holds 'b' */
#else
#define OP_BENCH "osu_put_latency"
#define OP_TITLE "MPI_Put Latency"
#define OP_FLAGS OSU_SIZES
#endif

/* iterations {iters, skip, iters_large, skip_large, reps}: default, --quick */
static const osu_bench_t bench = {.name = OP_BENCH, .title = OP_TITLE, .flags = OP_FLAGS,
                                  .defaults = {10000, 100, 1000, 10, 5},
                                  .quick = {1000, 10, 100, 2, 3}};

typedef struct {
    char *buf; /* origin buffer: source of the put, destination of the get */
    size_t size;
} xfer_t;

static inline void xfer(void *ctx, MPI_Win win)
{
    const xfer_t *x = ctx;
#ifdef OSU_OP_GET
    MPI_CHECK(MPI_Get(x->buf, (int)x->size, MPI_CHAR, 1, 0, (int)x->size, MPI_CHAR, win));
#else
    MPI_CHECK(MPI_Put(x->buf, (int)x->size, MPI_CHAR, 1, 0, (int)x->size, MPI_CHAR, win));
#endif
    MPI_CHECK(MPI_Win_flush(1, win));
}

static int run_size(const osu_run_t *run, const osu_size_t *s, double *elapsed)
{
    xfer_t x = {run->buf, s->size};
    osu_timed_reps(run->o, run->rank, s->win, s->skip, s->iters, xfer, &x, elapsed);
#ifdef OSU_OP_GET
    /* sanity check (untimed): the origin must have fetched the target's bytes */
    if (run->rank == 0 && (run->buf[0] != 'b' || run->buf[s->size - 1] != 'b')) {
        fprintf(stderr, "%s: ERROR: size %zu: got wrong data\n", run->b->name, s->size);
        return 1;
    }
    return 0;
#else
    /* sanity check (untimed): the target must see the origin's bytes */
    return osu_check_put_at_target(run, s);
#endif
}

int main(int argc, char **argv)
{
    osu_opts_t o;
    int rank = osu_init(&argc, &argv, &bench, &o);
    return osu_finish(osu_sweep_sizes(&bench, &o, rank, run_size));
}
