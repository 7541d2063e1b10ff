/* Strided put and get with 1 to 7 stride levels: a packed local array to a gapped remote
 * pattern and back; the gaps must stay untouched. */
#include "check.h"

#define REGION 40000

/* The byte offsets of every piece, first dimension fastest (a reference independent of the
 * library's own iteration). */
static int offsets(int levels, const int *count, const int *stride, long *out) {
    int idx[8] = {0}, k = 0;
    for (;;) {
        long off = 0;
        for (int l = 0; l < levels; l++)
            off += (long)idx[l] * stride[l];
        out[k++] = off;
        int l = 0;
        while (l < levels && ++idx[l] == count[l + 1])
            idx[l++] = 0;
        if (l == levels)
            return k;
    }
}

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, REGION);
    char *src = malloc(REGION), *image = malloc(REGION), *back = malloc(REGION), *expect = malloc(REGION);
    long *soff = malloc(sizeof(long) * 4096), *doff = malloc(sizeof(long) * 4096);
    for (int levels = 1; levels <= 7; levels++) {
        int count[8], sstride[7], dstride[7];
        count[0] = 3; /* bytes of a contiguous piece (odd on purpose) */
        for (int l = 1; l <= levels; l++)
            count[l] = l <= 2 ? 3 : 2;
        sstride[0] = count[0];
        dstride[0] = count[0] + 5;
        for (int l = 1; l < levels; l++) {
            sstride[l] = sstride[l - 1] * count[l];
            dstride[l] = dstride[l - 1] * count[l] + 7;
        }
        /* The target's memory starts as 0xEE everywhere. */
        memset((char *)base[me], 0xEE, REGION);
        ARMCI_Barrier();
        for (int i = 0; i < REGION; i++)
            src[i] = (char)(i * 13 + me + levels);
        ARMCI_PutS(src, sstride, base[next], dstride, count, levels, next);
        ARMCI_Barrier();
        /* What rank prev must have written into my memory. */
        int pieces = offsets(levels, count, sstride, soff);
        offsets(levels, count, dstride, doff);
        memset(expect, 0xEE, REGION);
        for (int p = 0; p < pieces; p++)
            for (int b = 0; b < count[0]; b++)
                expect[doff[p] + b] = (char)((soff[p] + b) * 13 + prev + levels);
        memcpy(image, base[me], REGION);
        for (int i = 0; i < REGION; i++)
            EXPECT(image[i] == expect[i], "levels %d: byte %d is %d, want %d", levels, i, image[i], expect[i]);
        /* Back again with GetS, the strides swapped. */
        memset(back, 0, REGION);
        ARMCI_GetS(base[next], dstride, back, sstride, count, levels, next);
        for (int p = 0; p < pieces; p++)
            for (int b = 0; b < count[0]; b++)
                EXPECT(back[soff[p] + b] == src[soff[p] + b], "levels %d: got back piece %d byte %d", levels, p, b);
        ARMCI_Barrier();
    }
    /* stride_levels 0 is a contiguous transfer. */
    int c0 = 16;
    ARMCI_PutS(src, NULL, base[next], NULL, &c0, 0, next);
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_strided: ok on %d ranks (1 to 7 levels)\n", n);
    return 0;
}
