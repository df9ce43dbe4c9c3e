/* test_farfact.c - far-back recall (src/harness/farfact.h, `recall longctx --task farfact`, docs/LONG_CONTEXT.md
 * "Far-back recall") on the templated world's tokenizer and benchmark file:
 *   cases    the same spec gives the same chat, another index another; the fact sits D tokens or a
 *            little more before its question and one filler exchange fewer would be under D; the
 *            value's tokens decode to it; the asked keyword is stated once; filler facts never
 *            reuse the target's keyword or value; share 0 leaves no other fact, share 1 no casual
 *            talk; refusals of a bad spec
 *   score    fired / retrieved / rank / early read from the fire records on the loop's geometry,
 *            and a fire whose candidates are not that geometry's is refused
 *   world    one 2,048-token case on the templated world through the CLI, every arm: the exact
 *            record of the measured run (RC_bge fired at the question, the fact's block came
 *            back, the reply's ids copy the value; SP has no gate and does not know; FULL cannot
 *            hold the chat and is recorded as not run), so a harness that skipped the loop, the
 *            gate or the retrieval fails */
#include "blob.h"
#include "farfact.h"
#include "fixture.h"
#include "json.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH FIXTURE_TEMPLATED "/eval_bench.json"

typedef struct {
    rc_blob *b;
    rc_bpe *bpe;
    rc_bench *bench;
    int eos;
} env;

static void env_open(env *e) {
    const char *path = fixture_templated_blob("f32");
    cr_assert(path);
    e->b = fixture_open(path);
    recall_err err = {0};
    e->bpe = fixture_blob_bpe(e->b);
    cr_assert_eq(rc_bench_load(BENCH, &e->bench, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_blob_get_int(e->b, "tok.eos", 0, 1 << 30, &e->eos, &err), RECALL_OK, "%s", err.msg);
}

static void env_close(env *e) {
    rc_bench_free(e->bench);
    rc_bpe_free(e->bpe);
    rc_blob_close(e->b);
}

static void build(const env *e, int dist, uint64_t seed, int index, double share, rc_ff_case *c) {
    recall_err err = {0};
    const rc_ff_spec sp = {dist, seed, index, share};
    cr_assert_eq(rc_ff_build(e->bpe, e->eos, e->bench, &sp, c, &err), RECALL_OK, "%s", err.msg);
}

static char *decode(const env *e, const int32_t *ids, int n) {
    char *t = NULL;
    size_t l;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_decode(e->bpe, ids, (size_t)n, 0, &t, &l, &err), RECALL_OK, "%s", err.msg);
    return t;
}

static int count(const char *hay, const char *needle) {
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) k++;
    return k;
}

/* ---- cases ------------------------------------------------------------------------------------ */

Test(farfact, cases_are_deterministic_and_hold_their_fact_at_the_distance, .timeout = 120) {
    env e;
    env_open(&e);
    rc_bench_view v;
    rc_bench_view_of(e.bench, &v);
    const int dists[3] = {0, 300, 2048};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 4; i++) {
            rc_ff_case c, again;
            build(&e, dists[d], 7, i, RC_FF_FACT_SHARE, &c);
            build(&e, dists[d], 7, i, RC_FF_FACT_SHARE, &again);
            cr_assert_eq(c.n_ids, again.n_ids);
            cr_assert(!memcmp(c.ids, again.ids, (size_t)c.n_ids * sizeof *c.ids));
            cr_assert_eq(c.ids_xxh64, again.ids_xxh64);
            rc_ff_case_free(&again);
            build(&e, dists[d], 7, i + 100, RC_FF_FACT_SHARE, &again);
            cr_expect(again.ids_xxh64 != c.ids_xxh64 || dists[d] == 0, "index %d and %d give one chat", i, i + 100);
            rc_ff_case_free(&again);
            /* the distance: at least D, and without the last filler exchange it would be under D
             * (every exchange after the first starts with the EOS id; so does the question) */
            cr_assert_eq(c.distance, c.q_first - (c.val_last + 1));
            cr_expect_geq(c.distance, dists[d]);
            cr_assert_eq(c.ids[c.q_first], e.eos);
            int last = c.q_first - 1;
            while (last > c.fact_last && c.ids[last] != e.eos) last--;
            if (last > c.fact_last) cr_expect_lt(last - (c.val_last + 1), dists[d], "one exchange fewer still reaches D");
            cr_expect(c.lead >= 0 && c.lead <= RC_FF_MAX_LEAD);
            cr_expect_eq(c.fact_first == 0, c.lead == 0);
            cr_expect_eq(c.n_exchanges, c.n_fill_facts + c.n_fill_casual + 1);
            /* the value's tokens decode to the value (a leading blank merged into its first piece) */
            char *val = decode(&e, c.ids + c.val_first, c.val_last - c.val_first + 1);
            const char *vp = val[0] == ' ' ? val + 1 : val;
            cr_expect_str_eq(vp, c.val, "value tokens decode to \"%s\"", val);
            free(val);
            /* the asked keyword is stated once, in the target's exchange, and asked at the end */
            char *chat = decode(&e, c.ids, c.q_first), *fact = decode(&e, c.ids + c.fact_first, c.fact_last - c.fact_first + 1);
            char *q = decode(&e, c.ids + c.q_first, c.n_ids - c.q_first), stated[160];
            snprintf(stated, sizeof stated, " the %s is ", c.kw);
            cr_expect_eq(count(chat, stated), 1, "\"%s\" is stated %d times", stated, count(chat, stated));
            cr_expect(strstr(fact, stated) && strstr(fact, c.val), "%s", fact);
            cr_expect(strstr(q, c.question), "%s", q);
            snprintf(stated, sizeof stated, " is %s.", c.val);
            cr_expect_eq(count(chat, stated), 1, "the value is stated %d times", count(chat, stated));
            cr_expect_eq(count(chat, "Important to note"), c.n_fill_facts + 1);
            free(chat), free(fact), free(q);
            rc_ff_case_free(&c);
        }
    env_close(&e);
}

Test(farfact, the_fact_share_sets_the_filler, .timeout = 120) {
    env e;
    env_open(&e);
    rc_ff_case none, all, mix;
    build(&e, 1500, 3, 0, 0.0, &none);
    build(&e, 1500, 3, 0, 1.0, &all);
    build(&e, 1500, 3, 0, RC_FF_FACT_SHARE, &mix);
    cr_expect_eq(none.n_fill_facts, 0);
    cr_expect_gt(none.n_fill_casual, 10);
    cr_expect_eq(all.n_fill_casual, 0);
    cr_expect_gt(all.n_fill_facts, 20);
    cr_expect(mix.n_fill_facts > 3 && mix.n_fill_casual > 3 * mix.n_fill_facts / 2, "%d facts, %d casual",
              mix.n_fill_facts, mix.n_fill_casual);
    /* the target and the lead are drawn before the filler: the same at any share */
    cr_expect_eq(none.target, all.target);
    cr_expect_eq(none.target, mix.target);
    cr_expect_eq(none.lead, mix.lead);
    rc_ff_case_free(&none);
    rc_ff_case_free(&all);
    rc_ff_case_free(&mix);
    recall_err err = {0};
    rc_ff_case c;
    const rc_ff_spec neg = {-1, 0, 0, 0.25}, share = {10, 0, 0, 1.5};
    cr_expect_eq(rc_ff_build(e.bpe, e.eos, e.bench, &neg, &c, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "negative"), "%s", err.msg);
    err = (recall_err){0};
    cr_expect_eq(rc_ff_build(e.bpe, e.eos, e.bench, &share, &c, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "outside [0, 1]"), "%s", err.msg);
    env_close(&e);
}

/* ---- score ------------------------------------------------------------------------------------ */

/* A fire at c0 with candidates' scores, choosing top[0..ntop). */
static rc_fire_rec fire_at(int c0, int ncand, float *bridge, int t0, int t1) {
    rc_fire_rec f;
    memset(&f, 0, sizeof f);
    f.c0 = c0;
    f.ncand = ncand;
    f.bridge = bridge;
    f.ntop = 2;
    f.top[0] = t0;
    f.top[1] = t1;
    f.injected = 1;
    return f;
}

Test(farfact, score_reads_the_fires_on_the_geometry) {
    rc_recall_opts o;
    memset(&o, 0, sizeof o);
    o.window = 96, o.block = 32, o.buf_min = 16;
    rc_ff_case c;
    memset(&c, 0, sizeof c);
    c.val = "R17";
    c.val_first = 70, c.val_last = 71; /* in block 2 ([64, 96)) */
    c.q_first = 400;
    float b10[10] = {0, 1, 5, 2, 0, 0, 9, 0, 0, 0};
    rc_fire_rec f[3];
    /* an early fire (c0 <= q_first), then one at the question: c0 = 416 -> 320 archived = 10
     * blocks, no buffer; it chose blocks 2 and 6 */
    float b7[7] = {0};
    f[0] = fire_at(320, 7, b7, 0, 1); /* 224 archived: 7 blocks */
    f[1] = fire_at(416, 10, b10, 2, 6);
    rc_turn t;
    memset(&t, 0, sizeof t);
    t.fires = f;
    t.n_fires = 2;
    rc_ff_result r;
    recall_err err = {0};
    cr_assert_eq(rc_ff_score(&c, &t, "<think>x</think> R17\n", &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(r.early, 1);
    cr_expect_eq(r.fired, 1);
    cr_expect_eq(r.retrieved, 1);
    cr_expect_eq(r.rank, 2, "block 2 scores 5, below block 6's 9: rank %d", r.rank);
    cr_expect_eq(r.ncand, 10);
    cr_expect_eq(r.first_c0, 416);
    cr_expect_eq(r.exact, 1);
    cr_expect_str_eq(r.answer, "R17");
    /* the value split across blocks 2 and 3: both must be chosen */
    c.val_first = 94, c.val_last = 97;
    f[1] = fire_at(416, 10, b10, 2, 6);
    cr_assert_eq(rc_ff_score(&c, &t, "I don't know.", &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(r.retrieved, 0);
    cr_expect_eq(r.exact, 0);
    f[1] = fire_at(416, 10, b10, 2, 3);
    cr_assert_eq(rc_ff_score(&c, &t, "", &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(r.retrieved, 1);
    /* not injected (a floor held it back): fired, not retrieved */
    f[1].injected = 0;
    cr_assert_eq(rc_ff_score(&c, &t, "", &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_expect(r.fired && !r.injected && !r.retrieved);
    /* c0 = 432: 336 archived = 10 blocks + a buffer of 16 (a candidate): 11 expected, 10 refused */
    f[1] = fire_at(432, 10, b10, 2, 6);
    cr_expect_eq(rc_ff_score(&c, &t, "", &o, &r, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "give 11"), "%s", err.msg);
}

/* ---- the templated world, through the CLI --------------------------------------------------------- */

static const json_value *get(const json_value *o, const char *k, json_type t) {
    const json_value *v = json_get_type(o, k, t);
    cr_assert(v, "field %s (%s) missing", k, json_type_name(t));
    return v;
}

static long num(const json_value *o, const char *k) { return (long)get(o, k, JSON_NUM)->i; }
static int flag(const json_value *o, const char *k) { return (int)get(o, k, JSON_BOOL)->num; }

/* Runs one far-fact case (distance 2048, seed 0, index 0, share SHARE) on ARMS with the loop
 * options MORE; the records. */
static json_doc *run_case(const char *share, const char *arms, const char *more, const char *json) {
    const char *path = fixture_templated_blob("f32");
    cr_assert(path);
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd,
             "./recall longctx %s --task farfact --bench " BENCH " --len 2048 --cases 1 --seed 0 --fact-share %s "
             "--arms %s %s --threads 1 --json %s 2>&1",
             path, share, arms, more, json);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    cr_expect(strstr(out, "2048      RC_bge"), "the table names the distance and the arm: %s", out);
    free(out);
    return fixture_json(json);
}

/* The measured run of case 0 at 2,048 tokens, share 0 (50 casual exchanges between the fact "the
 * hotel key is Y89." and its question: 2,127 tokens of chat, 62 blocks archived at the question):
 * RC_bge's gate fires at the question's first check after it (c0 2,128; 5 fires earlier, in the
 * casual talk), the bridge head ranks the fact's block first of 64 candidates, and the reply
 * restates the fact and copies the value. Pinned: the reply ids and every count (a retrained world
 * changes them: re-measure with the command of run_case and re-pin). */
#define W_PROMPT_XXH64 "cf4c766e4b960bda"
#define W_PROMPT_TOKENS 2127
#define W_BLOCKS 62
#define W_RANK 1
#define W_EARLY 5
#define W_FIRE_C0 2128
#define W_ENCODES 67
static const int32_t W_REPLY[] = {
    1021, 399, 412, 415, 302, 259, 331, 290, 305, 413, 372, 340, 406, 409, 13, 297, 414, 405, 302, 273, 303,
    400, 273, 404, 11, 333, 393, 333, 25, 258, 743, 633, 313, 220, 56, 23, 24, 13, 1022, 220, 56, 23, 24};
#define W_VAL "Y89"

Test(farfact, trained_world_recalls_a_fact_2048_tokens_back, .timeout = 300) {
    char json[128];
    snprintf(json, sizeof json, "build/tff_%d.json", (int)getpid());
    json_doc *doc = run_case("0", "FULL,SP,RC_bge", "", json);
    const json_value *root = json_root(doc), *recs = get(root, "records", JSON_ARR);
    cr_assert_eq(recs->len, 3);
    cr_expect_str_eq(get(root, "task", JSON_STR)->str, "farfact");
    cr_expect_eq(num(root, "window"), 96);
    cr_expect_eq(num(root, "block"), 32);
    const json_value *full = &recs->items[0], *sp = &recs->items[1], *rc = &recs->items[2];
    const char *arms[3] = {"FULL", "SP", "RC_bge"};
    for (int a = 0; a < 3; a++) {
        const json_value *r = &recs->items[a];
        cr_expect_str_eq(get(r, "arm", JSON_STR)->str, arms[a]);
        cr_expect_str_eq(get(r, "mode", JSON_STR)->str, "faithful");
        cr_expect_str_eq(get(r, "edge", JSON_STR)->str, "off");
        cr_expect_str_eq(get(r, "numerics", JSON_STR)->str, "exact");
        cr_expect_eq(num(r, "distance"), 2048);
        cr_expect_str_eq(get(r, "prompt_xxh64", JSON_STR)->str, W_PROMPT_XXH64);
        cr_expect_eq(num(r, "prompt_tokens"), W_PROMPT_TOKENS);
        cr_expect_eq(num(r, "archived_blocks"), W_BLOCKS);
        cr_expect_str_eq(get(r, "val", JSON_STR)->str, W_VAL);
        cr_expect_geq(num(r, "distance_actual"), 2048);
        cr_expect_eq(num(r, "filler_facts"), 0);
    }
    /* FULL: BOS + the chat + the reply cap + 1 positions do not fit the 2,048 trained ones */
    cr_expect_eq(flag(full, "ran"), 0);
    cr_expect(strstr(get(full, "not_run", JSON_STR)->str, "its context holds 2048"), "%s",
              get(full, "not_run", JSON_STR)->str);
    /* SP: the window slid over the whole chat (no gate on this arm) and the gist holds no value */
    cr_expect_eq(flag(sp, "ran"), 1);
    cr_expect_eq(num(sp, "gates"), 0);
    cr_expect_eq(num(sp, "fires"), 0);
    cr_expect_eq(flag(sp, "fired"), 0);
    cr_expect_str_eq(get(sp, "answer", JSON_STR)->str, "I don't know.");
    /* RC_bge: the gate ran at every rebuild with an archive, fired at the question, the bridge
     * scored every archived block and the fact's came back; the reply copies the value */
    cr_expect_eq(flag(rc, "ran"), 1);
    cr_expect_gt(num(rc, "gates"), W_BLOCKS);
    cr_expect_eq(flag(rc, "fired"), 1);
    cr_expect_eq(flag(rc, "injected"), 1);
    cr_expect_eq(flag(rc, "retrieved"), 1);
    cr_expect_eq(num(rc, "rank"), W_RANK);
    cr_expect_geq(num(rc, "candidates"), W_BLOCKS);
    cr_expect_eq(num(rc, "first_fire_c0"), W_FIRE_C0);
    cr_expect_gt(num(rc, "first_fire_c0"), num(rc, "question_token"));
    cr_expect_eq(num(rc, "early_fires"), W_EARLY);
    cr_expect_eq(num(rc, "bert_encodes"), W_ENCODES);
    cr_expect_geq(num(rc, "bert_encodes"), W_BLOCKS, "every archived block encoded once");
    cr_expect_eq(flag(rc, "exact"), 1);
    cr_expect_str_eq(get(rc, "answer", JSON_STR)->str, W_VAL);
    const json_value *ids = get(rc, "reply_ids", JSON_ARR);
    const size_t n = sizeof W_REPLY / sizeof W_REPLY[0];
    cr_assert_eq(ids->len, n, "reply of %zu ids, the measured run's %zu", ids->len, n);
    for (size_t i = 0; i < n; i++) cr_expect_eq(ids->items[i].i, W_REPLY[i], "reply id %zu", i);
    cr_expect_eq(num(rc, "n_reply"), (long)n);
    json_free(doc);
    remove(json);
}

/* The loop's firing rules reach far back as they reach eval and chat: the same case with
 * --hysteresis above any run of scores never injects (the run above fires at the question and
 * copies the value), and the file names every rule that ran (--threshold, --fire-once, --floor). */
Test(farfact, firing_rules_are_options_and_named, .timeout = 300) {
    char json[128];
    snprintf(json, sizeof json, "build/tffh_%d.json", (int)getpid());
    json_doc *doc = run_case("0", "RC_bge", "--hysteresis 1000000 --fire-once --floor 0.25 --threshold 1.5", json);
    const json_value *root = json_root(doc), *recs = get(root, "records", JSON_ARR);
    cr_expect_eq(num(root, "hysteresis"), 1000000);
    cr_expect_eq(flag(root, "fire_once"), 1);
    cr_expect_eq(get(root, "floor", JSON_NUM)->num, 0.25);
    cr_expect_eq(get(root, "threshold", JSON_NUM)->num, 1.5);
    cr_assert_eq(recs->len, 1);
    const json_value *rc = &recs->items[0];
    cr_expect_str_eq(get(rc, "prompt_xxh64", JSON_STR)->str, W_PROMPT_XXH64);
    cr_expect_eq(flag(rc, "ran"), 1);
    cr_expect_gt(num(rc, "gates"), W_BLOCKS);
    cr_expect_eq(num(rc, "fires"), 0);
    cr_expect_eq(flag(rc, "injected"), 0);
    cr_expect_eq(flag(rc, "exact"), 0);
    cr_expect_str_eq(get(rc, "answer", JSON_STR)->str, "I don't know.");
    json_free(doc);
    remove(json);
}
