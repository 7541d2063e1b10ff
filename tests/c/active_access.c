/* Active Access through the C API. Rank 0 creates the access log of domain 5 with a handler
 * that counts entries and sums their data, and marks a segment page ARMA_AA_WL | ARMA_AA_WLD
 * (W=0: active puts, logged with their data, memory untouched). Rank 1 puts 100 messages of 24
 * bytes there and active-flushes; rank 0 checks that all 100 reached the handler, byte for
 * byte, and none reached memory. A page marked ARMA_AA_R only makes a put a protection fault;
 * unknown action bits are refused. A third page logs the gets made of it (RL, RLD) into an
 * ARMA_NOTIFY_HOLD log: nothing runs its handler until arma_drain_log. Ranks beyond 1 only
 * take part in the collectives. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "check.h"
#include <stdatomic.h>
#include <unistd.h>

#define DOMAIN 5
#define MSGS 100
#define MSG_LEN 24

/* Byte k of message i: a misplaced, reordered or stale byte does not match by accident. */
static unsigned char pattern(uint64_t i, uint64_t k) {
    return (unsigned char)(i * 37 + k * 11 + 1);
}

/* What the handler saw. Atomics: with ARMA_NOTIFY_DEFAULT the mode comes from
 * ACTIVERMA_AA_NOTIFY, and with wake or thread the handler runs on a runtime thread. */
struct seen {
    uint64_t base; /* the active page's address on rank 0, as the entries report it */
    _Atomic uint64_t entries, accesses, bytes, sum, bad;
};

static void on_entry(const arma_log_entry_t *e, void *ctx) {
    struct seen *s = ctx;
    const unsigned char *d = e->data;
    uint64_t i = (e->addr - e->offset - s->base) / MSG_LEN, sum = 0;
    if (e->op != ARMA_AA_OP_PUT || e->origin != 1 || e->total_len != MSG_LEN ||
        (e->addr - e->offset - s->base) % MSG_LEN != 0 || i >= MSGS ||
        e->offset + e->data_len > MSG_LEN || (e->data_len > 0 && d == NULL))
        atomic_fetch_add(&s->bad, 1);
    for (size_t k = 0; k < e->data_len; k++) {
        if (d[k] != pattern(i, e->offset + k))
            atomic_fetch_add(&s->bad, 1);
        sum += d[k];
    }
    atomic_fetch_add(&s->entries, 1);
    atomic_fetch_add(&s->accesses, e->last != 0);
    atomic_fetch_add(&s->bytes, e->data_len);
    atomic_fetch_add(&s->sum, sum);
}

/* The hold log's handler: counts the logged gets and checks their bytes (all 0x5a). */
static _Atomic uint64_t held, held_bad;
static void on_held(const arma_log_entry_t *e, void *ctx) {
    (void)ctx;
    const unsigned char *d = e->data;
    if (e->op != ARMA_AA_OP_GET || e->origin != 1 || e->data_len != 16)
        atomic_fetch_add(&held_bad, 1);
    for (size_t k = 0; k < e->data_len; k++)
        if (d[k] != 0x5a)
            atomic_fetch_add(&held_bad, 1);
    atomic_fetch_add(&held, 1);
}

int main(void) {
    CHECK(arma_init());
    int me = arma_rank(), n = arma_size();
    EXPECT(n >= 2, "needs at least 2 ranks, has %d", n);
    long page = sysconf(_SC_PAGESIZE);
    EXPECT(page >= MSGS * MSG_LEN, "page size %ld", page);

    /* Page 0: active puts (domain 5). Page 1: read-only, no logging. */
    void *mem;
    CHECK(arma_seg_alloc(3 * (size_t)page, &mem));
    unsigned char *seg = mem;
    EXPECT((uintptr_t)seg % (uintptr_t)page == 0, "segments are page-aligned (%p)", mem);
    static struct seen s; /* static: zero-initialized, and valid until arma_finalize */
    if (me == 0) {
        CHECK(arma_seg_addr(seg, 0, &s.base));
        CHECK(arma_create_log(DOMAIN, 1 << 16, ARMA_NOTIFY_DEFAULT, 0, on_entry, &s));
        CHECK(arma_assoc_pages(seg, (size_t)page, ARMA_AA_WL | ARMA_AA_WLD, DOMAIN));
        CHECK(arma_assoc_pages(seg + page, (size_t)page, ARMA_AA_R, -1));
        {
            uint32_t got = 0;
            int dom = -2;
            CHECK(arma_page_marks(seg + 8, &got, &dom));
            EXPECT(got == (ARMA_AA_WL | ARMA_AA_WLD) && dom == DOMAIN, "page 0 marks %#x, domain %d", got, dom);
            CHECK(arma_page_marks(seg + page, &got, &dom));
            EXPECT(got == ARMA_AA_R && dom == -1, "page 1 marks %#x, domain %d", got, dom);
            CHECK(arma_page_marks(seg + 2 * page, &got, NULL));
            EXPECT(got == (ARMA_AA_W | ARMA_AA_R), "page 2 marks %#x", got);
            CHECK_RC(arma_page_marks(&got, &got, &dom), ARMA_ERR_NOT_EXPOSED);
        }
        CHECK_RC(arma_assoc_pages(seg, (size_t)page, ARMA_AA_W | (uint32_t)1 << 20, DOMAIN),
                 ARMA_ERR_INVALID_ARGUMENT);
        EXPECT(strstr(arma_last_error(), "arma_assoc_pages") != NULL, "message: %s",
               arma_last_error());
        CHECK_RC(arma_create_log(DOMAIN + 1, 1 << 16, 42, 0, on_entry, &s),
                 ARMA_ERR_INVALID_ARGUMENT);
        CHECK_RC(arma_create_log(DOMAIN + 1, 1 << 16, ARMA_NOTIFY_POLL, 0, NULL, NULL),
                 ARMA_ERR_INVALID_ARGUMENT);
        memset(seg + 2 * page, 0x5a, (size_t)page);
        CHECK(arma_create_log(DOMAIN + 2, 1 << 16, ARMA_NOTIFY_HOLD, 0, on_held, NULL));
        CHECK(arma_assoc_pages(seg + 2 * page, (size_t)page,
                               ARMA_AA_W | ARMA_AA_R | ARMA_AA_RL | ARMA_AA_RLD, DOMAIN + 2));
        CHECK_RC(arma_drain_log(DOMAIN + 3, NULL), ARMA_ERR_INVALID_ARGUMENT); /* no such log */
    }
    CHECK(arma_barrier()); /* marks and log are in place */

    if (me == 1) {
        unsigned char msg[MSG_LEN];
        for (uint64_t i = 0; i < MSGS; i++) {
            uint64_t at;
            for (uint64_t k = 0; k < MSG_LEN; k++)
                msg[k] = pattern(i, k);
            CHECK(arma_seg_addr(seg + i * MSG_LEN, 0, &at));
            CHECK(arma_put(0, at, msg, MSG_LEN));
        }
        CHECK(arma_active_flush(0)); /* rank 0 ran the handler for all of them */

        uint64_t ro;
        CHECK(arma_seg_addr(seg + page + 8, 0, &ro));
        CHECK_RC(arma_put(0, ro, msg, MSG_LEN), ARMA_ERR_PROTECTION);
        unsigned char back[MSG_LEN];
        memset(back, 0xee, sizeof back);
        CHECK(arma_get(0, ro, back, MSG_LEN)); /* R=1: gets still work */
        for (size_t k = 0; k < MSG_LEN; k++)
            EXPECT(back[k] == 0, "byte %zu of the read-only page is %u", k, back[k]);
        for (uint64_t i = 0; i < 10; i++) {
            uint64_t at;
            unsigned char got[16];
            CHECK(arma_seg_addr(seg + 2 * page + i * 16, 0, &at));
            CHECK(arma_get(0, at, got, sizeof got));
            EXPECT(got[0] == 0x5a && got[15] == 0x5a, "get %" PRIu64 " read %u", i, got[0]);
        }
    }
    CHECK(arma_barrier());

    if (me == 0) {
        CHECK(arma_progress());
        uint64_t want_sum = 0;
        for (uint64_t i = 0; i < MSGS; i++)
            for (uint64_t k = 0; k < MSG_LEN; k++)
                want_sum += pattern(i, k);
        uint64_t entries = atomic_load(&s.entries), accesses = atomic_load(&s.accesses);
        uint64_t bytes = atomic_load(&s.bytes), sum = atomic_load(&s.sum), bad = atomic_load(&s.bad);
        EXPECT(bad == 0, "%" PRIu64 " entries or bytes were not what rank 1 put", bad);
        EXPECT(entries == MSGS && accesses == MSGS,
               "%" PRIu64 " entries, %" PRIu64 " accesses logged, expected %d", entries, accesses,
               MSGS);
        EXPECT(bytes == MSGS * MSG_LEN && sum == want_sum,
               "logged %" PRIu64 " bytes summing to %" PRIu64 ", expected %d summing to %" PRIu64,
               bytes, sum, MSGS * MSG_LEN, want_sum);
        for (long k = 0; k < 2 * page; k++)
            EXPECT(seg[k] == 0, "W=0: byte %ld of the segment is %u", k, seg[k]);
        /* The hold log kept its 10 entries through every progress call so far. */
        EXPECT(atomic_load(&held) == 0, "a hold log's handler ran %" PRIu64 " times unasked",
               atomic_load(&held));
        uint64_t handled = 0;
        CHECK(arma_drain_log(DOMAIN + 2, &handled));
        EXPECT(handled == 10 && atomic_load(&held) == 10 && atomic_load(&held_bad) == 0,
               "drained %" PRIu64 " entries (%" PRIu64 " seen, %" PRIu64 " wrong), expected 10",
               handled, atomic_load(&held), atomic_load(&held_bad));
        uint64_t hits = 1, misses = 1;
        CHECK(arma_iotlb_stats(&hits, &misses));
        CHECK(arma_iotlb_stats(NULL, NULL));
        CHECK(arma_assoc_pages(seg, 3 * (size_t)page, ARMA_AA_W | ARMA_AA_R, -1)); /* plain again */
    }
    CHECK(arma_barrier());
    CHECK(arma_seg_free(seg));
    CHECK(arma_finalize());
    if (me == 0)
        printf("active_access: all checks passed on %d ranks\n", n);
    return 0;
}
