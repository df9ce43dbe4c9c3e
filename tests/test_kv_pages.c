/* test_kv_pages.c - page-sparse decode attention (kv_pages.h, REQ-CTX-006):
 *   - the page bound never underestimates the fp32 score any kernel path computes for a key of
 *     the page (randomised pages: mixed magnitudes, cancellation, single-key pages where the
 *     exact bound is the key's own dot and only the rounding slack covers fl(q.k) above it);
 *   - the bounds the decoder keeps are the exact elementwise min / max of the cached keys of each
 *     page, after prefill, decode, a crop in the middle of a page and re-decode, and when the
 *     feature is switched on over a filled cache;
 *   - selection: sink and the last two pages always, the largest bounds with the lower page on
 *     ties, floor(budget / page) of them; the random control draws as many, never the sink or the
 *     recent pages, the same per seed;
 *   - on the worldA f32 decoder: a budget covering the prefix gives the dense logits bitwise at
 *     every decode step (ranked and random); a small budget changes them; the random control is
 *     the same per seed and differs across seeds; every path this CPU runs (fixture_path_runs:
 *     a path the CPU runs but the build lacks fails) and 1 or 2 threads give the same bits: on
 *     x86-64 scalar, AVX2, AVX-512; NEON where `make cross-test-aarch64` runs this file under
 *     qemu (tests/cross/criterion); crop + re-decode
 *     equals a fresh run of the same history;
 *   - `score --scoring-rows 1` gives bitwise the prefill NLLs with dense attention; --kv-pages
 *     changes them only with a budget below the prefix; bad flags are refused. */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "kv_pages.h"
#include "ops.h"
#include "pool.h"
#include "qwen2.h"
#include "simd.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* uniform in [-1, 1) times 2^e, e in [-lo, hi] */
static float rnd(uint32_t *s, int spread) {
    float x = (float)lcg(s) / (float)(1u << 24) * 2.0f - 1.0f;
    if (spread) x = ldexpf(x, (int)(lcg(s) % 41u) - 20);
    return x;
}

/* ------------------------------------------------------------------ the bound */

Test(kv_pages, bound_never_underestimates_any_fp32_score) {
    rc_kernels paths[RC_SIMD_COUNT];
    int np = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++)
        if (fixture_path_runs(p)) {
            recall_err err = {0};
            cr_assert_eq(rc_simd_select(rc_simd_name((rc_simd_path)p), &paths[np], &err), RECALL_OK, "%s", err.msg);
            np++;
        }
    const size_t Ds[5] = {3, 16, 64, 128, 37};
    uint32_t s = 99;
    long checked = 0, rounding_above_exact = 0;
    float K[64 * 128], q[128], mn[128], mx[128], sc[64];
    for (int trial = 0; trial < 3000; trial++) {
        const size_t D = Ds[trial % 5];
        const int n = trial % 7 == 0 ? 1 : 1 + (int)(lcg(&s) % 64u);
        const int kind = trial % 4; /* 0 plain, 1 spread magnitudes, 2 near-cancelling, 3 one shared key +- ulps */
        for (size_t i = 0; i < D; i++) q[i] = rnd(&s, kind == 1);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < D; i++) {
                float v = rnd(&s, kind == 1);
                if (kind == 2) v = (i % 2 ? 1.0f : -1.0f) * q[i] * (1.0f + rnd(&s, 0) * 1e-3f); /* q.k ~ 0 */
                if (kind == 3) v = j ? nextafterf(K[i], (lcg(&s) & 1) ? INFINITY : -INFINITY) : rnd(&s, 0);
                K[(size_t)j * D + i] = v;
            }
        for (int j = 0; j < n; j++) rc_kvp_fold(mn, mx, K + (size_t)j * D, D, j == 0);
        const double b = rc_kvp_bound(q, mn, mx, D);
        cr_assert(isfinite(b));
        double exact_u = 0.0; /* the bound without its rounding slack */
        for (size_t i = 0; i < D; i++) {
            const double lo = (double)q[i] * mn[i], hi = (double)q[i] * mx[i];
            exact_u += lo > hi ? lo : hi;
        }
        for (int p = 0; p < np; p++) {
            paths[p].attn_scores(q, K, D, n, D, 1.0f, sc);
            for (int j = 0; j < n; j++) {
                cr_assert((double)sc[j] <= b, "%s: D %zu page of %d, key %d: fl(q.k) %.9g above the bound %.17g",
                          paths[p].name, D, n, j, (double)sc[j], b);
                checked++;
                rounding_above_exact += (double)sc[j] > exact_u;
            }
        }
        /* the slack is small: the bound of a one-key page sits within 2 (D + 4) u of its dot's size */
        if (n == 1) {
            double a = 0.0;
            for (size_t i = 0; i < D; i++) a += fabs((double)q[i] * K[i]);
            cr_assert(b - exact_u <= 2.0 * (double)(D + 4) * 0x1p-24 * a * (1 + 1e-9), "slack too wide");
        }
    }
    cr_assert_gt(checked, 100000);
    /* the slack is needed: some fp32 scores are above the exact unslackened bound */
    cr_assert_gt(rounding_above_exact, 0, "no case exercised the rounding slack");
}

Test(kv_pages, parse_accepts_page_budget_and_refuses_the_rest) {
    rc_kv_pages_opts o = {0};
    recall_err err = {0};
    cr_assert_eq(rc_kvp_parse("64:1024", &o, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(o.page, 64);
    cr_assert_eq(o.budget, 1024);
    const char *bad[] = {"0:5", "64", "64:-1", "a:b", "64:12x", ":8", "70000:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        cr_assert_neq(rc_kvp_parse(bad[i], &o, &err), RECALL_OK, "%s accepted", bad[i]);
        cr_assert(strstr(err.msg, bad[i]), "message names the text: %s", err.msg);
    }
}

/* ------------------------------------------------------------------ selection */

Test(kv_pages, ranked_selection_keeps_sink_recent_and_best_bounds_lower_page_on_ties) {
    rc_kv_pages_opts o = {.page = 10, .budget = 35}; /* 3 pages */
    rc_kvp_rank rank[12];
    unsigned char keep[12];
    const double b[12] = {0, 5, 9, 1, 9, 7, 9, 2, 3, 100, 100, 100}; /* candidates 1..8 */
    for (int p = 0; p < 12; p++) rank[p].bound = b[p];
    /* ties at 9 (pages 2, 4, 6): all three are the best three */
    cr_assert_eq(rc_kvp_select(&o, 11, rank, 0, 0, 105, keep), 6);
    const unsigned char want[11] = {1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1};
    cr_assert_arr_eq(keep, want, 11);
    /* two pages: 2 and 4 (lower page first among the tied) */
    o.budget = 29;
    for (int p = 0; p < 12; p++) rank[p].bound = b[p];
    cr_assert_eq(rc_kvp_select(&o, 11, rank, 0, 0, 105, keep), 5);
    const unsigned char want2[11] = {1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 1};
    cr_assert_arr_eq(keep, want2, 11);
    /* budget 0: sink and the recent two only; a budget covering the candidates keeps every page */
    o.budget = 0;
    cr_assert_eq(rc_kvp_select(&o, 11, rank, 0, 0, 105, keep), 3);
    o.budget = 80;
    cr_assert_eq(rc_kvp_select(&o, 11, rank, 0, 0, 105, keep), 11);
    /* short contexts: 1, 2, 3 pages are all kept */
    for (int n = 1; n <= 3; n++) cr_assert_eq(rc_kvp_select(&o, n, rank, 0, 0, n * 10 - 1, keep), n);
}

Test(kv_pages, random_control_draws_the_same_count_per_seed_never_sink_or_recent) {
    rc_kv_pages_opts o = {.page = 16, .budget = 64, .random = 1, .seed = 7}; /* 4 pages */
    enum { NP = 40 };
    rc_kvp_rank rank[NP];
    unsigned char keep[NP], first[NP];
    int hits[NP] = {0};
    cr_assert_eq(rc_kvp_select(&o, NP, rank, 3, 1, 639, first), 7);
    cr_assert(first[0] && first[NP - 1] && first[NP - 2]);
    for (int pos = 0; pos < 4000; pos++) {
        cr_assert_eq(rc_kvp_select(&o, NP, rank, 3, 1, pos, keep), 7);
        cr_assert(keep[0] && keep[NP - 1] && keep[NP - 2]);
        for (int p = 1; p < NP - 2; p++) hits[p] += keep[p];
    }
    /* roughly uniform over the 37 candidates: 4000 x 4 / 37 = 432 each */
    for (int p = 1; p < NP - 2; p++) cr_assert(hits[p] > 300 && hits[p] < 570, "page %d drawn %d times", p, hits[p]);
    /* the same seed, layer, head and position draw the same pages; another seed others */
    cr_assert_eq(rc_kvp_select(&o, NP, rank, 3, 1, 639, keep), 7);
    cr_assert_arr_eq(keep, first, NP);
    int differ = 0;
    for (uint64_t seed = 8; seed < 12; seed++) {
        o.seed = seed;
        rc_kvp_select(&o, NP, rank, 3, 1, 639, keep);
        differ += memcmp(keep, first, NP) != 0;
    }
    cr_assert_gt(differ, 0);
}

/* ------------------------------------------------------------------ the decoder */

#define CTX 320
#define PREFILL 40

static void make_ids(int32_t *ids, int n, int V, uint32_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(lcg(&seed) % (uint32_t)V);
}

/* Prefill ids[0..PREFILL) in one call, then decode one id per call through n; the logits of the
 * decode steps PREFILL .. n-1 go to out[(t - PREFILL) * V]. pages NULL = dense; kv the cache's
 * storage. */
static void run_decode_kv(rc_blob *b, const char *simd, int threads, const rc_kv_pages_opts *pages, rc_kv_dtype kv,
                          const int32_t *ids, int n, float *out) {
    recall_err err = {0};
    rc_exec *ex = NULL;
    rc_qwen2 *m = NULL;
    rc_exec_opts eo = {.threads = threads, .simd = simd};
    cr_assert_eq(rc_exec_open(&eo, &ex, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open_ex(b, CTX, ex, &m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(m, kv, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_pages(m, pages, &err), RECALL_OK, "%s", err.msg);
    const size_t V = (size_t)rc_qwen2_cfg(m)->vocab;
    for (size_t i = 0; i < (size_t)(n - PREFILL) * V; i++) out[i] = NAN;
    rc_qwen2_fwd f = {.ids = ids, .n = PREFILL};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    for (int t = PREFILL; t < n; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .logits_last = out + (size_t)(t - PREFILL) * V};
        cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
    }
    rc_qwen2_close(m);
    rc_exec_close(ex);
}

static void run_decode(rc_blob *b, const char *simd, int threads, const rc_kv_pages_opts *pages, const int32_t *ids,
                       int n, float *out) {
    run_decode_kv(b, simd, threads, pages, RC_KV_DT_F32, ids, n, out);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* the first decode step whose logits differ, or -1 */
static int first_diff_step(const float *a, const float *b, int steps, size_t V) {
    for (int t = 0; t < steps; t++)
        if (!same_bits(a + (size_t)t * V, b + (size_t)t * V, V)) return t;
    return -1;
}

/* A decode case on the worldA f32 decoder: n ids of a seed, S = n - PREFILL decode steps of V
 * logits each (sz floats a run), and the logit buffers the test asks for, freed with the case. */
typedef struct {
    rc_blob *b;
    int V, n, S;
    size_t sz;
    int32_t ids[CTX];
    float *bufs[5];
    int n_bufs;
} decode_case;

static decode_case *decode_open(int n, uint32_t seed) {
    decode_case *c = calloc(1, sizeof *c);
    cr_assert(c && n <= CTX);
    c->b = fixture_open_worldA("f32");
    c->V = 1088;
    c->n = n;
    c->S = n - PREFILL;
    c->sz = (size_t)c->S * c->V;
    make_ids(c->ids, n, c->V, seed);
    return c;
}

/* room for one run's logits */
static float *decode_buf(decode_case *c) {
    cr_assert_lt(c->n_bufs, 5);
    float *x = malloc(c->sz * sizeof *x);
    cr_assert(x);
    return c->bufs[c->n_bufs++] = x;
}

static void decode_close(decode_case *c) {
    for (int i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
    rc_blob_close(c->b);
    free(c);
}

Test(kv_pages, budget_covering_the_prefix_gives_dense_logits_bitwise) {
    decode_case *dc = decode_open(300, 5);
    const int V = dc->V, N = dc->n, S = dc->S;
    float *dense = decode_buf(dc), *pg = decode_buf(dc);
    run_decode(dc->b, NULL, 1, NULL, dc->ids, N, dense);
    for (int i = 0; i < S * V; i++) cr_assert(isfinite(dense[i]));
    /* page sizes that do and do not divide the positions; ranked and random; budget >= prefix */
    const rc_kv_pages_opts cover[4] = {{16, 300, 0, 0}, {7, 294, 0, 0}, {16, 1 << 20, 1, 3}, {1, 300, 0, 0}};
    for (int c = 0; c < 4; c++) {
        run_decode(dc->b, NULL, 1, &cover[c], dc->ids, N, pg);
        cr_assert_eq(first_diff_step(dense, pg, S, V), -1, "pages %d:%d random %d differ from dense", cover[c].page,
                     cover[c].budget, cover[c].random);
    }
    decode_close(dc);
}

Test(kv_pages, small_budget_changes_logits_and_random_control_is_seeded) {
    decode_case *dc = decode_open(300, 6);
    const int V = dc->V, N = dc->n, S = dc->S;
    const int32_t *ids = dc->ids;
    float *dense = decode_buf(dc), *rk = decode_buf(dc), *r1 = decode_buf(dc), *r1b = decode_buf(dc),
          *r2 = decode_buf(dc);
    run_decode(dc->b, NULL, 1, NULL, ids, N, dense);
    const rc_kv_pages_opts ranked = {16, 32, 0, 0}, rnd1 = {16, 32, 1, 1}, rnd2 = {16, 32, 1, 2};
    run_decode(dc->b, NULL, 1, &ranked, ids, N, rk);
    run_decode(dc->b, NULL, 1, &rnd1, ids, N, r1);
    run_decode(dc->b, NULL, 2, &rnd1, ids, N, r1b);
    run_decode(dc->b, NULL, 1, &rnd2, ids, N, r2);
    /* 5 pages (sink, 2 ranked, 2 recent) = 80 positions: equal to dense while the context fits,
     * i.e. through position 79 (steps up to 39), different later */
    const int d = first_diff_step(dense, rk, S, V);
    cr_assert(d >= 79 - PREFILL + 1 && d < S, "ranked pages first differ from dense at step %d", d);
    cr_assert(!same_bits(dense + (size_t)(S - 1) * V, rk + (size_t)(S - 1) * V, V), "the last step equals dense");
    for (size_t i = 0; i < dc->sz; i++) cr_assert(isfinite(rk[i]) && isfinite(r1[i]));
    cr_assert_eq(first_diff_step(r1, r1b, S, V), -1, "the same seed differs (1 vs 2 threads)");
    cr_assert_neq(first_diff_step(r1, r2, S, V), -1, "seeds 1 and 2 give the same logits");
    cr_assert_neq(first_diff_step(r1, rk, S, V), -1, "random equals ranked");
    cr_assert_neq(first_diff_step(r1, dense, S, V), -1, "random equals dense");
    decode_close(dc);
}

Test(kv_pages, every_simd_path_and_thread_count_gives_the_same_bits) {
    decode_case *dc = decode_open(200, 8);
    const int V = dc->V, N = dc->n, S = dc->S;
    float *ref = decode_buf(dc), *got = decode_buf(dc);
    const rc_kv_pages_opts cases[3] = {{16, 48, 0, 0}, {8, 40, 1, 11}, {16, 48, 0, 0}};
    for (int c = 0; c < 3; c++) {
        const rc_kv_dtype kv = c == 2 ? RC_KV_DT_F16 : RC_KV_DT_F32; /* ranked pages over an f16 cache */
        run_decode_kv(dc->b, "scalar", 1, &cases[c], kv, dc->ids, N, ref);
        int paths = 0;
        for (int p = 0; p < RC_SIMD_COUNT; p++) {
            if (!fixture_path_runs(p)) continue;
            for (int th = 1; th <= (p == RC_SIMD_SCALAR ? 1 : 2); th++) {
                run_decode_kv(dc->b, rc_simd_name((rc_simd_path)p), th, &cases[c], kv, dc->ids, N, got);
                const int d = first_diff_step(ref, got, S, V);
                cr_assert_eq(d, -1, "%s, %d threads, pages %d:%d kv %s: step %d differs from scalar",
                             rc_simd_name((rc_simd_path)p), th, cases[c].page, cases[c].budget, rc_kv_dtype_name(kv), d);
            }
            paths++;
        }
        cr_assert_geq(paths, 1);
    }
    decode_close(dc);
}

/* every page's bounds equal the min / max of its cached keys, exactly (under an f16 cache: of
 * the rounded keys attention reads) */
static void check_bounds_exact(const rc_qwen2 *m) {
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    const int P = rc_qwen2_kv_pages(m)->page, n = rc_qwen2_n_cached(m), kvd = c->kv_heads * c->head_dim;
    recall_err err = {0};
    float *krow = malloc((size_t)kvd * sizeof(float));
    cr_assert(krow);
    cr_assert_neq(rc_qwen2_k_row(m, 0, n, krow, &err), RECALL_OK, "a key past the cache");
    for (int l = 0; l < c->layers; l++)
        for (int p = 0; p * P < n; p++) {
            const float *mn, *mx;
            cr_assert_eq(rc_qwen2_kv_page_bounds(m, l, p, &mn, &mx, &err), RECALL_OK, "%s", err.msg);
            for (int i = 0; i < kvd; i++) {
                float lo = INFINITY, hi = -INFINITY;
                for (int r = p * P; r < n && r < (p + 1) * P; r++) {
                    cr_assert_eq(rc_qwen2_k_row(m, l, r, krow, &err), RECALL_OK, "%s", err.msg);
                    const float k = krow[i];
                    if (rc_qwen2_kv_dtype(m) == RC_KV_DT_F16)
                        cr_assert_eq(rc_f16_to_f32(rc_f32_to_f16(k)), k, "an f16 cached key is not an f16 value");
                    lo = k < lo ? k : lo;
                    hi = k > hi ? k : hi;
                }
                cr_assert(mn[i] == lo && mx[i] == hi, "layer %d page %d element %d: [%g, %g], keys span [%g, %g]", l,
                          p, i, (double)mn[i], (double)mx[i], (double)lo, (double)hi);
            }
        }
    free(krow);
}

static void crop_then_redecode(rc_kv_dtype kv) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    const int V = 1088;
    int32_t a[220], bb[220];
    make_ids(a, 220, V, 9);
    memcpy(bb, a, 150 * sizeof(int32_t));
    make_ids(bb + 150, 70, V, 10); /* a different continuation after position 150 (mid-page) */
    const rc_kv_pages_opts o = {16, 32, 0, 0};
    rc_qwen2 *m1 = NULL, *m2 = NULL;
    cr_assert_eq(rc_qwen2_open(b, CTX, &m1, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open(b, CTX, &m2, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(m1, kv, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(m2, kv, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_pages(m1, &o, &err), RECALL_OK, "%s", err.msg);
    float l1[1088], l2[1088];
    /* m1: prefill 40, decode a to 200, check, crop to 150, decode b to 220 */
    rc_qwen2_fwd f = {.ids = a, .n = PREFILL};
    cr_assert_eq(rc_qwen2_forward(m1, &f, &err), RECALL_OK);
    for (int t = PREFILL; t < 200; t++) {
        rc_qwen2_fwd d = {.ids = a + t, .n = 1, .logits_last = l1};
        cr_assert_eq(rc_qwen2_forward(m1, &d, &err), RECALL_OK);
    }
    check_bounds_exact(m1);
    cr_assert_eq(rc_qwen2_crop(m1, 150, &err), RECALL_OK);
    check_bounds_exact(m1);
    /* m2: the same history to 150 (b equals a there), the feature switched on after the prefill
     * (its bounds built from the cached keys then) */
    cr_assert_eq(rc_qwen2_forward(m2, &f, &err), RECALL_OK);
    cr_assert_eq(rc_qwen2_set_kv_pages(m2, &o, &err), RECALL_OK);
    for (int t = PREFILL; t < 150; t++) {
        rc_qwen2_fwd d = {.ids = bb + t, .n = 1, .logits_last = l2};
        cr_assert_eq(rc_qwen2_forward(m2, &d, &err), RECALL_OK);
    }
    for (int t = 150; t < 220; t++) {
        for (int i = 0; i < V; i++) l1[i] = l2[i] = NAN;
        rc_qwen2_fwd d1 = {.ids = bb + t, .n = 1, .logits_last = l1}, d2 = {.ids = bb + t, .n = 1, .logits_last = l2};
        cr_assert_eq(rc_qwen2_forward(m1, &d1, &err), RECALL_OK);
        cr_assert_eq(rc_qwen2_forward(m2, &d2, &err), RECALL_OK);
        cr_assert(same_bits(l1, l2, (size_t)V), "position %d: the cropped run differs from the fresh one", t);
    }
    check_bounds_exact(m1);
    /* switched on over a filled cache: the bounds are built from the cached keys */
    rc_kv_pages_opts o2 = {11, 22, 0, 0};
    cr_assert_eq(rc_qwen2_set_kv_pages(m2, &o2, &err), RECALL_OK);
    check_bounds_exact(m2);
    /* switched off: no bounds kept */
    cr_assert_eq(rc_qwen2_set_kv_pages(m2, NULL, &err), RECALL_OK);
    const float *mn, *mx;
    cr_assert_neq(rc_qwen2_kv_page_bounds(m2, 0, 0, &mn, &mx, &err), RECALL_OK);
    rc_qwen2_close(m1);
    rc_qwen2_close(m2);
    rc_blob_close(b);
}

Test(kv_pages, crop_then_redecode_equals_a_fresh_run_and_bounds_stay_exact) { crop_then_redecode(RC_KV_DT_F32); }

/* under an f16 cache the bounds are those of the rounded keys attention scores (an fp32 bound can
 * miss a rounded key by half an f16 ulp) */
Test(kv_pages, f16_cache_bounds_are_those_of_the_rounded_keys) { crop_then_redecode(RC_KV_DT_F16); }

/* ------------------------------------------------------------------ the CLI */

static char *slurp_json_positions(const char *cmd, const char *json_path) {
    char *out = NULL;
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s\n%s", cmd, out);
    free(out);
    char *t = NULL;
    size_t l = 0;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(json_path, &t, &l, &err), RECALL_OK, "%s", err.msg);
    char *p = strstr(t, "\"positions\"");
    cr_assert(p, "%s", t);
    char *r = strdup(p);
    free(t);
    return r;
}

Test(kv_pages, score_decode_path_equals_prefill_bitwise_and_pages_apply) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char tok[] = "/tmp/recall_kvp_XXXXXX", js[] = "/tmp/recall_kvpj_XXXXXX";
    int f1 = mkstemp(tok), f2 = mkstemp(js);
    cr_assert(f1 >= 0 && f2 >= 0);
    close(f1);
    close(f2);
    FILE *f = fopen(tok, "w");
    cr_assert(f);
    uint32_t s = 77;
    for (int i = 0; i < 400; i++) fprintf(f, "%u ", lcg(&s) % 1088u);
    cr_assert_eq(fclose(f), 0);
    char cmd[1024];
    const char *variants[5] = {"", "--scoring-rows 1", "--scoring-rows 1 --threads 2", "--scoring-rows 1 --kv-pages 16:400",
                               "--scoring-rows 1 --kv-pages 16:32"};
    char *pos[5];
    for (int v = 0; v < 5; v++) {
        snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s --chunk 200 --per-position --json %s %s 2>&1 >/dev/null",
                 blob, tok, js, variants[v]);
        pos[v] = slurp_json_positions(cmd, js);
    }
    /* the NLLs are printed with 17 digits: equal text is equal bits */
    cr_assert_str_eq(pos[1], pos[0], "decode path differs from prefill");
    cr_assert_str_eq(pos[2], pos[0]);
    cr_assert_str_eq(pos[3], pos[0], "a covering budget differs from dense");
    cr_assert_str_neq(pos[4], pos[0], "a small budget changed nothing");
    for (int v = 0; v < 5; v++) free(pos[v]);
    /* stderr reports the decode rows and their speed */
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s --chunk 400 --scoring-rows 1 --kv-pages 16:32 2>&1", blob,
             tok);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "attention page 16, budget 32, ranked by key bounds"), "%s", out);
    cr_assert(strstr(out, "score: prefill 200/400 rows"), "%s", out);
    cr_assert(strstr(out, "score: decode 400/400 rows"), "%s", out);
    cr_assert(strstr(out, "tok/s over the last 200 positions"), "%s", out);
    free(out);
    /* refusals */
    const char *bad[3][2] = {{"--kv-pages 16:32", "add --scoring-rows 1"},
                             {"--scoring-rows 1 --kv-pages-random 3", "needs --kv-pages"},
                             {"--scoring-rows 1 --kv-pages 0:32", "PAGE in 1..65536"}};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s %s 2>&1", blob, tok, bad[i][0]);
        cr_assert_eq(fixture_sh(cmd, &out), 2, "%s", cmd);
        cr_assert(strstr(out, bad[i][1]), "%s: %s", cmd, out);
        free(out);
    }
    remove(tok);
    remove(js);
}

static char *read_all(const char *path, size_t *len) {
    char *t = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(path, &t, len, &err), RECALL_OK, "%s", err.msg);
    return t;
}

Test(kv_pages, forward_decode_from_equals_prefill_dump_and_pages_apply) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char ids[1024] = "[";
    uint32_t s = 31;
    for (int i = 0; i < 90; i++) sprintf(ids + strlen(ids), "%s%u", i ? "," : "", lcg(&s) % 1088u);
    strcat(ids, "]");
    const char *variants[4] = {"", "--decode-from 7", "--decode-from 0 --kv-pages 8:96", "--decode-from 7 --kv-pages 8:8"};
    char *dump[4];
    size_t len[4];
    for (int v = 0; v < 4; v++) {
        char path[64], cmd[2048];
        snprintf(path, sizeof path, "/tmp/recall_kvpf%d_%ld.npz", v, (long)getpid());
        snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --dump %s %s 2>&1", blob, ids, path, variants[v]);
        char *out = NULL;
        cr_assert_eq(fixture_sh(cmd, &out), 0, "%s\n%s", cmd, out);
        if (v == 3) cr_assert(strstr(out, "prefill 7 ids, decode 83, attention page 8, budget 8, ranked"), "%s", out);
        free(out);
        dump[v] = read_all(path, &len[v]);
        remove(path);
    }
    /* logits, hidden_last and q_layers: the whole file is the same bytes */
    for (int v = 1; v < 3; v++)
        cr_assert(len[v] == len[0] && !memcmp(dump[v], dump[0], len[0]), "forward %s differs from one prefill",
                  variants[v]);
    cr_assert(len[3] == len[0] && memcmp(dump[3], dump[0], len[0]), "a budget of one page changed nothing");
    for (int v = 0; v < 4; v++) free(dump[v]);
    char *out = NULL;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --kv-pages 8:8 2>&1", blob, ids);
    cr_assert_eq(fixture_sh(cmd, &out), 2);
    cr_assert(strstr(out, "add --decode-from N"), "%s", out);
    free(out);
}
