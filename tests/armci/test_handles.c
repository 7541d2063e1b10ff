/* Non-blocking calls with handles: Wait, Test, WaitProc, WaitAll, aggregate and NULL handles. */
#include "check.h"

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 4096);
    memset(base[me], 0, 4096);
    ARMCI_Barrier();
    char src[1024], dst[1024];
    for (int i = 0; i < 1024; i++)
        src[i] = (char)(i * 3 + me);
    armci_hdl_t h[4];
    for (int i = 0; i < 4; i++)
        ARMCI_INIT_HANDLE(&h[i]);
    ARMCI_NbPut(src, base[next], 1024, next, &h[0]);
    EXPECT(ARMCI_Wait(&h[0]) == 0, "wait");
    ARMCI_NbGet(base[next], dst, 1024, next, &h[1]);
    while (ARMCI_Test(&h[1]) != 0)
        ;
    EXPECT(memcmp(src, dst, 1024) == 0, "NbPut then NbGet");
    /* Strided with a handle: 4 rows of 16 bytes into a 64-byte pitch. */
    int count[2] = {16, 4}, ls[1] = {16}, rs[1] = {64};
    ARMCI_NbPutS(src, ls, (char *)base[next] + 1024, rs, count, 1, next, &h[2]);
    ARMCI_Wait(&h[2]);
    memset(dst, 0, 64);
    ARMCI_NbGetS((char *)base[next] + 1024, rs, dst, ls, count, 1, next, &h[2]);
    ARMCI_Wait(&h[2]);
    EXPECT(memcmp(src, dst, 64) == 0, "NbPutS then NbGetS");
    /* Vector with an aggregate handle, and a NULL (implicit) handle completed by WaitProc. */
    ARMCI_SET_AGGREGATE_HANDLE(&h[3]);
    void *s[2] = {src, src + 8}, *d[2] = {(char *)base[next] + 2048, (char *)base[next] + 2064};
    armci_giov_t iov = {s, d, 8, 2};
    ARMCI_NbPutV(&iov, 1, next, &h[3]);
    ARMCI_NbPut(src, (char *)base[next] + 3000, 10, next, NULL);
    ARMCI_UNSET_AGGREGATE_HANDLE(&h[3]);
    ARMCI_Wait(&h[3]);
    ARMCI_WaitProc(next);
    void *gs[2] = {d[0], d[1]}, *gd[2] = {dst, dst + 8};
    armci_giov_t giov = {gs, gd, 8, 2};
    memset(dst, 0, 16);
    ARMCI_NbGetV(&giov, 1, next, &h[3]);
    ARMCI_WaitAll();
    EXPECT(memcmp(src, dst, 16) == 0, "NbPutV then NbGetV");
    ARMCI_Get((char *)base[next] + 3000, dst, 10, next);
    EXPECT(memcmp(src, dst, 10) == 0, "NbPut with a NULL handle");
    /* Waiting on a handle never used is fine. */
    armci_hdl_t fresh;
    ARMCI_INIT_HANDLE(&fresh);
    EXPECT(ARMCI_Wait(&fresh) == 0 && ARMCI_Test(&fresh) == 0, "idle handle");
    ARMCI_Fence(next);
    ARMCI_AllFence();
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_handles: ok on %d ranks\n", n);
    return 0;
}
