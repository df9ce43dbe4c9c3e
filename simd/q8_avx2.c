/* q8_avx2.c - the q8 profile's kernels (src/q8.h) for AVX2 (x86-64). Placeholder: the scalar
 * kernels stay installed. */
#include "simd.h"

#ifdef RC_Q8_AVXVNNI
#define RC_Q8_AVX2_FN rc_q8_avxvnni
#else
#define RC_Q8_AVX2_FN rc_q8_avx2
#endif

int RC_Q8_AVX2_FN(rc_kernels *k) {
    (void)k;
    return 1;
}
