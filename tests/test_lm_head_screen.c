/* test_lm_head_screen.c - lm_head screening (src/engine/lm_screen.h): the greedy picks it returns are
 * bitwise those of the full logits.
 *   goldens_*: the four worldA loop goldens run with screening on and off (the blob converted with
 *     --lm-head-screen): every reply id, rebuild top-5 id and logit, margin, gate and fire record
 *     bitwise equal, the golden's ids reproduced, and screening really used (most picks exact on
 *     a few rows only).
 *   adversarial_ties: a matrix with exact ties at the maximum and at the 5th place, rows 1 ulp
 *     apart, zero and NaN inputs: pick == the full reference, field by field, bit for bit, on
 *     every SIMD path this CPU runs (fixture_path_runs) at 1 and 2 threads (NEON: `make
 *     cross-test-aarch64` runs this file under qemu).
 *   bound_random: |exact - approx| <= bound on random and hostile matrices (wide dynamic range,
 *     zeros, subnormals) and inputs.
 *   build_matches_blob / missing_tensors: the blob's tensors are rc_lmscreen_build of its lm_head;
 *     a blob without them runs unscreened on auto and refuses "on".
 *   multi_row_forward: the rows of a multi-row forward (normed_all) picked through the screen give
 *     the picks of its logits_all rows (what a k+1-row verify forward needs).
 *   hostile_sections_refused / partial_section_and_views_refused: screen tensors edited after the
 *     converter made them (codes zeroed or set to -128, norms too small or too large, scales NaN or
 *     negative, a NaN in lm_head, codes without the rest) are refused at open naming the file,
 *     tensor and row (the lowest bad row at 1 and 3 threads); the untouched ones open and pick
 *     exactly. */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "lm_screen.h"
#include "problems.h"
#include "qwen2.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lcg.h"

/* roughly normal (sum of 4 uniforms, centred) */
static float next_n(lcg *g) {
    float a = 0.0f;
    for (int i = 0; i < 4; i++) a += (float)(next_u32(g) >> 8) / 16777216.0f;
    return a - 2.0f;
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- the goldens: screening on vs off -------------------------------------------------------- */

static long long ival(const json_value *v) { return v->is_int ? v->i : (long long)v->num; }

static void run_golden(const char *golden, const char *weights, rc_loop_mode mode) {
    rc_blob *b = fixture_open(fixture_worldA_screen_blob(weights));
    json_doc *doc = fixture_json(golden);
    rc_problem p = fixture_problem(0);
    recall_err err = {0};
    rc_problem_run runs[2];
    rc_lm_stats st[2];
    for (int on = 0; on < 2; on++) {
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        o.mode = mode;
        o.lm_screen = on ? RC_LM_SCREEN_ON : RC_LM_SCREEN_OFF;
        rc_recall *r;
        cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_run_problem(r, &p, NULL, NULL, NULL, &runs[on], &err), RECALL_OK, "%s", err.msg);
        rc_recall_lm_stats(r, &st[on]);
        rc_recall_close(r);
    }
    fixture_expect_same_run(&runs[0], &runs[1], golden);
    /* and the golden's ids (the unscreened run is checked in full by test_recall.c) */
    const json_value *root = json_root(doc), *fh = json_get(root, "final_history");
    cr_assert_eq((int)fh->len, runs[1].n_history);
    for (size_t i = 0; i < fh->len; i++) cr_assert_eq(runs[1].history[i], ival(&fh->items[i]), "final_history[%zu]", i);
    cr_assert_eq(st[0].screening, 0);
    cr_assert_eq(st[1].screening, 1);
    cr_assert_eq(st[0].picks, st[1].picks);
    cr_assert_gt(st[1].picks, 50);
    cr_log_info("%s: %ld picks, %ld fell back to all logits, %.1f exact rows per screened pick, %.3g of the bytes",
                golden, st[1].picks, st[1].full,
                (double)(st[1].exact_rows - st[1].full * 0) / (double)st[1].picks, st[1].bytes / st[1].full_bytes);
    cr_expect_lt(st[1].full * 4, st[1].picks, "%ld of %ld picks fell back", st[1].full, st[1].picks);
    rc_problem_run_free(&runs[0]);
    rc_problem_run_free(&runs[1]);
    rc_problem_free(&p);
    json_free(doc);
    rc_blob_close(b);
}

FIXTURE_LOOP_GOLDENS(lm_screen, goldens_, run_golden)

/* ---- synthetic matrices ----------------------------------------------------------------------- */

typedef struct {
    int V, H;
    float *w;
    int8_t *q;
    float *scale, *norm;
    rc_mat m;
} synth;

static void synth_build(synth *s) {
    recall_err err = {0};
    s->q = malloc((size_t)s->V * s->H);
    s->scale = malloc((size_t)s->V * (s->H / 64) * sizeof(float));
    s->norm = malloc((size_t)s->V * 2 * sizeof(float));
    s->m = (rc_mat){RC_DT_F32, s->w, NULL, s->V, s->H};
    cr_assert_eq(rc_lmscreen_build(&s->m, s->q, s->scale, s->norm, &err), RECALL_OK, "%s", err.msg);
}

static void synth_free(synth *s) {
    free(s->w);
    free(s->q);
    free(s->scale);
    free(s->norm);
}

static void expect_same_pick(const rc_lm_pick *a, const rc_lm_pick *b, int k, const char *what) {
    cr_assert_eq(a->argmax, b->argmax, "%s: argmax %d vs %d", what, a->argmax, b->argmax);
    cr_assert_eq(bits(a->margin), bits(b->margin), "%s: margin %a vs %a", what, a->margin, b->margin);
    cr_assert_eq(a->k, b->k, "%s", what);
    for (int i = 0; i < k; i++) {
        cr_assert_eq(a->ids[i], b->ids[i], "%s: top[%d] id %d vs %d", what, i, a->ids[i], b->ids[i]);
        cr_assert_eq(bits(a->logits[i]), bits(b->logits[i]), "%s: top[%d] logit", what, i);
    }
}

/* Every path and thread count: pick(h) == the reference on the full logits. Returns how many
 * picks were screened (not full). */
static int check_picks(synth *s, const float *h, const char *what) {
    static const char *paths[] = {"scalar", "avx2", "avx512", "neon"};
    int screened = 0;
    for (size_t pi = 0; pi < 4; pi++) {
        if (!fixture_path_runs(rc_simd_parse(paths[pi]))) continue;
        for (int th = 1; th <= 2; th++) {
            recall_err err = {0};
            rc_exec *ex;
            rc_exec_opts xo = {.threads = th, .simd = paths[pi]};
            cr_assert_eq(rc_exec_open(&xo, &ex, &err), RECALL_OK, "%s", err.msg);
            float *full = malloc((size_t)s->V * sizeof(float));
            for (int i = 0; i < s->V; i++) full[i] = NAN;
            rc_exec_matmul(ex, &s->m, NULL, h, (size_t)s->H, 1, full, (size_t)s->V);
            rc_lmscreen *scr;
            cr_assert_eq(rc_lmscreen_new(&s->m, s->q, s->scale, s->norm, ex, &scr, &err), RECALL_OK, "%s", err.msg);
            for (int k = 0; k <= 5; k++) {
                rc_lm_pick want, got;
                rc_lm_pick_full(full, s->V, k, &want);
                memset(&got, 0xff, sizeof got);
                cr_assert_eq(rc_lmscreen_pick(scr, h, k, &got, &err), RECALL_OK, "%s", err.msg);
                char w[128];
                snprintf(w, sizeof w, "%s, %s, %d threads, k %d", what, paths[pi], th, k);
                expect_same_pick(&got, &want, k, w);
                screened += !got.full;
                if (!got.full) cr_assert_lt(got.n_exact, s->V / 8, "%s", w);
            }
            rc_lmscreen_close(scr);
            free(full);
            rc_exec_close(ex);
        }
    }
    return screened;
}

static void random_rows(lcg *g, synth *s) {
    s->w = malloc((size_t)s->V * s->H * sizeof(float));
    for (size_t i = 0; i < (size_t)s->V * s->H; i++) s->w[i] = next_n(g) * 0.05f;
}

/* the logit of row r for h is made the largest: w_r = h * c (plus the row's noise) */
static void boost(synth *s, int r, const float *h, float c) {
    for (int i = 0; i < s->H; i++) s->w[(size_t)r * s->H + i] = h[i] * c;
}

static void copy_row(synth *s, int dst, int src) {
    memcpy(s->w + (size_t)dst * s->H, s->w + (size_t)src * s->H, (size_t)s->H * sizeof(float));
}

Test(lm_screen, adversarial_ties, .timeout = 300) {
    lcg g = {12345};
    synth s = {3000, 192, NULL, NULL, NULL, NULL, {0}};
    random_rows(&g, &s);
    float h[192];
    for (int i = 0; i < s.H; i++) h[i] = next_n(&g);
    /* exact ties at the maximum (identical rows: identical logits), in an order that is not the
     * index order; the first maximum must win and torch's tie order must come out */
    boost(&s, 1777, h, 0.02f);
    copy_row(&s, 12, 1777);
    copy_row(&s, 2999, 1777);
    /* the 5th and 6th place tied (rows 400 and 401), 1 ulp above / below neighbours */
    boost(&s, 400, h, 0.015f);
    copy_row(&s, 401, 400);
    boost(&s, 600, h, 0.0175f);
    copy_row(&s, 601, 600);
    s.w[(size_t)601 * s.H + 7] = nextafterf(s.w[(size_t)601 * s.H + 7], INFINITY); /* 1 ulp apart */
    boost(&s, 800, h, 0.0175f);
    s.w[(size_t)800 * s.H + 7] = nextafterf(s.w[(size_t)800 * s.H + 7], -INFINITY);
    synth_build(&s);
    check_picks(&s, h, "ties at the max and at 5/6");
    /* no ties: the screened path must be taken (and still agree) */
    float h2[192];
    for (int i = 0; i < s.H; i++) h2[i] = next_n(&g);
    int sc = check_picks(&s, h2, "random h");
    cr_assert_gt(sc, 0, "screening never applied");
    /* 1-ulp race for the max: rows 1777's copies against 601 (nudged) with h aligned to both */
    float h3[192];
    for (int i = 0; i < s.H; i++) h3[i] = h[i];
    h3[7] = nextafterf(h3[7], INFINITY);
    check_picks(&s, h3, "1-ulp h");
    /* all-zero h: every logit 0, every row tied; a NaN in h */
    float hz[192] = {0};
    check_picks(&s, hz, "zero h");
    hz[5] = NAN;
    check_picks(&s, hz, "NaN h");
    synth_free(&s);
}

/* Random h from several distributions against ties manufactured from the scan itself: for each
 * h the top-2 rows are copied over each other, so screening must find them exactly. */
Test(lm_screen, near_ties_random, .timeout = 300) {
    lcg g = {777};
    synth s = {1536, 128, NULL, NULL, NULL, NULL, {0}};
    random_rows(&g, &s);
    for (int r = 0; r < 40; r++) copy_row(&s, 1000 + r, 7 * r); /* duplicated rows anywhere */
    synth_build(&s);
    int screened = 0;
    for (int trial = 0; trial < 6; trial++) {
        float h[128];
        for (int i = 0; i < s.H; i++) h[i] = next_n(&g) * (trial % 2 ? 100.0f : 0.01f);
        char what[64];
        snprintf(what, sizeof what, "trial %d", trial);
        screened += check_picks(&s, h, what);
    }
    cr_assert_gt(screened, 0);
    synth_free(&s);
}

/* ---- the bound --------------------------------------------------------------------------------- */

static void check_bounds(synth *s, lcg *g, int nh, double *worst) {
    recall_err err = {0};
    rc_exec *ex;
    rc_exec_opts xo = {.threads = 1, .simd = "scalar"};
    cr_assert_eq(rc_exec_open(&xo, &ex, &err), RECALL_OK, "%s", err.msg);
    rc_lmscreen *scr;
    cr_assert_eq(rc_lmscreen_new(&s->m, s->q, s->scale, s->norm, ex, &scr, &err), RECALL_OK, "%s", err.msg);
    float *h = malloc((size_t)s->H * sizeof(float));
    for (int k = 0; k < nh; k++) {
        for (int i = 0; i < s->H; i++) {
            const uint32_t u = next_u32(g);
            h[i] = next_n(g) * ldexpf(1.0f, (int)(u % 40) - 20); /* a wide dynamic range */
            if (u % 13 == 0) h[i] = 0.0f;
        }
        for (int r = 0; r < s->V; r++) {
            float a;
            double b;
            cr_assert_eq(rc_lmscreen_row_bound(scr, h, r, &a, &b, &err), RECALL_OK, "%s", err.msg);
            const double x = rc_lmscreen_exact(scr, h, r), d = fabs(x - (double)a);
            cr_assert_leq(d, b, "row %d h %d: |%a - %a| = %g > bound %g", r, k, x, a, d, b);
            if (b > 0 && d / b > *worst) *worst = d / b;
        }
    }
    free(h);
    rc_lmscreen_close(scr);
    rc_exec_close(ex);
}

Test(lm_screen, bound_random, .timeout = 300) {
    lcg g = {99};
    double worst = 0.0;
    synth s = {500, 256, NULL, NULL, NULL, NULL, {0}};
    random_rows(&g, &s);
    synth_build(&s);
    check_bounds(&s, &g, 8, &worst);
    synth_free(&s);
    /* hostile weights: magnitudes over 60 binades in one group, exact zeros, subnormals, rows of
     * one huge weight, rows of -max and max */
    synth t = {300, 128, NULL, NULL, NULL, NULL, {0}};
    t.w = malloc((size_t)t.V * t.H * sizeof(float));
    for (size_t i = 0; i < (size_t)t.V * t.H; i++) {
        const uint32_t u = next_u32(&g);
        float v = next_n(&g) * ldexpf(1.0f, (int)(u % 60) - 30);
        if (u % 17 == 0) v = 0.0f;
        if (u % 29 == 0) v = ldexpf(1.0f, -140) * (float)(u % 5);
        t.w[i] = v;
    }
    for (int i = 0; i < t.H; i++) t.w[(size_t)5 * t.H + i] = i == 3 ? 1e6f : 1e-6f;
    for (int i = 0; i < t.H; i++) t.w[(size_t)6 * t.H + i] = (i % 2) ? 3.0e4f : -3.0e4f;
    synth_build(&t);
    check_bounds(&t, &g, 8, &worst);
    cr_log_info("largest |exact - approx| / bound: %.3g", worst);
    synth_free(&t);
}

/* ---- the blob ---------------------------------------------------------------------------------- */

Test(lm_screen, build_matches_blob, .timeout = 300) {
    const char *path = fixture_worldA_screen_blob("nf4");
    cr_assert(path);
    rc_blob *b;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(path, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg); /* checksummed */
    const rc_tensor *lm = rc_blob_find(b, "qwen2.lm_head.weight"), *q = rc_blob_find(b, RC_LM_SCREEN_Q);
    const rc_tensor *sc = rc_blob_find(b, RC_LM_SCREEN_SCALE), *nm = rc_blob_find(b, RC_LM_SCREEN_NORM);
    cr_assert(lm && q && sc && nm);
    cr_assert_eq(lm->dtype, RC_DT_BF16);
    rc_mat w;
    cr_assert_eq(rc_mat_from_tensor(lm, &w, &err), RECALL_OK, "%s", err.msg);
    int8_t *q2 = malloc(q->nbytes);
    float *s2 = malloc(sc->nbytes), *n2 = malloc(nm->nbytes);
    cr_assert_eq(rc_lmscreen_build(&w, q2, s2, n2, &err), RECALL_OK, "%s", err.msg);
    cr_assert(!memcmp(q2, q->data, q->nbytes));
    cr_assert(!memcmp(s2, sc->data, sc->nbytes));
    cr_assert(!memcmp(n2, nm->data, nm->nbytes));
    free(q2);
    free(s2);
    free(n2);
    rc_blob_close(b);
}

Test(lm_screen, missing_tensors, .timeout = 300) {
    rc_blob *b = fixture_open_worldA("nf4");
    recall_err err = {0};
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    rc_recall *r;
    o.lm_screen = RC_LM_SCREEN_AUTO;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    rc_lm_stats st;
    rc_recall_lm_stats(r, &st);
    cr_assert_eq(st.screening, 0);
    rc_recall_close(r);
    o.lm_screen = RC_LM_SCREEN_ON;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_E_MISSING);
    cr_assert(strstr(err.msg, RC_LM_SCREEN_Q), "%s", err.msg);
    cr_assert_eq(rc_lm_screen_parse("on"), RC_LM_SCREEN_ON);
    cr_assert_eq(rc_lm_screen_parse("off"), RC_LM_SCREEN_OFF);
    cr_assert_eq(rc_lm_screen_parse("auto"), RC_LM_SCREEN_AUTO);
    cr_assert_eq(rc_lm_screen_parse("yes"), -1);
    rc_blob_close(b);
}

/* The multi-row use (a verify forward of several rows): normed_all's rows picked through the
 * screen give the picks of logits_all's rows, and normed_last is normed_all's last row. */
Test(lm_screen, multi_row_forward, .timeout = 300) {
    rc_blob *b = fixture_open(fixture_worldA_screen_blob("f32"));
    recall_err err = {0};
    rc_exec *ex;
    cr_assert_eq(rc_exec_open(NULL, &ex, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2 *m;
    cr_assert_eq(rc_qwen2_open_ex(b, 64, ex, &m, &err), RECALL_OK, "%s", err.msg);
    rc_lmscreen *scr;
    cr_assert_eq(rc_lmscreen_open(b, ex, &scr, &err), RECALL_OK, "%s", err.msg);
    cr_assert(scr);
    const int H = rc_qwen2_cfg(m)->hidden, V = rc_qwen2_cfg(m)->vocab, n = 9;
    int32_t ids[9] = {1027, 5, 17, 300, 301, 5, 999, 42, 7};
    float *lg = malloc((size_t)n * V * sizeof *lg), *hs = malloc((size_t)n * H * sizeof *hs), *hl = malloc((size_t)H * 4);
    for (int i = 0; i < n * H; i++) hs[i] = NAN;
    rc_qwen2_fwd f = {.ids = ids, .n = n, .logits_all = lg, .normed_all = hs, .normed_last = hl};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    cr_assert(!memcmp(hl, hs + (size_t)(n - 1) * H, (size_t)H * 4));
    int screened = 0;
    for (int t = 0; t < n; t++)
        for (int k = 0; k <= 5; k += 5) {
            rc_lm_pick got, want;
            rc_lm_pick_full(lg + (size_t)t * V, V, k, &want);
            cr_assert_eq(rc_lmscreen_pick(scr, hs + (size_t)t * H, k, &got, &err), RECALL_OK, "%s", err.msg);
            char what[32];
            snprintf(what, sizeof what, "row %d k %d", t, k);
            expect_same_pick(&got, &want, k, what);
            screened += !got.full;
        }
    cr_assert_gt(screened, n);
    free(lg);
    free(hs);
    free(hl);
    rc_lmscreen_close(scr);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
}

/* ---- hostile screen sections: refused at open, naming the tensor and the row ------------------ */

#define HV 512
#define HH 128

typedef void (*screen_edit)(float *w, int8_t *q, float *scale, float *norm);

/* A blob holding lm_head [HV, HH] (f32, random) and its screen tensors as the converter makes
 * them, then edited; opened and screened on `threads` threads. Returns the status of
 * rc_lmscreen_open, its message in msg. */
static recall_status open_edited(screen_edit edit, int threads, char *msg, size_t cap) {
    lcg g = {4242};
    const int G = HH / 64;
    float *w = malloc((size_t)HV * HH * sizeof(float)), *scale = malloc((size_t)HV * G * sizeof(float));
    float *norm = malloc((size_t)HV * 2 * sizeof(float));
    int8_t *q = malloc((size_t)HV * HH);
    cr_assert(w && scale && norm && q);
    for (size_t i = 0; i < (size_t)HV * HH; i++) w[i] = next_n(&g) * 0.05f;
    recall_err err = {0};
    rc_mat m = {RC_DT_F32, w, NULL, HV, HH};
    cr_assert_eq(rc_lmscreen_build(&m, q, scale, norm, &err), RECALL_OK, "%s", err.msg);
    if (edit) edit(w, q, scale, norm);
    float *w_copy = malloc((size_t)HV * HH * sizeof(float)); /* the writer takes w */
    cr_assert(w_copy);
    memcpy(w_copy, w, (size_t)HV * HH * sizeof(float));
    m.data = w_copy;
    rc_blob_writer *wr;
    cr_assert_eq(rc_writer_new(&wr, &err), RECALL_OK);
    const int64_t vocab = HV, hidden = HH;
    cr_assert_eq(rc_writer_kv_i64(wr, "qwen2.vocab", &vocab, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(wr, "qwen2.hidden", &hidden, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_tensor(wr, "qwen2.lm_head.weight", RC_DT_F32, 2, (const int64_t[]){HV, HH}, w,
                                  (size_t)HV * HH * sizeof(float), &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_writer_tensor(wr, RC_LM_SCREEN_Q, RC_DT_U8, 2, (const int64_t[]){HV, HH}, q, (size_t)HV * HH, &err),
                 RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_writer_tensor(wr, RC_LM_SCREEN_SCALE, RC_DT_F32, 2, (const int64_t[]){HV, G}, scale,
                                  (size_t)HV * G * sizeof(float), &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_writer_tensor(wr, RC_LM_SCREEN_NORM, RC_DT_F32, 2, (const int64_t[]){HV, 2}, norm,
                                  (size_t)HV * 2 * sizeof(float), &err), RECALL_OK, "%s", err.msg);
    char path[64];
    snprintf(path, sizeof path, "/tmp/recall_screen_%ld.blob", (long)getpid());
    cr_assert_eq(rc_writer_write(wr, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(wr);
    rc_blob *b;
    cr_assert_eq(rc_blob_open(path, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg); /* checksums all match */
    remove(path);
    rc_exec *ex;
    rc_exec_opts xo = {.threads = threads};
    cr_assert_eq(rc_exec_open(&xo, &ex, &err), RECALL_OK, "%s", err.msg);
    rc_lmscreen *scr = NULL;
    memset(&err, 0, sizeof err);
    const recall_status st = rc_lmscreen_open(b, ex, &scr, &err);
    snprintf(msg, cap, "%s", err.msg);
    if (st == RECALL_OK) {
        cr_assert(scr);
        /* an accepted screen picks what the full logits pick */
        float h[HH], *full = malloc(HV * sizeof(float));
        for (int i = 0; i < HH; i++) h[i] = w_copy[(size_t)77 * HH + i] + next_n(&g) * 0.01f; /* row 77 leads */
        rc_exec_matmul(ex, &m, NULL, h, HH, 1, full, HV);
        rc_lm_pick want, got;
        rc_lm_pick_full(full, HV, 5, &want);
        cr_assert_eq(rc_lmscreen_pick(scr, h, 5, &got, &err), RECALL_OK, "%s", err.msg);
        expect_same_pick(&got, &want, 5, "accepted screen");
        free(full);
    } else {
        cr_assert_null(scr);
    }
    rc_lmscreen_close(scr);
    rc_exec_close(ex);
    rc_blob_close(b);
    free(w_copy);
    return st;
}

static void expect_refused(screen_edit edit, const char *tensor, const char *where) {
    for (int th = 1; th <= 3; th += 2) {
        char msg[512];
        cr_assert_eq(open_edited(edit, th, msg, sizeof msg), RECALL_E_FORMAT, "%s %s accepted (%d threads)", tensor,
                     where, th);
        cr_assert(strstr(msg, "/tmp/recall_screen_") && strstr(msg, tensor) && strstr(msg, where),
                  "message names the file, %s and %s: %s", tensor, where, msg);
        if (th == 1) cr_log_info("refused: %s", msg);
    }
}

/* row 77's codes zeroed (its approximation 0) and its ||w - s q|| left as it was: the bound of
 * the true argmax shrinks far below its true error, a pick that trusted it would drop row 77 */
static void edit_zero_codes(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)s, (void)n;
    memset(q + (size_t)77 * HH, 0, HH);
}
/* the same norm halved on two rows: the lower row is named, whatever the thread split */
static void edit_small_norm(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)s;
    n[2 * 400] *= 0.5f;
    n[2 * 130] *= 0.5f;
}
static void edit_small_anorm(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)s;
    n[2 * 131 + 1] = nextafterf(n[2 * 131 + 1] * (1.0f - 1e-5f), 0.0f);
}
static void edit_big_norm(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)s;
    n[2 * 132] *= 2.0f;
}
static void edit_code_minus128(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)s, (void)n;
    q[(size_t)133 * HH + 70] = -128;
}
static void edit_one_code(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)s, (void)n;
    q[(size_t)134 * HH + 5] = (int8_t)(q[(size_t)134 * HH + 5] > 0 ? q[(size_t)134 * HH + 5] - 3 : q[(size_t)134 * HH + 5] + 3);
}
static void edit_scale_nan(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)n;
    s[2 * 135 + 1] = NAN;
}
static void edit_scale_negative(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)n;
    s[2 * 136] = -s[2 * 136];
}
static void edit_norm_inf(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)s;
    n[2 * 137 + 1] = INFINITY;
}
static void edit_lm_head_nan(float *w, int8_t *q, float *s, float *n) {
    (void)q, (void)s, (void)n;
    w[(size_t)138 * HH + 9] = NAN;
}
static void edit_scale_bigger(float *w, int8_t *q, float *s, float *n) {
    (void)w, (void)q, (void)n;
    s[2 * 139] *= 1.5f; /* s q moves away from w: both norms change */
}

Test(lm_screen, hostile_sections_refused, .timeout = 300) {
    char msg[512];
    /* the converter's tensors open, and pick exactly (open_edited checks a pick) */
    cr_assert_eq(open_edited(NULL, 1, msg, sizeof msg), RECALL_OK, "%s", msg);
    expect_refused(edit_zero_codes, RC_LM_SCREEN_NORM, "row 77:");
    expect_refused(edit_small_norm, RC_LM_SCREEN_NORM, "row 130:");
    expect_refused(edit_small_anorm, RC_LM_SCREEN_NORM, "row 131:");
    expect_refused(edit_big_norm, RC_LM_SCREEN_NORM, "row 132:");
    expect_refused(edit_code_minus128, RC_LM_SCREEN_Q, "row 133 column 70 is -128");
    expect_refused(edit_one_code, RC_LM_SCREEN_NORM, "row 134:");
    expect_refused(edit_scale_nan, RC_LM_SCREEN_SCALE, "row 135 group 1");
    expect_refused(edit_scale_negative, RC_LM_SCREEN_SCALE, "row 136 group 0");
    expect_refused(edit_norm_inf, RC_LM_SCREEN_NORM, "row 137 ");
    expect_refused(edit_lm_head_nan, "lm_head row 138", "not finite");
    expect_refused(edit_scale_bigger, RC_LM_SCREEN_NORM, "row 139:");
}

/* A screen section with its codes missing (scale / norm alone) is refused; views are checked
 * like the blob's. */
Test(lm_screen, partial_section_and_views_refused, .timeout = 300) {
    recall_err err = {0};
    rc_blob_writer *wr;
    cr_assert_eq(rc_writer_new(&wr, &err), RECALL_OK);
    const int64_t vocab = 4, hidden = 64;
    cr_assert_eq(rc_writer_kv_i64(wr, "qwen2.vocab", &vocab, 1, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_i64(wr, "qwen2.hidden", &hidden, 1, &err), RECALL_OK);
    float *n = calloc(8, sizeof(float));
    cr_assert_eq(rc_writer_tensor(wr, RC_LM_SCREEN_NORM, RC_DT_F32, 2, (const int64_t[]){4, 2}, n, 32, &err), RECALL_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/recall_screenp_%ld.blob", (long)getpid());
    cr_assert_eq(rc_writer_write(wr, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(wr);
    rc_blob *b;
    cr_assert_eq(rc_blob_open(path, 0, &b, &err), RECALL_OK, "%s", err.msg);
    remove(path);
    rc_lmscreen *scr = NULL;
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_lmscreen_open(b, NULL, &scr, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, RC_LM_SCREEN_Q) && strstr(err.msg, "missing"), "%s", err.msg);
    rc_blob_close(b);
    /* rc_lmscreen_new checks the views too */
    float w[4 * 64] = {0}, scale[4] = {0}, norm[8] = {0};
    int8_t q[4 * 64] = {0};
    q[200] = 1; /* a code where w and s are 0: ||w - s q|| = 0 as stored, s q = 0, so still consistent */
    rc_mat m = {RC_DT_F32, w, NULL, 4, 64};
    rc_exec *ex;
    cr_assert_eq(rc_exec_open(NULL, &ex, &err), RECALL_OK);
    cr_assert_eq(rc_lmscreen_new(&m, q, scale, norm, ex, &scr, &err), RECALL_OK, "%s", err.msg);
    rc_lmscreen_close(scr);
    scale[3] = 0.5f; /* now s q = 0.5 in row 3: both stored norms 0 are too small */
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_lmscreen_new(&m, q, scale, norm, ex, &scr, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "lm_head screen: " RC_LM_SCREEN_NORM " row 3:"), "%s", err.msg);
    rc_exec_close(ex);
}
