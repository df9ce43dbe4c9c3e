/* q8_avx2.c - the q8 profile's kernels (simd/q8.h) for AVX2 (x86-64; compiled with -mavx2 -mfma,
 * empty of code elsewhere). q8_avxvnni.c compiles this file again with RC_Q8_AVXVNNI and
 * -mavxvnni. simd.c installs the AVX-VNNI build where the CPU has it, else this one, on the avx2
 * path and on the avx512 path of a CPU without AVX512_VNNI.
 *
 * A packed group's 16 rows are two ymm halves of 8 int32 lanes (rows 0-7: bytes 0-31 of a 64-byte
 * step, rows 8-15: bytes 32-63). Per step each lane adds the 4 products of its row's weights and
 * 4 broadcast input bytes, exactly:
 *   AVX-VNNI: vpdpbusd on the biased weights u = w + 128 (0..255), the block's corr = -128 * sum(q)
 *     added at its end (as on AVX-512);
 *   AVX2: vpmaddubsw would saturate u * q pairs (2 * 255 * 127 > 32767), so the weights are taken
 *     signed (w = u - 128, |w| <= 127) and the signs moved onto the input (vpsignb): |w| * (+-q)
 *     pairs are at most 2 * 127 * 127 = 32258, exact in int16; vpmaddwd by ones sums them to int32.
 * Then the epilogue of q8.h in block order, and the peaks after the last block. */
#include "kernels.h"

#ifdef RC_Q8_AVXVNNI
#define RC_Q8_AVX2_FN rc_q8_avxvnni
#else
#define RC_Q8_AVX2_FN rc_q8_avx2
#endif

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && (!defined(RC_Q8_AVXVNNI) || defined(__AVXVNNI__))

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

/* the largest unsigned lane of a (an order-free reduction) */
AINLINE uint32_t hmax_epu32(__m256i a) {
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

AINLINE int32_t hsum_epi32(__m256i a) {
    __m128i m = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}

/* q8.h's quantiser (as simd/q8_avx512.c): maxima and the peak from integer compares of |x| bits;
 * round half to even by vcvtps2dq in the default MXCSR rounding. */
static void avx2_q8_quant(const float *x, rc_q8act *a, int t) {
    const size_t K = (size_t)a->cols, nb = (size_t)a->nb;
    int8_t *qr = a->q + (size_t)t * K;
    float *d = a->d + (size_t)t * nb, *px = a->pk_x + (size_t)t * nb;
    int32_t *corr = a->corr + (size_t)t * nb, *pc = a->pk_c + (size_t)t * nb, np = 0;
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * RC_Q8_BLOCK;
        int8_t *q = qr + b * RC_Q8_BLOCK;
        __m256i u[4];
        for (int k = 0; k < 4; k++) u[k] = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(xb + 8 * k)), absmask);
        const uint32_t m = hmax_epu32(_mm256_max_epu32(_mm256_max_epu32(u[0], u[1]), _mm256_max_epu32(u[2], u[3])));
        corr[b] = 0;
        if (m >= 0x7f800000u || m < RC_Q8_TINY) {
            memset(q, 0, RC_Q8_BLOCK);
            d[b] = m >= 0x7f800000u ? nan_f() : 0.0f;
            continue;
        }
        const __m256i mv = _mm256_set1_epi32((int)m);
        uint32_t eq = 0;
        for (int k = 0; k < 4; k++)
            eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(u[k], mv))) << (8 * k);
        const int j = __builtin_ctz(eq);
        /* the largest of the others: lane j zeroed */
        __m256i keep[4];
        for (int k = 0; k < 4; k++) {
            const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * k));
            keep[k] = _mm256_xor_si256(_mm256_cmpeq_epi32(lane, _mm256_set1_epi32(j)), _mm256_set1_epi32(-1));
        }
        const uint32_t m2 = hmax_epu32(_mm256_max_epu32(_mm256_max_epu32(_mm256_and_si256(u[0], keep[0]), _mm256_and_si256(u[1], keep[1])),
                                                        _mm256_max_epu32(_mm256_and_si256(u[2], keep[2]), _mm256_and_si256(u[3], keep[3]))));
        float af, a2f;
        memcpy(&af, &m, 4);
        memcpy(&a2f, &m2, 4);
        uint32_t ms = m;
        const __m256i all = _mm256_set1_epi32(-1);
        __m256i mask[4] = {all, all, all, all};
        if (m2 < RC_Q8_TINY || af > RC_Q8_PEAK * a2f) { /* the peak goes aside */
            pc[np] = (int32_t)(b * RC_Q8_BLOCK) + j;
            px[np++] = xb[j];
            if (m2 < RC_Q8_TINY) {
                memset(q, 0, RC_Q8_BLOCK);
                d[b] = 0.0f;
                continue;
            }
            ms = m2;
            for (int k = 0; k < 4; k++) mask[k] = keep[k];
        }
        float sa;
        memcpy(&sa, &ms, 4);
        const __m256 s = _mm256_set1_ps(127.0f / sa);
        __m256i qi[4];
        for (int k = 0; k < 4; k++)
            qi[k] = _mm256_and_si256(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), s)), mask[k]);
        /* int32 -> int8 in element order: packs work per 128-bit lane, the permute restores the order */
        const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
        const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)q, p8);
        corr[b] = -128 * hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
        d[b] = sa / 127.0f;
    }
    a->npk[t] = np;
}

/* ---- the tile ---- */

#define Q8_MT 3 /* inputs per tile (one group = two ymm halves) */

typedef struct {
    const rc_q8mat *w;
    const rc_q8act *x;
    const float *bias;
    float *Y;
    size_t ldy;
    int64_t r0, r1;
} q8_job;

#ifdef RC_Q8_AVXVNNI
/* weights as stored (biased u8), input bytes signed */
AINLINE __m256i dot4(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(acc, w, x); }
#define Q8_TABLE RC_Q8_NF4_U8
#define Q8_W8(v) (v)
#else
/* weights signed (w = u - 128): |w| times the input with w's sign, pairs exact in int16 */
AINLINE __m256i dot4(__m256i acc, __m256i w, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
#define Q8_TABLE RC_Q8_NF4
#define Q8_W8(v) _mm256_xor_si256((v), _mm256_set1_epi8((char)0x80))
#endif

/* steps 2s and 2s + 1 of a W4 chunk: the low nibbles and the high nibbles through the table */
AINLINE void w4_pair(const uint8_t *chunk, __m256i tbl, __m256i *lo, __m256i *hi) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)chunk), m = _mm256_set1_epi8(0x0f);
    *lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v, m));
    *hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
}

/* The 8 rows (half hh of group g) of input t; rows outside [r0, r1) left alone. */
AINLINE void store_half(const q8_job *j, int64_t g, int hh, int t, __m256 acc) {
    const int64_t row0 = g * RC_Q8_GROUP + 8 * hh;
    float v[8];
    _mm256_storeu_ps(v, acc);
    for (int l = 0; l < 8; l++) {
        const int64_t r = row0 + l;
        if (r >= j->r0 && r < j->r1) j->Y[(size_t)t * j->ldy + (size_t)r] = j->bias ? v[l] + j->bias[r] : v[l];
    }
}

/* the weights (as floats) of column jj of block b, rows of half hh of group g (decoded panel
 * dec, or the packed weights): byte jj % 4 of each dword of the step vector */
AINLINE __m256 peak_weight(const rc_q8mat *w, const uint8_t *dec, int64_t g, int64_t b, int jj, int hh) {
    const __m256i pick = _mm256_add_epi32(_mm256_setr_epi32((int)0x80808000, (int)0x80808004, (int)0x80808008,
                                                            (int)0x8080800c, (int)0x80808000, (int)0x80808004,
                                                            (int)0x80808008, (int)0x8080800c),
                                          _mm256_set1_epi32(jj & 3));
    if (dec || w->kind == RC_Q8_W8) {
        const uint8_t *step = dec ? dec + (size_t)b * 512 + 64 * (size_t)(jj >> 2) + 32 * (size_t)hh
                                  : w->w + ((size_t)g * (size_t)w->nb + (size_t)b) * 512 + 64 * (size_t)(jj >> 2) +
                                        32 * (size_t)hh;
        __m256i v = _mm256_loadu_si256((const __m256i *)step);
        if (!dec) v = Q8_W8(v); /* the stored form, as the tile reads it */
        const __m256i u = _mm256_shuffle_epi8(v, pick);
#ifdef RC_Q8_AVXVNNI
        return _mm256_cvtepi32_ps(_mm256_sub_epi32(u, _mm256_set1_epi32(128)));
#else
        return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(u, 24), 24));
#endif
    }
    const uint8_t *chunk = w->w + ((size_t)g * (size_t)w->nb + (size_t)b) * 256 + 64 * (size_t)(jj >> 3) + 32 * (size_t)hh;
    __m256i u = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)chunk), pick);
    u = (jj & 4) ? _mm256_srli_epi32(u, 4) : _mm256_and_si256(u, _mm256_set1_epi32(15));
    /* the signed table byte into the dword's low byte (indices >= 0x80 give 0), then sign-extend */
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)RC_Q8_NF4));
    const __m256i v = _mm256_shuffle_epi8(tbl, _mm256_or_si256(u, _mm256_set1_epi32((int)0x80808000)));
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24));
}

/* one group g x MT inputs (t0 ..), all blocks. dec: the group's decoded panel (block b at
 * dec + b * 512, steps in order), or NULL to decode from the packed weights. */
AINLINE void tile(const q8_job *j, const int MT, int64_t g, int t0, const uint8_t *dec) {
    const rc_q8mat *w = j->w;
    const rc_q8act *x = j->x;
    const int64_t nb = w->nb, nsb = nb >> w->sshift;
    const size_t K = (size_t)x->cols, bb = rc_q8_block_bytes(w);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)Q8_TABLE));
    __m256 acc[Q8_MT][2];
    RC_UNROLL
    for (int t = 0; t < MT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i is[Q8_MT][2];
        RC_UNROLL
        for (int t = 0; t < MT; t++) is[t][0] = is[t][1] = _mm256_setzero_si256();
        const int8_t *xb = x->q + (size_t)t0 * K + (size_t)b * RC_Q8_BLOCK;
        const uint8_t *blk = w->w + ((size_t)g * (size_t)nb + (size_t)b) * bb;
        RC_UNROLL
        for (int s = 0; s < 4; s++) {
            __m256i wv[2][2]; /* [step 2s / 2s + 1][half] */
            RC_UNROLL
            for (int hh = 0; hh < 2; hh++) {
                if (dec) {
                    wv[0][hh] = _mm256_load_si256((const __m256i *)(dec + (size_t)b * 512 + 128 * (size_t)s + 32 * (size_t)hh));
                    wv[1][hh] = _mm256_load_si256((const __m256i *)(dec + (size_t)b * 512 + 128 * (size_t)s + 64 + 32 * (size_t)hh));
                } else if (w->kind == RC_Q8_W4) {
                    w4_pair(blk + 64 * (size_t)s + 32 * (size_t)hh, tbl, &wv[0][hh], &wv[1][hh]);
                } else {
                    wv[0][hh] = Q8_W8(_mm256_loadu_si256((const __m256i *)(blk + 128 * (size_t)s + 32 * (size_t)hh)));
                    wv[1][hh] = Q8_W8(_mm256_loadu_si256((const __m256i *)(blk + 128 * (size_t)s + 64 + 32 * (size_t)hh)));
                }
            }
            RC_UNROLL
            for (int t = 0; t < MT; t++) {
                int32_t x0, x1;
                memcpy(&x0, xb + (size_t)t * K + 8 * (size_t)s, 4);
                memcpy(&x1, xb + (size_t)t * K + 8 * (size_t)s + 4, 4);
                const __m256i xv0 = _mm256_set1_epi32(x0), xv1 = _mm256_set1_epi32(x1);
                RC_UNROLL
                for (int hh = 0; hh < 2; hh++) is[t][hh] = dot4(dot4(is[t][hh], wv[0][hh], xv0), wv[1][hh], xv1);
            }
        }
        const float *wsg = w->ws + ((size_t)g * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP;
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const size_t xi = (size_t)(t0 + t) * (size_t)x->nb + (size_t)b;
            const __m256 dv = _mm256_set1_ps(x->d[xi]);
            RC_UNROLL
            for (int hh = 0; hh < 2; hh++) {
#ifdef RC_Q8_AVXVNNI
                const __m256i isum = _mm256_add_epi32(is[t][hh], _mm256_set1_epi32(x->corr[xi]));
#else
                const __m256i isum = is[t][hh];
#endif
                acc[t][hh] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_loadu_ps(wsg + 8 * hh), dv),
                                             acc[t][hh]);
            }
        }
    }
    /* the peaks of each input, ascending, after every block (q8.h) */
    RC_UNROLL
    for (int t = 0; t < MT; t++) {
        const size_t row = (size_t)(t0 + t);
        const int32_t *pc = x->pk_c + row * (size_t)x->nb;
        const float *px = x->pk_x + row * (size_t)x->nb;
        for (int k = 0; k < x->npk[row]; k++) {
            const int64_t b = pc[k] / RC_Q8_BLOCK;
            const int jj = pc[k] % RC_Q8_BLOCK;
            const __m256 pv = _mm256_set1_ps(px[k]);
            const float *wsg = w->ws + ((size_t)g * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP;
            RC_UNROLL
            for (int hh = 0; hh < 2; hh++)
                acc[t][hh] = _mm256_fmadd_ps(peak_weight(w, dec, g, b, jj, hh), _mm256_mul_ps(_mm256_loadu_ps(wsg + 8 * hh), pv),
                                             acc[t][hh]);
        }
    }
    RC_UNROLL
    for (int t = 0; t < MT; t++) {
        store_half(j, g, 0, t0 + t, acc[t][0]);
        store_half(j, g, 1, t0 + t, acc[t][1]);
    }
}

/* the decoded weights of group g, every block: block b at dec + b * 512, steps in order */
static void decode_group(const rc_q8mat *w, int64_t g, uint8_t *dec) {
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)Q8_TABLE));
    for (int64_t b = 0; b < w->nb; b++) {
        const uint8_t *blk = w->w + ((size_t)g * (size_t)w->nb + (size_t)b) * 256;
        uint8_t *dst = dec + (size_t)b * 512;
        for (int s = 0; s < 4; s++)
            for (int hh = 0; hh < 2; hh++) {
                __m256i lo, hi;
                w4_pair(blk + 64 * s + 32 * hh, tbl, &lo, &hi);
                _mm256_store_si256((__m256i *)(dst + 128 * s + 32 * hh), lo);
                _mm256_store_si256((__m256i *)(dst + 128 * s + 64 + 32 * hh), hi);
            }
    }
}

#ifndef Q8_PF_MIN_NT
#define Q8_PF_MIN_NT 6
#endif

static void avx2_q8_matmul(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                           int64_t r0, int64_t r1, void *scratch) {
    if (r0 >= r1 || nt < 1) return;
    const q8_job j = {w, x, bias, Y, ldy, r0, r1};
    const int predecode = scratch && w->kind == RC_Q8_W4 && nt >= Q8_PF_MIN_NT &&
                          (size_t)w->nb * 512 <= RC_Q8_SCRATCH_BYTES;
    for (int64_t g = r0 / RC_Q8_GROUP; g <= (r1 - 1) / RC_Q8_GROUP; g++) {
        const uint8_t *dec = NULL;
        if (predecode) {
            decode_group(w, g, (uint8_t *)scratch);
            dec = (const uint8_t *)scratch;
        }
        int t = 0;
        for (; t + Q8_MT <= nt; t += Q8_MT) tile(&j, Q8_MT, g, t, dec);
        if (nt - t == 2) tile(&j, 2, g, t, dec);
        if (nt - t == 1) tile(&j, 1, g, t, dec);
    }
}
_Static_assert(Q8_MT == 3, "avx2_q8_matmul covers input tails up to 2");

int RC_Q8_AVX2_FN(rc_kernels *k) {
    k->q8_quant = avx2_q8_quant;
    k->q8_matmul = avx2_q8_matmul;
#ifdef RC_Q8_AVXVNNI
    k->q8_name = "avx-vnni";
#else
    k->q8_name = "avx2";
#endif
    if (k->matmul_scratch < RC_Q8_SCRATCH_BYTES / sizeof(float)) k->matmul_scratch = RC_Q8_SCRATCH_BYTES / sizeof(float);
    return 1;
}

#else

RC_KERNELS_ABSENT(RC_Q8_AVX2_FN)

#endif
