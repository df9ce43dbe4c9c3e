/* ops.c - scalar fp32 reference kernels (the bit-exact specification; see ops.h for the order
 * of every rounding). No libm transcendentals: exp/erf/sin/cos/log are computed here with
 * +,-,*,/,fmaf,sqrtf only, so every IEEE platform gives the same bits. */
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

void rc_mat_row_f32(const rc_mat *w, int64_t r, float *out) {
    for (int64_t c = 0; c < w->cols; c++) out[c] = rc_mat_get(w, r, c);
}

/* ---- canonical reductions ---- */

static float tree16(float *acc) {
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
    return tree16(acc);
}

float rc_sum_f32(const float *x, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = acc[l] + x[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] = acc[l] + x[i];
    return tree16(acc);
}

float rc_sumsq_f32(const float *x, size_t n) {
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = fmaf(x[i + l], x[i + l], acc[l]);
    for (int l = 0; i < n; i++, l++) acc[l] = fmaf(x[i], x[i], acc[l]);
    return tree16(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_bf16_to_f32(w[i]), x[i], acc[i & 15]);
    return tree16(acc);
}

static float dot_f16(const uint16_t *w, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_f16_to_f32(w[i]), x[i], acc[i & 15]);
    return tree16(acc);
}

static float dot_nf4(const uint8_t *codes, const float *absmax, size_t start, const float *x, size_t n) {
    float acc[16] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 15] = fmaf(rc_nf4_value(codes, absmax, start + i), x[i], acc[i & 15]);
    return tree16(acc);
}

float rc_dot_row(const rc_mat *w, int64_t r, const float *x) {
    size_t n = (size_t)w->cols, off = (size_t)r * n;
    switch (w->dtype) {
    case RC_DT_F32: return rc_dot_f32((const float *)w->data + off, x, n);
    case RC_DT_BF16: return dot_bf16((const uint16_t *)w->data + off, x, n);
    case RC_DT_F16: return dot_f16((const uint16_t *)w->data + off, x, n);
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

void rc_softmax(float *s, size_t n) {
    float m = s[0];
    for (size_t i = 1; i < n; i++)
        if (s[i] > m) m = s[i];
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

float rc_erff(float xf) {
    double x = xf;
    if (x != x) return xf;
    if (x >= 4.0) return 1.0f;
    if (x <= -4.0) return -1.0f;
    /* erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)); max cancellation at |x| = 4 is
     * ~1e5, leaving ~1e-11 absolute error, far below a float ulp of erf. */
    double x2 = x * x, p = x, sum = x;
    for (int n = 1; n < 200; n++) {
        p = -p * x2 / n;
        double t = p / (2 * n + 1);
        double ns = sum + t;
        if (ns == sum && n > x2) break;
        sum = ns;
    }
    return (float)(sum * 1.12837916709551257390);
}

static void sincos_d(double x, double *s, double *c) {
    const double inv_pio2 = 6.36619772367581382433e-01;
    const double pio2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
    const double pio2_2 = 6.07710050630396597660e-11;  /* next 33 bits */
    const double pio2_2t = 2.02226624879595063154e-21; /* pi/2 - (pio2_1 + pio2_2) */
    double t = x * inv_pio2;
    double kd = (double)(int64_t)(t >= 0.0 ? t + 0.5 : t - 0.5);
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
    int q = (int)((int64_t)kd & 3);
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
    float var = tree16(acc) / (float)n;
    float r = 1.0f / sqrtf(var + eps);
    for (size_t i = 0; i < n; i++) y[i] = ((x[i] - mean) * r) * w[i] + b[i];
}

void rc_l2_normalize(const float *x, float floor, float scale, float *y, size_t n) {
    float nrm = sqrtf(rc_sumsq_f32(x, n));
    if (nrm < floor) nrm = floor;
    for (size_t i = 0; i < n; i++) y[i] = (x[i] / nrm) * scale;
}
