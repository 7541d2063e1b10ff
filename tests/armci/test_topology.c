/* SMP domains and the scopes of message.h. The contract Global Arrays relies on: a rank in my
 * domain (ARMCI_Same_node) has ARMCI_Malloc addresses I may load from and store to directly.
 * The domains partition the job consistently, and SCOPE_NODE / SCOPE_MASTERS collectives run
 * over a domain's ranks / the domains' first ranks. With ARMCI_TEST_DOMAINS=k in the
 * environment, the job must have exactly k domains (run.sh: one for a job on one host, also on
 * the MPI builds; one per rank where ranks share no memory). */
#include "check.h"
#include <stdlib.h>

int main(void) {
    ARMCI_Init();
    int me = armci_msg_me(), n = armci_msg_nproc();
    int mine = armci_domain_my_id(ARMCI_DOMAIN_SMP), count = armci_domain_count(ARMCI_DOMAIN_SMP);
    EXPECT(count >= 1 && count <= n, "domain count %d", count);
    const char *want = getenv("ARMCI_TEST_DOMAINS");
    if (want) EXPECT(count == atoi(want), "domain count %d, expected %s", count, want);
    EXPECT(armci_domain_id(ARMCI_DOMAIN_SMP, me) == mine, "my domain id %d vs %d", armci_domain_id(ARMCI_DOMAIN_SMP, me), mine);
    EXPECT(ARMCI_Same_node(me) == 1, "a rank is not on its own node");

    /* The domains partition the job, their members listed in rank order. */
    int total = 0;
    for (int d = 0; d < count; d++) {
        int k = armci_domain_nprocs(ARMCI_DOMAIN_SMP, d), prev = -1;
        EXPECT(k >= 1, "domain %d has %d ranks", d, k);
        for (int i = 0; i < k; i++) {
            int r = armci_domain_glob_proc_id(ARMCI_DOMAIN_SMP, d, i);
            EXPECT(r > prev && r < n, "domain %d rank %d is job rank %d", d, i, r);
            EXPECT(armci_domain_id(ARMCI_DOMAIN_SMP, r) == d, "rank %d listed in domain %d", r, d);
            EXPECT(ARMCI_Same_node(r) == (d == mine), "Same_node(%d) = %d", r, ARMCI_Same_node(r));
            EXPECT(armci_domain_same_id(ARMCI_DOMAIN_SMP, r) == (d == mine), "same_id(%d)", r);
            prev = r;
        }
        total += k;
    }
    EXPECT(total == n, "the domains hold %d ranks of %d", total, n);
    if (armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine) > 1)
        EXPECT(ARMCI_Uses_shm() == 1, "domains of several ranks without shared memory");

    /* Direct loads and stores through the addresses of every rank of my domain. */
    void **base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 64);
    *(volatile long *)base[me] = 1000 + me;
    ARMCI_Barrier();
    for (int r = 0; r < n; r++)
        if (ARMCI_Same_node(r))
            EXPECT(*(volatile long *)base[r] == 1000 + r, "direct load from rank %d's block: %ld", r, *(volatile long *)base[r]);
    ARMCI_Barrier();
    int next = me;
    do
        next = (next + 1) % n;
    while (!ARMCI_Same_node(next));
    ((volatile long *)base[next])[1] = me; /* a store into the next rank of my domain */
    ARMCI_Barrier();
    int from = me;
    do
        from = (from + n - 1) % n;
    while (!ARMCI_Same_node(from));
    EXPECT(((volatile long *)base[me])[1] == from, "direct store from rank %d: %ld", from, ((volatile long *)base[me])[1]);
    ARMCI_Barrier();

    /* Scopes: SCOPE_NODE sums over my domain, SCOPE_MASTERS over the domains' first ranks. */
    int one = 1;
    armci_msg_gop_scope(SCOPE_NODE, &one, 1, "+", ARMCI_INT);
    EXPECT(one == armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine), "SCOPE_NODE sum %d", one);
    int master = armci_domain_glob_proc_id(ARMCI_DOMAIN_SMP, mine, 0);
    if (master == me) {
        long m = 1;
        armci_msg_gop_scope(SCOPE_MASTERS, &m, 1, "+", ARMCI_LONG);
        EXPECT(m == count, "SCOPE_MASTERS sum %ld, %d domains", m, count);
    }
    double v = me == master ? 2.5 : 0;
    armci_msg_bcast_scope(SCOPE_NODE, &v, sizeof v, master);
    EXPECT(v == 2.5, "SCOPE_NODE broadcast from the domain's first rank: %f", v);
    int root, up, left, right;
    armci_msg_bintree(SCOPE_NODE, &root, &up, &left, &right);
    EXPECT(root == master && (me == master) == (up == -1), "SCOPE_NODE tree: root %d up %d", root, up);
    if (left >= 0)
        EXPECT(ARMCI_Same_node(left) && left > me, "SCOPE_NODE tree: left child %d", left);
    int all = 1;
    armci_msg_gop_scope(SCOPE_ALL, &all, 1, "+", ARMCI_INT);
    EXPECT(all == n, "SCOPE_ALL sum %d", all);

    /* Classic ARMCI's cluster calls: over my domain, from its first rank. */
    long c = me == master ? 77 : -1;
    armci_msg_clus_brdcst(&c, sizeof c);
    EXPECT(c == 77, "clus_brdcst from the domain's first rank: %ld", c);
    int ci = me + 1;
    armci_msg_clus_igop(&ci, 1, "max");
    int last = armci_domain_glob_proc_id(ARMCI_DOMAIN_SMP, mine, armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine) - 1);
    EXPECT(ci == last + 1, "clus_igop max %d, the domain's last rank is %d", ci, last);
    long cl[2] = {1, me};
    armci_msg_clus_lgop(cl, 2, "+");
    EXPECT(cl[0] == armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine), "clus_lgop count %ld", cl[0]);
    long long cll = 2;
    armci_msg_clus_llgop(&cll, 1, "*");
    EXPECT(cll == 1LL << armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine), "clus_llgop product %lld", cll);
    float cf = me == master ? -3.0f : 1.0f;
    armci_msg_clus_fgop(&cf, 1, "absmax");
    EXPECT(cf == 3.0f, "clus_fgop absmax %f", cf);
    double cd = 0.5;
    armci_msg_clus_dgop(&cd, 1, "+");
    EXPECT(cd == 0.5 * armci_domain_nprocs(ARMCI_DOMAIN_SMP, mine), "clus_dgop %f", cd);
    /* armci_grp_clus_brdcst over pairs of world-group ranks {0,1}, {2,3}, ... from the even one. */
    ARMCI_Group world;
    ARMCI_Group_get_world(&world);
    int pair = me & ~1, pair_n = pair + 1 < n ? 2 : 1;
    int pv[3] = {me, me * 10, -me};
    armci_grp_clus_brdcst(pv, sizeof pv, pair, pair_n, &world);
    EXPECT(pv[0] == pair && pv[1] == pair * 10 && pv[2] == -pair, "grp_clus_brdcst from %d: %d %d %d", pair, pv[0], pv[1],
           pv[2]);

    int shm = ARMCI_Uses_shm();
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_topology: ok on %d ranks (%d domain%s, shared memory %s)\n", n, count, count == 1 ? "" : "s",
               shm ? "yes" : "no");
    free(base);
    return 0;
}
