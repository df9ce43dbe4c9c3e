/* kernels_avx512.c - the AVX-512 (F/BW/VL + FMA) kernel table (x86-64; compiled with
 * -mavx512f -mavx512bw -mavx512vl -mfma -mf16c, empty of code elsewhere). Canonical order of kernels.h:
 * the 16 accumulators are exactly one zmm register (element i -> lane i % 16); the first tree
 * level adds its two 256-bit halves; the tail (n % 16) is finished in scalar fmaf on the
 * spilled lanes. Attention over an f16 K / V cache runs the same kernels with each 16 elements
 * widened by vcvtph2ps (exact); fp32 -> f16 is vcvtps2ph with imm 0.
 *
 * nf4: ONE table lookup per 16 weights: the 8 code bytes are split into 16 nibbles in element
 * order (vpsrlw + vpunpcklbw; vpermps reads only bits 0..3 of each index), widened to dwords,
 * and vpermps (permutexvar) indexes the 16-entry table codebook * absmax of the block (the same
 * single fp32 product as the reference). f16 weights and nf4 rows whose length is not a
 * multiple of 16 use the scalar reference.
 *
 * matmul, nt >= RC_PF_MIN_NT (prefill) with the caller's scratch: see pf_matmul below (each weight
 *   panel decoded once per call into the scratch, then 6 rows x 4 inputs f32 register tiles).
 * matmul, nt < RC_PF_MIN_NT (none of it changes an output's order, only when it is computed):
 *   weight rows in L2-sized panels > input tiles of 4 rows (kept in L1) > groups of 4 weight rows
 *   > columns; each decoded weight vector feeds 4 inputs from a register (16 zmm accumulators,
 *   one per output). One input: bf16/f32 4 weight rows at once, 4 independent FMA chains, and
 *   a software prefetch of the same 64-block RC_PF row groups ahead (decode reads from DRAM).
 * nf4 decode (one input, cols % 64 == 0): mv_nf4, 8 rows at once, one shuffle per 16 weights:
 *   the index build is a shift (vpsrlvq) that leaves the weights in lane order j, j + 8; the
 *   input is permuted to match once per 16 columns and the lanes are put back before the tree.
 */
#include "kernels.h"

/* kernels_avx512vbmi.c compiles this file again with RC_AVX512_VBMI and -mavx512vbmi: the same
 * kernels, with the nf4 index build of nf4_lookup16 done by one vpmultishiftqb. */
#ifdef RC_AVX512_VBMI
#define RC_KERNELS_AVX512_FN rc_kernels_avx512vbmi
#else
#define RC_KERNELS_AVX512_FN rc_kernels_avx512
#endif

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__FMA__) && defined(__F16C__) && (!defined(RC_AVX512_VBMI) || defined(__AVX512VBMI__))

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

/* 16 elements of a K / V row from i on, as fp32: fp32 (f16 = 0) or binary16 (f16 = 1) widened by
 * vcvtph2ps (exact); the scalar element is rc_kv_elem (kernels.h). */
AINLINE __m512 ld16(const void *p, size_t i, int f16) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

/* the canonical dot of a[n] (fp32) and b[n] (fp32 or binary16) */
AINLINE float dot_any(const float *a, const void *b, size_t n, int f16) {
    __m512 acc = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), ld16(b, i, f16), acc);
    if (i == n) return tree_v(acc);
    float s[16];
    _mm512_storeu_ps(s, acc);
    for (int l = 0; i < n; i++, l++) s[l] = fmaf(a[i], rc_kv_elem(b, i, f16), s[l]);
    return tree16(s);
}

static float avx512_dot_f32(const float *a, const float *b, size_t n) { return dot_any(a, b, n, 0); }

static float avx512_sumsq_f32(const float *x, size_t n) { return avx512_dot_f32(x, x, n); }

/* Four keys at a time: four independent FMA chains instead of one (a single dot of D = 128 is
 * 8 dependent FMAs, latency-bound); each score is still its own canonical dot. */
AINLINE void attn_scores_any(const float *q, const void *K, size_t ldk, int n, size_t D, float scale, float *s,
                             int f16) {
    int j = 0;
    if (D % 16 == 0)
        for (; j + 4 <= n; j += 4) {
            __m512 a[4];
            RC_UNROLL
            for (int u = 0; u < 4; u++) a[u] = _mm512_setzero_ps();
            for (size_t i = 0; i < D; i += 16) {
                const __m512 qv = _mm512_loadu_ps(q + i);
                RC_UNROLL
                for (int u = 0; u < 4; u++) a[u] = _mm512_fmadd_ps(qv, ld16(K, (size_t)(j + u) * ldk + i, f16), a[u]);
            }
            RC_UNROLL
            for (int u = 0; u < 4; u++) s[j + u] = tree_v(a[u]) * scale;
        }
    for (; j < n; j++) s[j] = dot_any(q, rc_kv_elem_at(K, (size_t)j * ldk, f16), D, f16) * scale;
}

/* Columns [i0, i0 + 16 NV) of the weighted sum: NV accumulators stay in registers over all keys
 * (independent FMA chains; one chain alone is latency-bound); V is fp32 or binary16. */
AINLINE void wsum_cols(const float *p, const void *V, size_t ldv, int n, float *out, size_t i0, const int NV,
                       int f16) {
    __m512 acc[8];
    RC_UNROLL
    for (int k = 0; k < NV; k++) acc[k] = _mm512_loadu_ps(out + i0 + 16 * k);
    for (int j = 0; j < n; j++) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        const size_t v = (size_t)j * ldv + i0;
        RC_UNROLL
        for (int k = 0; k < NV; k++) acc[k] = _mm512_fmadd_ps(pj, ld16(V, v + 16 * (size_t)k, f16), acc[k]);
    }
    RC_UNROLL
    for (int k = 0; k < NV; k++) _mm512_storeu_ps(out + i0 + 16 * k, acc[k]);
}

/* 128 columns at a time, then 64, 32, 16 (head dims 64, 192: one pass over the keys per block) */
AINLINE void attn_wsum_any(const float *p, const void *V, size_t ldv, int n, size_t D, float *out, int f16) {
    size_t i0 = 0;
    for (; i0 + 128 <= D; i0 += 128) wsum_cols(p, V, ldv, n, out, i0, 8, f16);
    if (i0 + 64 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 4, f16);
        i0 += 64;
    }
    if (i0 + 32 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 2, f16);
        i0 += 32;
    }
    if (i0 + 16 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 1, f16);
        i0 += 16;
    }
    for (; i0 < D; i0++) {
        float o = out[i0];
        for (int j = 0; j < n; j++) o = fmaf(p[j], rc_kv_elem(V, (size_t)j * ldv + i0, f16), o);
        out[i0] = o;
    }
}

RC_ATTN_KERNELS(avx512)

/* vcvtps2ph with imm 0 (round to nearest even, not MXCSR's mode); the tail through the same
 * instruction under a mask */
static void avx512_f32_to_f16(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), 0));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), 0));
    }
}

#ifdef RC_AVX512_VBMI
/* vpermps reads bits 0-3 of each dword index only: vpmultishiftqb puts in the low byte of dword i
 * the 8 bits that start at element i's nibble of the 8 code bytes broadcast to every qword
 * (element 2j: bit 8j+4, element 2j+1: bit 8j; qword j holds dwords 2j and 2j+1). */
#define NF4_SHIFTS(j) ((long long)((8ull * (j) + 4) | ((8ull * (j)) << 32)))
AINLINE __m512 nf4_lookup16(__m512 table, const uint8_t *p) {
    const __m512i ctrl = _mm512_set_epi64(NF4_SHIFTS(7), NF4_SHIFTS(6), NF4_SHIFTS(5), NF4_SHIFTS(4), NF4_SHIFTS(3),
                                          NF4_SHIFTS(2), NF4_SHIFTS(1), NF4_SHIFTS(0));
    long long q;
    memcpy(&q, p, 8);
    return _mm512_permutexvar_ps(_mm512_multishift_epi64_epi8(ctrl, _mm512_set1_epi64(q)), table);
}
#else
AINLINE __m512 nf4_lookup16(__m512 table, const uint8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    __m128i nib = _mm_unpacklo_epi8(_mm_srli_epi16(b, 4), b); /* hi nibble of byte j first */
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(nib), table);
}
#endif

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

/* register tile: RC_NR weight rows x RC_NT inputs = RC_NR*RC_NT zmm accumulators. Measured on
 * this machine (nf4, GFLOP/s at 32 inputs): 4x4 153, 4x3 136, 2x6 81, 3x6 75, 2x8 73, 4x6 81
 * (the larger tiles spill). */
#ifndef RC_NR
#define RC_NR 4
#endif
#ifndef RC_NT
#define RC_NT 4
#endif
#ifndef RC_PF
#define RC_PF 1 /* measured: +20% streamed from DRAM, -10% when the matrix sits in L3 */
#endif

/* NR weight rows (r .. r+NR-1) x NT input rows; every output keeps its own 16 canonical lanes
 * (one zmm), so each decoded weight vector is reused NT times from a register without changing
 * any output's order. Several weight rows give a single input row independent FMA chains.
 * A64: nf4 with cols % 64 == 0, so every row starts a 64-block: the block's table is built once
 * per 64 columns without a test per 16 columns. */
AINLINE void row_block(const rc_mat *w, rc_dtype dt, const int NR, const int NT, const int A64, int64_t r,
                       const float *X, size_t ldx, const float *bias, float *Y, size_t ldy) {
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
    if (A64) {
        const uint8_t *codes = (const uint8_t *)w->data;
        for (; i + 64 <= n; i += 64) {
            if (RC_PF && NT == 1) /* decode streams from DRAM: fetch the same block RC_PF row groups ahead */
                RC_UNROLL
                for (int q = 0; q < NR; q++)
                    _mm_prefetch((const char *)(codes + (((size_t)(r + q + RC_PF * NR) * n + i) >> 1)), _MM_HINT_T0);
            RC_UNROLL
            for (int q = 0; q < NR; q++)
                table[q] = _mm512_mul_ps(cb, _mm512_set1_ps(w->absmax[((size_t)(r + q) * n + i) >> 6]));
            RC_UNROLL
            for (int s = 0; s < 4; s++)
                RC_UNROLL
                for (int q = 0; q < NR; q++) {
                    __m512 wv = nf4_lookup16(table[q], codes + (((size_t)(r + q) * n + i) >> 1) + 8 * s);
                    RC_UNROLL
                    for (int t = 0; t < NT; t++)
                        acc[q][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(X + (size_t)t * ldx + i + 16 * s), acc[q][t]);
                }
        }
    }
    for (; i + 16 <= n; i += 16)
        RC_UNROLL
        for (int q = 0; q < NR; q++) {
            if (RC_PF && NT == 1 && dt == RC_DT_BF16) /* the lm_head matvec streams from DRAM too */
                _mm_prefetch((const char *)((const uint16_t *)w->data + (size_t)(r + q + RC_PF * NR) * n + i), _MM_HINT_T0);
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

/* All rows [r0, r1) against one tile of NT inputs: RC_NR weight rows at a time (4 for one input,
 * for independent FMA chains). */
AINLINE void rows_tile(const rc_mat *w, rc_dtype dt, const int NT, const int A64, int64_t r0, int64_t r1,
                       const float *X, size_t ldx, const float *bias, float *Y, size_t ldy) {
    const int NR = NT == 1 ? 4 : RC_NR;
    int64_t r = r0;
    for (; r + NR <= r1; r += NR) row_block(w, dt, NR, NT, A64, r, X, ldx, bias, Y, ldy);
    for (; r < r1; r++) row_block(w, dt, 1, NT, A64, r, X, ldx, bias, Y, ldy);
}

AINLINE void mm_panel(const rc_mat *w, rc_dtype dt, const int A64, const float *bias, const float *X, size_t ldx,
                      int nt, float *Y, size_t ldy, int64_t r0, int64_t r1) {
    /* input tile outermost: its RC_NT rows of X stay in L1 while the panel's weight rows (in L2)
     * pass by */
    int t = 0;
    for (; t + RC_NT <= nt; t += RC_NT)
        rows_tile(w, dt, RC_NT, A64, r0, r1, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
    const float *Xt = X + (size_t)t * ldx;
    float *Yt = Y + (size_t)t * ldy;
    switch (nt - t) {
    case 1: rows_tile(w, dt, 1, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
    case 2: rows_tile(w, dt, 2, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
    case 3: rows_tile(w, dt, 3, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#if RC_NT > 4
    case 4: rows_tile(w, dt, 4, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 5
    case 5: rows_tile(w, dt, 5, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 6
    case 6: rows_tile(w, dt, 6, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 7
    case 7: rows_tile(w, dt, 7, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
    default: break;
    }
}

/* Weight rows in panels of about RC_PANEL_BYTES, each met by every input tile in turn: the panel
 * stays in L2, so the weights come from memory once per call instead of once per input tile
 * (f32 and bf16 weights would otherwise need far more bandwidth than the FMAs). */
#define RC_PANEL_BYTES ((size_t)192 << 10)

AINLINE void mm_tiles(const rc_mat *w, rc_dtype dt, const int A64, const float *bias, const float *X, size_t ldx,
                      int nt, float *Y, size_t ldy, int64_t r0, int64_t r1) {
    const size_t n = (size_t)w->cols;
    const size_t row_bytes = (dt == RC_DT_F32 ? 4 * n : dt == RC_DT_BF16 ? 2 * n : n / 2 + n / 16) + 1;
    int64_t panel = (int64_t)(RC_PANEL_BYTES / row_bytes);
    panel = panel < 8 ? 8 : panel - panel % 4;
    if (nt <= RC_NT) panel = r1 - r0; /* a single input tile: nothing to reuse */
    for (int64_t p = r0; p < r1; p += panel)
        mm_panel(w, dt, A64, bias, X, ldx, nt, Y, ldy, p, r1 - p > panel ? p + panel : r1);
}

/* Decode (one input, nf4, cols % 64 == 0): ONE shuffle per 16 weights instead of two. The 8 code
 * bytes are broadcast to every qword (a load, no shuffle); vpsrlvq shifts qword j so that its low
 * dword starts with element j's nibble and its high dword, 32 bits on, with element j + 8's. The
 * lookup then yields the 16 weights in the lane order j, j + 8 (lane 2j, 2j + 1), so the input
 * is read in that order too (one vpermps per 16 columns, shared by the NR rows) and each output's
 * lanes are put back in canonical order before the tree: every lane still accumulates the same
 * products in the same order, so the bits are those of the scalar path. NR = 8 rows give eight
 * independent FMA chains. */
#define IL_SHIFT(j) (8ll * ((j) >> 1) + (((j) & 1) ? 0 : 4))
AINLINE void mv_nf4_block(const rc_mat *w, const int NR, int64_t r, const float *x, const float *bias, float *y) {
    const size_t n = (size_t)w->cols;
    const uint8_t *codes = (const uint8_t *)w->data;
    const __m512 cb = _mm512_loadu_ps(RC_NF4_CODEBOOK);
    const __m512i shift = _mm512_set_epi64(IL_SHIFT(7), IL_SHIFT(6), IL_SHIFT(5), IL_SHIFT(4), IL_SHIFT(3),
                                           IL_SHIFT(2), IL_SHIFT(1), IL_SHIFT(0));
    const __m512i to_il = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    __m512 acc[8];
    RC_UNROLL
    for (int q = 0; q < NR; q++) acc[q] = _mm512_setzero_ps();
    /* row q's codes and absmax are row 0's plus q strides: a few adds per 64-column block
     * (computed per lookup, the addresses made the loop issue-bound; now the vector mix bounds it) */
    const size_t cstride = n / 2, astride = n / 64;
    const uint8_t *c0 = codes + (size_t)r * cstride;
    const float *a0 = w->absmax + (size_t)r * astride;
    for (size_t i = 0; i < n; i += 64, c0 += 32, a0++) {
        __m512 table[8];
        const uint8_t *cq[8];
        RC_UNROLL
        for (int q = 0; q < NR; q++) {
            cq[q] = q ? cq[q - 1] + cstride : c0;
            if (RC_PF && !(i & 64)) _mm_prefetch((const char *)(cq[q] + 2 * (size_t)NR * cstride), _MM_HINT_T0);
            table[q] = _mm512_mul_ps(cb, _mm512_set1_ps(a0[(size_t)q * astride]));
        }
        RC_UNROLL
        for (int s = 0; s < 4; s++) {
            const __m512 xv = _mm512_permutexvar_ps(to_il, _mm512_loadu_ps(x + i + 16 * s));
            RC_UNROLL
            for (int q = 0; q < NR; q++) {
                long long c;
                memcpy(&c, cq[q] + 8 * s, 8);
                const __m512i idx = _mm512_srlv_epi64(_mm512_set1_epi64(c), shift);
                acc[q] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, table[q]), xv, acc[q]);
            }
        }
    }
    const __m512i from_il = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
    RC_UNROLL
    for (int q = 0; q < NR; q++) {
        const float d = tree_v(_mm512_permutexvar_ps(from_il, acc[q]));
        y[r + q] = bias ? d + bias[r + q] : d;
    }
}
#undef IL_SHIFT

static void mv_nf4(const rc_mat *w, const float *bias, const float *x, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) mv_nf4_block(w, 8, r, x, bias, y);
    for (; r < r1; r++) mv_nf4_block(w, 1, r, x, bias, y);
}

AINLINE void mm_dtype(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                      size_t ldy, int64_t r0, int64_t r1) {
    if (dt == RC_DT_NF4 && w->cols % 64 == 0) mm_tiles(w, dt, 1, bias, X, ldx, nt, Y, ldy, r0, r1);
    else mm_tiles(w, dt, 0, bias, X, ldx, nt, Y, ldy, r0, r1);
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

/* ---- prefill (nt >= RC_PF_MIN_NT): decode a panel once, then an f32 register tile ----
 * The weights of up to PF_PR_MAX rows x PF_KC columns are decoded ONCE per call (exact fp32, the
 * same values as value_at; f32 weights copied) into the caller's scratch, packed in the order the
 * tile reads them: per group of PF_MR rows, per 16 columns, the group's rows one after another.
 * The panel stays in L1 with the input tile. Every tile of PF_MT inputs (read in place from X)
 * then meets every group of the panel: PF_MR x PF_MT = 24 zmm accumulators, per 16 columns
 * PF_MT x loads (kept in registers) + PF_MR w loads feed 24 FMAs, and the registers hold it
 * without a spill (24 + 4 x + 1-2 w of 32). Every output still owns its 16 canonical lanes
 * (one zmm), filled in column order: between column blocks the lanes wait in acc_buf (exact
 * fp32 stores); the last block does the tree and the bias from registers; an n % 16 tail is
 * added on the first lanes at the end, as in row_block. So the bits are those of the scalar
 * path; only the order in which outputs are computed differs (the AVX2 prefill path is the same
 * design with 8-lane halves).
 * Below RC_PF_MIN_NT inputs the decode (stored, then reloaded) costs more than it saves, and
 * row_block (decode into registers, 4 rows x 4 inputs) is used; so is it without scratch. */
#ifndef PF_KC
#define PF_KC 512 /* columns per block (a multiple of 64, so nf4 blocks stay whole) */
#endif
#ifndef PF_MR
#define PF_MR 6 /* weight rows per tile */
#endif
#ifndef PF_MT
#define PF_MT 4 /* inputs per tile */
#endif
#ifndef PF_PR_MAX
#define PF_PR_MAX 12 /* rows per panel (a multiple of PF_MR): 12 x 512 decoded = 24 KB, L1 with the X tile */
#endif
#define PF_WBUF_FLOATS ((size_t)PF_PR_MAX * PF_KC)
#define PF_ACC_FLOATS ((size_t)32768) /* 16 lanes of up to 2048 outputs (panel rows x inputs): 128 KB */
#define PF_SCRATCH_FLOATS (PF_WBUF_FLOATS + PF_ACC_FLOATS)
_Static_assert(PF_WBUF_FLOATS % 16 == 0 && PF_SCRATCH_FLOATS % 16 == 0, "scratch parts stay 64-byte aligned");
_Static_assert(PF_PR_MAX % PF_MR == 0 && PF_KC % 64 == 0, "panel geometry");
#ifndef RC_PF_MIN_NT
#define RC_PF_MIN_NT 16
#endif

typedef struct {
    const float *wp; /* the group's packed weights: column block s of row q at wp + s*16*MR + 16*q */
    const float *xp; /* MT inputs, stride ldx */
    size_t ldx;
    size_t kc;       /* columns, a multiple of 16 */
    float *acc;      /* lanes of output (q, t) at acc + q*acc_ld + 16*t */
    size_t acc_ld;
    float *y;        /* finish: output (q, t) at y[t*ldy + q] (+ bias[q]) */
    size_t ldy;
    const float *bias;
} pf_args;

/* One tile: MR weight rows x MT inputs over kc columns.
 * first: the lanes start at +0.0f (else from acc); finish: tree + bias into y (else into acc). */
AINLINE void pf_tile(const int MR, const int MT, int first, int finish, const pf_args *g) {
    const float *wp = g->wp, *xp = g->xp;
    const size_t ldx = g->ldx, kc = g->kc;
    __m512 a[PF_MR][PF_MT];
    RC_UNROLL
    for (int q = 0; q < MR; q++)
        RC_UNROLL
        for (int t = 0; t < MT; t++)
            a[q][t] = first ? _mm512_setzero_ps() : _mm512_load_ps(g->acc + (size_t)q * g->acc_ld + 16 * t);
    for (size_t i = 0; i < kc; i += 16, wp += 16 * MR) {
        __m512 xv[PF_MT];
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            xv[t] = _mm512_loadu_ps(xp + (size_t)t * ldx + i);
            __asm__("" : "+v"(xv[t])); /* one load per x vector: gcc would fold it into every FMA */
        }
        RC_UNROLL
        for (int q = 0; q < MR; q++) {
            const __m512 wv = _mm512_load_ps(wp + 16 * q);
            RC_UNROLL
            for (int t = 0; t < MT; t++) a[q][t] = _mm512_fmadd_ps(wv, xv[t], a[q][t]);
        }
    }
    RC_UNROLL
    for (int q = 0; q < MR; q++)
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            if (finish) {
                const float d = tree_v(a[q][t]);
                g->y[(size_t)t * g->ldy + (size_t)q] = g->bias ? d + g->bias[q] : d;
            } else {
                _mm512_store_ps(g->acc + (size_t)q * g->acc_ld + 16 * t, a[q][t]);
            }
        }
}

/* the edges: the panel's last rows (mr < PF_MR), the last inputs (mt < PF_MT) */
static void pf_tile_any(int mr, int mt, int first, int finish, const pf_args *g) {
    if (mr == PF_MR && mt == PF_MT) {
        pf_tile(PF_MR, PF_MT, first, finish, g);
        return;
    }
    switch (mr * 16 + mt) {
#define PF_CASE(R, T)                                                                                                  \
    case (R) * 16 + (T): /* clamped: a smaller PF_MR / PF_MT leaves these cases unreachable */                    \
        pf_tile((R) < PF_MR ? (R) : PF_MR, (T) < PF_MT ? (T) : PF_MT, first, finish, g);                               \
        return;
#define PF_CASES_T(R) PF_CASE(R, 1) PF_CASE(R, 2) PF_CASE(R, 3) PF_CASE(R, 4)
        PF_CASES_T(1)
        PF_CASES_T(2)
        PF_CASES_T(3)
        PF_CASES_T(4)
        PF_CASES_T(5)
        PF_CASES_T(6)
#undef PF_CASES_T
#undef PF_CASE
    default: break;
    }
}
_Static_assert(PF_MR <= 6 && PF_MT <= 4, "pf_tile_any covers the tile edges up to 6 x 4");

/* exact fp32 weights of row r, columns [k0, k0 + kc) (kc % 16 == 0): 16 columns at a time, the
 * block of columns 16s .. 16s+15 at dst + s*stride */
static void pf_decode_row(const rc_mat *w, rc_dtype dt, int64_t r, size_t k0, size_t kc, float *dst, size_t stride) {
    const size_t e0 = (size_t)r * (size_t)w->cols + k0;
    if (dt == RC_DT_F32) {
        const float *p = (const float *)w->data + e0;
        for (size_t i = 0; i < kc; i += 16, dst += stride) _mm512_store_ps(dst, _mm512_loadu_ps(p + i));
    } else if (dt == RC_DT_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + e0;
        for (size_t i = 0; i < kc; i += 16, dst += stride) {
            __m256i h = _mm256_loadu_si256((const __m256i *)(p + i));
            _mm512_store_ps(dst, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
        }
    } else if ((e0 & 63) == 0 && kc % 64 == 0) { /* nf4, whole 64-blocks: one table per block */
        const uint8_t *codes = (const uint8_t *)w->data;
        const __m512 cb = _mm512_loadu_ps(RC_NF4_CODEBOOK);
        for (size_t i = 0; i < kc; i += 64) {
            const size_t e = e0 + i;
            const __m512 table = _mm512_mul_ps(cb, _mm512_set1_ps(w->absmax[e >> 6]));
            RC_UNROLL
            for (int s = 0; s < 4; s++, dst += stride) _mm512_store_ps(dst, nf4_lookup16(table, codes + (e >> 1) + 8 * s));
        }
    } else {
        float tmp[16];
        for (size_t i = 0; i < kc; i += 16, dst += stride) {
            avx512_nf4_dequant((const uint8_t *)w->data, w->absmax, e0 + i, 16, tmp);
            _mm512_store_ps(dst, _mm512_loadu_ps(tmp));
        }
    }
}

/* Rows [r0, r1) x nt inputs (nt <= PF_ACC_FLOATS / 16 / PF_MR), weights f32 / bf16 / nf4.
 * scratch: PF_SCRATCH_FLOATS, 64-byte aligned (the decoded panel, then the lanes). */
static void pf_block(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                     size_t ldy, int64_t r0, int64_t r1, float *scratch) {
    float *wbuf = scratch, *acc_buf = scratch + PF_WBUF_FLOATS; /* PF_WBUF_FLOATS % 16 == 0: aligned */
    const size_t n = (size_t)w->cols, n16 = n - n % 16;
    const int tail = n16 != n;
    /* panel rows: their lanes fit acc_buf */
    size_t pr_max = PF_ACC_FLOATS / 16 / (size_t)nt;
    if (pr_max > PF_PR_MAX) pr_max = PF_PR_MAX;
    pr_max -= pr_max % PF_MR; /* >= PF_MR: nt <= PF_ACC_FLOATS / 16 / PF_MR (pf_matmul) */
    const size_t acc_ld = 16 * (size_t)nt; /* acc_buf: [panel row][input][16 lanes] */
    for (int64_t p = r0; p < r1; p += (int64_t)pr_max) {
        const int pr = r1 - p < (int64_t)pr_max ? (int)(r1 - p) : (int)pr_max;
        for (size_t k0 = 0; k0 < n16; k0 += PF_KC) {
            const size_t kc = n16 - k0 < PF_KC ? n16 - k0 : PF_KC;
            const int first = k0 == 0, finish = !tail && k0 + kc == n16;
            /* group q0 (mr rows) packed at wbuf + q0*kc: row q0+j's columns 16s.. at + s*16*mr + 16*j */
            for (int q0 = 0; q0 < pr; q0 += PF_MR) {
                const int mr = pr - q0 < PF_MR ? pr - q0 : PF_MR;
                for (int j = 0; j < mr; j++)
                    pf_decode_row(w, dt, p + q0 + j, k0, kc, wbuf + (size_t)q0 * kc + 16 * (size_t)j, 16 * (size_t)mr);
            }
            pf_args g;
            g.kc = kc;
            g.acc_ld = acc_ld;
            g.ldy = ldy;
            g.ldx = ldx;
            for (int t = 0; t < nt; t += PF_MT) {
                const int mt = nt - t < PF_MT ? nt - t : PF_MT;
                g.xp = X + (size_t)t * ldx + k0;
                for (int q = 0; q < pr; q += PF_MR) {
                    const int mr = pr - q < PF_MR ? pr - q : PF_MR;
                    g.wp = wbuf + (size_t)q * kc;
                    g.acc = acc_buf + (size_t)q * acc_ld + 16 * (size_t)t;
                    g.y = Y + (size_t)t * ldy + (size_t)(p + q);
                    g.bias = bias ? bias + p + q : NULL;
                    pf_tile_any(mr, mt, first, finish, &g);
                }
            }
        }
        if (tail || !n16) rc_pf_finish_tail(w, acc_buf, acc_ld, X, ldx, nt, bias, Y, ldy, p, pr);
    }
}

static void pf_matmul(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                      size_t ldy, int64_t r0, int64_t r1, float *scratch) {
    /* inputs per block: at most PF_ACC_FLOATS / 16 / PF_PR_MAX, so that a panel keeps its
     * PF_PR_MAX rows (fewer rows per panel = X streamed more often); blocks of equal size */
    const int cap = (int)(PF_ACC_FLOATS / 16 / PF_PR_MAX), nb = (nt + cap - 1) / cap, ntb = (nt + nb - 1) / nb;
    for (int t = 0; t < nt; t += ntb)
        pf_block(w, dt, bias, X + (size_t)t * ldx, ldx, nt - t < ntb ? nt - t : ntb, Y + (size_t)t * ldy, ldy, r0, r1,
                 scratch);
}

static void avx512_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                          size_t ldy, int64_t r0, int64_t r1, float *scratch) {
    if (scratch && nt >= RC_PF_MIN_NT && (w->dtype == RC_DT_F32 || w->dtype == RC_DT_BF16 || w->dtype == RC_DT_NF4)) {
        pf_matmul(w, w->dtype, bias, X, ldx, nt, Y, ldy, r0, r1, scratch);
        return;
    }
    switch (w->dtype) {
    case RC_DT_F32: mm_f32(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_BF16: mm_bf16(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_NF4:
        if (nt == 1 && w->cols % 64 == 0) {
            mv_nf4(w, bias, X, Y, r0, r1);
            return;
        }
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

RC_INSTALL_F32(RC_KERNELS_AVX512_FN, RC_SIMD_AVX512, "avx512", avx512, PF_SCRATCH_FLOATS)

#else

RC_KERNELS_ABSENT(RC_KERNELS_AVX512_FN)

#endif
