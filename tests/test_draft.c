/* test_draft.c - exact speculative decoding (--draft, draft.h + recall.c's spec_steps).
 *
 * The prompt-lookup drafter on hand-made histories (exact proposals) and its adaptive length;
 * then the recall loop with draft 1, 4 and 8 against draft 0 on the worldA goldens (benchmark
 * problem 0), on the fast and the reference schedule: every reply id, gate / fire / rebuild
 * record, rebuild top-5, greedy margin, low-margin entry and streamed event bitwise the same
 * (draft 0 is test_recall.c's golden run; its replies and final history are re-checked here
 * against the golden file), with drafts both accepted and rejected. The FULL arm likewise;
 * the chat stream through the public API (recall_turn's token events) and through `recall chat`
 * (stdout and --trace bytes), each with drafts accepted and rejected (recall_loop_draft_stats;
 * chat's '[trace] draft:' lines), so that the drafted stream is what was compared. */
#include "draft.h"
#include "fixture.h"
#include "json.h"
#include "problems.h"
#include "recall.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the drafter ------------------------------------------------------------------------- */

#define POISON (-7)

static int lookup(const int32_t *h, int n, int k, int32_t *out) {
    for (int i = 0; i < 16; i++) out[i] = POISON;
    int m = rc_draft_lookup(h, n, k, out);
    for (int i = m; i < 16; i++) cr_assert_eq(out[i], POISON, "proposal %d written past the %d returned", i, m);
    return m;
}

Test(draft, lookup_exact_proposals) {
    int32_t out[16];
    { /* the 3-gram suffix [5 6 7] occurred at 0: continue as it did there */
        const int32_t h[] = {5, 6, 7, 8, 9, 5, 6, 7};
        cr_assert_eq(lookup(h, 8, 3, out), 3);
        cr_assert(out[0] == 8 && out[1] == 9 && out[2] == 5);
    }
    { /* the longest n-gram wins over a more recent shorter one: [2 3] at 1, not [3] at 5 */
        const int32_t h[] = {1, 2, 3, 4, 9, 3, 5, 7, 2, 3};
        cr_assert_eq(lookup(h, 10, 2, out), 2);
        cr_assert(out[0] == 4 && out[1] == 9);
    }
    { /* the most recent occurrence; past the history's end the repeat goes on (period 3) */
        const int32_t h[] = {1, 2, 10, 1, 2, 20, 1, 2};
        const int32_t want[8] = {20, 1, 2, 20, 1, 2, 20, 1};
        cr_assert_eq(lookup(h, 8, 8, out), 8);
        cr_assert(!memcmp(out, want, sizeof want));
    }
    { /* a 1-gram, period 2 */
        const int32_t h[] = {4, 5, 4};
        const int32_t want[5] = {5, 4, 5, 4, 5};
        cr_assert_eq(lookup(h, 3, 5, out), 5);
        cr_assert(!memcmp(out, want, sizeof want));
    }
    { /* a period-1 loop drafts itself to the full length */
        const int32_t h[] = {3, 3, 3, 3};
        cr_assert_eq(lookup(h, 4, 4, out), 4);
        cr_assert(out[0] == 3 && out[1] == 3 && out[2] == 3 && out[3] == 3);
    }
    { /* nothing repeats, too short, or k = 0: no draft */
        const int32_t h[] = {1, 2, 3, 4};
        cr_assert_eq(lookup(h, 4, 4, out), 0);
        cr_assert_eq(lookup(h, 1, 4, out), 0);
        const int32_t g[] = {1, 1};
        cr_assert_eq(lookup(g, 2, 0, out), 0);
        cr_assert_eq(lookup(g, 2, 3, out), 3);
    }
}

Test(draft, adaptive_length) {
    rc_drafter d;
    rc_drafter_init(&d, 0);
    cr_assert_eq(rc_drafter_len(&d), 0);
    rc_drafter_init(&d, 8);
    cr_assert_eq(rc_drafter_len(&d), 8);
    rc_drafter_update(&d, 8, 4); /* half accepted: accepted + 1 */
    cr_assert_eq(rc_drafter_len(&d), 5);
    rc_drafter_update(&d, 5, 5); /* full: doubles, up to the maximum */
    cr_assert_eq(rc_drafter_len(&d), 8);
    rc_drafter_update(&d, 8, 3); /* less than half: a miss; min(accepted + 1, len / 2), wait 1 */
    cr_assert_eq(rc_drafter_len(&d), 0);
    cr_assert_eq(rc_drafter_len(&d), 4);
    rc_drafter_update(&d, 4, 4); /* a full one ends the misses */
    cr_assert_eq(rc_drafter_len(&d), 8);
    rc_drafter_update(&d, 8, 8);
    cr_assert_eq(rc_drafter_len(&d), 8);
    rc_drafter_update(&d, 8, 0); /* nothing accepted: length 1, wait 1 step */
    cr_assert_eq(rc_drafter_len(&d), 0);
    cr_assert_eq(rc_drafter_len(&d), 1);
    rc_drafter_update(&d, 1, 0); /* a second miss: wait 3 */
    for (int i = 0; i < 3; i++) cr_assert_eq(rc_drafter_len(&d), 0, "step %d", i);
    cr_assert_eq(rc_drafter_len(&d), 1);
    rc_drafter_update(&d, 1, 1); /* a hit ends the misses and doubles */
    cr_assert_eq(rc_drafter_len(&d), 2);
    rc_drafter_update(&d, 2, 1); /* half: accepted + 1 */
    cr_assert_eq(rc_drafter_len(&d), 2);
    rc_drafter_update(&d, 2, 0); /* the first miss after a hit waits 1 again */
    cr_assert_eq(rc_drafter_len(&d), 0);
    cr_assert_eq(rc_drafter_len(&d), 1);
    rc_drafter_init(&d, 1000);
    cr_assert_eq(rc_drafter_len(&d), RC_DRAFT_MAX);
}

/* ---- the loop: draft N against draft 0 --------------------------------------------------- */

typedef struct {
    int kind, token, c0;
    float score;
} ev_rec;

typedef struct {
    ev_rec *ev;
    int n, cap;
} ev_log;

static int record(void *ctx, const rc_event *e) {
    ev_log *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->ev = realloc(l->ev, (size_t)l->cap * sizeof *l->ev);
        cr_assert(l->ev);
    }
    ev_rec *r = &l->ev[l->n++];
    memset(r, 0, sizeof *r);
    r->kind = (int)e->kind;
    r->token = e->token;
    if (e->kind == RC_EV_GATE) r->c0 = ((const rc_gate_rec *)e->rec)->c0, r->score = ((const rc_gate_rec *)e->rec)->score;
    if (e->kind == RC_EV_FIRE) r->c0 = ((const rc_fire_rec *)e->rec)->c0, r->score = ((const rc_fire_rec *)e->rec)->score;
    if (e->kind == RC_EV_REBUILD) r->c0 = ((const rc_rebuild_rec *)e->rec)->c0;
    return 0;
}

#define SAME(a, b, what, ...) cr_assert(!memcmp(&(a), &(b), sizeof(a)), what, __VA_ARGS__)

typedef struct {
    rc_problem_run run;
    ev_log log;
    long drafted, accepted;
    int screening; /* lm_head screening was on (lm_screen.h) */
} loop_run;

/* Loop geometry for a run; chunk 0 = the blob's defaults. */
typedef struct {
    int window, block, chunk, turn_cap;
} geometry;
static void run_loop_ex(const rc_blob *b, const rc_problem *p, const geometry *g, rc_loop_mode mode, rc_arm arm,
                        int sched, int draft, int lm_screen, loop_run *out) {
    memset(out, 0, sizeof *out);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    if (g) {
        o.window = g->window;
        o.block = g->block;
        o.chunk = g->chunk;
        o.turn_cap = g->turn_cap;
    }
    o.mode = mode;
    o.arm = arm;
    o.reference_schedule = sched;
    o.draft = draft;
    o.lm_screen = lm_screen;
    rc_recall *r;
    recall_err err = {0};
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_run_problem(r, p, record, NULL, &out->log, &out->run, &err), RECALL_OK, "%s", err.msg);
    for (int t = 0; t < out->run.n_turns; t++) {
        out->drafted += out->run.turns[t].turn.drafted;
        out->accepted += out->run.turns[t].turn.accepted;
    }
    rc_lm_stats st;
    rc_recall_lm_stats(r, &st);
    out->screening = st.screening;
    rc_recall_close(r);
}

static void run_loop(const rc_blob *b, const rc_problem *p, const geometry *g, rc_loop_mode mode, rc_arm arm, int sched,
                     int draft, loop_run *out) {
    run_loop_ex(b, p, g, mode, arm, sched, draft, RC_LM_SCREEN_AUTO, out);
}

static void free_run(loop_run *l) {
    rc_problem_run_free(&l->run);
    free(l->log.ev);
}

static void expect_same_run(const loop_run *a, const loop_run *b, const char *tag) {
    fixture_expect_same_run(&a->run, &b->run, tag);
    cr_assert_eq(a->log.n, b->log.n, "%s: %d events vs %d", tag, a->log.n, b->log.n);
    for (int i = 0; i < a->log.n; i++) SAME(a->log.ev[i], b->log.ev[i], "%s: event %d", tag, i);
}

/* A drafted run: the plain run's bits, and drafts both accepted and rejected, so that both the
 * kept prefix and the crop were exercised. */
static void expect_same_drafted_run(const loop_run *base, const loop_run *x, const char *tag) {
    expect_same_run(base, x, tag);
    cr_log_info("%s: %ld drafted, %ld accepted", tag, x->drafted, x->accepted);
    cr_assert_gt(x->accepted, 0, "%s: no draft was accepted, nothing was tested", tag);
    cr_assert_lt(x->accepted, x->drafted, "%s: no draft was rejected, the crop was not tested", tag);
}

/* draft 1, 4, 8 against draft 0 on both schedules (the reference one on the first two generated
 * turns, the fast one on the whole conversation; both on the first `keep` turns when keep > 0);
 * draft 0's replies (and, on the whole conversation, final history) against the golden file
 * (test_recall.c checks the rest of it on both schedules). */
static void golden_drafts_turns(const char *golden, const char *weights, rc_loop_mode mode, int keep) {
    rc_blob *b = fixture_open_worldA(weights);
    json_doc *doc = fixture_json(golden);
    rc_problem p = fixture_problem(0);
    const int drafts[] = {1, 4, 8};
    if (keep) rc_problem_keep_turns(&p, keep);
    for (int sched = 0; sched < 2; sched++) {
        if (sched) rc_problem_keep_turns(&p, keep ? keep : 2);
        loop_run base;
        run_loop(b, &p, NULL, mode, RC_ARM_RC_BGE, sched, 0, &base);
        const json_value *turns = json_get(json_root(doc), "turns"), *fh = json_get(json_root(doc), "final_history");
        cr_assert_eq(base.run.n_turns, keep ? keep : sched ? 2 : (int)turns->len);
        for (int t = 0; t < base.run.n_turns; t++) {
            const json_value *reply = json_get(&turns->items[t], "reply");
            cr_assert_eq((int)reply->len, base.run.turns[t].turn.n_reply, "turn %d", t);
            for (size_t i = 0; i < reply->len; i++)
                cr_assert_eq(base.run.turns[t].turn.reply[i], (int32_t)reply->items[i].num, "turn %d id %zu", t, i);
        }
        if (!sched && !keep) {
            cr_assert_eq((int)fh->len, base.run.n_history);
            for (size_t i = 0; i < fh->len; i++) cr_assert_eq(base.run.history[i], (int32_t)fh->items[i].num);
        }
        cr_assert_eq(base.drafted, 0);
        for (int d = 0; d < 3; d++) {
            loop_run x;
            run_loop(b, &p, NULL, mode, RC_ARM_RC_BGE, sched, drafts[d], &x);
            char tag[160];
            snprintf(tag, sizeof tag, "%s, %s schedule, draft %d", golden, sched ? "reference" : "fast", drafts[d]);
            expect_same_drafted_run(&base, &x, tag);
            free_run(&x);
        }
        free_run(&base);
    }
    rc_problem_free(&p);
    json_free(doc);
    rc_blob_close(b);
}

static void golden_drafts(const char *golden, const char *weights, rc_loop_mode mode) {
    golden_drafts_turns(golden, weights, mode, 0);
}

FIXTURE_LOOP_GOLDENS(draft_golden, , golden_drafts)

/* The same checks on the first generated turn of the clean fp32 golden, on both schedules (the
 * fast tier's form; tests/full_tier.txt): drafts accepted and rejected at every length. */
Test(draft_golden, clean_fp32_first_turn, .timeout = 600) {
    golden_drafts_turns("tests/golden/worldA/loop_A_seed0_clean_fp32.json", "f32", RC_MODE_CLEAN, 1);
}

/* Speculative decoding with lm_head screening: the verify rows are final-normed hidden states
 * picked through the screen one by one (recall.c pick_row), and must give plain, unscreened
 * decoding's bits on both schedules. */
static void screened_drafts(const char *weights, rc_loop_mode mode) {
    rc_blob *b = fixture_open(fixture_worldA_screen_blob(weights));
    rc_problem p = fixture_problem(0);
    for (int sched = 0; sched < 2; sched++) {
        if (sched) rc_problem_keep_turns(&p, 2);
        loop_run base, x;
        run_loop_ex(b, &p, NULL, mode, RC_ARM_RC_BGE, sched, 0, RC_LM_SCREEN_OFF, &base);
        run_loop_ex(b, &p, NULL, mode, RC_ARM_RC_BGE, sched, 8, RC_LM_SCREEN_ON, &x);
        cr_assert_eq(base.screening, 0);
        cr_assert_eq(x.screening, 1);
        char tag[160];
        snprintf(tag, sizeof tag, "%s weights, %s schedule, draft 8 + screening", weights, sched ? "reference" : "fast");
        expect_same_drafted_run(&base, &x, tag);
        free_run(&base);
        free_run(&x);
    }
    rc_problem_free(&p);
    rc_blob_close(b);
}

Test(draft_screen, faithful_nf4, .timeout = 900) { screened_drafts("nf4", RC_MODE_FAITHFUL); }
Test(draft_screen, clean_f32, .timeout = 900) { screened_drafts("f32", RC_MODE_CLEAN); }

/* The FULL arm (no eviction: the whole conversation in the cache) on the fast schedule. */
Test(draft, full_arm_same_bits, .timeout = 600) {
    rc_blob *b = fixture_open_worldA("f32");
    rc_problem p = fixture_problem(0);
    loop_run base, x;
    run_loop(b, &p, NULL, RC_MODE_FAITHFUL, RC_ARM_FULL, 0, 0, &base);
    run_loop(b, &p, NULL, RC_MODE_FAITHFUL, RC_ARM_FULL, 0, 8, &x);
    expect_same_run(&base, &x, "FULL arm, draft 8");
    cr_log_info("FULL arm, draft 8: %ld drafted, %ld accepted", x.drafted, x.accepted);
    cr_assert_gt(x.accepted, 0);
    free_run(&base);
    free_run(&x);
    rc_problem_free(&p);
    rc_blob_close(b);
}

/* Small odd loop geometry (window 48, block 16, chunk 7, cap 23): many chunk ends, turn caps,
 * evictions, seals and gate checks inside a few turns, each a place where a draft must stop. */
Test(draft, odd_geometry_same_bits, .timeout = 600) {
    rc_blob *b = fixture_open_worldA("f32");
    rc_problem p = fixture_problem(0);
    rc_problem_keep_turns(&p, 3);
    const geometry g = {48, 16, 7, 23};
    for (int mode = 0; mode < 2; mode++) {
        loop_run base, x;
        run_loop(b, &p, &g, (rc_loop_mode)mode, RC_ARM_RC_BGE, 0, 0, &base);
        for (int d = 2; d <= 32; d *= 4) {
            run_loop(b, &p, &g, (rc_loop_mode)mode, RC_ARM_RC_BGE, 0, d, &x);
            char tag[64];
            snprintf(tag, sizeof tag, "odd geometry, mode %d, draft %d", mode, d);
            expect_same_run(&base, &x, tag);
            cr_assert_gt(x.accepted, 0, "%s", tag);
            free_run(&x);
        }
        int gates = 0;
        for (int t = 0; t < base.run.n_turns; t++) gates += base.run.turns[t].turn.n_gates;
        cr_assert_gt(gates, 0, "the gate never ran: the geometry tests nothing of it");
        free_run(&base);
    }
    rc_problem_free(&p);
    rc_blob_close(b);
}

/* ---- chat: the public API streams the same ids ------------------------------------------- */

typedef struct {
    int32_t ids[512];
    int n;
} stream;

static int on_token(void *ctx, const recall_event *ev) {
    stream *s = ctx;
    if (ev->kind == RECALL_EV_TOKEN) {
        cr_assert_lt(s->n, 512);
        s->ids[s->n++] = ev->token;
    }
    return 0;
}

/* Two chat turns (the second extends the first's conversation, as `chat` does) whose user text
 * repeats a passage, so that prompt lookup has something to draft from. */
static void chat_turns(recall_model *m, int draft, stream out[2], float margin[2], long drafts[2]) {
    recall_loop_opts o;
    recall_loop_opts_init(m, &o);
    o.draft = draft;
    o.turn_cap = 96;
    recall_loop *l;
    recall_err err = {0};
    cr_assert_eq(recall_loop_open(m, &o, &l, &err), RECALL_OK, "%s", err.msg);
    const char *user[2] = {"Say it back: the badge id is JL412, the badge id is JL412, the badge id is JL412.",
                           "Again, and once more: the badge id is JL412, the badge id is JL412."};
    int32_t *conv = NULL;
    size_t n_conv = 0;
    for (int t = 0; t < 2; t++) {
        int32_t *seg;
        size_t n_seg;
        cr_assert_eq(recall_chat_segment(m, t > 0, user[t], NULL, &seg, &n_seg, &err), RECALL_OK, "%s", err.msg);
        conv = realloc(conv, (n_conv + n_seg + 512) * sizeof *conv);
        memcpy(conv + n_conv, seg, n_seg * sizeof *seg);
        n_conv += n_seg;
        recall_free(m, seg);
        memset(&out[t], 0, sizeof out[t]);
        recall_reply rep;
        cr_assert_eq(recall_turn(l, conv, n_conv, on_token, &out[t], &rep, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq((int)rep.n_ids, out[t].n);
        cr_assert(!memcmp(rep.ids, out[t].ids, rep.n_ids * sizeof *rep.ids));
        margin[t] = rep.min_margin;
        long drafted = -1, accepted = -1;
        cr_assert_eq(recall_loop_draft_stats(l, &drafted, &accepted, &err), RECALL_OK, "%s", err.msg);
        drafts[0] += drafted;
        drafts[1] += accepted;
        cr_assert_leq(accepted, drafted, "turn %d", t);
        if (!draft) cr_assert_eq(drafted, 0, "turn %d drafted with draft 0", t);
        memcpy(conv + n_conv, rep.ids, rep.n_ids * sizeof *rep.ids);
        n_conv += rep.n_ids;
        recall_reply_free(l, &rep);
    }
    free(conv);
    recall_loop_close(l);
}

Test(draft, chat_streams_same_ids, .timeout = 600) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_model *m;
    recall_err err = {0};
    cr_assert_eq(recall_open(path, NULL, &m, &err), RECALL_OK, "%s", err.msg);
    stream plain[2], spec[2];
    float mp[2], ms[2];
    long dp[2] = {0, 0}, ds[2] = {0, 0}; /* drafted, accepted */
    chat_turns(m, 0, plain, mp, dp);
    chat_turns(m, 8, spec, ms, ds);
    cr_log_info("chat stream, draft 8: %ld drafted, %ld accepted", ds[0], ds[1]);
    cr_assert_gt(ds[1], 0, "no draft was accepted: the drafted stream was not tested");
    cr_assert_lt(ds[1], ds[0], "no draft was rejected: the crop was not tested");
    for (int t = 0; t < 2; t++) {
        cr_assert_gt(plain[t].n, 0, "turn %d streamed nothing", t);
        cr_assert_eq(plain[t].n, spec[t].n, "turn %d: %d ids plain, %d with draft 8", t, plain[t].n, spec[t].n);
        cr_assert(!memcmp(plain[t].ids, spec[t].ids, (size_t)plain[t].n * sizeof *plain[t].ids), "turn %d ids", t);
        cr_assert(!memcmp(&mp[t], &ms[t], sizeof mp[t]), "turn %d min margin", t);
    }
    /* out of range is refused at open, naming the number */
    recall_loop_opts o;
    recall_loop_opts_init(m, &o);
    cr_assert_eq(o.draft, 0);
    o.draft = RC_DRAFT_MAX + 1;
    recall_loop *l = NULL;
    cr_assert_eq(recall_loop_open(m, &o, &l, &err), RECALL_E_ARG);
    cr_assert(strstr(err.msg, "draft 33"), "%s", err.msg);
    recall_close(m);
}

/* `recall chat --draft 8` prints the bytes `recall chat` prints (two piped turns, with --trace:
 * rebuilds, gate scores and fires too), and a bad --draft is a usage error naming the range. */
Test(draft, cli_chat_same_stream, .timeout = 300) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char cmd[1024], *out[2];
    for (int d = 0; d < 2; d++) {
        snprintf(cmd, sizeof cmd,
                 "printf '%%s\\n' 'Say it back: the badge id is JL412, the badge id is JL412.' 'Again, once more.' | "
                 "./recall chat %s --trace --max-turn-tokens 48 --draft %d 2>&1",
                 blob, d ? 8 : 0);
        cr_assert_eq(fixture_sh(cmd, &out[d]), 0, "%s", out[d]);
    }
    cr_assert_gt(strlen(out[0]), 0);
    cr_assert(!strstr(out[0], "[trace] draft:"), "draft 0 verified drafts:\n%s", out[0]);
    /* the draft run's output is the plain run's plus one '[trace] draft:' line per turn that drafted */
    long drafted = 0, accepted = 0;
    int lines = 0;
    for (char *p; (p = strstr(out[1], "[trace] draft: ")) != NULL; lines++) {
        int v;
        long d, a;
        cr_assert_eq(sscanf(p, "[trace] draft: %d verify forwards, %ld drafted, %ld accepted", &v, &d, &a), 3, "%s", p);
        drafted += d;
        accepted += a;
        char *e = strchr(p, '\n');
        cr_assert(e);
        memmove(p, e + 1, strlen(e + 1) + 1);
    }
    cr_log_info("recall chat --draft 8: %d turns drafted, %ld drafted, %ld accepted", lines, drafted, accepted);
    cr_assert_gt(accepted, 0, "no draft was accepted: the drafted stream was not tested\n%s", out[1]);
    cr_assert_lt(accepted, drafted, "no draft was rejected: the crop was not tested");
    cr_assert_str_eq(out[0], out[1]);
    free(out[0]);
    free(out[1]);
    snprintf(cmd, sizeof cmd, "./recall replay %s --bench x --problem 0 --trace y --draft 33 2>&1", blob);
    cr_assert_eq(fixture_sh(cmd, &out[0]), 2);
    cr_expect(strstr(out[0], "--draft 33") && strstr(out[0], "0..32"), "%s", out[0]);
    free(out[0]);
}
