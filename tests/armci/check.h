/* Assertions for the ARMCI C tests: a failure names the rank and the line, then exits
 * non-zero so the launcher ends the job. */
#ifndef ARMCI_TEST_CHECK_H
#define ARMCI_TEST_CHECK_H

#include <armci.h>
#include <message.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: expected %s: ", armci_msg_me(), __FILE__, __LINE__,   \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
