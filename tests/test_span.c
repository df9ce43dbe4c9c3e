/* test_span.c - whole messages (docs/LOOP.md "Whole messages"): what a fire injects (recall_loop.h
 * rc_span) and where the window starts (rc_edge RC_EDGE_MESSAGE), on the trained world
 * (tests/golden/trained), clean mode, held-out benchmark problem 4:
 *   whole      its first question asks for "the invoice city", a fact sealed across two blocks
 *              ("... Important to note: the invoice city" | " is solaces. ..."). With the sealed
 *              blocks (the default) the reply is "... the invoice city is unknown.</think>I don't
 *              know."; with --span message the fire's blocks are widened to the messages they cut
 *              and the reply is the value. Fast = reference schedule, bitwise.
 *   rule       every fire of the problem injects exactly the ids this test's own reading of the
 *              rule gives (the chosen candidates of the record, widened on the conversation's
 *              ids); the candidates and their scores are those of the default run's first fire
 *   refused    (test_edge.c, with the edge's values) faithful mode refuses the option
 *   records    (test_edge.c) replay's trace, eval's options and longctx's file name it; a default
 *              trace has no "span" key
 *   window     with --edge message every rebuild's window starts where this test's reading of the
 *              rule puts it (the start of the message the window's start would cut, at most two
 *              blocks back); fast = reference schedule, bitwise */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "problems.h"
#include "recall.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B FIXTURE_TRAINED
#define PROBLEM 4
#define PREAMBLE "<think>The user asks for a value that was stated earlier in our chat. I look back for it and copy " \
                 "it exactly, character by character: the invoice city is "
static const char *const reply_block = PREAMBLE "unknown.</think>I don't know.";
static const char *const reply_message = PREAMBLE "solaces.</think> solaces";

static void run_problem_edge(rc_blob *b, int span, int edge, int reference, rc_problem_run *run) {
    rc_bench *bench;
    rc_problem p;
    recall_err err = {0};
    cr_assert_eq(rc_bench_load(B "/eval_bench.json", &bench, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bench_problem(bench, PROBLEM, &p, &err), RECALL_OK, "%s", err.msg);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.mode = RC_MODE_CLEAN;
    o.span = span;
    o.edge = edge;
    o.reference_schedule = reference;
    o.exec.threads = 1;
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, run, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
    rc_problem_free(&p);
    rc_bench_free(bench);
}

static void run_problem(rc_blob *b, int span, int reference, rc_problem_run *run) {
    run_problem_edge(b, span, RC_EDGE_OFF, reference, run);
}

/* The trained world's blob, its tokenizer, its loop defaults and its BOS / EOS ids. */
typedef struct {
    rc_blob *b;
    rc_bpe *bpe;
    rc_recall_opts o;
    int bos, eos;
} world;

static void world_open(world *w) {
    w->b = fixture_open(fixture_trained_blob("f32"));
    w->bpe = fixture_blob_bpe(w->b);
    rc_recall_defaults(w->b, &w->o);
    int64_t v;
    recall_err err = {0};
    cr_assert_eq(rc_blob_get_i64(w->b, "tok.bos", &v, &err), RECALL_OK);
    w->bos = (int)v;
    cr_assert_eq(rc_blob_get_i64(w->b, "tok.eos", &v, &err), RECALL_OK);
    w->eos = (int)v;
}

static void world_close(world *w) {
    rc_bpe_free(w->bpe);
    rc_blob_close(w->b);
}

static const rc_problem_turn *first_question(const rc_problem_run *run) {
    for (int i = 0; i < run->n_turns; i++)
        if (run->turns[i].kind == RC_STEP_Q) return &run->turns[i];
    cr_assert_fail("problem %d has no question", PROBLEM);
    return NULL;
}

static char *text_of(const rc_bpe *bpe, const int32_t *ids, int n) {
    char *text;
    size_t len;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_decode(bpe, ids, (size_t)n, 0, &text, &len, &err), RECALL_OK, "%s", err.msg);
    return text;
}

/* The rule as docs/LOOP.md states it, on the conversation's ids h[0:end] (the evicted history of
 * the fire): candidate c is h[c*block : (c+1)*block] (the buffer: to end); back over ids that are
 * not special, then over the special id that opens the message unless it is EOS or BOS; forward
 * up to the next special id; at most block / 2 each way; joined in order without repeats. */
static int widen(const rc_bpe *bpe, int bos, int eos, const int32_t *h, int end, int block, const int *top, int ntop,
                 int32_t *out) {
    int n = 0, last = 0;
    for (int i = 0; i < ntop; i++) {
        int s = top[i] * block, e = s + block < end ? s + block : end;
        const int lo = s - block / 2 > 0 ? s - block / 2 : 0, hi = e + block / 2 < end ? e + block / 2 : end;
        while (s > lo && !rc_bpe_is_special(bpe, h[s - 1])) s--;
        if (s > lo && h[s - 1] != eos && h[s - 1] != bos) s--;
        while (e < hi && !rc_bpe_is_special(bpe, h[e])) e++;
        for (int j = s > last ? s : last; j < e; j++) out[n++] = h[j];
        if (e > last) last = e;
    }
    return n;
}

Test(span, a_fact_sealed_across_two_blocks_comes_back_whole, .timeout = 300) {
    rc_blob *b = fixture_open(fixture_trained_blob("f32"));
    rc_bpe *bpe = fixture_blob_bpe(b);
    rc_problem_run blk, msg, ref;
    run_problem(b, RC_SPAN_BLOCK, 0, &blk);
    run_problem(b, RC_SPAN_MESSAGE, 0, &msg);
    run_problem(b, RC_SPAN_MESSAGE, 1, &ref);
    const rc_problem_turn *qb = first_question(&blk), *qm = first_question(&msg);
    char *tb = text_of(bpe, qb->turn.reply, qb->turn.n_reply), *tm = text_of(bpe, qm->turn.reply, qm->turn.n_reply);
    cr_expect_str_eq(tb, reply_block);
    cr_expect_str_eq(tm, reply_message);
    /* the same first fire on both: the same candidates, scores and choice; only the ids grew, and
     * only the widened ids hold the whole fact */
    cr_assert_gt(qb->turn.n_fires, 0);
    cr_assert_gt(qm->turn.n_fires, 0);
    const rc_fire_rec *fb = &qb->turn.fires[0], *fm = &qm->turn.fires[0];
    cr_expect_eq(fm->c0, fb->c0);
    cr_assert_eq(fm->ncand, fb->ncand);
    cr_expect_eq(memcmp(fm->bridge, fb->bridge, (size_t)fb->ncand * sizeof *fb->bridge), 0, "the same scores, bitwise");
    cr_expect_eq(fm->ntop, fb->ntop);
    cr_expect_eq(memcmp(fm->top, fb->top, sizeof fb->top), 0);
    cr_expect_gt(fm->nrid, fb->nrid);
    char *ib = text_of(bpe, fb->rid, fb->nrid), *im = text_of(bpe, fm->rid, fm->nrid);
    cr_expect_null(strstr(ib, "the invoice city is solaces."), "%s", ib);
    cr_expect(strstr(im, "the invoice city is solaces."), "%s", im);
    /* both schedules compute the same bits, widened injections included */
    fixture_expect_same_run(&msg, &ref, "span message fast vs reference, problem 4");
    free(tb);
    free(tm);
    free(ib);
    free(im);
    rc_problem_run_free(&blk);
    rc_problem_run_free(&msg);
    rc_problem_run_free(&ref);
    rc_bpe_free(bpe);
    rc_blob_close(b);
}

Test(span, every_fire_injects_the_rule_s_ids, .timeout = 300) {
    world w;
    world_open(&w);
    rc_problem_run run;
    run_problem(w.b, RC_SPAN_MESSAGE, 0, &run);
    int32_t *want = malloc((size_t)w.o.k * 2 * w.o.block * sizeof *want);
    cr_assert(want);
    int fires = 0, grown = 0;
    for (int i = 0; i < run.n_turns; i++) {
        const rc_turn *t = &run.turns[i].turn;
        for (int f = 0; f < t->n_fires; f++) {
            const rc_fire_rec *fr = &t->fires[f];
            const int end = fr->c0 - w.o.window; /* what the window had evicted at the fire */
            cr_assert_gt(end, 0);
            cr_assert_eq(fr->ncand, end / w.o.block + (end % w.o.block >= w.o.buf_min), "fire at c0 %d", fr->c0);
            const int n = widen(w.bpe, w.bos, w.eos, run.history, end, w.o.block, fr->top, fr->ntop, want);
            cr_assert_eq(fr->nrid, n, "fire at c0 %d: %d ids injected, the rule gives %d", fr->c0, fr->nrid, n);
            cr_expect_eq(memcmp(fr->rid, want, (size_t)n * sizeof *want), 0, "fire at c0 %d", fr->c0);
            grown += n > fr->ntop * w.o.block;
            fires++;
        }
    }
    cr_expect_gt(fires, 5, "the problem's questions fire");
    cr_expect_gt(grown, 0, "some fire widened its blocks");
    free(want);
    rc_problem_run_free(&run);
    world_close(&w);
}

/* The start of the message gen[nd - 1] | gen[nd] cuts, as docs/LOOP.md states it: back over ids
 * that are not special, then over the special id that opens the message unless it is EOS or BOS,
 * at most two blocks. */
static int window_start(const rc_bpe *bpe, int bos, int eos, const int32_t *h, int nd, int block) {
    const int lo = nd > 2 * block ? nd - 2 * block : 0;
    int s = nd;
    while (s > lo && !rc_bpe_is_special(bpe, h[s - 1])) s--;
    if (s > lo && h[s - 1] != eos && h[s - 1] != bos) s--;
    return s;
}

Test(span, edge_message_starts_the_window_at_the_message, .timeout = 300) {
    world w;
    world_open(&w);
    rc_problem_run run, ref;
    run_problem_edge(w.b, RC_SPAN_MESSAGE, RC_EDGE_MESSAGE, 0, &run);
    run_problem_edge(w.b, RC_SPAN_MESSAGE, RC_EDGE_MESSAGE, 1, &ref);
    int moved = 0, rebuilds = 0;
    for (int i = 0; i < run.n_turns; i++) {
        const rc_turn *t = &run.turns[i].turn;
        for (int k = 0; k < t->n_rebuilds; k++) {
            const rc_rebuild_rec *rb = &t->rebuilds[k];
            const int nd = rb->c0 > w.o.window ? rb->c0 - w.o.window : 0;
            const int want = nd ? rb->c0 - window_start(w.bpe, w.bos, w.eos, run.history, nd, w.o.block) : rb->c0;
            cr_expect_eq(rb->window_len, want, "turn %d, rebuild at c0 %d: window %d, the rule gives %d", i, rb->c0,
                         rb->window_len, want);
            cr_expect_eq(rb->edge_len, 0);
            moved += rb->window_len > w.o.window;
            rebuilds++;
        }
    }
    cr_expect_gt(moved, 10, "the window's start moved back at %d of %d rebuilds", moved, rebuilds);
    cr_expect_lt(moved, rebuilds, "and not at every one");
    fixture_expect_same_run(&run, &ref, "edge message fast vs reference, problem 4");
    rc_problem_run_free(&run);
    rc_problem_run_free(&ref);
    world_close(&w);
}
