/* message.h collectives, groups of the whole job and the topology calls. */
#include "check.h"
#include <math.h>

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    armci_msg_barrier();
    /* Broadcast from every root. */
    for (int root = 0; root < n; root++) {
        char buf[32];
        memset(buf, me == root ? 'a' + root : 0, sizeof buf);
        if (root % 2)
            armci_msg_brdcst(buf, sizeof buf, root);
        else
            armci_msg_bcast(buf, sizeof buf, root);
        for (int i = 0; i < 32; i++)
            EXPECT(buf[i] == 'a' + root, "broadcast from %d", root);
    }
    /* Reductions: x = me - 1 (so one value is negative), each op, each type. */
    int x[2];
    long lx[2];
    long long llx[2];
    float fx[2];
    double dx[2];
    const char *ops[] = {"+", "*", "max", "min", "absmax", "absmin"};
    for (int o = 0; o < 6; o++) {
        double want = o == 1 ? 1 : 0;
        if (o >= 2)
            want = o == 2 ? -1e9 : o == 3 ? 1e9 : o == 4 ? 0 : 1e9;
        for (int r = 0; r < n; r++) {
            double v = r - 1;
            switch (o) {
            case 0: want += v; break;
            case 1: want *= v; break;
            case 2: want = v > want ? v : want; break;
            case 3: want = v < want ? v : want; break;
            case 4: want = fabs(v) > want ? fabs(v) : want; break;
            case 5: want = fabs(v) < want ? fabs(v) : want; break;
            }
        }
        for (int i = 0; i < 2; i++) {
            x[i] = me - 1 + i;
            lx[i] = me - 1 + i;
            llx[i] = me - 1 + i;
            fx[i] = (float)(me - 1 + i);
            dx[i] = me - 1 + i;
        }
        armci_msg_igop(x, 2, (char *)ops[o]);
        armci_msg_lgop(lx, 2, (char *)ops[o]);
        armci_msg_llgop(llx, 2, (char *)ops[o]);
        armci_msg_fgop(fx, 2, (char *)ops[o]);
        armci_msg_dgop(dx, 2, (char *)ops[o]);
        EXPECT(x[0] == (int)want && lx[0] == (long)want && llx[0] == (long long)want && fx[0] == (float)want && dx[0] == want,
               "op %s: %d %ld %lld %f %f, want %f", ops[o], x[0], lx[0], llx[0], fx[0], dx[0], want);
    }
    double g = me;
    armci_msg_gop_scope(SCOPE_ALL, &g, 1, "+", ARMCI_DOUBLE);
    EXPECT(g == n * (n - 1) / 2.0, "gop_scope %f", g);
    /* Logical and bitwise reductions (Global Arrays uses "&&"): rank r contributes r != 0 and
     * the bit 1 << r. */
    long land = me != 0, lor = me != 0, bits = 1L << me;
    armci_msg_lgop(&land, 1, "&&");
    armci_msg_lgop(&lor, 1, "||");
    armci_msg_lgop(&bits, 1, "or");
    EXPECT(land == 0 && lor == (n > 1) && bits == (1L << n) - 1, "&& %ld, || %ld, or %#lx", land, lor, bits);
    double dand = 1.0;
    armci_msg_dgop(&dand, 1, "&&");
    EXPECT(dand == 1.0, "&& on doubles %f", dand);

    /* Point-to-point: a token passed round the ring, with a message of another tag sent
     * first that must not be taken for it. */
    int next = (me + 1) % n, prev = (me + n - 1) % n, token = -1, len = 0, other = -1;
    int decoy = 1000 + me;
    armci_msg_snd(7, &decoy, sizeof decoy, next);
    if (me == 0) {
        token = 0;
        armci_msg_snd(5, &token, sizeof token, next);
        armci_msg_rcv(5, &token, sizeof token, &len, prev);
        EXPECT(token == n - 1 && len == (int)sizeof token, "the token came back: %d (%d bytes)", token, len);
    } else {
        armci_msg_rcv(5, &token, sizeof token, &len, prev);
        token++;
        armci_msg_snd(5, &token, sizeof token, next);
    }
    EXPECT(armci_msg_rcvany(7, &other, sizeof other, NULL) == prev && other == 1000 + prev, "the decoy from %d", prev);

    /* The binary tree: every rank but 0 has a parent whose child it is. */
    int root, up, left, right;
    armci_msg_bintree(SCOPE_ALL, &root, &up, &left, &right);
    EXPECT(root == 0 && (me == 0 ? up == -1 : up == (me - 1) / 2), "tree parent %d", up);
    EXPECT(left == (2 * me + 1 < n ? 2 * me + 1 : -1) && right == (2 * me + 2 < n ? 2 * me + 2 : -1), "tree children");

    /* Selection: the largest first value wins, its whole buffer goes to everyone; rank 0 does
     * not take part (its value would win). */
    struct { double v; long who; } sel = { me == 0 ? 1e9 : 10.0 * me, me };
    armci_msg_sel_scope(SCOPE_ALL, &sel, sizeof sel, "max", ARMCI_DOUBLE, me != 0);
    if (n > 1) EXPECT(sel.who == n - 1 && sel.v == 10.0 * (n - 1), "selected rank %ld", sel.who);
    EXPECT(armci_timer() >= 0, "timer");

    /* Groups: the world, and the job in reverse order. */
    ARMCI_Group world, rev, dflt;
    ARMCI_Group_get_world(&world);
    int r, s;
    ARMCI_Group_rank(&world, &r);
    ARMCI_Group_size(&world, &s);
    EXPECT(r == me && s == n && world.rank == me && world.size == n, "world group %d/%d", r, s);
    int *pids = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        pids[i] = n - 1 - i;
    ARMCI_Group_create(n, pids, &rev);
    ARMCI_Group_rank(&rev, &r);
    EXPECT(r == n - 1 - me, "reversed group rank %d", r);
    EXPECT(ARMCI_Absolute_id(&rev, 0) == n - 1, "absolute id");
    void **ptrs = malloc(sizeof(void *) * n);
    ARMCI_Malloc_group(ptrs, 64, &rev);
    /* ptrs is indexed by group rank: my own block is at my group rank. */
    ARMCI_PutValueInt(1000 + me, ptrs[n - 1 - me], me);
    EXPECT(ARMCI_GetValueInt(ptrs[r], me) == 1000 + me, "group allocation indexing");
    int gx = 1;
    armci_msg_group_igop(&gx, 1, "+", &rev);
    EXPECT(gx == n, "group igop");
    armci_msg_group_barrier(&rev);
    ARMCI_Free_group(ptrs[r], &rev);
    ARMCI_Group_set_default(&rev);
    ARMCI_Group_get_default(&dflt);
    EXPECT(dflt.rank == n - 1 - me, "default group");
    ARMCI_Malloc(ptrs, 8); /* indexed by the default (reversed) group */
    ARMCI_PutValueInt(7, ptrs[n - 1 - me], me);
    ARMCI_Barrier();
    ARMCI_Free(ptrs[n - 1 - me]);
    ARMCI_Group_set_default(&world);
    ARMCI_Group_free(&dflt);
    ARMCI_Group_free(&rev);
    ARMCI_Group_free(&world);

    /* The domains in detail: test_topology. */
    EXPECT(armci_domain_id(ARMCI_DOMAIN_SMP, me) == armci_domain_my_id(ARMCI_DOMAIN_SMP) &&
               armci_domain_same_id(ARMCI_DOMAIN_SMP, me) == 1 && armci_domain_count(ARMCI_DOMAIN_SMP) >= 1,
           "topology");
    ARMCI_Finalize();
    if (me == 0)
        printf("test_msg: ok on %d ranks\n", n);
    return 0;
}
