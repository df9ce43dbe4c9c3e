/* screen_neon.c - the lm_head screening kernel (the screen: src/engine/lm_screen.h; the scalar references
 * rc_screen_i8_ref and rc_screen_norms_ref: simd/ops.c) for NEON (aarch64 only; empty of code elsewhere).
 * The same bits as rc_screen_i8_ref: each 64-column group's int32 sum is exact for every byte of q and p
 * (vmull_s8 products of at most 128 * 128 in int16, pairwise-accumulated into int32 by vpadalq), and the
 * fp32 part is the reference's scalar lane rule and tree. */
#include "kernels.h"

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

/* rc_screen_norms_ref: the 8 double lanes are four q registers (columns % 8 in pairs) */
static void neon_screen_norms(const float *w, const int8_t *q, const float *s, size_t H, double *ss) {
    float64x2_t dd[4], aa[4];
    for (int j = 0; j < 4; j++) dd[j] = aa[j] = vdupq_n_f64(0.0);
    for (size_t c = 0; c < H; c += RC_SCREEN_GROUP) {
        const float64x2_t sv = vdupq_n_f64((double)s[c / RC_SCREEN_GROUP]);
        for (size_t i = c; i < c + RC_SCREEN_GROUP; i += 8) {
            const int16x8_t q16 = vmovl_s8(vld1_s8(q + i));
            const int32x4_t q32[2] = {vmovl_s16(vget_low_s16(q16)), vmovl_high_s16(q16)};
            for (int j = 0; j < 4; j++) {
                const int64x2_t q64 = j % 2 ? vmovl_high_s32(q32[j / 2]) : vmovl_s32(vget_low_s32(q32[j / 2]));
                const float64x2_t a = vmulq_f64(sv, vcvtq_f64_s64(q64));
                const float64x2_t d = vsubq_f64(vcvt_f64_f32(vld1_f32(w + i + 2 * j)), a);
                dd[j] = vaddq_f64(dd[j], vmulq_f64(d, d));
                aa[j] = vaddq_f64(aa[j], vmulq_f64(a, a));
            }
        }
    }
    double l[16];
    for (int j = 0; j < 4; j++) {
        vst1q_f64(l + 2 * j, dd[j]);
        vst1q_f64(l + 8 + 2 * j, aa[j]);
    }
    rc_screen_norms_tree(l, ss);
}

RC_INSTALL_SCREEN(rc_screen_neon, neon)

#else

RC_KERNELS_ABSENT(rc_screen_neon)

#endif
