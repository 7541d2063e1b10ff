/* Location consistency without fences: from one origin, a get after a put (or a second put,
 * or an accumulate) to the same place sees the earlier operation. */
#include "check.h"

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 8192);
    memset(base[me], 0, 8192);
    ARMCI_Barrier();
    /* Each rank owns slice me of every rank's block. */
    char big[1024], small[16], got[1024];
    for (int t = 0; t < n; t++) {
        char *slot = (char *)base[t] + 1024 * me;
        for (int it = 0; it < 200; it++) {
            ARMCI_PutValueInt(it, slot, t);
            EXPECT(ARMCI_GetValueInt(slot, t) == it, "put then get, iteration %d", it);
            memset(big, it, sizeof big);
            memset(small, it + 1, sizeof small);
            ARMCI_Put(big, slot, 1000, t);
            ARMCI_Put(small, slot + 100, 16, t);
            ARMCI_Get(slot, got, 1000, t);
            for (int i = 0; i < 1000; i++)
                EXPECT(got[i] == (char)(i >= 100 && i < 116 ? it + 1 : it), "put, put, get: byte %d", i);
            int v = 5, one = 1;
            ARMCI_PutValueInt(v, slot + 1000, t);
            ARMCI_Acc(ARMCI_ACC_INT, &one, &v, slot + 1000, 4, t);
            EXPECT(ARMCI_GetValueInt(slot + 1000, t) == 10, "put, acc, get");
            int old;
            ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &old, slot + 1000, 1, t);
            EXPECT(old == 10, "acc then rmw sees %d", old);
            ARMCI_NbPut(big, slot, 8, t, NULL);
            EXPECT(ARMCI_GetValueInt(slot, t) == *(int *)big, "nb put then get");
        }
    }
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_consistency: ok on %d ranks\n", n);
    return 0;
}
