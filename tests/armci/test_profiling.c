/* The profiling interface: a wrapper layer defines ARMCI_Put, ARMCI_Get, ARMCI_Acc,
 * ARMCI_PutValueInt and ARMCI_Barrier itself, counts each call and passes it on to PARMCI_*.
 * The program's calls reach the wrappers (their definitions win at link time), the data
 * arrives, and every PARMCI_* call runs the library's own function exactly once (never
 * the wrapper again: that would recurse until the stack overflows). */
#include "check.h"

static int n_put, n_get, n_acc, n_value, n_barrier;

int ARMCI_Put(void *src, void *dst, int bytes, int proc) {
    n_put++;
    return PARMCI_Put(src, dst, bytes, proc);
}
int ARMCI_Get(void *src, void *dst, int bytes, int proc) {
    n_get++;
    return PARMCI_Get(src, dst, bytes, proc);
}
int ARMCI_Acc(int type, void *scale, void *src, void *dst, int bytes, int proc) {
    n_acc++;
    return PARMCI_Acc(type, scale, src, dst, bytes, proc);
}
int ARMCI_PutValueInt(int src, void *dst, int proc) {
    n_value++;
    return PARMCI_PutValueInt(src, dst, proc);
}
void ARMCI_Barrier(void) {
    n_barrier++;
    PARMCI_Barrier();
}

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 64);
    memset(base[me], 0, 64);
    ARMCI_Barrier();
    long word = 1000 + me, back = 0;
    ARMCI_Put(&word, base[next], sizeof word, next);
    ARMCI_PutValueInt(7 + me, (char *)base[next] + 8, next);
    int one = 1, two = 2;
    ARMCI_Acc(ARMCI_ACC_INT, &one, &two, (char *)base[0] + 16, sizeof(int), 0);
    ARMCI_Barrier();
    ARMCI_Get(base[next], &back, sizeof back, next);
    EXPECT(back == 1000 + me, "the word I put at rank %d reads %ld", next, back);
    EXPECT(*(long *)base[me] == 1000 + prev, "my word %ld", *(long *)base[me]);
    EXPECT(*(int *)((char *)base[me] + 8) == 7 + prev, "my int %d", *(int *)((char *)base[me] + 8));
    if (me == 0)
        EXPECT(*(int *)((char *)base[0] + 16) == 2 * n, "accumulated %d", *(int *)((char *)base[0] + 16));
    parmci_msg_barrier();
    EXPECT(n_put == 1 && n_get == 1 && n_acc == 1 && n_value == 1 && n_barrier == 2,
           "wrapper counts put %d get %d acc %d value %d barrier %d", n_put, n_get, n_acc, n_value, n_barrier);
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_profiling: ok on %d ranks\n", n);
    return 0;
}
