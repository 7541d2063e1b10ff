/*
 * osu_style_common.h - shared parts of the OSU-style MPI one-sided peer
 * benchmarks: option parsing, window/buffer setup, passive-target locking, the
 * timed loop, the size sweep and table/JSON output.  Linked into every program
 * (osu_style_common.c); see README.md for the methodology.
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 */
#ifndef OSU_STYLE_COMMON_H
#define OSU_STYLE_COMMON_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LARGE_MESSAGE_SIZE 8192 /* above this: iters_large / skip_large */
#define MAX_REPS 64
/* Windows are at least this big (fop: default -p).  Debian MPICH 4.0.2 loses or
 * misplaces data and MPI_Fetch_and_op updates on windows < 16 B per rank. */
#define MIN_WINDOW_BYTES 4096

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != MPI_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__,     \
                    #call, rc_);                                               \
            MPI_Abort(MPI_COMM_WORLD, 2);                                      \
        }                                                                      \
    } while (0)

enum sync_mode { SYNC_SHARED, SYNC_EXCLUSIVE, SYNC_LOCKALL };

/* osu_bench_t.flags */
enum {
    OSU_SIZES = 1,      /* size sweep: -m [MIN:]MAX, -N ITERS_LARGE, -X SKIP_LARGE */
    OSU_WINDOW = 2,     /* -w WINDOW: puts per flush */
    OSU_WIN_BYTES = 4,  /* one 8-byte target: -p WINDOW_BYTES, -m ignored */
    OSU_BANDWIDTH = 8,  /* MB/s columns and JSON keys (else latency in us) */
    OSU_FILL_RANK = 16, /* sweep windows start as 'a' + rank (else 0) */
};

/* iteration defaults, normal and --quick */
typedef struct {
    long iters, skip, iters_large, skip_large;
    int reps;
} osu_iters_t;

/* what distinguishes one program from another */
typedef struct {
    const char *name;  /* "bench" in the JSON lines, e.g. "osu_put_latency" */
    const char *title; /* table title: "# OSU-style <title> Test (...)" */
    unsigned flags;    /* OSU_* above */
    osu_iters_t defaults, quick;
    const char *usage; /* help after "usage: <name> "; OSU_SIZES: generated */
} osu_bench_t;

typedef struct {
    const char *impl;
    size_t min_size, max_size;
    long iters, skip, iters_large, skip_large;
    int reps, json;
    enum sync_mode sync;
    int window;       /* -w (OSU_WINDOW) */
    size_t win_bytes; /* -p (OSU_WIN_BYTES) */
} osu_opts_t;

/* MPI_Init, option parsing (usage on -h or error) and the 2-rank check, which
 * exit (after MPI_Finalize) unless the benchmark should run; then rank 0 prints
 * the table header (title, library version, window/sync, columns).
 * Returns the rank. */
int osu_init(int *argc, char ***argv, const osu_bench_t *b, osu_opts_t *o);

/* rank 0: where the table goes (stderr with --json, else stdout) */
FILE *osu_table(const osu_opts_t *o);

/* collective: MPI_Win_allocate(bytes), fill it, barrier */
void osu_win_create(size_t bytes, int fill, void *base_out, MPI_Win *win);

/* passive-target epoch on rank 1 as chosen by -s */
void osu_lock_target(const osu_opts_t *o, MPI_Win win);
void osu_unlock_target(const osu_opts_t *o, MPI_Win win);

/* Rank 0 results of one size.  value: latency_us (average over all timed ops)
 * or bandwidth_mbs; median over repetitions; best: min_us or max_mbs. */
typedef struct {
    double value, median, best;
} osu_result_t;

/* from elapsed seconds per repetition; bytes: moved per iteration (bandwidth);
 * then the table row and (with --json) the JSON line */
osu_result_t osu_result(const osu_bench_t *b, const osu_opts_t *o, long iters,
                        size_t bytes, const double *elapsed);
void osu_print_row(const osu_bench_t *b, const osu_opts_t *o, size_t size,
                   long iters, const osu_result_t *res);
void osu_print_json(const osu_bench_t *b, const osu_opts_t *o, size_t size,
                    long iters, const osu_result_t *res);

/* what a size sweep hands to each size: buf is page-aligned, max_size bytes
 * (times -w with OSU_WINDOW), filled with 'a' + rank */
typedef struct {
    const osu_bench_t *b;
    const osu_opts_t *o;
    int rank;
    char *buf;
} osu_run_t;

/* one message size: its fresh window (padded to MIN_WINDOW_BYTES, filled as
 * OSU_FILL_RANK says, freed after the call) and iteration counts */
typedef struct {
    size_t size;   /* message size */
    size_t wbytes; /* window bytes the operations write/read: size (x -w) */
    char *wbase;
    MPI_Win win;
    long skip, iters;
} osu_size_t;

/* Collective, both ranks: osu_timed_reps() (fills elapsed[] on rank 0) and
 * the untimed check; returns this rank's error count. */
typedef int (*osu_size_fn)(const osu_run_t *run, const osu_size_t *s,
                           double *elapsed);

/* runs fn for min_size..max_size in powers of 2 (iters/skip switch to the large
 * values above LARGE_MESSAGE_SIZE); rank 0 prints a row (and with --json a JSON
 * line) per size.  Returns this rank's error count. */
int osu_sweep_sizes(const osu_bench_t *b, const osu_opts_t *o, int rank,
                    osu_size_fn fn);

/* rank 1 (untimed): the first and last of the s->wbytes window bytes must hold
 * the origin's 'a'; returns the number of errors (0 or 1) */
int osu_check_put_at_target(const osu_run_t *run, const osu_size_t *s);

/* sums the error counts of both ranks, MPI_Finalize; exit status 3 on errors */
int osu_finish(int errors);

/* One operation, completed (it ends with MPI_Win_flush(1, win)). */
typedef void (*osu_op_fn)(void *ctx, MPI_Win win);

/* The timed part, o->reps times between barriers: rank 0 locks rank 1 (-s),
 * runs skip+iters ops, the clock running over the last iters, and unlocks;
 * elapsed[r] gets the seconds.  Forced inline so that, with a constant op,
 * the loop makes the same direct MPI calls as a hand-written one. */
static inline __attribute__((always_inline)) void
osu_timed_reps(const osu_opts_t *o, int rank, MPI_Win win, long skip, long iters,
               osu_op_fn op, void *ctx, double *elapsed)
{
    for (int r = 0; r < o->reps; r++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
            double t0 = 0.0, t1;
            osu_lock_target(o, win);
            for (long i = 0; i < skip + iters; i++) {
                if (i == skip) t0 = MPI_Wtime();
                op(ctx, win);
            }
            t1 = MPI_Wtime();
            osu_unlock_target(o, win);
            elapsed[r] = t1 - t0;
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
}

#endif /* OSU_STYLE_COMMON_H */
