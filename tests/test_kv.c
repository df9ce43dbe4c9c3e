/* test_kv.c - KV memory that follows the context in use (REQ-CTX-007) and the trained-window limit
 * (REQ-CTX-001), on the worldA f32 blob (24 layers, 2 KV heads x 16 dims: 6,144 KV bytes per position):
 *   - a cache that starts empty and grows many times (token-by-token decode through 256, 512,
 *     1,024 positions, and a multi-row prefill that crosses a growth boundary mid-call) gives bitwise
 *     the logits of a cache reserved once for the whole request;
 *   - the allocated bytes follow the positions in use: 256-position unit, then doubling, capped at
 *     max_ctx; a reserved request allocates once (exact bytes), never more;
 *   - growth keeps the cached K/V: crop + re-forward after growing equals the reserved run;
 *   - opening above qwen2.max_pos fails naming both numbers; max_pos itself opens (no allocation);
 *   - an f16 cache: half the bytes; the same bits for one prefill, calls of 7 rows, decode steps,
 *     crop + re-forward, growth, every SIMD path; different from (and close to) the f32 logits;
 *     its storage fixed once anything is cached. */
#include "blob.h"
#include "fixture.h"
#include "pool.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* deterministic pseudo-random ids in [0, V) */
static void make_ids(int32_t *ids, int n, int V, uint32_t seed) {
    uint32_t s = seed;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
}

static size_t per_pos_bytes(const rc_qwen2 *m) {
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    return 2u * (size_t)c->layers * (size_t)c->kv_heads * (size_t)c->head_dim * sizeof(float);
}

/* the expected capacity after `used` positions under on-demand growth */
static int grown_cap(int used, int max_ctx) {
    if (used == 0) return 0;
    int cap = RC_QWEN2_KV_UNIT;
    while (cap < used) cap *= 2;
    return cap < max_ctx ? cap : max_ctx;
}

static void first_diff(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        cr_assert_eq(x, y, "%s: first differing bit at element %zu: %08x (%.9g) vs %08x (%.9g)", what, i, x,
                     (double)a[i], y, (double)b[i]);
    }
}

/* Crops m to `keep` positions, forwards ids[keep .. n) in one call and checks its last logits
 * against want[(n - 1) * V ..] bitwise (got: V floats of scratch). */
static void crop_and_reforward(rc_qwen2 *m, int keep, const int32_t *ids, int n, const float *want, int V, float *got,
                               const char *what) {
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_crop(m, keep, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_fwd f = {.ids = ids + keep, .n = n - keep, .logits_last = got};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    first_diff(got, want + (size_t)(n - 1) * V, (size_t)V, what);
}

Test(kv_growth, growing_cache_matches_reserved_bitwise_with_fewer_bytes) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    const int N = 1100, MAXC = 1200;
    rc_qwen2 *grow = NULL, *full = NULL;
    cr_assert_eq(rc_qwen2_open(b, MAXC, &grow, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open(b, MAXC, &full, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(grow)->vocab;
    const size_t ppb = per_pos_bytes(grow);
    cr_assert_eq(ppb, 6144u);
    cr_assert_eq(rc_qwen2_kv_bytes(grow), 0u, "nothing is allocated at open");
    cr_assert_eq(rc_qwen2_kv_capacity(grow), 0);

    int32_t *ids = malloc((size_t)N * sizeof *ids);
    float *ref = malloc((size_t)N * V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
    cr_assert(ids && ref && got);
    make_ids(ids, N, V, 7);

    /* reference: reserved once, one prefill */
    cr_assert_eq(rc_qwen2_reserve(full, N, &err), RECALL_OK, "%s", err.msg);
    const int full_cap = rc_qwen2_kv_capacity(full);
    cr_assert_eq(full_cap, 1280 < MAXC ? 1280 : MAXC, "reserve rounds %d up to the unit, capped at max_ctx", N);
    cr_assert_eq(rc_qwen2_kv_bytes(full), (size_t)full_cap * ppb);
    rc_qwen2_fwd f = {.ids = ids, .n = N, .logits_all = ref};
    cr_assert_eq(rc_qwen2_forward(full, &f, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_capacity(full), full_cap, "a reserved request never grows");

    /* growing: 300 rows in one call (grows 0 -> 512 inside), then token by token to N */
    rc_qwen2_fwd g = {.ids = ids, .n = 300, .logits_all = malloc((size_t)300 * V * sizeof(float))};
    cr_assert(g.logits_all);
    cr_assert_eq(rc_qwen2_forward(grow, &g, &err), RECALL_OK, "%s", err.msg);
    first_diff(g.logits_all, ref, (size_t)300 * V, "prefill 300 rows, grown");
    free(g.logits_all);
    cr_assert_eq(rc_qwen2_kv_capacity(grow), 512);
    int grows = 0, last_cap = 512;
    for (int t = 300; t < N; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .logits_last = got};
        cr_assert_eq(rc_qwen2_forward(grow, &d, &err), RECALL_OK, "%s", err.msg);
        first_diff(got, ref + (size_t)t * V, (size_t)V, "decode");
        const int cap = rc_qwen2_kv_capacity(grow);
        cr_assert_eq(cap, grown_cap(t + 1, MAXC), "capacity after %d positions", t + 1);
        cr_assert_eq(rc_qwen2_kv_bytes(grow), (size_t)cap * ppb);
        if (cap != last_cap) grows++;
        last_cap = cap;
    }
    cr_assert_eq(grows, 2, "512 -> 1024 -> 1200 (capped)");
    cr_assert_eq(rc_qwen2_kv_capacity(grow), MAXC);

    /* growth kept the contents: crop back into the first unit and re-run the tail */
    crop_and_reforward(grow, 200, ids, 240, ref, V, got, "crop + re-forward after growth");

    free(ids);
    free(ref);
    free(got);
    rc_qwen2_close(grow);
    rc_qwen2_close(full);
    rc_blob_close(b);
}

Test(kv_growth, bytes_follow_the_context_in_use) {
    rc_blob *b = fixture_open_worldA("f32");
    const int max_pos = 4096;
    rc_qwen2 *m = fixture_qwen2(b, max_pos); /* the trained size itself opens */
    recall_err err = {0};
    const size_t ppb = per_pos_bytes(m);
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t ids[40];
    make_ids(ids, 40, V, 3);
    rc_qwen2_fwd f = {.ids = ids, .n = 40};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_bytes(m), (size_t)RC_QWEN2_KV_UNIT * ppb, "a short context allocates one unit");
    cr_assert_lt(rc_qwen2_kv_bytes(m), rc_qwen2_kv_bytes_for(m, max_pos));
    /* 1,024 then 2,048 positions: reserve the exact sizes, bytes follow */
    cr_assert_eq(rc_qwen2_reserve(m, 1024, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_bytes(m), (size_t)1024 * ppb);
    cr_assert_eq(rc_qwen2_reserve(m, 2048, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_bytes(m), (size_t)2048 * ppb);
    cr_assert_eq(rc_qwen2_reserve(m, 100, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_bytes(m), (size_t)2048 * ppb, "reserve never shrinks");
    /* a request of known size (3,072) reserves once: 3,072 positions, not 4,096 by doubling */
    cr_assert_eq(rc_qwen2_reserve(m, 3072, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_capacity(m), 3072);
    cr_assert_eq(rc_qwen2_reserve(m, max_pos + 1, &err), RECALL_E_LIMIT);
    cr_assert_eq(rc_qwen2_kv_capacity(m), 3072, "a failed reserve changes nothing");
    rc_qwen2_close(m);
    rc_blob_close(b);
}

Test(kv_growth, context_beyond_trained_window_names_both_numbers) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_qwen2 *m = NULL;
    cr_assert_eq(rc_qwen2_open(b, 4097, &m, &err), RECALL_E_LIMIT);
    cr_assert_null(m);
    cr_assert(strstr(err.msg, "4097") && strstr(err.msg, "4096"), "message: %s", err.msg);
    rc_blob_close(b);
}

/* ---- the f16 KV cache (rc_qwen2_set_kv_dtype) ---- */

static rc_qwen2 *open_kv(rc_blob *b, int max_ctx, rc_kv_dtype kv, const char *simd, int threads, rc_exec **ex) {
    recall_err err = {0};
    rc_qwen2 *m = NULL;
    *ex = NULL;
    if (simd) {
        rc_exec_opts o = {.threads = threads, .simd = simd};
        cr_assert_eq(rc_exec_open(&o, ex, &err), RECALL_OK, "%s", err.msg);
    }
    cr_assert_eq(rc_qwen2_open_ex(b, max_ctx, *ex, &m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(m, kv, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_dtype(m), kv);
    return m;
}

/* One reference (an f16 cache reserved once, one prefill of N = 600 rows: chunks of 64, key tiles
 * of 256) against: calls of 7 rows into a growing cache and then one row per call (batch sizes,
 * growth); a crop and re-forward; the last rows decoded on every SIMD path with 2 threads. All
 * bitwise. Also: half the bytes of f32 at every capacity; logits that differ from f32's (the
 * rounded cache is what ran) but stay close; the setting refused once anything is cached. */
Test(kv_f16, half_the_bytes_and_the_same_bits_for_every_batching_path_and_thread_count) {
    rc_blob *b = fixture_open_worldA("nf4");
    recall_err err = {0};
    enum { N = 600, MAXC = 700 };
    rc_exec *ex0 = NULL, *ex1 = NULL;
    rc_qwen2 *ref = open_kv(b, MAXC, RC_KV_DT_F16, NULL, 0, &ex0);
    rc_qwen2 *f32 = open_kv(b, MAXC, RC_KV_DT_F32, NULL, 0, &ex1);
    const int V = rc_qwen2_cfg(ref)->vocab;
    cr_assert_eq(rc_qwen2_kv_bytes_for(ref, 1000) * 2, rc_qwen2_kv_bytes_for(f32, 1000));
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    float *want = malloc((size_t)N * V * sizeof(float)), *exact = malloc((size_t)N * V * sizeof(float));
    float *got = malloc((size_t)N * V * sizeof(float));
    cr_assert(ids && want && exact && got);
    make_ids(ids, N, V, 11);
    for (size_t i = 0; i < (size_t)N * V; i++) want[i] = exact[i] = got[i] = NAN;
    cr_assert_eq(rc_qwen2_reserve(ref, N, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_reserve(f32, N, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_kv_bytes(ref) * 2, rc_qwen2_kv_bytes(f32), "an f16 cache holds half the bytes");
    rc_qwen2_fwd f = {.ids = ids, .n = N, .logits_all = want};
    cr_assert_eq(rc_qwen2_forward(ref, &f, &err), RECALL_OK, "%s", err.msg);
    f.logits_all = exact;
    cr_assert_eq(rc_qwen2_forward(f32, &f, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(ref, RC_KV_DT_F32, &err), RECALL_E_ARG, "the storage changed under a filled cache");
    cr_assert_eq(rc_qwen2_kv_dtype(ref), RC_KV_DT_F16);
    cr_assert_eq(rc_qwen2_set_kv_dtype(ref, (rc_kv_dtype)7, &err), RECALL_E_ARG);
    size_t differ = 0;
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)N * V; i++) {
        cr_assert(isfinite(want[i]));
        const double d = fabs((double)want[i] - (double)exact[i]);
        differ += want[i] != exact[i];
        worst = d > worst ? d : worst;
    }
    cr_assert_gt(differ, (size_t)N * V / 2, "only %zu of %zu logits differ from the f32 cache's", differ, (size_t)N * V);
    cr_assert_lt(worst, 0.5, "f16 rounding moved a logit by %g", worst);

    /* calls of 7 rows into a cache that grows (256 -> 512), then one row per call */
    rc_exec *exg = NULL;
    rc_qwen2 *grow = open_kv(b, MAXC, RC_KV_DT_F16, NULL, 0, &exg);
    int t = 0;
    for (; t < 301; t += 7) {
        rc_qwen2_fwd g = {.ids = ids + t, .n = 7, .logits_all = got + (size_t)t * V};
        cr_assert_eq(rc_qwen2_forward(grow, &g, &err), RECALL_OK, "%s", err.msg);
    }
    for (; t < N; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .logits_last = got + (size_t)t * V};
        cr_assert_eq(rc_qwen2_forward(grow, &d, &err), RECALL_OK, "%s", err.msg);
    }
    first_diff(got, want, (size_t)N * V, "f16: calls of 7 rows, then decode, vs one prefill");
    crop_and_reforward(grow, 200, ids, 240, want, V, got, "f16: crop + re-forward");
    rc_qwen2_close(grow);

    /* the last 3 rows decoded on every SIMD path, 2 threads */
    int paths = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!rc_simd_available((rc_simd_path)p)) continue;
        rc_exec *ex = NULL;
        rc_qwen2 *m = open_kv(b, MAXC, RC_KV_DT_F16, rc_simd_name((rc_simd_path)p), 2, &ex);
        rc_qwen2_fwd pf = {.ids = ids, .n = N - 3};
        cr_assert_eq(rc_qwen2_forward(m, &pf, &err), RECALL_OK, "%s", err.msg);
        for (int s = N - 3; s < N; s++) {
            rc_qwen2_fwd d = {.ids = ids + s, .n = 1, .logits_last = got};
            cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
            char what[64];
            snprintf(what, sizeof what, "f16 decode at %d on %s x2", s, rc_simd_name((rc_simd_path)p));
            first_diff(got, want + (size_t)s * V, (size_t)V, what);
        }
        rc_qwen2_close(m);
        rc_exec_close(ex);
        paths++;
    }
    cr_assert_geq(paths, 1);
    /* back to f32 while empty: the exact logits again */
    cr_assert_eq(rc_qwen2_crop(ref, 0, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(ref, RC_KV_DT_F32, &err), RECALL_OK, "%s", err.msg);
    crop_and_reforward(ref, 0, ids, 50, exact, V, got, "f32 again after f16");
    free(ids);
    free(want);
    free(exact);
    free(got);
    rc_qwen2_close(ref);
    rc_qwen2_close(f32);
    rc_blob_close(b);
}
