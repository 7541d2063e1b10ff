/* Single values of every type, blocking and non-blocking, and ARMCI_Put_flag. */
#include "check.h"

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 256);
    memset(base[me], 0, 256);
    ARMCI_Barrier();
    char *b = base[next];
    ARMCI_PutValueInt(-7 - me, b, next);
    ARMCI_PutValueLong(1L << 40 | me, b + 8, next);
    ARMCI_PutValueFloat(1.5f + me, b + 16, next);
    ARMCI_PutValueDouble(-2.25 - me, b + 24, next);
    armci_hdl_t h;
    ARMCI_INIT_HANDLE(&h);
    ARMCI_NbPutValueInt(100 + me, b + 32, next, &h);
    ARMCI_NbPutValueLong(200L + me, b + 40, next, &h);
    ARMCI_NbPutValueFloat(300.5f + me, b + 48, next, &h);
    ARMCI_NbPutValueDouble(400.25 + me, b + 56, next, &h);
    ARMCI_Wait(&h);
    EXPECT(ARMCI_GetValueInt(b, next) == -7 - me, "int");
    EXPECT(ARMCI_GetValueLong(b + 8, next) == (1L << 40 | me), "long");
    EXPECT(ARMCI_GetValueFloat(b + 16, next) == 1.5f + me, "float");
    EXPECT(ARMCI_GetValueDouble(b + 24, next) == -2.25 - me, "double");
    EXPECT(ARMCI_GetValueInt(b + 32, next) == 100 + me, "nb int");
    EXPECT(ARMCI_GetValueLong(b + 40, next) == 200L + me, "nb long");
    EXPECT(ARMCI_GetValueFloat(b + 48, next) == 300.5f + me, "nb float");
    EXPECT(ARMCI_GetValueDouble(b + 56, next) == 400.25 + me, "nb double");
    ARMCI_Barrier();
    /* Put_flag: 64 bytes then the flag; the target waits for the flag, then reads the data. */
    char data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (char)(i ^ me);
    ARMCI_Put_flag(data, b + 128, 64, (int *)(b + 200), 1, next);
    volatile int *flag = (volatile int *)((char *)base[me] + 200);
    while (*flag != 1)
        ;
    for (int i = 0; i < 64; i++)
        EXPECT(((char *)base[me])[128 + i] == (char)(i ^ prev), "flagged data byte %d", i);
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_values: ok on %d ranks\n", n);
    return 0;
}
