/* kernels_wasm.c - the wasm SIMD128 kernel table (wasm32 with -msimd128 only; empty of code
 * elsewhere): the canonical order of kernels.h, the same bits as the scalar reference.
 *
 * wasm has no fused multiply-add (relaxed-simd's madd may or may not fuse, so its bits are not
 * fixed), so each fmaf(w, x, acc) is computed as web/wasm_fmaf.h explains, two lanes at a time in
 * f64x2: the product of two floats is exact in double, the sum is rounded once to double, and
 * rounding that to float is the single rounding of the exact sum unless the double is a float
 * midpoint, all of which have the low 28 bits of the mantissa zero. Every step folds each sum's
 * two 32-bit halves, shifted left by 4, into an unsigned minimum; a zero at the end (a possible
 * midpoint, an exact zero or a rare false alarm) sends the whole result to the reference, which
 * rounds those cases exactly. (Testing 16-bit pieces unshifted saves the shift but a product's
 * low bits are zero often enough that one dot in ten fell back.) The 16 accumulators live as eight
 * f64x2 that always hold float values (demoted and promoted back after every step).
 *
 * f32 weights, attention over an f32 K / V cache, the sums of squares, SiLU and softmax (rc_expf's
 * steps on four lanes) take this path; bf16, f16 and nf4 weights, the f16 KV cache, GELU and the
 * rest stay the reference's.
 *
 * Built with -mrelaxed-simd (recall-relaxed.wasm, web/web.mk), the same kernels run on
 * f32x4.relaxed_madd instead (kernels_wasm_madd.h), but only after this file proves at load that
 * the engine fuses it (madd_decide, below); otherwise this emulation, the same bits. */
#include "kernels.h"

#if defined(__wasm_simd128__)

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#define AINLINE static inline __attribute__((always_inline))

/* An empty asm that the optimiser cannot see through: without it clang 14 folds a demote followed
 * by a promote into per-lane scalar conversions (extract, f32.demote, f64.promote, replace), four
 * times the instructions of the two vector conversions. */
AINLINE v128_t opaque(v128_t v) {
    __asm__("" : "+r"(v));
    return v;
}

/* acc (2 lanes, doubles holding floats) += w * x, rounded to float as fmaf would; flag keeps the
 * unsigned minimum of every 32-bit half of every sum shifted left by 4: a zero is a possible
 * midpoint (the low half of a midpoint has its low 28 bits zero; a high half is zero so only for
 * values near 2.0 with 20 zero bits below, or near 2^-255: false alarms, rare) */
#define FMA2(acc, w, x, flag)                                                                              \
    do {                                                                                                   \
        const v128_t s_ = wasm_f64x2_add(wasm_f64x2_mul((w), (x)), (acc));                                 \
        (flag) = wasm_u32x4_min((flag), wasm_i32x4_shl(s_, 4));                                            \
        (acc) = wasm_f64x2_promote_low_f32x4(opaque(wasm_f32x4_demote_f64x2_zero(s_)));                   \
    } while (0)

AINLINE v128_t lo2(v128_t v) { return wasm_f64x2_promote_low_f32x4(v); }
AINLINE v128_t hi2(v128_t v) { return wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(v, v, 2, 3, 0, 1)); }

/* Four elements as two f64x2 (lanes 0-1, 2-3): from floats (exact widening) or from doubles
 * already widened (the matmul widens its inputs once, not once per weight row). */
AINLINE void ld4f(const float *p, v128_t *lo, v128_t *hi) {
    const v128_t v = wasm_v128_load(p);
    *lo = lo2(v);
    *hi = hi2(v);
}
AINLINE void ld4d(const double *p, v128_t *lo, v128_t *hi) {
    *lo = wasm_v128_load(p);
    *hi = wasm_v128_load(p + 2);
}

/* 4 elements of w and x into the lanes held by accumulators a (lanes 4q, 4q+1) and b (4q+2, 4q+3) */
#define STEP4(LDW, LDX, a, b, w, x, flag)                                                                  \
    do {                                                                                                   \
        v128_t wl_, wh_, xl_, xh_;                                                                         \
        LDW(w, &wl_, &wh_);                                                                                \
        LDX(x, &xl_, &xh_);                                                                                \
        FMA2(a, wl_, xl_, flag);                                                                           \
        FMA2(b, wh_, xh_, flag);                                                                           \
    } while (0)

AINLINE int suspect(v128_t flag) { return !wasm_i32x4_all_true(flag); }

/* Two accumulators (lanes 4q..4q+3) as one f32x4 (their doubles hold floats: exact) */
AINLINE v128_t pair(v128_t a, v128_t b) {
    return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(a), wasm_f32x4_demote_f64x2_zero(b), 0, 1, 4, 5);
}

/* The 16 lanes (eight f64x2) as floats, the tail (n % 16 elements) on the first lanes, the tree. */
AINLINE float finish(const v128_t *d, const float *w, const float *x, size_t tail) {
    float lanes[16];
    for (int i = 0; i < 8; i++) {
        lanes[2 * i] = (float)wasm_f64x2_extract_lane(d[i], 0);
        lanes[2 * i + 1] = (float)wasm_f64x2_extract_lane(d[i], 1);
    }
    for (size_t k = 0; k < tail; k++) lanes[k] = fmaf(w[k], x[k], lanes[k]);
    return rc_tree16(lanes);
}

/* The canonical tree of the 16 lanes, after the tail (n % 16 elements of wf, xf) on the first
 * lanes; without a tail in registers: the same float adds in the same pairs. */
AINLINE float tree(v128_t a0, v128_t a1, v128_t a2, v128_t a3, v128_t a4, v128_t a5, v128_t a6, v128_t a7,
                   const float *wf, const float *xf, size_t tail) {
    if (!tail) {
        const v128_t v0 = pair(a0, a1), v1 = pair(a2, a3), v2 = pair(a4, a5), v3 = pair(a6, a7);
        const v128_t s4 = wasm_f32x4_add(wasm_f32x4_add(v0, v2), wasm_f32x4_add(v1, v3)); /* l + l+8, + l+4 */
        const v128_t s2 = wasm_f32x4_add(s4, wasm_i32x4_shuffle(s4, s4, 2, 3, 0, 1));     /* + l+2 */
        return wasm_f32x4_extract_lane(s2, 0) + wasm_f32x4_extract_lane(s2, 1);
    }
    const v128_t d[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    return finish(d, wf, xf, tail);
}

/* The canonical dot of w and x over the first n16 = n - n % 16 elements (wf, xf: the same
 * elements as floats, for the tail); *bad = 1 when a lane needs the reference. */
#define DOT16(name, TW, TX, LDW, LDX)                                                                      \
    AINLINE float name(const TW *w, const TX *x, const float *wf, const float *xf, size_t n, int *bad) {   \
        v128_t a0 = wasm_f64x2_splat(0.0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;  \
        v128_t flag = wasm_u32x4_splat(0xffffffffu);                                                       \
        size_t i = 0;                                                                                      \
        for (; i + 16 <= n; i += 16) {                                                                     \
            STEP4(LDW, LDX, a0, a1, w + i, x + i, flag);                                                   \
            STEP4(LDW, LDX, a2, a3, w + i + 4, x + i + 4, flag);                                           \
            STEP4(LDW, LDX, a4, a5, w + i + 8, x + i + 8, flag);                                           \
            STEP4(LDW, LDX, a6, a7, w + i + 12, x + i + 12, flag);                                         \
        }                                                                                                  \
        *bad = suspect(flag);                                                                              \
        return tree(a0, a1, a2, a3, a4, a5, a6, a7, wf + i, xf + i, n - i);                                \
    }
DOT16(dot_ff, float, float, ld4f, ld4f)
DOT16(dot_fd, float, double, ld4f, ld4d)
DOT16(dot_dd, double, double, ld4d, ld4d)

static float wasm_dot_f32(const float *w, const float *x, size_t n) {
    int bad;
    const float d = dot_ff(w, x, w, x, n, &bad);
    return bad ? rc_dot_f32(w, x, n) : d;
}

static float wasm_sumsq_f32(const float *x, size_t n) {
    int bad;
    const float d = dot_ff(x, x, x, x, n, &bad);
    return bad ? rc_sumsq_f32(x, n) : d;
}

static void widen(const float *x, double *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = x[i];
}

/* Doubles of scratch the matmul uses (WASM_SCRATCH_FLOATS / 2): the inputs widened once, and a
 * weight row widened once for all the inputs when there are several (prefill). */
#define WASM_SCRATCH_FLOATS ((size_t)1 << 18)

static void wasm_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                        int64_t r0, int64_t r1, float *scratch) {
    const size_t n = (size_t)w->cols, cap = WASM_SCRATCH_FLOATS / 2;
    if (w->dtype != RC_DT_F32 || !scratch || 2 * n > cap) { /* bf16 / f16 / nf4, or no room: one dot each */
        for (int64_t r = r0; r < r1; r++)
            for (int t = 0; t < nt; t++) {
                const float *x = X + (size_t)t * ldx;
                const float d = w->dtype == RC_DT_F32 ? wasm_dot_f32((const float *)w->data + (size_t)r * n, x, n)
                                                      : rc_dot_row(w, r, x);
                Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
            }
        return;
    }
    double *wd = (double *)(void *)scratch, *xd = wd + n; /* 64-byte aligned (pool.c) */
    const int tc = (int)((cap - n) / n);                   /* inputs widened per pass */
    for (int t0 = 0; t0 < nt; t0 += tc) {
        const int tn = nt - t0 < tc ? nt - t0 : tc;
        for (int t = 0; t < tn; t++) widen(X + (size_t)(t0 + t) * ldx, xd + (size_t)t * n, n);
        for (int64_t r = r0; r < r1; r++) {
            const float *row = (const float *)w->data + (size_t)r * n;
            if (tn > 1) widen(row, wd, n);
            for (int t = 0; t < tn; t++) {
                const float *x = X + (size_t)(t0 + t) * ldx;
                int bad;
                float d = tn > 1 ? dot_dd(wd, xd + (size_t)t * n, row, x, n, &bad)
                                 : dot_fd(row, xd + (size_t)t * n, row, x, n, &bad);
                if (bad) d = rc_dot_f32(row, x, n);
                Y[(size_t)(t0 + t) * ldy + (size_t)r] = bias ? d + bias[r] : d;
            }
        }
    }
}

/* One query against n keys: the query widened once (head dims up to 512) for all of them. */
static void wasm_attn_scores(const float *q, const float *K, size_t ldk, int n, size_t D, float scale,
                             float *scores) {
    if (D > 512) {
        for (int j = 0; j < n; j++) scores[j] = wasm_dot_f32(q, K + (size_t)j * ldk, D) * scale;
        return;
    }
    double qd[512] __attribute__((aligned(16)));
    widen(q, qd, D);
    for (int j = 0; j < n; j++) {
        const float *k = K + (size_t)j * ldk;
        int bad;
        const float d = dot_fd(k, qd, k, q, D, &bad);
        scores[j] = (bad ? rc_dot_f32(q, k, D) : d) * scale;
    }
}

/* out[i] = fmaf(p, v[i], out[i]), four at a time; a suspect pair is redone by the exact fmaf */
static void wasm_axpy(float p, const float *v, float *out, size_t n) {
    const v128_t pd = wasm_f64x2_splat((double)p);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v128_t vv = wasm_v128_load(v + i), ov = wasm_v128_load(out + i);
        v128_t flag = wasm_u32x4_splat(0xffffffffu);
        v128_t a = lo2(ov), b = hi2(ov);
        FMA2(a, pd, lo2(vv), flag);
        FMA2(b, pd, hi2(vv), flag);
        if (suspect(flag)) {
            for (size_t k = i; k < i + 4; k++) out[k] = fmaf(p, v[k], out[k]);
            continue;
        }
        wasm_v128_store(out + i, wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(a), wasm_f32x4_demote_f64x2_zero(b),
                                                    0, 1, 4, 5));
    }
    for (; i < n; i++) out[i] = fmaf(p, v[i], out[i]);
}

/* out (head dims up to 256, a multiple of 4) held as doubles across all n keys, one check at the
 * end; a suspect lane anywhere redoes the whole sum by the reference from the saved out. */
static void wasm_attn_wsum(const float *p, const float *V, size_t ldv, int n, size_t D, float *out) {
    if (D > 256 || D % 4) {
        for (int j = 0; j < n; j++) wasm_axpy(p[j], V + (size_t)j * ldv, out, D);
        return;
    }
    double od[256] __attribute__((aligned(16)));
    float orig[256];
    memcpy(orig, out, D * sizeof *out);
    widen(out, od, D);
    v128_t flag = wasm_u32x4_splat(0xffffffffu);
    for (int j = 0; j < n; j++) {
        const v128_t pd = wasm_f64x2_splat((double)p[j]);
        const float *v = V + (size_t)j * ldv;
        for (size_t i = 0; i < D; i += 4) {
            const v128_t vv = wasm_v128_load(v + i);
            v128_t a = wasm_v128_load(od + i), b = wasm_v128_load(od + i + 2);
            FMA2(a, pd, lo2(vv), flag);
            FMA2(b, pd, hi2(vv), flag);
            wasm_v128_store(od + i, a);
            wasm_v128_store(od + i + 2, b);
        }
    }
    if (suspect(flag)) {
        memcpy(out, orig, D * sizeof *out);
        for (int j = 0; j < n; j++) rc_axpy(p[j], V + (size_t)j * ldv, out, D);
        return;
    }
    for (size_t i = 0; i < D; i++) out[i] = (float)od[i]; /* doubles holding floats: exact */
}

/* ---- the elementwise kernels: rc_expf's steps on four lanes ---- */

AINLINE v128_t splat_f(float f) { return wasm_f32x4_splat(f); }
AINLINE v128_t splat_d(float f) { return wasm_f64x2_splat((double)f); }

/* FMA2 with the exact test: rc_expf's steps often give sums that are exact floats (k ln2_hi has
 * few bits; k is often 0), which FMA2's cheap test would send to the reference every time. Here a
 * lane is marked (all ones in bad) only when its sum is a float midpoint in the normal range (low
 * 29 bits exactly 1 then 28 zeros) or lies below 2^-126 in magnitude without being zero (the
 * subnormal range, where midpoints sit higher) - the only sums whose rounding to float may not be
 * the single rounding of the exact one. */
#define FMA2P(acc, w, x, bad)                                                                              \
    do {                                                                                                   \
        const v128_t s_ = wasm_f64x2_add(wasm_f64x2_mul((w), (x)), (acc));                                 \
        const v128_t mid_ = wasm_i64x2_eq(wasm_v128_and(s_, wasm_i64x2_splat(0x1fffffff)),                 \
                                          wasm_i64x2_splat(0x10000000));                                   \
        const v128_t sub_ = wasm_v128_and(wasm_f64x2_lt(wasm_f64x2_abs(s_), wasm_f64x2_splat(0x1p-126)),   \
                                          wasm_f64x2_ne(s_, wasm_f64x2_splat(0.0)));                       \
        (bad) = wasm_v128_or((bad), wasm_v128_or(mid_, sub_));                                             \
        (acc) = wasm_f64x2_promote_low_f32x4(opaque(wasm_f32x4_demote_f64x2_zero(s_)));                   \
    } while (0)

/* out = fmaf(w, x, c) on two lanes (doubles holding floats), c a float constant */
#define FMA2C(out, w, x, c, bad)                                                                           \
    do {                                                                                                   \
        v128_t a_ = splat_d(c);                                                                            \
        FMA2P(a_, w, x, bad);                                                                              \
        (out) = a_;                                                                                        \
    } while (0)

/* rc_expf of four lanes by the reference's own steps: float products and sums as f32x4, each fmaf
 * as FMA2 on two lanes. *bad = 1 when a lane is outside the plain range (NaN, above 88.72, below
 * -103.97: the reference's special cases) or an fmaf was suspect: the caller then takes the
 * reference for those four. */
AINLINE v128_t expf4(v128_t x, int *bad) {
    const v128_t in = wasm_v128_and(wasm_f32x4_le(x, splat_f(88.72283935546875f)),
                                    wasm_f32x4_ge(x, splat_f(-103.97208404541015625f))); /* NaN: false */
    const v128_t t = wasm_f32x4_mul(x, splat_f(1.44269502162933349609375f));
    const v128_t k = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_add(
        t, wasm_v128_bitselect(splat_f(0.5f), splat_f(-0.5f), wasm_f32x4_ge(t, splat_f(0.0f)))));
    const v128_t nkf = wasm_f32x4_neg(wasm_f32x4_convert_i32x4(k));
    v128_t flag = wasm_i32x4_splat(0);
    v128_t rl = lo2(x), rh = hi2(x);
    const v128_t nkl = lo2(nkf), nkh = hi2(nkf);
    FMA2P(rl, nkl, splat_d(0.693145751953125f), flag);
    FMA2P(rh, nkh, splat_d(0.693145751953125f), flag);
    FMA2P(rl, nkl, splat_d(1.428606765330187045e-06f), flag);
    FMA2P(rh, nkh, splat_d(1.428606765330187045e-06f), flag);
    v128_t pl = splat_d(1.0f / 5040.0f), ph = pl;
    FMA2C(pl, pl, rl, 1.0f / 720.0f, flag);
    FMA2C(ph, ph, rh, 1.0f / 720.0f, flag);
    FMA2C(pl, pl, rl, 1.0f / 120.0f, flag);
    FMA2C(ph, ph, rh, 1.0f / 120.0f, flag);
    FMA2C(pl, pl, rl, 1.0f / 24.0f, flag);
    FMA2C(ph, ph, rh, 1.0f / 24.0f, flag);
    FMA2C(pl, pl, rl, 1.0f / 6.0f, flag);
    FMA2C(ph, ph, rh, 1.0f / 6.0f, flag);
    FMA2C(pl, pl, rl, 0.5f, flag);
    FMA2C(ph, ph, rh, 0.5f, flag);
    FMA2C(pl, pl, rl, 1.0f, flag);
    FMA2C(ph, ph, rh, 1.0f, flag);
    FMA2C(pl, pl, rl, 1.0f, flag);
    FMA2C(ph, ph, rh, 1.0f, flag);
    *bad = !wasm_i32x4_all_true(in) || wasm_v128_any_true(flag);
    /* k1 = k / 2 rounded toward zero as C divides, k2 = k - k1; 2^k1 and 2^k2 as float bits */
    const v128_t k1 = wasm_i32x4_shr(wasm_i32x4_add(k, wasm_v128_and(wasm_i32x4_shr(k, 31), wasm_i32x4_splat(1))), 1);
    const v128_t k2 = wasm_i32x4_sub(k, k1);
    const v128_t e1 = wasm_i32x4_shl(wasm_i32x4_add(k1, wasm_i32x4_splat(127)), 23);
    const v128_t e2 = wasm_i32x4_shl(wasm_i32x4_add(k2, wasm_i32x4_splat(127)), 23);
    return wasm_f32x4_mul(wasm_f32x4_mul(pair(pl, ph), e1), e2);
}

static void wasm_silu_mul(float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v128_t gv = wasm_v128_load(g + i);
        int bad;
        const v128_t e = expf4(wasm_f32x4_neg(gv), &bad);
        if (bad) {
            for (size_t j = i; j < i + 4; j++) g[j] = rc_silu(g[j]) * u[j];
            continue;
        }
        const v128_t si = wasm_f32x4_div(gv, wasm_f32x4_add(splat_f(1.0f), e)); /* x / (1 + e^-x) */
        wasm_v128_store(g + i, wasm_f32x4_mul(si, wasm_v128_load(u + i)));
    }
    for (; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

/* rc_softmax: the max, e^(s - max) (here four at a time), the canonical sum, the division */
static void wasm_softmax(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    const v128_t mv = splat_f(m);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int bad;
        const v128_t e = expf4(wasm_f32x4_sub(wasm_v128_load(s + i), mv), &bad);
        if (bad)
            for (size_t j = i; j < i + 4; j++) s[j] = rc_expf(s[j] - m);
        else
            wasm_v128_store(s + i, e);
    }
    for (; i < n; i++) s[i] = rc_expf(s[i] - m);
    const v128_t sum = splat_f(rc_sum_f32(s, n));
    for (i = 0; i + 4 <= n; i += 4) wasm_v128_store(s + i, wasm_f32x4_div(wasm_v128_load(s + i), sum));
    const float sf = wasm_f32x4_extract_lane(sum, 0);
    for (; i < n; i++) s[i] = s[i] / sf;
}

/* ---- relaxed-simd: a fused multiply-add where the engine proves to have one ---- */

#if defined(__wasm_relaxed_simd__)

/* The canonical tree of four f32x4 (lanes 0-3, 4-7, 8-11, 12-15), after the tail (n % 16 elements
 * of w, x) on the first lanes by the exact fmaf; without a tail: the same adds in registers. */
AINLINE float tree4(v128_t a0, v128_t a1, v128_t a2, v128_t a3, const float *w, const float *x, size_t tail) {
    if (!tail) {
        const v128_t s4 = wasm_f32x4_add(wasm_f32x4_add(a0, a2), wasm_f32x4_add(a1, a3)); /* l + l+8, + l+4 */
        const v128_t s2 = wasm_f32x4_add(s4, wasm_i32x4_shuffle(s4, s4, 2, 3, 0, 1));     /* + l+2 */
        return wasm_f32x4_extract_lane(s2, 0) + wasm_f32x4_extract_lane(s2, 1);
    }
    float lanes[16];
    wasm_v128_store(lanes, a0);
    wasm_v128_store(lanes + 4, a1);
    wasm_v128_store(lanes + 8, a2);
    wasm_v128_store(lanes + 12, a3);
    for (size_t k = 0; k < tail; k++) lanes[k] = fmaf(w[k], x[k], lanes[k]);
    return rc_tree16(lanes);
}

/* relaxed-simd leaves f32x4.relaxed_madd free to round once (fused) or twice; the proposal fixes
 * the choice for the whole run, so one proof at load holds for every later call */
#define MADD4(a, b, c) __builtin_wasm_relaxed_madd_f32x4((a), (b), (c))
#define MZ(name) mz_##name
#include "kernels_wasm_madd.h"
#undef MADD4
#undef MZ
/* what an engine that does not fuse computes: the proof below must refuse it */
#define MADD4(a, b, c) wasm_f32x4_add(wasm_f32x4_mul((a), (b)), (c))
#define MZ(name) uz_##name
#include "kernels_wasm_madd.h"
#undef MADD4
#undef MZ

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t xs32(uint32_t *s) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}
/* a float of magnitude 2^-8 .. 2^8, random sign and mantissa (a model's activations and weights) */
static float rnd(uint32_t *s) {
    const uint32_t m = xs32(s) & 0x807fffffu;
    return bitsf(m | (119u + xs32(s) % 17u) << 23);
}

#define PROBE_LANES 64
#define PROBE_CRAFTED 8

/* The probe's operands: 8 lanes where one rounding and two differ (the classic (1+2^-12)^2 - (1+2^-11),
 * and sums a hair off a float midpoint, where a product rounded first, or a sum rounded to double
 * first, lands on the midpoint and ties to the other float), then random ones. */
static void probe_operands(float *a, float *b, float *c) {
    const float e = 1.0f + 0x1p-12f, h = 0x1p-24f * (1.0f + 0x1p-23f), m = 1.0f - 0x1p-23f;
    const float ca[PROBE_CRAFTED] = {e, e, -e, h, -h, 2.0f * h, h, 2.0f * h};
    const float cb[PROBE_CRAFTED] = {e, e, e, m, m, m, -m, m};
    const float cc[PROBE_CRAFTED] = {-(1.0f + 0x1p-11f), -1.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-23f, -(1.0f + 0x1p-23f),
                                     2.0f + 0x1p-22f, 1.0f + 0x1p-23f, 3.0f + 0x1p-22f};
    uint32_t s = 0x2545f491u;
    for (int i = 0; i < PROBE_LANES; i++) {
        a[i] = i < PROBE_CRAFTED ? ca[i] : rnd(&s);
        b[i] = i < PROBE_CRAFTED ? cb[i] : rnd(&s);
        c[i] = i < PROBE_CRAFTED ? cc[i] : rnd(&s);
    }
}

typedef void (*madd_lanes_fn)(const float *, const float *, const float *, float *, size_t);

/* The first lane where madd differs from the exact fmaf (web/wasm_fmaf.h), or -1 */
static int probe_miss(madd_lanes_fn madd, char *why, size_t cap) {
    float a[PROBE_LANES], b[PROBE_LANES], c[PROBE_LANES], got[PROBE_LANES];
    probe_operands(a, b, c);
    madd(a, b, c, got, PROBE_LANES);
    for (int i = 0; i < PROBE_LANES; i++) {
        const float want = fmaf(a[i], b[i], c[i]);
        if (fbits(got[i]) != fbits(want)) {
            snprintf(why, cap, "lane %d: %a * %a + %a gave %a, fmaf %a", i, (double)a[i], (double)b[i], (double)c[i],
                     (double)got[i], (double)want);
            return i;
        }
    }
    return -1;
}

/* The kernels a proven madd would install, against the reference (the exact fmaf) on random data:
 * dots of lengths with and without a tail, a matmul of three inputs (pairs and a single), the
 * weighted sum over 16-, 4- and 1-wide pieces, SiLU and softmax. Returns the first kernel that
 * differs, or NULL. */
static const char *kernels_miss(const rc_kernels *z) {
    enum { N = 300, T = 3, KEYS = 7, D = 71 };
    static float w[N], x[T * N], y[T], v[KEYS * D], o1[D], o2[D], g1[N], g2[N];
    uint32_t s = 0x9e3779b9u;
    for (int i = 0; i < N; i++) w[i] = rnd(&s);
    for (int i = 0; i < T * N; i++) x[i] = rnd(&s);
    static const size_t lens[] = {1, 15, 16, 17, 64, 100, 128, 255, 256, 300};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        if (fbits(z->dot_f32(w, x, lens[l])) != fbits(rc_dot_f32(w, x, lens[l]))) return "dot";
        if (fbits(z->sumsq_f32(x, lens[l])) != fbits(rc_sumsq_f32(x, lens[l]))) return "sum of squares";
        const rc_mat m = {.dtype = RC_DT_F32, .data = w, .rows = 1, .cols = (int64_t)lens[l]};
        z->matmul(&m, NULL, x, N, T, y, 1, 0, 1, NULL);
        for (int t = 0; t < T; t++)
            if (fbits(y[t]) != fbits(rc_dot_f32(w, x + t * N, lens[l]))) return "matmul";
    }
    for (int i = 0; i < KEYS * D; i++) v[i] = rnd(&s);
    for (int i = 0; i < D; i++) o1[i] = o2[i] = 0.0f;
    z->attn_wsum(x, v, D, KEYS, D, o1);
    for (int j = 0; j < KEYS; j++) rc_axpy(x[j], v + j * D, o2, D);
    for (int i = 0; i < D; i++)
        if (fbits(o1[i]) != fbits(o2[i])) return "attention weighted sum";
    for (int i = 0; i < N; i++) g1[i] = g2[i] = rnd(&s) * 16.0f;
    z->silu_mul(g1, w, N);
    for (int i = 0; i < N; i++)
        if (fbits(g1[i]) != fbits(rc_silu(g2[i]) * w[i])) return "SiLU";
    for (int i = 0; i < N; i++) g1[i] = g2[i] = x[i] * 8.0f;
    z->softmax(g1, N);
    rc_softmax(g2, N);
    for (int i = 0; i < N; i++)
        if (fbits(g1[i]) != fbits(g2[i])) return "softmax";
    return NULL;
}

/* 1: the madd kernels are installed (fused proven), 0: the exact emulation; decided once */
static int madd_use = -1;
static int madd_sim; /* RECALL_WASM_MADD=unfused: the uz_ kernels stand in for an engine's madd */
static char madd_text[256];

static int madd_decide(void) {
    if (madd_use >= 0) return madd_use;
    const char *env = getenv("RECALL_WASM_MADD");
    madd_use = 0;
    if (env && !strcmp(env, "off")) {
        snprintf(madd_text, sizeof madd_text, "exact emulation (RECALL_WASM_MADD=off)");
        return madd_use;
    }
    madd_sim = env && !strcmp(env, "unfused");
    const char *what = madd_sim ? "the simulated unfused madd (RECALL_WASM_MADD=unfused)" : "relaxed-simd's madd";
    char why[160];
    /* the probe's operands must tell one rounding from two, or it proves nothing */
    const int u = probe_miss(uz_madd_lanes, why, sizeof why);
    if (u < 0 || u >= PROBE_CRAFTED) {
        snprintf(madd_text, sizeof madd_text, "exact emulation (the probe's operands do not tell fused from unfused)");
        return madd_use;
    }
    if (probe_miss(madd_sim ? uz_madd_lanes : mz_madd_lanes, why, sizeof why) >= 0) {
        snprintf(madd_text, sizeof madd_text, "exact emulation (%s is not fused: %s)", what, why);
        return madd_use;
    }
    rc_kernels z;
    rc_kernels_scalar(&z);
    if (madd_sim)
        uz_install(&z);
    else
        mz_install(&z);
    const char *miss = kernels_miss(&z);
    if (miss) {
        snprintf(madd_text, sizeof madd_text, "exact emulation (%s passed the probe but its %s differs from fmaf's)", what,
                 miss);
        return madd_use;
    }
    snprintf(madd_text, sizeof madd_text, "fused multiply-add (%s proven fused at load: %d probe lanes, 7 kernels)", what,
             PROBE_LANES);
    return madd_use = 1;
}

const char *rc_wasm_madd_info(void) {
    madd_decide();
    return madd_text;
}
#else
const char *rc_wasm_madd_info(void) { return "exact emulation (this module has no relaxed-simd)"; }
#endif

int rc_kernels_wasm(rc_kernels *k) {
    RC_SET_BASE(k, RC_SIMD_WASM, "wasm", wasm, WASM_SCRATCH_FLOATS);
    k->silu_mul = wasm_silu_mul;
    k->softmax = wasm_softmax;
#if defined(__wasm_relaxed_simd__)
    if (madd_decide()) {
        if (madd_sim)
            uz_install(k);
        else
            mz_install(k);
    }
#endif
    return 1;
}

#else
RC_KERNELS_ABSENT(rc_kernels_wasm)
#endif
