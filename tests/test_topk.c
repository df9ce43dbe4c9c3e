/* test_topk.c - rc_topk against torch.topk on CPU (docs/NUMERICS.md, "Ties"):
 * the 4,000 tie-heavy cases of tests/golden/topk/torch_topk_cpu.json (made by torch 1.13 itself,
 * n = 1..300, k = 1..5, both of its paths) must give the same indices in the same order, and
 * hand-made cases pin NaN, k = n, k = 1, n = 1 and the tie orders of each path. */
#include "json.h"
#include "topk.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs rc_topk with NaN-poisoned outputs and exactly rc_topk_scratch pairs of scratch (heap, so
 * ASan catches an overrun). */
static void topk(const float *v, int n, int k, int32_t *idx, float *val) {
    size_t ns = rc_topk_scratch(n, k);
    rc_topk_pair *s = malloc(ns * sizeof *s);
    cr_assert(s);
    for (int j = 0; j < k; j++) {
        idx[j] = -1;
        val[j] = NAN;
    }
    rc_topk(v, n, k, s, idx, val);
    free(s);
}

Test(topk, torch_cpu_golden_all_cases) {
    const char *path = "tests/golden/topk/torch_topk_cpu.json";
    recall_err err = {0};
    char *text;
    size_t len;
    json_doc *doc;
    cr_assert_eq(rc_read_file(path, &text, &len, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(json_parse(text, len, path, &doc, &err), RECALL_OK, "%s", err.msg);
    const json_value *cases = json_get_type(json_root(doc), "cases", JSON_ARR);
    cr_assert(cases);
    cr_assert_eq(cases->len, 4000);
    int match = 0, ties = 0, paths[2] = {0, 0};
    int first_bad = -1;
    for (size_t c = 0; c < cases->len; c++) {
        const json_value *cs = &cases->items[c];
        const json_value *sc = json_get_type(cs, "scores", JSON_ARR), *ki = json_get_type(cs, "k", JSON_NUM),
                         *ix = json_get_type(cs, "indices", JSON_ARR);
        cr_assert(sc && ki && ix);
        int n = (int)sc->len, k = (int)ki->i;
        cr_assert(k >= 1 && k <= n && (int)ix->len == k);
        float *v = malloc((size_t)n * sizeof *v);
        int32_t idx[8];
        float val[8];
        for (int i = 0; i < n; i++) v[i] = (float)sc->items[i].num; /* float32 values printed as doubles */
        topk(v, n, k, idx, val);
        int ok = 1, tie = 0;
        for (int j = 0; j < k; j++) {
            ok &= idx[j] == (int32_t)ix->items[j].i;
            cr_assert(idx[j] >= 0 && idx[j] < n);
            cr_assert(val[j] == v[idx[j]], "case %zu: val[%d] is not v[idx[%d]]", c, j, j);
        }
        for (int i = 0; i < n && !tie; i++) /* a value of the top k also outside it, or twice in it */
            for (int j = 0; j < k; j++)
                if (i != idx[j] && v[i] == val[j]) tie = 1;
        match += ok;
        ties += tie;
        paths[(int64_t)k * 64 <= n]++;
        if (!ok && first_bad < 0) first_bad = (int)c;
        free(v);
    }
    cr_log_info("topk golden: %d/4000 cases match (%d with ties at the top k; %d nth_element, %d partial_sort)",
                match, ties, paths[0], paths[1]);
    cr_expect_gt(ties, 1000, "the file should be tie-heavy");
    cr_expect_gt(paths[0], 100);
    cr_expect_gt(paths[1], 100);
    cr_assert_eq(match, 4000, "%d/4000 match; first mismatch: case %d", match, first_bad);
    json_free(doc);
    free(text);
}

static void expect_idx(const float *v, int n, int k, const int32_t *want) {
    int32_t idx[8];
    float val[8];
    topk(v, n, k, idx, val);
    for (int j = 0; j < k; j++) cr_expect_eq(idx[j], want[j], "n=%d k=%d: idx[%d] = %d, want %d", n, k, j, idx[j], want[j]);
}

Test(topk, n1_k1) {
    float v[1] = {-4.5f};
    int32_t idx[1];
    float val[1];
    topk(v, 1, 1, idx, val);
    cr_assert_eq(idx[0], 0);
    cr_assert_eq(val[0], -4.5f);
}

Test(topk, k1_is_a_maximum) {
    float v[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
    int32_t idx[1];
    float val[1];
    topk(v, 6, 1, idx, val);
    cr_assert_eq(val[0], 2.0f);
    cr_assert_eq(idx[0], 3); /* nth_element's median-of-three pivot, not the first maximum */
}

Test(topk, nan_counts_as_greatest) {
    float v[7] = {1.0f, NAN, 3.0f, -INFINITY, INFINITY, 2.0f, 0.0f};
    int32_t idx[3];
    float val[3];
    topk(v, 7, 3, idx, val);
    cr_assert_eq(idx[0], 1);
    cr_assert(isnan(val[0]));
    cr_assert_eq(idx[1], 4);
    cr_assert_eq(idx[2], 2);
    /* same on the partial_sort path (n >= 64k): NaN far from the front */
    float w[200];
    for (int i = 0; i < 200; i++) w[i] = (float)(i % 7);
    w[150] = NAN;
    topk(w, 200, 2, idx, val);
    cr_assert_eq(idx[0], 150);
    cr_assert_eq(val[1], 6.0f);
}

Test(topk, k_equals_n_sorted_descending) {
    float v[5] = {0.25f, -2.0f, 7.0f, 0.5f, 3.0f};
    static const int32_t want[5] = {2, 4, 3, 0, 1};
    expect_idx(v, 5, 5, want);
}

/* Pinned tie orders (from the same torch loop compiled against libstdc++ 12, which reproduces all
 * 4,000 golden cases): neither path is simply "lower index first". */
Test(topk, tie_orders_of_both_paths) {
    float two[2] = {1.0f, 1.0f}; /* nth_element path, insertion sort of 2 */
    static const int32_t w2[2] = {0, 1};
    expect_idx(two, 2, 2, w2);
    float eq5[5] = {1, 1, 1, 1, 1}; /* nth_element path: median-of-3 + Hoare partition */
    static const int32_t w5[2] = {2, 4};
    expect_idx(eq5, 5, 2, w5);
    float eq128[128]; /* partial_sort path (2*64 <= 128): heap select then sort_heap */
    for (int i = 0; i < 128; i++) eq128[i] = 0.5f;
    static const int32_t w128[2] = {0, 1};
    expect_idx(eq128, 128, 2, w128);
    static const int32_t w127[2] = {85, 84}; /* 127 < 2*64: introselect over all 127 */
    expect_idx(eq128, 127, 2, w127);
}
