/* test_edge.c - the window's edge (recall_loop.h rc_edge, docs/LOOP.md "The window's edge") on the
 * trained world (tests/golden/templated), clean mode:
 *   needle     longctx needle, 256 tokens, depth 0.9, seed 1 (tokens 187-207): the gate fires at
 *              c0 272 with the needle still in the window; as the reply is written the window
 *              slides off its start. Without the option the reply says "unknown"; with --edge
 *              inject the text around the window's start joins the injection (64 tokens at every
 *              rebuild from the fire on) and the value is copied. Fast = reference schedule.
 *   unrelated  held-out benchmark problem 0: the edge span never reaches the bar of what the fires
 *              injected, so every record is the option-off run's (only the span's BERT encodes
 *              are added)
 *   refused    faithful mode refuses the option (library, public API, CLI), and so does an
 *              unknown value; the same for --edge exchange and --span exchange (test_span.c)
 *   records    replay's trace names the option and each rebuild's edge span; a default trace has
 *              neither key; longctx and eval name it too */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "longctx.h"
#include "problems.h"
#include "recall.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T FIXTURE_TEMPLATED

/* The measured case (docs/LOOP.md, "The window's edge"). */
#define NEEDLE_LEN 256
#define NEEDLE_DEPTH 0.9
#define NEEDLE_SEED 1
#define NEEDLE_VALUE "154506"
#define NEEDLE_FIRE_C0 272
#define PREAMBLE "<think>The user asks for a value that was stated earlier in our chat. I look back for it and copy " \
                 "it exactly, character by character: the special magic number is "
static const char *const reply_off = PREAMBLE "unknown.</think>I don't know.";
static const char *const reply_edge = PREAMBLE NEEDLE_VALUE ".</think> " NEEDLE_VALUE;
/* each rebuild from the fire on: [c0, edge span tokens] */
static const int edge_rebuilds[][2] = {{272, 64}, {288, 64}, {304, 64}};

typedef struct {
    rc_blob *blob;
    rc_bpe *bpe;
    rc_lctx_haystack hay;
    rc_lctx_case c;
} needle_fx;

static void needle_open(needle_fx *fx) {
    const char *path = fixture_templated_blob("f32");
    cr_assert(path);
    fx->blob = fixture_open(path);
    recall_err err = {0};
    fx->bpe = fixture_blob_bpe(fx->blob);
    cr_assert_eq(rc_lctx_haystack_load(fx->bpe, "tests/golden/longctx/haystack.txt", &fx->hay, &err), RECALL_OK, "%s",
                 err.msg);
    cr_assert_eq(rc_lctx_build(fx->bpe, &fx->hay, RC_LCTX_NEEDLE, NEEDLE_LEN, NEEDLE_DEPTH, NEEDLE_SEED, &fx->c, &err),
                 RECALL_OK, "%s", err.msg);
    cr_assert_str_eq(fx->c.expected, NEEDLE_VALUE);
}

static void needle_close(needle_fx *fx) {
    rc_lctx_case_free(&fx->c);
    rc_lctx_haystack_free(&fx->hay);
    rc_bpe_free(fx->bpe);
    rc_blob_close(fx->blob);
}

static void clean_opts(const rc_blob *b, int edge, int reference, rc_recall_opts *o) {
    rc_recall_defaults(b, o);
    o->mode = RC_MODE_CLEAN;
    o->edge = edge;
    o->reference_schedule = reference;
    o->turn_cap = 64;
    o->exec.threads = 1;
}

static void run_needle(const needle_fx *fx, int edge, int reference, rc_turn *t) {
    rc_recall_opts o;
    clean_opts(fx->blob, edge, reference, &o);
    rc_recall *r;
    recall_err err = {0};
    cr_assert_eq(rc_recall_open(fx->blob, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_recall_reply(r, fx->c.ids, fx->c.n_ids, NULL, NULL, t, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
}

static char *reply_text(const needle_fx *fx, const rc_turn *t) {
    char *text;
    size_t len;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_decode(fx->bpe, t->reply, (size_t)t->n_reply, 0, &text, &len, &err), RECALL_OK);
    return text;
}

Test(edge, needle_at_the_window_edge_is_answered, .timeout = 300) {
    needle_fx fx;
    needle_open(&fx);
    rc_turn off, on, ref;
    run_needle(&fx, RC_EDGE_OFF, 0, &off);
    run_needle(&fx, RC_EDGE_INJECT, 0, &on);
    run_needle(&fx, RC_EDGE_INJECT, 1, &ref);
    char *t_off = reply_text(&fx, &off), *t_on = reply_text(&fx, &on);
    cr_expect_str_eq(t_off, reply_off);
    cr_expect_str_eq(t_on, reply_edge);
    /* the same fire on both: the needle was in the window when the gate fired */
    cr_assert_eq(off.n_fires, 1);
    cr_assert_eq(on.n_fires, 1);
    cr_expect_eq(on.fires[0].c0, NEEDLE_FIRE_C0);
    cr_expect_eq(off.fires[0].c0, NEEDLE_FIRE_C0);
    cr_expect_eq(on.fires[0].nrid, off.fires[0].nrid);
    /* the needle (prompt tokens 187-207) is in none of the injected blocks */
    cr_expect_eq(fx.c.ins_first[fx.c.key], 187);
    int n_edge = 0;
    for (int i = 0; i < on.n_rebuilds; i++) {
        const rc_rebuild_rec *rb = &on.rebuilds[i];
        cr_expect_eq(off.rebuilds[i].edge_len, 0, "option off: no edge span");
        if (rb->c0 < NEEDLE_FIRE_C0) {
            cr_expect_eq(rb->edge_len, 0, "rebuild at c0 %d: no injection yet, no edge span", rb->c0);
            continue;
        }
        cr_assert_lt(n_edge, 3, "more rebuilds after the fire than measured");
        cr_expect_eq(rb->c0, edge_rebuilds[n_edge][0]);
        cr_expect_eq(rb->edge_len, edge_rebuilds[n_edge][1], "rebuild at c0 %d", rb->c0);
        cr_expect_eq(rb->window_len, 96);
        cr_expect_eq(rb->inj_len, on.fires[0].nrid);
        n_edge++;
    }
    cr_expect_eq(n_edge, 3);
    /* the edge span is scored at every rebuild of the injection: one BERT encode more each */
    cr_expect_eq(on.bert_encodes, off.bert_encodes + n_edge);
    /* both schedules compute the same bits, edge spans included */
    fixture_expect_same_turn(&on, &ref, "edge fast vs reference", 0);
    free(t_off);
    free(t_on);
    rc_turn_free(&off);
    rc_turn_free(&on);
    rc_turn_free(&ref);
    needle_close(&fx);
}

Test(edge, unrelated_recent_text_stays_out, .timeout = 300) {
    rc_blob *b = fixture_open(fixture_templated_blob("f32"));
    rc_bench *bench;
    rc_problem p;
    recall_err err = {0};
    cr_assert_eq(rc_bench_load(T "/eval_bench.json", &bench, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bench_problem(bench, 0, &p, &err), RECALL_OK, "%s", err.msg);
    rc_problem_run run[2];
    for (int e = 0; e < 2; e++) {
        rc_recall_opts o;
        clean_opts(b, e ? RC_EDGE_INJECT : RC_EDGE_OFF, 0, &o);
        rc_recall *r;
        cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, &run[e], &err), RECALL_OK, "%s", err.msg);
        rc_recall_close(r);
    }
    fixture_expect_same_run(&run[1], &run[0], "edge inject vs off, problem 0");
    int fires = 0, scored = 0;
    for (int i = 0; i < run[1].n_turns; i++) {
        const rc_turn *t = &run[1].turns[i].turn;
        fires += t->n_fires;
        for (int k = 0; k < t->n_rebuilds; k++) cr_expect_eq(t->rebuilds[k].edge_len, 0);
        scored += t->bert_encodes - run[0].turns[i].turn.bert_encodes;
    }
    cr_expect_gt(fires, 0, "the problem's questions fire");
    cr_expect_gt(scored, 0, "the edge span was scored (and kept out)");
    for (int e = 0; e < 2; e++) rc_problem_run_free(&run[e]);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
}

/* The loop options faithful mode refuses (the reference has none of them): each set through the
 * library's options, the public API's and the command line, with the value that is unknown. */
static const struct {
    const char *flag, *value, *bad, *refused, *unknown;
    int edge, span, rerank, bad_num;
} clean_only[] = {
    {"--edge", "inject", "sideways", "edge inject needs clean mode", "--edge: edge 'sideways': expected off, inject "
     "or exchange", RC_EDGE_INJECT, RC_SPAN_BLOCK, 0, 7},
    {"--edge", "exchange", NULL, "edge exchange needs clean mode", NULL, RC_EDGE_EXCHANGE, RC_SPAN_BLOCK, 0, 0},
    {"--span", "exchange", "turn", "span exchange needs clean mode", "--span: span 'turn': expected block or exchange",
     RC_EDGE_OFF, RC_SPAN_EXCHANGE, 0, 5},
    {"--rerank", "words", "bm25", "rerank words needs clean mode", "--rerank: rerank 'bm25': expected off, words or single",
     RC_EDGE_OFF, RC_SPAN_BLOCK, RC_RERANK_WORDS, 3},
    {"--rerank", "single", NULL, "rerank single needs clean mode", NULL, RC_EDGE_OFF, RC_SPAN_BLOCK, RC_RERANK_SINGLE, 0},
};

Test(edge, faithful_mode_and_unknown_values_refused, .timeout = 120) {
    const char *path = fixture_templated_blob("f32");
    cr_assert(path);
    rc_blob *b = fixture_open(path);
    recall_model *m = NULL;
    recall_err err = {0};
    cr_assert_eq(recall_open(path, NULL, &m, &err), RECALL_OK, "%s", err.msg);
    const char *cmds[] = {"replay %s --bench " T "/eval_bench.json --problem 0 --trace build/nope.json",
                          "eval %s --bench " T "/eval_bench.json --problems 0", "chat %s",
                          "longctx %s --task needle --len 256"};
    for (size_t c = 0; c < sizeof clean_only / sizeof clean_only[0]; c++) {
        /* the library: faithful (the default mode) refuses it, clean mode an unknown value */
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        cr_expect(o.edge == RC_EDGE_OFF && o.span == RC_SPAN_BLOCK && o.rerank == RC_RERANK_OFF, "off by default");
        o.edge = clean_only[c].edge;
        o.span = clean_only[c].span;
        o.rerank = clean_only[c].rerank;
        rc_recall *r = NULL;
        memset(&err, 0, sizeof err); /* an error keeps its first message */
        cr_expect_eq(rc_recall_open(b, &o, &r, &err), RECALL_E_ARG);
        cr_expect(strstr(err.msg, clean_only[c].refused), "%s", err.msg);
        if (clean_only[c].bad_num) {
            o.mode = RC_MODE_CLEAN;
            *(clean_only[c].edge != RC_EDGE_OFF   ? &o.edge
              : clean_only[c].span != RC_SPAN_BLOCK ? &o.span
                                                    : &o.rerank) = clean_only[c].bad_num;
            char want[64];
            snprintf(want, sizeof want, "%s %d unknown", clean_only[c].flag + 2, clean_only[c].bad_num);
            memset(&err, 0, sizeof err);
            cr_expect_eq(rc_recall_open(b, &o, &r, &err), RECALL_E_ARG);
            cr_expect(strstr(err.msg, want), "%s (wanted '%s')", err.msg, want);
        }
        /* the public API */
        recall_loop_opts lo;
        recall_loop_opts_init(m, &lo);
        cr_expect(lo.edge == RECALL_EDGE_OFF && lo.span == RECALL_SPAN_BLOCK && lo.rerank == RECALL_RERANK_OFF,
                  "off by default");
        lo.edge = clean_only[c].edge;
        lo.span = clean_only[c].span;
        lo.rerank = clean_only[c].rerank;
        recall_loop *l = NULL;
        memset(&err, 0, sizeof err);
        cr_expect_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_ARG);
        cr_expect(strstr(err.msg, clean_only[c].refused), "%s", err.msg);
        lo.mode = RECALL_MODE_CLEAN;
        memset(&err, 0, sizeof err);
        cr_expect_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
        recall_loop_close(l);
        /* the CLI: a usage error before anything runs, in every command that takes the option */
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
            char fmt[256];
            snprintf(fmt, sizeof fmt, "./recall %s %s %s </dev/null 2>&1", cmds[i], clean_only[c].flag,
                     clean_only[c].value);
            free(fixture_cmd(2, clean_only[c].refused, fmt, path)); /* the engine's one message */
            if (!clean_only[c].bad) continue;
            snprintf(fmt, sizeof fmt, "./recall %s --mode clean %s %s </dev/null 2>&1", cmds[i], clean_only[c].flag,
                     clean_only[c].bad);
            free(fixture_cmd(2, clean_only[c].unknown, fmt, path));
        }
    }
    recall_close(m);
    rc_blob_close(b);
    free(fixture_cmd(2, "--edge is not an option of calibrate", "./recall calibrate %s --bench " T
                     "/eval_bench.json --mode clean --edge inject 2>&1", path));
}

/* What the outputs say of an option that is on: replay's trace, longctx's file and eval's options
 * name it (key: the trace's and longctx's key); a default trace has no such key. */
static void expect_outputs_name(const char *path, const char *flag, const char *value, const char *key,
                                const json_value *r_off) {
    char on[128], lc[128], ev[128];
    const int pid = (int)getpid();
    snprintf(on, sizeof on, "build/edge_%d_%s_on.json", pid, key);
    snprintf(lc, sizeof lc, "build/edge_%d_%s_lc.json", pid, key);
    snprintf(ev, sizeof ev, "build/edge_%d_%s_ev.json", pid, key);
    const char *cmds[][2] = {
        {"replay %s --bench " T "/eval_bench.json --problem 0 --trace %s", on},
        {"longctx %s --task needle --len 256 --depth 0.9 --seed 1 --max-new 64 --arms RC_bge --json %s", lc},
        {"eval %s --bench " T "/eval_bench.json --problems 0 --arms SP --json %s", ev},
    };
    for (int i = 0; i < 3; i++) {
        char fmt[512];
        snprintf(fmt, sizeof fmt, "./recall %s --mode clean %s %s 2>&1", cmds[i][0], flag, value);
        free(fixture_cmd(0, NULL, fmt, path, cmds[i][1]));
        json_doc *d = fixture_json(cmds[i][1]);
        const json_value *o = i < 2 ? json_root(d) : json_get_type(json_root(d), "options", JSON_OBJ);
        const json_value *v = o ? json_get_type(o, i < 2 ? key : flag, JSON_STR) : NULL;
        cr_assert(v, "%s names %s", cmds[i][0], flag);
        cr_expect_str_eq(v->str, value);
        json_free(d);
        remove(cmds[i][1]);
    }
    cr_expect_null(json_get(r_off, key), "a default trace keeps its schema");
}

Test(edge, outputs_name_the_option, .timeout = 300) {
    const char *path = fixture_templated_blob("f32");
    cr_assert(path);
    char on[128], off[128], lc[128];
    const int pid = (int)getpid();
    snprintf(on, sizeof on, "build/edge_%d_on.json", pid);
    snprintf(off, sizeof off, "build/edge_%d_off.json", pid);
    snprintf(lc, sizeof lc, "build/edge_%d_lc.json", pid);
    free(fixture_cmd(0, NULL, "./recall replay %s --bench " T "/eval_bench.json --problem 0 --mode clean --edge inject "
                     "--trace %s 2>&1", path, on));
    free(fixture_cmd(0, NULL, "./recall replay %s --bench " T "/eval_bench.json --problem 0 --mode clean --trace %s 2>&1",
                     path, off));
    json_doc *d_on = fixture_json(on), *d_off = fixture_json(off);
    const json_value *r_on = json_root(d_on), *r_off = json_root(d_off);
    /* each rebuild's edge span, listed only with the edge on */
    const json_value *turns = json_get_type(r_on, "turns", JSON_ARR), *turns_off = json_get_type(r_off, "turns", JSON_ARR);
    cr_assert(turns && turns_off && turns->len > 0);
    for (size_t i = 0; i < turns->len; i++) {
        const json_value *re = json_get_type(&turns->items[i], "rebuild_edge", JSON_ARR);
        cr_assert(re, "turn %zu lists each rebuild's edge span", i);
        cr_expect_eq(re->len, json_get_type(&turns->items[i], "rebuilds", JSON_ARR)->len);
        cr_expect_null(json_get(&turns_off->items[i], "rebuild_edge"));
    }
    json_free(d_on);
    free(fixture_cmd(0, NULL, "./recall longctx %s --task needle --len 256 --depth 0.9 --seed 1 --max-new 64 --arms RC_bge "
                     "--mode clean --edge inject --json %s 2>&1", path, lc));
    json_doc *d = fixture_json(lc);
    const json_value *c0 = &json_get_type(json_root(d), "cases", JSON_ARR)->items[0];
    cr_expect_str_eq(json_get_type(json_get_type(json_get_type(c0, "arms", JSON_OBJ), "RC_bge", JSON_OBJ), "answer",
                                   JSON_STR)->str, NEEDLE_VALUE);
    json_free(d);
    /* every output names each clean-only option */
    expect_outputs_name(path, "--edge", "inject", "edge", r_off);
    expect_outputs_name(path, "--edge", "exchange", "edge", r_off);
    expect_outputs_name(path, "--span", "exchange", "span", r_off);
    expect_outputs_name(path, "--rerank", "words", "rerank", r_off);
    expect_outputs_name(path, "--rerank", "single", "rerank", r_off);
    json_free(d_off);
    remove(on);
    remove(off);
    remove(lc);
}
