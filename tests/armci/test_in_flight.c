/* Non-blocking transfers in flight: many NbGets at once (each with its own handle), tested and
 * waited out of order; ARMCI's location consistency without fences (an NbPut then a blocking
 * Get of the same place sees the put; an NbGet is not overtaken by a later Put to the place it
 * reads); implicit handles completed by Fence and by the next call to the same rank; NbGetS of
 * 2-D and 3-D patches in flight beside each other, and not overtaken by a later Put; NbGetV and
 * NbPutV of 80 KB lists in flight (a data server moves them). Meant to
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
    /* Test's 0 means complete: the piece is there before any Wait (across hosts a get moves
     * on MPI meanwhile, and Test asks MPI without waiting). */
    for (int k = 0; k < GETS; k++) {
        while (ARMCI_Test(&h[k]) != 0)
            ;
        for (int i = k * PIECE; i < (k + 1) * PIECE; i++)
            EXPECT(dst[i] == (unsigned char)(i * 7 + next), "byte %d of get %d once its Test said complete", i, k);
    }
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

    /* Strided gets in flight: a 2-D patch (every other 1000-byte run of the rows) and a 3-D one,
     * each with its handle, into buffers with their own strides; tested, then waited out of order. */
    memset(dst, 0, GETS * PIECE);
    int ss2[1] = {2000}, ds2[1] = {1003}, c2[2] = {1000, 40};
    int ss3[2] = {300, 3000}, ds3[2] = {100, 500}, c3[3] = {100, 4, 5};
    unsigned char *d2 = dst, *d3 = dst + 64 * 1024;
    armci_hdl_t hs[2];
    ARMCI_INIT_HANDLE(&hs[0]);
    ARMCI_INIT_HANDLE(&hs[1]);
    ARMCI_NbGetS(base[next], ss2, d2, ds2, c2, 1, next, &hs[0]);
    ARMCI_NbGetS((char *)base[next] + 7, ss3, d3, ds3, c3, 2, next, &hs[1]);
    while (ARMCI_Test(&hs[1]) != 0)
        ;
    EXPECT(ARMCI_Wait(&hs[1]) == 0 && ARMCI_Wait(&hs[0]) == 0, "waits of the strided gets");
    for (int r = 0; r < 40; r++)
        for (int b = 0; b < 1003; b++) {
            unsigned char want = b < 1000 ? (unsigned char)((r * 2000 + b) * 7 + next) : 0;
            EXPECT(d2[r * 1003 + b] == want, "2-D NbGetS: row %d byte %d", r, b);
        }
    for (int k = 0; k < 5; k++)
        for (int j = 0; j < 4; j++)
            for (int b = 0; b < 100; b++) {
                int src = 7 + k * 3000 + j * 300 + b;
                EXPECT(d3[k * 500 + j * 100 + b] == (unsigned char)(src * 7 + next), "3-D NbGetS: %d %d %d", k, j, b);
            }
    ARMCI_Barrier();
    /* NbPutS in flight: a 2-D patch into every other 1000-byte run of the next rank's rows
     * 40..79, from a buffer with its own stride, left in flight while a blocking GetS of the
     * same patch follows (location consistency: it sees the puts), then waited. */
    unsigned char *src2 = malloc(40 * 1003);
    for (int i = 0; i < 40 * 1003; i++)
        src2[i] = (unsigned char)(i * 13 + me);
    char *patch = (char *)base[next] + 40 * 2000;
    armci_hdl_t hp2;
    ARMCI_INIT_HANDLE(&hp2);
    ARMCI_NbPutS(src2, ds2, patch, ss2, c2, 1, next, &hp2);
    unsigned char *back = malloc(40 * 1003);
    memset(back, 0, 40 * 1003);
    ARMCI_GetS(patch, ss2, back, ds2, c2, 1, next);
    for (int r = 0; r < 40; r++)
        for (int b = 0; b < 1000; b++)
            EXPECT(back[r * 1003 + b] == src2[r * 1003 + b], "GetS after NbPutS: row %d byte %d", r, b);
    EXPECT(ARMCI_Wait(&hp2) == 0, "wait of the strided put");
    free(back);
    free(src2);
    ARMCI_Barrier();
    /* The rows between the put's runs are untouched (still the original pattern of `next`). */
    unsigned char *row = malloc(2000);
    ARMCI_Get(patch, row, 2000, next);
    for (int b = 1000; b < 2000; b++)
        EXPECT(row[b] == (unsigned char)((40 * 2000 + b) * 7 + next), "gap byte %d after NbPutS", b);
    free(row);
    ARMCI_Barrier();
    /* An NbGetS is not overtaken by a later Put to the patch it reads. */
    long before = 0, after = 3000 + me;
    int one[1] = {0}, cnt[1] = {sizeof before};
    ARMCI_Put(&v, spot, sizeof v, next);
    armci_hdl_t hsg;
    ARMCI_INIT_HANDLE(&hsg);
    ARMCI_NbGetS(spot, one, &before, one, cnt, 0, next, &hsg);
    ARMCI_Put(&after, spot, sizeof after, next);
    ARMCI_Wait(&hsg);
    EXPECT(before == v, "an NbGetS overtaken by a later put read %ld, not %ld", before, v);
    ARMCI_Barrier();
    /* Vectors in flight, large enough (80 x 1000 B) that a target with a data server moves
     * them itself: an NbGetV of every other 1000-byte run of rows 0..39 and 80..119 of the
     * next rank (rows 40..79 hold the NbPutS's data) into slots in reverse order, tested, then
     * waited; an NbPutV into the other runs of rows 0..79, a blocking GetV of those while it
     * is in flight (location consistency), then waited. */
    enum { VN = 80, VB = 1000 };
#define VROW(k) ((k) < 40 ? (k) : (k) + 40)
    void *vsrc[VN], *vdst[VN];
    memset(dst, 0, GETS * PIECE);
    for (int k = 0; k < VN; k++) {
        vsrc[k] = (char *)base[next] + VROW(k) * 2000;
        vdst[k] = dst + (VN - 1 - k) * VB;
    }
    armci_giov_t gv = {vsrc, vdst, VB, VN};
    armci_hdl_t hv;
    ARMCI_INIT_HANDLE(&hv);
    ARMCI_NbGetV(&gv, 1, next, &hv);
    while (ARMCI_Test(&hv) != 0)
        ;
    EXPECT(ARMCI_Wait(&hv) == 0, "wait of the vector get");
    for (int k = 0; k < VN; k++)
        for (int b = 0; b < VB; b++)
            EXPECT(dst[(VN - 1 - k) * VB + b] == (unsigned char)((VROW(k) * 2000 + b) * 7 + next), "NbGetV: piece %d byte %d", k, b);
    ARMCI_Barrier();
    unsigned char *vput = malloc(VN * VB), *vback = malloc(VN * VB);
    void *pv_src[VN], *pv_dst[VN], *gb_src[VN], *gb_dst[VN];
    for (int i = 0; i < VN * VB; i++)
        vput[i] = (unsigned char)(i * 11 + me);
    memset(vback, 0, VN * VB);
    for (int k = 0; k < VN; k++) {
        pv_src[k] = vput + k * VB;
        pv_dst[k] = (char *)base[next] + k * 2000 + VB;
        gb_src[k] = pv_dst[k];
        gb_dst[k] = vback + k * VB;
    }
    armci_giov_t pv = {pv_src, pv_dst, VB, VN}, gb = {gb_src, gb_dst, VB, VN};
    ARMCI_INIT_HANDLE(&hv);
    ARMCI_NbPutV(&pv, 1, next, &hv);
    ARMCI_GetV(&gb, 1, next);
    EXPECT(memcmp(vback, vput, VN * VB) == 0, "GetV after NbPutV sees the put");
    EXPECT(ARMCI_Wait(&hv) == 0, "wait of the vector put");
    free(vput);
    free(vback);
    ARMCI_Barrier();
    free(dst);
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_in_flight: ok on %d ranks\n", n);
    return 0;
}
