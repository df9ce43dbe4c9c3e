/* test_compare.c - `recall compare A B` (src/harness/compare.c, src/cli/cli_compare.c): the four worldA
 * loop goldens against the engine's own replay (exit 0); golden copies modified at test time under
 * build/: a reply token changed in turn 3 (exit 1, naming turn 3 and the position), a fire whose
 * chosen candidate and runner-up swap with their bridge scores 1 ulp apart (exit 3; 100 ulps:
 * exit 1), a gate decision flipped 1 ulp below the threshold (exit 3; at -0.5: exit 1);
 * `forward --dump` against qwen2_fp32.npz (exit 0) and against a copy with one logit moved past
 * the tolerance (exit 1, naming it); bad inputs (exit 2, one line naming the file). */
#include "compare.h"
#include "fixture.h"
#include "json.h"
#include "npy.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WA "tests/golden/worldA/"

/* ---- helpers ---------------------------------------------------------------------------- */

/* `recall replay` of benchmark problem 0 with opts on the worldA blob of `weights`, its trace
 * written to path (exit status 0 asserted). */
static void replay(const char *weights, const char *opts, const char *path) {
    const char *blob = fixture_worldA_blob(weights);
    cr_assert(blob);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 %s --trace %s 2>/dev/null", blob,
             opts, path);
    cr_assert_eq(fixture_sh(cmd, NULL), 0, "%s", cmd);
}

/* The "ids" array of a golden .npz as the --ids list of `recall forward`: "[id,id,...]". */
static void golden_id_list(const char *npz, char *list, size_t cap) {
    size_t n;
    int *ids = fixture_npz_i32(npz, "ids", &n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(list + k, cap - k, "%s%d", i ? "," : "[", ids[i]);
    snprintf(list + k, cap - k, "]");
    free(ids);
}

/* The engine's replay of problem 0, run once for every test that reads it (fixture.h). */
static const char *engine_trace(const char *mode, const char *weights) {
    return fixture_worldA_replay(!strcmp(weights, "fp32") ? "f32" : weights, mode, NULL);
}

/* `forward --dump` of the golden ids on the f32 blob, to `path` (one per test: two tests must not
 * write the same path at once). */
static const char *engine_forward(const char *path) {
    char list[1024];
    golden_id_list(WA "qwen2_fp32.npz", list, sizeof list);
    char cmd[1400];
    const char *blob = fixture_worldA_blob("f32"); /* converted on demand: variant runs start without it */
    cr_assert(blob);
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --dump %s >/dev/null", blob, list, path);
    cr_assert_eq(fixture_sh(cmd, NULL), 0, "%s", cmd);
    return path;
}

/* Runs ./recall compare with stderr folded into *out; returns the exit status. */
static int compare(const char *a, const char *b, const char *extra, char **out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./recall compare %s %s %s 2>&1", a, b, extra ? extra : "");
    int rc = fixture_sh(cmd, out);
    cr_log_info("%s -> %d\n%s", cmd, rc, out ? *out : "");
    return rc;
}

static void jstr(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Writes a parsed document back (numbers that were not integers with 17 digits: exact). */
static void jwrite(FILE *f, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: fputs("null", f); break;
    case JSON_BOOL: fputs(v->num != 0 ? "true" : "false", f); break;
    case JSON_NUM:
        if (v->is_int) fprintf(f, "%lld", (long long)v->i);
        else fprintf(f, "%.17g", v->num);
        break;
    case JSON_STR: jstr(f, v->str, v->len); break;
    case JSON_ARR:
        fputc('[', f);
        for (size_t i = 0; i < v->len; i++) {
            if (i) fputs(", ", f);
            jwrite(f, &v->items[i]);
        }
        fputc(']', f);
        break;
    case JSON_OBJ:
        fputc('{', f);
        for (size_t i = 0; i < v->len; i++) {
            if (i) fputs(", ", f);
            jstr(f, v->keys[i], v->key_lens[i]);
            fputs(": ", f);
            jwrite(f, &v->items[i]);
        }
        fputc('}', f);
        break;
    }
}

static void save_json(const json_doc *doc, const char *path) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    jwrite(f, json_root(doc));
    fputc('\n', f);
    cr_assert_eq(fclose(f), 0);
}

static json_value *mut(const json_value *v) { return (json_value *)v; }

static void set_int(const json_value *v, int64_t x) {
    cr_assert_eq(v->type, JSON_NUM);
    mut(v)->i = x;
    mut(v)->num = (double)x;
    mut(v)->is_int = 1;
}

static void set_float(const json_value *v, float x) {
    cr_assert_eq(v->type, JSON_NUM);
    mut(v)->num = (double)x;
    mut(v)->is_int = 0;
}

static const json_value *turn(const json_doc *doc, int i) {
    const json_value *t = json_get_type(json_root(doc), "turns", JSON_ARR);
    cr_assert(t && (size_t)i < t->len);
    return &t->items[i];
}

/* out holds every needle of the NULL-terminated list; a failure shows out. */
static void expect_all_in(const char *out, ...) {
    va_list ap;
    va_start(ap, out);
    for (const char *needle = va_arg(ap, const char *); needle; needle = va_arg(ap, const char *))
        cr_expect(strstr(out, needle), "%s", out);
    va_end(ap);
}

/* ---- the goldens against the engine ----------------------------------------------------- */

static void golden_agrees(const char *mode, const char *weights) {
    char golden[128];
    snprintf(golden, sizeof golden, WA "loop_A_seed0_%s_%s.json", mode, weights);
    const char *mine = engine_trace(mode, weights);
    char *out, rep[128], opt[160];
    snprintf(rep, sizeof rep, "build/cmp_agree_%s_%s.report.json", mode, weights);
    snprintf(opt, sizeof opt, "--json %s", rep);
    cr_assert_eq(compare(mine, golden, opt, &out), 0, "%s", out);
    expect_all_in(out, "AGREE", "5 turns, 550 reply tokens", NULL);
    free(out);
    json_doc *doc = fixture_json(rep);
    cr_expect_str_eq(json_get(json_root(doc), "verdict")->str, "agree");
    cr_expect_eq(json_get(json_root(doc), "exit")->i, 0);
    cr_expect_eq(json_get(json_root(doc), "divergence")->type, JSON_NULL);
    cr_expect_leq(json_get(json_root(doc), "max_gate_abs")->num, 1e-4);
    json_free(doc);
}

Test(compare, golden_faithful_fp32_agrees_with_replay) { golden_agrees("faithful", "fp32"); }
Test(compare, golden_clean_fp32_agrees_with_replay) { golden_agrees("clean", "fp32"); }
Test(compare, golden_faithful_nf4_agrees_with_replay) { golden_agrees("faithful", "nf4"); }
Test(compare, golden_clean_nf4_agrees_with_replay) { golden_agrees("clean", "nf4"); }

/* A q8 replay and a q8 forward dump against the exact goldens: the report names both profiles
 * (text and JSON); the comparison itself runs as usual. */
Test(compare, q8_outputs_name_the_profiles) {
    replay("nf4", "--numerics q8", "build/cmp_replay_q8.json");
    char *out;
    compare("build/cmp_replay_q8.json", WA "loop_A_seed0_faithful_nf4.json", "--json build/cmp_q8.report.json", &out);
    cr_expect(strstr(out, "NUMERICS: A ran the q8 profile, B exact"), "%s", out);
    free(out);
    json_doc *doc = fixture_json("build/cmp_q8.report.json");
    cr_expect_str_eq(json_get(json_root(doc), "numerics_a")->str, "q8");
    cr_expect_str_eq(json_get(json_root(doc), "numerics_b")->str, "exact");
    json_free(doc);
    /* the same trace on both sides: no NUMERICS line */
    compare("build/cmp_replay_q8.json", "build/cmp_replay_q8.json", NULL, &out);
    cr_expect(strstr(out, "AGREE") && !strstr(out, "NUMERICS"), "%s", out);
    free(out);
    /* a forward dump */
    const char *blob = fixture_worldA_blob("nf4");
    cr_assert(blob);
    char list[1024], cmd[1400];
    golden_id_list(WA "qwen2_nf4.npz", list, sizeof list);
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --numerics q8 --dump build/cmp_fwd_q8.npz", blob, list);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", cmd);
    cr_expect(strstr(out, "numerics q8 (layer matrices int8"), "%s", out);
    free(out);
    compare("build/cmp_fwd_q8.npz", WA "qwen2_nf4.npz", NULL, &out);
    expect_all_in(out, "NUMERICS: A ran the q8 profile, B exact", "only in A (not compared): numerics_q8", NULL);
    free(out);
}

Test(compare, reply_token_changed_in_turn_3_is_a_real_divergence) {
    const char *mine = engine_trace("faithful", "fp32");
    json_doc *doc = fixture_json(WA "loop_A_seed0_faithful_fp32.json");
    const json_value *t3 = turn(doc, 2), *reply = json_get(t3, "reply");
    cr_assert_eq(json_get(t3, "feed_len")->i, 1256);
    const int64_t orig5 = reply->items[5].i;
    set_int(&reply->items[5], (orig5 + 1) % 1024);
    save_json(doc, "build/cmp_reply_t3.json");
    char *out;
    cr_assert_eq(compare(mine, "build/cmp_reply_t3.json", "--json build/cmp_reply_t3.report.json", &out), 1, "%s", out);
    expect_all_in(out, "first divergence: turn 3, reply token 5 (history position 1261, chunk c0 1216)", "DIVERGE",
                  NULL);
    /* no logits recorded at 1261: the turn's smallest margin bounds it, thousands of ulps */
    cr_expect(strstr(out, "top-2 logits absent from this trace; no greedy_low_margin entry here, so the margin is >= 0.0126"),
              "%s", out);
    free(out);
    json_doc *rep = fixture_json("build/cmp_reply_t3.report.json");
    const json_value *d = json_get_type(json_root(rep), "divergence", JSON_OBJ);
    cr_assert(d);
    cr_expect_str_eq(json_get(d, "kind")->str, "reply token");
    cr_expect_eq(json_get(d, "turn")->i, 3);
    cr_expect_eq(json_get(d, "reply_index")->i, 5);
    cr_expect_eq(json_get(d, "position")->i, 1261);
    cr_expect_eq(json_get(d, "near_tie")->num, 0);
    cr_expect_eq(json_get(json_root(rep), "exit")->i, 1);
    json_free(rep);

    /* at a rebuild position (1280 = feed 1256 + 24) the rebuild's top-5 gives the top-2 logits */
    set_int(&reply->items[5], orig5);
    set_int(&reply->items[24], (reply->items[24].i + 1) % 1024);
    save_json(doc, "build/cmp_reply_t3b.json");
    cr_assert_eq(compare(mine, "build/cmp_reply_t3b.json", NULL, &out), 1, "%s", out);
    expect_all_in(out, "turn 3, reply token 24 (history position 1280", "top-2 logits", NULL);
    free(out);
    json_free(doc);
}

/* The golden faithful fp32 fire at c0 1152 (turns 2-5) has bridge scores 40.2 42.40 42.14 42.85
 * 41.4 and chooses [1, 3]. The copy gives candidate 2 a score `ulps` above candidate 1's and
 * chooses [2, 3] instead. */
static void swap_candidates(const char *path, int ulps) {
    json_doc *doc = fixture_json(WA "loop_A_seed0_faithful_fp32.json");
    for (int t = 1; t < 5; t++) {
        const json_value *fires = json_get(turn(doc, t), "fires");
        cr_assert_eq(fires->len, 1);
        const json_value *f = &fires->items[0], *br = json_get(f, "bridge"), *top = json_get(f, "top");
        cr_assert_eq(json_get(f, "c0")->i, 1152);
        cr_assert(top->items[0].i == 1 && top->items[1].i == 3);
        float b1 = (float)br->items[1].num, b2 = b1;
        for (int k = 0; k < ulps; k++) b2 = nextafterf(b2, INFINITY);
        cr_assert_eq(rc_ulp_gap(b1, b2), ulps);
        set_float(&br->items[2], b2);
        set_int(&top->items[0], 2);
    }
    save_json(doc, path);
    json_free(doc);
}

Test(compare, swapped_candidates_one_ulp_apart_are_a_near_tie) {
    const char *mine = engine_trace("faithful", "fp32");
    swap_candidates("build/cmp_swap1.json", 1);
    char *out;
    cr_assert_eq(compare(mine, "build/cmp_swap1.json", "--json build/cmp_swap1.report.json", &out), 3, "%s", out);
    cr_expect(strstr(out, "first divergence: turn 2, candidate set at c0 1152: candidate 1 (only A's choice) vs 2 (only B's)"),
              "%s", out);
    expect_all_in(out, ": 1 ulp", "NEAR-TIE", "consequences: 3 later records differ (through turn 5)", NULL);
    free(out);
    json_doc *rep = fixture_json("build/cmp_swap1.report.json");
    const json_value *d = json_get(json_root(rep), "divergence");
    cr_expect_eq(json_get(d, "near_tie")->num, 1);
    cr_expect_eq(json_get(json_get(d, "b"), "ulps")->i, 1);
    cr_expect_gt(json_get(json_get(d, "a"), "ulps")->i, 4);
    cr_expect_eq(json_get(json_root(rep), "exit")->i, 3);
    json_free(rep);
    /* the same swap with the scores 100 ulps apart is a real divergence */
    swap_candidates("build/cmp_swap100.json", 100);
    cr_assert_eq(compare(mine, "build/cmp_swap100.json", NULL, &out), 1, "%s", out);
    cr_expect(strstr(out, "DIVERGE"), "%s", out);
    free(out);
}

/* The golden gate check at c0 1152 of turn 2 (score 0.129, fired) copied as not fired with the
 * score `score`: 1 ulp below the threshold 0 is a near-tie, -0.5 a real divergence. */
static int flipped_gate(float score, char **out) {
    json_doc *doc = fixture_json(WA "loop_A_seed0_faithful_fp32.json");
    const json_value *gates = json_get(turn(doc, 1), "gates"), *g = NULL;
    for (size_t i = 0; i < gates->len; i++)
        if (gates->items[i].items[0].i == 1152) g = &gates->items[i];
    cr_assert(g && g->items[2].num != 0);
    set_float(&g->items[1], score);
    mut(&g->items[2])->num = 0;
    save_json(doc, "build/cmp_gate.json");
    json_free(doc);
    return compare(engine_trace("faithful", "fp32"), "build/cmp_gate.json", NULL, out);
}

Test(compare, flipped_gate_decision_near_threshold_is_a_near_tie) {
    char *out;
    cr_assert_eq(flipped_gate(-1e-45f, &out), 3, "%s", out);
    expect_all_in(out, "first divergence: turn 2, gate decision at c0 1152", "A: fired, score 0.129",
                  "B: did not fire, score -1.40129846e-45 vs threshold 0: 1 ulp", NULL);
    free(out);
    cr_assert_eq(flipped_gate(-0.5f, &out), 1, "%s", out);
    expect_all_in(out, "gate decision at c0 1152", "DIVERGE", NULL);
    free(out);
}

/* ---- npz dumps -------------------------------------------------------------------------- */

Test(compare, forward_dump_agrees_with_golden_npz) {
    char *out;
    cr_assert_eq(compare(engine_forward("build/cmp_forward_a.npz"), WA "qwen2_fp32.npz", NULL, &out), 0, "%s", out);
    expect_all_in(out, "compare: forward dump", "  logits         [37,1088]", "tol 1e-04 rel  PASS",
                  "only in B (not compared): greedy, greedy_margin, embeds_sp", "AGREE: 4 arrays", NULL);
    free(out);
}

/* A copy of qwen2_fp32.npz with logits[5][100] moved by 2e-4 x max |logits| (twice the tolerance). */
static void moved_logit_copy(const char *path) {
    recall_err err = {0};
    rc_npz *z;
    rc_npz_writer *w;
    cr_assert_eq(rc_npz_open(WA "qwen2_fp32.npz", &z, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_writer_new(&w, &err), RECALL_OK);
    for (size_t i = 0; i < rc_npz_count(z); i++) {
        char key[64];
        cr_assert(rc_npz_key(z, i, key, sizeof key));
        rc_npy a;
        cr_assert_eq(rc_npz_get(z, key, &a, &err), RECALL_OK, "%s", err.msg);
        void *data = malloc(a.nbytes ? a.nbytes : 1);
        memcpy(data, a.data, a.nbytes);
        if (!strcmp(key, "logits")) {
            cr_assert(a.dtype == RC_NPY_F32 && a.ndim == 2 && a.shape[1] == 1088);
            float *l = data, mx = 0;
            for (uint64_t k = 0; k < a.numel; k++) mx = fabsf(l[k]) > mx ? fabsf(l[k]) : mx;
            l[5 * 1088 + 100] += 2e-4f * mx;
        }
        cr_assert_eq(rc_npz_writer_add(w, key, a.dtype, a.ndim, a.shape, data, &err), RECALL_OK, "%s", err.msg);
        free(data);
        rc_npy_free(&a);
    }
    cr_assert_eq(rc_npz_writer_write(w, path, &err), RECALL_OK, "%s", err.msg);
    rc_npz_writer_free(w);
    rc_npz_close(z);
}

Test(compare, one_logit_past_tolerance_fails_naming_it) {
    moved_logit_copy("build/cmp_moved_logit.npz");
    char *out;
    cr_assert_eq(compare(engine_forward("build/cmp_forward_b.npz"), "build/cmp_moved_logit.npz", "--json build/cmp_moved.report.json", &out), 1, "%s",
                 out);
    expect_all_in(out, "worst [5,100]", "FAIL: 1 of 4 arrays beyond tolerance: logits\n", "hidden_last", NULL);
    free(out);
    json_doc *rep = fixture_json("build/cmp_moved.report.json");
    const json_value *arr = json_get(json_root(rep), "arrays");
    int seen = 0;
    for (size_t i = 0; i < arr->len; i++) {
        const json_value *a = &arr->items[i];
        if (strcmp(json_get(a, "name")->str, "logits")) continue;
        seen = 1;
        cr_expect_eq(json_get(a, "pass")->num, 0);
        cr_expect_eq(json_get(a, "worst")->items[0].i, 5);
        cr_expect_eq(json_get(a, "worst")->items[1].i, 100);
        double rel = json_get(a, "max_rel")->num;
        cr_expect(rel > 1.9e-4 && rel < 2.1e-4, "max_rel %g", rel);
    }
    cr_expect(seen);
    json_free(rep);
}

/* ---- bad input, usage, the library's pieces --------------------------------------------- */

static void expect_bad(const char *a, const char *b, const char *needle) {
    char *out;
    cr_expect_eq(compare(a, b, NULL, &out), 2, "%s", out);
    cr_expect(strstr(out, needle), "wanted '%s' in: %s", needle, out);
    cr_expect_eq(strchr(out, '\n'), strrchr(out, '\n'), "one line: %s", out);
    free(out);
}

Test(compare, bad_input_is_one_line_and_exit_2) {
    const char *fwd = engine_forward("build/cmp_forward_c.npz");
    expect_bad(fwd, WA "loop_A_seed0_clean_fp32.json", "is an .npz dump but " WA "loop_A_seed0_clean_fp32.json is a JSON trace");
    expect_bad(fwd, WA "bge.npz", "is a forward dump but " WA "bge.npz is an embed dump");
    cr_assert_eq(fixture_sh("head -c 3000 " WA "qwen2_fp32.npz > build/cmp_trunc.npz", NULL), 0);
    expect_bad(fwd, "build/cmp_trunc.npz", "build/cmp_trunc.npz");
    cr_assert_eq(fixture_sh("head -c 20000 " WA "loop_A_seed0_clean_fp32.json > build/cmp_trunc.json", NULL), 0);
    expect_bad(WA "loop_A_seed0_clean_fp32.json", "build/cmp_trunc.json", "build/cmp_trunc.json: JSON error at byte");
    expect_bad(WA "loop_A_seed0_clean_fp32.json", WA "loop_A_seed0_faithful_fp32.json", "mode=clean");
    expect_bad(fwd, "build/does_not_exist.npz", "build/does_not_exist.npz");
    /* a dump of 10 ids: logits [10,1088] against [37,1088] */
    char cmd10[512];
    snprintf(cmd10, sizeof cmd10, "./recall forward %s --ids '[1027,1025,382,284,379,25,268,995,466,313]' "
             "--dump build/cmp_fwd10.npz >/dev/null", fixture_worldA_blob("f32"));
    cr_assert_eq(fixture_sh(cmd10, NULL), 0, "%s", cmd10);
    expect_bad("build/cmp_fwd10.npz", WA "qwen2_fp32.npz", "has shape [10] in build/cmp_fwd10.npz but [37] in");
    /* another problem */
    json_doc *doc = fixture_json(WA "loop_A_seed0_clean_fp32.json");
    const json_value *st = json_get(json_root(doc), "steps");
    mut(json_get(&st->items[0], "u"))->len = 3;
    save_json(doc, "build/cmp_other_problem.json");
    json_free(doc);
    expect_bad(WA "loop_A_seed0_clean_fp32.json", "build/cmp_other_problem.json", "steps[0].u differs");
    char *out;
    cr_expect_eq(fixture_sh("./recall compare " WA "bge.npz 2>&1", &out), 2);
    cr_expect(strstr(out, "needs two files"), "%s", out);
    free(out);
}

Test(compare, help_documents_exit_codes) {
    char *out;
    cr_assert_eq(fixture_sh("./recall compare --help", &out), 0);
    expect_all_in(out, "0  everything agrees within tolerance", "1  a real divergence", "2  bad input or usage",
                  "3  the only divergence is a near-tie", "at most 4 ulps apart on one side", NULL);
    free(out);
}

Test(compare, ulp_gap_and_tolerance_table) {
    cr_expect_eq(rc_ulp_gap(1.0f, nextafterf(1.0f, 2.0f)), 1);
    cr_expect_eq(rc_ulp_gap(nextafterf(1.0f, 0.0f), 1.0f), 1);
    cr_expect_eq(rc_ulp_gap(0.0f, -0.0f), 0);
    cr_expect_eq(rc_ulp_gap(-1e-45f, 1e-45f), 2); /* across zero: -denorm_min, 0, +denorm_min */
    cr_expect_eq(rc_ulp_gap(-1.0f, 1.0f), 2 * (int64_t)0x3f800000);
    cr_expect_eq(rc_ulp_gap(42.4008408f, 42.4008408f), 0);
    cr_expect_eq(rc_ulp_gap(NAN, 1.0f), INT64_MAX);
    cr_expect_eq(rc_ulp_gap(INFINITY, 3.40282347e38f), 1);
    /* the tolerance table of docs/NUMERICS.md */
    cr_expect_eq(rc_cmp_tolerance("logits")->tol, 1e-4);
    cr_expect_eq(rc_cmp_tolerance("q_layers")->kind, RC_TOL_REL_MAX);
    cr_expect_eq(rc_cmp_tolerance("sp")->tol, 1e-5);
    cr_expect_eq(rc_cmp_tolerance("emb")->tol, 1e-5);
    cr_expect_eq(rc_cmp_tolerance("trace.gate")->kind, RC_TOL_ABS);
    cr_expect_null(rc_cmp_tolerance("ids"));
    /* library errors are values naming the file */
    rc_cmp_report r;
    recall_err err = {0};
    cr_expect_eq(rc_compare_files("build/nope_a.npz", WA "bge.npz", NULL, &r, &err), RECALL_E_IO);
    cr_expect(strstr(err.msg, "build/nope_a.npz"), "%s", err.msg);
}
