/* act_avx2.c - AVX2+FMA activations and softmax (x86-64; compiled with the flags of
 * kernels_avx2.c, empty of code elsewhere), bitwise equal to the scalar reference (simd/ops.c):
 *   silu_mul: g[i] = (g[i] / (1 + rc_expf(-g[i]))) * u[i]          (qwen2 MLP, [rows*ffn])
 *   gelu    : x[i] = (x[i] * 0.5f) * (1 + rc_erff(x[i] * 1/sqrt2))  (bert / pooler FFN)
 *   softmax : in place over one attention row s[n]
 *   sincos  : rc_sincosf over an array (the pooler's positional encoding), in double as the reference
 * The same operation sequence as the scalar code (see act_avx512.c). rc_erff's 8-entry
 * coefficient rows are looked up per double lane with two vpermps over the row seen as 16
 * floats (entries 0-3 / 4-7) and a blend: exact copies, no arithmetic.
 */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#define AINLINE static inline __attribute__((always_inline))

/* rc_expf on 8 lanes */
AINLINE __m256 exp8(__m256 x) {
    const __m256 zero = _mm256_setzero_ps(), half = _mm256_set1_ps(0.5f);
    const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609375f));
    const __m256 nonneg = _mm256_cmp_ps(t, zero, _CMP_GE_OQ);
    const __m256 h = _mm256_blendv_ps(_mm256_sub_ps(t, half), _mm256_add_ps(t, half), nonneg);
    const __m256i k = _mm256_cvttps_epi32(h);
    const __m256 kf = _mm256_cvtepi32_ps(k);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, half);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(k, _mm256_srli_epi32(k, 31)), 1);
    const __m256i k2 = _mm256_sub_epi32(k, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()),
                         _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, zero, _mm256_cmp_ps(x, _mm256_set1_ps(-103.97208404541015625f), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* rc_erff's polynomial on 4 lanes in double: a = |x| < 4 */
AINLINE __m128 erf_poly4(__m128 af) {
    const __m256d a = _mm256_cvtps_pd(af);
    const __m128i i = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_min_pd(a, _mm256_set1_pd(3.75)), _mm256_set1_pd(2.0)));
    /* float-pair indices 2(i&3), 2(i&3)+1 into a row half; high half for i >= 4 */
    const __m256i i64 = _mm256_cvtepi32_epi64(i);
    const __m256i lo2 = _mm256_slli_epi64(_mm256_and_si256(i64, _mm256_set1_epi64x(3)), 1);
    const __m256i pair = _mm256_or_si256(lo2, _mm256_slli_epi64(_mm256_add_epi64(lo2, _mm256_set1_epi64x(1)), 32));
    const __m256d upper = _mm256_castsi256_pd(_mm256_cmpgt_epi64(i64, _mm256_set1_epi64x(3)));
    const __m256d first = _mm256_castsi256_pd(_mm256_cmpeq_epi64(i64, _mm256_setzero_si256()));
    const __m256d centre = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(i), _mm256_set1_pd(0.5)), _mm256_set1_pd(0.25));
    const __m256d t = _mm256_blendv_pd(_mm256_sub_pd(a, centre), _mm256_mul_pd(a, a), first);
#define COEF(j)                                                                                                \
    _mm256_blendv_pd(_mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)rc_erf_coef[j]), pair)), \
                     _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)rc_erf_coef[j] + 8), pair)), \
                     upper)
    __m256d p = COEF(RC_ERF_DEG);
    for (int j = RC_ERF_DEG - 1; j >= 0; j--) p = _mm256_fmadd_pd(p, t, COEF(j));
#undef COEF
    p = _mm256_blendv_pd(p, _mm256_mul_pd(p, a), first);
    return _mm256_cvtpd_ps(p);
}

/* rc_erff on 8 lanes */
AINLINE __m256 erf8(__m256 x) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    const __m256 a = _mm256_andnot_ps(signbit, x);
    __m256 r = _mm256_set_m128(erf_poly4(_mm256_extractf128_ps(a, 1)), erf_poly4(_mm256_castps256_ps128(a)));
    r = _mm256_blendv_ps(r, _mm256_set1_ps(1.0f), _mm256_cmp_ps(a, _mm256_set1_ps(4.0f), _CMP_GE_OQ));
    r = _mm256_or_ps(r, _mm256_and_ps(signbit, x));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static void avx2_silu_mul(float *g, const float *u, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), signbit = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp8(_mm256_xor_ps(x, signbit));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

static void avx2_gelu(float *x, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 rsqrt2 = _mm256_set1_ps(0.707106781186547524f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = erf8(_mm256_mul_ps(v, rsqrt2));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_mul_ps(v, half), _mm256_add_ps(one, e)));
    }
    for (; i < n; i++) x[i] = rc_gelu(x[i]);
}

static void avx2_softmax(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(); /* canonical lanes 0-7, 8-15 */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
        const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i + 8), mv));
        _mm256_storeu_ps(s + i, e0);
        _mm256_storeu_ps(s + i + 8, e1);
        acc0 = _mm256_add_ps(acc0, e0);
        acc1 = _mm256_add_ps(acc1, e1);
    }
    float lanes[16];
    _mm256_storeu_ps(lanes, acc0);
    _mm256_storeu_ps(lanes + 8, acc1);
    const float sum = rc_softmax_tail(s, i, n, m, lanes);
    const __m256 sv = _mm256_set1_ps(sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_div_ps(_mm256_loadu_ps(s + i), sv));
    for (; i < n; i++) s[i] = s[i] / sum;
}

/* rc_sincosf's double core on 4 lanes, as sincos8 in act_avx512.c (no fma; lanes finite with
 * |x| < 2^30, checked by the caller). */
AINLINE __m128 sincos4(__m128 xf, __m128 *cf) {
    const __m256d x = _mm256_cvtps_pd(xf), half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0);
    const __m256d t = _mm256_mul_pd(x, _mm256_set1_pd(6.36619772367581382433e-01));
    const __m256d nonneg = _mm256_cmp_pd(t, _mm256_setzero_pd(), _CMP_GE_OQ);
    const __m256d h = _mm256_blendv_pd(_mm256_sub_pd(t, half), _mm256_add_pd(t, half), nonneg);
    const __m256d kd = _mm256_round_pd(h, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_sub_pd(x, _mm256_mul_pd(kd, _mm256_set1_pd(1.57079632673412561417e+00)));
    r = _mm256_sub_pd(r, _mm256_mul_pd(kd, _mm256_set1_pd(6.07710050630396597660e-11)));
    r = _mm256_sub_pd(r, _mm256_mul_pd(kd, _mm256_set1_pd(2.02226624879595063154e-21)));
    const __m256d r2 = _mm256_mul_pd(r, r), sign = _mm256_set1_pd(-0.0);
    __m256d ts = r, ps = r, tc = one, pc = one;
    for (int i = 1; i <= 10; i++) {
        ts = _mm256_div_pd(_mm256_mul_pd(_mm256_xor_pd(ts, sign), r2), _mm256_set1_pd((double)((2 * i) * (2 * i + 1))));
        ps = _mm256_add_pd(ps, ts);
        tc = _mm256_div_pd(_mm256_mul_pd(_mm256_xor_pd(tc, sign), r2), _mm256_set1_pd((double)((2 * i - 1) * (2 * i))));
        pc = _mm256_add_pd(pc, tc);
    }
    const __m256d fl = _mm256_round_pd(_mm256_mul_pd(kd, _mm256_set1_pd(0.25)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256d q = _mm256_sub_pd(kd, _mm256_mul_pd(fl, _mm256_set1_pd(4.0)));
    const __m256d q1 = _mm256_cmp_pd(q, one, _CMP_EQ_OQ), q2 = _mm256_cmp_pd(q, _mm256_set1_pd(2.0), _CMP_EQ_OQ),
                  q3 = _mm256_cmp_pd(q, _mm256_set1_pd(3.0), _CMP_EQ_OQ);
    const __m256d nps = _mm256_xor_pd(ps, sign), npc = _mm256_xor_pd(pc, sign);
    const __m256d s = _mm256_blendv_pd(_mm256_blendv_pd(_mm256_blendv_pd(ps, pc, q1), nps, q2), npc, q3);
    const __m256d c = _mm256_blendv_pd(_mm256_blendv_pd(_mm256_blendv_pd(pc, nps, q1), npc, q2), ps, q3);
    *cf = _mm256_cvtpd_ps(c);
    return _mm256_cvtpd_ps(s);
}

static void avx2_sincos(const float *x, float *s, float *c, size_t n) {
    const __m256 lim = _mm256_set1_ps(1073741824.0f), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i); /* |v| < 2^30 in every lane; NaN compares false */
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v, absmask), lim, _CMP_LT_OQ)) != 0xff) {
            rc_sincos_f32(x + i, s + i, c + i, 8);
            continue;
        }
        __m128 c0, c1; /* two independent halves: twice the division chains in flight */
        const __m128 s0 = sincos4(_mm256_castps256_ps128(v), &c0), s1 = sincos4(_mm256_extractf128_ps(v, 1), &c1);
        _mm256_storeu_ps(s + i, _mm256_set_m128(s1, s0));
        _mm256_storeu_ps(c + i, _mm256_set_m128(c1, c0));
    }
    rc_sincos_f32(x + i, s + i, c + i, n - i);
}

RC_INSTALL_ACT(rc_act_avx2, avx2)

#else

RC_KERNELS_ABSENT(rc_act_avx2)

#endif
