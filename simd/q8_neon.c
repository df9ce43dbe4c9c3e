/* q8_neon.c - the q8 profile's kernels (simd/q8.h) for NEON (aarch64 only; empty of code
 * elsewhere). q8_neon_dot.c compiles this file again with RC_Q8_NEON_DOT and the dot-product
 * extension (armv8.2-a+dotprod); simd.c installs that build where the CPU has it (HWCAP ASIMDDP).
 *
 * A packed group's 16 rows are four int32x4 quarters (rows 4k .. 4k+3 = bytes 16k .. 16k+15 of a
 * 64-byte step). Per step each lane adds the 4 products of its row's signed weights (w = u - 128:
 * the table RC_Q8_NF4 for nf4 codes, u ^ 0x80 for int8 weights) and 4 input bytes, exactly:
 *   dotprod: vdotq_laneq_s32 (sdot) takes the 4 input bytes from a lane of one 16-byte load;
 *   without: vmull_s8 into int16 products (|w q| <= 127 * 127), vpadalq_s16 pairs them into int32
 *     lanes (two per row), and one vpaddq_s32 per block folds the pairs into the rows.
 * Then the epilogue of q8.h in block order (vfmaq_f32: one rounding, fmaf) and the peaks. */
#include "kernels.h"

#ifdef RC_Q8_NEON_DOT
#define RC_Q8_NEON_FN rc_q8_neon_dot
#else
#define RC_Q8_NEON_FN rc_q8_neon
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && (!defined(RC_Q8_NEON_DOT) || defined(__ARM_FEATURE_DOTPROD))

#include <arm_neon.h>
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

/* q8.h's quantiser: maxima and the peak from integer compares of |x| bits; vcvtnq_s32_f32 rounds
 * half to even, as nearbyintf does in the default rounding mode. */
static void neon_q8_quant(const float *x, rc_q8act *a, int t) {
    const size_t K = (size_t)a->cols, nb = (size_t)a->nb;
    int8_t *qr = a->q + (size_t)t * K;
    float *d = a->d + (size_t)t * nb, *px = a->pk_x + (size_t)t * nb;
    int32_t *corr = a->corr + (size_t)t * nb, *pc = a->pk_c + (size_t)t * nb, np = 0;
    const uint32x4_t absmask = vdupq_n_u32(0x7fffffffu);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * RC_Q8_BLOCK;
        int8_t *q = qr + b * RC_Q8_BLOCK;
        uint32x4_t u[8], mx = vdupq_n_u32(0);
        for (int k = 0; k < 8; k++) {
            u[k] = vandq_u32(vreinterpretq_u32_f32(vld1q_f32(xb + 4 * k)), absmask);
            mx = vmaxq_u32(mx, u[k]);
        }
        const uint32_t m = vmaxvq_u32(mx);
        corr[b] = 0;
        if (m >= 0x7f800000u || m < RC_Q8_TINY) {
            memset(q, 0, RC_Q8_BLOCK);
            d[b] = m >= 0x7f800000u ? nan_f() : 0.0f;
            continue;
        }
        uint32_t us[RC_Q8_BLOCK];
        for (int k = 0; k < 8; k++) vst1q_u32(us + 4 * k, u[k]);
        int j = 0;
        while (us[j] != m) j++;
        uint32_t m2 = 0;
        for (int i = 0; i < RC_Q8_BLOCK; i++)
            if (i != j && us[i] > m2) m2 = us[i];
        float af, a2f;
        memcpy(&af, &m, 4);
        memcpy(&a2f, &m2, 4);
        uint32_t ms = m;
        int skip = -1;
        if (m2 < RC_Q8_TINY || af > RC_Q8_PEAK * a2f) { /* the peak goes aside */
            pc[np] = (int32_t)(b * RC_Q8_BLOCK) + j;
            px[np++] = xb[j];
            if (m2 < RC_Q8_TINY) {
                memset(q, 0, RC_Q8_BLOCK);
                d[b] = 0.0f;
                continue;
            }
            ms = m2;
            skip = j;
        }
        float sa;
        memcpy(&sa, &ms, 4);
        const float32x4_t s = vdupq_n_f32(127.0f / sa);
        int32x4_t sum = vdupq_n_s32(0);
        int32_t qi[RC_Q8_BLOCK];
        for (int k = 0; k < 8; k++) {
            const int32x4_t v = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(xb + 4 * k), s));
            vst1q_s32(qi + 4 * k, v);
        }
        if (skip >= 0) qi[skip] = 0;
        for (int k = 0; k < 8; k++) sum = vaddq_s32(sum, vld1q_s32(qi + 4 * k));
        for (int i = 0; i < RC_Q8_BLOCK; i++) q[i] = (int8_t)qi[i];
        corr[b] = -128 * vaddvq_s32(sum);
        d[b] = sa / 127.0f;
    }
    a->npk[t] = np;
}

/* ---- the tile ---- */

#define Q8_MT 2 /* inputs per tile (one group = four quarters) */

typedef struct {
    const rc_q8mat *w;
    const rc_q8act *x;
    const float *bias;
    float *Y;
    size_t ldy;
    int64_t r0, r1;
} q8_job;

/* the signed weights of steps 2s, 2s+1 of a block, quarter k (rows 4k .. 4k+3) */
AINLINE void weights_pair(const int W4, const uint8_t *blk, int s, int k, int8x16_t tbl, int8x16_t *w0,
                          int8x16_t *w1) {
    if (W4) {
        const uint8x16_t v = vld1q_u8(blk + 64 * s + 16 * k);
        *w0 = vqtbl1q_s8(tbl, vandq_u8(v, vdupq_n_u8(15)));
        *w1 = vqtbl1q_s8(tbl, vshrq_n_u8(v, 4));
    } else {
        *w0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(blk + 128 * s + 16 * k), vdupq_n_u8(0x80)));
        *w1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(blk + 128 * s + 64 + 16 * k), vdupq_n_u8(0x80)));
    }
}

AINLINE void store_group(const q8_job *j, int64_t g, int t, const float32x4_t *acc) {
    float v[RC_Q8_GROUP];
    for (int k = 0; k < 4; k++) vst1q_f32(v + 4 * k, acc[k]);
    for (int l = 0; l < RC_Q8_GROUP; l++) {
        const int64_t r = g * RC_Q8_GROUP + l;
        if (r >= j->r0 && r < j->r1) j->Y[(size_t)t * j->ldy + (size_t)r] = j->bias ? v[l] + j->bias[r] : v[l];
    }
}

/* group g x MT inputs (t0 ..), all blocks; W4: the weights are RC_Q8_W4 (else RC_Q8_W8). Every loop
 * over steps, quarters and inputs is unrolled, so the accumulators stay in registers (rolled, gcc
 * kept them on the stack and tested the weights' kind and the step's parity per quarter). */
AINLINE void tile(const q8_job *j, const int MT, const int W4, int64_t g, int t0) {
    const rc_q8mat *w = j->w;
    const rc_q8act *x = j->x;
    const int64_t nb = w->nb, nsb = nb >> w->sshift;
    const size_t K = (size_t)x->cols, bb = rc_q8_block_bytes(w);
    const int8x16_t tbl = vld1q_s8(RC_Q8_NF4);
    float32x4_t acc[Q8_MT][4];
    RC_UNROLL
    for (int t = 0; t < MT; t++)
        RC_UNROLL
        for (int k = 0; k < 4; k++) acc[t][k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w->w + ((size_t)g * (size_t)nb + (size_t)b) * bb;
        const float *wsg = w->ws + ((size_t)g * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP;
        float32x4_t dv[Q8_MT];
        RC_UNROLL
        for (int t = 0; t < MT; t++) dv[t] = vdupq_n_f32(x->d[(size_t)(t0 + t) * (size_t)x->nb + (size_t)b]);
#ifdef RC_Q8_NEON_DOT
        int8x16_t xv[Q8_MT][2];
        RC_UNROLL
        for (int t = 0; t < MT; t++) {
            const int8_t *xb = x->q + (size_t)(t0 + t) * K + (size_t)b * RC_Q8_BLOCK;
            xv[t][0] = vld1q_s8(xb);
            xv[t][1] = vld1q_s8(xb + 16);
        }
#endif
        /* quarter by quarter (rows 4k .. 4k+3), each finished into its epilogue before the next: one
         * quarter's integer sums live at a time (the sums are exact in any order, q8.h) */
        RC_UNROLL
        for (int k = 0; k < 4; k++) {
            int32x4_t is[Q8_MT];
#ifdef RC_Q8_NEON_DOT
            RC_UNROLL
            for (int t = 0; t < MT; t++) is[t] = vdupq_n_s32(0);
            RC_UNROLL
            for (int s = 0; s < 4; s++) {
                int8x16_t w0, w1;
                weights_pair(W4, blk, s, k, tbl, &w0, &w1);
                RC_UNROLL
                for (int t = 0; t < MT; t++) {
                    /* steps 2s, 2s+1 = input bytes 8s .. 8s+7: lanes 2s % 4, 2s % 4 + 1 of vector s / 2 */
                    const int8x16_t xs = xv[t][s >> 1];
                    if (s & 1) {
                        is[t] = vdotq_laneq_s32(is[t], w0, xs, 2);
                        is[t] = vdotq_laneq_s32(is[t], w1, xs, 3);
                    } else {
                        is[t] = vdotq_laneq_s32(is[t], w0, xs, 0);
                        is[t] = vdotq_laneq_s32(is[t], w1, xs, 1);
                    }
                }
            }
#else
            int32x4_t pr[Q8_MT][2]; /* rows 4k, 4k+1 (pairs) and rows 4k+2, 4k+3 */
            RC_UNROLL
            for (int t = 0; t < MT; t++) pr[t][0] = pr[t][1] = vdupq_n_s32(0);
            RC_UNROLL
            for (int s = 0; s < 4; s++) {
                int8x16_t w0, w1;
                weights_pair(W4, blk, s, k, tbl, &w0, &w1);
                RC_UNROLL
                for (int t = 0; t < MT; t++) {
                    const int8_t *xb = x->q + (size_t)(t0 + t) * K + (size_t)b * RC_Q8_BLOCK + 8 * (size_t)s;
                    int32_t x0, x1;
                    memcpy(&x0, xb, 4);
                    memcpy(&x1, xb + 4, 4);
                    const int8x16_t xv0 = vreinterpretq_s8_s32(vdupq_n_s32(x0)), xv1 = vreinterpretq_s8_s32(vdupq_n_s32(x1));
                    pr[t][0] = vpadalq_s16(pr[t][0], vmull_s8(vget_low_s8(w0), vget_low_s8(xv0)));
                    pr[t][1] = vpadalq_s16(pr[t][1], vmull_high_s8(w0, xv0));
                    pr[t][0] = vpadalq_s16(pr[t][0], vmull_s8(vget_low_s8(w1), vget_low_s8(xv1)));
                    pr[t][1] = vpadalq_s16(pr[t][1], vmull_high_s8(w1, xv1));
                }
            }
            RC_UNROLL
            for (int t = 0; t < MT; t++) is[t] = vpaddq_s32(pr[t][0], pr[t][1]);
#endif
            const float32x4_t wsk = vld1q_f32(wsg + 4 * k);
            RC_UNROLL
            for (int t = 0; t < MT; t++) acc[t][k] = vfmaq_f32(acc[t][k], vcvtq_f32_s32(is[t]), vmulq_f32(wsk, dv[t]));
        }
    }
    /* the peaks of each input, ascending, after every block (q8.h) */
    RC_UNROLL
    for (int t = 0; t < MT; t++) {
        const size_t row = (size_t)(t0 + t);
        const int32_t *pc = x->pk_c + row * (size_t)x->nb;
        const float *px = x->pk_x + row * (size_t)x->nb;
        for (int p = 0; p < x->npk[row]; p++) {
            const int64_t b = pc[p] / RC_Q8_BLOCK;
            float wv[RC_Q8_GROUP];
            for (int l = 0; l < RC_Q8_GROUP; l++) wv[l] = (float)rc_q8_value(w, g * RC_Q8_GROUP + l, pc[p]);
            const float *wsg = w->ws + ((size_t)g * (size_t)nsb + (size_t)(b >> w->sshift)) * RC_Q8_GROUP;
            const float32x4_t pv = vdupq_n_f32(px[p]);
            RC_UNROLL
            for (int k = 0; k < 4; k++)
                acc[t][k] = vfmaq_f32(acc[t][k], vld1q_f32(wv + 4 * k), vmulq_f32(vld1q_f32(wsg + 4 * k), pv));
        }
    }
    RC_UNROLL
    for (int t = 0; t < MT; t++) store_group(j, g, t0 + t, acc[t]);
}

static void neon_q8_matmul(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                           int64_t r0, int64_t r1, void *scratch) {
    (void)scratch;
    if (r0 >= r1 || nt < 1) return;
    const q8_job j = {w, x, bias, Y, ldy, r0, r1};
    for (int64_t g = r0 / RC_Q8_GROUP; g <= (r1 - 1) / RC_Q8_GROUP; g++) {
        int t = 0;
        if (w->kind == RC_Q8_W4) {
            for (; t + Q8_MT <= nt; t += Q8_MT) tile(&j, Q8_MT, 1, g, t);
            if (t < nt) tile(&j, 1, 1, g, t);
        } else {
            for (; t + Q8_MT <= nt; t += Q8_MT) tile(&j, Q8_MT, 0, g, t);
            if (t < nt) tile(&j, 1, 0, g, t);
        }
    }
}
_Static_assert(Q8_MT == 2, "neon_q8_matmul covers an input tail of 1");

int RC_Q8_NEON_FN(rc_kernels *k) {
    k->q8_quant = neon_q8_quant;
    k->q8_matmul = neon_q8_matmul;
#ifdef RC_Q8_NEON_DOT
    k->q8_name = "neon-dotprod";
#else
    k->q8_name = "neon";
#endif
    return 1;
}

#else

RC_KERNELS_ABSENT(RC_Q8_NEON_FN)

#endif
