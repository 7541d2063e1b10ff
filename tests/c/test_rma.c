/* RMA correctness across ranks: puts and gets (blocking, nb, nbi) into segments and into exposed
 * private memory (heap and stack), with every byte verified; atomics on segments and on private
 * memory, with exact totals and ticket sets; swap/cswap/fetch semantics. */
#include "check.h"

static int me, n;

/* A byte that depends on who wrote it, where, and in which round: a misplaced or stale byte
 * never matches by accident (over the sizes used here). */
static unsigned char pattern(int origin, int target, size_t i, int round) {
    return (unsigned char)(origin * 31 + target * 7 + round * 101 + i * 13 + (i >> 8) * 3);
}

static void fill(unsigned char *b, size_t len, int origin, int target, int round) {
    for (size_t i = 0; i < len; i++)
        b[i] = pattern(origin, target, i, round);
}

static void verify(const unsigned char *b, size_t len, int origin, int target, int round,
                   const char *what) {
    for (size_t i = 0; i < len; i++)
        if (b[i] != pattern(origin, target, i, round))
            FAILF("%s: round %d, origin %d -> target %d: byte %zu is %u, expected %u", what, round,
                  origin, target, i, b[i], pattern(origin, target, i, round));
}

enum { BLOCKING, NB, NBI, ROUNDS };
static const char *round_name[] = {"blocking", "nb", "nbi"};

/* Puts `len` bytes to (t, addr) with the round's variant; completes it the variant's way. */
static void put_round(int round, int t, uint64_t addr, const void *src, size_t len,
                      arma_handle_t *h) {
    switch (round) {
    case BLOCKING: CHECK(arma_put(t, addr, src, len)); break;
    case NB: CHECK(arma_put_nb(t, addr, src, len, h)); break;
    case NBI: CHECK(arma_put_nbi(t, addr, src, len)); break;
    }
}

static void get_round(int round, int t, uint64_t addr, void *dst, size_t len, arma_handle_t *h) {
    switch (round) {
    case BLOCKING: CHECK(arma_get(t, addr, dst, len)); break;
    case NB: CHECK(arma_get_nb(t, addr, dst, len, h)); break;
    case NBI: CHECK(arma_get_nbi(t, addr, dst, len)); break;
    }
}

/* Completes what put_round/get_round started towards ranks first..last-1: handles are waited
 * for (or tested until done, for odd ranks, so both calls are used), nbi ops flushed per
 * target. Only handles that were issued may be completed (any other is an invalid handle). */
static void complete_round(int round, arma_handle_t *h, int first, int last) {
    for (int t = first; t < last; t++) {
        if (round == NB && t % 2 == 0) {
            CHECK(arma_wait(&h[t]));
            EXPECT(h[t].opaque == 0, "arma_wait zeroes the handle");
        } else if (round == NB) {
            int done = 0;
            while (!done)
                CHECK(arma_test(&h[t], &done));
            EXPECT(h[t].opaque == 0, "a completed arma_test zeroes the handle");
        } else if (round == NBI) {
            CHECK(arma_flush(t));
        }
    }
    if (round == NBI)
        CHECK(arma_flush_all());
}

/* Each origin owns a slot of BLK bytes in every rank's segment; BLK is not a page multiple so
 * slots straddle page boundaries. */
#define BLK (64 * 1024 + 24)

static void test_segments(void) {
    void *mem;
    CHECK(arma_seg_alloc((size_t)n * BLK, &mem));
    unsigned char *seg = mem;
    for (size_t i = 0; i < (size_t)n * BLK; i++)
        EXPECT(seg[i] == 0, "a fresh segment is zero (byte %zu)", i);
    CHECK(arma_barrier()); /* checked before anyone writes into it */
    unsigned char *out = malloc((size_t)n * BLK), *in = malloc((size_t)n * BLK);
    arma_handle_t h[64] = {{0}};
    EXPECT(out && in && n <= 64, "buffers");

    for (int round = 0; round < ROUNDS; round++) {
        for (int t = 0; t < n; t++) {
            uint64_t slot;
            CHECK(arma_seg_addr(seg + (size_t)me * BLK, t, &slot));
            fill(out + (size_t)t * BLK, BLK, me, t, round);
            put_round(round, t, slot, out + (size_t)t * BLK, BLK, &h[t]);
        }
        complete_round(round, h, 0, n);
        CHECK(arma_barrier()); /* every rank's puts are in place */
        for (int o = 0; o < n; o++)
            verify(seg + (size_t)o * BLK, BLK, o, me, round, round_name[round]);

        memset(in, 0xee, (size_t)n * BLK);
        for (int t = 0; t < n; t++) {
            uint64_t slot;
            CHECK(arma_seg_addr(seg + (size_t)me * BLK, t, &slot));
            get_round(round, t, slot, in + (size_t)t * BLK, BLK, &h[t]);
        }
        complete_round(round, h, 0, n);
        for (int t = 0; t < n; t++)
            verify(in + (size_t)t * BLK, BLK, me, t, round, "get back");
        CHECK(arma_barrier()); /* nobody reads a slot while the next round overwrites it */
    }

    /* An unaligned sub-range, and fence ordering: data, fence, flag. The target polls its own
     * memory for the flag (no barrier in between): once it sees the flag, the data is there. */
    int right = (me + 1) % n, left = (me + n - 1) % n;
    uint64_t at, flag = 0x600d, flag_at;
    CHECK(arma_seg_addr(seg + (size_t)me * BLK + 3, right, &at));
    CHECK(arma_seg_addr(seg + (size_t)me * BLK + BLK - 8, right, &flag_at));
    fill(out, 1001, me, right, 7);
    CHECK(arma_put_nbi(right, at, out, 1001));
    CHECK(arma_fence());
    CHECK(arma_put(right, flag_at, &flag, 8));
    uint64_t *my_flag = (uint64_t *)(seg + (size_t)left * BLK + BLK - 8);
    while (__atomic_load_n(my_flag, __ATOMIC_ACQUIRE) != 0x600d)
        ;
    verify(seg + (size_t)left * BLK + 3, 1001, left, me, 7, "data before the fenced flag");
    CHECK(arma_barrier());

    free(out);
    free(in);
    CHECK(arma_seg_free(seg));
}

/* Private memory: a malloc'd buffer and a stack buffer, each origin with a slot in both. */
#define HSLOT 5003
#define SSLOT 211

static void test_private(void) {
    unsigned char *heap = calloc((size_t)n, HSLOT);
    unsigned char stack[64 * SSLOT];
    memset(stack, 0, sizeof stack);
    EXPECT(heap != NULL, "calloc");
    arma_exposure_t eh, es;
    CHECK(arma_expose(heap, (size_t)n * HSLOT, ARMA_PROT_READ_WRITE, &eh));
    CHECK(arma_expose(stack, (size_t)n * SSLOT, ARMA_PROT_READ_WRITE, &es));
    EXPECT(eh.addr == (uint64_t)(uintptr_t)heap && eh.opaque != 0, "exposure describes the buffer");

    uint64_t mine[2] = {eh.addr, es.addr}, *all = malloc((size_t)n * sizeof mine);
    EXPECT(all != NULL, "malloc");
    CHECK(arma_allgather(mine, sizeof mine, all));
    EXPECT(all[2 * me] == eh.addr && all[2 * me + 1] == es.addr, "allgather puts mine in my slot");

    unsigned char out[HSLOT], in[HSLOT];
    arma_handle_t h[64] = {{0}}, hs;
    for (int round = 0; round < ROUNDS; round++) {
        for (int t = 0; t < n; t++) {
            fill(out, HSLOT, me, t, round);
            put_round(round, t, all[2 * t] + (uint64_t)me * HSLOT, out, HSLOT, &h[t]);
            if (round == NB) /* out is rewritten below: complete first, as the API asks */
                CHECK(arma_wait(&h[t]));
            fill(out, SSLOT, me, t, round + 10);
            put_round(round, t, all[2 * t + 1] + (uint64_t)me * SSLOT, out, SSLOT, &hs);
            if (round == NB)
                CHECK(arma_wait(&hs));
        }
        if (round != NB) /* nb handles were waited for above */
            complete_round(round, h, 0, n);
        CHECK(arma_barrier());
        for (int o = 0; o < n; o++) {
            verify(heap + (size_t)o * HSLOT, HSLOT, o, me, round, "private heap");
            verify(stack + (size_t)o * SSLOT, SSLOT, o, me, round + 10, "private stack");
        }
        for (int t = 0; t < n; t++) {
            memset(in, 0xee, sizeof in);
            get_round(round, t, all[2 * t] + (uint64_t)me * HSLOT, in, HSLOT, &h[t]);
            complete_round(round, h, t, t + 1);
            verify(in, HSLOT, me, t, round, "private heap get back");
            get_round(round, t, all[2 * t + 1] + (uint64_t)me * SSLOT, in, SSLOT, &hs);
            if (round == NB)
                CHECK(arma_wait(&hs));
            if (round == NBI)
                CHECK(arma_flush(t));
            verify(in, SSLOT, me, t, round + 10, "private stack get back");
        }
        CHECK(arma_barrier());
    }
    CHECK(arma_barrier()); /* nobody accesses them any more */
    CHECK(arma_unexpose(es));
    CHECK(arma_unexpose(eh));
    free(all);
    free(heap);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* All ranks take k tickets from the counter at (owner, addr): together the tickets must be
 * exactly 0..k*n-1 (no lost or doubled update) and the counter must end at k*n. */
static void ticket_race(int owner, uint64_t addr, int k, const char *what) {
    uint64_t *mine = malloc((size_t)k * 8), *all = malloc((size_t)k * 8 * (size_t)n), v;
    EXPECT(mine && all, "malloc");
    for (int i = 0; i < k; i++)
        CHECK(arma_fetch_add(owner, addr, 1, &mine[i]));
    CHECK(arma_allgather(mine, (size_t)k * 8, all)); /* also: everyone has finished adding */
    qsort(all, (size_t)k * (size_t)n, 8, cmp_u64);
    for (int i = 0; i < k * n; i++)
        EXPECT(all[i] == (uint64_t)i, "%s: the tickets are 0..%d, but the %d-th is %" PRIu64, what,
               k * n - 1, i, all[i]);
    CHECK(arma_fetch(owner, addr, &v));
    EXPECT(v == (uint64_t)k * (uint64_t)n, "%s: counter %" PRIu64, what, v);
    free(mine);
    free(all);
}

/* Every rank adds me+1, k times, with arma_add: the sum is k * n(n+1)/2. */
static void add_race(int owner, uint64_t addr, int k, const char *what) {
    for (int i = 0; i < k; i++)
        CHECK(arma_add(owner, addr, (uint64_t)me + 1));
    CHECK(arma_barrier());
    uint64_t v, want = (uint64_t)k * (uint64_t)n * (uint64_t)(n + 1) / 2;
    CHECK(arma_fetch(owner, addr, &v));
    EXPECT(v == want, "%s: sum %" PRIu64 ", expected %" PRIu64, what, v, want);
}

/* fetch / swap / cswap (failing and succeeding) / wrapping fetch_add / add on a word that only
 * this rank touches; it starts at 0 and ends at UINT64_MAX. */
static void semantics(int t, uint64_t addr, const char *what) {
    uint64_t old = 1, v = 1;
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(v == 0, "%s: fresh word %" PRIu64, what, v);
    CHECK(arma_swap(t, addr, 7, &old));
    EXPECT(old == 0, "%s: swap returns the old value", what);
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(v == 7, "%s: swap stored 7, read %" PRIu64, what, v);
    CHECK(arma_cswap(t, addr, 8, 9, &old));
    EXPECT(old == 7, "%s: failed cswap returns the current value", what);
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(v == 7, "%s: failed cswap changed the word to %" PRIu64, what, v);
    CHECK(arma_cswap(t, addr, 7, 9, &old));
    EXPECT(old == 7, "%s: successful cswap returns the expected value", what);
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(v == 9, "%s: cswap stored 9, read %" PRIu64, what, v);
    CHECK(arma_fetch_add(t, addr, UINT64_MAX, &old));
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(old == 9 && v == 8, "%s: fetch_add wraps (old %" PRIu64 ", now %" PRIu64 ")", what, old, v);
    CHECK(arma_add(t, addr, 2));
    CHECK(arma_cswap(t, addr, 10, UINT64_MAX, NULL));
    CHECK(arma_fetch(t, addr, &v));
    EXPECT(v == UINT64_MAX, "%s: add then cswap give UINT64_MAX, read %" PRIu64, what, v);
}

/* Everyone tries cswap 0 -> me+1 on one word: exactly one rank wins, and the word names it. */
static void cswap_race(int owner, uint64_t addr, const char *what) {
    uint64_t old, v;
    CHECK(arma_cswap(owner, addr, 0, (uint64_t)me + 1, &old));
    int won = old == 0, *all = malloc((size_t)n * sizeof(int)), winners = 0, winner = -1;
    EXPECT(all != NULL, "malloc");
    CHECK(arma_allgather(&won, sizeof won, all));
    for (int r = 0; r < n; r++)
        if (all[r])
            winners++, winner = r;
    EXPECT(winners == 1, "%s: %d ranks won the cswap", what, winners);
    CHECK(arma_fetch(owner, addr, &v));
    EXPECT(v == (uint64_t)winner + 1, "%s: the word holds %" PRIu64 ", winner %d", what, v, winner);
    free(all);
}

/* Word layout of the atomic area, the same on every rank. */
enum { W_TICKETS = 0, W_SUM = 1, W_CSWAP = 2, W_PASSIVE = 3, W_SEMANTICS = 8 /* + origin */, WORDS = 8 + 64 };

/* Runs every atomic test on the area whose address on rank r is area[r], then checks that the
 * semantics words this rank owns ended where their origins left them. */
static void atomics_on(const uint64_t *area, const uint64_t *local, int k, const char *what) {
    int owner = n - 1, right = (me + 1) % n;
    ticket_race(owner, area[owner] + 8 * W_TICKETS, k, what);
    add_race(0, area[0] + 8 * W_SUM, k, what);
    cswap_race(owner, area[owner] + 8 * W_CSWAP, what);
    semantics(right, area[right] + 8 * (uint64_t)(W_SEMANTICS + me), what);
    /* Ranks are targets of private-memory atomics: the barrier makes progress for them. */
    CHECK(arma_barrier());
    int left = (me + n - 1) % n;
    EXPECT(local[W_SEMANTICS + left] == UINT64_MAX, "%s: rank %d's word here is %" PRIu64, what,
           left, local[W_SEMANTICS + left]);
}

static void test_atomics(void) {
    uint64_t *area = malloc((size_t)n * 8);
    EXPECT(area != NULL, "malloc");

    /* On a segment: the origin's CPU runs the atomics. */
    void *mem;
    CHECK(arma_seg_alloc(WORDS * 8, &mem));
    for (int r = 0; r < n; r++)
        CHECK(arma_seg_addr(mem, r, &area[r]));
    atomics_on(area, mem, 2000, "segment atomics");
    CHECK(arma_seg_free(mem));

    /* On exposed private memory: the target runs them, so it must make progress; every rank is
     * in a blocking call (its own atomics, allgather, barrier) while the others need it. */
    uint64_t *priv = calloc(WORDS, 8);
    EXPECT(priv != NULL, "calloc");
    arma_exposure_t e;
    CHECK(arma_expose(priv, WORDS * 8, ARMA_PROT_READ_WRITE, &e));
    CHECK(arma_allgather(&e.addr, 8, area));
    /* Fewer rounds: each is a message round trip, which costs up to a scheduler time slice when
     * the job has more ranks than cores and waiting ranks spin. */
    atomics_on(area, priv, 100, "private-memory atomics");

    /* A passive target: rank 0 only waits in arma_barrier (which runs its handlers) while the
     * others update its private word; nothing may be lost. */
    if (me != 0)
        for (int i = 0; i < 100; i++)
            CHECK(arma_add(0, area[0] + 8 * W_PASSIVE, 1));
    CHECK(arma_barrier());
    if (me == 0)
        EXPECT(priv[W_PASSIVE] == 100u * (uint64_t)(n - 1), "the passive target's word is %" PRIu64,
               priv[W_PASSIVE]);
    CHECK(arma_barrier());
    CHECK(arma_unexpose(e));
    free(priv);
    free(area);
}

int main(void) {
    CHECK(arma_init());
    me = arma_rank();
    n = arma_size();
    EXPECT(n >= 1 && n <= 64 && me >= 0 && me < n, "rank %d of %d", me, n);
    test_segments();
    test_private();
    test_atomics();
    CHECK(arma_finalize());
    if (me == 0)
        printf("test_rma: all checks passed on %d ranks\n", n);
    return 0;
}
