/*
 * osu_style_common.c - shared parts of the OSU-style MPI one-sided peer
 * benchmarks (see osu_style_common.h).
 *
 * Independent implementation for the activerma peer benchmarks; no OSU code.
 */
#include "osu_style_common.h"

#include <string.h>

static const char *sync_names[] = {"shared", "exclusive", "lockall"};

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10;
    else if (*end == 'm' || *end == 'M') v <<= 20;
    return (size_t)v;
}

static void set_iters(osu_opts_t *o, const osu_iters_t *it)
{
    o->iters = it->iters; o->skip = it->skip;
    o->iters_large = it->iters_large; o->skip_large = it->skip_large;
    o->reps = it->reps;
}

/* returns 0 ok, 1 = exit(0), -1 = error */
static int parse_args(int argc, char **argv, const osu_bench_t *b, osu_opts_t *o)
{
    const int sizes = (b->flags & OSU_SIZES) != 0;
    const int window = (b->flags & OSU_WINDOW) != 0;
    const int win_bytes = (b->flags & OSU_WIN_BYTES) != 0;
    o->impl = "unknown";
    o->min_size = 8;
    o->max_size = 4u << 20;
    set_iters(o, &b->defaults);
    o->json = 0; o->sync = SYNC_SHARED;
    o->window = 64; o->win_bytes = MIN_WINDOW_BYTES;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *v = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--json")) { o->json = 1; continue; }
        if (!strcmp(s, "--quick")) {
            set_iters(o, &b->quick);
            o->max_size = 1u << 20;
            continue;
        }
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) return 1;
        if (!v) return -1;
        if (!strcmp(s, "-i")) o->impl = v;
        else if (!strcmp(s, "-m") && sizes) {
            const char *c = strchr(v, ':');
            if (c) { o->min_size = parse_size(v); o->max_size = parse_size(c + 1); }
            else o->max_size = parse_size(v);
        }
        else if (!strcmp(s, "-m") && win_bytes) { /* accepted for symmetry; fop is 8 bytes */ }
        else if (!strcmp(s, "-n")) o->iters = atol(v);
        else if (!strcmp(s, "-N") && sizes) o->iters_large = atol(v);
        else if (!strcmp(s, "-x")) o->skip = atol(v);
        else if (!strcmp(s, "-X") && sizes) o->skip_large = atol(v);
        else if (!strcmp(s, "-r")) o->reps = atoi(v);
        else if (!strcmp(s, "-w") && window) o->window = atoi(v);
        else if (!strcmp(s, "-p") && win_bytes) o->win_bytes = (size_t)strtoull(v, NULL, 10);
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
    if (o->min_size < 1 || o->max_size < o->min_size || o->iters < 1 ||
        o->iters_large < 1 || o->skip < 0 || o->skip_large < 0 ||
        o->reps < 1 || o->reps > MAX_REPS || o->window < 1)
        return -1;
    return 0;
}

FILE *osu_table(const osu_opts_t *o)
{
    return o->json ? stderr : stdout;
}

static void print_header(const osu_bench_t *b, const osu_opts_t *o)
{
    FILE *tab = osu_table(o);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    fprintf(tab, "# OSU-style %s Test (activerma peer bench)\n", b->title);
    fprintf(tab, "# impl: %s | %s\n", o->impl, lib);
    if (b->flags & OSU_WIN_BYTES)
        fprintf(tab, "# Window creation: MPI_Win_allocate (%zu bytes per rank)\n",
                o->win_bytes);
    else
        fprintf(tab, "# Window creation: MPI_Win_allocate\n");
    if (b->flags & OSU_WINDOW)
        fprintf(tab, "# Window size: %d puts per flush\n", o->window);
    fprintf(tab, "# Synchronization: %s + MPI_Win_flush per %s\n",
            o->sync == SYNC_LOCKALL ? "MPI_Win_lock_all"
            : o->sync == SYNC_SHARED ? "MPI_Win_lock(shared)"
                                     : "MPI_Win_lock(exclusive)",
            (b->flags & OSU_WINDOW) ? "window" : "op");
    if (b->flags & OSU_BANDWIDTH)
        fprintf(tab, "%-10s%20s%14s%14s%16s\n", "# Size", "Bandwidth(MB/s)",
                "Median(MB/s)", "Max(MB/s)", "iters x reps");
    else
        fprintf(tab, "%-10s%20s%14s%14s%16s\n", "# Size", "Avg Latency(us)",
                "Median(us)", "Min(us)", "iters x reps");
    fflush(tab);
}

static void usage(const osu_bench_t *b)
{
    const osu_iters_t *d = &b->defaults, *q = &b->quick;
    const int w = (b->flags & OSU_WINDOW) != 0;
    if (!(b->flags & OSU_SIZES)) {
        fprintf(stderr, "usage: %s %s", b->name, b->usage);
        return;
    }
    fprintf(stderr, "usage: %s [-i IMPL] [-m [MIN:]MAX] %s[-n ITERS] [-N ITERS_LARGE]\n"
            "       [-x SKIP] [-X SKIP_LARGE] [-r REPS] [-s shared|exclusive|lockall]\n"
            "       [--quick] [--json]\n"
            "  defaults: sizes 8..4M, %siters %ld (%ld above 8 KiB), skip %ld (%ld),\n"
            "  reps %d, lock shared + flush per %s.  --quick: iters %ld/%ld, skip %ld/%ld,\n"
            "  reps %d, max 1M.  --json: JSON lines on stdout, table on stderr.\n",
            b->name, w ? "[-w WINDOW] " : "", w ? "window 64, " : "",
            d->iters, d->iters_large, d->skip, d->skip_large, d->reps,
            w ? "window" : "op", q->iters, q->iters_large, q->skip, q->skip_large,
            q->reps);
}

int osu_init(int *argc, char ***argv, const osu_bench_t *b, osu_opts_t *o)
{
    int rank, nprocs;
    MPI_CHECK(MPI_Init(argc, argv));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nprocs));

    int pr = parse_args(*argc, *argv, b, o);
    if (pr != 0) {
        if (rank == 0) usage(b);
        MPI_Finalize();
        exit(pr > 0 ? 0 : 1);
    }
    if (nprocs != 2) {
        if (rank == 0) fprintf(stderr, "%s: needs exactly 2 ranks\n", b->name);
        MPI_Finalize();
        exit(1);
    }
    if (rank == 0) print_header(b, o);
    return rank;
}

void osu_win_create(size_t bytes, int fill, void *base_out, MPI_Win *win)
{
    MPI_CHECK(MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                               base_out, win));
    memset(*(void **)base_out, fill, bytes);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void osu_lock_target(const osu_opts_t *o, MPI_Win win)
{
    if (o->sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_lock_all(0, win));
    else MPI_CHECK(MPI_Win_lock(o->sync == SYNC_SHARED ? MPI_LOCK_SHARED
                                                      : MPI_LOCK_EXCLUSIVE, 1, 0, win));
}

void osu_unlock_target(const osu_opts_t *o, MPI_Win win)
{
    if (o->sync == SYNC_LOCKALL) MPI_CHECK(MPI_Win_unlock_all(win));
    else MPI_CHECK(MPI_Win_unlock(1, win));
}

int osu_check_put_at_target(const osu_run_t *run, const osu_size_t *s)
{
    int errors = 0;
    if (run->rank == 1) {
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, s->win));
        MPI_CHECK(MPI_Win_sync(s->win));
        if (s->wbase[0] != 'a' || s->wbase[s->wbytes - 1] != 'a') {
            fprintf(stderr, "%s: ERROR: size %zu: put data not visible at target\n",
                    run->b->name, s->size);
            errors++;
        }
        MPI_CHECK(MPI_Win_unlock(1, s->win));
    }
    return errors;
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

osu_result_t osu_result(const osu_bench_t *b, const osu_opts_t *o, long iters,
                        size_t bytes, const double *elapsed)
{
    const int bw = (b->flags & OSU_BANDWIDTH) != 0;
    double per_rep[MAX_REPS], total = 0.0;
    osu_result_t res;
    for (int r = 0; r < o->reps; r++) {
        if (bw) per_rep[r] = (double)bytes * (double)iters / 1e6 / elapsed[r];
        else per_rep[r] = elapsed[r] * 1e6 / (double)iters;
        total += elapsed[r];
    }
    if (bw) res.value = (double)bytes * (double)iters * o->reps / 1e6 / total;
    else res.value = total * 1e6 / ((double)iters * o->reps);
    res.median = median(per_rep, o->reps); /* sorts per_rep */
    res.best = bw ? per_rep[o->reps - 1] : per_rep[0];
    return res;
}

void osu_print_row(const osu_bench_t *b, const osu_opts_t *o, size_t size,
                   long iters, const osu_result_t *res)
{
    FILE *tab = osu_table(o);
    fprintf(tab, (b->flags & OSU_BANDWIDTH) ? "%-10zu%20.2f%14.2f%14.2f%10ld x %d\n"
                                            : "%-10zu%20.4f%14.4f%14.4f%10ld x %d\n",
            size, res->value, res->median, res->best, iters, o->reps);
    fflush(tab);
}

void osu_print_json(const osu_bench_t *b, const osu_opts_t *o, size_t size,
                    long iters, const osu_result_t *res)
{
    if (!o->json) return;
    if (b->flags & OSU_BANDWIDTH)
        printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"size\": %zu, "
               "\"bandwidth_mbs\": %.2f, \"median_mbs\": %.2f, \"max_mbs\": %.2f, "
               "\"window\": %d, \"iters\": %ld, \"reps\": %d, \"sync\": \"%s\"}\n",
               o->impl, b->name, size, res->value, res->median, res->best,
               o->window, iters, o->reps, sync_names[o->sync]);
    else
        printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"size\": %zu, "
               "\"latency_us\": %.4f, \"median_us\": %.4f, \"min_us\": %.4f, "
               "\"iters\": %ld, \"reps\": %d, \"sync\": \"%s\"}\n",
               o->impl, b->name, size, res->value, res->median, res->best,
               iters, o->reps, sync_names[o->sync]);
    fflush(stdout);
}

int osu_sweep_sizes(const osu_bench_t *b, const osu_opts_t *o, int rank,
                    osu_size_fn fn)
{
    const size_t per_size = (b->flags & OSU_WINDOW) ? (size_t)o->window : 1;
    const int fill = (b->flags & OSU_FILL_RANK) ? 'a' + rank : 0;
    osu_run_t run = {b, o, rank, NULL};
    if (posix_memalign((void **)&run.buf, 4096, o->max_size * per_size) != 0) {
        fprintf(stderr, "%s: out of memory\n", b->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(run.buf, 'a' + rank, o->max_size * per_size);

    int errors = 0;
    for (size_t size = o->min_size; size <= o->max_size; size *= 2) {
        osu_size_t s = {.size = size, .wbytes = size * per_size};
        s.iters = size > LARGE_MESSAGE_SIZE ? o->iters_large : o->iters;
        s.skip = size > LARGE_MESSAGE_SIZE ? o->skip_large : o->skip;
        size_t alloc = s.wbytes < MIN_WINDOW_BYTES ? MIN_WINDOW_BYTES : s.wbytes;
        osu_win_create(alloc, fill, &s.wbase, &s.win);
        double elapsed[MAX_REPS];
        errors += fn(&run, &s, elapsed);
        if (rank == 0) {
            osu_result_t res = osu_result(b, o, s.iters, s.wbytes, elapsed);
            osu_print_row(b, o, size, s.iters, &res);
            osu_print_json(b, o, size, s.iters, &res);
        }
        MPI_CHECK(MPI_Win_free(&s.win));
        if (size > o->max_size / 2) break; /* avoid overflow on huge -m */
    }
    free(run.buf);
    return errors;
}

int osu_finish(int errors)
{
    int all_errors = 0;
    MPI_CHECK(MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return all_errors ? 3 : 0;
}
