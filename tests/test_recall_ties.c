/* test_recall_ties.c - a recall fire that has to choose between two identical blocks
 * (RECALL_SPEC §E, "Top-k selection": torch.topk on CPU, ties included).
 *
 * The dialogue (worldA f32, benchmark problem 0's texts): one fact turn (25 tokens), then the same
 * 96-token filler turn eight times, then other fillers up to ~1160 tokens, then a probe. Four
 * repetitions of the filler are 384 = 3 * 128 tokens, so sealed blocks 1 and 4 (and 2 and 5) hold
 * identical ids: the same text, the same BGE embedding, the same bridge score at every fire.
 * Every gate check fires (threshold -1e9) with the blob's k = 2. At the first fire that sees
 * block 4 sealed (c0 = window + 5 * block = 1152; candidates = blocks 0..4) block 2 scores
 * highest and blocks 1 and 4 tie for the second place. torch.topk takes the newer one (4); the
 * old "ties go to the older candidate" rule took 1. */
#include "blob.h"
#include "fixture.h"
#include "problems.h"
#include "recall_loop.h"
#include "topk.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

enum { FILLER_STEP = 9, FILLER_LEN = 96, REPS = 8, FEED_MIN = 1160 };

static void add_turn(const rc_recall *r, int32_t *feed, int *n_feed, const char *user, const char *assistant) {
    recall_err err = {0};
    int32_t *seg;
    size_t n;
    cr_assert_eq(rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), *n_feed > 0, user, assistant, &seg, &n, &err),
                 RECALL_OK, "%s", err.msg);
    cr_assert_lt(*n_feed + (int)n, 4096);
    memcpy(feed + *n_feed, seg, n * sizeof *seg);
    *n_feed += (int)n;
    free(seg);
}

/* fact 0, FILLER_STEP x REPS, the other fillers until FEED_MIN tokens, the first probe (open) */
static int build_feed(const rc_blob *b, int32_t *feed) {
    recall_err err = {0};
    rc_bench *bench;
    cr_assert_eq(rc_bench_load("tests/golden/recall_bench.json", &bench, &err), RECALL_OK, "%s", err.msg);
    rc_problem p;
    cr_assert_eq(rc_bench_problem(bench, 0, &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(p.steps[0].kind, RC_STEP_FACT);
    cr_assert_eq(p.steps[FILLER_STEP].kind, RC_STEP_FILLER);
    cr_assert_eq(p.steps[12].kind, RC_STEP_PROBE);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.arm = RC_ARM_SP; /* only for the tokenizer */
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    int n = 0;
    add_turn(r, feed, &n, p.steps[0].user, p.steps[0].assistant);
    int start = n;
    for (int i = 0; i < REPS; i++) {
        add_turn(r, feed, &n, p.steps[FILLER_STEP].user, p.steps[FILLER_STEP].assistant);
        cr_assert_eq(n - start, (i + 1) * FILLER_LEN, "the filler turn is %d tokens, not %d", n - start - i * FILLER_LEN,
                     FILLER_LEN);
    }
    for (int i = 3; i < 12 && n < FEED_MIN; i++)
        if (i != FILLER_STEP) add_turn(r, feed, &n, p.steps[i].user, p.steps[i].assistant);
    cr_assert_geq(n, FEED_MIN);
    add_turn(r, feed, &n, p.steps[12].user, NULL);
    rc_recall_close(r);
    rc_problem_free(&p);
    rc_bench_free(bench);
    return n;
}

/* The retired rule, for contrast: higher score first, equal scores -> lower (older) index. */
static void older_wins(const float *v, int n, int k, int *top) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int c = 0; c < n; c++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= top[i] == c;
            if (!taken && (best < 0 || v[c] > v[best])) best = c;
        }
        top[j] = best;
    }
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* torch.topk's choice for a fire, as a set in ascending order (what the loop records). */
static void torch_choice(const rc_fire_rec *f, int k, int *top) {
    rc_topk_pair scratch[64 * 8];
    int32_t idx[8];
    cr_assert_leq(rc_topk_scratch(f->ncand, k), sizeof scratch / sizeof *scratch);
    rc_topk(f->bridge, f->ncand, k, scratch, idx, NULL);
    for (int i = 0; i < k; i++) top[i] = idx[i];
    qsort(top, (size_t)k, sizeof *top, cmp_int);
}

Test(recall_ties, identical_blocks_fire_picks_torch_topk_choice, .timeout = 300) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_err err = {0};
    rc_blob *b;
    cr_assert_eq(rc_blob_open(path, 0, &b, &err), RECALL_OK, "%s", err.msg);
    int32_t *feed = malloc(4096 * sizeof *feed);
    cr_assert(feed);
    int n_feed = build_feed(b, feed);

    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.threshold = -1e9f; /* every gate check fires */
    o.turn_cap = 4;
    const int B = o.block, k = o.k;
    cr_assert_eq(B, 128);
    cr_assert_eq(k, 2);
    /* blocks 1 and 4 (and 2 and 5) are the same ids; no other pair is */
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++) {
            int same = !memcmp(feed + i * B, feed + j * B, (size_t)B * sizeof *feed);
            cr_assert_eq(same, (i == 1 && j == 4) || (i == 2 && j == 5), "blocks %d and %d", i, j);
        }

    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    rc_turn t;
    cr_assert_eq(rc_recall_reply(r, feed, n_feed, NULL, NULL, &t, &err), RECALL_OK, "%s", err.msg);

    /* every fire takes torch.topk's choice (rc_topk: 4,000 torch cases in test_topk.c) */
    const int c0_tie = o.window + 5 * B;
    const rc_fire_rec *tie = NULL;
    for (int f = 0; f < t.n_fires; f++) {
        const rc_fire_rec *fr = &t.fires[f];
        int kk = k < fr->ncand ? k : fr->ncand, want[8];
        torch_choice(fr, kk, want);
        cr_assert_eq(fr->ntop, kk, "fire at c0 %d", fr->c0);
        for (int i = 0; i < kk; i++) cr_assert_eq(fr->top[i], want[i], "fire at c0 %d: top[%d]", fr->c0, i);
        if (fr->c0 == c0_tie) tie = fr;
    }
    cr_assert(tie, "no fire at c0 %d (%d fires)", c0_tie, t.n_fires);

    /* The fire at c0 1152: candidates are blocks 0..4 (no pending buffer), scores v2 > v1 = v4 >
     * v3 > v0, the tie bitwise. torch.topk depends only on that order pattern, and torch 1.13 on
     * CPU gives indices [2, 4] for it: /usr/bin/python3 -c "import torch;
     * print(torch.topk(torch.tensor([0., 2., 3., 1., 2.]), 2).indices)"; also for the exact scores
     * (15.3313122, 17.513401, 19.1223164, 17.329073, 17.513401). */
    const float *v = tie->bridge;
    cr_assert_eq(tie->ncand, 5);
    cr_assert(!memcmp(&v[1], &v[4], sizeof *v), "blocks 1 and 4 score %.9g and %.9g", v[1], v[4]);
    cr_assert(v[2] > v[1] && v[4] > v[3] && v[3] > v[0], "order pattern: %.9g %.9g %.9g %.9g %.9g", v[0], v[1], v[2],
              v[3], v[4]);
    cr_assert_eq(tie->ntop, 2);
    cr_assert_eq(tie->top[0], 2);
    cr_assert_eq(tie->top[1], 4, "the tie went to block %d, torch.topk takes the newer block 4", tie->top[1]);
    int old[2];
    older_wins(v, 5, 2, old);
    qsort(old, 2, sizeof *old, cmp_int);
    cr_assert(old[0] == 1 && old[1] == 2, "older-wins would take %d %d", old[0], old[1]);
    /* what was injected: block 2 then block 4 (chronological). Block 4 has block 1's ids, so the
     * observable difference is the order: the older-wins choice injects [block 1][block 2]. */
    cr_assert(tie->injected);
    cr_assert_eq(tie->nrid, 2 * B);
    cr_assert(!memcmp(tie->rid, feed + 2 * B, (size_t)B * sizeof *feed));
    cr_assert(!memcmp(tie->rid + B, feed + 4 * B, (size_t)B * sizeof *feed));

    rc_turn_free(&t);
    rc_recall_close(r);
    free(feed);
    rc_blob_close(b);
}
