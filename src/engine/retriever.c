/* retriever.c - ids-only block archive and BGE-on-demand retrieval (retriever.h). */
#include "retriever.h"

#include "ops.h" /* rc_log_d */

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rc_archive_init(rc_archive *a, int block) {
    memset(a, 0, sizeof *a);
    a->block = block;
}

void rc_archive_free(rc_archive *a) {
    free(a->buf);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

void rc_archive_reset(rc_archive *a) {
    a->n_buf = 0;
    a->n_blocks = 0;
}

static int grow(int32_t **p, int *cap, int need) {
    if (need <= *cap) return 1;
    int nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    int32_t *np = realloc(*p, (size_t)nc * sizeof *np);
    if (!np) return 0;
    *p = np;
    *cap = nc;
    return 1;
}

recall_status rc_archive_push(rc_archive *a, const int32_t *ids, int n, recall_err *err) {
    if (!grow(&a->buf, &a->cap_buf, a->n_buf + n)) return rc_fail(err, RECALL_E_NOMEM, "archive: out of memory");
    memcpy(a->buf + a->n_buf, ids, (size_t)n * sizeof *ids);
    a->n_buf += n;
    return RECALL_OK;
}

const int32_t *rc_archive_seal(rc_archive *a, recall_err *err) {
    if (a->n_buf < a->block) return NULL;
    if (!grow(&a->blocks, &a->cap_blocks, (a->n_blocks + 1) * a->block)) {
        rc_fail(err, RECALL_E_NOMEM, "archive: out of memory");
        return NULL;
    }
    int32_t *dst = a->blocks + (size_t)a->n_blocks * a->block;
    memcpy(dst, a->buf, (size_t)a->block * sizeof *dst);
    memmove(a->buf, a->buf + a->block, (size_t)(a->n_buf - a->block) * sizeof *dst);
    a->n_buf -= a->block;
    a->n_blocks++;
    return dst;
}

int rc_archive_n_candidates(const rc_archive *a, int buf_min) { return a->n_blocks + (a->n_buf >= buf_min); }

void rc_retrieval_free(rc_retrieval *r) {
    free(r->bridge);
    free(r->rid);
    memset(r, 0, sizeof *r);
}

static void candidate(const rc_archive *a, int i, const int32_t **ids, int *n) {
    if (i < a->n_blocks) {
        *ids = a->blocks + (size_t)i * a->block;
        *n = a->block;
    } else {
        *ids = a->buf;
        *n = a->n_buf;
    }
}

/* out->top sorted ascending (chronological), out->rid = the chosen candidates' ids in that order. */
static recall_status chosen_ids(const rc_archive *a, rc_retrieval *out, recall_err *err) {
    for (int i = 1; i < out->ntop; i++)
        for (int j = i; j > 0 && out->top[j] < out->top[j - 1]; j--) {
            int t = out->top[j];
            out->top[j] = out->top[j - 1];
            out->top[j - 1] = t;
        }
    int total = 0;
    for (int i = 0; i < out->ntop; i++) {
        const int32_t *ids;
        int n;
        candidate(a, out->top[i], &ids, &n);
        total += n;
    }
    free(out->rid);
    out->nrid = 0;
    out->rid = malloc((size_t)(total ? total : 1) * sizeof *out->rid);
    if (!out->rid) return rc_fail(err, RECALL_E_NOMEM, "retriever: out of memory");
    for (int i = 0; i < out->ntop; i++) {
        const int32_t *ids;
        int n;
        candidate(a, out->top[i], &ids, &n);
        memcpy(out->rid + out->nrid, ids, (size_t)n * sizeof *ids);
        out->nrid += n;
    }
    return RECALL_OK;
}

void rc_key_cache_free(rc_key_cache *c) {
    free(c->kz);
    memset(c, 0, sizeof *c);
}

/* kz[d] of candidate c: BPE decode -> WordPiece -> BERT -> Wk. */
static recall_status encode_key(const rc_retriever *rt, const int32_t *ids, int n, float *e, float *kz,
                                recall_err *err) {
    char *text = NULL;
    size_t tl = 0;
    int32_t *wp = NULL;
    size_t nwp = 0;
    recall_status s = rc_bpe_decode(rt->bpe, ids, (size_t)n, 0, &text, &tl, err);
    if (!s) s = rc_wp_encode(rt->wp, text, tl, 1, &wp, &nwp, err);
    if (!s && (int)nwp > rt->max_seq) nwp = (size_t)rt->max_seq; /* rc_wp_encode already truncates */
    if (!s) s = rc_bert_embed(rt->bert, wp, (int)nwp, e, err);
    if (!s) rc_bridge_key(rt->heads, e, kz);
    free(text);
    free(wp);
    return s;
}

recall_status rc_retrieve_bge(const rc_retriever *rt, const rc_archive *a, const float *f, int k, int buf_min,
                              rc_key_cache *cache, rc_retrieval *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    int nc = rc_archive_n_candidates(a, buf_min);
    if (k > RC_MAX_K) k = RC_MAX_K;
    int d = rc_bridge_d(rt->heads), kd = rc_bridge_kdim(rt->heads);
    float *qz = malloc((size_t)d * sizeof *qz), *kz = malloc((size_t)d * sizeof *kz),
          *e = malloc((size_t)kd * sizeof *e);
    out->bridge = malloc((size_t)(nc ? nc : 1) * sizeof *out->bridge);
    recall_status s = RECALL_OK;
    if (!qz || !kz || !e || !out->bridge) {
        s = rc_fail(err, RECALL_E_NOMEM, "retriever: out of memory");
        goto done;
    }
    out->ncand = nc;
    rc_bridge_query(rt->heads, f, qz);
    if (cache && cache->d != d) {
        rc_key_cache_free(cache);
        cache->d = d;
    }
    for (int c = 0; c < nc && !s; c++) {
        const int32_t *ids;
        int n;
        candidate(a, c, &ids, &n);
        int sealed = c < a->n_blocks;
        if (cache && sealed && c < cache->n) {
            out->bridge[c] = rc_bridge_score(rt->heads, qz, cache->kz + (size_t)c * d);
            continue;
        }
        s = encode_key(rt, ids, n, e, kz, err);
        if (s) break;
        out->bridge[c] = rc_bridge_score(rt->heads, qz, kz);
        if (cache) {
            cache->encodes++;
            if (sealed && c == cache->n) { /* blocks are cached in order */
                if (cache->n == cache->cap) {
                    int nc2 = cache->cap ? cache->cap * 2 : 16;
                    float *nk = realloc(cache->kz, (size_t)nc2 * d * sizeof *nk);
                    if (!nk) {
                        s = rc_fail(err, RECALL_E_NOMEM, "retriever: out of memory");
                        break;
                    }
                    cache->kz = nk;
                    cache->cap = nc2;
                }
                memcpy(cache->kz + (size_t)c * d, kz, (size_t)d * sizeof *kz);
                cache->n++;
            }
        }
    }
    if (s) goto done;
    /* top-k exactly as torch.topk on CPU (topk.h): ties follow libstdc++'s selection, NaN is greatest */
    int kk = k < nc ? k : nc;
    if (kk > 0) {
        rc_topk_pair scratch[64 * RC_MAX_K]; /* rc_topk_scratch(nc, kk) < 64 * kk */
        int32_t sel[RC_MAX_K];
        rc_topk(out->bridge, nc, kk, scratch, sel, NULL);
        for (int i = 0; i < kk; i++) out->top[i] = sel[i];
        out->ntop = kk;
    }
    s = chosen_ids(a, out, err);
done:
    free(qz);
    free(kz);
    free(e);
    if (s) rc_retrieval_free(out);
    return s;
}

recall_status rc_retrieve_score(const rc_retriever *rt, const float *f, const int32_t *ids, int n, float *score,
                                recall_err *err) {
    const int d = rc_bridge_d(rt->heads), kd = rc_bridge_kdim(rt->heads);
    float *qz = malloc((size_t)d * sizeof *qz), *kz = malloc((size_t)d * sizeof *kz),
          *e = malloc((size_t)kd * sizeof *e);
    recall_status s = qz && kz && e ? RECALL_OK : rc_fail(err, RECALL_E_NOMEM, "retriever: out of memory");
    if (!s) {
        rc_bridge_query(rt->heads, f, qz);
        s = encode_key(rt, ids, n, e, kz, err);
    }
    if (!s) *score = rc_bridge_score(rt->heads, qz, kz);
    free(qz);
    free(kz);
    free(e);
    return s;
}

/* ---- opts.rerank words (and single): the bridge's scores fused with the words the user asked in */

typedef struct {
    int c;
    double key1, key2; /* sort keys, both descending; then c ascending */
} ranked;

static int by_keys(const void *x, const void *y) {
    const ranked *a = x, *b = y;
    if (a->key1 != b->key1) return a->key1 > b->key1 ? -1 : 1;
    if (a->key2 != b->key2) return a->key2 > b->key2 ? -1 : 1;
    return (a->c > b->c) - (a->c < b->c);
}

static int holds(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

recall_status rc_retrieve_rerank_words(const rc_archive *a, const rc_bpe *bpe, const int32_t *q, int nq, int k,
                                       int single, rc_retrieval *rv, recall_err *err) {
    const int nc = rv->ncand;
    if (k > RC_MAX_K) k = RC_MAX_K;
    if (k > nc) k = nc;
    if (nc == 0 || k == 0) return RECALL_OK;
    int32_t *words = malloc((size_t)(nq ? nq : 1) * sizeof *words);
    double *lex = calloc((size_t)nc, sizeof *lex);
    ranked *r = malloc((size_t)nc * sizeof *r);
    if (!words || !lex || !r) {
        free(words), free(lex), free(r);
        return rc_fail(err, RECALL_E_NOMEM, "retriever: out of memory");
    }
    /* the query's distinct ids that are not added tokens, in order of first appearance */
    int nw = 0;
    for (int i = 0; i < nq; i++)
        if (!rc_bpe_is_added(bpe, q[i]) && !holds(words, nw, q[i])) words[nw++] = q[i];
    /* each word's weight: log(candidates / candidates holding it); a candidate's score: the sum
     * of the weights of the words it holds, added in the query's order */
    for (int w = 0; w < nw; w++) {
        int df = 0;
        for (int c = 0; c < nc; c++) {
            const int32_t *ids;
            int n;
            candidate(a, c, &ids, &n);
            df += holds(ids, n, words[w]);
        }
        if (df == 0) continue;
        const double idf = rc_log_d((double)nc / (double)df); /* the project's log: the same bits on every libm */
        for (int c = 0; c < nc; c++) {
            const int32_t *ids;
            int n;
            candidate(a, c, &ids, &n);
            if (holds(ids, n, words[w])) lex[c] += idf;
        }
    }
    /* fused: each score scaled to [0, 1] over the candidates (min-max), then added; a score that
     * sets apart one block among hundreds (the question's rare words) then counts as much as the
     * bridge's, where ranks would flatten it. A NaN bridge score (torch.topk takes it as the
     * greatest) and +inf scale to 1, -inf to 0; ties: bridge score, then the earlier candidate. */
#define BRIDGE(c) (isnan(rv->bridge[c]) ? INFINITY : (double)rv->bridge[c])
    double blo = INFINITY, bhi = -INFINITY, llo = INFINITY, lhi = -INFINITY;
    for (int c = 0; c < nc; c++) {
        const double b = BRIDGE(c);
        if (isfinite(b)) blo = b < blo ? b : blo, bhi = b > bhi ? b : bhi;
        llo = lex[c] < llo ? lex[c] : llo, lhi = lex[c] > lhi ? lex[c] : lhi;
    }
    for (int c = 0; c < nc; c++) {
        const double b = BRIDGE(c);
        const double bn = !isfinite(b) ? (b > 0 ? 1.0 : 0.0) : bhi > blo ? (b - blo) / (bhi - blo) : 0.0;
        const double ln = lhi > llo ? (lex[c] - llo) / (lhi - llo) : 0.0;
        r[c] = (ranked){c, bn + ln, b};
    }
#undef BRIDGE
    qsort(r, (size_t)nc, sizeof *r, by_keys);
    /* single: the leader alone when no other candidate holds the query's words as well (far back,
     * the second pick is another fact in like words and the reply copies its value) */
    if (single) {
        int alone = 1;
        for (int c = 0; c < nc && alone; c++) alone = c == r[0].c || lex[r[0].c] > lex[c];
        if (alone) k = 1;
    }
    rv->ntop = k;
    for (int i = 0; i < k; i++) rv->top[i] = r[i].c;
    free(words), free(lex), free(r);
    return chosen_ids(a, rv, err);
}
