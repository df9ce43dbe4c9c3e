/* test_recall.c - the recall loop against the four worldA loop goldens (benchmark problem 0,
 * faithful/clean x fp32/nf4): every reply id, gate decision, fire, injected id, rebuild and
 * rebuild top-5 id identical; gate scores within 1e-3 absolute, bridge scores and top-5 logits
 * within 1e-3 relative. The measured maxima are logged. Also checks the CPython-compatible
 * problem builder against the table in docs/LOOP.md, "The benchmark", and that the pooler cache
 * budget never changes a bit. */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "pooler.h"
#include "json.h"
#include "q8.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

Test(bench, cpython_random_and_problems) {
    rc_pyrandom r;
    rc_pyrandom_seed(&r, 0);
    cr_expect_eq(rc_pyrandom_u32(&r), 3626764237u); /* random.Random(0).getrandbits(32) */
    rc_bench *b;
    recall_err err = {0};
    cr_assert_eq(rc_bench_load("tests/golden/recall_bench.json", &b, &err), RECALL_OK, "%s", err.msg);
    /* docs/LOOP.md, "The benchmark": question order per seed */
    const char *first_q[8] = {"reference code", "badge id", "table number", "server name",
                              "locker number", "badge id", "badge id", "flight number"};
    const char *first_fact[8] = {"ZX9043", "JL412", "Bluefin", "88231", "88231", "40718", "40718", "C12"};
    for (uint32_t seed = 0; seed < 8; seed++) {
        rc_problem p;
        cr_assert_eq(rc_bench_problem(b, seed, &p, &err), RECALL_OK);
        cr_expect_eq(p.n, 17);
        cr_expect_str_eq(p.steps[14].kw, first_q[seed], "seed %u", seed);
        cr_expect(strstr(p.steps[0].user, first_fact[seed]), "seed %u: %s", seed, p.steps[0].user);
        cr_expect_eq(p.steps[12].kind, RC_STEP_PROBE);
        cr_expect_eq(p.steps[16].kind, RC_STEP_Q);
        rc_problem_free(&p);
    }
    rc_bench_free(b);
}

/* random.Random(seed).sample(range(n), k) as CPython 3.11 draws it (printed by /usr/bin/python3):
 * n <= 21 (k <= 5) and n <= 85 (k = 6..21) take the pool method, 22, 32 and 100 the set method. */
Test(bench, cpython_sample_both_methods) {
    static const struct {
        int n, k, seed, want[7];
    } cases[] = {
        {21, 3, 0, {12, 13, 1}},  {21, 3, 7, {10, 4, 12}},  {22, 3, 0, {12, 13, 1}},
        {22, 3, 1, {4, 18, 2}},   {32, 3, 0, {24, 26, 2}},  {32, 3, 1, {8, 4, 16}},
        {32, 3, 7, {20, 9, 25}},  {40, 7, 1, {8, 36, 4, 16, 7, 31, 28}},
        {100, 6, 0, {49, 97, 53, 5, 33, 65}}, {100, 6, 7, {41, 19, 50, 83, 6, 9}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rc_pyrandom r;
        rc_pyrandom_seed(&r, (uint32_t)cases[c].seed);
        int got[7];
        rc_pysample(&r, cases[c].n, cases[c].k, got);
        for (int i = 0; i < cases[c].k; i++)
            cr_expect_eq(got[i], cases[c].want[i], "sample(range(%d), %d) seed %d: [%d] = %d, CPython %d", cases[c].n,
                         cases[c].k, cases[c].seed, i, got[i], cases[c].want[i]);
    }
}

typedef struct {
    double gate, bridge, top5;
} maxdev;

static long long ival(const json_value *v) {
    cr_assert(v && v->type == JSON_NUM);
    return (long long)v->num;
}
static double fval(const json_value *v) {
    cr_assert(v && v->type == JSON_NUM);
    return v->num;
}
static double rel(double got, double want) { return fabs(got - want) / (fabs(want) > 1.0 ? fabs(want) : 1.0); }

static void check_turn(const json_value *g, const rc_problem_turn *t, int ti, maxdev *md) {
    const rc_turn *u = &t->turn;
    cr_expect_eq(t->feed_len, ival(json_get(g, "feed_len")), "turn %d feed_len", ti);
    const json_value *reply = json_get(g, "reply");
    cr_assert_eq((int)reply->len, u->n_reply, "turn %d: reply has %d ids, golden %zu", ti, u->n_reply, reply->len);
    for (size_t i = 0; i < reply->len; i++)
        cr_assert_eq(u->reply[i], ival(&reply->items[i]), "turn %d reply[%zu]", ti, i);
    const json_value *gates = json_get(g, "gates");
    cr_assert_eq((int)gates->len, u->n_gates, "turn %d gate checks", ti);
    for (size_t i = 0; i < gates->len; i++) {
        const json_value *e = &gates->items[i];
        cr_expect_eq(u->gates[i].c0, ival(&e->items[0]));
        double d = fabs(u->gates[i].score - fval(&e->items[1]));
        if (d > md->gate) md->gate = d;
        cr_expect_leq(d, 1e-3, "turn %d gate %zu: %.7g vs %.7g", ti, i, u->gates[i].score, fval(&e->items[1]));
        cr_assert_eq(u->gates[i].fired, e->items[2].num != 0, "turn %d gate %zu decision", ti, i);
    }
    const json_value *fires = json_get(g, "fires");
    cr_assert_eq((int)fires->len, u->n_fires, "turn %d fires", ti);
    for (size_t i = 0; i < fires->len; i++) {
        const json_value *e = &fires->items[i];
        const rc_fire_rec *f = &u->fires[i];
        cr_expect_eq(f->c0, ival(json_get(e, "c0")));
        cr_assert_eq(f->ncand, ival(json_get(e, "ncand")));
        const json_value *br = json_get(e, "bridge"), *top = json_get(e, "top"), *rid = json_get(e, "rid");
        for (int c = 0; c < f->ncand; c++) {
            double d = rel(f->bridge[c], fval(&br->items[c]));
            if (d > md->bridge) md->bridge = d;
            cr_expect_leq(d, 1e-3, "turn %d fire %zu bridge %d", ti, i, c);
        }
        cr_assert_eq(f->ntop, (int)top->len);
        for (int k = 0; k < f->ntop; k++) cr_assert_eq(f->top[k], ival(&top->items[k]), "turn %d fire %zu top", ti, i);
        cr_assert_eq(f->nrid, (int)rid->len);
        for (int k = 0; k < f->nrid; k++) cr_assert_eq(f->rid[k], ival(&rid->items[k]));
    }
    const json_value *rb = json_get(g, "rebuilds");
    cr_assert_eq((int)rb->len, u->n_rebuilds);
    for (size_t i = 0; i < rb->len; i++) {
        const json_value *e = &rb->items[i];
        cr_expect(u->rebuilds[i].c0 == ival(&e->items[0]) && u->rebuilds[i].has_sp == ival(&e->items[1]) &&
                      u->rebuilds[i].inj_len == ival(&e->items[2]) && u->rebuilds[i].window_len == ival(&e->items[3]),
                  "turn %d rebuild %zu", ti, i);
    }
    const json_value *t5 = json_get(g, "rebuild_top5");
    cr_assert_eq((int)t5->len, u->n_top5);
    for (size_t i = 0; i < t5->len; i++) {
        const json_value *ids = &t5->items[i].items[1], *lg = &t5->items[i].items[2];
        for (int k = 0; k < 5; k++) {
            cr_expect_eq(u->top5[i].ids[k], ival(&ids->items[k]), "turn %d top5 %zu/%d", ti, i, k);
            double d = rel(u->top5[i].logits[k], fval(&lg->items[k]));
            if (d > md->top5) md->top5 = d;
        }
    }
}

static long total_rows(const rc_problem_run *run) {
    long n = 0;
    for (int t = 0; t < run->n_turns; t++) n += run->turns[t].turn.rows_computed;
    return n;
}

static void run_golden_threads(const char *golden, const char *weights, rc_loop_mode mode, int threads) {
    rc_blob *b = fixture_open_worldA(weights);
    json_doc *doc = fixture_json(golden);
    const json_value *root = json_root(doc);
    rc_problem p = fixture_problem(0);
    recall_err err = {0};
    const json_value *steps = json_get(root, "steps");
    cr_assert_eq((int)steps->len, p.n);
    for (int i = 0; i < p.n; i++)
        cr_expect_str_eq(p.steps[i].user, json_get(&steps->items[i], "u")->str, "step %d", i);

    rc_problem_run runs[2];
    for (int sched = 0; sched < 2; sched++) { /* 0: fast (default), 1: reference schedule */
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        o.mode = mode;
        o.reference_schedule = sched;
        o.exec.threads = threads;
        cr_expect_eq(o.threshold, 0.0f); /* the gate file's thresh */
        rc_recall *r;
        cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
        rc_problem_run *run = &runs[sched];
        cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, run, &err), RECALL_OK, "%s", err.msg);
        const json_value *turns = json_get(root, "turns");
        cr_assert_eq((int)turns->len, run->n_turns);
        maxdev md = {0, 0, 0};
        for (int t = 0; t < run->n_turns; t++) check_turn(&turns->items[t], &run->turns[t], t, &md);
        const json_value *fh = json_get(root, "final_history");
        cr_assert_eq((int)fh->len, run->n_history);
        for (size_t i = 0; i < fh->len; i++)
            cr_assert_eq(run->history[i], ival(&fh->items[i]), "final_history[%zu]", i);
        cr_log_info("%s (%s schedule): max |gate - golden| %.3g, max rel bridge %.3g, max rel top5 logit %.3g, "
                    "%ld decoder rows", golden, sched ? "reference" : "fast", md.gate, md.bridge, md.top5,
                    total_rows(run));
        rc_recall_close(r);
    }
    fixture_expect_same_run(&runs[0], &runs[1], "fast vs reference schedule");
    /* The floor counters (recall_loop.h) are parts of rows_computed; the first turn resumes
     * nothing, so both schedules run the same seal forwards in it. */
    for (int sched = 0; sched < 2; sched++)
        for (int t = 0; t < runs[sched].n_turns; t++) {
            const rc_turn *x = &runs[sched].turns[t].turn;
            cr_expect_leq(x->rows_new_gist + x->rows_seal + x->n_reply, x->rows_computed, "schedule %d turn %d", sched, t);
        }
    cr_expect_eq(runs[0].turns[0].turn.rows_seal, runs[1].turns[0].turn.rows_seal);
    cr_expect_eq(runs[0].turns[0].turn.rows_seal > 0, mode == RC_MODE_FAITHFUL);
    /* The first turn has nothing to reuse but its window-filling rebuilds; every later turn
     * resumes from the previous one and must compute at least 5x fewer decoder rows. */
    cr_expect_lt(total_rows(&runs[0]) * 4, total_rows(&runs[1]), "fast schedule computes %ld rows, reference %ld",
                 total_rows(&runs[0]), total_rows(&runs[1]));
    for (int t = 1; t < runs[0].n_turns; t++) {
        long f = runs[0].turns[t].turn.rows_computed, r = runs[1].turns[t].turn.rows_computed;
        cr_log_info("turn %d: %ld rows fast, %ld reference (%.1fx)", t, f, r, (double)r / (double)f);
        cr_expect_lt(f * 5, r, "turn %d: %ld rows fast vs %ld reference", t, f, r);
    }
    rc_problem_run_free(&runs[0]);
    rc_problem_run_free(&runs[1]);
    rc_problem_free(&p);
    json_free(doc);
    rc_blob_close(b);
}

/* The loop under the q8 profile: the fast schedule at 2 threads on the best path and the reference
 * schedule at 1 thread on the scalar path give the same bits (q8 is deterministic in its own
 * right, rows independent as in exact), and they are not the exact profile's bits. */
static void q8_schedules_threads_and_paths(int keep_turns) {
    rc_blob *b = fixture_open_worldA("nf4");
    recall_err err = {0};
    rc_problem p = fixture_problem(0);
    if (keep_turns) rc_problem_keep_turns(&p, keep_turns);
    rc_problem_run runs[3];
    for (int i = 0; i < 3; i++) { /* q8 fast x2, q8 reference scalar x1, exact fast */
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        o.exec.numerics = i < 2 ? RC_NUMERICS_Q8 : RC_NUMERICS_EXACT;
        o.reference_schedule = i == 1;
        o.exec.threads = i == 0 ? 2 : 1;
        o.exec.simd = i == 1 ? "scalar" : NULL;
        rc_recall *r;
        cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, &runs[i], &err), RECALL_OK, "%s", err.msg);
        rc_recall_close(r);
    }
    fixture_expect_same_run(&runs[0], &runs[1], "q8 fast x2 vs reference scalar x1");
    int differ = 0;
    for (int t = 0; t < runs[0].n_turns && t < runs[2].n_turns; t++) {
        const rc_turn *q = &runs[0].turns[t].turn, *x = &runs[2].turns[t].turn;
        for (int i = 0; i < q->n_gates && i < x->n_gates; i++) differ += memcmp(&q->gates[i].score, &x->gates[i].score, 4) != 0;
    }
    cr_expect_gt(differ, 0, "q8 gate scores should differ from exact somewhere");
    for (int i = 0; i < 3; i++) rc_problem_run_free(&runs[i]);
    rc_problem_free(&p);
    rc_blob_close(b);
}
Test(recall_q8, schedules_threads_and_paths_agree_bitwise, .timeout = 900) { q8_schedules_threads_and_paths(0); }
/* The same on the problem's first turn (the fast tier's form; tests/full_tier.txt). */
Test(recall_q8, first_turn_schedules_threads_and_paths_agree_bitwise, .timeout = 300) {
    q8_schedules_threads_and_paths(1);
}

static void run_golden(const char *golden, const char *weights, rc_loop_mode mode) {
    run_golden_threads(golden, weights, mode, 1);
}

/* Both schedules at 2 threads: the same goldens, bitwise equal to each other (and, through the
 * golden check, to the 1-thread runs, since every thread count computes the same bits). */
Test(recall_golden, faithful_nf4_2threads, .timeout = 900) {
    run_golden_threads("tests/golden/worldA/loop_A_seed0_faithful_nf4.json", "nf4", RC_MODE_FAITHFUL, 2);
}

FIXTURE_LOOP_GOLDENS(recall_golden, , run_golden)

/* The pooler's K/V cache at the loop: off, a budget smaller than the conversation's evicted
 * history and the default give the bits of each other (and, through the golden tests above,
 * of the reference schedule, which never caches). */
Test(recall_golden, pooler_cache_budgets_same_bits, .timeout = 900) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_problem p = fixture_problem(0);
    static const int budgets[] = {-1, 1, 0}; /* off, 1 MiB, the default */
    rc_problem_run runs[3];
    rc_pooler_stats st[3];
    for (int k = 0; k < 3; k++) {
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        o.pooler_cache_mb = budgets[k];
        rc_recall *r;
        cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, &runs[k], &err), RECALL_OK, "%s", err.msg);
        rc_recall_pooler_stats(r, &st[k]);
        rc_recall_close(r);
    }
    const int L = st[0].last_L;
    cr_log_info("last rebuild: %d evicted tokens; 1 MiB cached %d, streamed %d", L, st[1].last_cached,
                st[1].last_streamed);
    cr_expect_eq(st[0].cache_bytes, 0u);
    cr_expect_eq(st[0].last_streamed, L);
    cr_expect(st[1].last_cached > 0 && st[1].last_streamed > 0, "1 MiB: a part of the history from the cache");
    cr_expect_leq(st[1].cache_bytes, (size_t)1 << 20);
    cr_expect(L > 0 && st[2].last_cached + st[2].last_filled == L, "the default holds the whole history");
    fixture_expect_same_run(&runs[1], &runs[0], "pooler cache 1 MiB");
    fixture_expect_same_run(&runs[2], &runs[0], "pooler cache default");
    for (int k = 0; k < 3; k++) rc_problem_run_free(&runs[k]);
    rc_problem_free(&p);
    rc_blob_close(b);
}
