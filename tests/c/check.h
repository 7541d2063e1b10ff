/* Assertions for the C tests: a failure names the rank, the line, the call and the runtime's
 * own message, then exits non-zero so the launcher tears the job down. */
#ifndef ARMA_TEST_CHECK_H
#define ARMA_TEST_CHECK_H

#include <activerma.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAILF(...)                                                                                 \
    do {                                                                                           \
        fprintf(stderr, "rank %d: %s:%d: ", arma_rank(), __FILE__, __LINE__);                      \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

/* The call must succeed. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != ARMA_OK)                                                                        \
            FAILF("%s returned %d (%s): %s", #call, rc_, arma_strerror(rc_), arma_last_error());   \
    } while (0)

/* The call must fail with exactly `code`. */
#define CHECK_RC(call, code)                                                                       \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != (code))                                                                         \
            FAILF("%s returned %d (%s), expected %d (%s); last error: %s", #call, rc_,             \
                  arma_strerror(rc_), (code), arma_strerror(code), arma_last_error());             \
    } while (0)

/* The condition must hold; the message (printf format and arguments) says what was seen. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: expected %s: ", arma_rank(), __FILE__, __LINE__,      \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
