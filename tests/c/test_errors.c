/* Errors are values with useful messages, never crashes: calls before arma_init, bad ranks,
 * unexposed addresses, read-only memory, misaligned atomics, NULL buffers, bad handles and
 * arguments, zero-length transfers (which succeed), and calls after arma_finalize. */
#include "check.h"

static int me, n, right;

/* arma_last_error() must mention `needle`. */
static void expect_message(const char *needle) {
    const char *msg = arma_last_error();
    EXPECT(msg && strstr(msg, needle), "arma_last_error() mentions \"%s\"; it says \"%s\"", needle,
           msg ? msg : "(null)");
}

static void before_init(void) {
    EXPECT(strcmp(arma_last_error(), "") == 0, "no failure yet, but: %s", arma_last_error());
    EXPECT(arma_rank() == -1 && arma_size() == -1, "rank %d, size %d", arma_rank(), arma_size());
    int major = -1, minor = -1, patch = -1;
    CHECK(arma_version(&major, &minor, &patch));
    CHECK(arma_version(NULL, NULL, NULL));
    EXPECT(major >= 0 && minor >= 0 && patch >= 0, "version %d.%d.%d", major, minor, patch);

    char buf[8] = {0};
    uint64_t v;
    void *p;
    arma_handle_t h = {0};
    CHECK_RC(arma_put(0, 4096, buf, 8), ARMA_ERR_NOT_INITIALIZED);
    expect_message("arma_init");
    CHECK_RC(arma_get(0, 4096, buf, 8), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_fetch_add(0, 4096, 1, &v), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_barrier(), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_progress(), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_seg_alloc(64, &p), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_wait(&h), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_flush_all(), ARMA_ERR_NOT_INITIALIZED);
    CHECK_RC(arma_finalize(), ARMA_ERR_NOT_INITIALIZED);

    /* Every code has its own static text. */
    for (int c = ARMA_OK; c <= ARMA_ERR_RANK_FAILED; c++) {
        EXPECT(arma_strerror(c) && *arma_strerror(c), "text for code %d", c);
        for (int d = ARMA_OK; d < c; d++)
            EXPECT(strcmp(arma_strerror(c), arma_strerror(d)) != 0, "codes %d and %d share a text", c, d);
    }
    EXPECT(arma_strerror(-7) && arma_strerror(1000), "unknown codes get a text too");
}

static void bad_ranks(char *seg, uint64_t at) {
    char buf[8] = {0};
    uint64_t v;
    arma_handle_t h;
    CHECK_RC(arma_put(-1, at, buf, 8), ARMA_ERR_INVALID_RANK);
    expect_message("-1");
    CHECK_RC(arma_put(n, at, buf, 8), ARMA_ERR_INVALID_RANK);
    expect_message("invalid rank");
    CHECK_RC(arma_get(n, at, buf, 8), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_get_nb(-1, at, buf, 8, &h), ARMA_ERR_INVALID_RANK);
    EXPECT(h.opaque == 0, "a failed nb call leaves no handle");
    CHECK_RC(arma_wait(&h), ARMA_ERR_INVALID_HANDLE); /* nothing to wait for */
    CHECK_RC(arma_put_nbi(n, at, buf, 8), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_put(n, at, buf, 0), ARMA_ERR_INVALID_RANK); /* zero bytes, still a bad rank */
    CHECK_RC(arma_fetch_add(-1, at, 1, &v), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_cswap(n, at, 0, 1, &v), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_flush(-1), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_flush(n), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_seg_addr(seg, n, &v), ARMA_ERR_INVALID_RANK);
    CHECK_RC(arma_seg_addr(seg, -2, &v), ARMA_ERR_INVALID_RANK);
}

/* `priv_right` is a 100-byte read-write exposure on the right neighbour. */
static void not_exposed(uint64_t priv_right) {
    char buf[256] = {0}, hex[32];
    uint64_t v, bogus = 0x1000; /* the second page of the address space: never exposed */
    CHECK_RC(arma_put(right, bogus, buf, 8), ARMA_ERR_NOT_EXPOSED);
    snprintf(hex, sizeof hex, "%#" PRIx64, bogus);
    expect_message(hex);
    expect_message("not exposed");
    CHECK_RC(arma_get(right, bogus, buf, 8), ARMA_ERR_NOT_EXPOSED);
    CHECK_RC(arma_fetch_add(right, bogus, 1, &v), ARMA_ERR_NOT_EXPOSED);
    /* Private memory that the target did not expose (our own stack address, there). */
    uint64_t unexposed = (uint64_t)(uintptr_t)buf;
    CHECK_RC(arma_get(right, unexposed, buf, 8), ARMA_ERR_NOT_EXPOSED);
    snprintf(hex, sizeof hex, "%#" PRIx64, unexposed);
    expect_message(hex);
    /* Ranges that run past an exposure, by one byte or entirely outside it. */
    CHECK(arma_put(right, priv_right, buf, 100));
    CHECK_RC(arma_put(right, priv_right, buf, 101), ARMA_ERR_NOT_EXPOSED);
    CHECK_RC(arma_get(right, priv_right + 100, buf, 1), ARMA_ERR_NOT_EXPOSED);
    CHECK_RC(arma_put(right, priv_right - 1, buf, 2), ARMA_ERR_NOT_EXPOSED);
    /* An address range that wraps around. */
    CHECK_RC(arma_get(right, UINT64_MAX - 3, buf, 8), ARMA_ERR_NOT_EXPOSED);
}

/* `ro_right` is 64 bytes the right neighbour exposed read-only, filled with 'A' + its rank. */
static void read_only(uint64_t ro_right) {
    char buf[64] = {0};
    uint64_t v;
    CHECK_RC(arma_put(right, ro_right, buf, 8), ARMA_ERR_PROTECTION);
    expect_message("read-only");
    CHECK_RC(arma_put_nbi(right, ro_right + 8, buf, 1), ARMA_ERR_PROTECTION);
    CHECK_RC(arma_swap(right, ro_right, 1, &v), ARMA_ERR_PROTECTION);
    CHECK_RC(arma_fetch_add(right, ro_right, 1, &v), ARMA_ERR_PROTECTION);
    CHECK(arma_fetch(right, ro_right, &v)); /* a fetch is a read: allowed */
    EXPECT(v == 0x0101010101010101ULL * (uint64_t)('A' + right), "fetched %#llx", (unsigned long long)v);
    CHECK(arma_get(right, ro_right, buf, sizeof buf)); /* reading is allowed */
    for (size_t i = 0; i < sizeof buf; i++)
        EXPECT(buf[i] == 'A' + right, "read-only byte %zu is %d", i, buf[i]);
}

static void misaligned(uint64_t seg_right, uint64_t priv_right) {
    uint64_t v;
    CHECK_RC(arma_fetch_add(right, seg_right + 1, 1, &v), ARMA_ERR_MISALIGNED);
    expect_message("misaligned");
    CHECK_RC(arma_add(right, seg_right + 4, 1), ARMA_ERR_MISALIGNED);
    CHECK_RC(arma_swap(right, seg_right + 2, 1, &v), ARMA_ERR_MISALIGNED);
    CHECK_RC(arma_cswap(right, seg_right + 7, 0, 1, &v), ARMA_ERR_MISALIGNED);
    CHECK_RC(arma_fetch(right, seg_right + 3, &v), ARMA_ERR_MISALIGNED);
    CHECK_RC(arma_fetch(right, (priv_right | 7) - 3, &v), ARMA_ERR_MISALIGNED);
}

static void zero_length(uint64_t seg_right) {
    char buf[1] = {0};
    arma_handle_t h;
    CHECK(arma_put(right, seg_right, buf, 0));
    CHECK(arma_get(right, seg_right, buf, 0));
    CHECK(arma_put(right, seg_right, NULL, 0));
    CHECK(arma_get(right, seg_right, NULL, 0));
    CHECK(arma_put_nb(right, seg_right, NULL, 0, &h));
    CHECK(arma_wait(&h));
    CHECK(arma_get_nb(right, seg_right, NULL, 0, &h));
    CHECK(arma_wait(&h));
    CHECK(arma_put_nbi(right, seg_right, NULL, 0));
    CHECK(arma_get_nbi(right, 0x1000, NULL, 0)); /* touches nothing, so no address is checked */
    CHECK(arma_flush(right));
    char all[64];
    CHECK(arma_allgather(NULL, 0, all));
}

static void bad_arguments(char *seg, uint64_t seg_right) {
    char buf[8];
    uint64_t v;
    int done;
    void *p;
    arma_handle_t h = {0};
    arma_exposure_t e = {0, 0};
    CHECK_RC(arma_put(right, seg_right, NULL, 8), ARMA_ERR_INVALID_ARGUMENT);
    expect_message("NULL");
    CHECK_RC(arma_get(right, seg_right, NULL, 8), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_put_nb(right, seg_right, NULL, 1, &h), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_get_nbi(right, seg_right, NULL, 1), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_get(right, seg_right, buf, (size_t)-1), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_put_nb(right, seg_right, buf, 8, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_wait(NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_test(NULL, &done), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_test(&h, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_fetch(right, seg_right, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_seg_addr(seg, right, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_seg_addr(buf, right, &v), ARMA_ERR_INVALID_ARGUMENT); /* not in a segment */
    CHECK_RC(arma_seg_addr(seg + 4096, right, &v), ARMA_ERR_INVALID_ARGUMENT); /* one past the end */
    CHECK_RC(arma_expose(NULL, 8, ARMA_PROT_READ, &e), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_expose(buf, 8, 2, &e), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_expose(buf, 8, ARMA_PROT_READ, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_expose(buf, 0, ARMA_PROT_READ, &e), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_expose(seg, 64, ARMA_PROT_READ, &e), ARMA_ERR_INVALID_ARGUMENT); /* a segment */
    CHECK_RC(arma_unexpose(e), ARMA_ERR_INVALID_ARGUMENT); /* zeroed: never a live exposure */
    /* Collective calls that every rank gets wrong the same way fail before communicating. */
    CHECK_RC(arma_seg_alloc(64, NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_seg_free(buf), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_seg_free(NULL), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_allgather(NULL, 8, buf), ARMA_ERR_INVALID_ARGUMENT);
    CHECK_RC(arma_seg_alloc(0, &p), ARMA_ERR_INVALID_ARGUMENT);
}

/* arma_wait / arma_test accept only handles of outstanding operations: never issued (zeroed),
 * completed (waited, or tested done) and copies of completed ones, and garbage are refused. */
static void bad_handles(uint64_t seg_right) {
    char buf[8] = {0};
    int done = 7;
    arma_handle_t h = {0}, copy;
    CHECK_RC(arma_wait(&h), ARMA_ERR_INVALID_HANDLE);
    expect_message("never filled");
    CHECK_RC(arma_test(&h, &done), ARMA_ERR_INVALID_HANDLE);
    EXPECT(done == 7, "a refused arma_test leaves *done alone");
    CHECK(arma_put_nb(right, seg_right, buf, 8, &h));
    copy = h;
    CHECK(arma_wait(&h));
    EXPECT(h.opaque == 0, "arma_wait zeroes the handle");
    CHECK_RC(arma_wait(&h), ARMA_ERR_INVALID_HANDLE); /* waited twice */
    CHECK_RC(arma_wait(&copy), ARMA_ERR_INVALID_HANDLE); /* a copy of the completed handle */
    expect_message("already completed");
    CHECK(arma_get_nb(right, seg_right, buf, 8, &h)); /* may reuse the freed slot */
    CHECK_RC(arma_test(&copy, &done), ARMA_ERR_INVALID_HANDLE); /* ...the old copy stays invalid */
    copy = h;
    do
        CHECK(arma_test(&h, &done));
    while (!done);
    CHECK_RC(arma_test(&copy, &done), ARMA_ERR_INVALID_HANDLE); /* tested done: completed */
    arma_handle_t forged = {0xdeadbeefcafef00dULL};
    CHECK_RC(arma_wait(&forged), ARMA_ERR_INVALID_HANDLE);
    forged.opaque = ~(uint64_t)0;
    CHECK_RC(arma_test(&forged, &done), ARMA_ERR_INVALID_HANDLE);
}

static void after_finalize(uint64_t seg_right) {
    char buf[8] = {0};
    uint64_t v;
    void *p;
    arma_handle_t h = {0};
    CHECK_RC(arma_put(right, seg_right, buf, 8), ARMA_ERR_FINALIZED);
    expect_message("finalize");
    CHECK_RC(arma_get(right, seg_right, buf, 8), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_put_nbi(right, seg_right, buf, 8), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_fetch_add(right, seg_right, 1, &v), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_barrier(), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_progress(), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_seg_alloc(64, &p), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_wait(&h), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_flush_all(), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_fence(), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_finalize(), ARMA_ERR_FINALIZED);
    CHECK_RC(arma_init(), ARMA_ERR_FINALIZED);
    EXPECT(arma_rank() == me && arma_size() == n, "rank and size still answer after finalize");
}

int main(void) {
    before_init();
    CHECK(arma_init());
    CHECK(arma_init()); /* a second call is a no-op */
    me = arma_rank();
    n = arma_size();
    right = (me + 1) % n;

    void *mem;
    CHECK(arma_seg_alloc(4096, &mem));
    char *seg = mem;
    uint64_t seg_right;
    CHECK(arma_seg_addr(seg, right, &seg_right));

    /* A read-write and a read-only exposure on every rank; everyone learns the addresses. */
    char *priv = calloc(1, 100), *ro = malloc(64);
    EXPECT(priv && ro, "malloc");
    memset(ro, 'A' + me, 64);
    arma_exposure_t ep, er;
    CHECK(arma_expose(priv, 100, ARMA_PROT_READ_WRITE, &ep));
    CHECK(arma_expose(ro, 64, ARMA_PROT_READ, &er));
    CHECK_RC(arma_expose(priv + 50, 10, ARMA_PROT_READ, &er), ARMA_ERR_INVALID_ARGUMENT); /* overlap */
    uint64_t mine[2] = {ep.addr, er.addr}, *all = malloc((size_t)n * sizeof mine);
    EXPECT(all != NULL, "malloc");
    CHECK(arma_allgather(mine, sizeof mine, all));
    uint64_t priv_right = all[2 * right], ro_right = all[2 * right + 1];

    bad_ranks(seg, seg_right);
    not_exposed(priv_right);
    read_only(ro_right);
    misaligned(seg_right, priv_right);
    zero_length(seg_right);
    bad_arguments(seg, seg_right);
    bad_handles(seg_right);

    CHECK(arma_barrier()); /* nobody touches the exposures any more */
    CHECK(arma_unexpose(ep));
    CHECK_RC(arma_unexpose(ep), ARMA_ERR_INVALID_ARGUMENT); /* twice */
    CHECK(arma_unexpose(er));
    CHECK(arma_seg_free(seg));
    CHECK(arma_finalize());
    after_finalize(seg_right);
    free(all);
    free(priv);
    free(ro);
    if (me == 0)
        printf("test_errors: all checks passed on %d ranks\n", n);
    return 0;
}
