/* cli_calibrate.c - `recall calibrate`: per-build gate threshold calibration (docs/LOOP.md,
 * "Calibration": run about 10 short needle dialogues through the deployed model and set the
 * threshold from them). The threshold is rc_calibrate's (calibrate.h): the 10th percentile of the
 * gate scores of every token at a recall position (a question turn from its keyword's end to the
 * reply's restatement, the fact's turn out of the window), firing disabled: the rule the gate
 * file's thresh was trained with. --write FILE keeps it as a threshold file.
 *
 * Besides, the report shows what the gate checks (the scores the loop decides on, at rebuilds)
 * do on the same runs:
 *   question-turn checks: gate checks of a question turn at c0 > q_start, where q_start is the
 *     history length before the question segment
 *   probe-turn checks: the same checks in probe turns (c0 > probe_start); "whole turn" adds every
 *     check of a probe turn, teacher-forced history included, as the benchmark's false-fire counts
 * --svg OUT draws the trade-off the threshold sweeps: for every threshold t, the share of probe
 * turns with a check above t anywhere (casual fires per turn) against the share of question turns
 * with one after the question starts, the suggested and the file's thresholds marked. */
#include "calibrate.h"
#include "checksum.h"
#include "json.h"
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

static void print_row(const char *name, rc_floats *s) {
    printf("  %-26s %5d", name, s->n);
    if (!s->n) {
        printf("   (none)\n");
        return;
    }
    static const double ps[] = {0, 10, 25, 50, 75, 90, 100};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) printf(" %9.4f", percentile(s->v, s->n, ps[i]));
    printf("\n");
}

static int count_above(const rc_floats *s, double t) {
    int c = 0;
    for (int i = 0; i < s->n; i++) c += s->v[i] > t;
    return c;
}

typedef struct {
    double P; /* the percentile */
    uint32_t seeds[1024];
    int n_seeds;
    const rc_recall_opts *loop; /* the loop's options (kv and numerics are named in the report) */
} calibrate_opts;

/* What the needle dialogues give: the gate scores by position kind, and per generated turn its
 * best score (at recall positions for a question, anywhere for a probe). */
typedef struct {
    rc_floats pos, cas, cas_all, q_max, probe_max;
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
static int collect_run(const rc_recall *r, const rc_problem_run *run, gate_stats *g, int *np, int *nc,
                       recall_err *err) {
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
                bad |= rc_floats_push(&g->cas_all, gr->score);
                if (gr->score > best_all) best_all = gr->score;
            }
            if (gr->c0 <= start) continue;
            if (gr->score > best) best = gr->score;
            bad |= rc_floats_push(q ? &g->pos : &g->cas, gr->score);
            q ? (*np)++ : (*nc)++;
        }
        bad |= rc_floats_push(q ? &g->q_max : &g->probe_max, q ? best : best_all);
        q ? g->n_q++ : g->n_probe++;
    }
    return bad ? -1 : 0;
}

/* rc_calibrate's view of each problem run: its gate checks into the report's distributions, and a
 * progress line. */
typedef struct {
    gate_stats *g;
    const calibrate_opts *co;
    int i, failed;
    recall_err err;
} collect_ctx;

static void on_run(void *ctx, const rc_recall *r, const rc_problem_run *run) {
    collect_ctx *c = ctx;
    int np = 0, nc = 0;
    if (c->failed) return;
    const int st = collect_run(r, run, c->g, &np, &nc, &c->err);
    if (st) {
        c->failed = st;
        return;
    }
    fprintf(stderr, "problem %u: %d recall-position checks, %d casual-position checks\n", c->co->seeds[c->i++], np, nc);
}

/* The distributions, the suggested threshold and what it does on these dialogues (stdout). */
static void calibrate_report(gate_stats *g, const calibrate_opts *co, const rc_calibration *cal, float file_thresh) {
    rc_floats *pos = &g->pos, *cas = &g->cas, rows = {cal->pos, cal->n_pos, cal->n_pos};
    const double thr = cal->threshold;
    int q_fire = 0, probe_fire = 0;
    qsort(pos->v, (size_t)pos->n, sizeof *pos->v, cmp_float);
    qsort(cas->v, (size_t)cas->n, sizeof *cas->v, cmp_float);
    qsort(g->cas_all.v, (size_t)g->cas_all.n, sizeof *g->cas_all.v, cmp_float);
    for (int i = 0; i < g->q_max.n; i++) q_fire += g->q_max.v[i] > thr;
    for (int i = 0; i < g->probe_max.n; i++) probe_fire += g->probe_max.v[i] > thr;
    printf("gate score distribution (%d problems, mode %s, kv %s, numerics %s, firing disabled)\n", co->n_seeds,
           rc_mode_name(co->loop->mode), rc_kv_dtype_name((rc_kv_dtype)co->loop->kv),
           rc_numerics_name(co->loop->exec.numerics));
    printf("  %-26s %5s %9s %9s %9s %9s %9s %9s %9s\n", "", "n", "min", "p10", "p25", "p50", "p75", "p90", "max");
    print_row("recall positions (tokens)", &rows);
    print_row("question-turn checks", pos);
    print_row("probe-turn checks", cas);
    print_row("casual (whole probe turn)", &g->cas_all);
    printf("suggested threshold: %.4f (p%g of %d recall-position token scores in %d of %d question turns: the rule "
           "the gate file's thresh was trained with; the file's thresh is %.4f)\n", thr, co->P, cal->n_pos,
           cal->n_q_used, cal->n_q, file_thresh);
    printf("  at %.4f: question-turn checks above %d/%d, probe-turn checks above %d/%d,\n", thr, count_above(pos, thr),
           pos->n, count_above(cas, thr), cas->n);
    printf("  question turns with a fire %d/%d, probe turns with a fire %d/%d (whole turn)\n", q_fire, g->n_q,
           probe_fire, g->n_probe);
    /* the gate as a detector, at the file's threshold: among the checks of question and probe
     * turns after their user message starts */
    const int tp = count_above(pos, file_thresh), fp = count_above(cas, file_thresh);
    printf("  at the file's %.4f: %d/%d (%.0f%%) of question-turn checks above it, precision %d/%d (%.0f%%) "
           "among the checks above it\n", file_thresh, tp, pos->n, pos->n ? 100.0 * tp / pos->n : 0.0, tp, tp + fp,
           tp + fp ? 100.0 * tp / (tp + fp) : 0.0);
    printf("use: recall chat BLOB --threshold %.4f, or --threshold-file FILE after calibrate --write FILE\n", thr);
}

/* ---- the trade-off picture ------------------------------------------------------------------ */

static double share_above(const rc_floats *s, double t) { return s->n ? (double)count_above(s, t) / s->n : 0.0; }

/* The sweep over every distinct per-turn best score (plus one below all): each threshold is a
 * point (casual fires per probe turn, question turns firing after the question starts). */
static void svg_body(FILE *f, const gate_stats *g, const calibrate_opts *co, double thr, double file_thr, int n_pos) {
    const double X0 = 80, Y0 = 60, W = 520, H = 360;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"500\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"720\" height=\"500\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%g\" y=\"24\" font-size=\"15\">recall calibrate: the gate threshold trade-off (%d problems, "
               "mode %s)</text>\n", X0, co->n_seeds, rc_mode_name(co->loop->mode));
    fprintf(f, "<text x=\"%g\" y=\"42\" fill=\"#555\">each point is a threshold t: fire when the gate score &gt; t "
               "(firing disabled while scoring)</text>\n", X0);
    for (int i = 0; i <= 10; i++) { /* grid and tick labels, both axes 0..100 % */
        double x = X0 + W * i / 10, y = Y0 + H - H * i / 10;
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#eee\"/>", x, Y0, x, Y0 + H);
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#eee\"/>\n", X0, y, X0 + W, y);
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d%%</text>", x, Y0 + H + 16, i * 10);
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%d%%</text>\n", X0 - 6, y + 4, i * 10);
    }
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#333\"/>\n", X0, Y0, W, H);
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">casual fires: probe turns with a score above t "
               "(anywhere in the turn)</text>\n", X0 + W / 2, Y0 + H + 36);
    fprintf(f, "<text transform=\"translate(%g,%g) rotate(-90)\" text-anchor=\"middle\">question turns with a score "
               "above t after the question starts</text>\n", X0 - 48, Y0 + H / 2);
    /* thresholds: every distinct per-turn best, descending, after one above them all */
    int n = g->q_max.n + g->probe_max.n;
    double *t = malloc(((size_t)n + 1) * sizeof *t);
    if (!t) return;
    int m = 0;
    for (int i = 0; i < g->q_max.n; i++) t[m++] = g->q_max.v[i];
    for (int i = 0; i < g->probe_max.n; i++) t[m++] = g->probe_max.v[i];
    for (int i = 1; i < m; i++) /* insertion sort, descending (a few hundred values) */
        for (int j = i; j > 0 && t[j] > t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    fputs("<polyline fill=\"none\" stroke=\"#1f6fb2\" stroke-width=\"2\" points=\"", f);
    fprintf(f, "%g,%g ", X0, Y0 + H);
    for (int i = 0; i < m; i++) { /* threshold just below t[i]: every turn whose best is >= t[i] fires */
        double tt = nextafter(t[i], -INFINITY);
        fprintf(f, "%.2f,%.2f ", X0 + W * share_above(&g->probe_max, tt), Y0 + H - H * share_above(&g->q_max, tt));
    }
    fputs("\"/>\n", f);
    for (int i = 0; i < m; i += (m + 7) / 8) { /* a few thresholds written along the curve */
        double tt = nextafter(t[i], -INFINITY);
        double x = X0 + W * share_above(&g->probe_max, tt), y = Y0 + H - H * share_above(&g->q_max, tt);
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"#1f6fb2\"/><text x=\"%.2f\" y=\"%.2f\" "
                   "fill=\"#1f6fb2\" font-size=\"10\">t=%.2f</text>\n", x, y, x + 5, y + 12, t[i]);
    }
    free(t);
    const struct { double t; const char *what, *color; } mark[2] = {
        {thr, "suggested", "#c0392b"}, {file_thr, "the gate file's", "#27ae60"}};
    for (int i = 0; i < 2; i++) {
        double x = X0 + W * share_above(&g->probe_max, mark[i].t), y = Y0 + H - H * share_above(&g->q_max, mark[i].t);
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"6\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", x,
                y, mark[i].color);
        fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"%s\">%s threshold %.4f: question turns %.0f%%, casual fires "
                   "%.0f%% per probe turn</text>\n", X0 + 10, Y0 + 20 + 16.0 * i, mark[i].color, mark[i].what, mark[i].t,
                100 * share_above(&g->q_max, mark[i].t), 100 * share_above(&g->probe_max, mark[i].t));
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"#555\">%d question turns, %d probe turns; suggested = p%g of %d "
               "recall-position token scores</text>\n</svg>\n", X0, Y0 + H + 60, g->q_max.n, g->probe_max.n, co->P,
            n_pos);
}

static int calibrate_svg(const char *path, const gate_stats *g, const calibrate_opts *co, double thr, double file_thr,
                         int n_pos) {
    rc_afile af;
    FILE *f = cli_create("calibrate", &af, path);
    if (!f) return 1;
    svg_body(f, g, co, thr, file_thr, n_pos);
    return cli_commit("calibrate", &af, 1);
}

/* --write FILE: the threshold file (calibrate.h), with the bench it came from. */
static int calibrate_write(const cli_args *a, const rc_blob *b, const rc_recall_opts *o, const rc_calibration *cal,
                           const calibrate_opts *co) {
    char *text = NULL;
    size_t len = 0;
    recall_err err = {0};
    if (rc_read_file(a->bench, &text, &len, &err)) return cli_fail("calibrate", &err);
    const rc_calibration_src src = {a->bench, rc_xxh64(text, len, 0), co->seeds, co->n_seeds};
    free(text);
    rc_afile af;
    FILE *f = cli_create("calibrate", &af, a->write);
    if (!f) return 1;
    rc_calibration_write(f, b, o, cal, &src);
    return cli_commit("calibrate", &af, 1);
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
    rc_calibration cal = {0};
    gate_stats g;
    memset(&g, 0, sizeof g);
    int rc = 1;
    if (cli_blob_open(a, a->pos[0], RC_OPEN_VERIFY, &b, &err) || rc_bench_load(a->bench, &bench, &err)) goto fail;
    rc_recall_opts o;
    cli_loop_opts(a, b, &o);
    const float file_thresh = o.threshold;
    rc_exec *ex = NULL; /* the path and thread count the loop will run with, for the banner */
    if (cli_exec_open(a, &ex, &err)) goto fail;
    cli_banner("calibrate", ex->k.name, ex->threads);
    rc_exec_close(ex);
    co.loop = &o;
    collect_ctx cc = {&g, &co, 0, 0, {0}};
    if (rc_calibrate(b, &o, bench, co.seeds, co.n_seeds, co.P, on_run, &cc, &cal, &err)) goto fail;
    if (cc.failed) {
        if (cc.failed < 0) fprintf(stderr, "recall calibrate: out of memory\n");
        else cli_fail("calibrate", &cc.err);
        goto out;
    }
    calibrate_report(&g, &co, &cal, file_thresh);
    rc = a->svg ? calibrate_svg(a->svg, &g, &co, cal.threshold, file_thresh, cal.n_pos) : 0;
    if (!rc && a->write) rc = calibrate_write(a, b, &o, &cal, &co);
    goto out;
fail:
    cli_fail("calibrate", &err);
out:
    rc_calibration_free(&cal);
    gate_stats_free(&g);
    rc_bench_free(bench);
    rc_blob_close(b);
    return rc;
}
