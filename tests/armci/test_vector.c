/* I/O-vector put and get: 1 to 1024 pieces per descriptor, one and two descriptors. */
#include "check.h"

#define PIECE 8
#define MAXSEG 1024

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 2 * MAXSEG * 2 * PIECE);
    char *local = malloc(MAXSEG * PIECE * 2), *back = malloc(MAXSEG * PIECE * 2);
    void **s = malloc(sizeof(void *) * MAXSEG * 2), **d = malloc(sizeof(void *) * MAXSEG * 2);
    int sizes[] = {1, 2, 7, 64, 1023, 1024};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int segs = sizes[k];
        memset(base[me], 0, 2 * MAXSEG * 2 * PIECE);
        ARMCI_Barrier();
        for (int i = 0; i < segs * PIECE * 2; i++)
            local[i] = (char)(i + segs + me);
        /* Two descriptors: pieces i go to remote slot 2*i (a gap after each), descriptor 2
         * fills the second half of the remote block. */
        armci_giov_t iov[2];
        for (int i = 0; i < 2 * segs; i++) {
            s[i] = local + i * PIECE;
            d[i] = (char *)base[next] + (i < segs ? 2 * i * PIECE : MAXSEG * 2 * PIECE + 2 * (i - segs) * PIECE);
        }
        iov[0] = (armci_giov_t){.src_ptr_array = s, .dst_ptr_array = d, .bytes = PIECE, .ptr_array_len = segs};
        iov[1] = (armci_giov_t){.src_ptr_array = s + segs, .dst_ptr_array = d + segs, .bytes = PIECE, .ptr_array_len = segs};
        ARMCI_PutV(iov, 2, next);
        ARMCI_Barrier();
        /* Check my own memory: what rank prev put. */
        int prev = (me + n - 1) % n;
        char *mem = base[me];
        for (int i = 0; i < 2 * segs; i++) {
            char *at = mem + (i < segs ? 2 * i * PIECE : MAXSEG * 2 * PIECE + 2 * (i - segs) * PIECE);
            for (int b = 0; b < PIECE; b++) {
                EXPECT(at[b] == (char)(i * PIECE + b + segs + prev), "%d pieces: piece %d byte %d", segs, i, b);
                EXPECT(at[PIECE + b] == 0, "%d pieces: gap after piece %d written", segs, i);
            }
        }
        /* GetV back: remote pieces to a packed local buffer (src and dst arrays swapped). */
        memset(back, 0, segs * PIECE * 2);
        for (int i = 0; i < 2 * segs; i++) {
            void *t = d[i];
            d[i] = back + i * PIECE;
            s[i] = t;
        }
        iov[0] = (armci_giov_t){.src_ptr_array = s, .dst_ptr_array = d, .bytes = PIECE, .ptr_array_len = 2 * segs};
        ARMCI_GetV(iov, 1, next);
        EXPECT(memcmp(back, local, segs * PIECE * 2) == 0, "%d pieces: GetV returned other bytes", segs);
        ARMCI_Barrier();
    }
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_vector: ok on %d ranks (1 to 1024 pieces)\n", n);
    return 0;
}
