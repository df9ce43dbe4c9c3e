/* cli_calibrate.c - `recall calibrate`: per-build gate threshold calibration (docs/LOOP.md, "Options
 * off by default, and the threshold": run about 10 short needle dialogues through the deployed model
 * and set the threshold at about the 10th percentile of gate scores at known recall positions).
 *
 * Needle dialogues = the benchmark problems (3 facts, 9 fillers, 2 probes, 3 questions). Each runs
 * through the RC_bge loop with firing disabled (threshold +inf), so every gate check is scored but
 * nothing is injected and the scores are those of the un-helped model.
 *   known recall positions: gate checks of a question turn at c0 > q_start, where q_start is the
 *     history length before the question segment (the gate feature is then the q of a token of
 *     the question or of the answer being generated)
 *   casual positions: the same checks in probe turns (c0 > probe_start); "whole turn" adds every
 *     check of a probe turn, teacher-forced history included, as the benchmark's false-fire counts
 * Suggested threshold = the P-th percentile (numpy "linear") of the recall-position scores. */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "qwen2.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *v;
    int n, cap;
} scores;

static int push(scores *s, float x) {
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        float *nv = realloc(s->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile(v, p) with the default linear interpolation; v sorted ascending, n >= 1. */
static double percentile(const float *v, int n, double p) {
    double idx = p / 100.0 * (n - 1);
    int lo = (int)floor(idx), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + ((double)v[hi] - v[lo]) * (idx - lo);
}

static void print_row(const char *name, scores *s) {
    printf("  %-26s %5d", name, s->n);
    if (!s->n) {
        printf("   (none)\n");
        return;
    }
    static const double ps[] = {0, 10, 25, 50, 75, 90, 100};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) printf(" %9.4f", percentile(s->v, s->n, ps[i]));
    printf("\n");
}

static int count_above(const scores *s, double t) {
    int c = 0;
    for (int i = 0; i < s->n; i++) c += s->v[i] > t;
    return c;
}

typedef struct {
    double P; /* the percentile */
    uint32_t seeds[1024];
    int n_seeds;
    int kv;       /* rc_kv_dtype */
    int numerics; /* RC_NUMERICS_* */
} calibrate_opts;

/* What the needle dialogues give: the gate scores by position kind, and per generated turn its
 * best score (at recall positions for a question, anywhere for a probe). */
typedef struct {
    scores pos, cas, cas_all, q_max, probe_max;
    int n_q, n_probe;
} gate_stats;

static void gate_stats_free(gate_stats *g) {
    free(g->pos.v);
    free(g->cas.v);
    free(g->cas_all.v);
    free(g->q_max.v);
    free(g->probe_max.v);
}

/* Adds one problem run's gate checks; *np / *nc count its recall / casual-position checks.
 * Returns 0, -1 out of memory, or 1 with err set. */
static int collect_run(rc_recall *r, const rc_problem_run *run, gate_stats *g, int *np, int *nc, recall_err *err) {
    int bad = 0;
    *np = *nc = 0;
    for (int t = 0; t < run->n_turns && !bad; t++) {
        const rc_problem_turn *pt = &run->turns[t];
        int32_t *seg;
        size_t n_seg;
        if (rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), 1, pt->user, NULL, &seg, &n_seg, err)) return 1;
        free(seg);
        int start = pt->feed_len - (int)n_seg, q = pt->kind == RC_STEP_Q;
        float best = -INFINITY, best_all = -INFINITY;
        for (int k = 0; k < pt->turn.n_gates && !bad; k++) {
            const rc_gate_rec *gr = &pt->turn.gates[k];
            if (!q) {
                bad |= push(&g->cas_all, gr->score);
                if (gr->score > best_all) best_all = gr->score;
            }
            if (gr->c0 <= start) continue;
            if (gr->score > best) best = gr->score;
            bad |= push(q ? &g->pos : &g->cas, gr->score);
            q ? (*np)++ : (*nc)++;
        }
        bad |= push(q ? &g->q_max : &g->probe_max, q ? best : best_all);
        q ? g->n_q++ : g->n_probe++;
    }
    return bad ? -1 : 0;
}

/* Every needle dialogue through r (firing disabled), one progress line each; 0 or 1 (printed). */
static int calibrate_collect(rc_recall *r, const rc_bench *bench, const calibrate_opts *co, gate_stats *g) {
    recall_err err = {0};
    for (int i = 0; i < co->n_seeds; i++) {
        rc_problem p;
        rc_problem_run run;
        if (rc_bench_problem(bench, co->seeds[i], &p, &err)) goto fail;
        if (rc_run_problem(r, &p, NULL, NULL, NULL, &run, &err)) {
            rc_problem_free(&p);
            goto fail;
        }
        int np, nc, st = collect_run(r, &run, g, &np, &nc, &err);
        rc_problem_run_free(&run);
        rc_problem_free(&p);
        if (st > 0) goto fail;
        if (st < 0) {
            fprintf(stderr, "recall calibrate: out of memory\n");
            return 1;
        }
        fprintf(stderr, "problem %u: %d recall-position checks, %d casual-position checks\n", co->seeds[i], np, nc);
    }
    return 0;
fail:
    fprintf(stderr, "recall calibrate: %s\n", err.msg);
    return 1;
}

/* The distributions, the suggested threshold and what it does on these dialogues (stdout). */
static void calibrate_report(gate_stats *g, const calibrate_opts *co, int faithful, float file_thresh) {
    scores *pos = &g->pos, *cas = &g->cas;
    int q_fire = 0, probe_fire = 0;
    qsort(pos->v, (size_t)pos->n, sizeof *pos->v, cmp_float);
    qsort(cas->v, (size_t)cas->n, sizeof *cas->v, cmp_float);
    qsort(g->cas_all.v, (size_t)g->cas_all.n, sizeof *g->cas_all.v, cmp_float);
    double thr = percentile(pos->v, pos->n, co->P);
    for (int i = 0; i < g->q_max.n; i++) q_fire += g->q_max.v[i] > thr;
    for (int i = 0; i < g->probe_max.n; i++) probe_fire += g->probe_max.v[i] > thr;
    printf("gate score distribution (%d problems, mode %s, kv %s, numerics %s, firing disabled)\n", co->n_seeds,
           faithful ? "faithful" : "clean", rc_kv_dtype_name((rc_kv_dtype)co->kv), rc_numerics_name(co->numerics));
    printf("  %-26s %5s %9s %9s %9s %9s %9s %9s %9s\n", "", "n", "min", "p10", "p25", "p50", "p75", "p90", "max");
    print_row("recall positions", pos);
    print_row("casual positions", cas);
    print_row("casual (whole probe turn)", &g->cas_all);
    printf("suggested threshold: %.4f (p%g of %d recall-position scores; the gate file's thresh is %.4f)\n", thr,
           co->P, pos->n, file_thresh);
    printf("  at %.4f: recall-position checks above %d/%d (%.0f%%), casual-position checks above %d/%d,\n", thr,
           count_above(pos, thr), pos->n, 100.0 * count_above(pos, thr) / pos->n, count_above(cas, thr), cas->n);
    printf("  question turns with a fire %d/%d, probe turns with a fire %d/%d (whole turn)\n", q_fire, g->n_q,
           probe_fire, g->n_probe);
    printf("use: recall chat BLOB --threshold %.4f   (or recall eval ... --arms SP,RC_bge@%.4f)\n", thr, thr);
}

int cli_calibrate(const cli_args *a) {
    calibrate_opts co;
    co.P = a->percentile;
    co.n_seeds = cli_parse_problems(a->problems ? a->problems : "0-7", co.seeds, 1024);
    if (co.n_seeds <= 0)
        return cli_usage_error("calibrate", "--problems %s: expected seeds like 0-7, 3 or 0,2,5-6", a->problems);
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_bench *bench = NULL;
    rc_recall *r = NULL;
    gate_stats g;
    memset(&g, 0, sizeof g);
    int rc = 1;
    if (cli_blob_open(a, a->pos[0], RC_OPEN_VERIFY, &b, &err) || rc_bench_load(a->bench, &bench, &err)) goto fail;
    rc_recall_opts o;
    cli_loop_opts(a, b, &o);
    const float file_thresh = o.threshold;
    o.arm = RC_ARM_RC_BGE;
    o.threshold = INFINITY; /* score every check, fire none */
    if (rc_recall_open(b, &o, &r, &err)) goto fail;
    cli_banner("calibrate", rc_recall_simd_name(r), rc_recall_threads(r));
    if (calibrate_collect(r, bench, &co, &g)) goto out;
    if (!g.pos.n) {
        fprintf(stderr, "recall calibrate: no gate check fell at a recall position (the question turns never "
                        "reached a rebuild with archived history); nothing to calibrate\n");
        goto out;
    }
    co.kv = o.kv;
    co.numerics = o.numerics;
    calibrate_report(&g, &co, o.mode == RC_MODE_FAITHFUL, file_thresh);
    rc = 0;
    goto out;
fail:
    cli_fail("calibrate", &err);
out:
    gate_stats_free(&g);
    rc_recall_close(r);
    rc_bench_free(bench);
    rc_blob_close(b);
    return rc;
}
