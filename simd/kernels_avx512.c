/* kernels_avx512.c - the AVX-512 (F/BW/VL + FMA) kernel table (x86-64; compiled with
 * -mavx512f -mavx512bw -mavx512vl -mfma, empty of code elsewhere). Canonical order of simd.h:
 * the 16 accumulators are exactly one zmm register (element i -> lane i % 16); the first tree
 * level adds its two 256-bit halves; the tail (n % 16) is finished in scalar fmaf on the
 * spilled lanes.
 *
 * nf4: ONE table lookup per 16 weights: the 8 code bytes are split into 16 nibbles in element
 * order (vpsrlw + vpunpcklbw; vpermps reads only bits 0..3 of each index), widened to dwords,
 * and vpermps (permutexvar) indexes the 16-entry table codebook * absmax of the block (the same
 * single fp32 product as the reference). f16 weights and nf4 rows whose length is not a
 * multiple of 16 use the scalar reference.
 */
#include "simd.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__FMA__)

#include "nf4.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define AINLINE static inline __attribute__((always_inline))
/* the accumulator arrays must live in registers: fully unroll the small constant loops */
#define RC_UNROLL _Pragma("GCC unroll 8")

static float tree16(float *acc) {
    for (int l = 0; l < 8; l++) acc[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) acc[l] = acc[l] + acc[l + 4];
    for (int l = 0; l < 2; l++) acc[l] = acc[l] + acc[l + 2];
    return acc[0] + acc[1];
}

AINLINE float tree_v(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

static float avx512_dot_f32(const float *a, const float *b, size_t n) {
    __m512 acc = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i == n) return tree_v(acc);
    float s[16];
    _mm512_storeu_ps(s, acc);
    for (int l = 0; i < n; i++, l++) s[l] = fmaf(a[i], b[i], s[l]);
    return tree16(s);
}

static float avx512_sumsq_f32(const float *x, size_t n) { return avx512_dot_f32(x, x, n); }

static void avx512_attn_scores(const float *q, const float *K, size_t ldk, int n, size_t D, float scale, float *s) {
    for (int j = 0; j < n; j++) s[j] = avx512_dot_f32(q, K + (size_t)j * ldk, D) * scale;
}

static void avx512_attn_wsum(const float *p, const float *V, size_t ldv, int n, size_t D, float *out) {
    size_t i0 = 0;
    for (; i0 + 128 <= D; i0 += 128) { /* 8 zmm accumulators stay in registers over all j */
        __m512 acc[8];
        for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        for (int j = 0; j < n; j++) {
            const __m512 pj = _mm512_set1_ps(p[j]);
            const float *v = V + (size_t)j * ldv + i0;
            for (int k = 0; k < 8; k++) acc[k] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * k), acc[k]);
        }
        for (int k = 0; k < 8; k++) _mm512_storeu_ps(out + i0 + 16 * k, acc[k]);
    }
    for (; i0 + 16 <= D; i0 += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < n; j++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(V + (size_t)j * ldv + i0), acc);
        _mm512_storeu_ps(out + i0, acc);
    }
    for (; i0 < D; i0++) {
        float o = 0.0f;
        for (int j = 0; j < n; j++) o = fmaf(p[j], V[(size_t)j * ldv + i0], o);
        out[i0] = o;
    }
}

AINLINE __m512 nf4_lookup16(__m512 table, const uint8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    __m128i nib = _mm_unpacklo_epi8(_mm_srli_epi16(b, 4), b); /* hi nibble of byte j first */
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(nib), table);
}

AINLINE __m512 decode16(const rc_mat *w, rc_dtype dt, size_t off, size_t i, const __m512 cb, __m512 *table) {
    if (dt == RC_DT_F32) return _mm512_loadu_ps((const float *)w->data + off + i);
    if (dt == RC_DT_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w->data + off + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    size_t e = off + i; /* multiple of 16: the 16 weights share one 64-block */
    if (i == 0 || (e & 63) == 0) *table = _mm512_mul_ps(cb, _mm512_set1_ps(w->absmax[e >> 6]));
    return nf4_lookup16(*table, (const uint8_t *)w->data + (e >> 1));
}

AINLINE float value_at(const rc_mat *w, rc_dtype dt, size_t e) {
    if (dt == RC_DT_F32) return ((const float *)w->data)[e];
    if (dt == RC_DT_BF16) return rc_bf16_to_f32(((const uint16_t *)w->data)[e]);
    return rc_nf4_value((const uint8_t *)w->data, w->absmax, e);
}

/* NR weight rows (r .. r+NR-1) x NT input rows; every output keeps its own 16 canonical lanes
 * (one zmm). Several weight rows give a single input row independent FMA chains. */
AINLINE void row_block(const rc_mat *w, rc_dtype dt, const int NR, const int NT, int64_t r, const float *X, size_t ldx,
                       const float *bias, float *Y, size_t ldy) {
    const size_t n = (size_t)w->cols;
    const __m512 cb = _mm512_loadu_ps(RC_NF4_CODEBOOK);
    __m512 table[4], acc[4][8];
    RC_UNROLL
    for (int q = 0; q < NR; q++) {
        table[q] = cb;
        RC_UNROLL
        for (int t = 0; t < NT; t++) acc[q][t] = _mm512_setzero_ps();
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        RC_UNROLL
        for (int q = 0; q < NR; q++) {
            __m512 wv = decode16(w, dt, (size_t)(r + q) * n, i, cb, &table[q]);
            RC_UNROLL
            for (int t = 0; t < NT; t++)
                acc[q][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(X + (size_t)t * ldx + i), acc[q][t]);
        }
    RC_UNROLL
    for (int q = 0; q < NR; q++) {
        const size_t off = (size_t)(r + q) * n;
        RC_UNROLL
        for (int t = 0; t < NT; t++) {
            float d;
            if (i == n) {
                d = tree_v(acc[q][t]);
            } else {
                float s[16];
                const float *x = X + (size_t)t * ldx;
                _mm512_storeu_ps(s, acc[q][t]);
                for (size_t k = i; k < n; k++) s[k - i] = fmaf(value_at(w, dt, off + k), x[k], s[k - i]);
                d = tree16(s);
            }
            Y[(size_t)t * ldy + (size_t)(r + q)] = bias ? d + bias[r + q] : d;
        }
    }
}

AINLINE void mm_dtype(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                      size_t ldy, int64_t r0, int64_t r1) {
    /* blocks of inputs: weight row outermost, so the row stays in L1 across the input blocks */
    const int nblk = nt - nt % 4;
    if (nblk > 0)
        for (int64_t r = r0; r < r1; r++) {
            int t = 0;
            for (; t + 8 <= nblk; t += 8)
                row_block(w, dt, 1, 8, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
            for (; t + 4 <= nblk; t += 4)
                row_block(w, dt, 1, 4, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
        }
    /* the remaining inputs one at a time, 4 weight rows at once (independent FMA chains) */
    for (int t = nblk; t < nt; t++) {
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) row_block(w, dt, 4, 1, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
        for (; r < r1; r++) row_block(w, dt, 1, 1, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
    }
}

static void mm_f32(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                   int64_t r0, int64_t r1) {
    mm_dtype(w, RC_DT_F32, bias, X, ldx, nt, Y, ldy, r0, r1);
}
static void mm_bf16(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                    int64_t r0, int64_t r1) {
    mm_dtype(w, RC_DT_BF16, bias, X, ldx, nt, Y, ldy, r0, r1);
}
static void mm_nf4(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                   int64_t r0, int64_t r1) {
    mm_dtype(w, RC_DT_NF4, bias, X, ldx, nt, Y, ldy, r0, r1);
}

static void avx512_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                          size_t ldy, int64_t r0, int64_t r1) {
    switch (w->dtype) {
    case RC_DT_F32: mm_f32(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_BF16: mm_bf16(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_NF4:
        if (w->cols % 16 == 0) {
            mm_nf4(w, bias, X, ldx, nt, Y, ldy, r0, r1);
            return;
        }
        break;
    default: break;
    }
    for (int64_t r = r0; r < r1; r++) /* f16, odd nf4 rows: the reference itself */
        for (int t = 0; t < nt; t++) {
            float d = rc_dot_row(w, r, X + (size_t)t * ldx);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
        }
}

static void avx512_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out) {
    size_t i = 0;
    for (; i < n && ((start + i) & 15); i++) out[i] = rc_nf4_value(codes, absmax, start + i);
    const __m512 cb = _mm512_loadu_ps(RC_NF4_CODEBOOK);
    for (; i + 16 <= n; i += 16) {
        size_t e = start + i;
        __m512 table = _mm512_mul_ps(cb, _mm512_set1_ps(absmax[e >> 6]));
        _mm512_storeu_ps(out + i, nf4_lookup16(table, codes + (e >> 1)));
    }
    for (; i < n; i++) out[i] = rc_nf4_value(codes, absmax, start + i);
}

int rc_kernels_avx512(rc_kernels *k) {
    k->path = RC_SIMD_AVX512;
    k->name = "avx512";
    k->dot_f32 = avx512_dot_f32;
    k->sumsq_f32 = avx512_sumsq_f32;
    k->matmul = avx512_matmul;
    k->attn_scores = avx512_attn_scores;
    k->attn_wsum = avx512_attn_wsum;
    k->nf4_dequant = avx512_nf4_dequant;
    return 1;
}

#else

int rc_kernels_avx512(rc_kernels *k) {
    (void)k;
    return 0;
}

#endif
