/* Memory and contiguous transfers: ARMCI_Malloc with a different size on every rank (one rank
 * asks for 0), puts and gets to every rank (self included), local memory, ARMCI_Copy, Free. */
#include "check.h"

int main(int argc, char **argv) {
    ARMCI_Init_args(&argc, &argv);
    EXPECT(ARMCI_Initialized() == 1, "initialized");
    int me = armci_msg_me(), n = armci_msg_nproc();
    /* Rank r gets (r+1)*1000 bytes; the last rank asks for nothing. */
    armci_size_t mine = me == n - 1 ? 0 : (armci_size_t)(me + 1) * 1000;
    void **base = malloc(sizeof(void *) * n);
    EXPECT(ARMCI_Malloc(base, mine) == 0, "malloc");
    for (int r = 0; r < n; r++)
        EXPECT((base[r] == NULL) == (r == n - 1), "rank %d's base is %p", r, base[r]);
    if (mine > 0)
        memset(base[me], 0, (size_t)mine);
    ARMCI_Barrier();

    char *src = ARMCI_Malloc_local(4000), *dst = ARMCI_Malloc_local(4000);
    EXPECT(src && dst, "local memory");
    /* Every rank writes a 100-byte slice (at offset 100*me) of every rank that has memory. */
    for (int t = 0; t < n - 1; t++) {
        for (int i = 0; i < 100; i++)
            src[i] = (char)(me * 31 + t * 7 + i);
        ARMCI_Put(src, (char *)base[t] + 100 * me, 100, t);
    }
    ARMCI_Barrier();
    for (int t = 0; t < n - 1; t++) {
        for (int w = 0; w < n; w++) {
            ARMCI_Get((char *)base[t] + 100 * w, dst, 100, t);
            for (int i = 0; i < 100; i++)
                EXPECT(dst[i] == (char)(w * 31 + t * 7 + i), "rank %d's slice %d byte %d is %d", t, w, i, dst[i]);
        }
    }
    /* The last byte of each block is reachable; sizes differ per rank. */
    for (int t = 0; t < n - 1; t++) {
        char c = (char)(40 + me);
        ARMCI_Barrier();
        if (me == 0)
            ARMCI_Put(&c, (char *)base[t] + (t + 1) * 1000 - 1, 1, t);
        ARMCI_Barrier();
        ARMCI_Get((char *)base[t] + (t + 1) * 1000 - 1, &c, 1, t);
        EXPECT(c == 40, "last byte of rank %d is %d", t, c);
    }
    /* ARMCI_Copy is a local copy. */
    memset(src, 9, 50);
    ARMCI_Copy(src, dst, 50);
    EXPECT(dst[0] == 9 && dst[49] == 9, "copy");
    EXPECT(ARMCI_Same_node(me) == 1, "a rank shares its own node"); /* the rest: test_topology */
    if (mine > 0) {
        ARMCI_Access_begin(base[me]);
        ARMCI_Access_end(base[me]);
    }
    /* A second allocation, all the same size, freed before the first. */
    void **b2 = malloc(sizeof(void *) * n);
    ARMCI_Malloc(b2, 64);
    ARMCI_PutValueInt(me, (int *)b2[(me + 1) % n] + 1, (me + 1) % n);
    ARMCI_Barrier();
    EXPECT(((int *)b2[me])[1] == (me + n - 1) % n, "second allocation");
    ARMCI_Free(b2[me]);
    ARMCI_Free(base[me]); /* NULL on the last rank */
    ARMCI_Free_local(src);
    ARMCI_Free_local(dst);
    ARMCI_Finalize();
    EXPECT(ARMCI_Initialized() == 0, "finalized");
    if (me == 0)
        printf("test_contiguous: ok on %d ranks\n", n);
    return 0;
}
