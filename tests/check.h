/* check.h - the checks of the standalone test programs (api_example.c, abi_v1.c), which cannot
 * use Criterion (they are a user's program, built against the public header only): CHECK counts
 * passed and failed checks and prints each failure with its place. */
#ifndef RECALL_TEST_CHECK_H
#define RECALL_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;
#define CHECK(cond, ...)                                                                                 \
    do {                                                                                                 \
        if (cond) passed++;                                                                              \
        else {                                                                                           \
            failed++;                                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
            fprintf(stderr, __VA_ARGS__);                                                                \
            fputc('\n', stderr);                                                                         \
        }                                                                                                \
    } while (0)

#endif
