/* rget_datatype.c - pure MPI: does the request of an MPI_Rget whose target side is a derived
 * datatype (a 2-D patch: every other row of the target's window) complete only once the data
 * is in the origin's buffer, as MPI says? Prints, per rank, the wrong bytes after MPI_Wait
 * and after a further MPI_Win_flush of the target. activerma's non-blocking strided gets
 * across hosts are such an MPI_Rget (transport/src/mpi/started.rs); on Debian's MPICH 4.0.2
 * the data arrives only at the flush, so the conduit flushes a list's get after its request
 * completed.
 *
 * build: mpicc.mpich -O2 bench/mpi_probes/rget_datatype.c -o /tmp/rget_datatype
 * run:   mpiexec.mpich -n 2 /tmp/rget_datatype
 *        (mpicc.openmpi / mpirun.openmpi --allow-run-as-root for Open MPI)
 * exit status: 0 when the data was there after MPI_Wait, 1 when only after the flush. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROWS = 16, ROW = 1024 };

static unsigned char value(long at, int rank)
{
    return (unsigned char)(at * 7 + rank);
}

/* Bytes of the patch (rows 0, 2, 4, ... of rank t's window) that `dst` does not hold. */
static int wrong(const unsigned char *dst, int t)
{
    int bad = 0;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < ROW; j++)
            bad += dst[i * ROW + j] != value(2L * i * ROW + j, t);
    return bad;
}

int main(int argc, char **argv)
{
    int me, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    unsigned char *win_mem;
    MPI_Win win;
    MPI_Win_allocate(2 * ROWS * ROW, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win_mem, &win);
    for (long i = 0; i < 2 * ROWS * ROW; i++)
        win_mem[i] = value(i, me);
    MPI_Win_lock_all(0, win);
    MPI_Barrier(MPI_COMM_WORLD);

    int t = (me + 1) % n, lens[ROWS];
    MPI_Aint rows[ROWS];
    for (int i = 0; i < ROWS; i++) {
        lens[i] = ROW;
        rows[i] = 2L * i * ROW;
    }
    MPI_Datatype patch;
    MPI_Type_create_hindexed(ROWS, lens, rows, MPI_UINT8_T, &patch);
    MPI_Type_commit(&patch);
    unsigned char *dst = calloc(ROWS * ROW, 1);
    MPI_Request req;
    MPI_Rget(dst, ROWS * ROW, MPI_UINT8_T, t, 0, 1, patch, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    int after_wait = wrong(dst, t);
    MPI_Win_flush(t, win);
    int after_flush = wrong(dst, t);
    printf("rank %d: %d of %d bytes wrong after MPI_Wait, %d after MPI_Win_flush\n", me, after_wait, ROWS * ROW, after_flush);

    MPI_Type_free(&patch);
    free(dst);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return after_wait != 0;
}
