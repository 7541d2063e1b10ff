/* rget_overlap.c - pure MPI: how much of a passive-target get computation hides, completed
 * two ways: MPI_Get + MPI_Win_flush (what activerma's started gets did before session 25) and
 * MPI_Rget + MPI_Wait (what they do since: a request ARMCI_Test can ask without waiting).
 * comm = median of a blocking get; total = median of {start; compute for comm; complete};
 * overlap = (2 comm - total) / comm. Rank 1 waits in MPI_Barrier (it progresses all along).
 *
 * build: mpicc.openmpi -O2 bench/mpi_probes/rget_overlap.c -o /tmp/rget_overlap
 * run (every byte over TCP, as bench/armci_peers/run.sh --tcp):
 *   OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self OMPI_MCA_osc=ucx UCX_TLS=tcp,self \
 *     mpirun.openmpi -n 2 /tmp/rget_overlap 1048576 [multiple]
 * `multiple`: MPI_Init_thread(MPI_THREAD_MULTIPLE), as activerma initializes MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 15 };

static void compute_for(double s)
{
    double end = MPI_Wtime() + s;
    while (MPI_Wtime() < end)
        ;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t)
{
    qsort(t, N, sizeof *t, cmp);
    return t[N / 2];
}

int main(int argc, char **argv)
{
    int provided, me;
    if (argc > 2 && strcmp(argv[2], "multiple") == 0)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    char *base, *dst = malloc(n);
    MPI_Win win;
    MPI_Win_allocate(n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, me + 1, n);
    MPI_Win_lock_all(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        double comm[N], get_total[N], rget_total[N], get_issue[N], rget_issue[N];
        for (int k = 0; k < N; k++) {
            double t = MPI_Wtime();
            MPI_Get(dst, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
            MPI_Win_flush(1, win);
            comm[k] = MPI_Wtime() - t;
        }
        double busy = median(comm);
        for (int k = 0; k < N; k++) {
            double t = MPI_Wtime();
            MPI_Get(dst, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
            get_issue[k] = MPI_Wtime() - t;
            compute_for(busy);
            MPI_Win_flush(1, win);
            get_total[k] = MPI_Wtime() - t;
            MPI_Request r;
            t = MPI_Wtime();
            MPI_Rget(dst, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win, &r);
            rget_issue[k] = MPI_Wtime() - t;
            compute_for(busy);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            rget_total[k] = MPI_Wtime() - t;
            if (dst[n - 1] != 2) {
                fprintf(stderr, "rget_overlap: wrong bytes\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        double g = median(get_total), r = median(rget_total);
        printf("%d B, comm %.1f us | get+flush: issue %.1f us, overlap %.0f %% | rget+wait: issue %.1f us, overlap %.0f %%\n",
               n, busy * 1e6, median(get_issue) * 1e6, (2 * busy - g) / busy * 100, median(rget_issue) * 1e6,
               (2 * busy - r) / busy * 100);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(dst);
    MPI_Finalize();
    return 0;
}
