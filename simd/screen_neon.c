/* screen_neon.c - the lm_head screening kernel (the screen: src/lm_screen.h; the scalar reference
 * rc_screen_i8_ref: src/ops.c) for NEON (aarch64 only; empty of code elsewhere). The same bits as
 * rc_screen_i8_ref: each 64-column group's int32 sum is exact (vmull_s8 products of at most 127 *
 * 127 in int16, pairwise-accumulated into int32 by vpadalq), and the fp32 part is the reference's
 * scalar lane rule and tree. */
#include "simd.h"

#if defined(__aarch64__) && defined(__ARM_NEON)


#include <arm_neon.h>
#include <math.h>

static void neon_screen_i8(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                           int64_t r1, float *A) {
    const size_t G = H / RC_SCREEN_GROUP;
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *qr = Q + (size_t)r * H;
        float acc[16] = {0};
        for (size_t g = 0; g < G; g++) {
            const size_t c = g * RC_SCREEN_GROUP;
            int32x4_t s = vdupq_n_s32(0);
            for (size_t i = 0; i < RC_SCREEN_GROUP; i += 16) {
                const int8x16_t q = vld1q_s8(qr + c + i), x = vld1q_s8(p + c + i);
                s = vpadalq_s16(s, vmull_s8(vget_low_s8(q), vget_low_s8(x)));
                s = vpadalq_s16(s, vmull_high_s8(q, x));
            }
            const float cg = S[(size_t)r * G + g] * t[g];
            acc[g % 16] = fmaf((float)vaddvq_s32(s), cg, acc[g % 16]);
        }
        A[r - r0] = rc_tree16(acc);
    }
}

int rc_screen_neon(rc_kernels *k) {
    k->screen_i8 = neon_screen_i8;
    return 1;
}

#else

int rc_screen_neon(rc_kernels *k) {
    (void)k;
    return 0;
}

#endif
