/* armcix.h (group split and dup, mutex sets with trylock, progress) and the calls Global
 * Arrays' own ARMCI adds (armci_msg_init / finalize, armci_notify / notify_wait,
 * armci_msg_reduce, armci_msg_sel), as existing ARMCI programs use them; and nested
 * initialisation (ARMCI_Init twice, ARMCI_Finalize twice, as GA's armci/testing/simple.c). */
#include "check.h"
#include <armcix.h>

#define ITERS 50
#define RING 10
#define RING_BYTES 1024

/* Every member adds one to a counter on the group's rank 0 under mutex 0 of that rank of the
 * set, ITERS times; the counter must end at ITERS * members exactly. */
static void count_under(armcix_mutex_hdl_t set, ARMCI_Group *g, long *counter_on_first, int first_abs) {
    int gsize;
    ARMCI_Group_size(g, &gsize);
    for (int i = 0; i < ITERS; i++) {
        ARMCIX_Lock_hdl(set, 0, 0);
        long v;
        ARMCI_Get(counter_on_first, &v, sizeof v, first_abs);
        v += 1;
        ARMCI_Put(&v, counter_on_first, sizeof v, first_abs);
        ARMCIX_Unlock_hdl(set, 0, 0);
        if (i % 8 == 0)
            ARMCIX_Progress();
    }
    armci_msg_group_barrier(g);
    long v;
    ARMCI_Get(counter_on_first, &v, sizeof v, first_abs);
    EXPECT(v == (long)ITERS * gsize, "counter under a mutex set = %ld, want %ld", v, (long)ITERS * gsize);
    armci_msg_group_barrier(g);
}

int main(int argc, char **argv) {
    armci_msg_init(&argc, &argv);
    ARMCI_Init();
    ARMCI_Init_args(&argc, &argv);
    int me = armci_msg_me(), n = armci_msg_nproc();
    ARMCI_Group world;
    ARMCI_Group_get_world(&world);

    /* Split by parity, ordered by descending job rank (key = -me). */
    ARMCI_Group half;
    ARMCIX_Group_split(&world, me % 2, -me, &half);
    int hrank, hsize, want_size = (n - me % 2 + 1) / 2;
    ARMCI_Group_rank(&half, &hrank);
    ARMCI_Group_size(&half, &hsize);
    EXPECT(hsize == want_size, "split group size %d, want %d", hsize, want_size);
    int highest = (n - 1) % 2 == me % 2 ? n - 1 : n - 2;
    EXPECT(ARMCI_Absolute_id(&half, 0) == highest, "split group rank 0 is job rank %d, want %d", ARMCI_Absolute_id(&half, 0), highest);
    EXPECT(hrank == (highest - me) / 2, "my split group rank %d, want %d", hrank, (highest - me) / 2);
    int sum = me;
    armci_msg_group_igop(&sum, 1, "+", &half);
    int want_sum = 0;
    for (int r = me % 2; r < n; r += 2)
        want_sum += r;
    EXPECT(sum == want_sum, "sum over the split group %d, want %d", sum, want_sum);

    /* A negative color joins no group. */
    ARMCI_Group none;
    ARMCIX_Group_split(&world, me == 0 ? -1 : 0, me, &none);
    int nrank, nsize;
    if (me == 0) {
        EXPECT(none.rank == -1 && none.size == 0, "an undefined color gave rank %d size %d", none.rank, none.size);
    } else {
        ARMCI_Group_rank(&none, &nrank);
        ARMCI_Group_size(&none, &nsize);
        EXPECT(nsize == n - 1 && nrank == me - 1, "the others' group: rank %d size %d", nrank, nsize);
    }
    ARMCI_Group_free(&none);

    /* Dup of the world: same members, its own collectives. */
    ARMCI_Group dup;
    ARMCIX_Group_dup(&world, &dup);
    int drank, dsize;
    ARMCI_Group_rank(&dup, &drank);
    ARMCI_Group_size(&dup, &dsize);
    EXPECT(drank == me && dsize == n, "dup: rank %d size %d", drank, dsize);
    long lsum = me + 1;
    armci_msg_group_lgop(&lsum, 1, "+", &dup);
    EXPECT(lsum == (long)n * (n + 1) / 2, "sum over the dup %ld", lsum);

    /* Two mutex sets at once: one over the job (2 mutexes each), one over the split group. */
    void **mem = malloc(sizeof(void *) * n);
    ARMCI_Malloc(mem, 64);
    memset(mem[me], 0, 64);
    ARMCI_Barrier();
    armcix_mutex_hdl_t job_set = ARMCIX_Create_mutexes_hdl(2, &world);
    armcix_mutex_hdl_t half_set = ARMCIX_Create_mutexes_hdl(1 + me, &half);
    count_under(job_set, &world, (long *)mem[0], 0);
    count_under(half_set, &half, (long *)((char *)mem[highest] + 8 * (1 + me % 2)), highest);

    /* Trylock: while rank 0 holds mutex 1 of rank n-1, every other rank fails to take it. */
    if (me == 0)
        ARMCIX_Lock_hdl(job_set, 1, n - 1);
    ARMCI_Barrier();
    if (me != 0)
        EXPECT(ARMCIX_Trylock_hdl(job_set, 1, n - 1) != 0, "trylock took a held mutex");
    ARMCI_Barrier();
    if (me == 0)
        ARMCIX_Unlock_hdl(job_set, 1, n - 1);
    ARMCI_Barrier();
    for (int r = 0; r < n; r++) {
        if (r == me) {
            EXPECT(ARMCIX_Trylock_hdl(job_set, 1, n - 1) == 0, "trylock of a free mutex failed");
            ARMCIX_Unlock_hdl(job_set, 1, n - 1);
        }
        ARMCI_Barrier();
    }
    /* A set over the whole job in reverse order, a different count per rank: the mutexes
     * are named by group rank (rank r of the group is job rank n-1-r and has n-r of them). */
    int *rev = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        rev[i] = n - 1 - i;
    ARMCI_Group back;
    ARMCI_Group_create(n, rev, &back);
    armcix_mutex_hdl_t back_set = ARMCIX_Create_mutexes_hdl(1 + me, &back);
    for (int r = 0; r < n; r++) {
        int owner_job = n - 1 - r, last = owner_job; /* job rank j created 1 + j mutexes */
        ARMCIX_Lock_hdl(back_set, last, r);
        ARMCIX_Unlock_hdl(back_set, last, r);
    }
    ARMCIX_Destroy_mutexes_hdl(back_set);
    ARMCI_Group_free(&back);
    free(rev);
    ARMCIX_Destroy_mutexes_hdl(half_set);
    ARMCIX_Destroy_mutexes_hdl(job_set);
    ARMCI_Free(mem[me]);

    /* Notify: a ring, each rank puts (blocking, then non-blocking) into the next one and
     * notifies it; the next one waits, then finds every byte. */
    void **ring = malloc(sizeof(void *) * n);
    ARMCI_Malloc(ring, 2 * RING_BYTES);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    unsigned char out[2 * RING_BYTES];
    for (int it = 1; it <= RING; it++) {
        for (int i = 0; i < 2 * RING_BYTES; i++)
            out[i] = (unsigned char)(me * 31 + it * 7 + i);
        ARMCI_Put(out, ring[next], RING_BYTES, next);
        armci_hdl_t h;
        ARMCI_INIT_HANDLE(&h);
        ARMCI_NbPut(out + RING_BYTES, (char *)ring[next] + RING_BYTES, RING_BYTES, next, &h);
        int sent = armci_notify(next);
        EXPECT(sent == it, "armci_notify returned %d, want %d", sent, it);
        int waited = 0;
        int got = armci_notify_wait(prev, &waited);
        EXPECT(waited == it && got >= it, "armci_notify_wait: waited %d, got %d, iteration %d", waited, got, it);
        unsigned char *in = ring[me];
        for (int i = 0; i < 2 * RING_BYTES; i++)
            EXPECT(in[i] == (unsigned char)(prev * 31 + it * 7 + i), "byte %d after notification %d: %d", i, it, in[i]);
        ARMCI_Wait(&h);
        ARMCI_Barrier(); /* nobody overwrites before its next has checked */
    }
    ARMCI_Free(ring[me]);

    /* armci_msg_reduce: the result at rank 0; armci_msg_sel: the largest value wins. */
    double d = me + 0.5;
    armci_msg_reduce(&d, 1, "+", ARMCI_DOUBLE);
    if (me == 0)
        EXPECT(d == n * (n - 1) / 2.0 + 0.5 * n, "armci_msg_reduce gave %f", d);
    long pick[2] = {(me * 7) % n, me};
    armci_msg_sel(pick, sizeof pick, "max", ARMCI_LONG, 1);
    long best = 0, who = 0;
    for (int r = 0; r < n; r++)
        if ((r * 7) % n > best) {
            best = (r * 7) % n;
            who = r;
        }
    EXPECT(pick[0] == best && pick[1] == who, "armci_msg_sel gave %ld from rank %ld, want %ld from %ld", pick[0], pick[1], best, who);

    ARMCI_Group_free(&dup);
    ARMCI_Group_free(&half);
    ARMCI_Finalize();
    EXPECT(ARMCI_Initialized() == 1, "the inner ARMCI_Finalize ended the runtime");
    ARMCI_Barrier();
    ARMCI_Finalize();
    EXPECT(ARMCI_Initialized() == 0, "the outer ARMCI_Finalize left the runtime up");
    armci_msg_finalize();
    if (me == 0)
        printf("test_armcix: ok on %d ranks (split, dup, mutex sets, trylock, notify, reduce, sel)\n", n);
    free(mem);
    free(ring);
    return 0;
}
