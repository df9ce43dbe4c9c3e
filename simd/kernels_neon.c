/* kernels_neon.c - the NEON kernel table (aarch64 only; empty of code elsewhere). Canonical order
 * of kernels.h: the 16 accumulators are four float32x4 registers (lanes 0-3, 4-7, 8-11, 12-15);
 * tree level one adds registers 0+2 and 1+3, level two adds those two, then pairs within one
 * register; the tail (n % 16) is finished in scalar fmaf on the spilled lanes. vfmaq_f32 is a
 * fused multiply-add (one rounding), exactly fmaf. Attention over an f16 K / V cache runs the same
 * kernels with each 4 elements widened by vcvt_f32_f16 (exact); fp32 -> f16 is vcvt_f16_f32.
 *
 * nf4: the 16 products codebook * absmax of a 64-block (the same single fp32 products as the
 * reference) are cut into 4 byte planes once per block (4 vqtbl4q); the 16 nibbles of 8 code bytes
 * are split in element order (vshr/vand + vzip), each plane looked up with one vqtbl1q, and two
 * levels of vzip assemble the fp32 weights in element order: 18 instructions per 16 weights
 * where the per-weight vqtbl4q of 64 bytes took 22 (and vqtbl4q is a multi-cycle instruction on
 * the common cores). f16 weights and nf4 rows whose length is not a multiple of 16 use the reference.
 */
#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include "nf4.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define AINLINE static inline __attribute__((always_inline))
/* the small constant loops of the hot kernels must be unrolled, so that their vector arrays
 * (accumulators, decoded weights, tables) live in registers: gcc -O2 left them loops over
 * stack arrays (a load and a store around every FMA, the 64-byte table reloaded per 4 weights) */
#define RC_UNROLL _Pragma("GCC unroll 8")

static float tree16(float *acc) {
    for (int l = 0; l < 8; l++) acc[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) acc[l] = acc[l] + acc[l + 4];
    for (int l = 0; l < 2; l++) acc[l] = acc[l] + acc[l + 2];
    return acc[0] + acc[1];
}

typedef struct {
    float32x4_t v[4];
} acc16;

AINLINE float tree_v(const acc16 *a) {
    float32x4_t s0 = vaddq_f32(a->v[0], a->v[2]), s1 = vaddq_f32(a->v[1], a->v[3]);
    float32x4_t s4 = vaddq_f32(s0, s1);
    float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

AINLINE float finish(const acc16 *a, const float *w_tail_vals, const float *x, size_t ntail) {
    float s[16];
    for (int k = 0; k < 4; k++) vst1q_f32(s + 4 * k, a->v[k]);
    for (size_t l = 0; l < ntail; l++) s[l] = fmaf(w_tail_vals[l], x[l], s[l]);
    return tree16(s);
}

/* 4 elements of a K / V row from i on, as fp32: fp32 (f16 = 0) or binary16 (f16 = 1) widened by
 * vcvt_f32_f16 (exact); the scalar element is rc_kv_elem (kernels.h). */
AINLINE float32x4_t ld4(const void *p, size_t i, int f16) {
    if (f16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + i)));
    return vld1q_f32((const float *)p + i);
}

/* the canonical dot of a[n] (fp32) and b[n] (fp32 or binary16) */
AINLINE float dot_any(const float *a, const void *b, size_t n, int f16) {
    acc16 acc;
    for (int k = 0; k < 4; k++) acc.v[k] = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++) acc.v[k] = vfmaq_f32(acc.v[k], vld1q_f32(a + i + 4 * k), ld4(b, i + 4 * k, f16));
    if (i == n) return tree_v(&acc);
    float s[16];
    for (int k = 0; k < 4; k++) vst1q_f32(s + 4 * k, acc.v[k]);
    for (int l = 0; i < n; i++, l++) s[l] = fmaf(a[i], rc_kv_elem(b, i, f16), s[l]);
    return tree16(s);
}

static float neon_dot_f32(const float *a, const float *b, size_t n) { return dot_any(a, b, n, 0); }

static float neon_sumsq_f32(const float *x, size_t n) { return neon_dot_f32(x, x, n); }

/* Four keys at a time, as on x86: 16 independent FMA chains instead of 4 (a core with two FMA
 * pipes of latency 4 needs 8 to stay busy); each score is still its own canonical dot. */
AINLINE void attn_scores_any(const float *q, const void *K, size_t ldk, int n, size_t D, float scale, float *s,
                             int f16) {
    int j = 0;
    if (D % 16 == 0)
        for (; j + 4 <= n; j += 4) {
            acc16 a[4];
            for (int u = 0; u < 4; u++)
                for (int k = 0; k < 4; k++) a[u].v[k] = vdupq_n_f32(0.0f);
            for (size_t i = 0; i < D; i += 16)
                for (int k = 0; k < 4; k++) {
                    const float32x4_t qv = vld1q_f32(q + i + 4 * k);
                    for (int u = 0; u < 4; u++)
                        a[u].v[k] = vfmaq_f32(a[u].v[k], qv, ld4(K, (size_t)(j + u) * ldk + i + 4 * (size_t)k, f16));
                }
            for (int u = 0; u < 4; u++) s[j + u] = tree_v(&a[u]) * scale;
        }
    for (; j < n; j++) s[j] = dot_any(q, rc_kv_elem_at(K, (size_t)j * ldk, f16), D, f16) * scale;
}

AINLINE void attn_wsum_any(const float *p, const void *V, size_t ldv, int n, size_t D, float *out, int f16) {
    size_t i0 = 0;
    for (; i0 + 64 <= D; i0 += 64) {
        float32x4_t acc[16];
        for (int k = 0; k < 16; k++) acc[k] = vld1q_f32(out + i0 + 4 * k);
        for (int j = 0; j < n; j++) {
            const float32x4_t pj = vdupq_n_f32(p[j]);
            const size_t v = (size_t)j * ldv + i0;
            for (int k = 0; k < 16; k++) acc[k] = vfmaq_f32(acc[k], pj, ld4(V, v + 4 * (size_t)k, f16));
        }
        for (int k = 0; k < 16; k++) vst1q_f32(out + i0 + 4 * k, acc[k]);
    }
    for (; i0 + 4 <= D; i0 += 4) {
        float32x4_t acc = vld1q_f32(out + i0);
        for (int j = 0; j < n; j++) acc = vfmaq_f32(acc, vdupq_n_f32(p[j]), ld4(V, (size_t)j * ldv + i0, f16));
        vst1q_f32(out + i0, acc);
    }
    for (; i0 < D; i0++) {
        float o = out[i0];
        for (int j = 0; j < n; j++) o = fmaf(p[j], rc_kv_elem(V, (size_t)j * ldv + i0, f16), o);
        out[i0] = o;
    }
}

RC_ATTN_KERNELS(neon)

/* vcvt_f16_f32: round to nearest even under the default FPCR (Linux starts every thread so, and
 * nothing here changes it); the last n % 4 through the same instruction on a zero-padded copy */
static void neon_f32_to_f16(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    if (i < n) {
        float t[4] = {0};
        uint16_t h[4];
        memcpy(t, x + i, (n - i) * sizeof *t);
        vst1_u16(h, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(t))));
        memcpy(y + i, h, (n - i) * sizeof *h);
    }
}

typedef struct {
    float32x4_t cb[4];
    uint8x16_t plane[4]; /* byte p of the 16 products codebook * absmax: a 16-entry vqtbl1q table each */
    uint8x16_t pidx[4];  /* byte p of product k sits at 4k + p of the 64 product bytes */
} nf4_state;

AINLINE void nf4_init(nf4_state *s) {
    for (int k = 0; k < 4; k++) s->cb[k] = vld1q_f32(RC_NF4_CODEBOOK + 4 * k);
    for (int p = 0; p < 4; p++) {
        uint8_t r[16];
        for (int k = 0; k < 16; k++) r[k] = (uint8_t)(4 * k + p);
        s->pidx[p] = vld1q_u8(r);
    }
}

/* the block's 16 products (the same single fp32 products as the reference), cut into 4 byte planes */
AINLINE void nf4_set_block(nf4_state *s, float absmax) {
    uint8x16x4_t t;
    RC_UNROLL
    for (int k = 0; k < 4; k++) t.val[k] = vreinterpretq_u8_f32(vmulq_n_f32(s->cb[k], absmax));
    RC_UNROLL
    for (int p = 0; p < 4; p++) s->plane[p] = vqtbl4q_u8(t, s->pidx[p]);
}

/* 16 weights: the 16 codes in element order (vshr/vand + vzip), one vqtbl1q per byte plane, then
 * bytes -> fp32 by two levels of vzip (elements stay in order: w[k] = elements 4k .. 4k + 3) */
AINLINE void nf4_lookup16(const nf4_state *s, const uint8_t *p, float32x4_t *w) {
    uint8x8_t b = vld1_u8(p);
    uint8x8x2_t z = vzip_u8(vshr_n_u8(b, 4), vand_u8(b, vdup_n_u8(15)));
    uint8x16_t nib = vcombine_u8(z.val[0], z.val[1]);
    const uint8x16_t b0 = vqtbl1q_u8(s->plane[0], nib), b1 = vqtbl1q_u8(s->plane[1], nib);
    const uint8x16_t b2 = vqtbl1q_u8(s->plane[2], nib), b3 = vqtbl1q_u8(s->plane[3], nib);
    const uint16x8_t l01 = vreinterpretq_u16_u8(vzip1q_u8(b0, b1)), h01 = vreinterpretq_u16_u8(vzip2q_u8(b0, b1));
    const uint16x8_t l23 = vreinterpretq_u16_u8(vzip1q_u8(b2, b3)), h23 = vreinterpretq_u16_u8(vzip2q_u8(b2, b3));
    w[0] = vreinterpretq_f32_u16(vzip1q_u16(l01, l23));
    w[1] = vreinterpretq_f32_u16(vzip2q_u16(l01, l23));
    w[2] = vreinterpretq_f32_u16(vzip1q_u16(h01, h23));
    w[3] = vreinterpretq_f32_u16(vzip2q_u16(h01, h23));
}

AINLINE void decode16(const rc_mat *w, rc_dtype dt, size_t off, size_t i, nf4_state *ns, float32x4_t *wv) {
    if (dt == RC_DT_F32) {
        const float *p = (const float *)w->data + off + i;
        RC_UNROLL
        for (int k = 0; k < 4; k++) wv[k] = vld1q_f32(p + 4 * k);
    } else if (dt == RC_DT_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + off + i;
        RC_UNROLL
        for (int k = 0; k < 4; k++) wv[k] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * k), 16));
    } else {
        size_t e = off + i;
        if (i == 0 || (e & 63) == 0) nf4_set_block(ns, w->absmax[e >> 6]);
        nf4_lookup16(ns, (const uint8_t *)w->data + (e >> 1), wv);
    }
}

AINLINE float value_at(const rc_mat *w, rc_dtype dt, size_t e) {
    if (dt == RC_DT_F32) return ((const float *)w->data)[e];
    if (dt == RC_DT_BF16) return rc_bf16_to_f32(((const uint16_t *)w->data)[e]);
    return rc_nf4_value((const uint8_t *)w->data, w->absmax, e);
}

AINLINE void row_block(const rc_mat *w, rc_dtype dt, const int NT, int64_t r, const float *X, size_t ldx,
                       const float *bias, float *Y, size_t ldy) {
    const size_t n = (size_t)w->cols, off = (size_t)r * n;
    acc16 acc[4];
    nf4_state ns;
    if (dt == RC_DT_NF4) nf4_init(&ns);
    RC_UNROLL
    for (int t = 0; t < NT; t++)
        RC_UNROLL
        for (int k = 0; k < 4; k++) acc[t].v[k] = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t wv[4];
        decode16(w, dt, off, i, &ns, wv);
        RC_UNROLL
        for (int t = 0; t < NT; t++) {
            const float *x = X + (size_t)t * ldx + i;
            RC_UNROLL
            for (int k = 0; k < 4; k++) acc[t].v[k] = vfmaq_f32(acc[t].v[k], wv[k], vld1q_f32(x + 4 * k));
        }
    }
    RC_UNROLL
    for (int t = 0; t < NT; t++) {
        float d;
        if (i == n) {
            d = tree_v(&acc[t]);
        } else {
            float tv[16];
            for (size_t k = i; k < n; k++) tv[k - i] = value_at(w, dt, off + k);
            d = finish(&acc[t], tv, X + (size_t)t * ldx + i, n - i);
        }
        Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
    }
}

AINLINE void mm_dtype(const rc_mat *w, rc_dtype dt, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                      size_t ldy, int64_t r0, int64_t r1) {
    /* input tile outermost: its 4 rows of X stay in L1/L2 while all weight rows stream past (with
     * the weight row outermost, every row re-read all nt inputs from L2/L3: 3x slower on x86) */
    int t = 0;
    for (; t + 4 <= nt; t += 4)
        for (int64_t r = r0; r < r1; r++)
            row_block(w, dt, 4, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
    for (; t < nt; t++)
        for (int64_t r = r0; r < r1; r++)
            row_block(w, dt, 1, r, X + (size_t)t * ldx, ldx, bias, Y + (size_t)t * ldy, ldy);
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

static void neon_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                        int64_t r0, int64_t r1, float *scratch) {
    (void)scratch;
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
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < nt; t++) {
            float d = rc_dot_row(w, r, X + (size_t)t * ldx);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
        }
}

static void neon_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out) {
    size_t i = 0;
    for (; i < n && ((start + i) & 15); i++) out[i] = rc_nf4_value(codes, absmax, start + i);
    nf4_state ns;
    nf4_init(&ns);
    for (; i + 16 <= n; i += 16) {
        size_t e = start + i;
        float32x4_t wv[4];
        nf4_set_block(&ns, absmax[e >> 6]);
        nf4_lookup16(&ns, codes + (e >> 1), wv);
        for (int k = 0; k < 4; k++) vst1q_f32(out + i + 4 * k, wv[k]);
    }
    for (; i < n; i++) out[i] = rc_nf4_value(codes, absmax, start + i);
}

RC_INSTALL_F32(rc_kernels_neon, RC_SIMD_NEON, "neon", neon, 0)

#else

RC_KERNELS_ABSENT(rc_kernels_neon)

#endif
