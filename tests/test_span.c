/* test_span.c - whole exchanges (docs/LOOP.md "Whole exchanges"): what a fire injects (recall_loop.h
 * rc_span) and where the window starts (rc_edge RC_EDGE_EXCHANGE), on the trained world
 * (tests/golden/trained), clean mode, held-out benchmark problem 101:
 *   whole      its first question asks for "the hotel birthday", a fact sealed across two blocks
 *              ("... Important to note: the hotel birthday is" | " 09/26/1954. ..."). With the
 *              sealed blocks (the default) the reply is "... the hotel birthday is unknown.</think>I
 *              don't know."; with --span exchange the fire's blocks are widened to the exchanges
 *              they cut and the reply is the value. Fast = reference schedule, bitwise.
 *   rule       every fire of the problem injects exactly the ids this test's own reading of the
 *              rule gives (the chosen candidates of the record, widened on the conversation's
 *              ids); the candidates and their scores are those of the default run's first fire
 *   refused    (test_edge.c, with the edge's values) faithful mode refuses the option
 *   records    (test_edge.c) replay's trace, eval's options and longctx's file name it; a default
 *              trace has no "span" key
 *   window     with --edge exchange every rebuild's window starts where this test's reading of the
 *              rule puts it (the start of the exchange the window's start would cut, at most two
 *              blocks back); fast = reference schedule, bitwise
 *   rerank     with --rerank words every fire's choice is this test's reading of the rule (the
 *              bridge and word scores scaled and added), some differing from the bridge head's; on a
 *              handmade archive the choice a rank fusion would not make, NaN and no-word cases; far
 *              back, two cases (2,048 and 8,192 tokens) answered only with it
 *   single     with --rerank single (and with --top-k 1) every fire's choice is the rule's, one
 *              block where the words single it out; far back a case that the second block misled
 *              is answered */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "problems.h"
#include "recall.h"
#include "recall_loop.h"
#include "ops.h"       /* rc_log_d */
#include "retriever.h" /* RC_MAX_K */
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B FIXTURE_TRAINED
#define PROBLEM 101
#define FACT_KW "hotel birthday" /* its first question's fact, sealed across two blocks */
#define FACT_VAL "09/26/1954"
#define STR_(x) #x
#define STR(x) STR_(x)
#define PREAMBLE "<think>The user asks for a value that was stated earlier in our chat. I look back for it and copy " \
                 "it exactly, character by character: the " FACT_KW " is "
static const char *const reply_block = PREAMBLE "unknown.</think>I don't know.";
static const char *const reply_exchange = PREAMBLE FACT_VAL ".</think> " FACT_VAL;

/* k: the blocks a fire injects, 0 = the blob's loop.k */
static void run_problem_k(rc_blob *b, int span, int edge, int rerank, int k, int reference, rc_problem_run *run) {
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
    o.rerank = rerank;
    if (k) o.k = k;
    o.reference_schedule = reference;
    o.exec.threads = 1;
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, run, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
    rc_problem_free(&p);
    rc_bench_free(bench);
}

static void run_problem_opts(rc_blob *b, int span, int edge, int rerank, int reference, rc_problem_run *run) {
    run_problem_k(b, span, edge, rerank, 0, reference, run);
}

static void run_problem(rc_blob *b, int span, int reference, rc_problem_run *run) {
    run_problem_opts(b, span, RC_EDGE_OFF, RC_RERANK_OFF, reference, run);
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
 * the fire): candidate c is h[c*block : (c+1)*block] (the buffer: to end); back to just after the
 * EOS before it, forward to the EOS after it; at most block / 2 each way; joined in order without
 * repeats. */
static int widen(int eos, const int32_t *h, int end, int block, const int *top, int ntop, int32_t *out) {
    int n = 0, last = 0;
    for (int i = 0; i < ntop; i++) {
        int s = top[i] * block, e = s + block < end ? s + block : end;
        const int lo = s - block / 2 > 0 ? s - block / 2 : 0, hi = e + block / 2 < end ? e + block / 2 : end;
        while (s > lo && h[s - 1] != eos) s--;
        while (e < hi && h[e] != eos) e++;
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
    run_problem(b, RC_SPAN_EXCHANGE, 0, &msg);
    run_problem(b, RC_SPAN_EXCHANGE, 1, &ref);
    const rc_problem_turn *qb = first_question(&blk), *qm = first_question(&msg);
    char *tb = text_of(bpe, qb->turn.reply, qb->turn.n_reply), *tm = text_of(bpe, qm->turn.reply, qm->turn.n_reply);
    cr_expect_str_eq(tb, reply_block);
    cr_expect_str_eq(tm, reply_exchange);
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
    cr_expect_null(strstr(ib, "the " FACT_KW " is " FACT_VAL "."), "%s", ib);
    cr_expect(strstr(im, "the " FACT_KW " is " FACT_VAL "."), "%s", im);
    /* both schedules compute the same bits, widened injections included */
    fixture_expect_same_run(&msg, &ref, "span exchange fast vs reference, problem " STR(PROBLEM));
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
    run_problem(w.b, RC_SPAN_EXCHANGE, 0, &run);
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
            const int n = widen(w.eos, run.history, end, w.o.block, fr->top, fr->ntop, want);
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

/* The start of the exchange gen[nd - 1] | gen[nd] cuts, as docs/LOOP.md states it: just after the
 * EOS before nd, at most two blocks back. */
static int window_start(int eos, const int32_t *h, int nd, int block) {
    const int lo = nd > 2 * block ? nd - 2 * block : 0;
    int s = nd;
    while (s > lo && h[s - 1] != eos) s--;
    return s;
}

Test(span, edge_exchange_starts_the_window_at_the_exchange, .timeout = 300) {
    world w;
    world_open(&w);
    rc_problem_run run, ref;
    run_problem_opts(w.b, RC_SPAN_EXCHANGE, RC_EDGE_EXCHANGE, RC_RERANK_OFF, 0, &run);
    run_problem_opts(w.b, RC_SPAN_EXCHANGE, RC_EDGE_EXCHANGE, RC_RERANK_OFF, 1, &ref);
    int moved = 0, rebuilds = 0;
    for (int i = 0; i < run.n_turns; i++) {
        const rc_turn *t = &run.turns[i].turn;
        for (int k = 0; k < t->n_rebuilds; k++) {
            const rc_rebuild_rec *rb = &t->rebuilds[k];
            const int nd = rb->c0 > w.o.window ? rb->c0 - w.o.window : 0;
            const int want = nd ? rb->c0 - window_start(w.eos, run.history, nd, w.o.block) : rb->c0;
            cr_expect_eq(rb->window_len, want, "turn %d, rebuild at c0 %d: window %d, the rule gives %d", i, rb->c0,
                         rb->window_len, want);
            cr_expect_eq(rb->edge_len, 0);
            moved += rb->window_len > w.o.window;
            rebuilds++;
        }
    }
    cr_expect_gt(moved, 10, "the window's start moved back at %d of %d rebuilds", moved, rebuilds);
    cr_expect_lt(moved, rebuilds, "and not at every one");
    fixture_expect_same_run(&run, &ref, "edge exchange fast vs reference, problem " STR(PROBLEM));
    rc_problem_run_free(&run);
    rc_problem_run_free(&ref);
    world_close(&w);
}

/* ---- --rerank words (docs/LOOP.md, "Words the user asked in") ---------------------------------- */

typedef struct {
    int c;
    double k1, k2;
} rank_row;

static int rank_cmp(const void *x, const void *y) {
    const rank_row *a = x, *b = y;
    if (a->k1 != b->k1) return a->k1 > b->k1 ? -1 : 1;
    if (a->k2 != b->k2) return a->k2 > b->k2 ? -1 : 1;
    return (a->c > b->c) - (a->c < b->c);
}

static int has_id(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* The rule as docs/LOOP.md states it: the candidates of a fire at c0 (blocks of h[0:end], the
 * buffer when it holds buf_min ids), the query (after the last tok.user in h[0:c0] up to
 * tok.assistant), the words (its distinct ids that are not added tokens), each weighted
 * log(ncand / df), a candidate's score the sum over the words it holds; the bridge and word
 * scores each scaled to [0, 1] (min-max over the candidates) and added; the top k, ascending. */
static int rerank_rule(const rc_bpe *bpe, int user, int assistant, const int32_t *h, int c0, int end, int block,
                       int buf_min, const float *bridge, int ncand, int k, int single, int *top) {
    int u = c0 - 1;
    while (u >= 0 && h[u] != user) u--;
    cr_assert_geq(u, 0, "a user's message before the fire");
    int q1 = u + 1;
    while (q1 < c0 && h[q1] != assistant) q1++;
    cr_assert_eq(ncand, end / block + (end % block >= buf_min));
    int32_t words[512];
    int nw = 0;
    for (int i = u + 1; i < q1 && nw < 512; i++)
        if (!rc_bpe_is_added(bpe, h[i]) && !has_id(words, nw, h[i])) words[nw++] = h[i];
    double lex[1024] = {0};
    cr_assert_leq(ncand, 1024);
    for (int w = 0; w < nw; w++) {
        int df = 0;
        for (int c = 0; c < ncand; c++) {
            const int s = c * block, n = (s + block < end ? s + block : end) - s;
            df += has_id(h + s, n, words[w]);
        }
        if (!df) continue;
        for (int c = 0; c < ncand; c++) {
            const int s = c * block, n = (s + block < end ? s + block : end) - s;
            if (has_id(h + s, n, words[w])) lex[c] += rc_log_d((double)ncand / (double)df);
        }
    }
    /* min-max over the candidates, each score; a NaN bridge score counts as the greatest */
    double blo = INFINITY, bhi = -INFINITY, llo = INFINITY, lhi = -INFINITY;
    for (int c = 0; c < ncand; c++) {
        const double b = isnan(bridge[c]) ? INFINITY : bridge[c];
        if (isfinite(b) && b < blo) blo = b;
        if (isfinite(b) && b > bhi) bhi = b;
        if (lex[c] < llo) llo = lex[c];
        if (lex[c] > lhi) lhi = lex[c];
    }
    rank_row r[1024];
    for (int c = 0; c < ncand; c++) {
        const double b = isnan(bridge[c]) ? INFINITY : bridge[c];
        const double bn = isinf(b) ? (b > 0) : bhi > blo ? (b - blo) / (bhi - blo) : 0.0;
        const double ln = lhi > llo ? (lex[c] - llo) / (lhi - llo) : 0.0;
        r[c] = (rank_row){c, bn + ln, b};
    }
    qsort(r, (size_t)ncand, sizeof *r, rank_cmp);
    int kk = k < ncand ? k : ncand;
    /* single: the leader alone when its word score is above every other candidate's */
    int alone = single;
    for (int c = 0; c < ncand; c++)
        if (c != r[0].c && !(lex[r[0].c] > lex[c])) alone = 0;
    if (alone) kk = 1;
    for (int i = 0; i < kk; i++) top[i] = r[i].c;
    for (int i = 1; i < kk; i++)
        for (int j = i; j > 0 && top[j] < top[j - 1]; j--) {
            const int t = top[j];
            top[j] = top[j - 1];
            top[j - 1] = t;
        }
    return kk;
}

/* Every fire's choice on problem 101 with the words (rerank words or single), at the blob's k (2)
 * or at --top-k 1; single: some fires take one block (the words single it out) and some two. */
static void expect_rerank_rule(int k, int rerank) {
    world w;
    world_open(&w);
    int64_t v;
    recall_err err = {0};
    cr_assert_eq(rc_blob_get_i64(w.b, "tok.user", &v, &err), RECALL_OK);
    const int user = (int)v;
    cr_assert_eq(rc_blob_get_i64(w.b, "tok.assistant", &v, &err), RECALL_OK);
    const int assistant = (int)v;
    if (!k) k = w.o.k;
    rc_problem_run run, ref;
    run_problem_k(w.b, RC_SPAN_BLOCK, RC_EDGE_OFF, rerank, k, 0, &run);
    run_problem_k(w.b, RC_SPAN_BLOCK, RC_EDGE_OFF, rerank, k, 1, &ref);
    int fires = 0, moved = 0, ones = 0;
    for (int i = 0; i < run.n_turns; i++) {
        const rc_turn *t = &run.turns[i].turn;
        for (int f = 0; f < t->n_fires; f++) {
            const rc_fire_rec *fr = &t->fires[f];
            int top[RC_MAX_K];
            const int n = rerank_rule(w.bpe, user, assistant, run.history, fr->c0, fr->c0 - w.o.window, w.o.block,
                                      w.o.buf_min, fr->bridge, fr->ncand, k, rerank == RC_RERANK_SINGLE, top);
            if (rerank == RC_RERANK_WORDS) cr_assert_eq(n, k < fr->ncand ? k : fr->ncand, "fire at c0 %d", fr->c0);
            ones += n == 1;
            cr_assert_eq(fr->ntop, n, "fire at c0 %d, k %d", fr->c0, k);
            cr_expect_eq(memcmp(fr->top, top, (size_t)n * sizeof *top), 0, "fire at c0 %d, k %d: the rule's choice",
                         fr->c0, k);
            /* the bridge head's own choice, for comparison: its top k by score */
            int best[RC_MAX_K], nb = 0;
            for (int c = 0; c < fr->ncand && nb < n; c++) {
                int above = 0;
                for (int d = 0; d < fr->ncand; d++)
                    above += fr->bridge[d] > fr->bridge[c] || (fr->bridge[d] == fr->bridge[c] && d < c);
                if (above < n) best[nb++] = c;
            }
            moved += nb != n || memcmp(best, top, (size_t)n * sizeof *top) != 0;
            fires++;
        }
    }
    cr_expect_gt(fires, 5, "the problem's questions fire (k %d)", k);
    cr_expect_gt(moved, 0, "the words changed some fire's choice (k %d)", k);
    if (rerank == RC_RERANK_SINGLE) {
        cr_log_info("rerank single, problem " STR(PROBLEM) ": %d of %d fires took one block", ones, fires);
        cr_expect_gt(ones, 0, "the words singled out a block at some fire");
        cr_expect_lt(ones, fires, "and not at every fire");
    }
    fixture_expect_same_run(&run, &ref, "rerank words fast vs reference, problem " STR(PROBLEM));
    rc_problem_run_free(&run);
    rc_problem_run_free(&ref);
    world_close(&w);
}

Test(span, rerank_words_chooses_as_the_rule_says, .timeout = 300) { expect_rerank_rule(0, RC_RERANK_WORDS); }

Test(span, rerank_words_top_k_one_chooses_as_the_rule_says, .timeout = 300) { expect_rerank_rule(1, RC_RERANK_WORDS); }

Test(span, rerank_single_chooses_as_the_rule_says, .timeout = 300) { expect_rerank_rule(0, RC_RERANK_SINGLE); }

/* The rule on a handmade archive of six 4-id blocks, the query one word held by block 0 only:
 * its word score scales to 1, every other block's to 0. Bridge scores 0, 10, 9.9, 9.8, 9.7, 9.6:
 * block 0 (1 + 0) ties block 1 (0 + 1), the tie goes to the bridge score: {0, 1}. A rank fusion,
 * 1/(60 + rank) each, would take {1, 2} (block 0 the bridge's last). A NaN bridge score counts as
 * the greatest (as torch.topk takes it): block 5 NaN scales to 1 and sorts first among the ties:
 * {1, 5}. No query word in any block: the bridge's own order. Single (rerank single): with block
 * 0's bridge score 9.95 it leads the sum (1 + 0.875) and no other block holds the word: it alone;
 * where the tie puts block 1 (no word) first, or no block holds a word, the two as with words. */
Test(span, rerank_words_scales_scores_on_a_handmade_archive) {
    world w;
    world_open(&w);
    rc_archive a;
    rc_archive_init(&a, 4);
    recall_err err = {0};
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = 300 + i;
    ids[1] = 500; /* the query's word, in block 0 only */
    cr_assert_eq(rc_archive_push(&a, ids, 24, &err), RECALL_OK);
    for (int i = 0; i < 6; i++) cr_assert(rc_archive_seal(&a, &err));
    cr_assert(!rc_bpe_is_added(w.bpe, 500) && !rc_bpe_is_added(w.bpe, 700));
    static const struct {
        int32_t word;
        float b0, b5;
        int single, n, want[2];
    } cases[] = {{500, 0.0f, 9.6f, 0, 2, {0, 1}}, {500, 0.0f, NAN, 0, 2, {1, 5}}, {700, 0.0f, 9.6f, 0, 2, {1, 2}},
                 /* single: block 0 holds the word and leads the sum (1 + 0.875): alone; the same
                  * scores with the words only: {0, 1}; block 0 not leading (the tie above goes to
                  * block 1, which holds no word): both; no word anywhere: both */
                 {500, 9.95f, 9.6f, 1, 1, {0, -1}}, {500, 9.95f, 9.6f, 0, 2, {0, 1}}, {500, 0.0f, 9.6f, 1, 2, {0, 1}},
                 {700, 0.0f, 9.6f, 1, 2, {1, 2}}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        rc_retrieval rv = {0};
        rv.ncand = 6;
        rv.bridge = malloc(6 * sizeof *rv.bridge);
        cr_assert(rv.bridge);
        const float b[6] = {cases[t].b0, 10.0f, 9.9f, 9.8f, 9.7f, cases[t].b5};
        memcpy(rv.bridge, b, sizeof b);
        const int32_t q[3] = {w.bos, cases[t].word, w.eos}; /* added tokens are not words */
        cr_assert_eq(rc_retrieve_rerank_words(&a, w.bpe, q, 3, 2, cases[t].single, &rv, &err), RECALL_OK, "%s",
                     err.msg);
        cr_assert_eq(rv.ntop, cases[t].n, "case %zu", t);
        cr_expect(rv.top[0] == cases[t].want[0] && (rv.ntop < 2 || rv.top[1] == cases[t].want[1]),
                  "case %zu: top {%d, %d}, want {%d, %d}", t, rv.top[0], rv.ntop > 1 ? rv.top[1] : -1,
                  cases[t].want[0], cases[t].want[1]);
        cr_expect_eq(rv.nrid, 4 * cases[t].n, "the chosen blocks' ids");
        cr_expect_eq(rv.rid[0], ids[cases[t].want[0] * 4]);
        rc_retrieval_free(&rv);
    }
    rc_archive_free(&a);
    world_close(&w);
}

/* Far back (longctx farfact, seed 0, a quarter of the filler other facts), in the setting
 * docs/WORLD.md recommends with and without --rerank words: at 2,048 tokens case 6's "safe
 * combination" (its block the bridge's 14th of 64) is answered "I don't know." with the bridge
 * head's choice and "4:45 pm" with the words; at 8,192 tokens case 0's "bus pet's name" (its
 * block the bridge's 11th of 258) "I don't know." and "10". */
Test(span, rerank_words_answers_a_fact_far_back, .timeout = 600) {
    const char *path = fixture_trained_blob("f32");
    cr_assert(path);
    static const struct {
        int len, cases;
        const char *kw, *want[2];
    } far[] = {{2048, 7, "safe combination", {"I don't know.", "4:45 pm"}},
               {8192, 1, "bus pet's name", {"I don't know.", "10"}}};
    for (size_t f = 0; f < sizeof far / sizeof *far; f++)
        for (int i = 0; i < 2; i++) {
            char out[128];
            snprintf(out, sizeof out, "build/span_%d_far%d.json", (int)getpid(), i);
            free(fixture_cmd(0, NULL, "./recall longctx %s --task farfact --bench " B "/eval_bench.json --len %d --cases %d "
                             "--seed 0 --fact-share 0.25 --arms RC_bge --mode clean --span exchange --edge exchange "
                             "--rerank %s --threads 2 --json %s 2>&1", path, far[f].len, far[f].cases, i ? "words" : "off", out));
            json_doc *d = fixture_json(out);
            const json_value *recs = json_get_type(json_root(d), "records", JSON_ARR);
            cr_assert(recs && recs->len == (size_t)far[f].cases);
            const json_value *r = &recs->items[far[f].cases - 1];
            cr_expect_str_eq(json_get_type(r, "kw", JSON_STR)->str, far[f].kw);
            cr_expect_str_eq(json_get_type(r, "answer", JSON_STR)->str, far[f].want[i], "%d tokens, --rerank %s",
                             far[f].len, i ? "words" : "off");
            json_free(d);
            remove(out);
        }
}

/* Far back with one block a fire, in the setting docs/WORLD.md recommends: at 8,192 tokens (seed
 * 2, case 0) the words put the asked fact's block ("the fresh zip code is 3 pm") first; with the
 * blob's k = 2 the second block is another fact ("... confirmation code is wp-14 ga.") and the
 * reply copies that one's value; with --top-k 1, and with --rerank single (the words single the
 * block out), it is the asked value. The file names the rerank and the k it ran. */
Test(span, one_block_answers_where_a_second_misleads, .timeout = 600) {
    const char *path = fixture_trained_blob("f32");
    cr_assert(path);
    static const struct {
        const char *flags, *rerank, *want;
        int k;
    } arm[] = {{"--rerank words", "words", "wp-14 ga", 2}, {"--rerank words --top-k 1", "words", "3 pm", 1},
               {"--rerank single", "single", "3 pm", 2}};
    for (size_t i = 0; i < sizeof arm / sizeof *arm; i++) {
        char out[128];
        snprintf(out, sizeof out, "build/span_%d_one%zu.json", (int)getpid(), i);
        free(fixture_cmd(0, NULL, "./recall longctx %s --task farfact --bench " B "/eval_bench.json --len 8192 --cases 1 "
                         "--seed 2 --fact-share 0.25 --arms RC_bge --mode clean --span exchange --edge exchange "
                         "%s --threads 2 --json %s 2>&1", path, arm[i].flags, out));
        json_doc *d = fixture_json(out);
        const json_value *root = json_root(d);
        cr_expect_eq(json_get_type(root, "top_k", JSON_NUM)->num, arm[i].k);
        cr_expect_str_eq(json_get_type(root, "rerank", JSON_STR)->str, arm[i].rerank);
        const json_value *recs = json_get_type(root, "records", JSON_ARR);
        cr_assert(recs && recs->len == 1);
        const json_value *r = &recs->items[0];
        cr_expect_str_eq(json_get_type(r, "kw", JSON_STR)->str, "fresh zip code");
        cr_expect_eq(json_get_type(r, "fired", JSON_BOOL)->num, 1, "the gate fires at the question");
        cr_expect_str_eq(json_get_type(r, "answer", JSON_STR)->str, arm[i].want, "%s", arm[i].flags);
        json_free(d);
        remove(out);
    }
}
