/* The C example: every rank puts a greeting into its right neighbour's segment, gets from its
 * left neighbour's, takes a ticket from a counter on rank 0, and meets the others at a barrier.
 *
 *   cc hello.c $(pkg-config --cflags --libs activerma) -o hello
 *   activerma run -n 4 --label -- ./hello
 */
#include <activerma.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* Every arma_* call returns a status; arma_last_error() says what went wrong and where. */
#define ARMA(call)                                                                                 \
    do {                                                                                           \
        if ((call) != ARMA_OK) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s\n", arma_rank(), #call, arma_last_error());   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void) {
    ARMA(arma_init());
    int me = arma_rank(), n = arma_size();
    int right = (me + 1) % n, left = (me + n - 1) % n;

    /* A segment: the same size on every rank, reachable by all of them. */
    void *mem;
    ARMA(arma_seg_alloc(4096, &mem));
    char *seg = mem;

    /* put: my greeting lands in my right neighbour's segment at offset 0. */
    char msg[64] = {0};
    snprintf(msg, sizeof msg, "hello from rank %d", me);
    uint64_t right_seg;
    ARMA(arma_seg_addr(seg, right, &right_seg));
    ARMA(arma_put(right, right_seg, msg, sizeof msg));
    ARMA(arma_barrier()); /* everyone's put has landed */
    printf("put: rank %d found in its segment: \"%s\"\n", me, seg);

    /* get: read my left neighbour's segment (it holds what its own left neighbour sent). */
    char fetched[64];
    uint64_t left_seg;
    ARMA(arma_seg_addr(seg, left, &left_seg));
    ARMA(arma_get(left, left_seg, fetched, sizeof fetched));
    printf("get: rank %d read rank %d's segment: \"%s\"\n", me, left, fetched);

    /* atomics: everyone takes a ticket from the counter at offset 1024 of rank 0's segment. */
    uint64_t counter, ticket, total;
    ARMA(arma_seg_addr(seg + 1024, 0, &counter));
    ARMA(arma_fetch_add(0, counter, 1, &ticket));
    ARMA(arma_barrier());
    ARMA(arma_fetch(0, counter, &total));
    printf("atomic: rank %d drew ticket %" PRIu64 "; the counter on rank 0 now reads %" PRIu64 "\n",
           me, ticket, total);

    ARMA(arma_barrier());
    if (me == 0)
        printf("barrier: all %d ranks passed\n", n);
    ARMA(arma_seg_free(seg));
    ARMA(arma_finalize());
    return total == (uint64_t)n ? 0 : 1;
}
