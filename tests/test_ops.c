/* test_ops.c - the scalar reference kernels: canonical reduction order (bitwise against a literal
 * transcription of ops.h), own transcendentals against libm (accuracy only; libm is allowed in
 * tests), norms, dtype widening. */
#include "ops.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}
static float frand(uint32_t *s) { return (float)lcg(s) / 16777216.0f * 2.0f - 1.0f; }

/* literal transcription of the ops.h order */
static float spec_dot(const float *a, const float *b, size_t n) {
    float acc[16];
    for (int l = 0; l < 16; l++) acc[l] = 0.0f;
    for (size_t i = 0; i < n; i++) acc[i % 16] = fmaf(a[i], b[i], acc[i % 16]);
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) s[l] = s[l] + s[l + 4];
    for (int l = 0; l < 2; l++) s[l] = s[l] + s[l + 2];
    return s[0] + s[1];
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int ulp_diff(float a, float b) {
    int32_t ia = (int32_t)bits(a), ib = (int32_t)bits(b);
    if (ia < 0) ia = (int32_t)0x80000000 - ia;
    if (ib < 0) ib = (int32_t)0x80000000 - ib;
    int64_t d = (int64_t)ia - ib;
    return (int)(d < 0 ? -d : d);
}

Test(ops_reduce, dot_matches_spec_order_bitwise) {
    uint32_t s = 1;
    float a[300], b[300], ones[300];
    for (int i = 0; i < 300; i++) {
        a[i] = frand(&s) * (i % 7 == 0 ? 1e4f : 1.0f);
        b[i] = frand(&s);
        ones[i] = 1.0f;
    }
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 13)) {
        cr_assert_eq(bits(rc_dot_f32(a, b, n)), bits(spec_dot(a, b, n)), "n = %zu", n);
        cr_assert_eq(bits(rc_sum_f32(a, n)), bits(spec_dot(a, ones, n)), "sum n = %zu", n);
        cr_assert_eq(bits(rc_sumsq_f32(a, n)), bits(spec_dot(a, a, n)), "sumsq n = %zu", n);
    }
    /* the order is observable: lane 0 gets 1e8 and 1, lane 1 gets -1e8 */
    float x[17] = {1e8f, -1e8f};
    x[16] = 1.0f;
    cr_assert_eq(rc_sum_f32(x, 17), 0.0f); /* (1e8 + 1) + -1e8 in fp32 = 0, a naive loop gives 1 */
    cr_assert_eq(bits(rc_dot_f32(a, b, 0)), 0u); /* +0.0 */
}

Test(ops_reduce, matvec_bias_after_tree_and_dtypes) {
    float w[2 * 20], x[20], y[2], bias[2] = {0.5f, -3.0f};
    uint16_t wb[40];
    uint32_t s = 7;
    for (int i = 0; i < 40; i++) {
        w[i] = frand(&s);
        wb[i] = (uint16_t)(bits(w[i]) >> 16);
        w[i] = rc_bf16_to_f32(wb[i]); /* make w exactly representable in bf16 */
    }
    for (int i = 0; i < 20; i++) x[i] = frand(&s);
    rc_mat m = {RC_DT_F32, w, NULL, 2, 20}, mb = {RC_DT_BF16, wb, NULL, 2, 20};
    rc_matvec(&m, bias, x, y);
    for (int r = 0; r < 2; r++) cr_assert_eq(bits(y[r]), bits(spec_dot(w + r * 20, x, 20) + bias[r]));
    float yb[2];
    rc_matvec(&mb, bias, x, yb);
    cr_assert_eq(memcmp(y, yb, 8), 0);
    cr_assert_eq(rc_f16_to_f32(0x3c00), 1.0f);
    cr_assert_eq(rc_f16_to_f32(0xc000), -2.0f);
    cr_assert_eq(rc_f16_to_f32(0x0001), 5.9604644775390625e-08f); /* smallest subnormal */
    cr_assert_eq(rc_f16_to_f32(0x7bff), 65504.0f);
    cr_assert(isinf(rc_f16_to_f32(0x7c00)));
    cr_assert_eq(rc_bf16_to_f32(0x3f80), 1.0f);
}

Test(ops_transcendental, expf_accuracy) {
    int worst = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
        int d = ulp_diff(rc_expf(x), expf(x));
        if (d > worst) worst = d;
    }
    cr_expect_leq(worst, 1, "worst %d ulp", worst);
    cr_assert_eq(rc_expf(0.0f), 1.0f);
    cr_assert_eq(rc_expf(-200.0f), 0.0f);
    cr_assert(isinf(rc_expf(89.0f)));
    cr_assert(isnan(rc_expf(NAN)));
}

/* rc_erff is correctly rounded except in near-ties: an exhaustive run over all 1.08e9 floats
 * in [0, 4] found 11 one-ulp differences from (float) of glibc's double erf. Here every 1024th
 * bit pattern (1.06e6 values) must agree bit for bit, except at most 2, none by more than 1 ulp. */
Test(ops_transcendental, erf_correctly_rounded_sample) {
    int differ = 0, worst = 0;
    for (uint32_t u = 0; u <= 0x40800000u; u += 1024) {
        float x, nx;
        memcpy(&x, &u, 4);
        nx = -x;
        int d = ulp_diff(rc_erff(x), (float)erf((double)x));
        differ += d != 0;
        if (d > worst) worst = d;
        cr_assert_eq(ulp_diff(rc_erff(nx), -rc_erff(x)), 0, "odd symmetry at %a", (double)x);
    }
    cr_expect_leq(differ, 2, "%d values differ from the correctly rounded erf", differ);
    cr_expect_leq(worst, 1, "worst %d ulp", worst);
    cr_assert(signbit(rc_erff(-0.0f)) && rc_erff(-0.0f) == 0.0f);
    cr_assert_eq(rc_erff(INFINITY), 1.0f);
    cr_assert_eq(rc_erff(-INFINITY), -1.0f);
    cr_assert_eq(rc_erff(3.9199998f), (float)erf(3.9199998));
    cr_assert(isnan(rc_erff(NAN)));
}

Test(ops_transcendental, erf_sincos_pow_accuracy) {
    int we = 0, ws = 0, wc = 0;
    for (float x = -5.0f; x < 5.0f; x += 0.00173f) {
        int d = ulp_diff(rc_erff(x), (float)erf((double)x));
        if (d > we) we = d;
    }
    for (float x = -3000.0f; x < 3000.0f; x += 0.731f) {
        float s, c;
        rc_sincosf(x, &s, &c);
        int d1 = ulp_diff(s, (float)sin((double)x)), d2 = ulp_diff(c, (float)cos((double)x));
        if (fabsf(s) > 1e-3f && d1 > ws) ws = d1;
        if (fabsf(c) > 1e-3f && d2 > wc) wc = d2;
    }
    cr_expect_leq(we, 1, "erf %d ulp", we);
    cr_expect_leq(ws, 1, "sin %d ulp", ws);
    cr_expect_leq(wc, 1, "cos %d ulp", wc);
    cr_assert_eq(rc_erff(0.0f), 0.0f);
    cr_assert_eq(rc_erff(10.0f), 1.0f);
    for (int i = 0; i < 64; i++) {
        float e = (float)(2 * i) / 128.0f;
        cr_expect_leq(ulp_diff(rc_powf_pos(10000.0f, e), (float)pow(10000.0, (double)e)), 1, "e = %g", e);
    }
    cr_assert_eq(rc_powf_pos(2.0f, 3.0f), 8.0f);
    cr_expect_lt(fabs(rc_log_d(10.0) - log(10.0)), 1e-15);
    cr_expect_lt(fabs(rc_exp_d(-3.3) / exp(-3.3) - 1), 1e-15);
}

Test(ops_act, silu_gelu_forms) {
    float xs[5] = {-3.5f, -0.25f, 0.0f, 0.7f, 12.0f};
    for (int i = 0; i < 5; i++) {
        float x = xs[i];
        cr_assert_eq(bits(rc_silu(x)), bits(x / (1.0f + rc_expf(-x))));
        cr_assert_eq(bits(rc_gelu(x)), bits((x * 0.5f) * (1.0f + rc_erff(x * 0.70710677f))));
        cr_expect_lt(fabs(rc_gelu(x) - 0.5 * x * (1 + erf(x / sqrt(2.0)))), 1e-6 * (1 + fabs(x)));
    }
}

Test(ops_norm, rms_layer_l2) {
    float x[5] = {1, 2, 3, 4, 5}, w[5] = {1, 1, 1, 1, 2}, b[5] = {0, 0, 0, 0, 1}, y[5];
    rc_rmsnorm(x, w, 0.0f, y, 5);
    float r = 1.0f / sqrtf(55.0f / 5.0f);
    for (int i = 0; i < 5; i++) cr_assert_eq(bits(y[i]), bits(w[i] * (x[i] * r)));
    rc_layernorm(x, w, b, 0.0f, y, 5); /* mean 3, var 2 */
    float rl = 1.0f / sqrtf(2.0f);
    for (int i = 0; i < 5; i++) cr_assert_eq(bits(y[i]), bits(((x[i] - 3.0f) * rl) * w[i] + b[i]));
    rc_layernorm(x, w, b, 0.0f, x, 5); /* aliasing allowed */
    cr_assert_eq(memcmp(x, y, sizeof y), 0);
    float z[3] = {3, 4, 0}, o[3];
    rc_l2_normalize(z, 1e-6f, 2.0f, o, 3);
    cr_assert_eq(o[0], 1.2f);
    cr_assert_eq(o[1], 1.6f);
    float zero[2] = {0, 0};
    rc_l2_normalize(zero, 1e-6f, 1.0f, o, 2);
    cr_assert_eq(o[0], 0.0f);
    float sm[3] = {1.0f, 1.0f, 1.0f};
    rc_softmax(sm, 3);
    cr_assert_eq(sm[0], 1.0f / 3.0f);
}

/* ---- fp32 -> binary16 (the f16 KV cache's rounding; the oracle the SIMD paths match) ---- */

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Checks h = rc_f32_to_f16(x) for finite x against the definition, independently of how the
 * routine computes it: the sign is x's; |x| >= 65520 gives inf; otherwise h's value is at least as
 * close to x as both neighbours' (in double, exact for these magnitudes), and a tie goes to the
 * even h. Returns 1 when it holds. */
static int nearest_even(float x, uint16_t h) {
    const uint16_t sign = (uint16_t)(bits(x) >> 31 << 15), mag = (uint16_t)(h & 0x7fffu);
    if ((h & 0x8000u) != sign) return 0;
    if (fabsf(x) >= 65520.0f) return mag == 0x7c00u;
    if (mag > 0x7bffu) return 0;
    const double ax = fabs((double)x), d = fabs(ax - (double)rc_f16_to_f32(mag));
    for (int step = -1; step <= 1; step += 2) {
        const int nb = (int)mag + step;
        if (nb < 0 || nb > 0x7bff) continue;
        const double dn = fabs(ax - (double)rc_f16_to_f32((uint16_t)nb));
        if (dn < d || (dn == d && (mag & 1u))) return 0;
    }
    return 1;
}

Test(ops_f16, f32_to_f16_known_values) {
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, {0x3f800000u, 0x3c00}, /* 0, -0, 1 */
        {0x3f801000u, 0x3c00}, /* 1 + 2^-11: a tie, to the even 1 */
        {0x3f803000u, 0x3c02}, /* 1 + 3 x 2^-11: a tie, to the even 1 + 2^-9 */
        {0x3f801001u, 0x3c01}, /* just above the tie */
        {0x477fe000u, 0x7bff}, {0x477fefffu, 0x7bff}, /* 65504, just below 65520 */
        {0x477ff000u, 0x7c00}, {0xc77ff000u, 0xfc00}, /* 65520 ties to the even inf */
        {0x7f7fffffu, 0x7c00}, {0x7f800000u, 0x7c00}, {0xff800000u, 0xfc00},
        {0x38800000u, 0x0400}, /* 2^-14, the smallest normal */
        {0x387fe000u, 0x0400}, /* 2^-14 - 2^-25: a tie between 0x3ff and 0x400, to the even 0x400 */
        {0x387fc000u, 0x03ff}, /* the largest subnormal */
        {0x33800000u, 0x0001}, /* 2^-24 */
        {0x33000000u, 0x0000}, /* 2^-25: a tie, to the even 0 */
        {0x33000001u, 0x0001}, {0xb3000001u, 0x8001},
        {0x33c00000u, 0x0002}, /* 1.5 x 2^-24: a tie, to the even 2 */
        {0x34200000u, 0x0002}, /* 2.5 x 2^-24: a tie, to the even 2 */
        {0x00000001u, 0x0000}, {0x807fffffu, 0x8000}, /* fp32 subnormals */
        {0x7fc00000u, 0x7e00}, {0xffc00000u, 0xfe00}, /* quiet NaNs */
        {0x7f800001u, 0x7e00}, /* a signalling NaN is quieted; its payload below bit 13 is dropped */
        {0xff812345u, 0xfe09}, /* sign and the top fraction bits kept */
        {0x7fffffffu, 0x7fff},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(rc_f32_to_f16(f_of(cases[i].in)), cases[i].out, "0x%08x -> 0x%04x, want 0x%04x", cases[i].in,
                     rc_f32_to_f16(f_of(cases[i].in)), cases[i].out);
}

Test(ops_f16, f32_to_f16_round_trips_every_f16) {
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        const uint16_t want = (uint16_t)(nan ? h | 0x200u : h); /* NaNs come back quiet */
        cr_assert_eq(rc_f32_to_f16(rc_f16_to_f32((uint16_t)h)), want, "f16 0x%04x", h);
    }
}

/* Every exponent, both signs, the 13 dropped bits at, just below and just above the rounding
 * point with the kept lsb 0 and 1, plus a stride over all 2^32 patterns: nearest, ties to even. */
Test(ops_f16, f32_to_f16_is_nearest_even) {
    static const uint32_t low[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff};
    uint32_t s = 12345u;
    long n = 0;
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t sg = 0; sg < 2; sg++)
            for (int r = 0; r < 40; r++)
                for (size_t l = 0; l < sizeof low / sizeof low[0]; l++)
                    for (uint32_t lsb = 0; lsb < 2; lsb++) {
                        const uint32_t u = sg << 31 | e << 23 | (lcg(&s) & 0x7fc000u) | lsb << 13 | low[l];
                        cr_assert(nearest_even(f_of(u), rc_f32_to_f16(f_of(u))), "0x%08x -> 0x%04x", u,
                                  rc_f32_to_f16(f_of(u)));
                        n++;
                    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 9973) {
        const float x = f_of((uint32_t)u);
        if (isnan(x)) continue;
        cr_assert(nearest_even(x, rc_f32_to_f16(x)), "0x%08x -> 0x%04x", (unsigned)u, rc_f32_to_f16(x));
        n++;
    }
    cr_assert_gt(n, 500000);
}
