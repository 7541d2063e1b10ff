/* A rank that dies and is replaced (run with `activerma run --respawn 1`): rank 1 kills itself
 * after a barrier; the survivors get ARMA_ERR_RANK_FAILED naming it from a put and from a
 * barrier, wait for it, and the job goes on with the replacement: its segment holds what was
 * put there before the death, and puts and atomics reach it again. */
#include "check.h"

#include <signal.h>
#include <unistd.h>

enum { VICTIM = 1, LEN = 4096 };

int main(void) {
    CHECK(arma_init());
    int me = arma_rank(), n = arma_size();
    unsigned char *seg;
    CHECK(arma_seg_alloc(2 * LEN, (void **)&seg));
    uint64_t at_victim, counter;
    CHECK(arma_seg_addr(seg, VICTIM, &at_victim));
    CHECK(arma_seg_addr(seg + LEN, VICTIM, &counter));
    int inc = arma_incarnation();
    if (me == VICTIM && inc > 0) {
        EXPECT(inc == 1, "the replacement is incarnation %d", inc);
        CHECK_RC(arma_barrier(), ARMA_ERR_INVALID_ARGUMENT); /* not before arma_rejoin */
        EXPECT(seg[0] == 0x5a && seg[LEN - 1] == 0x5a, "the segment lost what rank 0 put: %#x", seg[0]);
        CHECK(arma_rejoin());
    } else {
        EXPECT(inc == 0, "rank %d was replaced", me);
        if (me == 0) {
            unsigned char b[LEN];
            memset(b, 0x5a, sizeof b);
            CHECK(arma_put(VICTIM, at_victim, b, sizeof b));
        }
        CHECK(arma_barrier());
        if (me == VICTIM)
            kill(getpid(), SIGKILL);
        /* Until the launcher has seen the death, puts still land: poll with a harmless one. */
        int rc;
        uint64_t one = 1;
        for (int i = 0; (rc = arma_put(VICTIM, counter + 8 + 8 * (uint64_t)me, &one, 8)) == ARMA_OK && i < 20000; i++)
            usleep(1000);
        CHECK_RC(rc, ARMA_ERR_RANK_FAILED);
        EXPECT(arma_failed_rank() == VICTIM, "arma_failed_rank() = %d", arma_failed_rank());
        CHECK_RC(arma_barrier(), ARMA_ERR_RANK_FAILED);
        int back = -1;
        CHECK(arma_wait_for_rank(VICTIM, &back));
        EXPECT(back == 1, "arma_wait_for_rank gave incarnation %d", back);
    }
    CHECK(arma_barrier());
    CHECK(arma_add(VICTIM, counter, 1));
    CHECK(arma_barrier());
    uint64_t total;
    CHECK(arma_fetch(VICTIM, counter, &total));
    EXPECT(total == (uint64_t)n, "the counter on the replacement holds %" PRIu64 ", expected %d", total, n);
    CHECK(arma_barrier());
    CHECK(arma_finalize());
    return 0;
}
