/* test_kv_cli.c - the f16 KV cache (`--kv f16`, recall_open_opts.kv, recall_loop_opts.kv) through
 * every output it touches, on worldA:
 *   - score: the JSON says "kv" and the stdout line names it; KV bytes halve; the NLLs differ from
 *     f32's; the decode path (--scoring-rows 1) and 2 threads give bitwise the prefill NLLs under
 *     f16 too; a bad value is refused;
 *   - forward prints "kv f16" and its dump carries kv_bits 16; compare says when the two sides'
 *     kv differ (and says nothing for two f32 dumps); info prints the bytes per position;
 *   - replay's trace says "kv" and compare against the f32 golden trace says the kv differs;
 *   - longctx's JSON says "kv";
 *   - the public API: recall_forward under RECALL_KV_F16 gives bitwise the decoder's f16 logits,
 *     unknown values are refused, the loop's memory estimate counts half the KV bytes;
 *   - the loop: an f16 turn on the fast schedule gives bitwise the reference schedule's records
 *     (rows reused from the cache, resumed, re-run alike), and its rebuild logits and gate scores
 *     (the faithful seal forward's q) differ from f32's. */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "qwen2.h"
#include "recall.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GOLDEN "tests/golden/worldA/loop_A_seed0_faithful_fp32.json"

static char *run_ok(const char *cmd) {
    char *out = NULL;
    int st = fixture_sh(cmd, &out);
    cr_assert_eq(st, 0, "%s -> %d\n%s", cmd, st, out);
    return out;
}

static char *slurp(const char *path) {
    char *t = NULL;
    size_t l = 0;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(path, &t, &l, &err), RECALL_OK, "%s", err.msg);
    return t;
}

/* The JSON's top-level string `key`, strdup'd (asserts it is there). */
static char *json_str_of(const char *path, const char *key) {
    char *t = slurp(path);
    json_doc *d = NULL;
    recall_err err = {0};
    cr_assert_eq(json_parse(t, strlen(t), path, &d, &err), RECALL_OK, "%s", err.msg);
    const json_value *v = json_get_type(json_root(d), key, JSON_STR);
    cr_assert(v, "%s: no string \"%s\"", path, key);
    char *s = strdup(v->str);
    json_free(d);
    free(t);
    return s;
}

static long kv_bytes_of(const char *path) {
    char *t = slurp(path);
    json_doc *d = NULL;
    recall_err err = {0};
    cr_assert_eq(json_parse(t, strlen(t), path, &d, &err), RECALL_OK, "%s", err.msg);
    const json_value *v = json_get_type(json_root(d), "kv_bytes", JSON_NUM);
    cr_assert(v);
    const long b = (long)v->num;
    json_free(d);
    free(t);
    return b;
}

static char *positions_of(const char *path) {
    char *t = slurp(path), *p = strstr(t, "\"positions\"");
    cr_assert(p, "%s", t);
    char *r = strdup(p);
    free(t);
    return r;
}

Test(kv_cli, score_forward_info_and_compare_name_the_kv, .timeout = 600) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char tok[64];
    snprintf(tok, sizeof tok, "build/kvc_ids_%d.txt", (int)getpid());
    FILE *f = fopen(tok, "w");
    cr_assert(f, "%s", tok);
    uint32_t s = 5;
    for (int i = 0; i < 300; i++) {
        s = s * 1664525u + 1013904223u;
        fprintf(f, "%u ", (s >> 8) % 1088u);
    }
    cr_assert_eq(fclose(f), 0);
    char cmd[1400], js[4][64];
    const char *variants[4] = {"", "--kv f16", "--kv f16 --scoring-rows 1", "--kv f16 --scoring-rows 1 --threads 2"};
    char *pos[4];
    for (int v = 0; v < 4; v++) {
        snprintf(js[v], sizeof js[v], "build/kvc_score_%d_%d.json", v, (int)getpid());
        snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s --chunk 300 --per-position --json %s %s 2>/dev/null",
                 blob, tok, js[v], variants[v]);
        char *out = run_ok(cmd);
        cr_assert(strstr(out, v ? ", kv f16\n" : ", kv f32\n"), "%s\n%s", cmd, out);
        free(out);
        char *kv = json_str_of(js[v], "kv");
        cr_assert_str_eq(kv, v ? "f16" : "f32", "%s", cmd);
        free(kv);
        pos[v] = positions_of(js[v]);
    }
    cr_assert_eq(kv_bytes_of(js[1]) * 2, kv_bytes_of(js[0]), "f16 holds half the KV bytes");
    /* the NLLs are printed with 17 digits: equal text is equal bits */
    cr_assert_str_neq(pos[1], pos[0], "--kv f16 changed no NLL");
    cr_assert_str_eq(pos[2], pos[1], "f16: the decode path differs from prefill");
    cr_assert_str_eq(pos[3], pos[1], "f16: 2 threads differ from 1");
    for (int v = 0; v < 4; v++) {
        free(pos[v]);
        remove(js[v]);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s --kv f8 2>&1", blob, tok);
    cr_assert_eq(fixture_sh(cmd, &out), 2, "%s", cmd);
    cr_assert(strstr(out, "--kv f8: expected f32 or f16"), "%s", out);
    free(out);
    remove(tok);

    /* forward: the line, the dump's kv_bits, and compare */
    char d16[64], d32[64];
    snprintf(d16, sizeof d16, "build/kvc_fwd16_%d.npz", (int)getpid());
    snprintf(d32, sizeof d32, "build/kvc_fwd32_%d.npz", (int)getpid());
    const char *ids = "[3,14,15,92,65,35,89,79,32,38,46,26,43,38,32,79,50,28,84,197,169,399,375,105,820,974,944,592]";
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --kv f16 --decode-from 20 --dump %s", blob, ids, d16);
    out = run_ok(cmd);
    cr_assert(strstr(out, "\nkv f16\n"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '%s' --dump %s", blob, ids, d32);
    out = run_ok(cmd);
    cr_assert(strstr(out, "\nkv f32\n"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall compare %s %s 2>&1", d16, d32);
    fixture_sh(cmd, &out); /* the logits differ (exit 1); the kv line says why */
    cr_assert(strstr(out, "kv differs: A f16, B f32: an f16 KV cache rounds K and V"), "%s", out);
    cr_assert(!strstr(out, "kv_bits"), "the marker is compared as an array: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall compare %s %s 2>&1", d32, d32);
    out = run_ok(cmd);
    cr_assert(!strstr(out, "kv differs") && !strstr(out, "kv: "), "two f32 dumps: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall compare %s %s 2>&1", d16, d16);
    out = run_ok(cmd);
    cr_assert(strstr(out, "kv: f16 on both sides"), "%s", out);
    free(out);
    remove(d16);
    remove(d32);
    /* info: worldA holds 24 layers x 2 KV heads x 16 dims: 6,144 bytes per position in f32 */
    snprintf(cmd, sizeof cmd, "./recall info %s --no-tensors --kv f16", blob);
    out = run_ok(cmd);
    cr_assert(strstr(out, "kv: f16, 3072 bytes per position (f32 6144, f16 3072)"), "%s", out);
    free(out);
}

Test(kv_cli, replay_trace_names_the_kv_and_compare_says_it_differs, .timeout = 900) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char trace[64], cmd[1024];
    snprintf(trace, sizeof trace, "build/kvc_trace_%d.json", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 --mode faithful --kv f16 --trace %s "
             "2>&1",
             blob, trace);
    char *out = run_ok(cmd);
    cr_assert(strstr(out, ", kv f16\n"), "%s", out);
    free(out);
    char *kv = json_str_of(trace, "kv");
    cr_assert_str_eq(kv, "f16");
    free(kv);
    snprintf(cmd, sizeof cmd, "./recall compare %s " GOLDEN " 2>&1", trace);
    fixture_sh(cmd, &out);
    cr_assert(strstr(out, "kv differs: A f16, B f32 (not recorded)"), "%s", out);
    free(out);
    remove(trace);
}

Test(kv_cli, longctx_json_names_the_kv) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char js[64], cmd[1024];
    for (int v = 0; v < 2; v++) {
        snprintf(js, sizeof js, "build/kvc_lctx_%d_%d.json", v, (int)getpid());
        snprintf(cmd, sizeof cmd, "./recall longctx %s --task needle --len 600 --no-run %s --json %s 2>&1", blob,
                 v ? "--kv f16" : "", js);
        free(run_ok(cmd));
        char *kv = json_str_of(js, "kv");
        cr_assert_str_eq(kv, v ? "f16" : "f32");
        free(kv);
        remove(js);
    }
}

/* "needs about N bytes" of a refused loop open */
static unsigned long long needed(const char *msg) {
    const char *p = strstr(msg, "needs about ");
    cr_assert(p, "%s", msg);
    return strtoull(p + strlen("needs about "), NULL, 10);
}

Test(kv_api, forward_and_loop_options) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_err err = {0};
    recall_open_opts o;
    recall_open_opts_init(&o);
    cr_assert_eq(o.kv, RECALL_KV_F32, "the default is exact");
    o.kv = (recall_kv)3;
    recall_model *m = (recall_model *)1;
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_E_ARG);
    cr_assert_null(m);
    cr_assert(strstr(err.msg, "kv storage 3 unknown"), "%s", err.msg);
    /* recall_forward under f16 = the decoder's f16 logits, bitwise; not the f32 ones */
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 37 + 11) % 1088);
    float lg[3][1088];
    for (int k = 0; k < 2; k++) {
        recall_open_opts_init(&o);
        o.kv = k ? RECALL_KV_F16 : RECALL_KV_F32;
        recall_err e = {0};
        cr_assert_eq(recall_open(path, &o, &m, &e), RECALL_OK, "%s", e.msg);
        cr_assert_eq(recall_forward(m, ids, 40, lg[k], 1088, &e), RECALL_OK, "%s", e.msg);
        recall_close(m);
    }
    rc_blob *b = fixture_open_worldA("f32");
    rc_qwen2 *q = NULL;
    cr_assert_eq(rc_qwen2_open(b, 40, &q, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_set_kv_dtype(q, RC_KV_DT_F16, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_fwd f = {.ids = ids, .n = 40, .logits_last = lg[2]};
    cr_assert_eq(rc_qwen2_forward(q, &f, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_close(q);
    rc_blob_close(b);
    cr_assert(!memcmp(lg[1], lg[2], sizeof lg[1]), "recall_forward under f16 differs from the decoder's f16 logits");
    cr_assert(memcmp(lg[0], lg[1], sizeof lg[0]), "RECALL_KV_F16 changed nothing");
    /* the loop: unknown kv refused; the memory estimate counts half the KV bytes under f16 */
    recall_open_opts_init(&o);
    o.max_memory = (1 << 20) + fixture_blob_counted(path);
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_OK, "%s", err.msg);
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    cr_assert_eq(lo.kv, RECALL_KV_F32);
    recall_loop *l = NULL;
    unsigned long long need[2];
    for (int k = 0; k < 2; k++) {
        lo.kv = k ? RECALL_KV_F16 : RECALL_KV_F32;
        recall_err e = {0};
        cr_assert_eq(recall_loop_open(m, &lo, &l, &e), RECALL_E_LIMIT, "%s", e.msg);
        need[k] = needed(e.msg);
    }
    /* worldA: 6,144 f32 KV bytes per position; the RC arm's context (1 + 8 SP + 2 x 128 + 512 + 64
     * = 841 positions) and the faithful seal context (128) */
    cr_assert_eq(need[0] - need[1], (841ull + 128ull) * 3072ull, "%llu vs %llu", need[0], need[1]);
    lo.kv = (recall_kv)2;
    recall_err e = {0};
    cr_assert_eq(recall_loop_open(m, &lo, &l, &e), RECALL_E_ARG);
    cr_assert(strstr(e.msg, "kv storage 2 unknown"), "%s", e.msg);
    recall_close(m);
}

/* One generated turn over a ~800-token feed (benchmark problem 0: facts, then the probe) with a
 * threshold that fires every check, so the gate scores seal features, rebuilds inject and the
 * cache is reused and re-run. */
static void loop_turn(rc_blob *b, const int32_t *feed, int n, int kv, int reference, rc_turn *t) {
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.threshold = -1e9f;
    o.turn_cap = 24;
    o.kv = kv;
    o.reference_schedule = reference;
    rc_recall *r = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_recall_reply(r, feed, n, NULL, NULL, t, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
}

Test(kv_loop, f16_fast_schedule_equals_reference_and_differs_from_f32, .timeout = 900) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_bench *bench = NULL;
    cr_assert_eq(rc_bench_load("tests/golden/recall_bench.json", &bench, &err), RECALL_OK, "%s", err.msg);
    rc_problem p;
    cr_assert_eq(rc_bench_problem(bench, 0, &p, &err), RECALL_OK, "%s", err.msg);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.arm = RC_ARM_SP; /* for the tokenizer */
    rc_recall *tk = NULL;
    cr_assert_eq(rc_recall_open(b, &o, &tk, &err), RECALL_OK, "%s", err.msg);
    int32_t *feed = malloc(4096 * sizeof *feed);
    int n = 0;
    for (int i = 0; i < p.n; i++) {
        const rc_step *st = &p.steps[i];
        const int forced = st->kind == RC_STEP_FACT || st->kind == RC_STEP_FILLER;
        if (forced && n >= 760) continue;
        if (!forced && st->kind != RC_STEP_PROBE) continue;
        int32_t *seg;
        size_t k;
        cr_assert_eq(rc_chat_segment(rc_recall_bpe(tk), rc_recall_eos(tk), n > 0, st->user,
                                     forced ? st->assistant : NULL, &seg, &k, &err), RECALL_OK, "%s", err.msg);
        cr_assert_lt(n + (int)k, 4096);
        memcpy(feed + n, seg, k * sizeof *seg);
        n += (int)k;
        free(seg);
        if (!forced) break;
    }
    rc_recall_close(tk);
    rc_turn fast, ref, exact;
    loop_turn(b, feed, n, RC_KV_DT_F16, 0, &fast);
    loop_turn(b, feed, n, RC_KV_DT_F16, 1, &ref);
    loop_turn(b, feed, n, RC_KV_DT_F32, 0, &exact);
    cr_assert_geq(fast.n_rebuilds, 2, "the turn needs rebuilds");
    cr_assert_geq(fast.n_gates, 2, "the turn needs gate checks");
    cr_assert_geq(fast.n_fires, 1, "the turn needs a fire");
    cr_assert_gt(fast.rows_reused, 0, "the fast schedule reused no row");
    cr_assert_eq(fast.n_reply, ref.n_reply);
    cr_assert(!memcmp(fast.reply, ref.reply, (size_t)fast.n_reply * sizeof *fast.reply), "replies differ");
    cr_assert_eq(fast.n_top5, ref.n_top5);
    cr_assert(!memcmp(fast.top5, ref.top5, (size_t)fast.n_top5 * sizeof *fast.top5), "rebuild top-5 differ");
    cr_assert_eq(fast.n_gates, ref.n_gates);
    for (int i = 0; i < fast.n_gates; i++)
        cr_assert(!memcmp(&fast.gates[i].score, &ref.gates[i].score, sizeof(float)), "gate %d", i);
    cr_assert(!memcmp(&fast.min_margin, &ref.min_margin, sizeof(float)));
    /* and the f16 cache is what ran: the rebuild logits are not the f32 ones */
    cr_assert_eq(fast.n_top5, exact.n_top5);
    int same = 1;
    for (int i = 0; i < fast.n_top5 && same; i++) same = !memcmp(fast.top5[i].logits, exact.top5[i].logits, sizeof fast.top5[i].logits);
    cr_assert(!same, "the f16 loop's rebuild logits equal the f32 loop's");
    /* ... and every gate score: each scores the q of an f16 forward, the decoder's or (right after
     * a block is sealed) the faithful seal forward's */
    cr_assert_eq(fast.n_gates, exact.n_gates);
    for (int i = 0; i < fast.n_gates; i++)
        cr_assert(memcmp(&fast.gates[i].score, &exact.gates[i].score, sizeof(float)),
                  "gate %d (c0 %d): the f16 loop's score equals the f32 loop's (a forward ran f32)", i, fast.gates[i].c0);
    rc_turn_free(&fast);
    rc_turn_free(&ref);
    rc_turn_free(&exact);
    free(feed);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
}
