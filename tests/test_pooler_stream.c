/* test_pooler_stream.c - the streaming pooler and its K/V cache (pooler.h) give the bits of the
 * whole-history pooler, for every SIMD path, thread count, tile size, cache budget and history.
 *
 * tests/golden/worldA/pooler_bits.npz holds those bits: `recall pool BLOB --ids ... --dump` of the
 * tree before the streaming pooler (commit 9205ae2, which held P, kn, K and V of the whole
 * history at once) on the worldA f32 and nf4 blobs, keys "<weights>_<L>" [n_sp, H], for the ids
 * of pooler.npz's ids_700 cycled to length L (L = 0, 1, 7, 17, 64, 65, 130, 700, 2000).
 * A synthetic pooler with the real head width (hd = 192: the AVX-512 P.V kernel's 128-wide
 * block plus a 64 remainder) checks the same invariance against one tile over the whole history,
 * which is the whole-history computation call for call. The row source poisons the rest of the
 * tile it fills, so a pooler reading past the rows it asked for would show in the bits. */
#include "blob.h"
#include "fixture.h"
#include "pool.h"
#include "pooler.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WA "tests/golden/worldA/"

static const int Ls[] = {0, 1, 7, 17, 64, 65, 130, 700, 2000};
#define N_L ((int)(sizeof Ls / sizeof Ls[0]))

static rc_exec *exec_for(rc_simd_path path, int threads) {
    rc_exec_opts o = {.threads = threads, .simd = rc_simd_name(path)};
    rc_exec *e = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_exec_open(&o, &e, &err), RECALL_OK, "%s", err.msg);
    return e;
}

static float *nanbuf(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

/* worldA's embeddings (for the row source) and pooler on ex (NULL: private contexts) */
static void open_models(rc_blob *b, const rc_exec *ex, rc_qwen2 **m, rc_pooler **p) {
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_open_ex(b, 4, ex, m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_pooler_open_ex(b, ex, p, &err), RECALL_OK, "%s", err.msg);
}

/* worldA f32 with its embeddings and pooler on a context of 2 threads on one SIMD path, the pooler
 * with the given tile */
typedef struct {
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    rc_pooler *p;
} tiled_models;

static void open_tiled(tiled_models *t, rc_simd_path path, int tile) {
    t->b = fixture_open_worldA("f32");
    t->ex = exec_for(path, 2);
    open_models(t->b, t->ex, &t->m, &t->p);
    recall_err err = {0};
    cr_assert_eq(rc_pooler_set_tile(t->p, tile, &err), RECALL_OK, "%s", err.msg);
}

static void close_tiled(tiled_models *t) {
    rc_pooler_close(t->p);
    rc_qwen2_close(t->m);
    rc_exec_close(t->ex);
    rc_blob_close(t->b);
}

/* pooler.npz's ids_700 cycled to 2000 ids (any L is a prefix) */
static int32_t *golden_ids(void) {
    size_t n = 0;
    int *base = fixture_npz_i32(WA "pooler.npz", "ids_700", &n);
    cr_assert_eq(n, 700u);
    int32_t *ids = malloc(2000 * sizeof *ids);
    for (int i = 0; i < 2000; i++) ids[i] = base[i % 700];
    free(base);
    return ids;
}

static float *golden_bits(const char *weights, int L) {
    char key[32];
    size_t n = 0;
    snprintf(key, sizeof key, "%s_%d", weights, L);
    float *w = fixture_npz_f32(WA "pooler_bits.npz", key, &n);
    cr_assert_eq(n, (size_t)8 * 64, "%s", key);
    return w;
}

/* The row source: embeddings (or rows of an array), with its contract checked and counted, the
 * rest of the tile poisoned, and an optional failure at one call. */
typedef struct {
    rc_qwen2_id_rows ids; /* ids.m NULL: rows of `past` instead */
    const float *past;
    int H, L, tile;
    int calls, rows, bad, fail_at;
} spy_rows;

static recall_status spy(void *ctx, int j0, int n, float *dst, recall_err *err) {
    spy_rows *s = ctx;
    if (j0 < 0 || n < 1 || j0 + n > s->L || n > s->tile) s->bad++;
    if (s->calls++ == s->fail_at) return rc_fail(err, RECALL_E_IO, "spy: rows [%d, %d) unreadable", j0, j0 + n);
    s->rows += n;
    for (size_t i = (size_t)n * s->H; i < (size_t)s->tile * s->H; i++) dst[i] = NAN;
    if (!s->ids.m) {
        memcpy(dst, s->past + (size_t)j0 * s->H, (size_t)n * s->H * sizeof *dst);
        return RECALL_OK;
    }
    return rc_qwen2_embed_rows(&s->ids, j0, n, dst, err);
}

/* One run of L rows; *sp counts the row source's calls. keys may be NULL. */
static recall_status run(rc_pooler *p, spy_rows *sp, const int32_t *keys, int L, int tile, float *out, recall_err *err) {
    sp->L = L;
    sp->tile = tile;
    sp->calls = sp->rows = sp->bad = 0;
    const rc_pooler_src src = {spy, sp, keys};
    recall_status s = rc_pooler_run_src(p, &src, L, out, err);
    cr_expect_eq(sp->bad, 0, "the row source was asked for rows outside [0, %d) or more than a tile of %d", L, tile);
    return s;
}

static void expect_golden(rc_pooler *p, spy_rows *sp, const int32_t *keys, const char *weights, int L, int tile,
                          const char *what) {
    recall_err err = {0};
    float *out = nanbuf(8 * 64), *want = golden_bits(weights, L);
    cr_assert_eq(run(p, sp, keys, L, tile, out, &err), RECALL_OK, "%s: %s", what, err.msg);
    char msg[160];
    snprintf(msg, sizeof msg, "%s, %s L=%d", what, weights, L);
    fixture_expect_same_bits(out, want, 8 * 64, msg);
    free(out);
    free(want);
}

static void stats_are(rc_pooler *p, int cached, int filled, int streamed, const char *what) {
    rc_pooler_stats st;
    rc_pooler_get_stats(p, &st);
    cr_expect_eq(st.last_cached, cached, "%s: cached %d, want %d", what, st.last_cached, cached);
    cr_expect_eq(st.last_filled, filled, "%s: filled %d, want %d", what, st.last_filled, filled);
    cr_expect_eq(st.last_streamed, streamed, "%s: streamed %d, want %d", what, st.last_streamed, streamed);
}

/* A run of L rows on the f32 blob gives the old bits, with `cached` rows from the cache, `filled`
 * rows put into it and `streamed` rows past it. */
static void expect_cached_run(rc_pooler *p, spy_rows *sp, const int32_t *keys, int L, int tile, int cached,
                              int filled, int streamed, const char *what) {
    expect_golden(p, sp, keys, "f32", L, tile, what);
    stats_are(p, cached, filled, streamed, what);
}

/* The old bits on every available path, at 1 and 3 threads, tiles of 1 (short histories), 7,
 * the default and one over the whole history, f32 and nf4 weights. */
Test(pooler_stream, whole_history_bits_every_path_thread_tile, .timeout = 600) {
    static const char *weights[] = {"f32", "nf4"};
    static const int tiles[] = {1, 7, RC_POOLER_TILE, 4096};
    static const int threads[] = {1, 3};
    int32_t *ids = golden_ids();
    int checked = 0;
    for (int wi = 0; wi < 2; wi++) {
        rc_blob *b = fixture_open_worldA(weights[wi]);
        for (int path = 0; path < RC_SIMD_COUNT; path++) {
            if (!rc_simd_available((rc_simd_path)path)) continue;
            for (int ti = 0; ti < 2; ti++) {
                rc_exec *ex = exec_for((rc_simd_path)path, threads[ti]);
                recall_err err = {0};
                rc_qwen2 *m = NULL;
                rc_pooler *p = NULL;
                open_models(b, ex, &m, &p);
                spy_rows sp = {{m, ids}, NULL, 64, 0, 0, 0, 0, 0, -1};
                for (int k = 0; k < 4; k++) {
                    cr_assert_eq(rc_pooler_set_tile(p, tiles[k], &err), RECALL_OK, "%s", err.msg);
                    for (int li = 0; li < N_L; li++) {
                        if (tiles[k] == 1 && Ls[li] > 130) continue;
                        char what[96];
                        snprintf(what, sizeof what, "%s, %d threads, tile %d", ex->k.name, threads[ti], tiles[k]);
                        expect_golden(p, &sp, NULL, weights[wi], Ls[li], tiles[k], what);
                        checked++;
                    }
                }
                rc_pooler_close(p);
                rc_qwen2_close(m);
                rc_exec_close(ex);
            }
        }
        rc_blob_close(b);
    }
    cr_expect_geq(checked, 2 * 2 * (4 * N_L - 2)); /* at least the scalar path ran everything */
    free(ids);
}

/* The cache serves the longest equal prefix, fills what the budget allows, streams the rest, drops
 * what follows a changed key; the bits never change. Tile 7: chunks end mid-history. */
Test(pooler_stream, cache_gives_the_same_bits, .timeout = 300) {
    const int T = 7;
    tiled_models e;
    open_tiled(&e, rc_simd_available(RC_SIMD_AVX2) ? RC_SIMD_AVX2 : RC_SIMD_SCALAR, T);
    recall_err err = {0};
    int32_t *ids = golden_ids();
    spy_rows sp = {{e.m, ids}, NULL, 64, 0, 0, 0, 0, 0, -1};
    const size_t per_tok = rc_pooler_cache_bytes_per_token(e.p);
    const rc_pooler_config *c = rc_pooler_cfg(e.p);
    cr_assert_eq(per_tok, (size_t)c->blocks * 2 * 64 * 4 + 4);

    /* off by default: keys or not, nothing is kept */
    expect_cached_run(e.p, &sp, ids, 130, T, 0, 0, 130, "cache off");

    /* a budget for everything: fill, extend, shorter, everything from the cache */
    rc_pooler_set_cache(e.p, 4096 * per_tok);
    expect_cached_run(e.p, &sp, ids, 65, T, 0, 65, 0, "first fill");
    expect_cached_run(e.p, &sp, ids, 130, T, 65, 65, 0, "extend");
    expect_cached_run(e.p, &sp, ids, 2000, T, 130, 1870, 0, "extend far");
    expect_cached_run(e.p, &sp, ids, 700, T, 700, 0, 0, "shorter history");
    expect_cached_run(e.p, &sp, ids, 2000, T, 2000, 0, 0, "all cached");
    cr_expect_eq(sp.calls, 0, "every row came from the cache, yet the row source was called %d times", sp.calls);
    expect_cached_run(e.p, &sp, NULL, 700, T, 0, 0, 700, "no keys");
    rc_pooler_stats st;
    rc_pooler_get_stats(e.p, &st);
    cr_expect_eq(st.cache_tokens, 2000);
    cr_expect_leq(st.cache_bytes, 4096 * per_tok);

    /* a changed id at 100: the cache keeps [0, 100) and refills after it, for both histories */
    int32_t *alt = malloc(2000 * sizeof *alt);
    memcpy(alt, ids, 2000 * sizeof *alt);
    alt[100] = ids[100] == 5 ? 6 : 5;
    rc_pooler *ref = NULL;
    cr_assert_eq(rc_pooler_open_ex(e.b, e.ex, &ref, &err), RECALL_OK, "%s", err.msg);
    spy_rows sa = {{e.m, alt}, NULL, 64, 0, 0, 0, 0, 0, -1};
    float *want = nanbuf(8 * 64), *got = nanbuf(8 * 64);
    cr_assert_eq(run(ref, &sa, NULL, 130, RC_POOLER_TILE, want, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(run(e.p, &sa, alt, 130, T, got, &err), RECALL_OK, "%s", err.msg);
    stats_are(e.p, 100, 30, 0, "changed id at 100");
    fixture_expect_same_bits(got, want, 8 * 64, "changed id at 100");
    cr_expect_eq(sa.rows, c->blocks * 30, "only rows 100..129 are fetched, once per block");
    expect_cached_run(e.p, &sp, ids, 130, T, 100, 30, 0, "back to the original ids");

    /* a budget of 3 chunks: 21 rows cached, the rest streamed every run */
    rc_pooler_set_cache(e.p, 3 * (size_t)T * per_tok);
    expect_cached_run(e.p, &sp, ids, 700, T, 0, 21, 679, "small budget, first run");
    expect_cached_run(e.p, &sp, ids, 700, T, 21, 0, 679, "small budget, second run");
    cr_expect_eq(sp.rows, 2 * c->blocks * 679, "streamed rows are fetched twice per block (scores, then V)");
    /* less than one chunk: nothing cached */
    rc_pooler_set_cache(e.p, (size_t)T * per_tok - 1);
    expect_cached_run(e.p, &sp, ids, 65, T, 0, 0, 65, "budget below a chunk");

    free(want);
    free(got);
    free(alt);
    free(ids);
    rc_pooler_close(ref);
    close_tiled(&e);
}

/* A row source that fails part-way: the error comes back as a value naming it, and the cache
 * keeps only rows that every block had finished (the next run gives the old bits). */
Test(pooler_stream, failing_row_source_leaves_a_consistent_cache, .timeout = 300) {
    const int T = 16;
    tiled_models e;
    open_tiled(&e, RC_SIMD_SCALAR, T);
    rc_pooler_set_cache(e.p, 1000 * rc_pooler_cache_bytes_per_token(e.p));
    int32_t *ids = golden_ids();
    spy_rows sp = {{e.m, ids}, NULL, 64, 0, 0, 0, 0, 0, -1};
    expect_golden(e.p, &sp, ids, "f32", 65, T, "warm");
    /* 130 rows: rows 65..129 (5 tiles) are filled in each block's first pass: calls 0..4 in block
     * 0, 5..9 in block 1, 10..14 in block 2. Fail in block 0, and in blocks 1 and 2 after block 0
     * (and 1) filled their rows. */
    static const int fail_at[] = {0, 2, 5, 7, 12};
    for (int k = 0; k < 5; k++) {
        float *out = nanbuf(8 * 64);
        sp.fail_at = fail_at[k];
        recall_err e2 = {0};
        cr_expect_eq(run(e.p, &sp, ids, 130, T, out, &e2), RECALL_E_IO, "fail at call %d", fail_at[k]);
        cr_expect(strstr(e2.msg, "unreadable") != NULL, "%s", e2.msg);
        sp.fail_at = -1;
        free(out);
        expect_cached_run(e.p, &sp, ids, 65, T, 65, 0, 0, "after a failed run (shorter)");
    }
    expect_cached_run(e.p, &sp, ids, 130, T, 65, 65, 0, "after the failed runs");
    free(ids);
    close_tiled(&e);
}

/* The memory that grows with the history is the score rows alone: heads x n_sp floats per
 * token (plus an eighth of slack), not the H-wide rows of P, kn, K and V. */
Test(pooler_stream, scratch_grows_by_the_scores_only) {
    rc_blob *b = fixture_open_worldA("f32");
    rc_qwen2 *m = NULL;
    rc_pooler *p = NULL;
    open_models(b, NULL, &m, &p);
    const rc_pooler_config *c = rc_pooler_cfg(p);
    int32_t *ids = golden_ids();
    spy_rows sp = {{m, ids}, NULL, 64, 0, 0, 0, 0, 0, -1};
    expect_golden(p, &sp, ids, "f32", 2000, RC_POOLER_TILE, "L = 2000");
    rc_pooler_stats st;
    rc_pooler_get_stats(p, &st);
    const size_t pairs = (size_t)c->heads * (size_t)c->n_sp;
    cr_expect_eq(st.scratch_bytes, pairs * (2000 + 2000 / 8 + 64) * sizeof(float));
    cr_expect_lt(st.scratch_bytes, (size_t)2000 * c->hidden * sizeof(float)); /* below one H-wide row per token */
    cr_expect_eq(st.cache_bytes, 0u);
    free(ids);
    rc_pooler_close(p);
    rc_qwen2_close(m);
    rc_blob_close(b);
}

/* ---- a pooler with the real head width ---- */

typedef struct {
    uint64_t s;
} lcg;

static float lcg_f(lcg *g, float scale) {
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return scale * ((float)(g->s >> 40) / 16777216.0f * 2.0f - 1.0f);
}

static void add_f32(rc_blob_writer *w, const char *name, int ndim, int64_t d0, int64_t d1, float base, float scale,
                    lcg *g) {
    const size_t n = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = base + lcg_f(g, scale);
    const int64_t shape[2] = {d0, d1};
    recall_err err = {0};
    cr_assert_eq(rc_writer_tensor(w, name, RC_DT_F32, ndim, shape, x, n * sizeof *x, &err), RECALL_OK, "%s", err.msg);
}

/* H = 384, 2 heads of 192, 4 soft tokens, 2 blocks, FFN 64; random weights (f32) */
static const char *hd192_blob(void) {
    const char *path = "build/test_pooler_hd192.blob";
    const int64_t S = 4, H = 384, heads = 2, NB = 2, FF = 64;
    recall_err err = {0};
    rc_blob_writer *w = NULL;
    cr_assert_eq(rc_writer_new(&w, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(w, "pooler.n_sp", &S, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(w, "pooler.hidden", &H, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(w, "pooler.heads", &heads, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(w, "pooler.blocks", &NB, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(w, "pooler.ffn", &FF, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_f64(w, "pooler.ln_eps", 1e-5, &err), RECALL_OK);
    lcg g = {192};
    add_f32(w, "pooler.query", 2, S, H, 0.0f, 1.0f, &g);
    for (int i = 0; i < NB; i++) {
        char nm[96];
        static const char *ln[] = {"lnq1", "lnk", "lnq2", "lnq3"};
        for (int l = 0; l < 4; l++) {
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.weight", i, ln[l]);
            add_f32(w, nm, 1, H, 0, 1.0f, 0.1f, &g);
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.bias", i, ln[l]);
            add_f32(w, nm, 1, H, 0, 0.0f, 0.1f, &g);
        }
        static const char *att[] = {"cross", "selfa"};
        for (int a = 0; a < 2; a++) {
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.in_proj_weight", i, att[a]);
            add_f32(w, nm, 2, 3 * H, H, 0.0f, 0.09f, &g);
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.in_proj_bias", i, att[a]);
            add_f32(w, nm, 1, 3 * H, 0, 0.0f, 0.05f, &g);
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.out_proj.weight", i, att[a]);
            add_f32(w, nm, 2, H, H, 0.0f, 0.05f, &g);
            snprintf(nm, sizeof nm, "pooler.blocks.%d.%s.out_proj.bias", i, att[a]);
            add_f32(w, nm, 1, H, 0, 0.0f, 0.05f, &g);
        }
        snprintf(nm, sizeof nm, "pooler.blocks.%d.ffn.0.weight", i);
        add_f32(w, nm, 2, FF, H, 0.0f, 0.05f, &g);
        snprintf(nm, sizeof nm, "pooler.blocks.%d.ffn.0.bias", i);
        add_f32(w, nm, 1, FF, 0, 0.0f, 0.05f, &g);
        snprintf(nm, sizeof nm, "pooler.blocks.%d.ffn.2.weight", i);
        add_f32(w, nm, 2, H, FF, 0.0f, 0.1f, &g);
        snprintf(nm, sizeof nm, "pooler.blocks.%d.ffn.2.bias", i);
        add_f32(w, nm, 1, H, 0, 0.0f, 0.05f, &g);
    }
    add_f32(w, "pooler.ln_out.weight", 1, H, 0, 1.0f, 0.1f, &g);
    add_f32(w, "pooler.ln_out.bias", 1, H, 0, 0.0f, 0.1f, &g);
    add_f32(w, "pooler.out_scale", 1, 1, 0, -8.0f, 0.0f, &g);
    cr_assert_eq(rc_writer_write(w, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(w);
    return path;
}

Test(pooler_stream, real_head_width_every_path_thread_tile_cache, .timeout = 600) {
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(hd192_blob(), 0, &b, &err), RECALL_OK, "%s", err.msg);
    static const int hist[] = {0, 1, 63, 64, 65, 200};
    const int H = 384, S = 4, NH = 6;
    float *past = malloc((size_t)200 * H * sizeof *past);
    int32_t *keys = malloc(200 * sizeof *keys);
    lcg g = {7};
    for (size_t i = 0; i < (size_t)200 * H; i++) past[i] = lcg_f(&g, 2.0f);
    for (int i = 0; i < 200; i++) keys[i] = i;
    /* the reference: scalar, one thread, one tile over the whole history, no cache */
    float *want = nanbuf((size_t)NH * S * H);
    {
        rc_exec *ex = exec_for(RC_SIMD_SCALAR, 1);
        rc_pooler *p = NULL;
        cr_assert_eq(rc_pooler_open_ex(b, ex, &p, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_pooler_cfg(p)->heads, 2);
        cr_assert_eq(rc_pooler_set_tile(p, 200, &err), RECALL_OK);
        for (int k = 0; k < NH; k++)
            cr_assert_eq(rc_pooler_run(p, hist[k] ? past : NULL, hist[k], want + (size_t)k * S * H, &err), RECALL_OK,
                         "%s", err.msg);
        rc_pooler_close(p);
        rc_exec_close(ex);
    }
    static const int tiles[] = {1, 5, 64, 200};
    static const int threads[] = {1, 2, 3};
    int checked = 0;
    for (int path = 0; path < RC_SIMD_COUNT; path++) {
        if (!rc_simd_available((rc_simd_path)path)) continue;
        for (int ti = 0; ti < 3; ti++) {
            rc_exec *ex = exec_for((rc_simd_path)path, threads[ti]);
            rc_pooler *p = NULL;
            cr_assert_eq(rc_pooler_open_ex(b, ex, &p, &err), RECALL_OK, "%s", err.msg);
            for (int k = 0; k < 4; k++)
                for (int cache = 0; cache < 2; cache++) {
                    cr_assert_eq(rc_pooler_set_tile(p, tiles[k], &err), RECALL_OK);
                    /* cache: room for about half of the longest history */
                    rc_pooler_set_cache(p, cache ? 100 * rc_pooler_cache_bytes_per_token(p) : 0);
                    spy_rows sp = {{NULL, NULL}, past, H, 0, 0, 0, 0, 0, -1};
                    for (int rep = 0; rep < 1 + cache; rep++) /* with the cache: fill, then read */
                        for (int h = 0; h < NH; h++) {
                            float *out = nanbuf((size_t)S * H);
                            cr_assert_eq(run(p, &sp, cache ? keys : NULL, hist[h], tiles[k], out, &err), RECALL_OK,
                                         "%s", err.msg);
                            char what[128];
                            snprintf(what, sizeof what, "%s, %d threads, tile %d, cache %d, rep %d, L = %d", ex->k.name,
                                     threads[ti], tiles[k], cache, rep, hist[h]);
                            fixture_expect_same_bits(out, want + (size_t)h * S * H, (size_t)S * H, what);
                            free(out);
                            checked++;
                        }
                    if (cache) { /* a chunk of 200 is over the budget: nothing cached then */
                        rc_pooler_stats st;
                        rc_pooler_get_stats(p, &st);
                        if (tiles[k] <= 100) cr_expect_gt(st.last_cached, 0, "tile %d: the cache served nothing", tiles[k]);
                        else cr_expect_eq(st.last_cached, 0, "tile %d: a chunk over the budget", tiles[k]);
                        cr_expect_gt(st.last_streamed, 0, "tile %d: nothing past the budget", tiles[k]);
                    }
                }
            rc_pooler_close(p);
            rc_exec_close(ex);
        }
    }
    cr_expect_geq(checked, 3 * 4 * 3 * NH);
    free(want);
    free(past);
    free(keys);
    rc_blob_close(b);
}
