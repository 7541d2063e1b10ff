/* Non-blocking transfers in flight: many NbGets at once (each with its own handle), tested and
 * waited out of order; ARMCI's location consistency without fences (an NbPut then a blocking
 * Get of the same place sees the put; an NbGet is not overtaken by a later Put to the place it
 * reads); implicit handles completed by Fence and by the next call to the same rank. Meant to
 * run under every ACTIVERMA_TRANSFER (tests/armci/run.sh), where buffered and pipelined
 * transfers really stay in flight. */
#include "check.h"

#define GETS 64
#define PIECE 4096

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, GETS * PIECE + 4096);
    unsigned char *mine = base[me];
    for (int i = 0; i < GETS * PIECE; i++)
        mine[i] = (unsigned char)(i * 7 + me);
    ARMCI_Barrier();

    /* Many gets in flight, one handle each; Test until done, then Wait in reverse. */
    unsigned char *dst = malloc(GETS * PIECE);
    memset(dst, 0, GETS * PIECE);
    armci_hdl_t h[GETS];
    for (int k = 0; k < GETS; k++) {
        ARMCI_INIT_HANDLE(&h[k]);
        ARMCI_NbGet((char *)base[next] + k * PIECE, dst + k * PIECE, PIECE, next, &h[k]);
    }
    for (int k = 0; k < GETS; k++)
        while (ARMCI_Test(&h[k]) != 0)
            ;
    for (int k = GETS - 1; k >= 0; k--)
        EXPECT(ARMCI_Wait(&h[k]) == 0, "wait %d", k);
    for (int i = 0; i < GETS * PIECE; i++)
        EXPECT(dst[i] == (unsigned char)(i * 7 + next), "byte %d of the gets", i);
    ARMCI_Barrier();

    /* Location consistency, no fence: NbPut, then a blocking Get of the same bytes. */
    char *spot = (char *)base[next] + GETS * PIECE + 64 * me;
    long v = 1000 + me, seen = 0;
    armci_hdl_t hp;
    ARMCI_INIT_HANDLE(&hp);
    ARMCI_NbPut(&v, spot, sizeof v, next, &hp);
    ARMCI_Get(spot, &seen, sizeof seen, next);
    EXPECT(seen == v, "a get after an NbPut saw %ld, not %ld", seen, v);
    ARMCI_Wait(&hp);
    /* An NbGet is not overtaken by a later Put to the place it reads. */
    long old = 0, newer = 2000 + me;
    armci_hdl_t hg;
    ARMCI_INIT_HANDLE(&hg);
    ARMCI_NbGet(spot, &old, sizeof old, next, &hg);
    ARMCI_Put(&newer, spot, sizeof newer, next);
    ARMCI_Wait(&hg);
    EXPECT(old == v, "an NbGet overtaken by a later put read %ld, not %ld", old, v);
    /* Implicit handles: completed by Fence(p), and by WaitAll. */
    long got = 0;
    ARMCI_NbGet(spot, &got, sizeof got, next, NULL);
    ARMCI_Fence(next);
    EXPECT(got == newer, "an implicit NbGet completed by Fence read %ld", got);
    got = 0;
    ARMCI_NbGet(spot, &got, sizeof got, next, NULL);
    ARMCI_WaitAll();
    EXPECT(got == newer, "an implicit NbGet completed by WaitAll read %ld", got);
    ARMCI_Barrier();
    free(dst);
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_in_flight: ok on %d ranks\n", n);
    return 0;
}
