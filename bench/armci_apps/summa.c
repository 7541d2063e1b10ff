/*
 * summa.c - distributed dense matrix multiplication C = A x B on ARMCI, the application of the
 * ARMCI paper's §6: each rank owns a block of rows of A, B and C; it fetches the other ranks'
 * blocks of B with non-blocking gets (ARMCI_NbGet, double-buffered) while it multiplies the
 * block it has, so communication overlaps the local matrix product.
 *
 *   rank r:  C[r] = sum over k of A[r][:, cols of block k] x B[k]       (B[k] lives on rank k)
 *            for k = r, r+1, ... (mod P): start the get of B[k+1], multiply with B[k], wait
 *
 * The entries of A and B are small integers, so every product is exact: each rank checks its
 * rows of C against the product computed serially from the same formulas (a wrong entry ends
 * the run with a non-zero status). Output: one JSON line on stdout (time of the
 * multiplication, median over the repetitions; the time rank 0 spent waiting for gets).
 *
 * usage: summa [-n N] [-r REPS] [-i IMPL] [-b]   (-b: blocking gets, no overlap)
 * One source for activerma's libarmci and ARMCI-MPI (WITH_MPI: MPI_Init first).
 */
#define _POSIX_C_SOURCE 200809L
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include <armci.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double a_at(long i, long l) { return (double)((i + 2 * l) % 7) - 3.0; }
static double b_at(long l, long j) { return (double)((3 * l + j) % 5) - 2.0; }

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* c[rows x n] += a[rows x m, leading dimension lda] x b[m x n] */
static void gemm(long rows, long m, long n, const double *a, long lda, const double *b, double *c) {
    for (long i = 0; i < rows; i++)
        for (long l = 0; l < m; l++) {
            double x = a[i * lda + l];
            const double *brow = b + l * n;
            double *crow = c + i * n;
            for (long j = 0; j < n; j++)
                crow[j] += x * brow[j];
        }
}

int main(int argc, char **argv) {
    long n = 512;
    int reps = 5, blocking = 0;
    const char *impl = "activerma";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc)
            impl = argv[++i];
        else if (!strcmp(argv[i], "-b"))
            blocking = 1;
    }
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    ARMCI_Init();
    int me = armci_msg_me(), p = armci_msg_nproc();
    if (n % p != 0 || reps < 1 || reps > 64)
        ARMCI_Error("summa: N must be a multiple of the number of ranks, REPS 1..64", (int)n);
    long rows = n / p, block = rows * n;
    void **bases = malloc(sizeof(void *) * p);
    ARMCI_Malloc(bases, block * sizeof(double));
    double *b_mine = bases[me];
    double *a = malloc(block * sizeof(double)), *c = malloc(block * sizeof(double));
    double *buf[2] = {malloc(block * sizeof(double)), malloc(block * sizeof(double))};
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < n; j++) {
            a[i * n + j] = a_at(me * rows + i, j);
            b_mine[i * n + j] = b_at(me * rows + i, j);
        }
    ARMCI_Barrier();

    double times[64], waited[64];
    for (int r = 0; r < reps; r++) {
        memset(c, 0, block * sizeof(double));
        ARMCI_Barrier();
        double t0 = now_us(), wait_us = 0;
        armci_hdl_t h;
        const double *cur = b_mine;
        for (int s = 0; s < p; s++) {
            int k = (me + s) % p, next = (me + s + 1) % p;
            double *into = buf[s % 2];
            int more = s + 1 < p;
            if (more) {
                ARMCI_INIT_HANDLE(&h);
                if (blocking) {
                    double tw = now_us();
                    ARMCI_Get(bases[next], into, (int)(block * sizeof(double)), next);
                    wait_us += now_us() - tw;
                } else {
                    ARMCI_NbGet(bases[next], into, (int)(block * sizeof(double)), next, &h);
                }
            }
            gemm(rows, rows, n, a + k * rows, n, cur, c);
            if (more) {
                if (!blocking) {
                    double tw = now_us();
                    ARMCI_Wait(&h);
                    wait_us += now_us() - tw;
                }
                cur = into;
            }
        }
        ARMCI_Barrier();
        times[r] = now_us() - t0;
        waited[r] = wait_us;
    }

    /* Check every entry of this rank's rows against the serial product. */
    long bad = 0;
    double *row = malloc(n * sizeof(double));
    for (long i = 0; i < rows; i++) {
        long gi = me * rows + i;
        memset(row, 0, n * sizeof(double));
        for (long l = 0; l < n; l++) {
            double x = a_at(gi, l);
            for (long j = 0; j < n; j++)
                row[j] += x * b_at(l, j);
        }
        for (long j = 0; j < n; j++)
            bad += row[j] != c[i * n + j];
    }
    if (bad) {
        fprintf(stderr, "summa: rank %d: %ld entries of C differ from the serial product\n", me, bad);
        ARMCI_Error("summa: wrong product", (int)bad);
    }
    qsort(times, reps, sizeof(double), cmp);
    qsort(waited, reps, sizeof(double), cmp);
    ARMCI_Barrier();
    if (me == 0)
        printf("{\"app\":\"summa\",\"impl\":\"%s\",\"n\":%ld,\"ranks\":%d,\"gets\":\"%s\",\"time_us\":%.1f,"
               "\"min_us\":%.1f,\"max_us\":%.1f,\"wait_us\":%.1f,\"check\":\"ok\"}\n",
               impl, n, p, blocking ? "blocking" : "non-blocking", times[reps / 2], times[0], times[reps - 1],
               waited[reps / 2]);
    free(row);
    free(buf[0]);
    free(buf[1]);
    free(a);
    free(c);
    ARMCI_Free(b_mine);
    ARMCI_Finalize();
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}
