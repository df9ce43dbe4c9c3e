/* act_neon.c - NEON activations and softmax (aarch64 only; empty of code elsewhere), bitwise
 * equal to the scalar reference (simd/ops.c):
 *   silu_mul: g[i] = (g[i] / (1 + rc_expf(-g[i]))) * u[i]          (qwen2 MLP, [rows*ffn])
 *   gelu    : x[i] = (x[i] * 0.5f) * (1 + rc_erff(x[i] * 1/sqrt2))  (bert / pooler FFN)
 *   softmax : in place over one attention row s[n]
 *   sincos  : rc_sincosf over an array (the pooler's positional encoding), in double as the reference
 * The same operation sequence as the scalar code (see act_avx512.c); vfmaq is one rounding
 * (fmaf / fma), vcvtq_s32_f32 truncates as the C cast does. rc_erff runs in float64x2 with the
 * coefficients of each lane's interval loaded from the table.
 */
#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#define AINLINE static inline __attribute__((always_inline))

/* rc_expf on 4 lanes */
AINLINE float32x4_t exp4(float32x4_t x) {
    const float32x4_t zero = vdupq_n_f32(0.0f), half = vdupq_n_f32(0.5f);
    const float32x4_t t = vmulq_f32(x, vdupq_n_f32(1.44269502162933349609375f));
    const float32x4_t h = vbslq_f32(vcgeq_f32(t, zero), vaddq_f32(t, half), vsubq_f32(t, half));
    const int32x4_t k = vcvtq_s32_f32(h);
    const float32x4_t kf = vcvtq_f32_s32(k);
    float32x4_t r = vfmsq_f32(x, kf, vdupq_n_f32(0.693145751953125f)); /* x - kf*c, one rounding */
    r = vfmsq_f32(r, kf, vdupq_n_f32(1.428606765330187045e-06f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(half, p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t k1 = vshrq_n_s32(vaddq_s32(k, vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(k), 31))), 1);
    const int32x4_t k2 = vsubq_s32(k, k1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
    float32x4_t y = vmulq_f32(vmulq_f32(p, s1), s2);
    y = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.72283935546875f)), vdupq_n_f32(__builtin_inff()), y);
    y = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-103.97208404541015625f)), zero, y);
    return vbslq_f32(vceqq_f32(x, x), y, x);
}

/* rc_erff's polynomial on 2 lanes in double: a = |x| < 4 */
AINLINE float32x2_t erf_poly2(float32x2_t af) {
    const float64x2_t a = vcvt_f64_f32(af);
    const float64x2_t amin = vminq_f64(a, vdupq_n_f64(3.75));
    const int64x2_t i = vcvtq_s64_f64(vmulq_f64(amin, vdupq_n_f64(2.0)));
    const int i0 = (int)vgetq_lane_s64(i, 0), i1 = (int)vgetq_lane_s64(i, 1);
    const uint64x2_t first = vceqq_s64(i, vdupq_n_s64(0));
    const float64x2_t centre = vaddq_f64(vmulq_f64(vcvtq_f64_s64(i), vdupq_n_f64(0.5)), vdupq_n_f64(0.25));
    const float64x2_t t = vbslq_f64(first, vmulq_f64(a, a), vsubq_f64(a, centre));
    float64x2_t p = vcombine_f64(vld1_f64(&rc_erf_coef[RC_ERF_DEG][i0]), vld1_f64(&rc_erf_coef[RC_ERF_DEG][i1]));
    for (int j = RC_ERF_DEG - 1; j >= 0; j--)
        p = vfmaq_f64(vcombine_f64(vld1_f64(&rc_erf_coef[j][i0]), vld1_f64(&rc_erf_coef[j][i1])), p, t);
    p = vbslq_f64(first, vmulq_f64(p, a), p);
    return vcvt_f32_f64(p);
}

/* rc_erff on 4 lanes */
AINLINE float32x4_t erf4(float32x4_t x) {
    const uint32x4_t signbit = vdupq_n_u32(0x80000000u);
    const float32x4_t a = vabsq_f32(x);
    float32x4_t r = vcombine_f32(erf_poly2(vget_low_f32(a)), erf_poly2(vget_high_f32(a)));
    r = vbslq_f32(vcgeq_f32(a, vdupq_n_f32(4.0f)), vdupq_n_f32(1.0f), r);
    r = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(r), vandq_u32(signbit, vreinterpretq_u32_f32(x))));
    return vbslq_f32(vceqq_f32(x, x), r, x);
}

static void neon_silu_mul(float *g, const float *u, size_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t e = exp4(vnegq_f32(x));
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(x, vaddq_f32(one, e)), vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

static void neon_gelu(float *x, size_t n) {
    const float32x4_t half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
    const float32x4_t rsqrt2 = vdupq_n_f32(0.707106781186547524f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t e = erf4(vmulq_f32(v, rsqrt2));
        vst1q_f32(x + i, vmulq_f32(vmulq_f32(v, half), vaddq_f32(one, e)));
    }
    for (; i < n; i++) x[i] = rc_gelu(x[i]);
}

static void neon_softmax(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    const float32x4_t mv = vdupq_n_f32(m);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 4; q++) {
            const float32x4_t e = exp4(vsubq_f32(vld1q_f32(s + i + 4 * q), mv));
            vst1q_f32(s + i + 4 * q, e);
            acc[q] = vaddq_f32(acc[q], e);
        }
    float lanes[16];
    for (int q = 0; q < 4; q++) vst1q_f32(lanes + 4 * q, acc[q]);
    const float sum = rc_softmax_tail(s, i, n, m, lanes);
    const float32x4_t sv = vdupq_n_f32(sum);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(s + i, vdivq_f32(vld1q_f32(s + i), sv));
    for (; i < n; i++) s[i] = s[i] / sum;
}

/* rc_sincosf's double core on 2 lanes, as sincos8 in act_avx512.c (no fma: vmulq/vsubq round
 * separately; vrndq truncates, vrndmq floors; lanes finite with |x| < 2^30, checked by the caller). */
AINLINE float32x2_t sincos2(float32x2_t xf, float32x2_t *cf) {
    const float64x2_t x = vcvt_f64_f32(xf), half = vdupq_n_f64(0.5), one = vdupq_n_f64(1.0);
    const float64x2_t t = vmulq_f64(x, vdupq_n_f64(6.36619772367581382433e-01));
    const float64x2_t h = vbslq_f64(vcgeq_f64(t, vdupq_n_f64(0.0)), vaddq_f64(t, half), vsubq_f64(t, half));
    const float64x2_t kd = vrndq_f64(h);
    float64x2_t r = vsubq_f64(x, vmulq_f64(kd, vdupq_n_f64(1.57079632673412561417e+00)));
    r = vsubq_f64(r, vmulq_f64(kd, vdupq_n_f64(6.07710050630396597660e-11)));
    r = vsubq_f64(r, vmulq_f64(kd, vdupq_n_f64(2.02226624879595063154e-21)));
    const float64x2_t r2 = vmulq_f64(r, r);
    float64x2_t ts = r, ps = r, tc = one, pc = one;
    for (int i = 1; i <= 10; i++) {
        ts = vdivq_f64(vmulq_f64(vnegq_f64(ts), r2), vdupq_n_f64((double)((2 * i) * (2 * i + 1))));
        ps = vaddq_f64(ps, ts);
        tc = vdivq_f64(vmulq_f64(vnegq_f64(tc), r2), vdupq_n_f64((double)((2 * i - 1) * (2 * i))));
        pc = vaddq_f64(pc, tc);
    }
    const float64x2_t q = vsubq_f64(kd, vmulq_f64(vrndmq_f64(vmulq_f64(kd, vdupq_n_f64(0.25))), vdupq_n_f64(4.0)));
    const uint64x2_t q1 = vceqq_f64(q, one), q2 = vceqq_f64(q, vdupq_n_f64(2.0)), q3 = vceqq_f64(q, vdupq_n_f64(3.0));
    const float64x2_t nps = vnegq_f64(ps), npc = vnegq_f64(pc);
    const float64x2_t s = vbslq_f64(q3, npc, vbslq_f64(q2, nps, vbslq_f64(q1, pc, ps)));
    const float64x2_t c = vbslq_f64(q3, ps, vbslq_f64(q2, npc, vbslq_f64(q1, nps, pc)));
    *cf = vcvt_f32_f64(c);
    return vcvt_f32_f64(s);
}

static void neon_sincos(const float *x, float *s, float *c, size_t n) {
    const float32x4_t lim = vdupq_n_f32(1073741824.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i); /* |v| < 2^30 in every lane; NaN compares false */
        if (vminvq_u32(vcltq_f32(vabsq_f32(v), lim)) == 0) {
            rc_sincos_f32(x + i, s + i, c + i, 4);
            continue;
        }
        float32x2_t c0, c1; /* two independent halves: twice the division chains in flight */
        const float32x2_t s0 = sincos2(vget_low_f32(v), &c0), s1 = sincos2(vget_high_f32(v), &c1);
        vst1q_f32(s + i, vcombine_f32(s0, s1));
        vst1q_f32(c + i, vcombine_f32(c0, c1));
    }
    rc_sincos_f32(x + i, s + i, c + i, n - i);
}

RC_INSTALL_ACT(rc_act_neon, neon)

#else

RC_KERNELS_ABSENT(rc_act_neon)

#endif
