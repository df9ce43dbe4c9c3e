/* lm_screen.c - lm_head screening for greedy steps (the math, bound and proof are in lm_screen.h).
 *
 * Per pick: quantise h [H] per 64 columns (p int8 [H], t [H/64]) and measure ||h||, ||h - t p||;
 * pass 1 (threads split the V rows): the approximation A [V] (kernel table screen_i8) and the
 * outward-rounded interval [lo, hi] of each row; pass 2: L = the K-th largest lo; pass 3: the rows
 * with hi >= L get their exact logit (kernel table matmul of one row: the bits of the full
 * lm_head); the pick is read off them, or off all V logits when the shortcut cannot be proved. */
#include "lm_screen.h"

#include "mem.h"
#include "topk.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rc_lmscreen {
    const rc_exec *ex;
    rc_mat w;                 /* lm_head as the model uses it */
    const int8_t *q;          /* [V][H] */
    const float *scale;       /* [V][G] */
    const float *norm;        /* [V][2]: ||w - s q||, ||s q|| (rounded up) */
    int V, H, G;
    float *approx, *lo, *hi;  /* [V] */
    float *logits;            /* [V]: the full fallback, or the candidates' exact logits */
    float *rowout;            /* [V]: the kernel's matmul writes row r's result at index r */
    int32_t *cand;            /* [V] */
    int8_t *p;                /* [H] */
    float *t;                 /* [G] */
    double a1, b1;            /* this pick's bound coefficients (header) */
};

/* ---- the reference pick from all V logits ------------------------------------------------- */

void rc_lm_pick_full(const float *x, int V, int k, rc_lm_pick *out) {
    memset(out, 0, sizeof *out);
    int b1 = 0, b2 = -1; /* greedy with the margin bookkeeping of the goldens: first maximum wins */
    for (int i = 1; i < V; i++)
        if (x[i] > x[b1]) b1 = i;
    for (int i = 0; i < V; i++)
        if (i != b1 && (b2 < 0 || x[i] > x[b2])) b2 = i;
    out->argmax = b1;
    out->margin = b2 >= 0 ? x[b1] - x[b2] : INFINITY;
    if (k > RC_LM_SCREEN_MAXK) k = RC_LM_SCREEN_MAXK;
    if (k > V) k = V;
    if (k > 0) { /* torch.topk(x, k) on CPU, ties included (topk.h); the scratch is below 64 k pairs */
        rc_topk_pair scratch[64 * RC_LM_SCREEN_MAXK];
        rc_topk(x, V, k, scratch, out->ids, out->logits);
    }
    out->k = k;
    out->n_exact = V;
    out->full = 1;
}

/* ---- building the int8 copy (convert) ------------------------------------------------------ */

/* A norm computed in double (relative error below H * 2^-53), rounded up to a float. */
static float norm_up(double sumsq) {
    double n = sqrt(sumsq) * (1.0 + 1e-9);
    float f = (float)n;
    if ((double)f < n) f = nextafterf(f, INFINITY);
    return f;
}

recall_status rc_lmscreen_build(const rc_mat *w, int8_t *q, float *scale, float *norm, recall_err *err) {
    const int64_t V = w->rows, H = w->cols, G = H / RC_LM_SCREEN_GROUP;
    if (H % RC_LM_SCREEN_GROUP || H <= 0)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "lm_head screen: %lld columns are not a multiple of %d", (long long)H,
                       RC_LM_SCREEN_GROUP);
    float *row = malloc((size_t)H * sizeof *row);
    if (!row) return rc_fail(err, RECALL_E_NOMEM, "lm_head screen: out of memory");
    for (int64_t r = 0; r < V; r++) {
        rc_mat_row_f32(w, r, row);
        double dw2 = 0.0, a2 = 0.0;
        for (int64_t g = 0; g < G; g++) {
            const float *x = row + g * RC_LM_SCREEN_GROUP;
            float m = 0.0f;
            for (int i = 0; i < RC_LM_SCREEN_GROUP; i++) {
                if (!isfinite(x[i])) {
                    free(row);
                    return rc_fail(err, RECALL_E_UNSUPPORTED, "lm_head screen: row %lld column %lld is not finite",
                                   (long long)r, (long long)(g * RC_LM_SCREEN_GROUP + i));
                }
                if (fabsf(x[i]) > m) m = fabsf(x[i]);
            }
            const float s = m / 127.0f;
            scale[r * G + g] = s;
            for (int i = 0; i < RC_LM_SCREEN_GROUP; i++) {
                double v = s > 0.0f ? nearbyint((double)x[i] / (double)s) : 0.0;
                if (v > 127.0) v = 127.0;
                if (v < -127.0) v = -127.0;
                q[r * H + g * RC_LM_SCREEN_GROUP + i] = (int8_t)v;
                const double a = (double)s * v, d = (double)x[i] - a; /* s * v is exact in double */
                a2 += a * a;
                dw2 += d * d;
            }
        }
        norm[r * 2] = norm_up(dw2);
        norm[r * 2 + 1] = norm_up(a2);
    }
    free(row);
    return RECALL_OK;
}

/* ---- open / close -------------------------------------------------------------------------- */

void rc_lmscreen_close(rc_lmscreen *s) {
    if (!s) return;
    RC_FREE(s->approx, s->lo, s->hi, s->logits, s->rowout, s->cand, s->p, s->t, s);
}

recall_status rc_lmscreen_new(const rc_mat *w, const int8_t *q, const float *scale, const float *norm,
                              const rc_exec *ex, rc_lmscreen **out, recall_err *err) {
    *out = NULL;
    if (w->cols % RC_LM_SCREEN_GROUP || w->cols <= 0 || w->rows <= 0 || w->rows > (1 << 24) || w->cols > (1 << 16))
        return rc_fail(err, RECALL_E_SHAPE, "lm_head screen: a [%lld, %lld] matrix (columns a multiple of %d needed)",
                       (long long)w->rows, (long long)w->cols, RC_LM_SCREEN_GROUP);
    rc_lmscreen *s = calloc(1, sizeof *s);
    if (!s) return rc_fail(err, RECALL_E_NOMEM, "lm_head screen: out of memory");
    s->ex = ex;
    s->w = *w;
    s->V = (int)w->rows;
    s->H = (int)w->cols;
    s->G = s->H / RC_LM_SCREEN_GROUP;
    s->q = q;
    s->scale = scale;
    s->norm = norm;
    const size_t V = (size_t)s->V;
    s->approx = malloc(V * sizeof(float));
    s->lo = malloc(V * sizeof(float));
    s->hi = malloc(V * sizeof(float));
    s->logits = malloc(V * sizeof(float));
    s->rowout = malloc(V * sizeof(float));
    s->cand = malloc(V * sizeof(int32_t));
    s->p = malloc((size_t)s->H);
    s->t = malloc((size_t)s->G * sizeof(float));
    if (!s->approx || !s->lo || !s->hi || !s->logits || !s->rowout || !s->cand || !s->p || !s->t) {
        rc_lmscreen_close(s);
        return rc_fail(err, RECALL_E_NOMEM, "lm_head screen: out of memory (vocab %d)", (int)V);
    }
    *out = s;
    return RECALL_OK;
}

recall_status rc_lmscreen_open(const rc_blob *b, const rc_exec *ex, rc_lmscreen **out, recall_err *err) {
    *out = NULL;
    if (!rc_blob_find(b, RC_LM_SCREEN_Q)) return RECALL_OK;
    int V = 0, H = 0;
    RC_TRY(rc_blob_get_int(b, "qwen2.vocab", 1, 1 << 24, &V, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.hidden", 1, 1 << 16, &H, err));
    if (H % RC_LM_SCREEN_GROUP)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s present but the hidden size %d is not a multiple of %d",
                       rc_blob_path(b), RC_LM_SCREEN_Q, H, RC_LM_SCREEN_GROUP);
    const int G = H / RC_LM_SCREEN_GROUP;
    const rc_tensor *tq, *ts, *tn;
    RC_TRY(rc_blob_expect(b, RC_LM_SCREEN_Q, 1u << RC_DT_U8, 2, (const int64_t[]){V, H}, &tq, err));
    RC_TRY(rc_blob_expect(b, RC_LM_SCREEN_SCALE, 1u << RC_DT_F32, 2, (const int64_t[]){V, G}, &ts, err));
    RC_TRY(rc_blob_expect(b, RC_LM_SCREEN_NORM, 1u << RC_DT_F32, 2, (const int64_t[]){V, 2}, &tn, err));
    const float *nrm = tn->data, *sc = ts->data;
    for (int64_t i = 0; i < 2 * (int64_t)V; i++)
        if (!(nrm[i] >= 0.0f && nrm[i] < INFINITY))
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s[%lld] = %g is not a finite norm", rc_blob_path(b),
                           RC_LM_SCREEN_NORM, (long long)i, (double)nrm[i]);
    for (int64_t i = 0; i < (int64_t)V * G; i++)
        if (!(sc[i] >= 0.0f && sc[i] < INFINITY))
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s[%lld] = %g is not a finite scale", rc_blob_path(b),
                           RC_LM_SCREEN_SCALE, (long long)i, (double)sc[i]);
    rc_mat w;
    if (rc_blob_find(b, "qwen2.lm_head.weight"))
        RC_TRY(rc_blob_mat(b, "qwen2.lm_head.weight", V, H, &w, err));
    else
        RC_TRY(rc_blob_mat(b, "qwen2.model.embed_tokens.weight", V, H, &w, err));
    return rc_lmscreen_new(&w, tq->data, sc, nrm, ex, out, err);
}

/* ---- one pick ------------------------------------------------------------------------------ */

/* gamma(n) = n u / (1 - n u), u = 2^-24: the relative error of n fp32 roundings in a chain */
static double gamma_n(double n) {
    const double u = ldexp(1.0, -24);
    return n * u / (1.0 - n * u);
}

/* p, t from h; the bound coefficients a1, b1 (header). 0 when h is not finite. */
static int quantise(rc_lmscreen *s, const float *h) {
    double x2 = 0.0, d2 = 0.0;
    for (int g = 0; g < s->G; g++) {
        const float *x = h + (size_t)g * RC_LM_SCREEN_GROUP;
        float m = 0.0f;
        for (int i = 0; i < RC_LM_SCREEN_GROUP; i++) {
            if (!isfinite(x[i])) return 0;
            if (fabsf(x[i]) > m) m = fabsf(x[i]);
        }
        const float t = m / 127.0f;
        s->t[g] = t;
        int8_t *p = s->p + (size_t)g * RC_LM_SCREEN_GROUP;
        for (int i = 0; i < RC_LM_SCREEN_GROUP; i++) {
            double v = t > 0.0f ? nearbyint((double)x[i] / (double)t) : 0.0;
            if (v > 127.0) v = 127.0;
            if (v < -127.0) v = -127.0;
            p[i] = (int8_t)v;
            const double d = (double)x[i] - (double)t * v; /* t * v exact in double */
            x2 += (double)x[i] * (double)x[i];
            d2 += d * d;
        }
    }
    const double X = sqrt(x2) * (1.0 + 1e-9), D = sqrt(d2) * (1.0 + 1e-9);
    const double ge = gamma_n(ceil(s->H / 16.0) + 4.0), ga = gamma_n(ceil(s->G / 16.0) + 5.0);
    s->a1 = X * (1.0 + ge) * (1.0 + 1e-12);
    s->b1 = (D + ge * X + ga * (X + D)) * (1.0 + 1e-12);
    return isfinite(s->a1) && isfinite(s->b1);
}

/* |exact - A| <= this, for row r (double, rounded up by the slack factors) */
static double row_bound(const rc_lmscreen *s, int64_t r, float a) {
    const double eta = 0x1p-100;
    const double b = (double)s->norm[2 * r] * s->a1 + (double)s->norm[2 * r + 1] * s->b1;
    return b * (1.0 + 0x1p-30) + fabs((double)a) * 0x1p-50 + eta;
}

typedef struct {
    rc_lmscreen *s;
} pass1_job;

/* Rows [r0, r1): A, then [lo, hi] rounded outward to float (a non-finite one: [-inf, +inf]). */
static void pass1(void *ctx, int64_t r0, int64_t r1, int worker) {
    (void)worker;
    rc_lmscreen *s = ((pass1_job *)ctx)->s;
    s->ex->k.screen_i8(s->q, s->scale, (size_t)s->H, s->p, s->t, r0, r1, s->approx + r0);
    for (int64_t r = r0; r < r1; r++) {
        const float a = s->approx[r];
        const double b = row_bound(s, r, a), lo = (double)a - b, hi = (double)a + b;
        /* to float, outward: widened by 2^-22 relative + 2^-140 first, more than the conversion's
         * rounding (half an ulp: 2^-24 relative, or 2^-150 below the normal range) can undo */
        float fl = (float)(lo - fabs(lo) * 0x1p-22 - 0x1p-140), fh = (float)(hi + fabs(hi) * 0x1p-22 + 0x1p-140);
        if (!isfinite(fl) || !isfinite(fh)) {
            fl = -INFINITY;
            fh = INFINITY;
        }
        s->lo[r] = fl;
        s->hi[r] = fh;
    }
}

float rc_lmscreen_exact(const rc_lmscreen *s, const float *h, int64_t r) {
    s->ex->k.matmul(&s->w, NULL, h, (size_t)s->H, 1, s->rowout, (size_t)s->V, r, r + 1, s->ex->scratch);
    return s->rowout[r];
}

static recall_status pick_full(rc_lmscreen *s, const float *h, int k, rc_lm_pick *out) {
    rc_exec_matmul(s->ex, &s->w, NULL, h, (size_t)s->H, 1, s->logits, (size_t)s->V);
    rc_lm_pick_full(s->logits, s->V, k, out);
    return RECALL_OK;
}

recall_status rc_lmscreen_pick(rc_lmscreen *s, const float *h, int k, rc_lm_pick *out, recall_err *err) {
    if (k < 0 || k > RC_LM_SCREEN_MAXK)
        return rc_fail(err, RECALL_E_ARG, "lm_head screen: top-%d asked (0..%d)", k, RC_LM_SCREEN_MAXK);
    const int K = k > 2 ? k : 2, V = s->V;
    if (V < 64 * (K + 1) || !quantise(s, h)) return pick_full(s, h, k, out);
    pass1_job job = {s};
    rc_pool_for(s->ex->pool, V, 1024, pass1, &job);
    /* L: the K-th largest lo */
    float top[RC_LM_SCREEN_MAXK + 1];
    for (int j = 0; j < K; j++) top[j] = -INFINITY;
    for (int r = 0; r < V; r++) {
        const float v = s->lo[r];
        if (!(v > top[K - 1])) continue;
        int j = K - 1;
        while (j > 0 && v > top[j - 1]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = v;
    }
    const float L = top[K - 1];
    if (!(L > -INFINITY)) return pick_full(s, h, k, out);
    int n = 0;
    for (int r = 0; r < V; r++)
        if (s->hi[r] >= L) s->cand[n++] = r;
    if (n > V / 8) return pick_full(s, h, k, out);
    /* exact logits of the candidates (ascending ids) and the pick read off them */
    memset(out, 0, sizeof *out);
    int b1 = -1, b2 = -1;
    float *x = s->logits; /* x[j]: exact logit of cand[j] */
    for (int j = 0; j < n; j++) {
        x[j] = rc_lmscreen_exact(s, h, s->cand[j]);
        if (!isfinite(x[j])) return pick_full(s, h, k, out);
        if (b1 < 0 || x[j] > x[b1]) b1 = j;
    }
    for (int j = 0; j < n; j++)
        if (j != b1 && (b2 < 0 || x[j] > x[b2])) b2 = j;
    if (b2 < 0) return pick_full(s, h, k, out); /* cannot happen: the K rows defining L are candidates */
    out->argmax = s->cand[b1];
    out->margin = x[b1] - x[b2];
    if (k > 0) { /* the k+1 largest candidates, descending; unique only if strictly decreasing */
        const int m = n < k + 1 ? n : k + 1;
        int sel[RC_LM_SCREEN_MAXK + 1], ns = 0;
        for (int j = 0; j < n; j++) {
            if (ns == m && !(x[j] > x[sel[m - 1]])) continue;
            int i = ns < m ? ns++ : m - 1;
            while (i > 0 && x[j] > x[sel[i - 1]]) {
                sel[i] = sel[i - 1];
                i--;
            }
            sel[i] = j;
        }
        for (int i = 0; i + 1 < m; i++)
            if (!(x[sel[i]] > x[sel[i + 1]])) return pick_full(s, h, k, out);
        for (int i = 0; i < k; i++) {
            out->ids[i] = s->cand[sel[i]];
            out->logits[i] = x[sel[i]];
        }
        out->k = k;
    }
    out->n_exact = n;
    out->full = 0;
    return RECALL_OK;
}

double rc_lmscreen_full_bytes(const rc_lmscreen *s) {
    const double el = s->w.dtype == RC_DT_F32 ? 4.0 : s->w.dtype == RC_DT_NF4 ? 0.5 + 4.0 / 64 : 2.0;
    return (double)s->V * s->H * el;
}

double rc_lmscreen_bytes(const rc_lmscreen *s, const rc_lm_pick *p) {
    if (p->full) return (double)s->V * (s->H + 4.0 * s->G + 8.0) + rc_lmscreen_full_bytes(s);
    return (double)s->V * (s->H + 4.0 * s->G + 8.0) + rc_lmscreen_full_bytes(s) / s->V * p->n_exact;
}

recall_status rc_lmscreen_row_bound(rc_lmscreen *s, const float *h, int64_t r, float *approx, double *bound,
                                    recall_err *err) {
    if (r < 0 || r >= s->V) return rc_fail(err, RECALL_E_ARG, "lm_head screen: row %lld outside [0, %d)", (long long)r, s->V);
    if (!quantise(s, h)) return rc_fail(err, RECALL_E_ARG, "lm_head screen: h is not finite");
    s->ex->k.screen_i8(s->q, s->scale, (size_t)s->H, s->p, s->t, r, r + 1, approx);
    *bound = row_bound(s, r, *approx);
    return RECALL_OK;
}
