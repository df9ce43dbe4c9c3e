/* pooler.c - AttnPoolSP forward: the streaming cross-attention and its K/V cache (pooler.h),
 * rounding order in ops.h. */
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

/* The K/V rows of the oldest tokens, chunk c holding tokens [c*tile, (c+1)*tile) as
 * [blocks][2][heads][tile][hd] (block b's K rows, then its V rows, each head's apart). */
typedef struct {
    size_t budget;    /* bytes the chunks and keys may take */
    float **chunk;    /* [n_chunk] */
    int n_chunk, cap_chunk;
    int32_t *keys;    /* [n_chunk * tile]: the key of each cached token */
    int n_valid;      /* tokens [0, n_valid) hold the rows of keys[0 .. n_valid) in every block */
} kv_cache;

struct rc_pooler {
    rc_pooler_config c;
    float *query;          /* [n_sp][H] */
    block_w *blk;
    float *ln_out_w, *ln_out_b;
    float *div;            /* [(H + 1) / 2] positional-encoding frequencies of the even columns */
    float *vecs;           /* arena for every fp32 vector above */
    /* scratch, n_sp-sized */
    float *q, *qn, *Q, *Kq, *Vq, *att, *tmp, *hid, *scores;
    /* scratch, tile-sized: one tile of past rows (then kn) and of K or V; per thread the
     * positional encoding's angles, sines and cosines */
    int tile;
    float *tX, *tKV, *pe;
    /* the score rows [heads][n_sp][L] of one block (grown on demand, the only L-sized scratch) */
    float *sc;
    size_t cap_sc;
    kv_cache kc;
    rc_pooler_stats st;
    const rc_exec *ex;
    rc_exec *own_ex;
    const rc_blob *blob; /* the blob the matrices are views of: pages released after each use */
};

void rc_pooler_close(rc_pooler *p) {
    if (!p) return;
    rc_pooler_set_cache(p, 0);
    RC_FREE(p->blk, p->vecs, p->q, p->qn, p->Q, p->Kq, p->Vq, p->att, p->tmp, p->hid, p->scores, p->tX, p->tKV, p->pe,
            p->sc);
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

/* The pooler's config, weights and work buffers into p (ex: the pool to run on, NULL: its own). */
static recall_status pooler_load(rc_pooler *p, const rc_blob *b, const rc_exec *ex, recall_err *err) {
    rc_pooler_config *c = &p->c;
    double eps;
    if (!ex) {
        RC_TRY(rc_exec_open(NULL, &p->own_ex, err));
        ex = p->own_ex;
    }
    p->ex = ex;
    p->blob = b;
    RC_TRY(rc_blob_get_int(b, "pooler.n_sp", 1, 1 << 16, &c->n_sp, err));
    RC_TRY(rc_blob_get_int(b, "pooler.hidden", 1, 1 << 16, &c->hidden, err));
    RC_TRY(rc_blob_get_int(b, "pooler.heads", 1, 1 << 12, &c->heads, err));
    RC_TRY(rc_blob_get_int(b, "pooler.blocks", 1, 1 << 10, &c->blocks, err));
    RC_TRY(rc_blob_get_int(b, "pooler.ffn", 1, 1 << 20, &c->ffn, err));
    RC_TRY(rc_blob_get_f64(b, "pooler.ln_eps", &eps, err));
    if (!(eps > 0.0 && eps < 1.0) || c->hidden % c->heads) {
        return rc_fail(err, RECALL_E_FORMAT, "%s: pooler.ln_eps out of range or hidden %% heads != 0", rc_blob_path(b));
    }
    c->ln_eps = (float)eps;
    const int H = c->hidden, S = c->n_sp, FF = c->ffn, NB = c->blocks;
    size_t per_block = 8 * (size_t)H + 2 * (4 * (size_t)H) + (size_t)FF + (size_t)H;
    const int nh = (H + 1) / 2;
    p->vecs = falloc((size_t)S * H + per_block * NB + 2 * (size_t)H + 1 + (size_t)nh);
    p->blk = (block_w *)calloc((size_t)NB, sizeof(block_w));
    if (!p->vecs || !p->blk) return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
    float *v = p->vecs;
    p->query = v;
    v += (size_t)S * H;
    RC_TRY(rc_blob_vec(b, "pooler.query", (int64_t)S * H, p->query, err));
    {
        const rc_tensor *t = rc_blob_find(b, "pooler.query");
        if (t->ndim != 2 || t->shape[0] != S) {
            return rc_fail(err, RECALL_E_SHAPE, "%s: pooler.query is not [%d,%d]", rc_blob_path(b), S, H);
        }
    }
    for (int i = 0; i < NB; i++) RC_TRY(load_block(b, i, H, FF, &p->blk[i], &v, err));
    p->ln_out_w = v;
    v += H;
    p->ln_out_b = v;
    v += H;
    RC_TRY(rc_blob_vec(b, "pooler.ln_out.weight", H, p->ln_out_w, err));
    RC_TRY(rc_blob_vec(b, "pooler.ln_out.bias", H, p->ln_out_b, err));
    RC_TRY(rc_blob_vec(b, "pooler.out_scale", 1, v, err));
    c->out_scale = fabsf(v[0]);
    v += 1;
    p->div = v;
    const float c_div = (float)(-9.210340371976184 / (double)H); /* -ln(10000)/H */
    for (int k = 0; k < nh; k++) p->div[k] = rc_expf((float)(2 * k) * c_div);
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
    if (!p->q || !p->qn || !p->Q || !p->Kq || !p->Vq || !p->att || !p->tmp || !p->hid || !p->scores)
        return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
    p->pe = falloc(3 * (size_t)nh * (size_t)ex->threads);
    if (!p->pe) return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
    RC_TRY(rc_pooler_set_tile(p, RC_POOLER_TILE, err));
    return RECALL_OK;
}

recall_status rc_pooler_open_ex(const rc_blob *b, const rc_exec *ex, rc_pooler **out, recall_err *err) {
    *out = NULL;
    rc_pooler *p = (rc_pooler *)calloc(1, sizeof *p);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory");
    recall_status st = pooler_load(p, b, ex, err);
    if (st != RECALL_OK) {
        rc_pooler_close(p);
        return st;
    }
    *out = p;
    return RECALL_OK;
}

/* Y[t][r] = W[row0 + r,:] . X[t] + b[row0 + r], r < nout, t < n (output rows split over the pool). */
static void proj(const rc_pooler *p, const rc_mat *w, const float *b, int64_t row0, int64_t nout, const float *X,
                 int n, float *Y) {
    rc_mat sub;
    if (rc_mat_rows(w, row0, nout, &sub)) {
        rc_exec_matmul(p->ex, &sub, b + row0, X, (size_t)w->cols, n, Y, (size_t)nout);
        return;
    }
    for (int64_t r = 0; r < nout; r++) /* an nf4 slice not on a block boundary: the reference */
        for (int t = 0; t < n; t++)
            Y[(size_t)t * nout + r] = rc_dot_row(w, row0 + r, X + (size_t)t * w->cols) + b[row0 + r];
}

static float attn_scale(const rc_pooler *p) { return (float)(1.0 / sqrt((double)(p->c.hidden / p->c.heads))); }

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

/* The self-attention: out[nq][H] = MHA(Q, K, V rows all from xq[nq]); K, V scratch, scores
 * [threads][nq]. */
static void self_mha(const rc_pooler *p, const mha_w *w, const float *xq, int nq, float *Q, float *K, float *V,
                     float *scores, float *att, float *out) {
    const int H = p->c.hidden;
    proj(p, &w->in_w, w->in_b, 0, H, xq, nq, Q);
    proj(p, &w->in_w, w->in_b, H, H, xq, nq, K);
    proj(p, &w->in_w, w->in_b, 2 * H, H, xq, nq, V);
    attn_job aj = {p, Q, K, V, scores, att, nq, nq, attn_scale(p)};
    rc_pool_for(p->ex->pool, p->c.heads, 1, attn_heads, &aj);
    proj(p, &w->out_w, w->out_b, 0, H, att, nq, out);
}


/* ---- the K/V cache ---- */

static size_t chunk_floats(const rc_pooler *p) {
    return (size_t)p->c.blocks * 2 * (size_t)p->tile * (size_t)p->c.hidden;
}

size_t rc_pooler_cache_bytes_per_token(const rc_pooler *p) {
    return (size_t)p->c.blocks * 2 * (size_t)p->c.hidden * sizeof(float) + sizeof(int32_t);
}

void rc_pooler_set_cache(rc_pooler *p, size_t bytes) {
    kv_cache *kc = &p->kc;
    for (int i = 0; i < kc->n_chunk; i++) free(kc->chunk[i]);
    free(kc->chunk);
    free(kc->keys);
    memset(kc, 0, sizeof *kc);
    kc->budget = bytes;
}

/* Head h's slice of row j of block bi's K (which = 0) or V (which = 1) in the cache; the rows up
 * to the end of j's chunk follow it at stride hd (each head's rows of a chunk are contiguous, so a
 * pass over them streams through memory). */
static float *kv_row(const rc_pooler *p, int bi, int which, int h, int j) {
    const size_t T = (size_t)p->tile, hd = (size_t)(p->c.hidden / p->c.heads);
    return p->kc.chunk[(size_t)j / T] +
           ((((size_t)bi * 2 + (size_t)which) * (size_t)p->c.heads + (size_t)h) * T + (size_t)j % T) * hd;
}

/* The projected rows Y[n][H] of tokens j0.. into the cache, head by head. */
static void kv_store(const rc_pooler *p, int bi, int which, int j0, int n, const float *Y) {
    const int H = p->c.hidden, hd = H / p->c.heads;
    for (int h = 0; h < p->c.heads; h++)
        for (int t = 0; t < n; t++)
            memcpy(kv_row(p, bi, which, h, j0 + t), Y + (size_t)t * H + (size_t)h * hd, (size_t)hd * sizeof *Y);
}

/* How a run of L tokens with these keys uses the cache: rows [0, *n_use) are read from it,
 * rows [*n_use, *n_fill) are computed once and stored, rows [*n_fill, L) are streamed. Keys that
 * differ from the cached ones end the valid prefix there. Chunks are added while the budget
 * allows (a failed allocation just leaves the rows streamed: the bits are the same). */
static void cache_plan(rc_pooler *p, const int32_t *keys, int L, int *n_use, int *n_fill) {
    kv_cache *kc = &p->kc;
    *n_use = *n_fill = 0;
    if (!keys || !kc->budget || L == 0) return;
    const int m = kc->n_valid < L ? kc->n_valid : L;
    int i = 0;
    while (i < m && kc->keys[i] == keys[i]) i++;
    if (i < m) kc->n_valid = i; /* another history from token i on */
    *n_use = *n_fill = i;
    if (kc->n_valid > L) return; /* a shorter history than the cached one: nothing to add */
    const int T = p->tile;
    const size_t per_chunk = chunk_floats(p) * sizeof(float) + (size_t)T * sizeof(int32_t);
    const size_t max_chunks = kc->budget / per_chunk;
    const int want = (L + T - 1) / T;
    while ((size_t)kc->n_chunk < max_chunks && kc->n_chunk < want) {
        if (kc->n_chunk == kc->cap_chunk) {
            const int nc = kc->cap_chunk ? 2 * kc->cap_chunk : 16;
            float **ch = realloc(kc->chunk, (size_t)nc * sizeof *ch);
            int32_t *ks = ch ? realloc(kc->keys, (size_t)nc * (size_t)T * sizeof *ks) : NULL;
            if (ch) kc->chunk = ch;
            if (!ks) break;
            kc->keys = ks;
            kc->cap_chunk = nc;
        }
        float *c = malloc(chunk_floats(p) * sizeof(float));
        if (!c) break;
        kc->chunk[kc->n_chunk++] = c;
    }
    const int room = kc->n_chunk * T;
    *n_fill = L < room ? L : room; /* L, or a multiple of the tile */
    if (*n_fill < *n_use) *n_fill = *n_use;
}

/* ---- the streaming cross-attention ---- */

/* Rows [0, n) of the tile X hold past rows j0..: + pe, then LN_k of block w, in place. */
typedef struct {
    const rc_pooler *p;
    const block_w *w;
    float *X;
    int j0;
} kn_job;

static void kn_rows(void *ctx, int64_t r0, int64_t r1, int worker) {
    const kn_job *j = ctx;
    const rc_pooler *p = j->p;
    const int H = p->c.hidden, nh = (H + 1) / 2;
    float *ang = p->pe + (size_t)worker * 3 * (size_t)nh, *sn = ang + nh, *cs = sn + nh;
    for (int64_t r = r0; r < r1; r++) {
        const float pos = (float)(j->j0 + (int)r);
        for (int k = 0; k < nh; k++) ang[k] = pos * p->div[k];
        p->ex->k.sincos(ang, sn, cs, (size_t)nh);
        float *y = j->X + (size_t)r * H;
        for (int k = 0; k < nh; k++) {
            y[2 * k] = y[2 * k] + sn[k];
            if (2 * k + 1 < H) y[2 * k + 1] = y[2 * k + 1] + cs[k];
        }
        rc_layernorm(y, j->w->lnk_w, j->w->lnk_b, p->c.ln_eps, y, (size_t)H);
    }
}

/* p->tX = kn rows of block w for tokens [j0, j0 + n). */
static recall_status tile_kn(rc_pooler *p, const block_w *w, const rc_pooler_src *src, int j0, int n, recall_err *err) {
    RC_TRY(src->rows(src->ctx, j0, n, p->tX, err));
    kn_job j = {p, w, p->tX, j0};
    rc_pool_for(p->ex->pool, n, 4, kn_rows, &j);
    return RECALL_OK;
}

/* Keys [a0, a1) against every (head, query) pair of the queries Q: their scores (into the pair's
 * row of sc, at the key's index), or their V rows weighted by those scores (into att). The K or
 * V rows are the tile `rows` (row a0 first, stride H) or, when NULL, block bi's cached ones. */
typedef struct {
    const rc_pooler *p;
    const float *Q, *rows;
    float *sc, *att;
    size_t ld; /* = L: the stride of the score rows */
    int a0, a1, bi;
    float scale;
    int wsum; /* 0: scores (K rows), 1: weighted sums (V rows) */
} xa_job;

/* Head h's K or V rows of keys [a, ...) in one contiguous piece: *n rows at stride *ld. */
static const float *xa_piece(const xa_job *j, int which, int h, int a, int *n, size_t *ld) {
    const rc_pooler *p = j->p;
    if (j->rows) {
        *n = j->a1 - a;
        *ld = (size_t)p->c.hidden;
        return j->rows + (size_t)(a - j->a0) * p->c.hidden + (size_t)h * (p->c.hidden / p->c.heads);
    }
    const int end = (a / p->tile + 1) * p->tile;
    *n = (end < j->a1 ? end : j->a1) - a;
    *ld = (size_t)(p->c.hidden / p->c.heads);
    return kv_row(p, j->bi, which, h, a);
}

/* pass 1 (scores) or pass 2 (weighted V rows) of the keys [a0, a1), heads [h0, h1) */
static void xa_pairs(void *ctx, int64_t h0, int64_t h1, int worker) {
    const xa_job *j = ctx;
    const rc_pooler *p = j->p;
    const int H = p->c.hidden, S = p->c.n_sp, hd = H / p->c.heads;
    const rc_kernels *k = &p->ex->k;
    (void)worker;
    for (int64_t h = h0; h < h1; h++)
        for (int a = j->a0, n; a < j->a1; a += n) { /* one piece of K or V rows serves every query */
            size_t ld;
            const float *R = xa_piece(j, j->wsum, (int)h, a, &n, &ld);
            for (int t = 0; t < S; t++) {
                float *s = j->sc + ((size_t)h * S + (size_t)t) * j->ld + a;
                if (j->wsum) k->attn_wsum(s, R, ld, n, (size_t)hd, j->att + (size_t)t * H + (size_t)h * hd);
                else k->attn_scores(j->Q + (size_t)t * H + (size_t)h * hd, R, ld, n, (size_t)hd, j->scale, s);
            }
        }
}

/* each pair's full row of ld scores -> probabilities; its output starts at +0.0f */
static void xa_softmax(void *ctx, int64_t h0, int64_t h1, int worker) {
    const xa_job *j = ctx;
    const rc_pooler *p = j->p;
    const int H = p->c.hidden, S = p->c.n_sp, hd = H / p->c.heads;
    (void)worker;
    for (int64_t h = h0; h < h1; h++)
        for (int t = 0; t < S; t++) {
            p->ex->k.softmax(j->sc + ((size_t)h * S + (size_t)t) * j->ld, j->ld);
            memset(j->att + (size_t)t * H + (size_t)h * hd, 0, (size_t)hd * sizeof(float));
        }
}

/* fn over heads for keys [a0, a1) (rows: a tile holding them, or NULL: the cache's) */
static void xa_run(const rc_pooler *p, rc_pool_fn fn, int wsum, xa_job *j, const float *rows, int a0, int a1) {
    j->rows = rows;
    j->a0 = a0;
    j->a1 = a1;
    j->wsum = wsum;
    if (a1 > a0) rc_pool_for(p->ex->pool, p->c.heads, 1, fn, j);
}

/* the tile after a: up to the next multiple of the tile (never across a cache chunk), or b */
static int tile_end(const rc_pooler *p, int a, int b) {
    const int e = (a / p->tile + 1) * p->tile;
    return e < b ? e : b;
}

/* p->tmp = MHA(LN_q1(q), kn, kn) of block bi over the L tokens of src: cached rows [0, n_use),
 * rows [n_use, n_fill) computed into the cache, rows [n_fill, L) streamed. */
static recall_status cross_attn(rc_pooler *p, int bi, const rc_pooler_src *src, int L, int n_use, int n_fill,
                                recall_err *err) {
    const rc_pooler_config *c = &p->c;
    const block_w *w = &p->blk[bi];
    const int H = c->hidden, S = c->n_sp;
    for (int t = 0; t < S; t++)
        rc_layernorm(p->q + (size_t)t * H, w->lnq1_w, w->lnq1_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
    proj(p, &w->cross.in_w, w->cross.in_b, 0, H, p->qn, S, p->Q);
    xa_job j = {p, p->Q, NULL, p->sc, p->att, (size_t)L, 0, 0, bi, attn_scale(p), 0};
    /* pass 1: scores */
    xa_run(p, xa_pairs, 0, &j, NULL, 0, n_use);
    for (int a = n_use, b; a < L; a = b) {
        b = tile_end(p, a, L);
        RC_TRY(tile_kn(p, w, src, a, b - a, err));
        const int fill = a < n_fill; /* [a, b) inside [n_use, n_fill): n_fill is L or a multiple of the tile */
        if (fill) {
            proj(p, &w->cross.in_w, w->cross.in_b, 2 * H, H, p->tX, b - a, p->tKV);
            kv_store(p, bi, 1, a, b - a, p->tKV);
        }
        proj(p, &w->cross.in_w, w->cross.in_b, H, H, p->tX, b - a, p->tKV);
        if (fill) kv_store(p, bi, 0, a, b - a, p->tKV);
        xa_run(p, xa_pairs, 0, &j, p->tKV, a, b);
    }
    xa_run(p, xa_softmax, 0, &j, NULL, 0, L);
    /* pass 2: V weighted by the probabilities, keys ascending */
    xa_run(p, xa_pairs, 1, &j, NULL, 0, n_fill);
    for (int a = n_fill, b; a < L; a = b) {
        b = tile_end(p, a, L);
        RC_TRY(tile_kn(p, w, src, a, b - a, err));
        proj(p, &w->cross.in_w, w->cross.in_b, 2 * H, H, p->tX, b - a, p->tKV);
        xa_run(p, xa_pairs, 1, &j, p->tKV, a, b);
    }
    proj(p, &w->cross.out_w, w->cross.out_b, 0, H, p->att, S, p->tmp);
    return RECALL_OK;
}

/* ---- runs ---- */

recall_status rc_pooler_set_tile(rc_pooler *p, int tile, recall_err *err) {
    if (tile < 1 || tile > (1 << 16)) return rc_fail(err, RECALL_E_ARG, "pooler: tile %d outside 1..65536", tile);
    const size_t n = (size_t)tile * (size_t)p->c.hidden;
    float *x = malloc(n * sizeof *x), *kv = malloc(n * sizeof *kv);
    if (!x || !kv) {
        free(x);
        free(kv);
        return rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory for a tile of %d", tile);
    }
    free(p->tX);
    free(p->tKV);
    p->tX = x;
    p->tKV = kv;
    p->tile = tile;
    rc_pooler_set_cache(p, p->kc.budget); /* the chunks' shape changed */
    return RECALL_OK;
}

/* sc holds [heads][n_sp][L]; it grows by an eighth at least and is never copied (free, then
 * malloc), so a history that grows by a chunk per run reallocates once every few runs. */
static recall_status grow_scores(rc_pooler *p, int L, recall_err *err) {
    const size_t pairs = (size_t)p->c.heads * (size_t)p->c.n_sp, need = pairs * (size_t)L;
    if (need <= p->cap_sc) return RECALL_OK;
    const size_t cap = pairs * ((size_t)L + (size_t)L / 8 + 64);
    free(p->sc);
    p->sc = malloc(cap * sizeof *p->sc);
    p->cap_sc = p->sc ? cap : 0;
    return p->sc ? RECALL_OK : rc_fail(err, RECALL_E_NOMEM, "pooler: out of memory for the scores of L = %d", L);
}

void rc_pooler_get_stats(const rc_pooler *p, rc_pooler_stats *out) {
    *out = p->st;
    out->cache_tokens = p->kc.n_valid;
    out->cache_bytes = (size_t)p->kc.n_chunk * (chunk_floats(p) * sizeof(float) + (size_t)p->tile * sizeof(int32_t));
    out->scratch_bytes = p->cap_sc * sizeof(float);
}

/* A run reads every matrix once (303 MB of them at the 1.5B shape, in f32), and a matrix is not
 * needed again until the next run: with a blob mapped from its file, each matrix's pages are
 * released after its last use in a run (rc_blob_release: clean file pages, read again from the
 * file by the next run), so that at most one matrix is resident at a time, not all of them. */
static void release_mat(const rc_pooler *p, const rc_mat *w) { rc_mat_release(p->blob, w, 0, w->rows); }

recall_status rc_pooler_run_src(rc_pooler *p, const rc_pooler_src *src, int L, float *out, recall_err *err) {
    const rc_pooler_config *c = &p->c;
    const int H = c->hidden, S = c->n_sp;
    if (L < 0 || (L > 0 && (!src || !src->rows))) return rc_fail(err, RECALL_E_ARG, "pooler: bad input (L = %d)", L);
    if (L > (1 << 24)) return rc_fail(err, RECALL_E_LIMIT, "pooler: L = %d too large", L);
    if (L > 0) RC_TRY(grow_scores(p, L, err));
    int n_use, n_fill;
    cache_plan(p, L > 0 ? src->keys : NULL, L, &n_use, &n_fill);
    memcpy(p->q, p->query, (size_t)S * H * sizeof(float));
    for (int bi = 0; bi < c->blocks; bi++) {
        const block_w *w = &p->blk[bi];
        if (L > 0) {
            RC_TRY(cross_attn(p, bi, src, L, n_use, n_fill, err)); /* the cache keeps [0, n_use) valid */
            for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
            release_mat(p, &w->cross.in_w);
            release_mat(p, &w->cross.out_w);
        }
        for (int t = 0; t < S; t++)
            rc_layernorm(p->q + (size_t)t * H, w->lnq2_w, w->lnq2_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
        self_mha(p, &w->selfa, p->qn, S, p->Q, p->Kq, p->Vq, p->scores, p->att, p->tmp);
        release_mat(p, &w->selfa.in_w);
        release_mat(p, &w->selfa.out_w);
        for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
        /* FFN over all S rows at once (rows are independent, outputs bitwise the per-row ones) */
        for (int t = 0; t < S; t++)
            rc_layernorm(p->q + (size_t)t * H, w->lnq3_w, w->lnq3_b, c->ln_eps, p->qn + (size_t)t * H, (size_t)H);
        proj(p, &w->f0, w->f0_b, 0, c->ffn, p->qn, S, p->hid);
        release_mat(p, &w->f0);
        rc_exec_gelu(p->ex, p->hid, (size_t)S * c->ffn);
        proj(p, &w->f2, w->f2_b, 0, H, p->hid, S, p->tmp);
        release_mat(p, &w->f2);
        for (size_t i = 0; i < (size_t)S * H; i++) p->q[i] = p->q[i] + p->tmp[i];
    }
    for (int t = 0; t < S; t++) {
        float *o = out + (size_t)t * H;
        rc_layernorm(p->q + (size_t)t * H, p->ln_out_w, p->ln_out_b, c->ln_eps, o, (size_t)H);
        rc_l2_normalize(o, 1e-6f, c->out_scale, o, (size_t)H);
    }
    if (n_fill > n_use) { /* every block's rows of [n_use, n_fill) are in: they become valid */
        memcpy(p->kc.keys + n_use, src->keys + n_use, (size_t)(n_fill - n_use) * sizeof *src->keys);
        p->kc.n_valid = n_fill;
    }
    p->st.last_L = L;
    p->st.last_cached = n_use;
    p->st.last_filled = n_fill - n_use;
    p->st.last_streamed = L - n_fill;
    return RECALL_OK;
}

/* rows of a plain past[L][H] array */
typedef struct {
    const float *past;
    size_t H;
} past_src;

static recall_status past_rows(void *ctx, int j0, int n, float *dst, recall_err *err) {
    const past_src *ps = ctx;
    (void)err;
    memcpy(dst, ps->past + (size_t)j0 * ps->H, (size_t)n * ps->H * sizeof *dst);
    return RECALL_OK;
}

recall_status rc_pooler_run(rc_pooler *p, const float *past, int L, float *out, recall_err *err) {
    if (L > 0 && !past) return rc_fail(err, RECALL_E_ARG, "pooler: bad input (L = %d, no rows)", L);
    past_src ps = {past, (size_t)p->c.hidden};
    const rc_pooler_src src = {past_rows, &ps, NULL};
    return rc_pooler_run_src(p, &src, L, out, err);
}
