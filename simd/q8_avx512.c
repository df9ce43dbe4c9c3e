/* q8_avx512.c - the q8 profile's kernels (simd/q8.h) for AVX-512 with VNNI (x86-64; compiled
 * with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma, empty of code elsewhere). simd.c
 * installs them on the avx512 path when the CPU has AVX512_VNNI (else the AVX2 ones, same bits).
 *
 * The tile: the 16 int32 lanes of a zmm are the 16 rows of a packed group; vpdpbusd adds, per
 * lane, the 4 products of the group's biased weights u (0..255) and 4 broadcast input bytes q.
 * MR groups x MT inputs int32 accumulators per 32-column block; a block's 8 steps are exact
 * integer sums, so their grouping changes nothing. The bias of u is removed by starting each sum
 * at the input block's corr = -128 * sum(q) (exact int32). Then the epilogue of q8.h, in block order, per
 * lane: acc = fmaf((float)isum, ws * d, acc): one vcvtdq2ps, one vmulps, one vfmadd per block.
 * W4 weights are decoded per step pair from one 64-byte chunk: the low nibbles and the high
 * nibbles, each through vpshufb with the biased table RC_Q8_NF4_U8.
 * Prefill (nt >= Q8_PF_MIN_NT with scratch): the weights of a panel of groups are decoded once per
 * call into the scratch (for W4), then every input tile reads the decoded panel; the decode also
 * writes the weights by column, so that a peak's weights are one 16-byte load a group, and asks for
 * the next panel's bytes early. Decode (one input) prefetches each group's weights Q8_PF_AHEAD bytes
 * ahead. None of this touches the order of the sums or the epilogue. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__)

#include <immintrin.h>
#include <string.h>

#define AINLINE static inline __attribute__((always_inline))
#define RC_UNROLL _Pragma("GCC unroll 16")

/* ---- activations ---- */

static float nan_f(void) {
    const uint32_t bits = 0x7fc00000u;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* q8.h's quantiser: the order of |x| is the order of the bits & 0x7fffffff as unsigned integers,
 * so the maxima (and the peak's lowest index) come from integer compares. */
static void avx512_q8_quant(const float *x, rc_q8act *a, int t) {
    const size_t K = (size_t)a->cols, nb = (size_t)a->nb;
    int8_t *qr = a->q + (size_t)t * K;
    float *d = a->d + (size_t)t * nb, *px = a->pk_x + (size_t)t * nb;
    int32_t *corr = a->corr + (size_t)t * nb, *pc = a->pk_c + (size_t)t * nb, np = 0;
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * RC_Q8_BLOCK;
        int8_t *q = qr + b * RC_Q8_BLOCK;
        const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
        const __m512i u0 = _mm512_and_si512(_mm512_castps_si512(x0), absmask);
        const __m512i u1 = _mm512_and_si512(_mm512_castps_si512(x1), absmask);
        const uint32_t m = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(u0, u1));
        corr[b] = 0;
        if (m >= 0x7f800000u || m < RC_Q8_TINY) {
            memset(q, 0, RC_Q8_BLOCK);
            d[b] = m >= 0x7f800000u ? nan_f() : 0.0f;
            continue;
        }
        const __m512i mv = _mm512_set1_epi32((int)m);
        const uint32_t eq = (uint32_t)_mm512_cmpeq_epi32_mask(u0, mv) | (uint32_t)_mm512_cmpeq_epi32_mask(u1, mv) << 16;
        const int j = __builtin_ctz(eq);
        /* the largest of the others: lane j zeroed */
        const __mmask16 k0 = j < 16 ? (__mmask16)~(1u << j) : (__mmask16)0xffff;
        const __mmask16 k1 = j < 16 ? (__mmask16)0xffff : (__mmask16)~(1u << (j - 16));
        const uint32_t m2 = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_maskz_mov_epi32(k0, u0),
                                                                               _mm512_maskz_mov_epi32(k1, u1)));
        float af, a2f;
        memcpy(&af, &m, 4);
        memcpy(&a2f, &m2, 4);
        uint32_t ms = m;
        __mmask16 keep0 = 0xffff, keep1 = 0xffff;
        if (m2 < RC_Q8_TINY || af > RC_Q8_PEAK * a2f) { /* the peak goes aside */
            pc[np] = (int32_t)(b * RC_Q8_BLOCK) + j;
            px[np++] = xb[j];
            if (m2 < RC_Q8_TINY) {
                memset(q, 0, RC_Q8_BLOCK);
                d[b] = 0.0f;
                continue;
            }
            ms = m2;
            keep0 = k0;
            keep1 = k1;
        }
        float sa;
        memcpy(&sa, &ms, 4);
        const __m512 s = _mm512_set1_ps(127.0f / sa);
        const __m512i q0 = _mm512_maskz_cvt_roundps_epi32(keep0, _mm512_mul_ps(x0, s),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i q1 = _mm512_maskz_cvt_roundps_epi32(keep1, _mm512_mul_ps(x1, s),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(q1));
        corr[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        d[b] = sa / 127.0f;
    }
    a->npk[t] = np;
}

/* ---- the tile ---- */

#ifndef Q8_PF_AHEAD
#define Q8_PF_AHEAD 2048 /* bytes: 8 blocks of a W4 group ahead, +10 % q8 decode (bench/NOTES.md) */
#endif
#ifndef Q8_MR
#define Q8_MR 3 /* groups (16 rows each) per tile: 3 x 4 beat 2 x 4 by ~3 % in prefill (bench/NOTES.md) */
#endif
#ifndef Q8_MT
#define Q8_MT 4 /* inputs per tile */
#endif

typedef struct {
    const rc_q8mat *w;
    const rc_q8act *x;
    const float *bias;
    float *Y;
    size_t ldy;
    int64_t r0, r1;
    const int8_t *ptab; /* prefill: the panel's int8 weights by column (decode_panel), or NULL */
} q8_job;

/* The weight vectors of step pair s (steps 2s, 2s+1) of block b for a W4 group: from its packed
 * chunk, or (dec) from a decoded panel (8 vectors of 64 bytes per block). */
AINLINE void w4_pair(const uint8_t *chunk, __m512i tbl, __m512i *lo, __m512i *hi) {
    const __m512i v = _mm512_loadu_si512(chunk), m = _mm512_set1_epi8(0x0f);
    *lo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m));
    *hi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m));
}

/* The int8 weights (as floats) of column jj of block b for the 16 rows of group g, from the packed
 * weights. Byte jj % 4 of each dword of the step vector (W8) or chunk (W4) holds the lane's value:
 * one vpshufb moves it to the dword's low byte and zeroes the rest. */
AINLINE __m512 peak_weight(const rc_q8mat *w, int64_t g, int64_t b, int jj) {
    /* vpshufb indexes within a 128-bit lane: dword i of a lane takes byte 4 * i + jj % 4 */
    const __m512i pick = _mm512_add_epi32(_mm512_set4_epi32((int)0x8080800c, (int)0x80808008, (int)0x80808004,
                                                            (int)0x80808000),
                                          _mm512_set1_epi32(jj & 3));
    if (w->kind == RC_Q8_W8) {
        const uint8_t *step = w->w + ((size_t)g * (size_t)w->nb + (size_t)b) * 512 + 64 * (size_t)(jj >> 2);
        const __m512i u = _mm512_shuffle_epi8(_mm512_loadu_si512(step), pick);
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(u, _mm512_set1_epi32(128)));
    }
    const uint8_t *chunk = w->w + ((size_t)g * (size_t)w->nb + (size_t)b) * 256 + 64 * (size_t)(jj >> 3);
    __m512i u = _mm512_shuffle_epi8(_mm512_loadu_si512(chunk), pick);
    u = (jj & 4) ? _mm512_srli_epi32(u, 4) : _mm512_and_si512(u, _mm512_set1_epi32(15));
    return _mm512_permutexvar_ps(u, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)RC_Q8_NF4))));
}

/* Stores the 16 rows of group g for input t (rows outside [r0, r1) are left alone). */
AINLINE void store_group(const q8_job *j, int64_t g, int t, __m512 acc) {
    const int64_t row0 = g * RC_Q8_GROUP;
    int64_t lo = j->r0 > row0 ? j->r0 - row0 : 0, hi = j->r1 - row0 < RC_Q8_GROUP ? j->r1 - row0 : RC_Q8_GROUP;
    if (lo >= hi) return;
    const __mmask16 m = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    if (j->bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, j->bias + row0));
    _mm512_mask_storeu_ps(j->Y + (size_t)t * j->ldy + (size_t)row0, m, acc);
}

/* MR groups (g0, g0 + 1, ..) x MT inputs (t0 ..), blocks [b0, b1). dec: the decoded panel of the
 * MR groups for those blocks (block b of group q at dec + ((b - b0) * MR + q) * 512), or NULL to
 * decode from the packed weights. acc_io: where the lanes wait between block ranges (output (q, t)
 * at acc_io + (t * MR + q) * 16; exact fp32 stores), NULL when [b0, b1) is every block. The first
 * range starts the lanes at +0.0f; the last adds the peaks and stores the outputs. */
AINLINE void tile(const q8_job *j, const int MR, const int MT, int64_t g0, int t0, const uint8_t *dec, int64_t b0,
                  int64_t b1, float *acc_io) {
    const rc_q8mat *w = j->w;
    const rc_q8act *x = j->x;
    const int64_t nb = w->nb, nsb = nb >> w->sshift;
    const size_t K = (size_t)x->cols, bb = rc_q8_block_bytes(w); /* x->cols == w->cols */
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)RC_Q8_NF4_U8));
    const int w4 = w->kind == RC_Q8_W4;
    __m512 acc[Q8_MR][Q8_MT];
    RC_UNROLL
    for (int q = 0; q < MR; q++)
        RC_UNROLL
        for (int t = 0; t < MT; t++)
            acc[q][t] = b0 ? _mm512_load_ps(acc_io + ((size_t)t * MR + (size_t)q) * 16) : _mm512_setzero_ps();
    for (int64_t b = b0; b < b1; b++) {
        /* each sum starts at its input block's corr (the bias of u removed up front: integer
         * sums, so where it is added changes nothing) */
        __m512i is[Q8_MR][Q8_MT];
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const __m512i corr = _mm512_set1_epi32(x->corr[(size_t)(t0 + t) * (size_t)x->nb + (size_t)b]);
            RC_UNROLL
            for (int q = 0; q < MR; q++) is[q][t] = corr;
        }
        const int8_t *xb = x->q + (size_t)t0 * K + (size_t)b * RC_Q8_BLOCK;
        if (!dec && MT == 1) /* decode streams each weight once: ask for it Q8_PF_AHEAD bytes early */
            RC_UNROLL
            for (int q = 0; q < MR; q++) {
                const char *ahead = (const char *)w->w + ((size_t)(g0 + q) * (size_t)nb + (size_t)b) * bb + Q8_PF_AHEAD;
                for (size_t o = 0; o < bb; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T0);
            }
        RC_UNROLL
        for (int s = 0; s < 4; s++) {
            __m512i wv[Q8_MR][2];
            RC_UNROLL
            for (int q = 0; q < MR; q++) {
                if (dec) {
                    const uint8_t *db = dec + ((size_t)(b - b0) * MR + (size_t)q) * 512 + 128 * (size_t)s;
                    wv[q][0] = _mm512_load_si512(db);
                    wv[q][1] = _mm512_load_si512(db + 64);
                } else {
                    const uint8_t *blk = w->w + ((size_t)(g0 + q) * (size_t)nb + (size_t)b) * bb;
                    if (w4) {
                        w4_pair(blk + 64 * (size_t)s, tbl, &wv[q][0], &wv[q][1]);
                    } else {
                        wv[q][0] = _mm512_loadu_si512(blk + 128 * (size_t)s);
                        wv[q][1] = _mm512_loadu_si512(blk + 128 * (size_t)s + 64);
                    }
                }
            }
            RC_UNROLL
            for (int t = 0; t < MT; t++) {
                int32_t x0, x1;
                memcpy(&x0, xb + (size_t)t * K + 8 * (size_t)s, 4);
                memcpy(&x1, xb + (size_t)t * K + 8 * (size_t)s + 4, 4);
                const __m512i xv0 = _mm512_set1_epi32(x0), xv1 = _mm512_set1_epi32(x1);
                RC_UNROLL
                for (int q = 0; q < MR; q++) {
                    is[q][t] = _mm512_dpbusd_epi32(is[q][t], wv[q][0], xv0);
                    is[q][t] = _mm512_dpbusd_epi32(is[q][t], wv[q][1], xv1);
                }
            }
        }
        __m512 wsv[Q8_MR];
        RC_UNROLL
        for (int q = 0; q < MR; q++)
            wsv[q] = _mm512_loadu_ps(w->ws + ((size_t)(g0 + q) * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP);
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const size_t xi = (size_t)(t0 + t) * (size_t)x->nb + (size_t)b;
            const __m512 dv = _mm512_set1_ps(x->d[xi]);
            RC_UNROLL
            for (int q = 0; q < MR; q++) {
                const __m512 isf = _mm512_cvtepi32_ps(is[q][t]);
                acc[q][t] = _mm512_fmadd_ps(isf, _mm512_mul_ps(wsv[q], dv), acc[q][t]);
            }
        }
    }
    if (b1 < nb) { /* more blocks follow: the lanes wait in acc_io */
        RC_UNROLL
        for (int q = 0; q < MR; q++)
            RC_UNROLL
            for (int t = 0; t < MT; t++) _mm512_store_ps(acc_io + ((size_t)t * MR + (size_t)q) * 16, acc[q][t]);
        return;
    }
    /* the peaks of each input, ascending, after every block (q8.h) */
    if (j->ptab) { /* from the panel's column table; the MT inputs' chains side by side */
        const int32_t *pc[Q8_MT];
        const float *px[Q8_MT];
        int np[Q8_MT], kmax = 0;
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const size_t row = (size_t)(t0 + t);
            pc[t] = x->pk_c + row * (size_t)x->nb;
            px[t] = x->pk_x + row * (size_t)x->nb;
            np[t] = x->npk[row];
            kmax = np[t] > kmax ? np[t] : kmax;
        }
        for (int k = 0; k < kmax; k++) {
            RC_UNROLL
            for (int t = 0; t < MT; t++) {
                if (k >= np[t]) continue;
                const int32_t c = pc[t][k];
                const size_t sb = (size_t)(c / RC_Q8_BLOCK) >> w->sshift;
                const __m512 pv = _mm512_set1_ps(px[t][k]);
                RC_UNROLL
                for (int q = 0; q < MR; q++) {
                    const __m512 wsv = _mm512_loadu_ps(w->ws + ((size_t)(g0 + q) * (size_t)nsb + sb) * RC_Q8_GROUP);
                    const __m512 wf = _mm512_cvtepi32_ps(
                        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(j->ptab + ((size_t)q * K + (size_t)c) * 16))));
                    acc[q][t] = _mm512_fmadd_ps(wf, _mm512_mul_ps(wsv, pv), acc[q][t]);
                }
            }
        }
    } else {
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const size_t row = (size_t)(t0 + t);
            const int32_t *pc = x->pk_c + row * (size_t)x->nb;
            const float *px = x->pk_x + row * (size_t)x->nb;
            for (int k = 0; k < x->npk[row]; k++) {
                const int64_t b = pc[k] / RC_Q8_BLOCK;
                const int jj = pc[k] % RC_Q8_BLOCK;
                const __m512 pv = _mm512_set1_ps(px[k]);
                RC_UNROLL
                for (int q = 0; q < MR; q++) {
                    const __m512 wsv =
                        _mm512_loadu_ps(w->ws + ((size_t)(g0 + q) * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP);
                    acc[q][t] = _mm512_fmadd_ps(peak_weight(w, g0 + q, b, jj), _mm512_mul_ps(wsv, pv), acc[q][t]);
                }
            }
        }
    }
    RC_UNROLL
    for (int q = 0; q < MR; q++)
        RC_UNROLL
        for (int t = 0; t < MT; t++) store_group(j, g0 + q, t0 + t, acc[q][t]);
}

/* all inputs against groups [g0, g0 + MR), blocks [b0, b1) (tile's dec and acc_io; acc_io for input t
 * at acc + t * MR * 16) */
AINLINE void groups_all_inputs(const q8_job *j, const int MR, int64_t g0, int nt, const uint8_t *dec, int64_t b0,
                               int64_t b1, float *acc) {
    int t = 0;
    _Alignas(64) float spare[Q8_MR * Q8_MT * 16]; /* acc_io of the whole-range tiles (never touched) */
#define Q8_ACC(t) (acc ? acc + (size_t)(t) * MR * 16 : spare)
    for (; t + Q8_MT <= nt; t += Q8_MT) tile(j, MR, Q8_MT, g0, t, dec, b0, b1, Q8_ACC(t));
    switch (nt - t) {
    case 1: tile(j, MR, 1, g0, t, dec, b0, b1, Q8_ACC(t)); break;
    case 2: tile(j, MR, 2, g0, t, dec, b0, b1, Q8_ACC(t)); break;
    case 3: tile(j, MR, 3, g0, t, dec, b0, b1, Q8_ACC(t)); break;
    default: break;
    }
#undef Q8_ACC
}
_Static_assert(Q8_MT == 4, "groups_all_inputs covers input tails up to 3");

/* The 16 rows' int8 weights of the 4 columns of a decoded step (byte i = u of row i / 4, column
 * i % 4), column by column: 16 signed bytes each, rows in order. A 4 x 4 byte transpose inside
 * each 128-bit lane, a 4 x 4 dword transpose across them, u - 128 as a sign-bit flip. */
AINLINE __m512i step_columns(__m512i v) {
    const __m512i bt = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i dt = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_xor_si512(_mm512_permutexvar_epi32(dt, _mm512_shuffle_epi8(v, bt)), _mm512_set1_epi8((char)0x80));
}

/* The decoded weights of groups [g0, g0 + MR), blocks [b0, b1): block b of group q at
 * dec + ((b - b0) * MR + q) * 512, steps in order (64 bytes each). ptab (or NULL): the same
 * weights by column for the peaks, column c of group q at ptab + (q * cols + c) * 16. */
static void decode_panel(const rc_q8mat *w, int64_t g0, int MR, int64_t b0, int64_t b1, uint8_t *dec, int8_t *ptab) {
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)RC_Q8_NF4_U8));
    for (int64_t b = b0; b < b1; b++)
        for (int q = 0; q < MR; q++) {
            const uint8_t *blk = w->w + ((size_t)(g0 + q) * (size_t)w->nb + (size_t)b) * 256;
            uint8_t *dst = dec + ((size_t)(b - b0) * (size_t)MR + (size_t)q) * 512;
            for (int s = 0; s < 4; s++) {
                __m512i lo, hi;
                w4_pair(blk + 64 * s, tbl, &lo, &hi);
                _mm512_store_si512(dst + 128 * s, lo);
                _mm512_store_si512(dst + 128 * s + 64, hi);
                if (ptab) {
                    int8_t *col = ptab + ((size_t)q * (size_t)w->cols + (size_t)b * RC_Q8_BLOCK + 8 * (size_t)s) * 16;
                    _mm512_storeu_si512(col, step_columns(lo));
                    _mm512_storeu_si512(col + 64, step_columns(hi));
                }
            }
        }
}

#ifndef Q8_PF_MIN_NT
#define Q8_PF_MIN_NT 8
#endif
#ifndef Q8_KB
#define Q8_KB 16 /* blocks (of 32 columns) per decoded panel: 3 groups x 16 x 512 bytes = 24 KB, L1 */
#endif
#define Q8_DEC_BYTES ((size_t)Q8_KB * Q8_MR * 512)

/* Asks for the packed weights of the panel after (groups g.. g + mr, blocks from b1; or the next
 * groups' first range) to come into L2 while every input meets this one: decode_panel's loads
 * would otherwise wait on memory (the weights are read once a call, so nothing has them cached). */
static void prefetch_next_panel(const rc_q8mat *w, int64_t g, int mr, int64_t b1, int64_t gz) {
    if (b1 >= w->nb) {
        g += mr;
        b1 = 0;
        mr = gz - g >= Q8_MR ? Q8_MR : 1;
    }
    if (g >= gz) return;
    const int64_t b2 = w->nb - b1 < Q8_KB ? w->nb : b1 + Q8_KB;
    for (int q = 0; q < mr; q++) {
        const char *p = (const char *)w->w + ((size_t)(g + q) * (size_t)w->nb + (size_t)b1) * 256;
        for (size_t o = 0; o < (size_t)(b2 - b1) * 256; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
    }
}

/* Prefill (nt >= Q8_PF_MIN_NT, W4, with scratch): for each panel of MR groups, the columns in
 * ranges of Q8_KB blocks, each range's weights decoded once into the scratch and met by every
 * input tile, the lanes waiting in the scratch between ranges (the outputs' block order is the
 * same: only where the lanes wait changes). Else every tile runs all blocks, decoding in place. */
static void avx512_q8_matmul(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                             int64_t r0, int64_t r1, void *scratch) {
    if (r0 >= r1 || nt < 1) return;
    q8_job j = {w, x, bias, Y, ldy, r0, r1, NULL};
    const int64_t ga = r0 / RC_Q8_GROUP, gz = (r1 - 1) / RC_Q8_GROUP + 1, nb = w->nb;
    const int predecode = scratch && w->kind == RC_Q8_W4 && nt >= Q8_PF_MIN_NT &&
                          Q8_DEC_BYTES + (size_t)nt * Q8_MR * 64 <= RC_Q8_SCRATCH_BYTES;
    uint8_t *dec = (uint8_t *)scratch;
    float *acc = predecode ? (float *)(dec + Q8_DEC_BYTES) : NULL;
    /* the peaks' column table after the lanes, when it fits: one 16-byte load a peak and group */
    const size_t tab_at = Q8_DEC_BYTES + (size_t)nt * Q8_MR * 64, tab_bytes = (size_t)Q8_MR * (size_t)w->cols * 16;
    int8_t *ptab = predecode && tab_at + tab_bytes <= RC_Q8_SCRATCH_BYTES ? (int8_t *)(dec + tab_at) : NULL;
    for (int64_t g = ga; g < gz;) {
        const int mr = gz - g >= Q8_MR ? Q8_MR : 1; /* the groups left over one at a time */
        if (!predecode) {
            if (mr == Q8_MR) groups_all_inputs(&j, Q8_MR, g, nt, NULL, 0, nb, NULL);
            else groups_all_inputs(&j, 1, g, nt, NULL, 0, nb, NULL);
            g += mr;
            continue;
        }
        for (int64_t b0 = 0; b0 < nb; b0 += Q8_KB) {
            const int64_t b1 = nb - b0 < Q8_KB ? nb : b0 + Q8_KB;
            decode_panel(w, g, mr, b0, b1, dec, ptab);
            prefetch_next_panel(w, g, mr, b1, gz);
            j.ptab = b1 == nb ? ptab : NULL; /* the peaks come with the last range */
            if (mr == Q8_MR) groups_all_inputs(&j, Q8_MR, g, nt, dec, b0, b1, acc);
            else groups_all_inputs(&j, 1, g, nt, dec, b0, b1, acc);
        }
        g += mr;
    }
}

int rc_q8_avx512(rc_kernels *k) {
    k->q8_quant = avx512_q8_quant;
    k->q8_matmul = avx512_q8_matmul;
    k->q8_name = "avx512-vnni";
    if (k->matmul_scratch < RC_Q8_SCRATCH_BYTES / sizeof(float)) k->matmul_scratch = RC_Q8_SCRATCH_BYTES / sizeof(float);
    return 1;
}

#else

RC_KERNELS_ABSENT(rc_q8_avx512)

#endif
