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
    const rc_blob *b;         /* the blob lm_head is a view of (rc_lmscreen_open), or NULL */
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
        int8_t *qr = q + r * H;
        float *sr = scale + r * G;
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
            const float sg = m / 127.0f;
            sr[g] = sg;
            for (int i = 0; i < RC_LM_SCREEN_GROUP; i++) {
                double v = sg > 0.0f ? nearbyint((double)x[i] / (double)sg) : 0.0;
                if (v > 127.0) v = 127.0;
                if (v < -127.0) v = -127.0;
                qr[g * RC_LM_SCREEN_GROUP + i] = (int8_t)v;
            }
        }
        double ss[2];
        rc_screen_norms_ref(row, qr, sr, (size_t)H, ss);
        norm[r * 2] = norm_up(ss[0]);
        norm[r * 2 + 1] = norm_up(ss[1]);
    }
    free(row);
    return RECALL_OK;
}

/* ---- open / close -------------------------------------------------------------------------- */

void rc_lmscreen_close(rc_lmscreen *s) {
    if (!s) return;
    RC_FREE(s->approx, s->lo, s->hi, s->logits, s->rowout, s->cand, s->p, s->t, s);
}

/* ---- validation: nothing in the three tensors is trusted -------------------------------------
 * The pick is exact only if every stored norm is at least the true norm of its row (a norm too
 * small shrinks the bound, and the true argmax may fall outside the candidates). So at open: every
 * code in [-127, 127] (the converter's range; every kernel would compute -128 exactly too), every
 * scale finite and >= 0, and both norms of every row re-derived from lm_head, the codes and the
 * scales, in double, as the converter computes them: a stored norm must lie in
 * [derived (1 + 1e-12), derived (1 + 1e-6) + 2^-140]. The sums of squares are the kernel table's
 * screen_norms (rc_screen_norms_ref: 8 double lanes, the same bits on every path, and what the
 * converter rounds up). The lower end is sound: s q is exact in double, each term carries at most
 * 3 roundings and 8 chains of H/8 terms are summed, so the derived sum is within (H/8 + 6) 2^-53
 * < 1e-12 of the exact one for H <= 65536 (the norm within half that), and a stored norm above the
 * derived one (1 + 1e-12) is above the true norm; the converter's norms (rounded up by 1e-9, then
 * to float) are inside the interval. Rows are split over the execution context's threads; the
 * first bad row (the lowest index, whatever the split) is reported.
 * The check reads all of lm_head and of the codes (716 MB at the 1.5B shape), while a pick reads
 * the codes and only its candidates' rows of lm_head. When the tensors are pages of a blob mapped
 * from its file, every part is released as soon as it has been checked (rc_blob_release: clean
 * file pages, read again from the file if anything touches them later): the check then neither
 * raises the process's peak resident set by them nor leaves them resident. So the codes are
 * scanned, and the rows checked, in chunks of CHECK_ROWS rows (the same first bad row whatever
 * the chunk). */
#define CHECK_ROWS 4096

typedef struct {
    const rc_blob *b; /* the blob the tensors are views of (pages released once checked), or NULL */
    int64_t row0;     /* the chunk's first row: rc_pool_for's ranges are relative to it */
    const rc_mat *w;
    const rc_kernels *k;
    const int8_t *q;
    const float *scale, *norm;
    int H, G;
    float *rowbuf;      /* [threads][H] */
    int64_t *first_bad; /* [threads]: lowest bad row seen, or INT64_MAX */
    int *why;           /* [threads]: 0 the lm_head row is not finite, 1 ||w - s q||, 2 ||s q|| */
    double *derived;    /* [threads]: the derived norm of that row */
} check_job;

/* Row r of lm_head as fp32: f32 in place, bf16 / nf4 decoded into buf. */
static const float *row_f32(const rc_mat *w, const rc_kernels *k, int64_t r, float *buf) {
    const size_t H = (size_t)w->cols, e0 = (size_t)r * H;
    switch (w->dtype) {
    case RC_DT_F32: return (const float *)w->data + e0;
    case RC_DT_BF16: {
        const uint16_t *h = (const uint16_t *)w->data + e0;
        for (size_t i = 0; i < H; i++) { /* bf16 = the high half of the fp32 bits */
            const uint32_t u = (uint32_t)h[i] << 16;
            memcpy(buf + i, &u, sizeof u);
        }
        return buf;
    }
    case RC_DT_NF4: k->nf4_dequant((const uint8_t *)w->data, w->absmax, e0, H, buf); return buf;
    default: rc_mat_row_f32(w, r, buf); return buf;
    }
}

static void check_rows(void *ctx, int64_t r0, int64_t r1, int worker) {
    check_job *j = ctx;
    float *buf = j->rowbuf + (size_t)worker * (size_t)j->H;
    r0 += j->row0, r1 += j->row0;
    for (int64_t r = r0; r < r1 && r < j->first_bad[worker]; r++) {
        const float *row = row_f32(j->w, j->k, r, buf);
        double ss[2];
        j->k->screen_norms(row, j->q + (size_t)r * (size_t)j->H, j->scale + (size_t)r * (size_t)j->G, (size_t)j->H, ss);
        const double dd = sqrt(ss[0]), da = sqrt(ss[1]);
        const double sd = (double)j->norm[2 * r], sa = (double)j->norm[2 * r + 1];
        int why = -1;
        double derived = 0.0;
        if (!isfinite(dd)) why = 0;
        else if (!(sd >= dd * (1.0 + 1e-12) && sd <= dd * (1.0 + 1e-6) + 0x1p-140)) why = 1, derived = dd;
        else if (!(sa >= da * (1.0 + 1e-12) && sa <= da * (1.0 + 1e-6) + 0x1p-140)) why = 2, derived = da;
        if (why >= 0) {
            j->first_bad[worker] = r;
            j->why[worker] = why;
            j->derived[worker] = derived;
        }
    }
}

/* Releases rows [r0, r1) of lm_head's and (q not NULL) the codes' pages when they are views of a
 * blob mapped from its file (b not NULL; nothing otherwise). */
static void release_rows(const rc_blob *b, const rc_mat *w, const int8_t *q, int64_t r0, int64_t r1) {
    if (!b || r1 <= r0) return;
    if (q) rc_blob_release(b, q + (size_t)r0 * (size_t)w->cols, (size_t)(r1 - r0) * (size_t)w->cols);
    rc_mat_release(b, w, r0, r1);
}

static recall_status check_screen(const rc_blob *b, const rc_mat *w, const int8_t *q, const float *scale,
                                  const float *norm, const rc_exec *ex, const char *what, recall_err *err) {
    const int64_t V = w->rows, H = w->cols, G = H / RC_LM_SCREEN_GROUP;
    for (int64_t r0 = 0; r0 < V; r0 += CHECK_ROWS) {
        const int64_t r1 = r0 + CHECK_ROWS < V ? r0 + CHECK_ROWS : V;
        const void *m128 = memchr(q + r0 * H, 0x80, (size_t)((r1 - r0) * H));
        if (m128) {
            const int64_t i = (const int8_t *)m128 - q;
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s row %lld column %lld is -128: codes lie in [-127, 127]",
                           what, RC_LM_SCREEN_Q, (long long)(i / H), (long long)(i % H));
        }
        if (b) rc_blob_release(b, q + r0 * H, (size_t)((r1 - r0) * H));
    }
    for (int64_t i = 0; i < V * G; i++)
        if (!(scale[i] >= 0.0f && scale[i] < INFINITY))
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s row %lld group %lld = %g is not a finite scale >= 0", what,
                           RC_LM_SCREEN_SCALE, (long long)(i / G), (long long)(i % G), (double)scale[i]);
    for (int64_t i = 0; i < 2 * V; i++)
        if (!(norm[i] >= 0.0f && norm[i] < INFINITY))
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s row %lld = %g is not a finite norm", what, RC_LM_SCREEN_NORM,
                           (long long)(i / 2), (double)norm[i]);
    rc_kernels scalar;
    if (!ex) rc_kernels_scalar(&scalar);
    const int nt = ex ? rc_pool_threads(ex->pool) : 1;
    check_job j = {b, 0, w, ex ? &ex->k : &scalar, q, scale, norm, (int)H, (int)G, NULL, NULL, NULL, NULL};
    j.rowbuf = malloc((size_t)nt * (size_t)H * sizeof *j.rowbuf);
    j.first_bad = malloc((size_t)nt * sizeof *j.first_bad);
    j.why = malloc((size_t)nt * sizeof *j.why);
    j.derived = malloc((size_t)nt * sizeof *j.derived);
    recall_status st = RECALL_OK;
    if (!j.rowbuf || !j.first_bad || !j.why || !j.derived) {
        st = rc_fail(err, RECALL_E_NOMEM, "lm_head screen: out of memory");
        goto out;
    }
    for (int t = 0; t < nt; t++) j.first_bad[t] = INT64_MAX;
    int bad = -1;
    for (j.row0 = 0; j.row0 < V && bad < 0; j.row0 += CHECK_ROWS) {
        const int64_t r1 = j.row0 + CHECK_ROWS < V ? j.row0 + CHECK_ROWS : V;
        rc_pool_for(ex ? ex->pool : NULL, r1 - j.row0, 256, check_rows, &j);
        for (int t = 0; t < nt; t++)
            if (j.first_bad[t] != INT64_MAX && (bad < 0 || j.first_bad[t] < j.first_bad[bad])) bad = t;
        release_rows(b, w, q, j.row0, r1);
    }
    if (bad >= 0) {
        const int64_t r = j.first_bad[bad];
        if (j.why[bad] == 0)
            st = rc_fail(err, RECALL_E_FORMAT, "%s: lm_head row %lld is not finite: %s cannot bound it", what,
                         (long long)r, RC_LM_SCREEN_NORM);
        else
            st = rc_fail(err, RECALL_E_FORMAT, "%s: %s row %lld: ||%s|| stored as %.9g, but lm_head, %s and %s give "
                         "%.9g (rounded up, it must lie within 1e-6 above)", what, RC_LM_SCREEN_NORM, (long long)r,
                         j.why[bad] == 1 ? "w - s q" : "s q", (double)norm[2 * r + (j.why[bad] == 2)], RC_LM_SCREEN_Q,
                         RC_LM_SCREEN_SCALE, j.derived[bad]);
    }
out:
    free(j.rowbuf);
    free(j.first_bad);
    free(j.why);
    free(j.derived);
    return st;
}

static recall_status screen_create(const rc_blob *b, const rc_mat *w, const int8_t *q, const float *scale,
                                   const float *norm, const rc_exec *ex, const char *what, rc_lmscreen **out,
                                   recall_err *err) {
    *out = NULL;
    if (w->cols % RC_LM_SCREEN_GROUP || w->cols <= 0 || w->rows <= 0 || w->rows > (1 << 24) || w->cols > (1 << 16))
        return rc_fail(err, RECALL_E_SHAPE, "%s: lm_head screen of a [%lld, %lld] matrix (columns a multiple of %d "
                       "needed)", what, (long long)w->rows, (long long)w->cols, RC_LM_SCREEN_GROUP);
    RC_TRY(check_screen(b, w, q, scale, norm, ex, what, err));
    rc_lmscreen *s = calloc(1, sizeof *s);
    if (!s) return rc_fail(err, RECALL_E_NOMEM, "lm_head screen: out of memory");
    s->ex = ex;
    s->b = b;
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

recall_status rc_lmscreen_new(const rc_mat *w, const int8_t *q, const float *scale, const float *norm,
                              const rc_exec *ex, rc_lmscreen **out, recall_err *err) {
    return screen_create(NULL, w, q, scale, norm, ex, "lm_head screen", out, err);
}

recall_status rc_lmscreen_open(const rc_blob *b, const rc_exec *ex, rc_lmscreen **out, recall_err *err) {
    *out = NULL;
    if (!rc_blob_find(b, RC_LM_SCREEN_Q)) {
        if (rc_blob_find(b, RC_LM_SCREEN_SCALE) || rc_blob_find(b, RC_LM_SCREEN_NORM))
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s is missing but %s / %s are present", rc_blob_path(b),
                           RC_LM_SCREEN_Q, RC_LM_SCREEN_SCALE, RC_LM_SCREEN_NORM);
        return RECALL_OK;
    }
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
    rc_mat w;
    if (rc_blob_find(b, "qwen2.lm_head.weight"))
        RC_TRY(rc_blob_mat(b, "qwen2.lm_head.weight", V, H, &w, err));
    else
        RC_TRY(rc_blob_mat(b, "qwen2.model.embed_tokens.weight", V, H, &w, err));
    return screen_create(b, &w, tq->data, ts->data, tn->data, ex, rc_blob_path(b), out, err);
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

/* A pick reads lm_head's rows of its candidates only (all of them when it falls back to the full
 * logits); with a blob mapped from its file those pages are released after the pick, so that the
 * rows picks touch do not pile up over a conversation into all of lm_head (one madvise over its
 * range; the pages are clean and read again when a later pick needs them). */
static void release_lm_head(const rc_lmscreen *s) { release_rows(s->b, &s->w, NULL, 0, s->V); }

/* The full logits, CHECK_ROWS rows at a time, each piece's pages released once computed when
 * lm_head is a view of a file-mapped blob (a logit is one row's canonical dot, whatever the split:
 * the same bits as one matmul over all rows; nf4 pieces start on a block, CHECK_ROWS x H being a
 * multiple of 64). */
static recall_status pick_full(rc_lmscreen *s, const float *h, int k, rc_lm_pick *out) {
    rc_mat piece;
    if (!s->b || !rc_mat_rows(&s->w, 0, s->V, &piece)) {
        rc_exec_matmul(s->ex, &s->w, NULL, h, (size_t)s->H, 1, s->logits, (size_t)s->V);
    } else {
        for (int64_t r0 = 0; r0 < s->V; r0 += CHECK_ROWS) {
            const int64_t r1 = r0 + CHECK_ROWS < s->V ? r0 + CHECK_ROWS : s->V;
            rc_mat_rows(&s->w, r0, r1 - r0, &piece);
            rc_exec_matmul(s->ex, &piece, NULL, h, (size_t)s->H, 1, s->logits + r0, (size_t)(r1 - r0));
            release_rows(s->b, &s->w, NULL, r0, r1);
        }
    }
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
        if (j % RC_BLOB_RELEASE_ROWS == RC_BLOB_RELEASE_ROWS - 1) release_lm_head(s); /* blob.h */
        if (!isfinite(x[j])) return pick_full(s, h, k, out);
        if (b1 < 0 || x[j] > x[b1]) b1 = j;
    }
    release_lm_head(s);
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
