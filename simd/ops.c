/* ops.c - scalar fp32 reference kernels (the bit-exact specification; see ops.h for the order
 * of every rounding). No libm transcendentals: exp/erf/sin/cos/log are computed here with
 * +,-,*,/,fmaf,fma,sqrtf only, so every IEEE platform gives the same bits. */
#include "ops.h"

#include "nf4.h"

#include <math.h>
#include <string.h>

/* ---- weight views ---- */

recall_status rc_mat_from_tensor(const rc_tensor *t, rc_mat *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    if (!t) return rc_fail(err, RECALL_E_ARG, "rc_mat_from_tensor: no tensor");
    if (t->dtype != RC_DT_F32 && t->dtype != RC_DT_BF16 && t->dtype != RC_DT_F16 && t->dtype != RC_DT_NF4)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be a weight matrix", t->name,
                       rc_dtype_name(t->dtype));
    int64_t rows = t->ndim >= 2 ? t->shape[0] : 1;
    if (rows <= 0 || t->numel <= 0 || t->numel % rows != 0)
        return rc_fail(err, RECALL_E_SHAPE, "tensor '%s': empty or ragged matrix", t->name);
    if (t->dtype == RC_DT_NF4 && (t->numel % 64 != 0 || !t->absmax))
        return rc_fail(err, RECALL_E_SHAPE, "tensor '%s': nf4 needs numel %% 64 == 0", t->name);
    out->dtype = t->dtype;
    out->data = t->data;
    out->absmax = t->absmax;
    out->rows = rows;
    out->cols = t->numel / rows;
    return RECALL_OK;
}

#define RC_WEIGHT_DTYPES ((1u << RC_DT_F32) | (1u << RC_DT_BF16) | (1u << RC_DT_F16) | (1u << RC_DT_NF4))

recall_status rc_blob_mat(const rc_blob *b, const char *name, int64_t rows, int64_t cols, rc_mat *out,
                          recall_err *err) {
    const rc_tensor *t;
    int64_t shape[2] = {rows, cols};
    RC_TRY(rc_blob_expect(b, name, RC_WEIGHT_DTYPES, 2, shape, &t, err));
    return rc_mat_from_tensor(t, out, err);
}

recall_status rc_blob_vec(const rc_blob *b, const char *name, int64_t n, float *dst, recall_err *err) {
    const rc_tensor *t = rc_blob_find(b, name);
    if (!t) return rc_fail(err, RECALL_E_MISSING, "%s: tensor '%s' missing", rc_blob_path(b), name);
    if (t->numel != n)
        return rc_fail(err, RECALL_E_SHAPE, "%s: tensor '%s' has %lld elements, config expects %lld",
                       rc_blob_path(b), name, (long long)t->numel, (long long)n);
    if (n == 0) return RECALL_OK;
    rc_mat m;
    if (t->dtype == RC_DT_NF4 || t->ndim == 0 || t->ndim == 1) { /* view as one row */
        if (!(t->dtype == RC_DT_F32 || t->dtype == RC_DT_BF16 || t->dtype == RC_DT_F16 || t->dtype == RC_DT_NF4))
            return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s, not a float", rc_blob_path(b),
                           name, rc_dtype_name(t->dtype));
        if (t->dtype == RC_DT_NF4 && (!t->absmax || n % 64 != 0))
            return rc_fail(err, RECALL_E_SHAPE, "%s: nf4 tensor '%s' malformed", rc_blob_path(b), name);
        m.dtype = t->dtype;
        m.data = t->data;
        m.absmax = t->absmax;
        m.rows = 1;
        m.cols = n;
    } else {
        RC_TRY(rc_mat_from_tensor(t, &m, err));
        m.cols = n; /* flat */
        m.rows = 1;
    }
    rc_mat_row_f32(&m, 0, dst);
    return RECALL_OK;
}

float rc_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float rc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 31u, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t rc_f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf, or NaN: quieted, the top fraction bits kept */
        return (uint16_t)(sign | (a == 0x7f800000u ? 0x7c00u : 0x7e00u | ((a >> 13) & 0x3ffu)));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 = 65504 + half an ulp: inf */
    if (a >= 0x38800000u) { /* f16 normal: rebias, then round the 13 dropped bits to nearest even */
        a -= 112u << 23;
        a += 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | (a >> 13)); /* a carry out of the fraction bumps the exponent */
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: ties to the even 0 */
    /* f16 subnormal: round(x * 2^24) to nearest even; x = m * 2^(e - 150), so x * 2^24 = m >> (126 - e) */
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, sh = 126u - (a >> 23); /* 14 .. 24 */
    const uint32_t r = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    return (uint16_t)(sign | (r + (rem > half || (rem == half && (r & 1u))))); /* 0x400 = the smallest normal */
}

float rc_mat_get(const rc_mat *w, int64_t r, int64_t c) {
    size_t e = (size_t)(r * w->cols + c);
    switch (w->dtype) {
    case RC_DT_F32: return ((const float *)w->data)[e];
    case RC_DT_BF16: return rc_bf16_to_f32(((const uint16_t *)w->data)[e]);
    case RC_DT_F16: return rc_f16_to_f32(((const uint16_t *)w->data)[e]);
    case RC_DT_NF4: return rc_nf4_value((const uint8_t *)w->data, w->absmax, e);
    default: return 0.0f;
    }
}

int rc_mat_rows(const rc_mat *w, int64_t row0, int64_t n, rc_mat *out) {
    const size_t e = (size_t)(row0 * w->cols);
    *out = *w;
    out->rows = n;
    switch (w->dtype) {
    case RC_DT_F32: out->data = (const float *)w->data + e; return 1;
    case RC_DT_BF16:
    case RC_DT_F16: out->data = (const uint16_t *)w->data + e; return 1;
    case RC_DT_NF4:
        if (e % 64) return 0;
        out->data = (const uint8_t *)w->data + e / 2;
        out->absmax = w->absmax + e / 64;
        return 1;
    default: return 0;
    }
}

void rc_mat_release(const rc_blob *b, const rc_mat *w, int64_t r0, int64_t r1) {
    if (!b || r1 <= r0) return;
    const size_t e0 = (size_t)r0 * (size_t)w->cols, n = (size_t)(r1 - r0) * (size_t)w->cols;
    if (w->dtype == RC_DT_NF4) {
        const uint8_t *c = (const uint8_t *)w->data + e0 / 2, *a = (const uint8_t *)(w->absmax + e0 / 64);
        const size_t na = w->absmax ? n / 64 * sizeof(float) : 0;
        if (na && a >= c + n / 2 && a - (c + n / 2) < 64) { /* the absmax right after the codes: one range, */
            rc_blob_release(b, c, (size_t)(a - c) + na);    /* so that the page they share goes too */
        } else {
            rc_blob_release(b, c, n / 2);
            if (na) rc_blob_release(b, a, na);
        }
    } else {
        rc_blob_release(b, (const uint8_t *)w->data + e0 * rc_dtype_size(w->dtype), n * rc_dtype_size(w->dtype));
    }
}

void rc_mat_row_f32(const rc_mat *w, int64_t r, float *out) {
    for (int64_t c = 0; c < w->cols; c++) out[c] = rc_mat_get(w, r, c);
}

/* ---- canonical reductions ---- */

float rc_tree16(float *acc) {
    for (int l = 0; l < 8; l++) acc[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) acc[l] = acc[l] + acc[l + 4];
    for (int l = 0; l < 2; l++) acc[l] = acc[l] + acc[l + 2];
    return acc[0] + acc[1];
}

float rc_dot_f32(const float *a, const float *b, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
    for (int l = 0; i < n; i++, l++) acc[l] = fmaf(a[i], b[i], acc[l]);
    return rc_tree16(acc);
}

float rc_sum_f32(const float *x, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = acc[l] + x[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] = acc[l] + x[i];
    return rc_tree16(acc);
}

float rc_sumsq_f32(const float *x, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = fmaf(x[i + l], x[i + l], acc[l]);
    for (int l = 0; i < n; i++, l++) acc[l] = fmaf(x[i], x[i], acc[l]);
    return rc_tree16(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_bf16_to_f32(w[i]), x[i], acc[i & 15]);
    return rc_tree16(acc);
}

float rc_dot_f16(const uint16_t *w, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_f16_to_f32(w[i]), x[i], acc[i & 15]);
    return rc_tree16(acc);
}

static float dot_nf4(const uint8_t *codes, const float *absmax, size_t start, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_nf4_value(codes, absmax, start + i), x[i], acc[i & 15]);
    return rc_tree16(acc);
}

float rc_dot_row(const rc_mat *w, int64_t r, const float *x) {
    size_t n = (size_t)w->cols, off = (size_t)r * n;
    switch (w->dtype) {
    case RC_DT_F32: return rc_dot_f32((const float *)w->data + off, x, n);
    case RC_DT_BF16: return dot_bf16((const uint16_t *)w->data + off, x, n);
    case RC_DT_F16: return rc_dot_f16((const uint16_t *)w->data + off, x, n);
    case RC_DT_NF4: return dot_nf4((const uint8_t *)w->data, w->absmax, off, x, n);
    default: return NAN;
    }
}

void rc_matvec_rows(const rc_mat *w, const float *bias, const float *x, float *y, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        float d = rc_dot_row(w, r, x);
        y[r] = bias ? d + bias[r] : d;
    }
}

void rc_matvec(const rc_mat *w, const float *bias, const float *x, float *y) {
    rc_matvec_rows(w, bias, x, y, 0, w->rows);
}

void rc_axpy(float a, const float *x, float *out, size_t n) {
    for (size_t j = 0; j < n; j++) out[j] = fmaf(a, x[j], out[j]);
}

void rc_axpy_f16(float a, const uint16_t *x, float *out, size_t n) {
    for (size_t j = 0; j < n; j++) out[j] = fmaf(a, rc_f16_to_f32(x[j]), out[j]);
}

float rc_softmax_max(const float *s, size_t n) {
    float m = s[0];
    for (size_t i = 1; i < n; i++)
        if (s[i] > m) m = s[i];
    return m;
}

float rc_softmax_tail(float *s, size_t i, size_t n, float m, float *lanes) {
    for (int l = 0; i + (size_t)l < n; l++) {
        s[i + l] = rc_expf(s[i + l] - m);
        lanes[l] = lanes[l] + s[i + l];
    }
    return rc_tree16(lanes);
}

void rc_softmax(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    for (size_t i = 0; i < n; i++) s[i] = rc_expf(s[i] - m);
    float sum = rc_sum_f32(s, n);
    for (size_t i = 0; i < n; i++) s[i] = s[i] / sum;
}

/* ---- transcendentals ---- */

static float pow2i_f(int k) { /* 2^k for -126 <= k <= 127, exact */
    uint32_t u = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float rc_expf(float x) {
    if (x != x) return x;
    if (x > 88.72283935546875f) return INFINITY;
    if (x < -103.97208404541015625f) return 0.0f;
    const float log2e = 1.44269502162933349609375f;
    const float ln2_hi = 0.693145751953125f;          /* 0x3f317200: k*ln2_hi exact */
    const float ln2_lo = 1.428606765330187045e-06f;
    float t = x * log2e;
    int k = (int)(t >= 0.0f ? t + 0.5f : t - 0.5f); /* round half away from zero */
    float kf = (float)k;
    float r = fmaf(-kf, ln2_hi, x);
    r = fmaf(-kf, ln2_lo, r);
    /* e^r, |r| <= ~0.35, Taylor to degree 7 (truncation < 0.05 ulp) */
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int k1 = k / 2, k2 = k - k1;
    return (p * pow2i_f(k1)) * pow2i_f(k2);
}

static double pow2i_d(int k) { /* 2^k for -1022 <= k <= 1023 */
    uint64_t u = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

double rc_exp_d(double x) {
    if (x != x) return x;
    if (x > 709.0) return INFINITY;
    if (x < -708.0) return 0.0;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double t = x * 1.44269504088896338700e+00;
    int k = (int)(t >= 0.0 ? t + 0.5 : t - 0.5);
    double r = (x - k * ln2_hi) - k * ln2_lo;
    double p = 1.0, term = 1.0;
    for (int i = 1; i <= 20; i++) { /* |r| <= 0.35: 0.35^21/21! ~ 1e-29 */
        term = term * r / i;
        p = p + term;
    }
    return p * pow2i_d(k);
}

double rc_log_d(double x) {
    if (!(x > 0.0)) return x == 0.0 ? -INFINITY : NAN;
    if (x == INFINITY) return x;
    uint64_t u;
    memcpy(&u, &x, 8);
    int e = (int)((u >> 52) & 0x7ff);
    if (e == 0) { /* subnormal: scale up */
        x *= 18014398509481984.0; /* 2^54 */
        memcpy(&u, &x, 8);
        e = (int)((u >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    u = (u & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    double m;
    memcpy(&m, &u, 8);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, sum = 0.0, pw = s;
    for (int i = 0; i < 16; i++) {
        sum += pw / (2 * i + 1);
        pw *= s2;
    }
    return 2.0 * sum + e * 0.6931471805599453094;
}

float rc_powf_pos(float base, float e) {
    return (float)rc_exp_d((double)e * rc_log_d((double)base));
}

/* rc_erff coefficients: tools/fit_erf.py, DEG = 10; max rel. error per interval:
 *   8.6e-16 2.8e-13 8.2e-14 6.3e-15 1.7e-14 3.8e-15 8.9e-16 1.8e-15 */
const double rc_erf_coef[RC_ERF_DEG + 1][8] = { /* [power][interval] */
    {0x1.20dd750429b6ep+0, 0x1.6c1c9759d0e61p-1, 0x1.d8865d98abe02p-1, 0x1.f92d077f8d56ep-1, 0x1.ff404760319b2p-1, 0x1.fff2cfb0453d9p-1, 0x1.ffff6f9f67e55p-1, 0x1.fffffc2f171e2p-1},
    {-0x1.812746b037966p-2, 0x1.492e42d79af3dp-1, 0x1.e4652fadaf182p-3, 0x1.b05530321dffbp-5, 0x1.d4143a9eb9b89p-8, 0x1.3360ccd0d9d01p-11, 0x1.e9b5e8c7dbd26p-16, 0x1.d9371e6a41f31p-21},
    {0x1.ce2f21a0157ccp-4, -0x1.edc564435886ep-2, -0x1.2ebf3dcca16a2p-2, -0x1.7a4a8a2bd0c94p-4, -0x1.074b60f8ef554p-6, -0x1.a6a519a10d0ccp-10, -0x1.8de3cd2724a4ap-14, -0x1.bba3ac187941bp-19},
    {-0x1.b82ce2efe37e1p-6, 0x1.b6e856f838914p-6, 0x1.571d01e9340cbp-3, 0x1.7148c3d75bf52p-4, 0x1.63ef61adad597p-6, 0x1.69cf46dbc346dp-9, 0x1.9aa48b3131ceap-13, 0x1.0b6a764e969aep-17},
    {0x1.565bbf70f8ec8p-8, 0x1.349b5eb5c2925p-3, -0x1.93a9a6fe0acd0p-8, -0x1.8a0da56170794p-5, -0x1.38a983136eb51p-6, -0x1.ab0c2737bbd41p-9, -0x1.2c7d5f64c3a54p-12, -0x1.d06f5c4196b80p-17},
    {-0x1.c027419d617d8p-11, -0x1.b429b809efd7cp-5, -0x1.8281ffb9bd671p-5, 0x1.b2224d8332342p-8, 0x1.5d3b40a94443dp-7, 0x1.69356f26b9a3dp-9, 0x1.490a12455f1c9p-12, 0x1.34379a122b469p-16},
    {0x1.f7baca2cbba66p-14, -0x1.b84799f0242d1p-6, 0x1.5cfff2fd7c79dp-6, 0x1.25b3a3857b46fp-7, -0x1.7cae457a31dfep-9, -0x1.b2755ff4baf8cp-10, -0x1.14543df425951p-12, -0x1.4357a02cf487fp-16},
    {-0x1.9a6f11c6c7967p-17, 0x1.2def59d868eb2p-6, 0x1.dbb5ac6bde893p-9, -0x1.8d0f8cfc1bbdep-8, -0x1.5fe0a8fb9bd17p-11, 0x1.52cc6d296374ep-11, 0x1.649050e009592p-13, 0x1.10ed16757f61bp-16},
    {-0x1.0d610d0868055p-17, 0x1.2dd8685d45c5ap-9, -0x1.755d9dfda6820p-8, 0x1.7e5fe338c7061p-11, 0x1.0612f509e88d3p-10, -0x1.754c2813f1742p-14, -0x1.568a78d0aa05ep-14, -0x1.755e314eb9a2dp-17},
    {0x1.403a3bdd6b249p-16, -0x1.fa4143a83ef7ep-9, 0x1.af7cb41f097c1p-11, 0x1.d4259ab060381p-11, -0x1.779d6decee734p-12, -0x1.35f08962f2686p-14, 0x1.aa59c6cd7ea93p-16, 0x1.a27cec95b005fp-18},
    {-0x1.10e59c5927d59p-16, 0x1.60b35b2e93d88p-13, 0x1.9b406ebb20c97p-11, -0x1.c3fa44729a83ap-12, -0x1.00e18c39f1f0fp-16, 0x1.cbca79fd2d557p-15, -0x1.0cb52f3a372c1p-19, -0x1.6046fbb149545p-19},
};

float rc_erff(float xf) {
    if (xf != xf) return xf;
    uint32_t sign;
    memcpy(&sign, &xf, 4);
    sign &= 0x80000000u;
    double a = (double)xf;
    if (a < 0.0) a = -a;
    float r = 1.0f;
    if (a < 4.0) {
        /* interval i = floor(2a); i = 0 evaluates erf(a)/a in a*a (keeps relative accuracy near
         * 0), the others erf itself in t = a - centre (|t| <= 1/4, exact in double) */
        const int i = (int)(a * 2.0);
        const double t = i == 0 ? a * a : a - (0.5 * i + 0.25);
        double p = rc_erf_coef[RC_ERF_DEG][i];
        for (int j = RC_ERF_DEG - 1; j >= 0; j--) p = fma(p, t, rc_erf_coef[j][i]);
        if (i == 0) p = p * a;
        r = (float)p;
    }
    uint32_t u;
    memcpy(&u, &r, 4);
    u |= sign;
    memcpy(&r, &u, 4);
    return r;
}

static void sincos_d(double x, double *s, double *c) {
    const double inv_pio2 = 6.36619772367581382433e-01;
    const double pio2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
    const double pio2_2 = 6.07710050630396597660e-11;  /* next 33 bits */
    const double pio2_2t = 2.02226624879595063154e-21; /* pi/2 - (pio2_1 + pio2_2) */
    double t = x * inv_pio2;
    /* round half away from zero; trunc, not a cast to int64_t: the same value wherever the cast is
     * defined, and defined for |x| beyond 2^63 too (a float up to 3.4e38 may arrive here) */
    double kd = trunc(t >= 0.0 ? t + 0.5 : t - 0.5);
    double r = ((x - kd * pio2_1) - kd * pio2_2) - kd * pio2_2t;
    double r2 = r * r;
    /* |r| <= pi/4: Taylor to degree 21 / 20 (truncation < 1e-20) */
    double ps = 0.0, pc = 0.0;
    {
        double term = r, sum = r;
        for (int i = 1; i <= 10; i++) {
            term = -term * r2 / ((2 * i) * (2 * i + 1));
            sum += term;
        }
        ps = sum;
        term = 1.0;
        sum = 1.0;
        for (int i = 1; i <= 10; i++) {
            term = -term * r2 / ((2 * i - 1) * (2 * i));
            sum += term;
        }
        pc = sum;
    }
    double m4 = fmod(kd, 4.0); /* kd mod 4, exact: (int64_t)kd & 3 wherever that cast is defined */
    if (m4 < 0.0) m4 += 4.0;
    const int q = (int)m4;
    switch (q) {
    case 0: *s = ps; *c = pc; break;
    case 1: *s = pc; *c = -ps; break;
    case 2: *s = -ps; *c = -pc; break;
    default: *s = -pc; *c = ps; break;
    }
}

void rc_sincosf(float x, float *s, float *c) {
    if (x != x || x == INFINITY || x == -INFINITY) {
        *s = *c = NAN;
        return;
    }
    double sd, cd;
    sincos_d((double)x, &sd, &cd);
    *s = (float)sd;
    *c = (float)cd;
}

float rc_sinf(float x) {
    float s, c;
    rc_sincosf(x, &s, &c);
    return s;
}

float rc_cosf(float x) {
    float s, c;
    rc_sincosf(x, &s, &c);
    return c;
}

float rc_silu(float x) { return x / (1.0f + rc_expf(-x)); }

float rc_gelu(float x) { return (x * 0.5f) * (1.0f + rc_erff(x * 0.707106781186547524f)); }

void rc_silu_mul_f32(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

void rc_sincos_f32(const float *x, float *s, float *c, size_t n) {
    for (size_t i = 0; i < n; i++) rc_sincosf(x[i], &s[i], &c[i]);
}

void rc_gelu_f32(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = rc_gelu(x[i]);
}

/* ---- norms ---- */

void rc_rmsnorm(const float *x, const float *w, float eps, float *y, size_t n) {
    float var = rc_sumsq_f32(x, n) / (float)n;
    float r = 1.0f / sqrtf(var + eps);
    for (size_t i = 0; i < n; i++) y[i] = w[i] * (x[i] * r);
}

void rc_layernorm(const float *x, const float *w, const float *b, float eps, float *y, size_t n) {
    float mean = rc_sum_f32(x, n) / (float)n;
    /* two passes over x; the centred values are recomputed so that y may alias x */
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - mean;
        acc[i & 15] = fmaf(d, d, acc[i & 15]);
    }
    float var = rc_tree16(acc) / (float)n;
    float r = 1.0f / sqrtf(var + eps);
    for (size_t i = 0; i < n; i++) y[i] = ((x[i] - mean) * r) * w[i] + b[i];
}

void rc_l2_normalize(const float *x, float floor, float scale, float *y, size_t n) {
    float nrm = sqrtf(rc_sumsq_f32(x, n));
    if (nrm < floor) nrm = floor;
    for (size_t i = 0; i < n; i++) y[i] = (x[i] / nrm) * scale;
}

double rc_row_nll(const float *lg, size_t V, int target, int *greedy) {
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (lg[i] > lg[best]) best = i;
    const double mx = (double)lg[best];
    double s = 0.0;
    for (size_t i = 0; i < V; i++) s += exp((double)lg[i] - mx);
    *greedy = (int)best;
    return -((double)lg[target] - (mx + log(s)));
}

/* ---- lm_head screening's approximation (the scalar reference of the kernel table's screen_i8) ---- */

void rc_screen_i8_ref(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                      int64_t r1, float *A) {
    const size_t G = H / RC_SCREEN_GROUP;
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *qr = Q + (size_t)r * H;
        float acc[16] = {0};
        for (size_t g = 0; g < G; g++) {
            int32_t isum = 0; /* |isum| <= 64 * 127 * 127: exact */
            for (size_t i = g * RC_SCREEN_GROUP; i < (g + 1) * RC_SCREEN_GROUP; i++)
                isum += (int32_t)qr[i] * (int32_t)p[i];
            const float c = S[(size_t)r * G + g] * t[g];
            acc[g % 16] = fmaf((float)isum, c, acc[g % 16]);
        }
        A[r - r0] = rc_tree16(acc);
    }
}

void rc_screen_norms_tree(double *l, double *ss) {
    for (int j = 0; j < 4; j++) l[j] += l[j + 4], l[8 + j] += l[8 + j + 4];
    for (int j = 0; j < 2; j++) l[j] += l[j + 2], l[8 + j] += l[8 + j + 2];
    ss[0] = l[0] + l[1];
    ss[1] = l[8] + l[9];
}

void rc_screen_norms_ref(const float *w, const int8_t *q, const float *s, size_t H, double *ss) {
    double l[16] = {0}; /* lanes of sum d^2, then of sum a^2 */
    for (size_t i = 0; i < H; i++) {
        const double a = (double)s[i / RC_SCREEN_GROUP] * (double)q[i], d = (double)w[i] - a; /* s q: exact */
        l[i % 8] += d * d;
        l[8 + i % 8] += a * a;
    }
    rc_screen_norms_tree(l, ss);
}
