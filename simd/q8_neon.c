/* q8_neon.c - the q8 profile's kernels (src/q8.h) for NEON. Placeholder: the scalar kernels stay. */
#include "simd.h"

int rc_q8_neon(rc_kernels *k) {
    (void)k;
    return 1;
}
