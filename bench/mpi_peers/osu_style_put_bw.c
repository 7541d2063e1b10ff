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
#include "osu_style_common.h"

/* iterations {iters, skip, iters_large, skip_large, reps}: default, --quick */
static const osu_bench_t bench = {
    .name = "osu_put_bw", .title = "MPI_Put Bandwidth",
    .flags = OSU_SIZES | OSU_WINDOW | OSU_BANDWIDTH,
    .defaults = {100, 10, 20, 2, 3}, .quick = {20, 2, 5, 1, 2}};

typedef struct {
    const char *buf;
    size_t size;
    int window; /* puts per flush */
} burst_t;

static inline void put_burst(void *ctx, MPI_Win win)
{
    const burst_t *w = ctx;
    for (int j = 0; j < w->window; j++)
        MPI_CHECK(MPI_Put(w->buf + (size_t)j * w->size, (int)w->size, MPI_CHAR,
                          1, (MPI_Aint)j * (MPI_Aint)w->size, (int)w->size,
                          MPI_CHAR, win));
    MPI_CHECK(MPI_Win_flush(1, win));
}

static int run_size(const osu_run_t *run, const osu_size_t *s, double *elapsed)
{
    burst_t w = {run->buf, s->size, run->o->window};
    osu_timed_reps(run->o, run->rank, s->win, s->skip, s->iters, put_burst, &w, elapsed);
    /* sanity check (untimed): the target must see all the origin's bytes */
    return osu_check_put_at_target(run, s);
}

int main(int argc, char **argv)
{
    osu_opts_t o;
    int rank = osu_init(&argc, &argv, &bench, &o);
    return osu_finish(osu_sweep_sizes(&bench, &o, rank, run_size));
}
