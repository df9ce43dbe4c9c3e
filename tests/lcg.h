/* lcg.h - the tests' pseudo-random numbers: a 64-bit linear congruential generator (Knuth's MMIX
 * constants), the high 32 bits of each step. Fixed seeds give the same cases on every host, so a
 * failing case can be replayed. Header-only: the kernel self-test is also built alone. */
#ifndef RECALL_TESTS_LCG_H
#define RECALL_TESTS_LCG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} lcg;

static inline uint32_t next_u32(lcg *g) {
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g->s >> 32);
}

#endif
