/* pooler.c - AttnPoolSP forward, scalar reference (math in pooler.h, rounding order in ops.h). */
#include "pooler.h"

#include "mem.h"
#include "ops.h"
#include "pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rc_mat in_w, out_w;
    float *in_b, *out_b; /* [3H], [H] */
} mha_w;

typedef struct {
    float *lnq1_w, *lnq1_b, *lnk_w, *lnk_b, *lnq2_w, *lnq2_b, *lnq3_w, *lnq3_b;
    mha_w cross, selfa;
    rc_mat f0, f2;
    float *f0_b, *f2_b;
} block_w;

struct rc_pooler {
    rc_pooler_config c;
    float *query;          /* [n_sp][H] */
    block_w *blk;
    float *ln_out_w, *ln_out_b;
    float *vecs;           /* arena for every fp32 vector above */
    /* scratch, n_sp-sized */
    float *q, *qn, *Q, *Kq, *Vq, *att, *tmp, *hid, *scores;
    /* scratch, L-sized (grown on demand) */
    int cap_L;
    float *P, *kn, *K, *V, *scores_L; /* one block (grow); scores_L: [threads][cap_L] */
    const rc_exec *ex;
    rc_exec *own_ex;
};

void rc_pooler_close(rc_pooler *p) {
    if (!p) return;
    /* P: the block holding kn, K, V and scores_L too (grow) */
    RC_FREE(p->blk, p->vecs, p->q, p->qn, p->Q, p->Kq, p->Vq, p->att, p->tmp, p->hid, p->scores, p->P);
    rc_exec_close(p->own_ex);
    free(p);
}

const rc_pooler_config *rc_pooler_cfg(const rc_pooler *p) { return &p->c; }

static float *falloc(size_t n) { return (float *)calloc(n ? n : 1, sizeof(float)); }

recall_status rc_pooler_open(const rc_blob *b, rc_pooler **out, recall_err *err) {
    return rc_pooler_open_ex(b, NULL, out, err);
}

/* Block i's weights: the LayerNorm vectors and biases are copied to *vp (advanced past them),
 * the matrices are views into the blob. */
static recall_status load_block(const rc_blob *b, int i, int H, int FF, block_w *w, float **vp, recall_err *err) {
    float *v = *vp;
    char nm[160];
#define VEC(field, suffix, n)                                                                    \
    w->field = v;                                                                                \
    v += (n);                                                                                    \
    snprintf(nm, sizeof nm, "pooler.blocks.%d.%s", i, suffix);                                   \
    RC_TRY(rc_blob_vec(b, nm, n, w->field, err))
#define MAT(field, suffix, rows, cols)                                                           \
    snprintf(nm, sizeof nm, "pooler.blocks.%d.%s", i, suffix);                                   \
    RC_TRY(rc_blob_mat(b, nm, rows, cols, &w->field, err))
    VEC(lnq1_w, "lnq1.weight", H);
    VEC(lnq1_b, "lnq1.bias", H);
    VEC(lnk_w, "lnk.weight", H);
    VEC(lnk_b, "lnk.bias", H);
    VEC(lnq2_w, "lnq2.weight", H);
    VEC(lnq2_b, "lnq2.bias", H);
    VEC(lnq3_w, "lnq3.weight", H);
    VEC(lnq3_b, "lnq3.bias", H);
    MAT(cross.in_w, "cross.in_proj_weight", 3 * H, H);
    VEC(cross.in_b, "cross.in_proj_bias", 3 * H);
    MAT(cross.out_w, "cross.out_proj.weight", H, H);
    VEC(cross.out_b, "cross.out_proj.bias", H);
    MAT(selfa.in_w, "selfa.in_proj_weight", 3 * H, H);
    VEC(selfa.in_b, "selfa.in_proj_bias", 3 * H);
    MAT(selfa.out_w, "selfa.out_proj.weight", H, H);
    VEC(selfa.out_b, "selfa.out_proj.bias", H);
    MAT(f0, "ffn.0.weight", FF, H);
    VEC(f0_b, "ffn.0.bias", FF);
    MAT(f2, "ffn.2.weight", H, FF);
    VEC(f2_b, "ffn.2.bias", H);
#undef VEC
#undef MAT
    *vp = v;
    return RECALL_OK;
}

recall_status rc_pooler_open_ex(const rc_blob *b, const rc_exec *ex, rc_pooler **out, recall_err *err) {
    *out = NULL;
    rc_pooler *p = (rc_pooler *)calloc(1, sizeof *p);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
    rc_pooler_config *c = &p->c;
    recall_status st;
    double eps;
#define TRY(e)                                                                                   \
    do {                                                                                         \
        if ((st = (e)) != RECALL_OK) goto fail;                                                  \
    } while (0)
    if (!ex) {
        TRY(rc_exec_open(NULL, &p->own_ex, err));
        ex = p->own_ex;
    }
    p->ex = ex;
    TRY(rc_blob_get_int(b, "pooler.n_sp", 1, 1 << 16, &c->n_sp, err));
    TRY(rc_blob_get_int(b, "pooler.hidden", 1, 1 << 16, &c->hidden, err));
    TRY(rc_blob_get_int(b, "pooler.heads", 1, 1 << 12, &c->heads, err));
    TRY(rc_blob_get_int(b, "pooler.blocks", 1, 1 << 10, &c->blocks, err));
    TRY(rc_blob_get_int(b, "pooler.ffn", 1, 1 << 20, &c->ffn, err));
    TRY(rc_blob_get_f64(b, "pooler.ln_eps", &eps, err));
    if (!(eps > 0.0 && eps < 1.0) || c->hidden % c->heads) {
        st = rc_fail(err, RECALL_E_FORMAT, "%s: pooler.ln_eps out of range or hidden %% heads != 0", rc_blob_path(b));
        goto fail;
    }
    c->ln_eps = (float)eps;
    const int H = c->hidden, S = c->n_sp, FF = c->ffn, NB = c->blocks;
    size_t per_block = 8 * (size_t)H + 2 * (4 * (size_t)H) + (size_t)FF + (size_t)H;
    p->vecs = falloc((size_t)S * H + per_block * NB + 2 * (size_t)H + 1);
    p->blk = (block_w *)calloc((size_t)NB, sizeof(block_w));
    if (!p->vecs || !p->blk) goto nomem;
    float *v = p->vecs;
    p->query = v;
    v += (size_t)S * H;
    TRY(rc_blob_vec(b, "pooler.query", (int64_t)S * H, p->query, err));
    {
        const rc_tensor *t = rc_blob_find(b, "pooler.query");
        if (t->ndim != 2 || t->shape[0] != S) {
            st = rc_fail(err, RECALL_E_SHAPE, "%s: pooler.query is not [%d,%d]", rc_blob_path(b), S, H);
            goto fail;
        }
    }
    for (int i = 0; i < NB; i++) TRY(load_block(b, i, H, FF, &p->blk[i], &v, err));
    p->ln_out_w = v;
    v += H;
    p->ln_out_b = v;
    v += H;
    TRY(rc_blob_vec(b, "pooler.ln_out.weight", H, p->ln_out_w, err));
    TRY(rc_blob_vec(b, "pooler.ln_out.bias", H, p->ln_out_b, err));
    TRY(rc_blob_vec(b, "pooler.out_scale", 1, v, err));
    c->out_scale = fabsf(v[0]);
    size_t sh = (size_t)S * H;
    p->q = falloc(sh);
    p->qn = falloc(sh);
    p->Q = falloc(sh);
    p->Kq = falloc(sh);
    p->Vq = falloc(sh);
    p->att = falloc(sh);
    p->tmp = falloc(sh);
    p->hid = falloc((size_t)S * FF);
    p->scores = falloc((size_t)S * (size_t)ex->threads);
    if (!p->q || !p->qn || !p->Q || !p->Kq || !p->Vq || !p->att || !p->tmp || !p->hid || !p->scores) goto nomem;
    *out = p;
    return RECALL_OK;
nomem:
    st = rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
fail:
    rc_pooler_close(p);
    return st;
#undef TRY
}

/* Rows [row0, row0 + nrows) of w as a matrix of their own, when the storage allows it (nf4:
 * the first row must start a 64-block). Returns 0 if not. */
static int sub_rows(const rc_mat *w, int64_t row0, int64_t nrows, rc_mat *out) {
    size_t e = (size_t)(row0 * w->cols);
    *out = *w;
    out->rows = nrows;
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

/* Y[t][r] = W[row0 + r,:] . X[t] + b[row0 + r], r < nout, t < n (output rows split over the pool). */
static void proj(const rc_pooler *p, const rc_mat *w, const float *b, int64_t row0, int64_t nout, const float *X,
                 int n, float *Y) {
    rc_mat sub;
    if (sub_rows(w, row0, nout, &sub)) {
        rc_exec_matmul(p->ex, &sub, b + row0, X, (size_t)w->cols, n, Y, (size_t)nout);
        return;
    }
    for (int64_t r = 0; r < nout; r++) /* an nf4 slice not on a block boundary: the reference */
        for (int t = 0; t < n; t++)
            Y[(size_t)t * nout + r] = rc_dot_row(w, row0 + r, X + (size_t)t * w->cols) + b[row0 + r];
}

typedef struct {
    const rc_pooler *p;
    const float *Q, *K, *V;
    float *scores, *att;
    int nq, nk;
    float scale;
} attn_job;

/* heads [h0, h1): softmax(Q K^T * scale) V for every query row; scores row per worker */
static void attn_heads(void *ctx, int64_t h0, int64_t h1, int worker) {
    const attn_job *j = ctx;
    const int H = j->p->c.hidden, hd = H / j->p->c.heads;
    const rc_kernels *k = &j->p->ex->k;
    float *s = j->scores + (size_t)worker * (size_t)j->nk;
    for (int64_t h = h0; h < h1; h++)
        for (int t = 0; t < j->nq; t++) {
            const float *qh = j->Q + (size_t)t * H + (size_t)h * hd;
            k->attn_scores(qh, j->K + (size_t)h * hd, (size_t)H, j->nk, (size_t)hd, j->scale, s);
            k->softmax(s, (size_t)j->nk);
            float *o = j->att + (size_t)t * H + (size_t)h * hd;
            memset(o, 0, (size_t)hd * sizeof(float)); /* attn_wsum accumulates from out */
            k->attn_wsum(s, j->V + (size_t)h * hd, (size_t)H, j->nk, (size_t)hd, o);
        }
}

/* out[nq][H] = MHA(Q rows from xq[nq], K/V rows from xkv[nk]); K, V scratch, scores
 * [threads][nk]. */
static void mha(const rc_pooler *p, const mha_w *w, const float *xq, int nq, const float *xkv, int nk, float *Q,
                float *K, float *V, float *scores, float *att, float *out) {
    const int H = p->c.hidden, hd = H / p->c.heads;
    const float scale = (float)(1.0 / sqrt((double)hd));
    proj(p, &w->in_w, w->in_b, 0, H, xq, nq, Q);
    proj(p, &w->in_w, w->in_b, H, H, xkv, nk, K);
    proj(p, &w->in_w, w->in_b, 2 * H, H, xkv, nk, V);
    attn_job aj = {p, Q, K, V, scores, att, nq, nk, scale};
    rc_pool_for(p->ex->pool, p->c.heads, 1, attn_heads, &aj);
    proj(p, &w->out_w, w->out_b, 0, H, att, nq, out);
}

/* P, kn, K, V ([cap_L, H] each) and scores_L ([threads, cap_L]) are one block, rewritten in full
 * by every run: it grows by at least half and is never copied (free, then malloc). Five buffers
 * regrown with realloc at every rebuild left heap holes worth more than the buffers (bench/soak.c). */
static recall_status grow(rc_pooler *p, int L, recall_err *err) {
    if (L <= p->cap_L) return RECALL_OK;
    int cap = L;
    const size_t n = (size_t)cap * (size_t)p->c.hidden, ns = (size_t)cap * (size_t)p->ex->threads;
    free(p->P);
    p->P = p->kn = p->K = p->V = p->scores_L = NULL;
    p->cap_L = 0;
    float *blk = malloc((4 * n + ns) * sizeof(float));
    if (!blk) return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory for L = %d", L);
    p->P = blk;
    p->kn = blk + n;
    p->K = blk + 2 * n;
    p->V = blk + 3 * n;
    p->scores_L = blk + 4 * n;
    p->cap_L = cap;
    return RECALL_OK;
}

recall_status rc_pooler_run(rc_pooler *p, const float *past, int L, float *out, recall_err *err) {
    const rc_pooler_config *c = &p->c;
    const int H = c->hidden, S = c->n_sp;
    if (L < 0 || (L > 0 && !past)) return rc_fail(err, RECALL_E_ARG, "pooler: bad input (L = %d)", L);
    if (L > (1 << 24)) return rc_fail(err, RECALL_E_LIMIT, "pooler: L = %d too large", L);
    RC_TRY(grow(p, L, err));
    if (L > 0) {
        const float c_div = (float)(-9.210340371976184 / (double)H); /* -ln(10000)/H */
        for (int j = 0; j < H; j += 2) {
            float div = rc_expf((float)j * c_div);
            for (int pos = 0; pos < L; pos++) {
                float s, co;
                rc_sincosf((float)pos * div, &s, &co);
                const float *x = past + (size_t)pos * H;
                float *y = p->P + (size_t)pos * H;
                y[j] = x[j] + s;
                if (j + 1 < H) y[j + 1] = x[j + 1] + co;
            }
        }
    }
    memcpy(p->q, p->query, (size_t)S * H * sizeof(float));
    for (int bi = 0; bi < c->blocks; bi++) {
        const block_w *w = &p->blk[bi];
        if (L > 0) {
            for (int j = 0; j < L; j++)
                rc_layernorm(p->P + (size_t)j * H, w->lnk_w, w->lnk_b, c->ln_eps, p->kn + (size_t)j * H, (size_t)H);
            for (int t = 0; t < S; t++)
                rc_layernorm(p->q + (size_t)t * H, w->lnq1_w, w->lnq1_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
            mha(p, &w->cross, p->qn, S, p->kn, L, p->Q, p->K, p->V, p->scores_L, p->att, p->tmp);
            for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
        }
        for (int t = 0; t < S; t++)
            rc_layernorm(p->q + (size_t)t * H, w->lnq2_w, w->lnq2_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
        mha(p, &w->selfa, p->qn, S, p->qn, S, p->Q, p->Kq, p->Vq, p->scores, p->att, p->tmp);
        for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
        /* FFN over all S rows at once (rows are independent, outputs bitwise the per-row ones) */
        for (int t = 0; t < S; t++)
            rc_layernorm(p->q + (size_t)t * H, w->lnq3_w, w->lnq3_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
        proj(p, &w->f0, w->f0_b, 0, c->ffn, p->qn, S, p->hid);
        rc_exec_gelu(p->ex, p->hid, (size_t)S * c->ffn);
        proj(p, &w->f2, w->f2_b, 0, H, p->hid, S, p->tmp);
        for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
    }
    for (int t = 0; t < S; t++) {
        float *o = out + (size_t)t * H;
        rc_layernorm(p->q + (size_t)t * H, p->ln_out_w, p->ln_out_b, c->ln_eps, o, (size_t)H);
        rc_l2_normalize(o, 1e-6f, c->out_scale, o, (size_t)H);
    }
    return RECALL_OK;
}
