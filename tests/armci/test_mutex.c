/* ARMCI mutexes under contention from every rank: a non-atomic read-increment-write of a
 * counter on every rank, protected by mutex m of that rank, loses no update. Ranks create
 * different numbers of mutexes. Then the same under armci_lockmem, of two different ranges
 * of one rank. */
#include "check.h"

#define ITERS 100

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, (n + 1) * sizeof(int)); /* counter m guarded by mutex m; [n] extra */
    memset(base[me], 0, (n + 1) * sizeof(int));
    ARMCI_Create_mutexes(me + 1); /* rank r has mutexes 0..r */
    ARMCI_Barrier();
    for (int i = 0; i < ITERS; i++)
        for (int k = 0; k < n; k++) {
            int t = k; /* every rank contends for the same rank's mutexes at once */
            int m = i % (t + 1);
            ARMCI_Lock(m, t);
            int *c = (int *)base[t] + m;
            int v = ARMCI_GetValueInt(c, t);
            ARMCI_PutValueInt(v + 1, c, t);
            ARMCI_Unlock(m, t);
        }
    /* Mutex 0 of rank 0 also guards a second counter, taken twice in a row. */
    ARMCI_Lock(0, 0);
    int v = ARMCI_GetValueInt((int *)base[0] + n, 0);
    ARMCI_PutValueInt(v + 1, (int *)base[0] + n, 0);
    ARMCI_Unlock(0, 0);
    ARMCI_Barrier();
    int *c = base[me];
    for (int m = 0; m <= me; m++) {
        int want = 0;
        for (int i = 0; i < ITERS; i++)
            want += n * (i % (me + 1) == m);
        EXPECT(c[m] == want, "counter %d of rank %d is %d, want %d", m, me, c[m], want);
    }
    if (me == 0)
        EXPECT(c[n] == n, "second counter %d", c[n]);
    ARMCI_Destroy_mutexes();
    /* Create again after destroy. */
    ARMCI_Create_mutexes(1);
    ARMCI_Lock(0, (me + 1) % n);
    ARMCI_Unlock(0, (me + 1) % n);
    ARMCI_Destroy_mutexes();
    /* armci_lockmem: counters [n-1] and [n] of rank n-1, each rank locking the range of one
     * of them (alternately), incremented without atomics. Both ranges share rank n-1's lock. */
    int last = n - 1;
    if (me == last)
        memset(base[me], 0, (n + 1) * sizeof(int));
    ARMCI_Barrier();
    for (int i = 0; i < ITERS; i++) {
        int *cnt = (int *)base[last] + (n - 1) + (i + me) % 2;
        armci_lockmem(cnt, (char *)cnt + sizeof(int) - 1, last);
        int w = ARMCI_GetValueInt(cnt, last);
        ARMCI_PutValueInt(w + 1, cnt, last);
        /* The other counter, under the same lock, gets 2: every rank's lock of either range
         * excludes every other rank's. */
        int *other = (int *)base[last] + (n - 1) + (i + me + 1) % 2;
        int o = ARMCI_GetValueInt(other, last);
        ARMCI_PutValueInt(o + 2, other, last);
        armci_unlockmem(last);
    }
    ARMCI_Barrier();
    if (me == last) {
        int *lc = base[me];
        /* Per rank and counter: ITERS/2 locks of its range (+1), ITERS/2 of the other's (+2). */
        int want = n * (ITERS / 2) * 3;
        EXPECT(lc[n - 1] == want && lc[n] == want, "lockmem counters %d %d, want %d", lc[n - 1], lc[n], want);
    }
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_mutex: ok on %d ranks\n", n);
    return 0;
}
