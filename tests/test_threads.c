/* test_threads.c - determinism across execution contexts: worldA qwen2 logits / hidden states /
 * gate q, pooler soft tokens and bert embeddings are memcmp-identical to the scalar
 * single-thread reference for every available SIMD path at 1/2/3/4/7/16 threads, and
 * token-by-token decode on a multi-threaded SIMD context equals the scalar prefill. A failure
 * names the first differing float and both bit patterns. */
#define _GNU_SOURCE /* pthread_getattr_np, for the pool's worker stack size */
#include "bert.h"
#include "blob.h"
#include "fixture.h"
#include "nf4.h"
#include "pool.h"
#include "pooler.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WA "tests/golden/worldA/"

static const int thread_counts[] = {1, 2, 3, 4, 7, 16};

static rc_exec *exec_for(rc_simd_path path, int threads) {
    rc_exec_opts o = {.threads = threads, .simd = rc_simd_name(path)};
    rc_exec *e = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_exec_open(&o, &e, &err), RECALL_OK, "%s", err.msg);
#ifdef RECALL_NO_THREADS
    cr_assert_eq(e->threads, 1); /* no pthreads: every request runs on the calling thread */
#else
    cr_assert_eq(e->threads, threads);
#endif
    cr_assert_str_eq(e->k.name, rc_simd_name(path));
    return e;
}

typedef struct {
    float *logits, *hidden, *gq;
    size_t nl, nh, ng;
} qwen_out;

static void qwen_run(rc_blob *b, const rc_exec *ex, rc_kv_dtype kv, const int32_t *ids, int T, int decode, qwen_out *o) {
    recall_err err = {0};
    rc_qwen2 *m = NULL;
    cr_assert_eq(rc_qwen2_open_ex(b, T + 4, ex, &m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(m, kv, &err), RECALL_OK, "%s", err.msg);
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    o->nl = (size_t)T * c->vocab;
    o->nh = (size_t)(c->layers + 1) * c->hidden;
    o->ng = (size_t)c->n_gate * c->heads * c->head_dim;
    o->logits = malloc(o->nl * 4);
    o->hidden = malloc(o->nh * 4);
    o->gq = malloc(o->ng * 4);
    for (size_t i = 0; i < o->nl; i++) o->logits[i] = NAN;
    if (!decode) {
        rc_qwen2_fwd f = {.ids = ids, .n = T, .logits_all = o->logits, .hidden_last = o->hidden};
        cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    } else {
        for (int t = 0; t < T; t++) {
            rc_qwen2_fwd f = {.ids = ids + t, .n = 1, .logits_last = o->logits + (size_t)t * c->vocab,
                              .hidden_last = o->hidden};
            cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
        }
    }
    memcpy(o->gq, rc_qwen2_gate_q(m), o->ng * 4);
    rc_qwen2_close(m);
}

static void qwen_free(qwen_out *o) {
    free(o->logits);
    free(o->hidden);
    free(o->gq);
}

static void qwen_all_contexts(const char *weights, rc_kv_dtype kv) {
    rc_blob *b = fixture_open_worldA(weights);
    size_t n;
    int *ids_i = fixture_npz_i32(WA "qwen2_fp32.npz", "ids", &n);
    cr_assert(n >= 8 && n <= 64);
    int32_t ids[64];
    for (size_t t = 0; t < n; t++) ids[t] = ids_i[t];
    rc_exec *e0 = exec_for(RC_SIMD_SCALAR, 1);
    qwen_out ref;
    qwen_run(b, e0, kv, ids, (int)n, 0, &ref);
    if (kv != RC_KV_DT_F32) { /* the rounded cache ran: the logits are not the exact ones */
        qwen_out exact;
        qwen_run(b, e0, RC_KV_DT_F32, ids, (int)n, 0, &exact);
        cr_assert_neq(memcmp(exact.logits, ref.logits, ref.nl * 4), 0, "kv %s gives the f32 logits", rc_kv_dtype_name(kv));
        qwen_free(&exact);
    }
    int runs = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!fixture_path_runs(p)) continue;
        for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
            rc_exec *e = exec_for((rc_simd_path)p, thread_counts[ti]);
            qwen_out got;
            char what[96];
            qwen_run(b, e, kv, ids, (int)n, 0, &got);
            snprintf(what, sizeof what, "qwen2 %s kv %s %s x%d logits", weights, rc_kv_dtype_name(kv), e->k.name, e->threads);
            fixture_expect_same_bits(got.logits, ref.logits, ref.nl, what);
            snprintf(what, sizeof what, "qwen2 %s %s x%d hidden", weights, e->k.name, e->threads);
            fixture_expect_same_bits(got.hidden, ref.hidden, ref.nh, what);
            snprintf(what, sizeof what, "qwen2 %s %s x%d gate q", weights, e->k.name, e->threads);
            fixture_expect_same_bits(got.gq, ref.gq, ref.ng, what);
            qwen_free(&got);
            if (thread_counts[ti] == 3) { /* token-by-token decode == scalar one-shot prefill */
                qwen_run(b, e, kv, ids, (int)n, 1, &got);
                snprintf(what, sizeof what, "qwen2 %s %s x3 decode vs scalar prefill", weights, e->k.name);
                fixture_expect_same_bits(got.logits, ref.logits, ref.nl, what);
                fixture_expect_same_bits(got.gq, ref.gq, ref.ng, what);
                qwen_free(&got);
            }
            rc_exec_close(e);
            runs++;
        }
    }
    cr_assert_geq(runs, 6);
    qwen_free(&ref);
    rc_exec_close(e0);
    free(ids_i);
    rc_blob_close(b);
}

Test(threads_det, qwen2_f32_all_paths_and_threads) { qwen_all_contexts("f32", RC_KV_DT_F32); }
Test(threads_det, qwen2_nf4_all_paths_and_threads) { qwen_all_contexts("nf4", RC_KV_DT_F32); }
/* the f16 KV cache: every path and thread count, prefill and decode, the same bits */
Test(threads_det, qwen2_nf4_f16_kv_all_paths_and_threads) { qwen_all_contexts("nf4", RC_KV_DT_F16); }

Test(threads_det, pooler_and_bert_all_paths_and_threads) {
    rc_blob *b = fixture_open_worldA("nf4");
    recall_err err = {0};
    rc_exec *e0 = exec_for(RC_SIMD_SCALAR, 1);
    rc_pooler *p0 = NULL;
    rc_bert *m0 = NULL;
    cr_assert_eq(rc_pooler_open_ex(b, e0, &p0, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bert_open_ex(b, e0, &m0, &err), RECALL_OK, "%s", err.msg);
    const int H = rc_pooler_cfg(p0)->hidden, S = rc_pooler_cfg(p0)->n_sp, BH = rc_bert_cfg(m0)->hidden;
    const int L = 70, NB = 40;
    float *past = malloc((size_t)L * H * 4);
    uint64_t s = 12345;
    for (size_t i = 0; i < (size_t)L * H; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        past[i] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5);
    }
    int32_t bids[40];
    for (int i = 0; i < NB; i++) bids[i] = (int32_t)((i * 37 + 5) % rc_bert_cfg(m0)->vocab);
    float *sp_ref = malloc((size_t)S * H * 4), *sp = malloc((size_t)S * H * 4);
    float *emb_ref = malloc((size_t)BH * 4), *emb = malloc((size_t)BH * 4);
    cr_assert_eq(rc_pooler_run(p0, past, L, sp_ref, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bert_embed(m0, bids, NB, emb_ref, &err), RECALL_OK, "%s", err.msg);
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!fixture_path_runs(p)) continue;
        for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
            rc_exec *e = exec_for((rc_simd_path)p, thread_counts[ti]);
            rc_pooler *pp = NULL;
            rc_bert *mm = NULL;
            cr_assert_eq(rc_pooler_open_ex(b, e, &pp, &err), RECALL_OK, "%s", err.msg);
            cr_assert_eq(rc_bert_open_ex(b, e, &mm, &err), RECALL_OK, "%s", err.msg);
            char what[80];
            for (int rep = 0; rep < 2; rep++) { /* L = 0 then L = 70: scratch regrowth */
                for (int i = 0; i < S * H; i++) sp[i] = NAN;
                cr_assert_eq(rc_pooler_run(pp, rep ? past : NULL, rep ? L : 0, sp, &err), RECALL_OK, "%s", err.msg);
            }
            snprintf(what, sizeof what, "pooler %s x%d", e->k.name, e->threads);
            fixture_expect_same_bits(sp, sp_ref, (size_t)S * H, what);
            for (int i = 0; i < BH; i++) emb[i] = NAN;
            cr_assert_eq(rc_bert_embed(mm, bids, NB, emb, &err), RECALL_OK, "%s", err.msg);
            snprintf(what, sizeof what, "bert %s x%d", e->k.name, e->threads);
            fixture_expect_same_bits(emb, emb_ref, (size_t)BH, what);
            rc_pooler_close(pp);
            rc_bert_close(mm);
            rc_exec_close(e);
        }
    }
    free(past);
    free(sp_ref);
    free(sp);
    free(emb_ref);
    free(emb);
    rc_pooler_close(p0);
    rc_bert_close(m0);
    rc_exec_close(e0);
    rc_blob_close(b);
}

/* the pool itself: every index of [0, n) visited exactly once, for awkward n / grain / threads */
typedef struct {
    int *hits;
} pool_ctx;

static void mark(void *ctx, int64_t b, int64_t e, int worker) {
    pool_ctx *c = ctx;
    (void)worker;
    for (int64_t i = b; i < e; i++) c->hits[i]++;
}

#if defined(__GLIBC__) && !defined(RECALL_NO_THREADS)
/* The workers run with RC_POOL_STACK, not the libc default (glibc: 8 MB; musl: 128 KB). Worker 0
 * is the calling thread and keeps its own stack. */
typedef struct {
    size_t stack[4];
} stack_ctx;

static void record_stack(void *ctx, int64_t b, int64_t e, int worker) {
    stack_ctx *c = ctx;
    (void)b;
    (void)e;
    pthread_attr_t a;
    size_t sz = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstacksize(&a, &sz);
        pthread_attr_destroy(&a);
    }
    c->stack[worker] = sz;
    for (volatile int spin = 0; spin < 200000; spin++) {} /* keep the piece long enough for every worker to take one */
}

Test(threads_pool, workers_get_their_own_stack) {
    rc_pool *p = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_pool_create(4, &p, &err), RECALL_OK, "%s", err.msg);
    stack_ctx c;
    memset(&c, 0, sizeof c);
    for (int rep = 0; rep < 50 && !(c.stack[1] && c.stack[2] && c.stack[3]); rep++) rc_pool_for(p, 64, 1, record_stack, &c);
    for (int w = 1; w < 4; w++) {
        cr_expect(c.stack[w] != 0, "worker %d never ran a piece", w);
        if (c.stack[w])
            cr_expect(c.stack[w] >= RC_POOL_STACK && c.stack[w] < 2 * RC_POOL_STACK, "worker %d stack %zu bytes, want %zu", w,
                      c.stack[w], (size_t)RC_POOL_STACK);
    }
    rc_pool_destroy(p);
}
#endif

/* The fused parallel sections (q/k/v as one, gate/up/SiLU as one) give the bits of the separate
 * calls, for row counts that are not multiples of the 16-row grain, f32 and nf4, every path and
 * thread count; outputs start poisoned with NaN. */
static float *filled(size_t n, uint32_t seed) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)((int)(seed >> 9) % 2001 - 1000) * 0.00073f;
    }
    return v;
}

static float *poisoned(size_t n) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = NAN;
    return v;
}

Test(threads_pool, fused_sections_equal_separate_calls) {
    enum { COLS = 192, NPART = 3 };
    static const int64_t rows[NPART] = {37, 5, 100}; /* 142 rows end to end */
    static const int nts[] = {1, 3, 17};
    for (int dt = 0; dt < 2; dt++) {
        rc_mat w[NPART];
        uint8_t *codes[NPART] = {0};
        float *absmax[NPART] = {0}, *wf[NPART], *bias[NPART];
        for (int p = 0; p < NPART; p++) {
            const size_t n = (size_t)rows[p] * COLS;
            wf[p] = filled(n, 11u + (uint32_t)p);
            bias[p] = p == 1 ? NULL : filled((size_t)rows[p], 91u + (uint32_t)p);
            if (dt) {
                codes[p] = malloc(n / 2);
                absmax[p] = malloc(n / 64 * sizeof(float));
                cr_assert_eq(rc_nf4_quantize(wf[p], n, codes[p], absmax[p]), 0);
                w[p] = (rc_mat){RC_DT_NF4, codes[p], absmax[p], rows[p], COLS};
            } else {
                w[p] = (rc_mat){RC_DT_F32, wf[p], NULL, rows[p], COLS};
            }
        }
        for (size_t k = 0; k < sizeof nts / sizeof nts[0]; k++) {
            const int nt = nts[k];
            float *X = filled((size_t)nt * COLS, 7u);
            float *want[NPART], *got[NPART];
            rc_exec *e0 = exec_for(RC_SIMD_SCALAR, 1);
            for (int p = 0; p < NPART; p++) {
                want[p] = poisoned((size_t)nt * (size_t)rows[p]);
                rc_exec_matmul(e0, &w[p], bias[p], X, COLS, nt, want[p], (size_t)rows[p]);
            }
            /* swiglu: gate = part 0, up = the first 37 rows of part 2 */
            const size_t F = (size_t)rows[0];
            float *g_want = poisoned((size_t)nt * F), *u_want = poisoned((size_t)nt * F);
            rc_exec_matmul(e0, &w[0], NULL, X, COLS, nt, g_want, F);
            rc_mat up = w[0];
            up.rows = rows[0];
            up.data = dt ? (const void *)codes[2] : (const void *)wf[2];
            up.absmax = dt ? absmax[2] : NULL;
            rc_exec_matmul(e0, &up, NULL, X, COLS, nt, u_want, F);
            e0->k.silu_mul(g_want, u_want, (size_t)nt * F);
            rc_exec_close(e0);
            for (int path = 0; path < RC_SIMD_COUNT; path++) {
                if (!fixture_path_runs(path)) continue;
                for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
                    rc_exec *e = exec_for((rc_simd_path)path, thread_counts[ti]);
                    rc_mm_part parts[NPART];
                    for (int p = 0; p < NPART; p++) {
                        got[p] = poisoned((size_t)nt * (size_t)rows[p]);
                        parts[p] = (rc_mm_part){.w = &w[p], .bias = bias[p], .Y = got[p], .ldy = (size_t)rows[p]};
                    }
                    rc_exec_matmul_parts(e, parts, NPART, X, COLS, nt);
                    char what[96];
                    for (int p = 0; p < NPART; p++) {
                        snprintf(what, sizeof what, "%s parts %s x%d nt %d part %d", dt ? "nf4" : "f32", e->k.name,
                                 e->threads, nt, p);
                        fixture_expect_same_bits(got[p], want[p], (size_t)nt * (size_t)rows[p], what);
                        free(got[p]);
                    }
                    float *g = poisoned((size_t)nt * F), *u = poisoned((size_t)nt * F);
                    rc_exec_swiglu(e, &w[0], &up, X, COLS, nt, g, u);
                    snprintf(what, sizeof what, "%s swiglu %s x%d nt %d", dt ? "nf4" : "f32", e->k.name, e->threads, nt);
                    fixture_expect_same_bits(g, g_want, (size_t)nt * F, what);
                    snprintf(what, sizeof what, "%s swiglu up %s x%d nt %d", dt ? "nf4" : "f32", e->k.name, e->threads, nt);
                    fixture_expect_same_bits(u, u_want, (size_t)nt * F, what);
                    free(g);
                    free(u);
                    rc_exec_close(e);
                }
            }
            for (int p = 0; p < NPART; p++) free(want[p]);
            free(g_want);
            free(u_want);
            free(X);
        }
        for (int p = 0; p < NPART; p++) {
            free(wf[p]);
            free(bias[p]);
            free(codes[p]);
            free(absmax[p]);
        }
    }
}

Test(threads_pool, covers_every_index_once) {
    for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
        rc_pool *p = NULL;
        recall_err err = {0};
        cr_assert_eq(rc_pool_create(thread_counts[ti], &p, &err), RECALL_OK, "%s", err.msg);
        static const int64_t ns[] = {1, 2, 15, 16, 17, 100, 1000, 151936};
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int64_t grain = 1; grain <= 32; grain *= 4) {
                int *hits = calloc((size_t)ns[k], sizeof(int));
                pool_ctx c = {hits};
                for (int rep = 0; rep < 3; rep++) rc_pool_for(p, ns[k], grain, mark, &c);
                for (int64_t i = 0; i < ns[k]; i++)
                    cr_assert_eq(hits[i], 3, "threads %d n %lld grain %lld: index %lld hit %d times",
                                 thread_counts[ti], (long long)ns[k], (long long)grain, (long long)i, hits[i]);
                free(hits);
            }
        rc_pool_destroy(p);
    }
    rc_pool *bad = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_pool_create(0, &bad, &err), RECALL_E_ARG);
}

/* Attention blocking (qwen2.c attn_heads): 700 positions cross two key tiles of 256 and the
 * row blocks; every SIMD path, 1-3 threads, the default blocking and an odd one (7 pairs, tiles
 * of 13 keys) give the bits of the unblocked loop (one pair, one tile per row), in one prefill
 * and in decode steps after it. Fails if a tile restarted the weighted sum or dropped a key. */
static void qwen_normed(rc_blob *b, const rc_exec *ex, const int32_t *ids, int T, int pairs, int tile, int decode_last,
                        float *out) {
    recall_err err = {0};
    rc_qwen2 *m = NULL;
    cr_assert_eq(rc_qwen2_open_ex(b, T, ex, &m, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_set_attn_blocking(m, pairs, tile);
    const int H = rc_qwen2_cfg(m)->hidden, P = T - decode_last;
    rc_qwen2_fwd f = {.ids = ids, .n = P, .normed_all = out};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    for (int t = P; t < T; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .normed_all = out + (size_t)t * H};
        cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
    }
    rc_qwen2_close(m);
}

Test(threads_det, attention_blocking_never_changes_bits) {
    rc_blob *b = fixture_open_worldA("nf4");
    enum { T = 700 };
    int32_t *ids = malloc(T * sizeof *ids);
    rc_exec *e0 = exec_for(RC_SIMD_SCALAR, 1);
    recall_err err = {0};
    rc_qwen2 *probe = NULL;
    cr_assert_eq(rc_qwen2_open_ex(b, T, e0, &probe, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(probe)->vocab, H = rc_qwen2_cfg(probe)->hidden;
    rc_qwen2_close(probe);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(((unsigned)i * 2654435761u >> 9) % (unsigned)V);
    const size_t n = (size_t)T * H;
    float *ref = malloc(n * 4), *got = malloc(n * 4);
    for (size_t i = 0; i < n; i++) ref[i] = NAN;
    qwen_normed(b, e0, ids, T, 1, 0, 0, ref);
    static const struct {
        int pairs, tile, decode_last;
    } cfg[] = {{RC_QWEN2_ATT_PAIRS, RC_QWEN2_ATT_TILE, 0}, {7, 13, 0}, {RC_QWEN2_ATT_PAIRS, RC_QWEN2_ATT_TILE, 3}};
    int runs = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!fixture_path_runs(p)) continue;
        for (int th = 1; th <= 3; th++) {
            rc_exec *e = exec_for((rc_simd_path)p, th);
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                for (size_t i = 0; i < n; i++) got[i] = NAN;
                qwen_normed(b, e, ids, T, cfg[c].pairs, cfg[c].tile, cfg[c].decode_last, got);
                char what[128];
                snprintf(what, sizeof what, "%s x%d pairs %d tile %d decode %d vs unblocked scalar", e->k.name, th,
                         cfg[c].pairs, cfg[c].tile, cfg[c].decode_last);
                fixture_expect_same_bits(got, ref, n, what);
                runs++;
            }
            rc_exec_close(e);
        }
    }
    cr_assert_geq(runs, 9);
    free(ref);
    free(got);
    free(ids);
    rc_exec_close(e0);
    rc_blob_close(b);
}
