/* The MPI build as real ARMCI programs use it (Global Arrays among them): the program starts
 * MPI itself at the lowest thread level (plain MPI_Init), initializes ARMCI over its world
 * communicator, mixes its own MPI calls with ARMCI's, uses the communicator every ARMCI_Group
 * carries, and finalizes MPI itself after ARMCI_Finalize (which must leave MPI running).
 *
 *   test_mpi_interplay           the above
 *   test_mpi_interplay part      each half of MPI_COMM_WORLD runs ARMCI over its own half
 *   test_mpi_interplay thread    a progress thread asked for under MPI_THREAD_SINGLE: a clear
 *                                error (only the program's own calls may enter MPI) */
#define _POSIX_C_SOURCE 200809L
#include "../check.h"
#include <armcix.h>
#include <mpi.h>

static int mpi_rank(MPI_Comm c) {
    int r;
    MPI_Comm_rank(c, &r);
    return r;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "thread") == 0) setenv("ACTIVERMA_PROGRESS", "thread", 1);
    MPI_Init(&argc, &argv);
    int me = mpi_rank(MPI_COMM_WORLD), n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc > 1 && strcmp(argv[1], "part") == 0) {
        /* Halves in reverse order of world rank, one after the other (Global Arrays' comm_init
         * test does this): ARMCI's ranks are the half's. */
        MPI_Comm half;
        int color = me < n / 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, n - me, &half);
        for (int turn = 0; turn < 2; turn++) {
            if (color == turn) {
                ARMCI_Init_mpi_comm(half);
                int hn, hme = mpi_rank(half);
                MPI_Comm_size(half, &hn);
                EXPECT(armci_msg_me() == hme && armci_msg_nproc() == hn, "ARMCI's ranks are the half's: %d of %d",
                       armci_msg_me(), armci_msg_nproc());
                void **b = malloc(hn * sizeof *b);
                ARMCI_Malloc(b, sizeof(long));
                long v = 100 + me;
                ARMCI_Put(&v, b[(hme + 1) % hn], sizeof v, (hme + 1) % hn);
                ARMCI_Barrier();
                long got = *(long *)b[hme], left;
                MPI_Sendrecv(&v, 1, MPI_LONG, (hme + 1) % hn, 1, &left, 1, MPI_LONG, (hme + hn - 1) % hn, 1, half,
                             MPI_STATUS_IGNORE);
                EXPECT(got == left, "the put from my left neighbour in the half: %ld, want %ld", got, left);
                ARMCI_Free(b[hme]);
                free(b);
                ARMCI_Finalize();
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Finalize();
        if (me == 0) printf("test_mpi_interplay part: ok on %d ranks\n", n);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        ARMCI_Init(); /* ends the job */
        return 0;
    }
    ARMCI_Init_mpi_comm(MPI_COMM_WORLD);
    EXPECT(ARMCI_Initialized(), "ARMCI is up");
    EXPECT(armci_msg_me() == me && armci_msg_nproc() == n, "ARMCI's ranks are MPI's: %d of %d", armci_msg_me(),
           armci_msg_nproc());

    /* The world group's communicator holds the job in rank order. */
    ARMCI_Group world;
    ARMCI_Group_get_world(&world);
    int cmp;
    MPI_Comm_compare(world.comm, MPI_COMM_WORLD, &cmp);
    EXPECT(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, "world group comm congruent (%d)", cmp);
    EXPECT(armci_group_comm(&world) == world.comm, "armci_group_comm returns the member");

    /* One-sided traffic, then the program's own MPI collective on the group's communicator. */
    void **base = malloc(n * sizeof *base);
    ARMCI_Malloc(base, 64 * sizeof(long));
    long mine[64];
    for (int i = 0; i < 64; i++) mine[i] = 1000L * me + i;
    int right = (me + 1) % n;
    ARMCI_Put(mine, base[right], sizeof mine, right);
    ARMCI_Fence(right);
    MPI_Barrier(world.comm);
    long *got = base[me];
    int left = (me + n - 1) % n;
    for (int i = 0; i < 64; i++) EXPECT(got[i] == 1000L * left + i, "element %d from rank %d: %ld", i, left, got[i]);
    long sum = me, total = 0;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, world.comm);
    EXPECT(total == (long)n * (n - 1) / 2, "allreduce on the group's communicator: %ld", total);

    /* A group of every rank in reverse order: its communicator ranks them the same way. */
    int *rev = malloc(n * sizeof *rev);
    for (int i = 0; i < n; i++) rev[i] = n - 1 - i;
    ARMCI_Group back;
    ARMCI_Group_create(n, rev, &back);
    int grank;
    ARMCI_Group_rank(&back, &grank);
    EXPECT(grank == n - 1 - me, "group rank %d", grank);
    EXPECT(mpi_rank(back.comm) == grank, "the reversed group's communicator ranks it %d", mpi_rank(back.comm));
    ARMCI_Group_set_default(&back);
    ARMCI_Group dflt;
    ARMCI_Group_get_default(&dflt);
    EXPECT(dflt.comm == back.comm, "the default group's communicator is the group's");
    ARMCI_Group_set_default(&world);
    ARMCI_Group_free(&back);

    /* armcix.h's split: each half's communicator ranks its members as the group does (by key,
     * here descending world rank), and an MPI collective on it sums that half. */
    ARMCI_Group half;
    ARMCIX_Group_split(&world, me % 2, n - me, &half);
    int hrank;
    ARMCI_Group_rank(&half, &hrank);
    EXPECT(mpi_rank(half.comm) == hrank, "the split group's communicator ranks it %d, the group %d", mpi_rank(half.comm), hrank);
    long hsum = me, htotal = 0, hwant = 0;
    for (int r = me % 2; r < n; r += 2) hwant += r;
    MPI_Allreduce(&hsum, &htotal, 1, MPI_LONG, MPI_SUM, half.comm);
    EXPECT(htotal == hwant, "allreduce on the split group's communicator: %ld, want %ld", htotal, hwant);
    ARMCI_Group_free(&half);
    EXPECT(half.comm == MPI_COMM_NULL, "Group_free left the split communicator set");

    /* Rmw and MPI point-to-point side by side. */
    void **counter_base = malloc(n * sizeof *counter_base);
    ARMCI_Malloc(counter_base, sizeof(long));
    if (me == 0) *(long *)counter_base[0] = 0;
    ARMCI_Barrier();
    long old;
    ARMCI_Rmw(ARMCI_FETCH_AND_ADD_LONG, &old, counter_base[0], 1, 0);
    int token = me;
    if (n > 1) {
        if (me == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        } else if (me == 1) {
            MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            EXPECT(token == 0, "point-to-point beside ARMCI: %d", token);
        }
    }
    ARMCI_Barrier();
    if (me == 0) EXPECT(*(long *)counter_base[0] == n, "every rank's Rmw counted: %ld", *(long *)counter_base[0]);

    ARMCI_Free(counter_base[me]);
    ARMCI_Free(base[me]);
    ARMCI_Group_free(&world);
    free(counter_base);
    free(base);
    free(rev);
    ARMCI_Finalize();
    /* MPI is still the program's. */
    int finalized = 1;
    MPI_Finalized(&finalized);
    EXPECT(!finalized, "ARMCI_Finalize left MPI running");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (me == 0) printf("test_mpi_interplay: ok on %d ranks\n", n);
    return 0;
}
