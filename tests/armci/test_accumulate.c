/* Accumulate of all six types with a scale, from every rank at once into the same elements of
 * every rank; the sums are exact (small integers, exact in float too). Then AccS (2 levels),
 * AccV and NbAcc; a 256 KiB accumulate of doubles from every rank into rank 0; and an
 * accumulate from a rank's own allocation into an overlapping part of it, which reads the
 * source as it was before the call. */
#include "check.h"

#define N 64
#define ITERS 20

/* 1 + 2 + ... + n */
static int tri_of(int n) { return n * (n + 1) / 2; }

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, N * 16);
    /* The expected sum over ranks r of ITERS*(r+1). */
    long sr = 0;
    for (int r = 0; r < n; r++)
        sr += (long)ITERS * (r + 1);
    for (int type = ARMCI_ACC_INT; type <= ARMCI_ACC_DCP; type++) {
        memset(base[me], 0, N * 16);
        ARMCI_Barrier();
        char src[N * 16];
        char scale[16];
        for (int i = 0; i < N; i++) {
            switch (type) {
            case ARMCI_ACC_INT: ((int *)src)[i] = i + 1; break;
            case ARMCI_ACC_LNG: ((long *)src)[i] = i + 1; break;
            case ARMCI_ACC_FLT: ((float *)src)[i] = (float)(i + 1); break;
            case ARMCI_ACC_DBL: ((double *)src)[i] = i + 1; break;
            case ARMCI_ACC_CPL: ((float *)src)[2 * i] = (float)(i + 1); ((float *)src)[2 * i + 1] = 2; break;
            case ARMCI_ACC_DCP: ((double *)src)[2 * i] = i + 1; ((double *)src)[2 * i + 1] = 2; break;
            }
        }
        switch (type) {
        case ARMCI_ACC_INT: *(int *)scale = me + 1; break;
        case ARMCI_ACC_LNG: *(long *)scale = me + 1; break;
        case ARMCI_ACC_FLT: *(float *)scale = (float)(me + 1); break;
        case ARMCI_ACC_DBL: *(double *)scale = me + 1; break;
        case ARMCI_ACC_CPL: ((float *)scale)[0] = (float)(me + 1); ((float *)scale)[1] = 1; break;
        case ARMCI_ACC_DCP: ((double *)scale)[0] = me + 1; ((double *)scale)[1] = 1; break;
        }
        int size = type == ARMCI_ACC_INT || type == ARMCI_ACC_FLT ? 4 : type == ARMCI_ACC_DCP ? 16 : 8;
        for (int it = 0; it < ITERS; it++)
            for (int k = 0; k < n; k++) {
                int t = k; /* every rank hits the same target at once: contention */
                ARMCI_Acc(type, scale, src, base[t], N * size, t);
            }
        ARMCI_Barrier();
        char *mem = base[me];
        for (int i = 0; i < N; i++) {
            /* Real types: sum_r ITERS*(r+1)*(i+1). Complex (r+1 + 1i)*(i+1 + 2i) summed:
             * real ITERS*sum((r+1)(i+1) - 2), imaginary ITERS*sum(2(r+1) + (i+1)). */
            long want = sr * (i + 1);
            long wre = sr * (i + 1) - 2L * ITERS * n, wim = 2 * sr + (long)ITERS * n * (i + 1);
            switch (type) {
            case ARMCI_ACC_INT: EXPECT(((int *)mem)[i] == want, "int %d: %d", i, ((int *)mem)[i]); break;
            case ARMCI_ACC_LNG: EXPECT(((long *)mem)[i] == want, "long %d: %ld", i, ((long *)mem)[i]); break;
            case ARMCI_ACC_FLT: EXPECT(((float *)mem)[i] == (float)want, "float %d: %f", i, ((float *)mem)[i]); break;
            case ARMCI_ACC_DBL: EXPECT(((double *)mem)[i] == (double)want, "double %d: %f", i, ((double *)mem)[i]); break;
            case ARMCI_ACC_CPL:
                EXPECT(((float *)mem)[2 * i] == (float)wre && ((float *)mem)[2 * i + 1] == (float)wim, "complex %d: %f %f",
                       i, ((float *)mem)[2 * i], ((float *)mem)[2 * i + 1]);
                break;
            case ARMCI_ACC_DCP:
                EXPECT(((double *)mem)[2 * i] == (double)wre && ((double *)mem)[2 * i + 1] == (double)wim,
                       "double complex %d: %f %f", i, ((double *)mem)[2 * i], ((double *)mem)[2 * i + 1]);
                break;
            }
        }
        ARMCI_Barrier();
    }
    /* AccS: an 8x8 int matrix on rank 0, every rank adds its id+1 times a 4x4 block of ones at
     * (2,2) (the remote row stride 32 bytes, the local 16). */
    memset(base[me], 0, N * 16);
    ARMCI_Barrier();
    int ones[16], one = 1;
    for (int i = 0; i < 16; i++)
        ones[i] = me + 1;
    int count[2] = {16, 4}, ls[1] = {16}, rs[1] = {32};
    ARMCI_AccS(ARMCI_ACC_INT, &one, ones, ls, (char *)base[0] + 2 * 32 + 8, rs, count, 1, 0);
    /* AccV: doubles at every 4th slot of rank n-1's block (after the matrix). */
    double dv[8], dscale = 0.5;
    void *s[8], *d[8];
    for (int i = 0; i < 8; i++) {
        dv[i] = 2 * (i + 1);
        s[i] = &dv[i];
        d[i] = (char *)base[n - 1] + 512 + 32 * i;
    }
    armci_giov_t iov = {s, d, 8, 8};
    ARMCI_AccV(ARMCI_ACC_DBL, &dscale, &iov, 1, n - 1);
    /* NbAcc with a handle. */
    armci_hdl_t h;
    ARMCI_INIT_HANDLE(&h);
    long lone = 1, lval = 5;
    ARMCI_NbAcc(ARMCI_ACC_LNG, &lone, &lval, (char *)base[0] + 900, 8, 0, &h);
    ARMCI_Wait(&h);
    ARMCI_Barrier();
    if (me == 0) {
        int tri = n * (n + 1) / 2;
        int *m = base[0];
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                int inside = r >= 2 && r < 6 && c >= 2 && c < 6;
                EXPECT(m[r * 8 + c] == (inside ? tri : 0), "AccS element (%d,%d) = %d", r, c, m[r * 8 + c]);
            }
        EXPECT(*(long *)((char *)base[0] + 900) == 5L * n, "NbAcc sum %ld", *(long *)((char *)base[0] + 900));
    }
    if (me == n - 1)
        for (int i = 0; i < 8; i++) {
            double got = *(double *)((char *)base[me] + 512 + 32 * i);
            EXPECT(got == (double)n * (i + 1), "AccV slot %d = %f", i, got);
        }
    ARMCI_Barrier();
    ARMCI_Free(base[me]);

    /* Large: BIG doubles from every rank at once into rank 0 (scale me+1, source i % 1000). */
    enum { BIG = 32768 };
    void **big = malloc(sizeof(void *) * n);
    ARMCI_Malloc(big, BIG * sizeof(double));
    memset(big[me], 0, BIG * sizeof(double));
    double *bsrc = malloc(BIG * sizeof(double)), bscale = me + 1;
    for (int i = 0; i < BIG; i++)
        bsrc[i] = i % 1000;
    ARMCI_Barrier();
    ARMCI_Acc(ARMCI_ACC_DBL, &bscale, bsrc, big[0], BIG * sizeof(double), 0);
    ARMCI_Barrier();
    if (me == 0)
        for (int i = 0; i < BIG; i++) {
            double got = ((double *)big[0])[i], want = (double)tri_of(n) * (i % 1000);
            EXPECT(got == want, "large accumulate element %d = %f, want %f", i, got, want);
        }
    /* Overlapping: dst = src + 1 element, in this rank's own allocation; dst[i] += 2 * old
     * src[i], i.e. old x[i] + 2 * old x[i-1] for i >= 1 (a forward pass over the live source
     * would add the new x[i-1]). */
    long *x = big[me];
    for (int i = 0; i < 64; i++)
        x[i] = i + 1;
    long two = 2;
    ARMCI_Acc(ARMCI_ACC_LNG, &two, x, x + 1, 63 * sizeof(long), me);
    ARMCI_Fence(me); /* complete at the target (ACTIVERMA_ARMCI_ACC=active applies it later) */
    EXPECT(x[0] == 1, "overlapping accumulate changed its first source element: %ld", x[0]);
    for (int i = 1; i < 64; i++)
        EXPECT(x[i] == (i + 1) + 2L * i, "overlapping accumulate element %d = %ld, want %ld", i, x[i], (i + 1) + 2L * i);
    ARMCI_Barrier();
    ARMCI_Free(big[me]);
    free(bsrc);
    free(big);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_accumulate: ok on %d ranks (6 types, AccS, AccV, NbAcc, 256 KiB, overlapping)\n", n);
    return 0;
}
