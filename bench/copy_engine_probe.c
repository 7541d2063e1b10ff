/* The probe behind the copy-engine decision (docs/design/armci.md, "Not done yet"): can a
 * helper thread that copies a 2-D patch (1024 rows of 1 KiB, every other row of the source)
 * hide the copy behind the main thread's computation? Three ways to move the patch:
 *   0  at issue: the main thread copies it, then computes (what a program without a data
 *      server does today)
 *   1  engine, spinning: a helper thread polls for work
 *   2  engine, sleeping: a helper thread waits on a futex and is woken per patch
 * comm = median time of the copy alone; total = median of {hand over / copy, compute for
 * comm, wait}; overlap = (comm + comm - total) / comm (1: the copy hid entirely). Medians of
 * 21. Run it alone (a spare CPU) and two at once (every CPU busy computing, as two ranks on a
 * 2-CPU node):
 *
 *   gcc -O2 -pthread bench/copy_engine_probe.c -o /tmp/cep
 *   for m in 0 1 2; do /tmp/cep $m; /tmp/cep $m & /tmp/cep $m; wait; done
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROWS 1024
#define ROW 1024
#define REPS 21

static char *src, *dst;
static atomic_int job;  /* 1: a patch to copy; -1: stop */
static atomic_int done; /* 1: the patch is copied */
static int sleeping;    /* mode 2 */

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void futex_wait(atomic_int *word, int seen) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(atomic_int *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Waits until *word differs from `seen`: polls, or sleeps on the futex in mode 2. */
static int wait_change(atomic_int *word, int seen) {
    int v;
    while ((v = atomic_load_explicit(word, memory_order_acquire)) == seen) {
        if (sleeping)
            futex_wait(word, seen);
        else
            __builtin_ia32_pause();
    }
    return v;
}

static void copy_patch(void) {
    for (int r = 0; r < ROWS; r++) memcpy(dst + (size_t)r * ROW, src + (size_t)2 * r * ROW, ROW);
}

static void *engine(void *unused) {
    (void)unused;
    while (wait_change(&job, 0) > 0) {
        copy_patch();
        atomic_store_explicit(&job, 0, memory_order_relaxed);
        atomic_store_explicit(&done, 1, memory_order_release);
        futex_wake(&done);
    }
    return NULL;
}

static volatile double sink;

/* Computation that touches no memory, for `ns` nanoseconds. */
static void compute(double ns) {
    double t0 = now_ns(), x = 1;
    while (now_ns() - t0 < ns)
        for (int i = 0; i < 100; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v) {
    qsort(v, REPS, sizeof *v, by_value);
    return v[REPS / 2];
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0;
    static const char *names[] = {"at issue", "engine, spinning", "engine, sleeping"};
    if (mode < 0 || mode > 2) {
        fprintf(stderr, "usage: %s 0|1|2 (at issue, spinning engine, sleeping engine)\n", argv[0]);
        return 2;
    }
    sleeping = mode == 2;
    src = malloc((size_t)2 * ROWS * ROW);
    dst = malloc((size_t)ROWS * ROW);
    if (!src || !dst) return 1;
    memset(src, 1, (size_t)2 * ROWS * ROW);
    memset(dst, 0, (size_t)ROWS * ROW);
    pthread_t helper;
    if (mode > 0) pthread_create(&helper, NULL, engine, NULL);

    double t[REPS];
    for (int i = 0; i < REPS; i++) {
        double t0 = now_ns();
        copy_patch();
        t[i] = now_ns() - t0;
    }
    double comm = median(t);
    for (int i = 0; i < REPS; i++) {
        double t0 = now_ns();
        if (mode == 0) {
            copy_patch();
        } else {
            atomic_store_explicit(&done, 0, memory_order_relaxed);
            atomic_store_explicit(&job, 1, memory_order_release);
            if (sleeping) futex_wake(&job);
        }
        compute(comm);
        if (mode > 0) wait_change(&done, 0);
        t[i] = now_ns() - t0;
    }
    double total = median(t);
    printf("%-17s comm %7.1f us  total %8.1f us  overlap %6.2f\n", names[mode], comm / 1e3, total / 1e3, (2 * comm - total) / comm);
    if (mode > 0) {
        atomic_store_explicit(&job, -1, memory_order_release);
        futex_wake(&job);
        pthread_join(helper, NULL);
    }
    return 0;
}
