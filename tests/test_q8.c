/* test_q8.c - the q8 numerics profile (simd/q8.h): the integer NF4 table, the activation quantiser's
 * rules, the packed layout, the distance of a q8 matmul to the exact one, and the decoder under q8:
 * bitwise the same logits for every SIMD path, thread count and batch split (its own determinism),
 * different from exact but close to it, and the exact profile untouched by a q8 context beside it.
 * (Every kernel against the oracle, bitwise: tests/simd_selftest.c.) */
#include "blob.h"
#include "convert.h"
#include "fixture.h"
#include "nf4.h"
#include "pool.h"
#include "q8.h"
#include "qwen2.h"
#include "recall.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static float gauss(uint32_t *s) {
    const double u = (lcg(s) + 1.0) / 16777218.0, v = (lcg(s) + 1.0) / 16777218.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(q8_scheme, nf4_table_is_the_codebook_times_112) {
    for (int k = 0; k < 16; k++) {
        cr_expect_eq(RC_Q8_NF4[k], (int)lrint((double)RC_NF4_CODEBOOK[k] * 112.0), "code %d", k);
        cr_expect_eq(RC_Q8_NF4_U8[k], RC_Q8_NF4[k] + 128, "code %d", k);
        /* no value sits near a rounding tie (the table does not depend on how .5 rounds) */
        const double f = (double)RC_NF4_CODEBOOK[k] * 112.0 - floor((double)RC_NF4_CODEBOOK[k] * 112.0);
        cr_expect(fabs(f - 0.5) > 0.01, "code %d", k);
    }
    cr_expect_eq(rc_numerics_parse("exact"), RC_NUMERICS_EXACT);
    cr_expect_eq(rc_numerics_parse("q8"), RC_NUMERICS_Q8);
    cr_expect_eq(rc_numerics_parse("Q8"), -1);
    cr_expect_eq(rc_numerics_parse(NULL), -1);
    cr_expect_str_eq(rc_numerics_name(RC_NUMERICS_Q8), "q8");
}

/* The quantiser's rules on hand-made blocks: scale, rounding, the peak, non-finite and tiny blocks. */
Test(q8_scheme, quantiser_rules) {
    enum { NB = 6, K = NB * 32 };
    float x[K];
    rc_q8act a = {0};
    recall_err err = {0};
    cr_assert_eq(rc_q8act_reserve(&a, 1, K, &err), RECALL_OK, "%s", err.msg);
    uint32_t s = 3;
    for (int i = 0; i < K; i++) x[i] = gauss(&s);
    /* block 0: max 2.0 at column 7, the rest at most 1.9 (no peak: 2.0 < 1.25 * 1.9) */
    for (int i = 0; i < 32; i++) x[i] = 1.9f * (float)(i - 16) / 16.0f;
    x[7] = -2.0f;
    /* block 1: a peak (100 against at most 1) at column 32 + 20, and the same value again later
     * in block 2 at two places (a tie: no peak, the lowest index is the maximum) */
    for (int i = 32; i < 96; i++) x[i] = (float)((i % 7) - 3) / 3.0f;
    x[52] = 100.0f;
    x[64 + 3] = 50.0f;
    x[64 + 30] = -50.0f;
    /* block 3: an inf; block 4: all below 2^-96; block 5: one 1.0 among values below 2^-96 */
    x[96 + 11] = -INFINITY;
    for (int i = 128; i < 192; i++) x[i] = ldexpf(1.0f, -100) * (float)(i % 5);
    x[160 + 9] = 1.0f;
    rc_q8_quant_row_ref(x, &a, 0);
    /* block 0: d = 2/127, q = round(x * 127/2), the maximum maps to -127 */
    cr_expect_eq(bits(a.d[0]), bits(2.0f / 127.0f));
    cr_expect_eq(a.q[7], -127);
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) {
        cr_expect_eq(a.q[i], (int)nearbyintf(x[i] * (127.0f / 2.0f)), "column %d", i);
        sum += a.q[i];
    }
    cr_expect_eq(a.corr[0], -128 * sum);
    /* block 1: the peak is column 52 with its exact value; the rest quantised to their own max 1 */
    cr_assert_eq(a.npk[0], 2, "peaks: %d", a.npk[0]);
    cr_expect_eq(a.pk_c[0], 52);
    cr_expect_eq(bits(a.pk_x[0]), bits(100.0f));
    cr_expect_eq(a.q[52], 0);
    cr_expect_eq(bits(a.d[1]), bits(1.0f / 127.0f));
    cr_expect_eq(a.q[34], 127); /* ((34 % 7) - 3) / 3 = 1 */
    cr_expect_eq(a.q[35], -127);
    /* block 2: a tie of |50| is no peak; scale 50 */
    cr_expect_eq(bits(a.d[2]), bits(50.0f / 127.0f));
    cr_expect_eq(a.q[64 + 3], 127);
    cr_expect_eq(a.q[64 + 30], -127);
    /* block 3: NaN scale, zero codes; block 4: zero */
    cr_expect(isnan(a.d[3]));
    cr_expect_eq(a.corr[3], 0);
    for (int i = 96; i < 160; i++) cr_expect_eq(a.q[i], 0, "column %d", i);
    cr_expect_eq(bits(a.d[4]), 0u);
    /* block 5: the peak alone (the rest is below 2^-96): d = 0, the peak column 169 */
    cr_expect_eq(a.pk_c[1], 169);
    cr_expect_eq(bits(a.pk_x[1]), bits(1.0f));
    cr_expect_eq(bits(a.d[5]), 0u);
    /* over random rows: |q| <= 127, and every block without a peak has a code of magnitude 127 */
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < K; i++) x[i] = gauss(&s) * ldexpf(1.0f, (int)(lcg(&s) % 20) - 10);
        rc_q8_quant_row_ref(x, &a, 0);
        int pk = 0;
        for (int b = 0; b < NB; b++) {
            int m = 0;
            for (int i = 32 * b; i < 32 * b + 32; i++) {
                cr_assert(a.q[i] >= -127 && a.q[i] <= 127);
                if (abs(a.q[i]) > m) m = abs(a.q[i]);
            }
            const int has_peak = pk < a.npk[0] && a.pk_c[pk] / 32 == b;
            cr_expect_eq(m, 127, "row %d block %d (peak %d)", r, b, has_peak);
            pk += has_peak;
        }
    }
    rc_q8act_free(&a);
}

/* A random nf4 matrix (and an f32 one) packed: every element reads back as its integer value,
 * padding rows are zero, the scales are absmax / 112 (nf4) or the block's quantiser scale. */
Test(q8_scheme, pack_reads_back) {
    enum { R = 37, K = 160 }; /* 3 groups (the last padded); K % 64 == 32: a scale per 32-block */
    uint8_t codes[R * K / 2];
    float absmax[(R * K + 63) / 64], wf[R * K]; /* one per 64 elements of the flat matrix, the last partial */
    uint32_t s = 11;
    for (size_t i = 0; i < sizeof codes; i++) codes[i] = (uint8_t)lcg(&s);
    for (size_t i = 0; i < (R * K + 63) / 64; i++) absmax[i] = 0.01f + (float)(lcg(&s) % 1000) * 1e-4f;
    for (size_t i = 0; i < R * K; i++) wf[i] = gauss(&s);
    const rc_mat w4 = {RC_DT_NF4, codes, absmax, R, K}, w8 = {RC_DT_F32, wf, NULL, R, K};
    rc_q8mat p4, p8;
    recall_err err = {0};
    cr_assert_eq(rc_q8_alloc(&w4, &p4, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_q8_alloc(&w8, &p8, &err), RECALL_OK, "%s", err.msg);
    rc_exec_q8_pack(NULL, &w4, &p4);
    rc_exec_q8_pack(NULL, &w8, &p8);
    cr_expect_eq(p4.kind, RC_Q8_W4);
    cr_expect_eq(p4.sshift, 0);
    cr_expect_eq(p8.kind, RC_Q8_W8);
    cr_expect_eq(rc_q8_bytes(&p4), (size_t)3 * 5 * (256 + 64));
    rc_q8act a = {0};
    cr_assert_eq(rc_q8act_reserve(&a, 1, K, &err), RECALL_OK);
    for (int64_t r = 0; r < 48; r++) {
        if (r < R) {
            for (int64_t c = 0; c < K; c++)
                cr_assert_eq(rc_q8_value(&p4, r, c), RC_Q8_NF4[rc_nf4_code(codes, (size_t)(r * K + c))], "(%lld, %lld)",
                             (long long)r, (long long)c);
            rc_q8_quant_row_ref(wf + r * K, &a, 0); /* weights: the activation rule without peaks */
            for (int64_t b = 0; b < K / 32; b++) {
                cr_assert_eq(bits(rc_q8_scale(&p4, r / 16, b, (int)(r % 16))),
                             bits(absmax[(r * K + 32 * b) / 64] / 112.0f));
                float m = 0.0f;
                for (int i = 0; i < 32; i++) m = fmaxf(m, fabsf(wf[r * K + 32 * b + i]));
                cr_assert_eq(bits(rc_q8_scale(&p8, r / 16, b, (int)(r % 16))), bits(m / 127.0f));
                for (int i = 0; i < 32; i++) {
                    const float v = wf[r * K + 32 * b + i] * (127.0f / m);
                    cr_assert_eq(rc_q8_value(&p8, r, 32 * b + i), (int)nearbyintf(v));
                }
            }
        } else {
            for (int64_t c = 0; c < K; c++) cr_assert_eq(rc_q8_value(&p4, r, c), 0);
            cr_assert_eq(bits(rc_q8_scale(&p4, r / 16, 0, (int)(r % 16))), 0u);
        }
    }
    /* a width q8 cannot take is refused with the shape */
    const rc_mat odd = {RC_DT_F32, wf, NULL, 2, 48};
    rc_q8mat po;
    recall_err e2 = {0};
    cr_expect_eq(rc_q8_alloc(&odd, &po, &e2), RECALL_E_UNSUPPORTED);
    cr_expect(strstr(e2.msg, "2 x 48") != NULL, "%s", e2.msg);
    rc_q8act_free(&a);
    rc_q8_free(&p4);
    rc_q8_free(&p8);
}

/* The distance of the q8 matmul (the oracle) to the exact one on Gaussian weights and inputs:
 * relative rms error 0.7 % (nf4 weights, the emulation of docs/PROFILES.md), below 1.5 %. */
Test(q8_scheme, matmul_close_to_exact) {
    enum { R = 64, K = 1536, T = 8 };
    float *w = malloc(sizeof(float) * R * K), *X = malloc(sizeof(float) * T * K);
    uint8_t *codes = malloc(R * K / 2);
    float *absmax = malloc(sizeof(float) * R * K / 64), *yq = malloc(sizeof(float) * T * R),
          *ye = malloc(sizeof(float) * T * R);
    uint32_t s = 5;
    for (int i = 0; i < R * K; i++) w[i] = gauss(&s);
    for (int i = 0; i < T * K; i++) X[i] = gauss(&s);
    cr_assert_eq(rc_nf4_quantize(w, R * K, codes, absmax), 0);
    const rc_mat m = {RC_DT_NF4, codes, absmax, R, K};
    rc_q8_matmul_ref(&m, NULL, X, K, T, yq, R, 0, R);
    double se = 0.0, sy = 0.0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
            ye[t * R + r] = rc_dot_row(&m, r, X + t * K);
            se += ((double)yq[t * R + r] - ye[t * R + r]) * ((double)yq[t * R + r] - ye[t * R + r]);
            sy += (double)ye[t * R + r] * ye[t * R + r];
        }
    const double rel = sqrt(se / sy);
    cr_log_info("q8 matmul: relative rms error %.4f against exact", rel);
    cr_expect(rel > 1e-4 && rel < 0.015, "relative rms error %.4f", rel);
    free(w);
    free(X);
    free(codes);
    free(absmax);
    free(yq);
    free(ye);
}

/* ---- the decoder under q8 ------------------------------------------------------------------ */

static float *nanbuf(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static rc_exec *exec_q8(const char *simd, int threads, int numerics) {
    rc_exec *e = NULL;
    recall_err err = {0};
    rc_exec_opts o = {.threads = threads, .simd = simd, .numerics = numerics};
    cr_assert_eq(rc_exec_open(&o, &e, &err), RECALL_OK, "%s", err.msg);
    return e;
}

/* logits [T][V] of ids in one forward, or (n0 > 0) n0 rows then one row per call */
static void run_logits(rc_blob *b, rc_exec *e, const int32_t *ids, int T, int n0, float *out) {
    rc_qwen2 *m = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_open_ex(b, T, e, &m, &err), RECALL_OK, "%s", err.msg);
    const size_t V = (size_t)rc_qwen2_cfg(m)->vocab;
    if (!n0) n0 = T;
    rc_qwen2_fwd f = {.ids = ids, .n = n0, .logits_all = out};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    for (int t = n0; t < T; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .logits_last = out + (size_t)t * V};
        cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
    }
    rc_qwen2_close(m);
}

static void q8_model_bitwise(const char *weights) {
    rc_blob *b = fixture_open_worldA(weights);
    enum { T = 150 }; /* three chunks of rows */
    int32_t ids[T];
    uint32_t s = 17;
    rc_exec *e0 = exec_q8("scalar", 1, RC_NUMERICS_Q8);
    rc_qwen2 *m = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_open_ex(b, 8, e0, &m, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(m)->vocab;
    cr_expect_eq(rc_qwen2_numerics(m), RC_NUMERICS_Q8);
    size_t bytes;
    double secs;
    rc_qwen2_q8_stats(m, &bytes, &secs);
    cr_expect_gt(bytes, 0);
    rc_qwen2_close(m);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(lcg(&s) % (uint32_t)V);
    const size_t n = (size_t)T * (size_t)V;
    float *ref = nanbuf(n), *got = nanbuf(n), *ex = nanbuf(n);
    run_logits(b, e0, ids, T, 0, ref);
    const char *paths[] = {"scalar", "avx2", "avx512", "neon"};
    const int threads[] = {1, 2, 3};
    int runs = 0;
    for (int p = 0; p < 4; p++) {
        if (!rc_simd_available((rc_simd_path)rc_simd_parse(paths[p]))) continue;
        for (int ti = 0; ti < 3; ti++) {
            rc_exec *e = exec_q8(paths[p], threads[ti], RC_NUMERICS_Q8);
            for (int split = 0; split < 2; split++) { /* one forward; 100 rows then decode steps */
                for (size_t i = 0; i < n; i++) got[i] = NAN;
                run_logits(b, e, ids, T, split ? 100 : 0, got);
                cr_expect_eq(memcmp(got, ref, n * sizeof(float)), 0, "%s weights, %s x%d, split %d", weights,
                             paths[p], threads[ti], split);
                runs++;
            }
            rc_exec_close(e);
        }
    }
    cr_expect_geq(runs, 6);
    /* against exact: different bits (the profile ran), close values */
    rc_exec *ee = exec_q8(NULL, 2, RC_NUMERICS_EXACT);
    run_logits(b, ee, ids, T, 0, ex);
    double md = 0.0, mx = 0.0;
    size_t ndiff = 0, agree = 0;
    for (size_t i = 0; i < n; i++) {
        ndiff += bits(ex[i]) != bits(ref[i]);
        md = fmax(md, fabs((double)ex[i] - ref[i]));
        mx = fmax(mx, fabs((double)ex[i]));
    }
    for (int t = 0; t < T; t++) {
        int a = 0, c = 0;
        for (int v = 1; v < V; v++) {
            if (ref[(size_t)t * V + v] > ref[(size_t)t * V + a]) a = v;
            if (ex[(size_t)t * V + v] > ex[(size_t)t * V + c]) c = v;
        }
        agree += a == c;
    }
    cr_log_info("%s q8 vs exact: %zu of %zu logits differ, max |d| %.4g (max |logit| %.4g), argmax agrees %zu/%d",
                weights, ndiff, n, md, mx, agree, T);
    cr_expect_gt(ndiff, n / 2, "q8 logits should differ from exact");
    cr_expect_lt(md, 0.05 * mx, "max |q8 - exact| %.4g against max |logit| %.4g", md, mx);
    rc_exec_close(ee);
    rc_exec_close(e0);
    free(ref);
    free(got);
    free(ex);
    rc_blob_close(b);
}

Test(q8_model, nf4_bitwise_across_paths_threads_and_splits, .timeout = 600) { q8_model_bitwise("nf4"); }
/* f32 weights: the layer matrices packed as int8 per block (RC_Q8_W8) */
Test(q8_model, f32_bitwise_across_paths_threads_and_splits, .timeout = 600) { q8_model_bitwise("f32"); }

/* A shared context (the faithful loop's seal) borrows the q8 weights and computes the same bits;
 * an exact context on the same blob beside it is untouched. */
Test(q8_model, shared_context_and_exact_beside_it) {
    rc_blob *b = fixture_open_worldA("nf4");
    rc_exec *eq = exec_q8(NULL, 2, RC_NUMERICS_Q8), *ee = exec_q8(NULL, 2, RC_NUMERICS_EXACT);
    recall_err err = {0};
    rc_qwen2 *base = NULL, *shared = NULL, *exact = NULL, *exact2 = NULL;
    cr_assert_eq(rc_qwen2_open_ex(b, 64, eq, &base, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open_shared(b, 32, base, &shared, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open_ex(b, 32, ee, &exact, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(rc_qwen2_numerics(shared), RC_NUMERICS_Q8);
    cr_expect_eq(rc_qwen2_numerics(exact), RC_NUMERICS_EXACT);
    const int V = rc_qwen2_cfg(base)->vocab;
    int32_t ids[20];
    uint32_t s = 9;
    for (int i = 0; i < 20; i++) ids[i] = (int32_t)(lcg(&s) % (uint32_t)V);
    float *a = nanbuf((size_t)V), *c = nanbuf((size_t)V), *x = nanbuf((size_t)V), *y = nanbuf((size_t)V);
    rc_qwen2_fwd fa = {.ids = ids, .n = 20, .logits_last = a}, fc = {.ids = ids, .n = 20, .logits_last = c};
    rc_qwen2_fwd fx = {.ids = ids, .n = 20, .logits_last = x}, fy = {.ids = ids, .n = 20, .logits_last = y};
    cr_assert_eq(rc_qwen2_forward(base, &fa, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(shared, &fc, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(exact, &fx, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_close(base); /* before the second exact context opens: nothing of q8 stays behind */
    rc_qwen2_close(shared);
    cr_assert_eq(rc_qwen2_open_ex(b, 32, ee, &exact2, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(exact2, &fy, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(memcmp(a, c, (size_t)V * 4), 0, "shared context");
    cr_expect_eq(memcmp(x, y, (size_t)V * 4), 0, "exact contexts");
    cr_expect_neq(memcmp(a, x, (size_t)V * 4), 0, "q8 and exact");
    rc_qwen2_close(exact);
    rc_qwen2_close(exact2);
    rc_exec_close(eq);
    rc_exec_close(ee);
    free(a);
    free(c);
    free(x);
    free(y);
    rc_blob_close(b);
}

Test(q8_model, unknown_profile_is_an_error) {
    rc_exec *e = NULL;
    recall_err err = {0};
    rc_exec_opts o = {.threads = 1, .numerics = 7};
    cr_expect_eq(rc_exec_open(&o, &e, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "numerics") != NULL, "%s", err.msg);
    cr_expect_null(e);
}

/* The public API: recall_open_opts.numerics runs recall_forward under q8 (the library's q8 bits,
 * packed once across the reopens a longer input makes), recall_loop_opts.numerics the loop; an
 * unknown profile is an argument error in both. */
Test(q8_api, forward_and_loop) {
    const char *path = fixture_worldA_blob("nf4");
    cr_assert(path);
    recall_err err = {0};
    recall_open_opts oo;
    recall_open_opts_init(&oo);
    oo.numerics = 5;
    recall_model *m = NULL;
    cr_expect_eq(recall_open(path, &oo, &m, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "numerics"), "%s", err.msg);
    oo.numerics = RECALL_NUMERICS_Q8;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_open(path, &oo, &m, &err), RECALL_OK, "%s", err.msg);
    recall_model_info info;
    recall_model_get_info(m, &info);
    const size_t V = (size_t)info.vocab;
    int32_t ids[100];
    uint32_t s = 21;
    for (int i = 0; i < 100; i++) ids[i] = (int32_t)(lcg(&s) % (uint32_t)V);
    float *a = nanbuf(V), *a2 = nanbuf(V), *ref = nanbuf(100 * V), *x = nanbuf(100 * V);
    cr_assert_eq(recall_forward(m, ids, 30, a, V, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(recall_forward(m, ids, 100, a2, V, &err), RECALL_OK, "%s", err.msg); /* reopens: ctx 128 */
    rc_blob *b = fixture_open_worldA("nf4");
    rc_exec *e = exec_q8(NULL, 1, RC_NUMERICS_Q8), *ee = exec_q8(NULL, 1, RC_NUMERICS_EXACT);
    run_logits(b, e, ids, 100, 0, ref);
    run_logits(b, ee, ids, 100, 0, x);
    cr_expect_eq(memcmp(a, ref + 29 * V, V * 4), 0, "recall_forward of 30 ids");
    cr_expect_eq(memcmp(a2, ref + 99 * V, V * 4), 0, "recall_forward of 100 ids");
    cr_expect_neq(memcmp(a2, x + 99 * V, V * 4), 0, "q8 is not exact");
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    recall_loop *l = NULL;
    lo.numerics = 9;
    cr_expect_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_ARG);
    lo.numerics = RECALL_NUMERICS_Q8;
    lo.turn_cap = 8;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    int32_t *feed = NULL;
    size_t nf = 0;
    cr_assert_eq(recall_chat_segment(m, 0, "hello there", NULL, &feed, &nf, &err), RECALL_OK, "%s", err.msg);
    recall_reply rep;
    cr_assert_eq(recall_turn(l, feed, nf, NULL, NULL, &rep, &err), RECALL_OK, "%s", err.msg);
    cr_expect_gt(rep.n_ids, 0);
    recall_reply_free(l, &rep);
    recall_free(m, feed);
    recall_loop_close(l);
    recall_close(m);
    rc_exec_close(e);
    rc_exec_close(ee);
    rc_blob_close(b);
    free(a);
    free(a2);
    free(ref);
    free(x);
}

/* ---- attention kept exact under q8 (qwen2.h, RC_Q8_EXACT_KEY; convert --q8-exact) ------------- */

Test(q8_exact, spec_parsed_checked_and_canonical) {
    uint8_t mask[6];
    char out[96];
    recall_err err = {0};
    const char *ok[][2] = {{"0-1:qkvo", "0-1:qkvo"}, {"1:vk,0:oqkv", "0:qkvo,1:kv"}, {"0:q,1:q,2:q", "0-2:q"},
                           {"5:o,3-4:v", "3-4:v,5:o"}, {"2-2:k", "2:k"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        memset(mask, 0xee, sizeof mask);
        cr_assert_eq(rc_q8_exact_parse(ok[i][0], 6, mask, &err), RECALL_OK, "%s: %s", ok[i][0], err.msg);
        rc_q8_exact_format(mask, 6, out, sizeof out);
        cr_expect_str_eq(out, ok[i][1], "%s", ok[i][0]);
    }
    cr_assert_eq(rc_q8_exact_parse("0:qk,4:o", 6, mask, &err), RECALL_OK);
    const uint8_t want[6] = {RC_Q8X_Q | RC_Q8X_K, 0, 0, 0, RC_Q8X_O, 0};
    cr_expect_eq(memcmp(mask, want, 6), 0);
    const char *bad[][2] = {{"", "expected LAYER"}, {"6:q", "not a range of 0-5"}, {"2-1:q", "not a range"},
                            {"0:x", "'x'"},        {"0:qq", "'q'"},             {"0:", "expected"},
                            {"0:q,", "expected"},  {"0:q,0:k", "layer 0 named twice"}, {"0-2:q,1:v", "named twice"},
                            {"-1:q", "expected"},  {"0:gate", "'g'"},           {" 0:q", "expected"},
                            {"99999999999999999999:q", "not a range"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err = (recall_err){0};
        cr_expect_eq(rc_q8_exact_parse(bad[i][0], 6, mask, &err), RECALL_E_ARG, "%s", bad[i][0]);
        cr_expect(strstr(err.msg, bad[i][1]) != NULL, "%s: %s", bad[i][0], err.msg);
        cr_expect(strstr(err.msg, bad[i][0]) != NULL, "names the text: %s", err.msg);
    }
}

/* worldA converted with --q8-exact: the named matrices run exact under q8 (fewer bytes packed,
 * logits closer to exact than plain q8 and still not exact), the same bits for every SIMD path and
 * thread count; the exact profile does not read the key. */
Test(q8_exact, blob_key_runs_those_matrices_exact, .timeout = 600) {
    const char *path = "build/test_q8_exact_worldA_nf4.blob";
    rc_convert_opts co = fixture_worldA_convert_opts("nf4", path);
    co.q8_exact = "3:o,0-1:kvqo";
    recall_err err = {0};
    cr_assert_eq(rc_convert(&co, &err), RECALL_OK, "%s", err.msg);
    rc_blob *bx = fixture_open(path), *b = fixture_open_worldA("nf4");
    const rc_blob_kv *kv = rc_blob_kv_find(bx, RC_Q8_EXACT_KEY);
    cr_assert_not_null(kv);
    cr_expect_str_eq(kv->v.s, "0-1:qkvo,3:o", "stored in canonical form");
    rc_exec *e0 = exec_q8("scalar", 1, RC_NUMERICS_Q8), *ee = exec_q8(NULL, 2, RC_NUMERICS_EXACT);
    rc_qwen2 *mx = NULL, *m = NULL;
    cr_assert_eq(rc_qwen2_open_ex(bx, 8, e0, &mx, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open_ex(b, 8, e0, &m, &err), RECALL_OK, "%s", err.msg);
    cr_expect_str_eq(rc_qwen2_q8_exact(mx), "0-1:qkvo,3:o");
    cr_expect_str_eq(rc_qwen2_q8_exact(m), "");
    size_t bytes_x, bytes;
    double secs;
    rc_qwen2_q8_stats(mx, &bytes_x, &secs);
    rc_qwen2_q8_stats(m, &bytes, &secs);
    cr_expect_lt(bytes_x, bytes, "the exact matrices are not packed: %zu vs %zu", bytes_x, bytes);
    const int V = rc_qwen2_cfg(m)->vocab;
    rc_qwen2_close(mx);
    rc_qwen2_close(m);
    enum { T = 150 };
    int32_t ids[T];
    uint32_t s = 23;
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(lcg(&s) % (uint32_t)V);
    const size_t n = (size_t)T * (size_t)V;
    float *ref = nanbuf(n), *got = nanbuf(n), *plain = nanbuf(n), *ex = nanbuf(n), *exx = nanbuf(n);
    run_logits(bx, e0, ids, T, 0, ref);
    run_logits(b, e0, ids, T, 0, plain);
    run_logits(b, ee, ids, T, 0, ex);
    run_logits(bx, ee, ids, T, 0, exx);
    cr_expect_eq(memcmp(ex, exx, n * sizeof(float)), 0, "the exact profile ignores the key");
    const char *paths[] = {"scalar", "avx2", "avx512", "neon"};
    int runs = 0;
    for (int p = 0; p < 4; p++) {
        if (!rc_simd_available((rc_simd_path)rc_simd_parse(paths[p]))) continue;
        for (int th = 1; th <= 3; th += 2) {
            rc_exec *e = exec_q8(paths[p], th, RC_NUMERICS_Q8);
            for (int split = 0; split < 2; split++) {
                for (size_t i = 0; i < n; i++) got[i] = NAN;
                run_logits(bx, e, ids, T, split ? 100 : 0, got);
                cr_expect_eq(memcmp(got, ref, n * sizeof(float)), 0, "%s x%d split %d", paths[p], th, split);
                runs++;
            }
            rc_exec_close(e);
        }
    }
    cr_expect_geq(runs, 4);
    double dx = 0.0, dp = 0.0;
    size_t same_as_exact = 0;
    for (size_t i = 0; i < n; i++) {
        dx += fabs((double)ref[i] - ex[i]);
        dp += fabs((double)plain[i] - ex[i]);
        same_as_exact += bits(ref[i]) == bits(ex[i]);
    }
    cr_log_info("mean |q8 - exact|: plain %.4g, with 0-1:qkvo,3:o exact %.4g", dp / (double)n, dx / (double)n);
    cr_expect_lt(dx, dp, "keeping matrices exact brings q8 closer to exact (%.4g vs %.4g)", dx / n, dp / n);
    cr_expect_lt(same_as_exact, n / 2, "the rest still runs q8");
    /* named in the outputs that name the profile: a q8 replay trace carries the key, an exact one not */
    const char *tr = "build/test_q8_exact_trace.json";
    for (int q = 0; q < 2; q++) {
        free(fixture_cmd(0, NULL, "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 --arm SP %s "
                         "--trace %s >/dev/null 2>&1", path, q ? "--numerics q8" : "", tr));
        char *text = fixture_read(tr, NULL);
        cr_expect_eq(strstr(text, "\"q8_exact\": \"0-1:qkvo,3:o\"") != NULL, q, "q8 %d: %.200s", q, text);
        free(text);
        free(fixture_cmd(0, NULL, "./recall eval %s --bench tests/golden/recall_bench.json --problems 0 --arms SP %s "
                         "--json %s >/dev/null 2>&1", path, q ? "--numerics q8" : "", tr));
        text = fixture_read(tr, NULL);
        cr_expect_eq(strstr(text, "\"q8_exact\": \"0-1:qkvo,3:o\"") != NULL, q, "eval, q8 %d: %.200s", q, text);
        free(text);
    }
    unlink(tr);
    rc_exec_close(e0);
    rc_exec_close(ee);
    free(ref);
    free(got);
    free(plain);
    free(ex);
    free(exx);
    rc_blob_close(bx);
    rc_blob_close(b);
}

/* The key is untrusted: a malformed value, a layer past the decoder's, or a number where a string is
 * due fails the open naming the file and the key (under either profile), and the converter refuses a
 * spec that does not fit the decoder without writing anything. */
Test(q8_exact, hostile_key_and_bad_spec_refused) {
    rc_blob *b = fixture_open_worldA("f32");
    rc_exec *e = exec_q8(NULL, 1, RC_NUMERICS_EXACT);
    const char *vals[][2] = {{"24:q", "not a range of 0-23"}, {"0:qz", "'z'"}, {"0:q,,1:k", "expected"}};
    for (size_t i = 0; i < 3; i++) {
        rc_blob_kv kv = {.type = RC_KV_STR};
        snprintf(kv.key, sizeof kv.key, "%s", RC_Q8_EXACT_KEY);
        snprintf(kv.v.s, sizeof kv.v.s, "%s", vals[i][0]);
        kv.count = (uint32_t)strlen(kv.v.s);
        recall_err err = {0};
        cr_assert_eq(rc_blob_overlay_kv(b, &kv, &err), RECALL_OK, "%s", err.msg);
        rc_qwen2 *m = NULL;
        cr_expect_eq(rc_qwen2_open_ex(b, 8, e, &m, &err), RECALL_E_FORMAT, "%s", vals[i][0]);
        cr_expect_null(m);
        cr_expect(strstr(err.msg, RC_Q8_EXACT_KEY) && strstr(err.msg, vals[i][1]) && strstr(err.msg, "worldA"), "%s",
                  err.msg);
    }
    rc_blob_kv num = {.type = RC_KV_I64, .count = 1};
    snprintf(num.key, sizeof num.key, "%s", RC_Q8_EXACT_KEY);
    recall_err err = {0};
    cr_assert_eq(rc_blob_overlay_kv(b, &num, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2 *m = NULL;
    cr_expect_eq(rc_qwen2_open_ex(b, 8, e, &m, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "not a string") != NULL, "%s", err.msg);
    rc_exec_close(e);
    rc_blob_close(b);

    const char *out = "build/test_q8_exact_refused.blob";
    remove(out);
    rc_convert_opts co = fixture_worldA_convert_opts("f32", out);
    co.q8_exact = "0-24:v";
    err = (recall_err){0};
    cr_expect_eq(rc_convert(&co, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "--q8-exact") && strstr(err.msg, "24 layers"), "%s", err.msg);
    cr_expect_neq(access(out, F_OK), 0, "nothing written");
}
