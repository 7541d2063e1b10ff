/* ARMCI_Rmw from every rank: fetch-and-add on an int, the int next to it and a long (every
 * fetched value is unique and the totals exact), then swaps of ints and longs (the values
 * swapped out, plus the one left, are exactly the values swapped in). */
#include "check.h"

#define ITERS 200

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    void **base = malloc(sizeof(void *) * n);
    /* [0] int counter, [1] the int sharing its 64-bit word, [2..3] a long counter,
     * [4] int swap cell, [6..7] long swap cell, [16..] one flag per ticket. */
    ARMCI_Malloc(base, (16 + ITERS * 4 * 2) * sizeof(int));
    int *mem = base[me];
    memset(mem, 0, (16 + ITERS * 4 * 2) * sizeof(int));
    if (me == 0) {
        mem[4] = -1;
        *(long *)&mem[6] = -1;
    }
    ARMCI_Barrier();
    int *ctr = base[0];
    for (int i = 0; i < ITERS; i++) {
        int old;
        long lold;
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &old, &ctr[0], 1, 0);
        EXPECT(old >= 0 && old < n * ITERS, "ticket %d", old);
        /* Mark the ticket: a ticket handed out twice would be marked twice. */
        int mark_old;
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &mark_old, &ctr[16 + old], 1, 0);
        EXPECT(mark_old == 0, "ticket %d handed out twice", old);
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &old, &ctr[1], 2, 0);
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD_LONG, &lold, &ctr[2], 3, 0);
    }
    ARMCI_Barrier();
    if (me == 0) {
        EXPECT(mem[0] == n * ITERS, "int counter %d", mem[0]);
        EXPECT(mem[1] == 2 * n * ITERS, "neighbouring int %d", mem[1]);
        EXPECT(*(long *)&mem[2] == 3L * n * ITERS, "long counter %ld", *(long *)&mem[2]);
    }
    /* Swaps: rank r swaps in r; the returned values are the previous occupants. */
    int v = me;
    ARMCI_Rmw(ARMCI_SWAP, &v, &ctr[4], 0, 0);
    long lv = 1000 + me;
    ARMCI_Rmw(ARMCI_SWAP_LONG, &lv, &ctr[6], 0, 0);
    /* Gather what everyone got back with a reduction: each value's bit (value+1). */
    long got[2] = {1L << (v + 1), 1L << (lv == -1 ? 0 : lv - 1000 + 1)};
    armci_msg_lgop(got, 2, "+");
    if (me == 0) {
        long left = 1L << (mem[4] + 1), lleft = 1L << (*(long *)&mem[6] - 1000 + 1);
        long all = (1L << (n + 1)) - 1;
        EXPECT(got[0] + left == all, "int swaps returned %lx and left %d", got[0], mem[4]);
        EXPECT(got[1] + lleft == all, "long swaps returned %lx and left %ld", got[1], *(long *)&mem[6]);
    }
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_rmw: ok on %d ranks\n", n);
    return 0;
}
