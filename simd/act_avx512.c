/* act_avx512.c - AVX-512F activations and softmax (x86-64; compiled with the flags of
 * kernels_avx512.c, empty of code elsewhere), bitwise equal to the scalar reference (simd/ops.c):
 *   silu_mul: g[i] = (g[i] / (1 + rc_expf(-g[i]))) * u[i]          (qwen2 MLP, [rows*ffn])
 *   gelu    : x[i] = (x[i] * 0.5f) * (1 + rc_erff(x[i] * 1/sqrt2))  (bert / pooler FFN)
 *   softmax : in place over one attention row s[n]
 *   sincos  : rc_sincosf over an array (the pooler's positional encoding), in double as the reference
 * Each vector function repeats the scalar sequence operation for operation: the same float
 * constants, the same rounding steps, fma where the reference writes fmaf/fma, and the scalar
 * special cases (NaN, overflow, underflow, |x| >= 4 for erf) as lane blends. Tails (n % 16)
 * call the scalar functions themselves.
 */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__FMA__)

#include <immintrin.h>

#define AINLINE static inline __attribute__((always_inline))

/* rc_expf on 16 lanes */
AINLINE __m512 exp16(__m512 x) {
    const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269502162933349609375f));
    const __mmask16 nonneg = _mm512_cmp_ps_mask(t, zero, _CMP_GE_OQ);
    const __m512 h = _mm512_mask_add_ps(_mm512_sub_ps(t, half), nonneg, t, half); /* round half away */
    const __m512i k = _mm512_cvttps_epi32(h);
    const __m512 kf = _mm512_cvtepi32_ps(k);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, half);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* k1 = k / 2 truncating toward zero (as C), k2 = k - k1; 2^k as exponent bits */
    const __m512i k1 = _mm512_srai_epi32(_mm512_add_epi32(k, _mm512_srli_epi32(k, 31)), 1);
    const __m512i k2 = _mm512_sub_epi32(k, k1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72283935546875f), _CMP_GT_OQ),
                           _mm512_set1_ps(__builtin_inff()));
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.97208404541015625f), _CMP_LT_OQ), zero);
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* rc_erff's polynomial on 8 lanes in double: a = |x| < 4 */
AINLINE __m256 erf_poly8(__m256 af) {
    const __m512d a = _mm512_cvtps_pd(af);
    /* the index saturates at 7 for a >= 3.75 (lanes with a >= 4 are replaced by 1 later) */
    const __m256i i = _mm512_cvttpd_epi32(_mm512_mul_pd(_mm512_min_pd(a, _mm512_set1_pd(3.75)), _mm512_set1_pd(2.0)));
    const __m512i i64 = _mm512_cvtepi32_epi64(i);
    const __mmask8 first = _mm512_cmpeq_epi64_mask(i64, _mm512_setzero_si512());
    const __m512d centre = _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(i), _mm512_set1_pd(0.5)), _mm512_set1_pd(0.25));
    const __m512d t = _mm512_mask_mul_pd(_mm512_sub_pd(a, centre), first, a, a);
    __m512d p = _mm512_permutexvar_pd(i64, _mm512_loadu_pd(rc_erf_coef[RC_ERF_DEG]));
    for (int j = RC_ERF_DEG - 1; j >= 0; j--)
        p = _mm512_fmadd_pd(p, t, _mm512_permutexvar_pd(i64, _mm512_loadu_pd(rc_erf_coef[j])));
    p = _mm512_mask_mul_pd(p, first, p, a);
    return _mm512_cvtpd_ps(p);
}

/* rc_erff on 16 lanes */
AINLINE __m512 erf16(__m512 x) {
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    const __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(signbit, _mm512_castps_si512(x)));
    const __m256 lo = erf_poly8(_mm512_castps512_ps256(a));
    const __m256 hi = erf_poly8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m512 r = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
    r = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(r), _mm512_and_si512(signbit, _mm512_castps_si512(x))));
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

static void avx512_silu_mul(float *g, const float *u, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), signbit)));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

static void avx512_gelu(float *x, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 rsqrt2 = _mm512_set1_ps(0.707106781186547524f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 e = erf16(_mm512_mul_ps(v, rsqrt2));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_mul_ps(v, half), _mm512_add_ps(one, e)));
    }
    for (; i < n; i++) x[i] = rc_gelu(x[i]);
}

static void avx512_softmax(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps(); /* lane l: the canonical accumulator l */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), mv));
        _mm512_storeu_ps(s + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, acc);
    const float sum = rc_softmax_tail(s, i, n, m, lanes);
    const __m512 sv = _mm512_set1_ps(sum);
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(s + i, _mm512_div_ps(_mm512_loadu_ps(s + i), sv));
    for (; i < n; i++) s[i] = s[i] / sum;
}

/* rc_sincosf's double core (ops.c sincos_d) on 8 lanes, operation for operation (no fma: the
 * scalar code has none): round-half-away quotient by pi/2, the 3-part reduction, the two Taylor
 * chains with their divisions, the quadrant from kd mod 4 (kd - 4 floor(kd / 4), exact), then one
 * rounding to float. Lanes must be finite with |x| < 2^30 (the caller checks). */
AINLINE __m512d neg8(__m512d v) { /* -v: the sign bit flipped, as C's unary minus */
    return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(v), _mm512_set1_epi64((long long)0x8000000000000000ull)));
}

AINLINE void sincos8(__m256 xf, __m256 *sf, __m256 *cf) {
    const __m512d x = _mm512_cvtps_pd(xf), half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
    const __m512d t = _mm512_mul_pd(x, _mm512_set1_pd(6.36619772367581382433e-01));
    const __mmask8 nonneg = _mm512_cmp_pd_mask(t, _mm512_setzero_pd(), _CMP_GE_OQ);
    const __m512d h = _mm512_mask_add_pd(_mm512_sub_pd(t, half), nonneg, t, half);
    const __m512d kd = _mm512_roundscale_pd(h, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_sub_pd(x, _mm512_mul_pd(kd, _mm512_set1_pd(1.57079632673412561417e+00)));
    r = _mm512_sub_pd(r, _mm512_mul_pd(kd, _mm512_set1_pd(6.07710050630396597660e-11)));
    r = _mm512_sub_pd(r, _mm512_mul_pd(kd, _mm512_set1_pd(2.02226624879595063154e-21)));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d ts = r, ps = r, tc = one, pc = one;
    for (int i = 1; i <= 10; i++) {
        ts = _mm512_div_pd(_mm512_mul_pd(neg8(ts), r2), _mm512_set1_pd((double)((2 * i) * (2 * i + 1))));
        ps = _mm512_add_pd(ps, ts);
        tc = _mm512_div_pd(_mm512_mul_pd(neg8(tc), r2), _mm512_set1_pd((double)((2 * i - 1) * (2 * i))));
        pc = _mm512_add_pd(pc, tc);
    }
    const __m512d fl = _mm512_roundscale_pd(_mm512_mul_pd(kd, _mm512_set1_pd(0.25)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d q = _mm512_sub_pd(kd, _mm512_mul_pd(fl, _mm512_set1_pd(4.0)));
    const __mmask8 q1 = _mm512_cmp_pd_mask(q, one, _CMP_EQ_OQ), q2 = _mm512_cmp_pd_mask(q, _mm512_set1_pd(2.0), _CMP_EQ_OQ),
                   q3 = _mm512_cmp_pd_mask(q, _mm512_set1_pd(3.0), _CMP_EQ_OQ);
    const __m512d nps = neg8(ps), npc = neg8(pc);
    __m512d s = _mm512_mask_mov_pd(_mm512_mask_mov_pd(_mm512_mask_mov_pd(ps, q1, pc), q2, nps), q3, npc);
    __m512d c = _mm512_mask_mov_pd(_mm512_mask_mov_pd(_mm512_mask_mov_pd(pc, q1, nps), q2, npc), q3, ps);
    *sf = _mm512_cvtpd_ps(s);
    *cf = _mm512_cvtpd_ps(c);
}

static void avx512_sincos(const float *x, float *s, float *c, size_t n) {
    const __m512 lim = _mm512_set1_ps(1073741824.0f); /* 2^30; NaN compares false */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        if (_mm512_cmp_ps_mask(_mm512_abs_ps(v), lim, _CMP_LT_OQ) != 0xffff) {
            rc_sincos_f32(x + i, s + i, c + i, 16);
            continue;
        }
        __m256 s0, c0, s1, c1; /* two independent halves: twice the division chains in flight */
        sincos8(_mm512_castps512_ps256(v), &s0, &c0);
        sincos8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), &s1, &c1);
        _mm256_storeu_ps(s + i, s0);
        _mm256_storeu_ps(s + i + 8, s1);
        _mm256_storeu_ps(c + i, c0);
        _mm256_storeu_ps(c + i + 8, c1);
    }
    rc_sincos_f32(x + i, s + i, c + i, n - i);
}

RC_INSTALL_ACT(rc_act_avx512, avx512)

#else

RC_KERNELS_ABSENT(rc_act_avx512)

#endif
