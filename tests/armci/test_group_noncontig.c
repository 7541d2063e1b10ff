/* Strided and vector transfers into group memory (ARMCI_Malloc_group over part of the job: the
 * group pool's segment memory, or with ACTIVERMA_ARMCI_GROUP_POOL=0 private memory of each
 * member, reached by scatter/gather lists on one host): every member
 * writes a strided patch and a vector of scattered pieces into its right neighbour's block,
 * reads them back, and the owner checks that the pieces hold the writer's bytes and the gaps
 * between them were never written. */
#include "check.h"

enum { BLOCK = 1 << 16, ROWS = 100, ROW = 24, STRIDE = 256, PIECES = 200, PIECE = 12, GAP = 40, VEC_AT = 32768 };

static char byte_of(int writer, int i) { return (char)(writer * 37 + i * 7 + (i >> 8)); }

int main(int argc, char **argv) {
    ARMCI_Init_args(&argc, &argv);
    int me = armci_msg_me(), n = armci_msg_nproc();
    int evens = (n + 1) / 2;
    int list[64];
    for (int i = 0; i < evens; i++) list[i] = 2 * i;
    ARMCI_Group even;
    ARMCI_Group_create(evens, list, &even);
    int grank, gsize;
    ARMCI_Group_rank(&even, &grank);
    ARMCI_Group_size(&even, &gsize);
    if (grank >= 0) {
        void *b[64];
        ARMCI_Malloc_group(b, BLOCK, &even);
        memset(b[grank], 0, BLOCK);
        armci_msg_group_barrier(&even);
        int right = (grank + 1) % gsize, right_job = ARMCI_Absolute_id(&even, right);
        char *dst = b[right];

        /* A patch of ROWS rows of ROW bytes, STRIDE apart at the target, packed here. */
        char patch[ROWS * ROW], back[ROWS * ROW];
        for (int i = 0; i < ROWS * ROW; i++) patch[i] = byte_of(me, i);
        int src_stride[1] = {ROW}, dst_stride[1] = {STRIDE}, count[2] = {ROW, ROWS};
        ARMCI_PutS(patch, src_stride, dst, dst_stride, count, 1, right_job);
        memset(back, 0, sizeof back);
        ARMCI_GetS(dst, dst_stride, back, src_stride, count, 1, right_job);
        EXPECT(memcmp(back, patch, sizeof back) == 0, "strided round trip with rank %d", right_job);

        /* PIECES pieces of PIECE bytes, GAP apart from VEC_AT, listed in reverse order. */
        char vec[PIECES][PIECE], vback[PIECES][PIECE];
        void *src_ptrs[PIECES], *dst_ptrs[PIECES], *back_ptrs[PIECES];
        for (int p = 0; p < PIECES; p++) {
            int q = PIECES - 1 - p;
            for (int j = 0; j < PIECE; j++) vec[p][j] = byte_of(me, 100000 + q * PIECE + j);
            src_ptrs[p] = vec[p];
            dst_ptrs[p] = dst + VEC_AT + q * GAP;
            back_ptrs[p] = vback[p];
        }
        armci_giov_t put = {src_ptrs, dst_ptrs, PIECE, PIECES}, get = {dst_ptrs, back_ptrs, PIECE, PIECES};
        ARMCI_PutV(&put, 1, right_job);
        memset(vback, 0, sizeof vback);
        ARMCI_GetV(&get, 1, right_job);
        EXPECT(memcmp(vback, vec, sizeof vec) == 0, "vector round trip with rank %d", right_job);
        armci_msg_group_barrier(&even);

        /* The owner's view: the left neighbour's bytes where the pattern says, zero elsewhere. */
        int left_job = ARMCI_Absolute_id(&even, (grank + gsize - 1) % gsize);
        const char *mine = b[grank];
        for (int at = 0; at < BLOCK; at++) {
            char want = 0;
            if (at < ROWS * STRIDE && at % STRIDE < ROW)
                want = byte_of(left_job, at / STRIDE * ROW + at % STRIDE);
            if (at >= VEC_AT && at < VEC_AT + PIECES * GAP && (at - VEC_AT) % GAP < PIECE)
                want = byte_of(left_job, 100000 + (at - VEC_AT) / GAP * PIECE + (at - VEC_AT) % GAP);
            EXPECT(mine[at] == want, "byte %d of the block is %d, want %d (from rank %d)", at, mine[at], want, left_job);
        }
        armci_msg_group_barrier(&even);
        ARMCI_Free_group(b[grank], &even);
    }
    ARMCI_Group_free(&even);
    ARMCI_Finalize();
    return 0;
}
