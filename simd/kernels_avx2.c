/* kernels_avx2.c - the AVX2+FMA(+F16C) kernel table (x86-64; this file is compiled with -mavx2
 * -mfma -mf16c, and is empty of code elsewhere). Canonical order of kernels.h: lanes 0..7 of the 16
 * accumulators live in one ymm register, lanes 8..15 in another; the tail (n % 16 elements) is
 * finished in scalar fmaf on the spilled lanes, then the same tree as ops.c. Attention over an
 * f16 K / V cache runs the same kernels with each 8 elements widened by vcvtph2ps (exact).
 *
 * nf4 decode of 8 weights (4 code bytes): broadcast the 32-bit word, vpsrlvd brings each
 * element's nibble to bits 0..3 (vpermps reads bits 0..2), vpsllvd brings nibble bit 3 to the
 * sign bit; two vpermps look the codebook halves up (tables pre-multiplied by the block's absmax:
 * the same single fp32 product as the reference) and vblendvps picks the half. No branches.
 * f16 weights and nf4 rows whose length is not a multiple of 16 use the scalar reference.
 *
 * matmul, nt >= RC_PF_MIN_NT (prefill): see pf_matmul below (weights decoded once per call into
 *   an L1 panel, then 3 rows x 4 inputs f32 tiles in two 8-lane passes).
 * matmul, nt == 1 (decode), nf4 with cols % 64 == 0 and the caller's scratch: mv_nf4p below (the
 *   weights through 4 vpshufb byte-plane tables instead of vpermps; x permuted once per call).
 * matmul, nt < RC_PF_MIN_NT (none of it changes an output's order, only when it is computed):
 *   weight rows in L2-sized panels > input tiles of 4 rows (kept in L1) > weight rows > columns;
 *   each decoded weight vector feeds 4 inputs from a register (8 ymm accumulators). One input
 *   (decode): 2 nf4 rows or 4 bf16/f32 rows at once (independent FMA chains). Measured here:
 *   larger tiles (2x3, 1x5, 1x6, 2x2 rows x inputs, or a 64-weight L1 decode buffer) were slower:
 *   16 ymm registers do not hold more accumulators next to the nf4 tables; software prefetch
 *   did not help (the AVX2 nf4 decode is bound by its 5 shuffle/shift uops per 8 weights);
 *   nor did 8 inputs in two passes of 8 lanes each (one decode per 8 FMAs, but twice the x
 *   traffic: 60 vs 65 GFLOP/s, 36 vs 63 at 8960 columns).
 */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

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

/* s[l] = a[l] + b[l] (lanes l and l+8), then the 8 -> 4 -> 2 -> 1 levels of the tree. */
AINLINE float tree_v(__m256 a0, __m256 a1) {
    __m256 s8 = _mm256_add_ps(a0, a1);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* 8 elements of a K / V row from i on, as fp32: fp32 (f16 = 0) or binary16 (f16 = 1) widened by
 * F16C vcvtph2ps (exact); the scalar element is rc_kv_elem (kernels.h). */
AINLINE __m256 ld8(const void *p, size_t i, int f16) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}

/* the canonical dot of a[n] (fp32) and b[n] (fp32 or binary16) */
AINLINE float dot_any(const float *a, const void *b, size_t n, int f16) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld8(b, i, f16), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), ld8(b, i + 8, f16), a1);
    }
    if (i == n) return tree_v(a0, a1);
    float acc[16];
    _mm256_storeu_ps(acc, a0);
    _mm256_storeu_ps(acc + 8, a1);
    for (int l = 0; i < n; i++, l++) acc[l] = fmaf(a[i], rc_kv_elem(b, i, f16), acc[l]);
    return tree16(acc);
}

static float avx2_dot_f32(const float *a, const float *b, size_t n) { return dot_any(a, b, n, 0); }

static float avx2_sumsq_f32(const float *x, size_t n) { return avx2_dot_f32(x, x, n); }

/* Four keys at a time: eight independent FMA chains instead of two (a single dot of D = 128 is
 * 8 dependent FMAs per half, latency-bound); each score is still its own canonical dot. */
AINLINE void attn_scores_any(const float *q, const void *K, size_t ldk, int n, size_t D, float scale, float *s,
                             int f16) {
    int j = 0;
    if (D % 16 == 0)
        for (; j + 4 <= n; j += 4) {
            __m256 a0[4], a1[4];
            RC_UNROLL
            for (int u = 0; u < 4; u++) a0[u] = a1[u] = _mm256_setzero_ps();
            for (size_t i = 0; i < D; i += 16) {
                const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
                RC_UNROLL
                for (int u = 0; u < 4; u++) {
                    const size_t k = (size_t)(j + u) * ldk + i;
                    a0[u] = _mm256_fmadd_ps(q0, ld8(K, k, f16), a0[u]);
                    a1[u] = _mm256_fmadd_ps(q1, ld8(K, k + 8, f16), a1[u]);
                }
            }
            RC_UNROLL
            for (int u = 0; u < 4; u++) s[j + u] = tree_v(a0[u], a1[u]) * scale;
        }
    for (; j < n; j++) s[j] = dot_any(q, rc_kv_elem_at(K, (size_t)j * ldk, f16), D, f16) * scale;
}

/* Columns [i0, i0 + 8 NV) of the weighted sum: NV accumulators stay in registers over all keys
 * (independent FMA chains; one chain alone is latency-bound); V is fp32 or binary16. */
AINLINE void wsum_cols(const float *p, const void *V, size_t ldv, int n, float *out, size_t i0, const int NV,
                       int f16) {
    __m256 acc[8];
    RC_UNROLL
    for (int k = 0; k < NV; k++) acc[k] = _mm256_loadu_ps(out + i0 + 8 * k);
    for (int j = 0; j < n; j++) {
        const __m256 pj = _mm256_set1_ps(p[j]);
        const size_t v = (size_t)j * ldv + i0;
        RC_UNROLL
        for (int k = 0; k < NV; k++) acc[k] = _mm256_fmadd_ps(pj, ld8(V, v + 8 * (size_t)k, f16), acc[k]);
    }
    RC_UNROLL
    for (int k = 0; k < NV; k++) _mm256_storeu_ps(out + i0 + 8 * k, acc[k]);
}

/* 64 columns at a time, then 32, 16, 8 (head dim 192 = 3 x 64; 72 = 64 + 8) */
AINLINE void attn_wsum_any(const float *p, const void *V, size_t ldv, int n, size_t D, float *out, int f16) {
    size_t i0 = 0;
    for (; i0 + 64 <= D; i0 += 64) wsum_cols(p, V, ldv, n, out, i0, 8, f16);
    if (i0 + 32 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 4, f16);
        i0 += 32;
    }
    if (i0 + 16 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 2, f16);
        i0 += 16;
    }
    if (i0 + 8 <= D) {
        wsum_cols(p, V, ldv, n, out, i0, 1, f16);
        i0 += 8;
    }
    for (; i0 < D; i0++) {
        float o = out[i0];
        for (int j = 0; j < n; j++) o = fmaf(p[j], rc_kv_elem(V, (size_t)j * ldv + i0, f16), o);
        out[i0] = o;
    }
}

RC_ATTN_KERNELS(avx2)

/* F16C vcvtps2ph with imm 0 (round to nearest even, not MXCSR's mode), 8 at a time; the last
 * n % 8 through the same instruction on a zero-padded copy */
static void avx2_f32_to_f16(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    if (i < n) {
        float t[8] = {0};
        uint16_t h[8];
        memcpy(t, x + i, (n - i) * sizeof *t);
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(t), 0));
        memcpy(y + i, h, (n - i) * sizeof *h);
    }
}

static void avx2_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out);

/* ---- weight decoding: 16 exact fp32 weights of a row at column i into (w0, w1) ---- */

typedef struct {
    __m256 cb_lo, cb_hi, t_lo, t_hi;
    __m256i shr, shl;
} nf4_state;

AINLINE void nf4_init(nf4_state *s) {
    s->cb_lo = _mm256_loadu_ps(RC_NF4_CODEBOOK);
    s->cb_hi = _mm256_loadu_ps(RC_NF4_CODEBOOK + 8);
    s->t_lo = s->cb_lo;
    s->t_hi = s->cb_hi;
    s->shr = _mm256_setr_epi32(4, 0, 12, 8, 20, 16, 28, 24);
    s->shl = _mm256_setr_epi32(24, 28, 16, 20, 8, 12, 0, 4);
}

AINLINE __m256 nf4_lookup8(const nf4_state *s, uint32_t word) {
    __m256i b = _mm256_set1_epi32((int)word);
    __m256i idx = _mm256_srlv_epi32(b, s->shr);
    __m256 hi_sel = _mm256_castsi256_ps(_mm256_sllv_epi32(b, s->shl));
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(s->t_lo, idx), _mm256_permutevar8x32_ps(s->t_hi, idx), hi_sel);
}

AINLINE void decode16(const rc_mat *w, rc_dtype dt, size_t off, size_t i, nf4_state *ns, __m256 *w0, __m256 *w1) {
    if (dt == RC_DT_F32) {
        const float *p = (const float *)w->data + off + i;
        *w0 = _mm256_loadu_ps(p);
        *w1 = _mm256_loadu_ps(p + 8);
    } else if (dt == RC_DT_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + off + i;
        __m256i h = _mm256_loadu_si256((const __m256i *)p);
        *w0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
        *w1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
    } else { /* nf4, off + i is a multiple of 16: the 16 weights share one 64-block */
        size_t e = off + i;
        if (i == 0 || (e & 63) == 0) {
            __m256 am = _mm256_set1_ps(w->absmax[e >> 6]);
            ns->t_lo = _mm256_mul_ps(ns->cb_lo, am);
            ns->t_hi = _mm256_mul_ps(ns->cb_hi, am);
        }
        const uint8_t *p = (const uint8_t *)w->data + (e >> 1);
        uint32_t u0, u1;
        memcpy(&u0, p, 4);
        memcpy(&u1, p + 4, 4);
        *w0 = nf4_lookup8(ns, u0);
        *w1 = nf4_lookup8(ns, u1);
    }
}

AINLINE float value_at(const rc_mat *w, rc_dtype dt, size_t e) {
    if (dt == RC_DT_F32) return ((const float *)w->data)[e];
    if (dt == RC_DT_BF16) return rc_bf16_to_f32(((const uint16_t *)w->data)[e]);
    return rc_nf4_value((const uint8_t *)w->data, w->absmax, e);
}

/* NR weight rows (r .. r+NR-1) x NT input rows; every output keeps its own 16 canonical lanes
 * (two ymm), so each decoded weight vector is reused NT times from a register without changing
 * any output's order. Several weight rows give a single input row independent FMA chains.
 * A64: nf4 with cols % 64 == 0, so every row starts a 64-block: the block's tables are built
 * once per 64 columns without a test per 16 columns. */
AINLINE void row_block(const rc_mat *w, rc_dtype dt, const int NR, const int NT, const int A64, int64_t r,
                       const float *X, size_t ldx, const float *bias, float *Y, size_t ldy) {
    const size_t n = (size_t)w->cols;
    __m256 a0[4][4], a1[4][4];
    nf4_state ns[4];
    RC_UNROLL
    for (int q = 0; q < NR; q++) {
        if (dt == RC_DT_NF4) nf4_init(&ns[q]);
        RC_UNROLL
        for (int t = 0; t < NT; t++) a0[q][t] = a1[q][t] = _mm256_setzero_ps();
    }
    size_t i = 0;
    if (A64) {
        const uint8_t *codes = (const uint8_t *)w->data;
        for (; i + 64 <= n; i += 64) {
            RC_UNROLL
            for (int q = 0; q < NR; q++) {
                __m256 am = _mm256_set1_ps(w->absmax[((size_t)(r + q) * n + i) >> 6]);
                ns[q].t_lo = _mm256_mul_ps(ns[q].cb_lo, am);
                ns[q].t_hi = _mm256_mul_ps(ns[q].cb_hi, am);
            }
            RC_UNROLL
            for (int s = 0; s < 4; s++)
                RC_UNROLL
                for (int q = 0; q < NR; q++) {
                    const uint8_t *p = codes + (((size_t)(r + q) * n + i) >> 1) + 8 * s;
                    uint32_t u0, u1;
                    memcpy(&u0, p, 4);
                    memcpy(&u1, p + 4, 4);
                    const __m256 w0 = nf4_lookup8(&ns[q], u0), w1 = nf4_lookup8(&ns[q], u1);
                    RC_UNROLL
                    for (int t = 0; t < NT; t++) {
                        const float *x = X + (size_t)t * ldx + i + 16 * s;
                        a0[q][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), a0[q][t]);
                        a1[q][t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), a1[q][t]);
                    }
                }
        }
    }
    for (; i + 16 <= n; i += 16)
        RC_UNROLL
        for (int q = 0; q < NR; q++) {
            if (NT == 1 && dt == RC_DT_BF16) /* the lm_head matvec streams from DRAM: 1 row group ahead */
                _mm_prefetch((const char *)((const uint16_t *)w->data + (size_t)(r + q + NR) * n + i), _MM_HINT_T0);
            __m256 w0, w1;
            decode16(w, dt, (size_t)(r + q) * n, i, &ns[q], &w0, &w1);
            RC_UNROLL
            for (int t = 0; t < NT; t++) {
                const float *x = X + (size_t)t * ldx + i;
                a0[q][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), a0[q][t]);
                a1[q][t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), a1[q][t]);
            }
        }
    RC_UNROLL
    for (int q = 0; q < NR; q++) {
        const size_t off = (size_t)(r + q) * n;
        RC_UNROLL
        for (int t = 0; t < NT; t++) {
            float d;
            if (i == n) {
                d = tree_v(a0[q][t], a1[q][t]);
            } else {
                float acc[16];
                const float *x = X + (size_t)t * ldx;
                _mm256_storeu_ps(acc, a0[q][t]);
                _mm256_storeu_ps(acc + 8, a1[q][t]);
                for (size_t k = i; k < n; k++) acc[k - i] = fmaf(value_at(w, dt, off + k), x[k], acc[k - i]);
                d = tree16(acc);
            }
            Y[(size_t)t * ldy + (size_t)(r + q)] = bias ? d + bias[r + q] : d;
        }
    }
}

/* register tile: RC_NR weight rows x RC_NT inputs = 2*RC_NR*RC_NT ymm accumulators */
#ifndef RC_NR
#define RC_NR 1
#endif
#ifndef RC_NT
#define RC_NT 4
#endif

/* All rows [r0, r1) against one tile of NT inputs: RC_NR weight rows at a time; for one input
 * 2 nf4 rows (their tables need registers) or 4 bf16/f32 rows (independent FMA chains, and
 * 4 concurrent streams: with 2 the bf16 matvec ran at half the memory bandwidth). */
AINLINE void rows_tile(const rc_mat *w, rc_dtype dt, const int NT, const int A64, int64_t r0, int64_t r1,
                       const float *X, size_t ldx, const float *bias, float *Y, size_t ldy) {
    const int NR = NT == 1 ? (dt == RC_DT_NF4 ? 2 : 4) : RC_NR;
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
#if RC_NT > 2
    case 2: rows_tile(w, dt, 2, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 3
    case 3: rows_tile(w, dt, 3, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 4
    case 4: rows_tile(w, dt, 4, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
#endif
#if RC_NT > 5
    case 5: rows_tile(w, dt, 5, A64, r0, r1, Xt, ldx, bias, Yt, ldy); break;
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

AINLINE void mm_dtype(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                      size_t ldy, int64_t r0, int64_t r1) {
    if (dt == RC_DT_NF4 && w->cols % 64 == 0) mm_tiles(w, dt, 1, bias, X, ldx, nt, Y, ldy, r0, r1);
    else mm_tiles(w, dt, 0, bias, X, ldx, nt, Y, ldy, r0, r1);
}

/* ---- prefill (nt >= RC_PF_MIN_NT): decode a panel once, then an f32 register-blocked kernel ----
 * The weights of up to PF_PR_MAX rows x PF_KC columns are decoded ONCE per call (exact fp32, the
 * same values as value_at) into the caller's scratch, where it stays in L1; f32 weights are read in
 * place.
 * Then every tile of PF_MT = 4 inputs (read in place from X, in L1 for the whole panel) meets
 * every group of PF_MR = 3 panel rows. Every output still owns its 16 canonical lanes, filled in
 * column order: between column blocks the lanes wait in acc_buf (exact fp32 stores); the last
 * block finishes the tree and the bias from registers; an n % 16 tail is added to the first
 * lanes at the end, as in row_block. So the bits are those of the scalar path; only the order in
 * which outputs are computed differs.
 * Below RC_PF_MIN_NT inputs the decode (stored, then reloaded) costs more than it saves, and
 * the row_block path (decode into registers, 1 row x 4 inputs) is used; so it is without scratch.
 * The scratch (not the stack: 153 KB is more than some libcs give a thread) holds the panel and
 * the lanes of up to 2048 outputs, so a panel keeps 12 rows for up to 128 inputs. */
#define PF_KC 512     /* columns per block (a multiple of 64, so nf4 blocks stay whole) */
#define PF_PR_MAX 12  /* rows per panel: 12 decoded rows of 512 columns = 25 KB, L1 with the X tile */
#define PF_PAD 16     /* decoded rows kc + 16 floats apart: a 2^k-byte stride maps rows to one L1 set */
#define PF_WBUF_FLOATS ((size_t)PF_PR_MAX * (PF_KC + PF_PAD))
#define PF_ACC_FLOATS ((size_t)32768) /* 16 lanes of up to 2048 outputs (panel rows x inputs): 128 KB */
#define PF_SCRATCH_FLOATS (PF_WBUF_FLOATS + PF_ACC_FLOATS) /* the caller's scratch: 153 KB */
_Static_assert(PF_WBUF_FLOATS % 16 == 0 && PF_SCRATCH_FLOATS % 16 == 0, "scratch parts stay 64-byte aligned");
#define PF_MR 3
#define PF_MT 4
#define RC_PF_MIN_NT 16

typedef struct {
    const float *wp; /* MR weight rows, row stride ldw */
    size_t ldw;
    const float *xp; /* MT inputs, stride ldx */
    size_t ldx;
    size_t kc;       /* columns, a multiple of 16 */
    float *acc;      /* lanes of output (q, t) at acc + q*acc_ld + 16*t */
    size_t acc_ld;
    float *y;        /* finish: output (q, t) at y[t*ldy + q] (+ bias[q]) */
    size_t ldy;
    const float *bias;
} pf_args;

/* One tile, in two passes over the columns: lanes 0..7 of every output (PF_MR*PF_MT = 12 ymm
 * accumulators), then lanes 8..15. Per 8 columns: 3 w loads + 4 x loads feed 12 FMAs. Both
 * halves at once fit only 2 rows x 3 inputs (12 ymm), with 10-16 loads per 12 FMAs; in an L1
 * loop that measured 68-100 GFLOP/s with 32-byte aligned X and 45-60 with X rows at 16 mod 32
 * (split loads; X comes from malloc), vs ~100 for this tile either way (bench/NOTES.md).
 * first: the lanes start at +0.0f (else from acc); finish: tree + bias into y (else into acc).
 * Pass 0 always leaves its lanes in acc, where pass 1 finds them for the tree. */
AINLINE void pf_tile(const int MR, const int MT, int first, int finish, const pf_args *g) {
    const float *wp = g->wp, *xp = g->xp;
    const size_t ldw = g->ldw, ldx = g->ldx, kc = g->kc;
    RC_UNROLL
    for (int h = 0; h < 2; h++) {
        __m256 a[PF_MR][PF_MT];
        RC_UNROLL
        for (int q = 0; q < MR; q++)
            RC_UNROLL
            for (int t = 0; t < MT; t++)
                a[q][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(g->acc + (size_t)q * g->acc_ld + 16 * t + 8 * h);
        for (size_t i = 8 * (size_t)h; i < kc; i += 16) {
            __m256 wv[PF_MR];
            RC_UNROLL
            for (int q = 0; q < MR; q++) wv[q] = _mm256_loadu_ps(wp + (size_t)q * ldw + i);
            RC_UNROLL
            for (int t = 0; t < MT; t++) {
                const __m256 xv = _mm256_loadu_ps(xp + (size_t)t * ldx + i);
                RC_UNROLL
                for (int q = 0; q < MR; q++) a[q][t] = _mm256_fmadd_ps(wv[q], xv, a[q][t]);
            }
        }
        RC_UNROLL
        for (int q = 0; q < MR; q++)
            RC_UNROLL
            for (int t = 0; t < MT; t++) {
                float *lanes = g->acc + (size_t)q * g->acc_ld + 16 * t;
                if (finish && h == 1) {
                    const float d = tree_v(_mm256_loadu_ps(lanes), a[q][t]);
                    g->y[(size_t)t * g->ldy + (size_t)q] = g->bias ? d + g->bias[q] : d;
                } else {
                    _mm256_storeu_ps(lanes + 8 * h, a[q][t]);
                }
            }
    }
}

static void pf_tile_any(int mr, int mt, int first, int finish, const pf_args *g) {
    if (mr == PF_MR && mt == PF_MT) {
        pf_tile(PF_MR, PF_MT, first, finish, g);
        return;
    }
    switch (mr * 8 + mt) { /* the edges: the panel's last rows (mr < PF_MR), the last inputs (mt < PF_MT) */
#define PF_CASE(R, T)                                                                                                  \
    case (R) * 8 + (T): pf_tile(R, T, first, finish, g); return;
        PF_CASE(1, 1)
        PF_CASE(1, 2)
        PF_CASE(1, 3)
        PF_CASE(1, 4)
        PF_CASE(2, 1)
        PF_CASE(2, 2)
        PF_CASE(2, 3)
        PF_CASE(2, 4)
        PF_CASE(3, 1)
        PF_CASE(3, 2)
        PF_CASE(3, 3)
#undef PF_CASE
    default: break;
    }
}

/* exact fp32 weights of row r, columns [k0, k0 + kc) (kc % 16 == 0) into dst */
static void pf_decode_row(const rc_mat *w, rc_dtype dt, int64_t r, size_t k0, size_t kc, float *dst) {
    const size_t e0 = (size_t)r * (size_t)w->cols + k0;
    if (dt == RC_DT_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + e0;
        for (size_t i = 0; i < kc; i += 16) {
            __m256i h = _mm256_loadu_si256((const __m256i *)(p + i));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                          _mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16)));
            _mm256_storeu_ps(dst + i + 8, _mm256_castsi256_ps(_mm256_slli_epi32(
                                              _mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16)));
        }
    } else if ((e0 & 63) == 0 && kc % 64 == 0) { /* nf4, whole 64-blocks: one table per block */
        const uint8_t *codes = (const uint8_t *)w->data;
        nf4_state ns;
        nf4_init(&ns);
        for (size_t i = 0; i < kc; i += 64) {
            const size_t e = e0 + i;
            __m256 am = _mm256_set1_ps(w->absmax[e >> 6]);
            ns.t_lo = _mm256_mul_ps(ns.cb_lo, am);
            ns.t_hi = _mm256_mul_ps(ns.cb_hi, am);
            RC_UNROLL
            for (int s = 0; s < 8; s++) {
                uint32_t u;
                memcpy(&u, codes + (e >> 1) + 4 * s, 4);
                _mm256_storeu_ps(dst + i + 8 * s, nf4_lookup8(&ns, u));
            }
        }
    } else {
        avx2_nf4_dequant((const uint8_t *)w->data, w->absmax, e0, kc, dst);
    }
}

/* Rows [r0, r1) x nt inputs (nt <= PF_ACC_FLOATS / 16 / PF_MR), weights f32 / bf16 / nf4.
 * scratch: PF_SCRATCH_FLOATS, 64-byte aligned (the decoded panel, then the lanes). */
static void pf_block(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                     size_t ldy, int64_t r0, int64_t r1, float *scratch) {
    float *wbuf = scratch, *acc_buf = scratch + PF_WBUF_FLOATS; /* PF_WBUF_FLOATS % 16 == 0: aligned */
    const size_t n = (size_t)w->cols, n16 = n - n % 16;
    const size_t kc_max = n16 < PF_KC ? n16 : PF_KC;
    const int tail = n16 != n;
    /* panel rows: their lanes fit acc_buf and their decoded weights fit wbuf */
    size_t pr_max = PF_ACC_FLOATS / 16 / (size_t)nt;
    if (dt != RC_DT_F32 && pr_max > PF_WBUF_FLOATS / (kc_max + PF_PAD)) pr_max = PF_WBUF_FLOATS / (kc_max + PF_PAD);
    if (pr_max > PF_PR_MAX) pr_max = PF_PR_MAX;
    pr_max -= pr_max % PF_MR; /* >= PF_MR: nt <= PF_ACC_FLOATS / 16 / PF_MR (pf_matmul) */
    const size_t acc_ld = 16 * (size_t)nt; /* acc_buf: [panel row][input][16 lanes] */
    for (int64_t p = r0; p < r1; p += (int64_t)pr_max) {
        const int pr = r1 - p < (int64_t)pr_max ? (int)(r1 - p) : (int)pr_max;
        for (size_t k0 = 0; k0 < n16; k0 += PF_KC) {
            const size_t kc = n16 - k0 < PF_KC ? n16 - k0 : PF_KC;
            const int first = k0 == 0, finish = !tail && k0 + kc == n16;
            pf_args g;
            if (dt == RC_DT_F32) {
                g.wp = (const float *)w->data + (size_t)p * n + k0;
                g.ldw = n;
            } else {
                g.ldw = kc + PF_PAD;
                for (int q = 0; q < pr; q++) pf_decode_row(w, dt, p + q, k0, kc, wbuf + (size_t)q * g.ldw);
                g.wp = wbuf;
            }
            g.kc = kc;
            g.acc_ld = acc_ld;
            g.ldy = ldy;
            const float *wp0 = g.wp;
            g.ldx = ldx;
            for (int t = 0; t < nt; t += PF_MT) {
                const int mt = nt - t < PF_MT ? nt - t : PF_MT;
                g.xp = X + (size_t)t * ldx + k0;
                for (int q = 0; q < pr; q += PF_MR) {
                    const int mr = pr - q < PF_MR ? pr - q : PF_MR;
                    g.wp = wp0 + (size_t)q * g.ldw;
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
    /* inputs per block: at most PF_ACC_FLOATS / 16 / PF_MR, so that a panel holds >= PF_MR rows */
    const int ntb_max = (int)(PF_ACC_FLOATS / 16 / PF_MR);
    for (int t = 0; t < nt; t += ntb_max)
        pf_block(w, dt, bias, X + (size_t)t * ldx, ldx, nt - t < ntb_max ? nt - t : ntb_max, Y + (size_t)t * ldy, ldy,
                 r0, r1, scratch);
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

/* ---- decode (nt == 1) nf4 matvec over 64-column blocks: byte-plane tables ----
 * The vpermps decode above spends 7 shuffle / shift / blend uops per 8 weights (two vpermps and a
 * vblendvps, which are 3-uop or slow-throughput instructions on some cores). Here a block's 16
 * products RC_NF4_CODEBOOK[k] * absmax (the same single fp32 products) are cut into 4 byte planes
 * of 16 bytes, one vpshufb table each, and 32 weights take: one vbroadcasti128 load of 16 code
 * bytes, vpsrlvd + vpand (the 32 nibbles: lane 0 the high nibbles = elements 0, 2, .., 30, lane 1
 * the low nibbles = elements 1, 3, .., 31), 4 vpshufb (the 4 bytes of each weight) and 8
 * vpunpck (bytes -> fp32), all in-lane; 23 uops per 32 weights with the table build and the 4 FMAs.
 * The unpacks leave the weights in the order [0 2 4 6 1 3 5 7] within each 8 columns, so x is
 * permuted alike (into the caller's scratch) and the two accumulators hold the canonical lanes
 * in that order; one vpermps per accumulator restores lane order before the tree: each lane
 * still takes its columns in ascending order with one FMA each (kernels.h), the same bits. */
AINLINE void nf4p_tables(const float *cbp, float am, __m256i *T) {
    const __m256 a = _mm256_set1_ps(am);
    /* 4x4 byte transpose in each lane: dword p of a lane = byte p of its 4 products */
    const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13,
                                        2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i X = _mm256_shuffle_epi8(_mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(cbp), a)), tr);
    const __m256i Y = _mm256_shuffle_epi8(_mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(cbp + 8), a)), tr);
    const __m256i U = _mm256_unpacklo_epi32(X, Y), V = _mm256_unpackhi_epi32(X, Y);
    T[0] = _mm256_permute4x64_epi64(U, _MM_SHUFFLE(2, 0, 2, 0));
    T[1] = _mm256_permute4x64_epi64(U, _MM_SHUFFLE(3, 1, 3, 1));
    T[2] = _mm256_permute4x64_epi64(V, _MM_SHUFFLE(2, 0, 2, 0));
    T[3] = _mm256_permute4x64_epi64(V, _MM_SHUFFLE(3, 1, 3, 1));
}

/* 32 weights from 16 code bytes: W[0] = elements [0 2 4 6 1 3 5 7], W[1] = 8 + the same, W[2] = 16 + ..,
 * W[3] = 24 + .. */
AINLINE void nf4p_decode32(const uint8_t *c, const __m256i *T, __m256i sh, __m256i m4, __m256 *W) {
    const __m256i y = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)c));
    const __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(y, sh), m4);
    const __m256i b0 = _mm256_shuffle_epi8(T[0], idx), b1 = _mm256_shuffle_epi8(T[1], idx);
    const __m256i b2 = _mm256_shuffle_epi8(T[2], idx), b3 = _mm256_shuffle_epi8(T[3], idx);
    const __m256i l01 = _mm256_unpacklo_epi8(b0, b1), h01 = _mm256_unpackhi_epi8(b0, b1);
    const __m256i l23 = _mm256_unpacklo_epi8(b2, b3), h23 = _mm256_unpackhi_epi8(b2, b3);
    W[0] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(l01, l23));
    W[1] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(l01, l23));
    W[2] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(h01, h23));
    W[3] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(h01, h23));
}

#ifndef NF4P_PF
#define NF4P_PF 2048 /* bytes of codes the decode prefetches ahead (absmax: the same blocks ahead). One row
                      * after another is a single stream, which the hardware prefetcher alone left
                      * waiting on DRAM: without this the model decoded at 0.6x the old kernel */
#endif
/* Rows [r0, r1) of an nf4 matrix with cols % 64 == 0 against one input x (already permuted into
 * xp, [0 2 4 6 1 3 5 7] per 8 columns). */
static void mv_nf4p(const rc_mat *w, const float *bias, const float *xp, float *Y, int64_t r0, int64_t r1) {
    const size_t n = (size_t)w->cols;
    float cbp[16];
    for (int k = 0; k < 4; k++) {
        cbp[k] = RC_NF4_CODEBOOK[k];
        cbp[4 + k] = RC_NF4_CODEBOOK[8 + k];
        cbp[8 + k] = RC_NF4_CODEBOOK[4 + k];
        cbp[12 + k] = RC_NF4_CODEBOOK[12 + k];
    }
    const __m256i sh = _mm256_setr_epi32(4, 4, 4, 4, 0, 0, 0, 0), m4 = _mm256_set1_epi8(0x0f);
    const __m256i inv = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const uint8_t *codes = (const uint8_t *)w->data;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *c = codes + ((size_t)r * n >> 1);
        const float *am = w->absmax + ((size_t)r * n >> 6);
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
        for (size_t i = 0; i < n; i += 64) {
            __m256i T[4];
            __m256 W[4];
            _mm_prefetch((const char *)(c + (i >> 1) + NF4P_PF), _MM_HINT_T0);
            if (!(i & 1023)) _mm_prefetch((const char *)(am + (i >> 6) + NF4P_PF / 32), _MM_HINT_T0);
            nf4p_tables(cbp, am[i >> 6], T);
            nf4p_decode32(c + (i >> 1), T, sh, m4, W);
            a = _mm256_fmadd_ps(W[0], _mm256_loadu_ps(xp + i), a);
            b = _mm256_fmadd_ps(W[1], _mm256_loadu_ps(xp + i + 8), b);
            a = _mm256_fmadd_ps(W[2], _mm256_loadu_ps(xp + i + 16), a);
            b = _mm256_fmadd_ps(W[3], _mm256_loadu_ps(xp + i + 24), b);
            nf4p_decode32(c + (i >> 1) + 16, T, sh, m4, W);
            a = _mm256_fmadd_ps(W[0], _mm256_loadu_ps(xp + i + 32), a);
            b = _mm256_fmadd_ps(W[1], _mm256_loadu_ps(xp + i + 40), b);
            a = _mm256_fmadd_ps(W[2], _mm256_loadu_ps(xp + i + 48), a);
            b = _mm256_fmadd_ps(W[3], _mm256_loadu_ps(xp + i + 56), b);
        }
        const float d = tree_v(_mm256_permutevar8x32_ps(a, inv), _mm256_permutevar8x32_ps(b, inv));
        Y[r] = bias ? d + bias[r] : d;
    }
}

/* x permuted [0 2 4 6 1 3 5 7] per 8 columns into xp (n % 8 == 0) */
static void nf4p_permute_x(const float *x, size_t n, float *xp) {
    const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(xp + i, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + i), perm));
}

static void avx2_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                        int64_t r0, int64_t r1, float *scratch) {
    if (scratch && nt >= RC_PF_MIN_NT && (w->dtype == RC_DT_F32 || w->dtype == RC_DT_BF16 || w->dtype == RC_DT_NF4)) {
        pf_matmul(w, w->dtype, bias, X, ldx, nt, Y, ldy, r0, r1, scratch);
        return;
    }
    switch (w->dtype) {
    case RC_DT_F32: mm_f32(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_BF16: mm_bf16(w, bias, X, ldx, nt, Y, ldy, r0, r1); return;
    case RC_DT_NF4:
        if (nt == 1 && scratch && w->cols % 64 == 0 && (size_t)w->cols <= PF_SCRATCH_FLOATS) {
            nf4p_permute_x(X, (size_t)w->cols, scratch);
            mv_nf4p(w, bias, scratch, Y, r0, r1);
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

static void avx2_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out) {
    size_t i = 0;
    /* scalar head up to a 16-aligned flat index, then 16 at a time within one block */
    for (; i < n && ((start + i) & 15); i++) out[i] = rc_nf4_value(codes, absmax, start + i);
    nf4_state ns;
    nf4_init(&ns);
    for (; i + 16 <= n; i += 16) {
        size_t e = start + i;
        __m256 am = _mm256_set1_ps(absmax[e >> 6]);
        ns.t_lo = _mm256_mul_ps(ns.cb_lo, am);
        ns.t_hi = _mm256_mul_ps(ns.cb_hi, am);
        uint32_t u0, u1;
        memcpy(&u0, codes + (e >> 1), 4);
        memcpy(&u1, codes + (e >> 1) + 4, 4);
        _mm256_storeu_ps(out + i, nf4_lookup8(&ns, u0));
        _mm256_storeu_ps(out + i + 8, nf4_lookup8(&ns, u1));
    }
    for (; i < n; i++) out[i] = rc_nf4_value(codes, absmax, start + i);
}

/* 128 rows a chunk (the model's default is 64): the AVX2 panel decode (two vpermps and a vblendvps
 * per 8 weights) was 14 % of the exact prefill's matmul time at 64 rows and 7 % at 128; the
 * prefill ran 4-5 % faster (bench/NOTES.md). AVX-512's decode is one vpermps per 16: no gain there. */
static int rc_kernels_avx2_base(rc_kernels *k);
int rc_kernels_avx2(rc_kernels *k) {
    if (!rc_kernels_avx2_base(k)) return 0;
    k->matmul_rows = 128;
    return 1;
}
RC_INSTALL_F32(rc_kernels_avx2_base, RC_SIMD_AVX2, "avx2", avx2, PF_SCRATCH_FLOATS)

#else

RC_KERNELS_ABSENT(rc_kernels_avx2)

#endif
