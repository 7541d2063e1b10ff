/* The object DSM from C (arma_dsm_*), under the protocol ACTIVERMA_DSM_PROTOCOL names: a
 * counter under a lock, a linked list of references built under a lock and walked by every
 * rank, a chunked array written by every rank, a check-in with wait/notify_all, and bad input
 * refused with clear errors. */
#include "check.h"

enum { ROUNDS = 40, NODES = 8, ARRAY = 10000 };

/* Rank `from`'s reference, as every rank sees it. */
static arma_ref_t share(arma_ref_t mine, int from) {
    int n = arma_size();
    arma_ref_t *all = malloc(sizeof(arma_ref_t) * (size_t)n);
    if (!all)
        FAILF("out of memory");
    CHECK(arma_allgather(&mine, sizeof mine, all));
    arma_ref_t r = all[from];
    free(all);
    return r;
}

static uint64_t read_u64(arma_ref_t r, size_t i) {
    const void *p;
    size_t len;
    CHECK(arma_dsm_read_begin(r, &p, &len));
    EXPECT((i + 1) * 8 <= len, "word %zu of a region of %zu bytes", i, len);
    uint64_t v;
    memcpy(&v, (const char *)p + i * 8, 8);
    CHECK(arma_dsm_end(r));
    return v;
}

static void write_u64(arma_ref_t r, size_t i, uint64_t v) {
    void *p;
    size_t len;
    CHECK(arma_dsm_write_begin(r, &p, &len));
    EXPECT((i + 1) * 8 <= len, "word %zu of a region of %zu bytes", i, len);
    memcpy((char *)p + i * 8, &v, 8);
    CHECK(arma_dsm_end(r));
}

int main(void) {
    CHECK(arma_init());
    CHECK(arma_dsm_init());
    int me = arma_rank(), n = arma_size();

    /* A counter at the last rank. */
    arma_ref_t c = ARMA_DSM_NULL;
    if (me == n - 1)
        CHECK(arma_dsm_alloc(8, -1, &c));
    c = share(c, n - 1);
    EXPECT(arma_dsm_home(c) == n - 1, "the counter's home is %d", arma_dsm_home(c));
    CHECK(arma_dsm_barrier());
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(arma_dsm_lock(c));
        CHECK(arma_dsm_lock(c)); /* re-entered */
        write_u64(c, 0, read_u64(c, 0) + 1);
        CHECK(arma_dsm_unlock(c));
        CHECK(arma_dsm_unlock(c));
    }
    CHECK(arma_dsm_barrier());
    EXPECT(read_u64(c, 0) == (uint64_t)ROUNDS * (uint64_t)n, "the counter reads %" PRIu64, read_u64(c, 0));

    /* A linked list: nodes homed at their makers, the head at rank 0. */
    arma_ref_t head = ARMA_DSM_NULL;
    if (me == 0) {
        CHECK(arma_dsm_alloc(8, 0, &head));
        write_u64(head, 0, ARMA_DSM_NULL);
    }
    head = share(head, 0);
    CHECK(arma_dsm_barrier());
    for (int i = 0; i < NODES; i++) {
        arma_ref_t node;
        CHECK(arma_dsm_alloc(16, -1, &node));
        write_u64(node, 0, (uint64_t)me * 1000 + (uint64_t)i);
        CHECK(arma_dsm_lock(head));
        write_u64(node, 1, read_u64(head, 0));
        write_u64(head, 0, node);
        CHECK(arma_dsm_unlock(head));
    }
    CHECK(arma_dsm_barrier());
    uint64_t sum = 0;
    int steps = 0;
    for (arma_ref_t at = read_u64(head, 0); at != ARMA_DSM_NULL; at = read_u64(at, 1)) {
        sum += read_u64(at, 0);
        steps++;
    }
    uint64_t want = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < NODES; i++)
            want += (uint64_t)r * 1000 + (uint64_t)i;
    EXPECT(steps == NODES * n && sum == want, "the list has %d nodes summing to %" PRIu64, steps, sum);

    /* A chunked array at the last rank: every rank writes its own bytes. */
    arma_dsm_array_t a = {0};
    if (me == n - 1)
        CHECK(arma_dsm_alloc_array(ARRAY, -1, &a));
    {
        arma_dsm_array_t *all = malloc(sizeof a * (size_t)n);
        if (!all)
            FAILF("out of memory");
        CHECK(arma_allgather(&a, sizeof a, all));
        a = all[n - 1];
        free(all);
    }
    for (uint64_t b = (uint64_t)me; b < ARRAY; b += (uint64_t)n) {
        arma_ref_t chunk;
        size_t at;
        void *p;
        size_t len;
        CHECK(arma_dsm_locate(&a, b, &chunk, &at));
        CHECK(arma_dsm_write_begin(chunk, &p, &len));
        ((unsigned char *)p)[at] = (unsigned char)(b % 251 + 1);
        CHECK(arma_dsm_end(chunk));
    }
    CHECK(arma_dsm_barrier());
    for (uint64_t b = 0; b < ARRAY; b++) {
        arma_ref_t chunk;
        size_t at, len;
        const void *p;
        CHECK(arma_dsm_locate(&a, b, &chunk, &at));
        CHECK(arma_dsm_read_begin(chunk, &p, &len));
        unsigned char got = ((const unsigned char *)p)[at];
        CHECK(arma_dsm_end(chunk));
        EXPECT(got == (unsigned char)(b % 251 + 1), "array byte %" PRIu64 " reads %u", b, got);
    }

    /* Check-in: rank 0 waits until every other rank has notified. */
    arma_ref_t in = ARMA_DSM_NULL;
    if (me == 0)
        CHECK(arma_dsm_alloc(8, 0, &in));
    in = share(in, 0);
    CHECK(arma_dsm_barrier());
    CHECK(arma_dsm_lock(in));
    if (me == 0) {
        while (read_u64(in, 0) < (uint64_t)(n - 1))
            CHECK(arma_dsm_wait(in));
    } else {
        write_u64(in, 0, read_u64(in, 0) + 1);
        CHECK(arma_dsm_notify_all(in));
    }
    CHECK(arma_dsm_unlock(in));

    /* Bad input. */
    arma_ref_t forged = c ^ ((uint64_t)1 << 40);
    const void *p;
    size_t len;
    CHECK_RC(arma_dsm_read_begin(forged, &p, &len), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_dsm_read_begin(ARMA_DSM_NULL, &p, &len), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_dsm_unlock(c), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_dsm_end(c), ARMA_ERR_INVALID_ARGUMENT);
    arma_ref_t r;
    CHECK_RC(arma_dsm_alloc(8, n + 2, &r), ARMA_ERR_INVALID_RANK);
    CHECK(arma_dsm_read_begin(c, &p, &len));
    CHECK_RC(arma_dsm_barrier(), ARMA_ERR_INVALID_ARGUMENT); /* a view is open */
    CHECK(arma_dsm_end(c));

    CHECK(arma_dsm_finalize());
    CHECK(arma_finalize());
    if (me == 0)
        printf("test_dsm: %d ranks passed\n", n);
    return 0;
}
