/* bert.c - BERT encoder + CLS pooling + L2 normalisation, scalar reference (math in bert.h). */
#include "bert.h"

#include "mem.h"
#include "ops.h"
#include "pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rc_mat q, k, v, ao, i1, o2;
    float *bq, *bk, *bv, *bao, *ln1_w, *ln1_b, *bi1, *bo2, *ln2_w, *ln2_b;
} bert_layer;

struct rc_bert {
    rc_bert_config c;
    int max_n;
    rc_mat word, pos, type;
    float *emb_ln_w, *emb_ln_b;
    bert_layer *L;
    float *vecs;
    float *x, *Q, *K, *V, *ctx, *tmp, *inter, *scores, *type0; /* scores: [threads][max_n] */
    const rc_exec *ex;
    rc_exec *own_ex;
};

void rc_bert_close(rc_bert *m) {
    if (!m) return;
    RC_FREE(m->L, m->vecs, m->x, m->Q, m->K, m->V, m->ctx, m->tmp, m->inter, m->scores, m->type0);
    rc_exec_close(m->own_ex);
    free(m);
}

const rc_bert_config *rc_bert_cfg(const rc_bert *m) { return &m->c; }

static float *falloc(size_t n) { return (float *)calloc(n ? n : 1, sizeof(float)); }

recall_status rc_bert_open(const rc_blob *b, rc_bert **out, recall_err *err) {
    return rc_bert_open_ex(b, NULL, out, err);
}

/* The encoder's config, weights and work buffers into m (ex: the pool to run on, NULL: its own). */
static recall_status bert_load(rc_bert *m, const rc_blob *b, const rc_exec *ex, recall_err *err) {
    rc_bert_config *c = &m->c;
    double eps;
    if (!ex) {
        RC_TRY(rc_exec_open(NULL, &m->own_ex, err));
        ex = m->own_ex;
    }
    m->ex = ex;
    RC_TRY(rc_blob_get_int(b, "bert.hidden", 1, 1 << 16, &c->hidden, err));
    RC_TRY(rc_blob_get_int(b, "bert.layers", 1, 1024, &c->layers, err));
    RC_TRY(rc_blob_get_int(b, "bert.heads", 1, 1024, &c->heads, err));
    RC_TRY(rc_blob_get_int(b, "bert.ffn", 1, 1 << 20, &c->ffn, err));
    RC_TRY(rc_blob_get_int(b, "bert.vocab", 1, 1 << 24, &c->vocab, err));
    RC_TRY(rc_blob_get_int(b, "bert.max_pos", 1, 1 << 16, &c->max_pos, err));
    RC_TRY(rc_blob_get_int(b, "bert.type_vocab", 1, 1 << 16, &c->type_vocab, err));
    c->max_seq = c->max_pos;
    if (rc_blob_kv_find(b, "bert.max_seq")) RC_TRY(rc_blob_get_int(b, "bert.max_seq", 1, 1 << 16, &c->max_seq, err));
    RC_TRY(rc_blob_get_f64(b, "bert.ln_eps", &eps, err));
    if (!(eps > 0.0 && eps < 1.0) || c->hidden % c->heads) {
        return rc_fail(err, RECALL_E_FORMAT, "%s: bert.ln_eps out of range or hidden %% heads != 0", rc_blob_path(b));
    }
    c->ln_eps = (float)eps;
    const int H = c->hidden, FF = c->ffn, NL = c->layers;
    m->max_n = c->max_pos < c->max_seq ? c->max_pos : c->max_seq;
    RC_TRY(rc_blob_mat(b, "bert.embeddings.word_embeddings.weight", c->vocab, H, &m->word, err));
    RC_TRY(rc_blob_mat(b, "bert.embeddings.position_embeddings.weight", c->max_pos, H, &m->pos, err));
    RC_TRY(rc_blob_mat(b, "bert.embeddings.token_type_embeddings.weight", c->type_vocab, H, &m->type, err));
    size_t per_layer = 9 * (size_t)H + (size_t)FF;
    m->vecs = falloc(2 * (size_t)H + per_layer * NL);
    m->L = (bert_layer *)calloc((size_t)NL, sizeof(bert_layer));
    if (!m->vecs || !m->L) return rc_fail(err, RECALL_E_NOMEM, "bert: out of memory");
    float *v = m->vecs;
    m->emb_ln_w = v;
    v += H;
    m->emb_ln_b = v;
    v += H;
    RC_TRY(rc_blob_vec(b, "bert.embeddings.LayerNorm.weight", H, m->emb_ln_w, err));
    RC_TRY(rc_blob_vec(b, "bert.embeddings.LayerNorm.bias", H, m->emb_ln_b, err));
    for (int l = 0; l < NL; l++) {
        bert_layer *w = &m->L[l];
        char nm[160];
#define VEC(field, suffix, n)                                                                    \
    w->field = v;                                                                                \
    v += (n);                                                                                    \
    snprintf(nm, sizeof nm, "bert.encoder.layer.%d.%s", l, suffix);                              \
    RC_TRY(rc_blob_vec(b, nm, n, w->field, err))
#define MAT(field, suffix, rows, cols)                                                           \
    snprintf(nm, sizeof nm, "bert.encoder.layer.%d.%s", l, suffix);                              \
    RC_TRY(rc_blob_mat(b, nm, rows, cols, &w->field, err))
        MAT(q, "attention.self.query.weight", H, H);
        VEC(bq, "attention.self.query.bias", H);
        MAT(k, "attention.self.key.weight", H, H);
        VEC(bk, "attention.self.key.bias", H);
        MAT(v, "attention.self.value.weight", H, H);
        VEC(bv, "attention.self.value.bias", H);
        MAT(ao, "attention.output.dense.weight", H, H);
        VEC(bao, "attention.output.dense.bias", H);
        VEC(ln1_w, "attention.output.LayerNorm.weight", H);
        VEC(ln1_b, "attention.output.LayerNorm.bias", H);
        MAT(i1, "intermediate.dense.weight", FF, H);
        VEC(bi1, "intermediate.dense.bias", FF);
        MAT(o2, "output.dense.weight", H, FF);
        VEC(bo2, "output.dense.bias", H);
        VEC(ln2_w, "output.LayerNorm.weight", H);
        VEC(ln2_b, "output.LayerNorm.bias", H);
#undef VEC
#undef MAT
    }
    size_t nh = (size_t)m->max_n * H;
    m->x = falloc(nh);
    m->Q = falloc(nh);
    m->K = falloc(nh);
    m->V = falloc(nh);
    m->ctx = falloc(nh);
    m->tmp = falloc(nh);
    m->inter = falloc((size_t)m->max_n * FF);
    m->scores = falloc((size_t)m->max_n * (size_t)ex->threads);
    m->type0 = falloc((size_t)H);
    if (!m->x || !m->Q || !m->K || !m->V || !m->ctx || !m->tmp || !m->inter || !m->scores || !m->type0)
        return rc_fail(err, RECALL_E_NOMEM, "bert: out of memory");
    rc_mat_row_f32(&m->type, 0, m->type0);
    return RECALL_OK;
}

recall_status rc_bert_open_ex(const rc_blob *b, const rc_exec *ex, rc_bert **out, recall_err *err) {
    *out = NULL;
    rc_bert *m = (rc_bert *)calloc(1, sizeof *m);
    if (!m) return rc_fail(err, RECALL_E_NOMEM, "bert: out of memory");
    recall_status st = bert_load(m, b, ex, err);
    if (st != RECALL_OK) {
        rc_bert_close(m);
        return st;
    }
    *out = m;
    return RECALL_OK;
}

/* Y[t][r] = W[r,:] . X[t] + b[r] for t < n (output rows split over the pool). */
static void proj(const rc_bert *m, const rc_mat *w, const float *b, const float *X, int n, float *Y) {
    rc_exec_matmul(m->ex, w, b, X, (size_t)w->cols, n, Y, (size_t)w->rows);
}

typedef struct {
    const rc_bert *m;
    int n, nout;
    float scale;
} attn_job;

/* heads [h0, h1) for query rows [0, nout) over all n keys */
static void attn_heads(void *ctx, int64_t h0, int64_t h1, int worker) {
    const attn_job *j = ctx;
    const rc_bert *m = j->m;
    const int H = m->c.hidden, hd = H / m->c.heads;
    float *s = m->scores + (size_t)worker * (size_t)m->max_n;
    for (int64_t h = h0; h < h1; h++)
        for (int t = 0; t < j->nout; t++) {
            const float *qh = m->Q + (size_t)t * H + (size_t)h * hd;
            m->ex->k.attn_scores(qh, m->K + (size_t)h * hd, (size_t)H, j->n, (size_t)hd, j->scale, s);
            m->ex->k.softmax(s, (size_t)j->n);
            float *o = m->ctx + (size_t)t * H + (size_t)h * hd;
            memset(o, 0, (size_t)hd * sizeof(float)); /* attn_wsum accumulates from out */
            m->ex->k.attn_wsum(s, m->V + (size_t)h * hd, (size_t)H, j->n, (size_t)hd, o);
        }
}

recall_status rc_bert_embed(rc_bert *m, const int32_t *ids, int n, float *emb, recall_err *err) {
    const rc_bert_config *c = &m->c;
    const int H = c->hidden, FF = c->ffn, hd = H / c->heads;
    if (n < 1 || n > m->max_n) return rc_fail(err, RECALL_E_LIMIT, "bert: %d tokens outside [1, %d]", n, m->max_n);
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= c->vocab)
            return rc_fail(err, RECALL_E_ARG, "bert: token id %d at index %d outside [0, %d)", (int)ids[t], t, c->vocab);
    const float scale = (float)(1.0 / sqrt((double)hd));
    float *row = m->tmp;
    for (int t = 0; t < n; t++) {
        float *x = m->x + (size_t)t * H;
        rc_mat_row_f32(&m->word, ids[t], x);
        rc_mat_row_f32(&m->pos, t, row);
        for (int i = 0; i < H; i++) x[i] = (x[i] + m->type0[i]) + row[i];
        rc_layernorm(x, m->emb_ln_w, m->emb_ln_b, c->ln_eps, x, (size_t)H);
    }
    for (int l = 0; l < c->layers; l++) {
        const bert_layer *w = &m->L[l];
        /* the last layer's output is only read at row 0 */
        const int nout = l == c->layers - 1 ? 1 : n;
        proj(m, &w->q, w->bq, m->x, nout, m->Q);
        proj(m, &w->k, w->bk, m->x, n, m->K);
        proj(m, &w->v, w->bv, m->x, n, m->V);
        {
            attn_job aj = {m, n, nout, scale};
            rc_pool_for(m->ex->pool, c->heads, 1, attn_heads, &aj);
        }
        proj(m, &w->ao, w->bao, m->ctx, nout, m->tmp);
        for (int t = 0; t < nout; t++) {
            float *x = m->x + (size_t)t * H, *a = m->tmp + (size_t)t * H;
            for (int i = 0; i < H; i++) x[i] = a[i] + x[i];
            rc_layernorm(x, w->ln1_w, w->ln1_b, c->ln_eps, x, (size_t)H);
        }
        proj(m, &w->i1, w->bi1, m->x, nout, m->inter);
        rc_exec_gelu(m->ex, m->inter, (size_t)nout * FF);
        proj(m, &w->o2, w->bo2, m->inter, nout, m->tmp);
        for (int t = 0; t < nout; t++) {
            float *x = m->x + (size_t)t * H, *a = m->tmp + (size_t)t * H;
            for (int i = 0; i < H; i++) x[i] = a[i] + x[i];
            rc_layernorm(x, w->ln2_w, w->ln2_b, c->ln_eps, x, (size_t)H);
        }
    }
    rc_l2_normalize(m->x, 1e-12f, 1.0f, emb, (size_t)H);
    return RECALL_OK;
}
