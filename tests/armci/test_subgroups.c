/* Groups over part of the job: the even ranks (made collectively by every rank), and a child
 * group of their first half. Members allocate over the group, move data inside it, reduce,
 * broadcast and meet in barriers while the other ranks take no part; the group can be the
 * default group for ARMCI_Malloc; Rmw works on group memory. */
#include "check.h"

int main(int argc, char **argv) {
    ARMCI_Init_args(&argc, &argv);
    int me = armci_msg_me(), n = armci_msg_nproc();
    int evens = (n + 1) / 2;
    int *list = malloc(n * sizeof *list);
    for (int i = 0; i < evens; i++) list[i] = 2 * i;
    ARMCI_Group even;
    ARMCI_Group_create(evens, list, &even);
    int grank, gsize;
    ARMCI_Group_rank(&even, &grank);
    ARMCI_Group_size(&even, &gsize);
    EXPECT(gsize == evens, "group size %d", gsize);
    EXPECT(grank == (me % 2 == 0 ? me / 2 : -1), "group rank %d", grank);

    if (grank >= 0) {
        EXPECT(ARMCI_Absolute_id(&even, grank) == me, "absolute id");
        void **b = malloc(gsize * sizeof *b);
        ARMCI_Malloc_group(b, 16 * sizeof(long), &even);
        long v[16];
        for (int i = 0; i < 16; i++) v[i] = 100 * me + i;
        int right = (grank + 1) % gsize;
        ARMCI_Put(v, b[right], sizeof v, ARMCI_Absolute_id(&even, right));
        armci_msg_group_barrier(&even);
        int left_job = ARMCI_Absolute_id(&even, (grank + gsize - 1) % gsize);
        for (int i = 0; i < 16; i++)
            EXPECT(((long *)b[grank])[i] == 100 * left_job + i, "element %d: %ld", i, ((long *)b[grank])[i]);

        /* Group blocks are segment memory (the group pool, unless ACTIVERMA_ARMCI_GROUP_POOL=0):
         * a rank of the owner's node loads and stores through the owner's address, as Global
         * Arrays does with any array whose owner is ARMCI_Same_node. */
        const char *pool = getenv("ACTIVERMA_ARMCI_GROUP_POOL");
        if (!pool || strcmp(pool, "0") != 0) {
            for (int g = 0; g < gsize; g++) {
                int r = ARMCI_Absolute_id(&even, g), w = ARMCI_Absolute_id(&even, (g + gsize - 1) % gsize);
                if (ARMCI_Same_node(r))
                    EXPECT(((volatile long *)b[g])[5] == 100 * w + 5, "direct load from rank %d's group block: %ld", r,
                           ((volatile long *)b[g])[5]);
            }
            armci_msg_group_barrier(&even);
            if (ARMCI_Same_node(ARMCI_Absolute_id(&even, right))) ((volatile long *)b[right])[15] = -me;
            armci_msg_group_barrier(&even);
            int from = ARMCI_Absolute_id(&even, (grank + gsize - 1) % gsize);
            if (ARMCI_Same_node(from))
                EXPECT(((volatile long *)b[grank])[15] == -from, "direct store from rank %d: %ld", from, ((long *)b[grank])[15]);
        }

        /* Reductions and a broadcast over the group only. */
        long sum = me;
        armci_msg_group_lgop(&sum, 1, "+", &even);
        long want = 0;
        for (int i = 0; i < evens; i++) want += 2 * i;
        EXPECT(sum == want, "group sum %ld, want %ld", sum, want);
        double d = me;
        armci_msg_group_gop_scope(SCOPE_ALL, &d, 1, "max", ARMCI_DOUBLE, &even);
        EXPECT(d == 2.0 * (evens - 1), "group max %g", d);
        int word = grank == gsize - 1 ? 4242 : 0;
        armci_msg_group_bcast_scope(SCOPE_ALL, &word, sizeof word, gsize - 1, &even);
        EXPECT(word == 4242, "broadcast from the group's last rank: %d", word);

        /* Rmw on group memory: every member adds its rank + 1 at group rank 0. */
        void **c = malloc(gsize * sizeof *c);
        ARMCI_Malloc_group(c, sizeof(long), &even);
        *(long *)c[grank] = 0;
        armci_msg_group_barrier(&even);
        long old;
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD_LONG, &old, c[0], me + 1, ARMCI_Absolute_id(&even, 0));
        armci_msg_group_barrier(&even);
        if (grank == 0) EXPECT(*(long *)c[0] == want + evens, "Rmw total %ld", *(long *)c[0]);

        /* A child group (the first half of the evens), and the group as the default. */
        int half = (gsize + 1) / 2;
        for (int i = 0; i < half; i++) list[i] = i;
        ARMCI_Group child;
        ARMCI_Group_create_child(half, list, &child, &even);
        int crank;
        ARMCI_Group_rank(&child, &crank);
        EXPECT(crank == (grank < half ? grank : -1), "child rank %d", crank);
        if (crank >= 0) {
            int one = 1;
            armci_msg_group_igop(&one, 1, "+", &child);
            EXPECT(one == half, "child group count %d", one);
        }
        ARMCI_Group_free(&child);

        ARMCI_Group_set_default(&even);
        void **dflt = malloc(gsize * sizeof *dflt);
        ARMCI_Malloc(dflt, 64); /* over the default group: the evens */
        EXPECT(dflt[grank] != NULL, "ARMCI_Malloc over the default group");
        ARMCI_Put(v, dflt[right], 64, ARMCI_Absolute_id(&even, right));
        armci_msg_group_barrier(&even);
        ARMCI_Free(dflt[grank]);
        ARMCI_Group world;
        ARMCI_Group_get_world(&world);
        ARMCI_Group_set_default(&world);
        ARMCI_Group_free(&world);

        ARMCI_Free_group(c[grank], &even);
        ARMCI_Free_group(b[grank], &even);
        free(dflt);
        free(c);
        free(b);
    }
    ARMCI_Group_free(&even);
    ARMCI_Barrier();
    free(list);
    if (me == 0) printf("test_subgroups: ok on %d ranks\n", n);
    ARMCI_Finalize();
    return 0;
}
