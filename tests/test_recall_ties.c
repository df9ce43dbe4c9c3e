/* test_recall_ties.c - the recall loop's retrieval picks tied candidates as torch.topk on CPU
 * does (docs/NUMERICS.md, "Ties"), on worldA (f32), one turn with every gate check over
 * the threshold (-1e9) so that each rebuild past the first sealed block fires.
 *
 * The dialogue is built from turns of exactly one block (128 ids; the user line of a benchmark
 * turn is padded with " Really." / " so" until its chat segment is 128 ids), so that sealed
 * block b is turn b. A filler turn repeated several times gives sealed blocks with identical ids,
 * hence the same BGE embedding and bitwise equal bridge scores. Layout letters: a/b = facts 0/1
 * of benchmark problem 0, E / C = its fillers 4 / 2 (0-based); the probe turn ends the feed.
 *
 * Every fire must select the candidates torch.topk itself picks from its bridge scores and inject
 * exactly those candidates' ids in chronological order. torch's picks are a golden made by torch
 * 1.13 (tests/golden/ties/recall_ties_torch.json, tools/make_ties_golden.py): for each fire of each
 * layout its c0, the bridge scores as fp32 bits (so the inputs are checked too) and
 * torch.topk(scores, min(2, n)).indices. One fire per layout is also pinned to the indices
 * libstdc++'s nth_element gives (hand trace in the test) and differs from "ties go to the older
 * candidate".
 * RECALL_TIES_DUMP=DIR writes each layout's fires (c0 and bridge scores) to DIR/LAYOUT.json
 * instead of checking them against the golden: the input of tools/make_ties_golden.py. */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "recall_loop.h"
#include "json.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIES_GOLDEN "tests/golden/ties/recall_ties_torch.json"

#define BLOCK 128

typedef struct {
    rc_blob *blob;
    rc_recall *r;
    int32_t feed[4096];
    int n_feed;
    rc_turn t;
} ties_fixture;

/* Appends the chat segment of (user padded, assistant), exactly one block long. */
static void add_block_turn(ties_fixture *fx, const char *user0, const char *assistant) {
    recall_err err = {0};
    char user[2048];
    for (int i = 0; i < 30; i++)
        for (int j = 0; j < 40; j++) {
            strcpy(user, user0);
            for (int x = 0; x < i; x++) strcat(user, " Really.");
            for (int x = 0; x < j; x++) strcat(user, " so");
            int32_t *seg;
            size_t n;
            cr_assert_eq(rc_chat_segment(rc_recall_bpe(fx->r), rc_recall_eos(fx->r), fx->n_feed > 0, user, assistant,
                                         &seg, &n, &err),
                         RECALL_OK, "%s", err.msg);
            if (n == BLOCK) {
                memcpy(fx->feed + fx->n_feed, seg, n * sizeof *seg);
                fx->n_feed += BLOCK;
                free(seg);
                return;
            }
            free(seg);
        }
    cr_assert_fail("no padding makes '%s' one block long", user0);
}

/* Builds the feed for `layout` and runs one turn of the fast schedule. */
static void run_layout(ties_fixture *fx, const char *layout) {
    fx->blob = fixture_open_worldA("f32");
    rc_problem p = fixture_problem(0);
    recall_err err = {0};
    rc_recall_opts o;
    rc_recall_defaults(fx->blob, &o);
    cr_assert_eq(o.block, BLOCK);
    cr_assert_eq(o.k, 2);
    o.threshold = -1e9f; /* every gate check fires */
    o.turn_cap = 4;
    cr_assert_eq(rc_recall_open(fx->blob, &o, &fx->r, &err), RECALL_OK, "%s", err.msg);
    const rc_step *fact[3], *filler[12], *probe = NULL;
    int nfact = 0, nfill = 0;
    for (int i = 0; i < p.n; i++) {
        const rc_step *st = &p.steps[i];
        if (st->kind == RC_STEP_FACT && nfact < 3) fact[nfact++] = st;
        if (st->kind == RC_STEP_FILLER && nfill < 12) filler[nfill++] = st;
        if (st->kind == RC_STEP_PROBE && !probe) probe = st;
    }
    cr_assert(nfact >= 2 && nfill >= 5 && probe);
    fx->n_feed = 0;
    for (const char *c = layout; *c; c++) {
        const rc_step *st = *c >= 'a' && *c <= 'b' ? fact[*c - 'a'] : filler[*c - 'A'];
        add_block_turn(fx, st->user, st->assistant);
    }
    int32_t *seg;
    size_t n;
    cr_assert_eq(rc_chat_segment(rc_recall_bpe(fx->r), rc_recall_eos(fx->r), 1, probe->user, NULL, &seg, &n, &err),
                 RECALL_OK);
    memcpy(fx->feed + fx->n_feed, seg, n * sizeof *seg);
    fx->n_feed += (int)n;
    free(seg);
    rc_problem_free(&p);
    /* the repeated turns really are identical sealed blocks */
    for (int b = 0; layout[b]; b++)
        for (int c = b + 1; layout[c]; c++)
            if (layout[b] == layout[c])
                cr_assert(!memcmp(fx->feed + b * BLOCK, fx->feed + c * BLOCK, BLOCK * sizeof *fx->feed), "%d %d", b, c);
    cr_assert_eq(rc_recall_reply(fx->r, fx->feed, fx->n_feed, NULL, NULL, &fx->t, &err), RECALL_OK, "%s", err.msg);
}

static void done(ties_fixture *fx) {
    rc_turn_free(&fx->t);
    rc_recall_close(fx->r);
    rc_blob_close(fx->blob);
}

/* Candidate c at a fire: sealed block c, or the pending buffer (evicted ids past the last seal). */
static const int32_t *candidate(const ties_fixture *fx, const rc_fire_rec *f, int c, int *n) {
    int nd = f->c0 - 512, sealed = nd / BLOCK;
    cr_assert_leq(nd, fx->n_feed);
    *n = c < sealed ? BLOCK : nd - sealed * BLOCK;
    return fx->feed + c * BLOCK;
}

/* "Ties go to the older candidate" (the previous rule), ascending. */
static void older_wins(const float *s, int n, int out[2]) {
    out[0] = out[1] = -1;
    for (int j = 0; j < 2 && j < n; j++)
        for (int c = 0; c < n; c++)
            if (c != out[0] && (out[j] < 0 || s[c] > s[out[j]])) out[j] = c;
    if (out[1] >= 0 && out[0] > out[1]) {
        int t = out[0];
        out[0] = out[1];
        out[1] = t;
    }
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* RECALL_TIES_DUMP: the layout's fires for tools/make_ties_golden.py (scores to 9 digits: exact). */
static void dump_fires(const rc_turn *t, const char *dir, const char *layout) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", dir, layout);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fprintf(f, "{\"layout\": \"%s\", \"fires\": [", layout);
    for (int i = 0; i < t->n_fires; i++) {
        fprintf(f, "%s\n  {\"c0\": %d, \"bridge\": [", i ? "," : "", t->fires[i].c0);
        for (int c = 0; c < t->fires[i].ncand; c++) fprintf(f, "%s%.9g", c ? ", " : "", (double)t->fires[i].bridge[c]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    cr_assert_eq(fclose(f), 0);
}

/* The golden fires of `layout` (torch's picks). */
static const json_value *golden_fires(json_doc **doc, const char *layout) {
    recall_err err = {0};
    char *text;
    size_t len;
    cr_assert_eq(rc_read_file(TIES_GOLDEN, &text, &len, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(json_parse(text, len, TIES_GOLDEN, doc, &err), RECALL_OK, "%s", err.msg);
    free(text);
    const json_value *l = json_get_type(json_get_type(json_root(*doc), "layouts", JSON_OBJ), layout, JSON_ARR);
    cr_assert(l, "%s has no layout %s (tools/make_ties_golden.py)", TIES_GOLDEN, layout);
    return l;
}

/* Every fire: top = sorted(torch.topk(bridge, min(2, n)).indices) from the golden (same c0, same
 * bridge bits) and rid = those candidates' ids. Returns the number of fires where that differs
 * from "older wins". */
static int check_fires(const ties_fixture *fx, const char *layout) {
    const rc_turn *t = &fx->t;
    cr_assert_geq(t->n_fires, 8, "%d fires", t->n_fires);
    const char *dump = getenv("RECALL_TIES_DUMP");
    if (dump && *dump) {
        dump_fires(t, dump, layout);
        return 0;
    }
    json_doc *doc;
    const json_value *gold = golden_fires(&doc, layout);
    cr_assert_eq((int)gold->len, t->n_fires, "%s: %d fires, the golden has %zu", layout, t->n_fires, gold->len);
    int differ = 0;
    for (int i = 0; i < t->n_fires; i++) {
        const rc_fire_rec *f = &t->fires[i];
        const json_value *g = &gold->items[i], *bits = json_get_type(g, "bridge_bits", JSON_ARR);
        const json_value *top = json_get_type(g, "top", JSON_ARR), *c0 = json_get(g, "c0");
        cr_assert(bits && top && c0, "golden fire %d of %s", i, layout);
        cr_assert_eq(f->c0, (int)c0->num, "%s fire %d: c0 %d, the golden's %d", layout, i, f->c0, (int)c0->num);
        cr_assert_eq(f->ncand, (int)bits->len, "%s fire at %d: %d candidates, the golden has %zu", layout, f->c0, f->ncand,
                     bits->len);
        for (int c = 0; c < f->ncand; c++)
            cr_assert_eq(fbits(f->bridge[c]), (uint32_t)strtoul(bits->items[c].str, NULL, 16),
                         "%s fire at %d: bridge[%d] = %08x, the golden's torch input %s", layout, f->c0, c,
                         fbits(f->bridge[c]), bits->items[c].str);
        const int k = f->ncand < 2 ? f->ncand : 2;
        cr_assert_eq(f->ntop, k);
        cr_assert_eq((int)top->len, k);
        int off = 0;
        for (int j = 0; j < k; j++) {
            const int want = (int)top->items[j].num;
            cr_assert_eq(f->top[j], want, "%s fire at %d: top[%d] = %d, torch.topk picks %d", layout, f->c0, j, f->top[j],
                         want);
            int n;
            const int32_t *ids = candidate(fx, f, want, &n);
            cr_assert_leq(off + n, f->nrid);
            cr_assert(!memcmp(f->rid + off, ids, (size_t)n * sizeof *ids), "fire at %d: injected ids", f->c0);
            off += n;
        }
        cr_assert_eq(off, f->nrid);
        int ow[2];
        older_wins(f->bridge, f->ncand, ow);
        differ += k == 2 && (ow[0] != f->top[0] || ow[1] != f->top[1]);
    }
    json_free(doc);
    return differ;
}

/* The layout run, and its fire at c0, which must have ncand candidates. */
static const rc_fire_rec *fire_at(ties_fixture *fx, const char *layout, int c0, int ncand) {
    run_layout(fx, layout);
    const rc_turn *t = &fx->t;
    for (int i = 0; i < t->n_fires; i++)
        if (t->fires[i].c0 == c0) {
            cr_assert_eq(t->fires[i].ncand, ncand);
            return &t->fires[i];
        }
    cr_assert_fail("no fire at c0 = %d", c0);
    return NULL;
}

/* Every fire of the layout's run against its golden; at least `at_least` of them decided
 * differently from older-wins (not asserted while the goldens are being dumped). */
static void expect_differs_from_older_wins(const ties_fixture *fx, const char *layout, int at_least) {
    int differ = check_fires(fx, layout);
    cr_log_info("recall_ties %s: %d fires, %d decided differently from older-wins", layout, fx->t.n_fires, differ);
    if (!getenv("RECALL_TIES_DUMP")) cr_assert_geq(differ, at_least);
}

static int same_bits(float a, float b) {
    return !memcmp(&a, &b, sizeof a);
}

/* Blocks: 0 fact, 1 E, 2 fact, 3 E, 4 E, ... At c0 = 1216 the candidates are blocks 0..4 and the
 * pending buffer (64 ids): scores (x, y, z, y, y, w) with the three identical E blocks tied at the
 * top. libstdc++'s nth_element(p, p + 1, p + 6): median of p[1], p[3], p[5] -> y1 to the front;
 * Hoare partition of p[1..6) around it swaps (1,4) then (2,3) -> (y1 y4 y3 | z x w), cut 3; the
 * insertion sort of (y1 y4 y3) moves nothing on ties -> top-2 = {1, 4}. Older-wins: {1, 3}. The
 * injected ids are the same (1, 3 and 4 are identical): the trace's chosen blocks differ. */
Test(recall_ties, identical_blocks_tie_newer_copy_wins, .timeout = 600) {
    ties_fixture fx;
    const rc_fire_rec *f = fire_at(&fx, "aEbEEEEEEE", 1216, 6);
    const float *s = f->bridge;
    cr_assert(same_bits(s[1], s[3]) && same_bits(s[1], s[4]), "the identical blocks' scores differ");
    cr_assert(s[1] > s[0] && s[1] > s[2] && s[1] > s[5], "the tied copies are not the best");
    cr_assert_eq(f->top[0], 1);
    cr_assert_eq(f->top[1], 4);
    int ow[2];
    older_wins(s, 6, ow);
    cr_assert(ow[0] == 1 && ow[1] == 3);
    expect_differs_from_older_wins(&fx, "aEbEEEEEEE", 1);
    done(&fx);
}

/* Blocks: 0 fact, 1 E, 2 C, 3 E, ... The C filler's text reaches the same bridge score as E's on
 * worldA (its tiny tokenizers), so here the tie changes what is injected. At c0 = 1088 the
 * candidates are blocks 0..3 and the pending buffer: (x, y, y, y, w), y greatest. nth_element:
 * median of p[1], p[2], p[4] -> y1 to the front; the partition swaps (1,3) -> (y1 y3 | y2 x w),
 * cut 2; insertion sort keeps (y1 y3) -> {1, 3}: E + E. Older-wins: {1, 2}: E + C. */
Test(recall_ties, tie_decides_the_injected_ids, .timeout = 600) {
    ties_fixture fx;
    const rc_fire_rec *f = fire_at(&fx, "aECEEEEEEE", 1088, 5);
    const float *s = f->bridge;
    cr_assert(same_bits(s[1], s[2]) && same_bits(s[1], s[3]), "no three-way tie");
    cr_assert(s[1] > s[0] && s[1] > s[4]);
    cr_assert(memcmp(fx.feed + 1 * BLOCK, fx.feed + 2 * BLOCK, BLOCK * sizeof *fx.feed), "blocks 1 and 2 should differ");
    cr_assert_eq(f->top[0], 1);
    cr_assert_eq(f->top[1], 3);
    cr_assert_eq(f->nrid, 2 * BLOCK);
    cr_assert(!memcmp(f->rid + BLOCK, fx.feed + 3 * BLOCK, BLOCK * sizeof *f->rid));
    cr_assert(memcmp(f->rid + BLOCK, fx.feed + 2 * BLOCK, BLOCK * sizeof *f->rid), "older-wins' injection");
    expect_differs_from_older_wins(&fx, "aECEEEEEEE", 3);
    done(&fx);
}
