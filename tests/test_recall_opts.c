/* test_recall_opts.c - the precision-side loop options (recall.h: fire_once, hysteresis, floor) on
 * worldA (f32), one generated turn over a ~800-token feed built from benchmark problem 0 (3 facts,
 * fillers, then a probe), with a threshold of -1e9 so that every gate check is over it:
 *   baseline      every check fires and injects
 *   fire_once     only the first check fires; the injection stays for the rest of the turn
 *   hysteresis 3  the first two checks do not fire, every later one does
 *   floor 1e30    every check fires, nothing is injected, and the reply is the no-fire reply */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rc_blob *blob;
    int32_t *feed;
    int n_feed;
} opts_fixture;

static void setup_feed(opts_fixture *fx) {
    fx->blob = fixture_open_worldA("f32");
    rc_problem p = fixture_problem(0);
    recall_err err = {0};
    rc_recall_opts o;
    rc_recall_defaults(fx->blob, &o);
    o.arm = RC_ARM_SP; /* only for the tokenizer */
    rc_recall *r;
    cr_assert_eq(rc_recall_open(fx->blob, &o, &r, &err), RECALL_OK, "%s", err.msg);
    fx->feed = malloc(4096 * sizeof *fx->feed);
    fx->n_feed = 0;
    for (int i = 0; i < p.n; i++) {
        const rc_step *st = &p.steps[i];
        int forced = st->kind == RC_STEP_FACT || st->kind == RC_STEP_FILLER;
        if (forced && fx->n_feed >= 760) continue; /* enough history: go to the probe */
        if (!forced && st->kind != RC_STEP_PROBE) continue;
        int32_t *seg;
        size_t n;
        cr_assert_eq(rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), fx->n_feed > 0, st->user,
                                     forced ? st->assistant : NULL, &seg, &n, &err), RECALL_OK);
        cr_assert_lt(fx->n_feed + (int)n, 4096);
        memcpy(fx->feed + fx->n_feed, seg, n * sizeof *seg);
        fx->n_feed += (int)n;
        free(seg);
        if (!forced) break;
    }
    cr_assert_geq(fx->n_feed, 760);
    cr_assert_leq(fx->n_feed, 900);
    rc_recall_close(r);
    rc_problem_free(&p);
}

static void run(opts_fixture *fx, void (*tweak)(rc_recall_opts *), rc_turn *t) {
    rc_recall_opts o;
    rc_recall_defaults(fx->blob, &o);
    o.threshold = -1e9f;
    o.turn_cap = 40;
    if (tweak) tweak(&o);
    rc_recall *r;
    recall_err err = {0};
    cr_assert_eq(rc_recall_open(fx->blob, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_recall_reply(r, fx->feed, fx->n_feed, NULL, NULL, t, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
    cr_assert_geq(t->n_gates, 4, "only %d gate checks: the test needs several", t->n_gates);
    for (int i = 0; i < t->n_gates; i++) cr_assert_gt(t->gates[i].score, -1e9f);
}

/* The feed built and one turn run on it with the options tweaked. */
static opts_fixture feed_and_run(void (*tweak)(rc_recall_opts *), rc_turn *t) {
    opts_fixture fx;
    setup_feed(&fx);
    run(&fx, tweak, t);
    return fx;
}

static void done(opts_fixture *fx, rc_turn *t) {
    rc_turn_free(t);
    free(fx->feed);
    rc_blob_close(fx->blob);
}

/* The rebuild after the fire at c0 carries the injected ids from then on. */
static int inj_at(const rc_turn *t, int c0) {
    for (int i = 0; i < t->n_rebuilds; i++)
        if (t->rebuilds[i].c0 == c0) return t->rebuilds[i].inj_len;
    return -1;
}

Test(recall_opts, baseline_always_fires, .timeout = 300) {
    rc_turn t;
    opts_fixture fx = feed_and_run(NULL, &t);
    cr_assert_eq(t.n_fires, t.n_gates);
    for (int i = 0; i < t.n_gates; i++) {
        cr_assert(t.gates[i].fired);
        cr_assert(t.fires[i].injected);
        cr_assert_eq(t.fires[i].c0, t.gates[i].c0);
        cr_assert_gt(t.fires[i].nrid, 0);
        cr_assert_eq(inj_at(&t, t.fires[i].c0), t.fires[i].nrid);
    }
    done(&fx, &t);
}

static void fire_once(rc_recall_opts *o) { o->fire_once = 1; }
Test(recall_opts, fire_once, .timeout = 300) {
    rc_turn t;
    opts_fixture fx = feed_and_run(fire_once, &t);
    cr_assert_eq(t.n_fires, 1, "%d fires", t.n_fires);
    cr_assert(t.fires[0].injected);
    cr_assert(t.gates[0].fired);
    for (int i = 1; i < t.n_gates; i++) cr_assert(!t.gates[i].fired, "gate %d fired again", i);
    /* the single injection stays in context for the rest of the turn */
    for (int i = 0; i < t.n_rebuilds; i++)
        if (t.rebuilds[i].c0 >= t.fires[0].c0) cr_assert_eq(t.rebuilds[i].inj_len, t.fires[0].nrid);
    done(&fx, &t);
}

static void hyst3(rc_recall_opts *o) { o->hysteresis = 3; }
Test(recall_opts, hysteresis, .timeout = 300) {
    rc_turn t;
    opts_fixture fx = feed_and_run(hyst3, &t);
    cr_assert(!t.gates[0].fired && !t.gates[1].fired);
    for (int i = 2; i < t.n_gates; i++) cr_assert(t.gates[i].fired, "gate %d", i);
    cr_assert_eq(t.n_fires, t.n_gates - 2);
    cr_assert_eq(t.fires[0].c0, t.gates[2].c0);
    for (int i = 0; i < t.n_rebuilds; i++)
        if (t.rebuilds[i].c0 < t.gates[2].c0) cr_assert_eq(t.rebuilds[i].inj_len, 0);
    done(&fx, &t);
}

static void high_floor(rc_recall_opts *o) {
    o->use_floor = 1;
    o->floor = 1e30f;
}
static void no_fire(rc_recall_opts *o) { o->threshold = INFINITY; }
Test(recall_opts, floor_above_every_bridge_score, .timeout = 300) {
    rc_turn t, ref;
    opts_fixture fx = feed_and_run(high_floor, &t);
    cr_assert_eq(t.n_fires, t.n_gates);
    for (int i = 0; i < t.n_fires; i++) {
        cr_assert(!t.fires[i].injected, "fire %d injected", i);
        cr_assert_gt(t.fires[i].ncand, 0);
        for (int c = 0; c < t.fires[i].ncand; c++) cr_assert_lt(t.fires[i].bridge[c], 1e30f);
    }
    for (int i = 0; i < t.n_rebuilds; i++) cr_assert_eq(t.rebuilds[i].inj_len, 0);
    /* nothing injected: the turn is exactly the one that never fires */
    run(&fx, no_fire, &ref);
    cr_assert_eq(ref.n_fires, 0);
    cr_assert_eq(ref.n_reply, t.n_reply);
    for (int i = 0; i < t.n_reply; i++) cr_assert_eq(ref.reply[i], t.reply[i]);
    for (int i = 0; i < t.n_gates; i++) cr_assert_eq(ref.gates[i].score, t.gates[i].score);
    rc_turn_free(&ref);
    done(&fx, &t);
}
