/* rma_calls.c - pure MPI: which call moves a blocking contiguous put or get faster, the
 * one-sided call (MPI_Put + MPI_Win_flush, MPI_Rget + MPI_Wait) or its accumulate twin
 * (MPI_Accumulate(MPI_REPLACE) + MPI_Win_flush, MPI_Rget_accumulate(MPI_NO_OP) + MPI_Wait)?
 * The answer depends on the MPI and its network, which is why activerma's mpi conduit measures
 * it per rank and size class (crates/transport/src/rma_calls.rs, ACTIVERMA_MPI_RMA_CALLS).
 * Rank 0 times each call against rank 1 (which waits in MPI_Barrier) for 8 B to 1 MiB, after a
 * warm-up round, and prints the best of 5 batches per call and size and the ratio
 * accumulate / native.
 *
 * build: mpicc.mpich -O2 bench/mpi_probes/rma_calls.c -o /tmp/rma_calls
 * run:   bash scripts/emulated-hosts.sh up 2   (root; two emulated hosts, TCP between them)
 *        bash scripts/emulated-hosts.sh mpirun mpich -n 2 -- /tmp/rma_calls
 *        (mpicc.openmpi and `mpirun openmpi` for Open MPI) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX = 1 << 20, BATCHES = 5 };

/* Microseconds per transfer of n bytes by `how` (0 put, 1 replace, 2 rget, 3 rget_accumulate):
 * the best of BATCHES batches of `iters`. */
static double best_us(MPI_Win win, char *buf, int n, int how, int iters)
{
    double best = 1e30;
    for (int b = 0; b < BATCHES; b++) {
        double t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Request r;
            switch (how) {
            case 0:
                MPI_Put(buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                MPI_Win_flush(1, win);
                break;
            case 1:
                MPI_Accumulate(buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, MPI_REPLACE, win);
                MPI_Win_flush(1, win);
                break;
            case 2:
                MPI_Rget(buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win, &r);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                break;
            default:
                MPI_Rget_accumulate(NULL, 0, MPI_BYTE, buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, MPI_NO_OP, win, &r);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                break;
            }
        }
        t = (MPI_Wtime() - t) / iters * 1e6;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (me == 0) fprintf(stderr, "rma_calls: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *base, *buf = malloc(MAX);
    memset(buf, 1, MAX);
    MPI_Win win;
    MPI_Win_allocate(MAX, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        printf("# %.*s\n", (int)strcspn(lib, "\n"), lib);
        printf("# us per blocking transfer, best of %d batches; ratio = accumulate twin / native call\n", BATCHES);
        printf("%10s %12s %12s %7s %12s %16s %7s\n", "bytes", "put+flush", "replace", "ratio", "rget+wait",
               "rget_acc(no_op)", "ratio");
        const int sizes[] = {8, 64, 512, 4096, 32768, 262144, MAX};
        for (int k = 0; k < 4; k++) best_us(win, buf, 8, k, 100); /* connections and caches warm */
        for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int n = sizes[s], iters = n >= 65536 ? 20 : 200;
            double put = best_us(win, buf, n, 0, iters), rep = best_us(win, buf, n, 1, iters);
            double get = best_us(win, buf, n, 2, iters), gacc = best_us(win, buf, n, 3, iters);
            printf("%10d %12.2f %12.2f %7.2f %12.2f %16.2f %7.2f\n", n, put, rep, rep / put, get, gacc, gacc / get);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(buf);
    MPI_Finalize();
    return 0;
}
