/* cli_recall.c - `recall replay`: one benchmark problem through the recall loop, written as a
 * trace in the schema of the loop goldens (docs/VERIFYING.md, "Loop traces"). */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "qwen2.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"
#include "turn_json.h"
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* edge: opts.edge is on, so the turn also lists each rebuild's edge span (turn_json.h). */
static void write_turn(FILE *f, const rc_bpe *bpe, const rc_problem_turn *pt, int edge) {
    fprintf(f, "{\"kind\": \"%s\", \"user\": ", rc_step_kind_name(pt->kind));
    rc_json_put_str(f, pt->user);
    fprintf(f, ", \"feed_len\": %d, ", pt->feed_len);
    rc_turn_json_fields(f, &pt->turn, bpe, edge);
    fputc('}', f);
}

/* What the per-turn lines need of the loop. */
typedef struct {
    const rc_recall *r;
    int window; /* 0: FULL (no window) */
    rc_arm arm;
    float threshold;
} replay_view;

/* Decoded ids on one line (newlines shown as \n), at most `cap` bytes of it, between quotes. */
static void print_text(const rc_recall *r, const int32_t *ids, int n, size_t cap) {
    char *text = NULL;
    size_t len = 0;
    recall_err err = {0};
    if (rc_bpe_decode(rc_recall_bpe(r), ids, (size_t)n, 0, &text, &len, &err)) {
        fprintf(stderr, "(%s)", err.msg);
        return;
    }
    fputc('"', stderr);
    for (size_t i = 0; i < len && i < cap; i++) {
        if (text[i] == '\n') fputs("\\n", stderr);
        else fputc(text[i], stderr);
    }
    fputs(len > cap ? "...\"" : "\"", stderr);
    free(text);
}

/* One line per generated turn, then what a person needs to follow it: the user's message, where
 * the window starts, each fire with the blocks it brought back, and the reply. */
static void on_turn(void *ctx, int index, const rc_problem_turn *t) {
    const replay_view *v = ctx;
    int fires = 0;
    for (int i = 0; i < t->turn.n_fires; i++) fires += t->turn.fires[i].injected;
    fprintf(stderr, "turn %d (%s): feed %d tokens, reply %d tokens, %d gate checks, %d fires, %ld decoder rows\n",
            index + 1, rc_step_kind_name(t->kind), t->feed_len, t->turn.n_reply, t->turn.n_gates, fires,
            t->turn.rows_computed);
    if (t->turn.verifies)
        fprintf(stderr, "  draft: %d verify forwards, %ld drafted, %ld accepted\n", t->turn.verifies, t->turn.drafted,
                t->turn.accepted);
    if (!v) return;
    fprintf(stderr, "  user:  \"%s\"\n", t->user);
    if (v->window > 0 && t->feed_len > v->window)
        fprintf(stderr, "  window: the last %d tokens; the %d before them are only in the gist%s\n", v->window,
                t->feed_len - v->window, v->arm == RC_ARM_RC_BGE ? " and the archive" : "");
    const rc_fire_rec *last = NULL; /* the injection the reply was written with */
    for (int i = 0; i < t->turn.n_fires; i++)
        if (t->turn.fires[i].injected) last = &t->turn.fires[i];
    if (last) {
        fprintf(stderr, "  gate fired at token %d (score %.3f > %.3f): of %d archived blocks the bridge head brought "
                "back %d tokens: ", last->c0, last->score, v->threshold, last->ncand, last->nrid);
        print_text(v->r, last->rid, last->nrid, 400);
        fputc('\n', stderr);
    }
    fputs("  reply: ", stderr);
    print_text(v->r, t->turn.reply, t->turn.n_reply, 400);
    fputc('\n', stderr);
}

/* The trace document (the loop goldens' schema), written to path.tmp.PID then renamed. */
static int write_trace(const cli_args *a, const rc_blob *b, const rc_recall_opts *o, const rc_problem *p,
                       const rc_problem_run *run, const rc_bpe *bpe) {
    const char *path = a->trace_out;
    const long problem = a->problem;
    rc_afile af;
    FILE *f = cli_create("replay", &af, path);
    if (!f) return 1;
    fprintf(f, "{\"seed\": %ld, \"mode\": \"%s\", \"arm\": \"%s\", \"kv\": \"%s\", \"numerics\": \"%s\"",
            problem, rc_mode_name(o->mode), rc_arm_name(o->arm), rc_kv_dtype_name((rc_kv_dtype)o->kv),
            rc_numerics_name(o->exec.numerics));
    cli_put_build(f, b, o->exec.numerics, o->kv, a->loop.lm_screen);
    fputs(", \"threshold\": ", f);
    rc_json_put_num(f, o->threshold);
    if (a->threshold_file || a->calibrate) { /* only then: a default trace keeps its bytes */
        fprintf(f, ", \"threshold_from\": ");
        rc_json_put_str(f, a->threshold_file ? a->threshold_file : a->calibrate);
        fprintf(f, ", \"threshold_by\": \"%s\"", a->threshold_file ? "threshold file" : "calibrate");
    }
    if (o->edge) fprintf(f, ", \"edge\": \"%s\"", rc_edge_name(o->edge)); /* only when on: see write_turn */
    if (o->span) fprintf(f, ", \"span\": \"%s\"", rc_span_name(o->span)); /* only when on */
    if (o->rerank) fprintf(f, ", \"rerank\": \"%s\"", rc_rerank_name(o->rerank));
    fprintf(f, ", \"constants\": {\"RW\": %d, \"C\": %d, \"BLOCK\": %d, \"RECALL_K\": %d, \"TURN_CAP\": %d},\n",
            o->window, o->chunk, o->block, o->k, o->turn_cap);
    fputs("\"steps\": [", f);
    for (int i = 0; i < p->n; i++) {
        fprintf(f, "%s{\"kind\": \"%s\", \"u\": ", i ? ", " : "", rc_step_kind_name(p->steps[i].kind));
        rc_json_put_str(f, p->steps[i].user);
        if (p->steps[i].assistant) fputs(", \"a\": ", f), rc_json_put_str(f, p->steps[i].assistant);
        if (p->steps[i].kw) {
            fputs(", \"kw\": ", f), rc_json_put_str(f, p->steps[i].kw);
            fputs(", \"val\": ", f), rc_json_put_str(f, p->steps[i].val);
        }
        fputc('}', f);
    }
    fputs("],\n\"turns\": [\n", f);
    for (int i = 0; i < run->n_turns; i++) {
        if (i) fputs(",\n", f);
        write_turn(f, bpe, &run->turns[i], o->edge == RC_EDGE_INJECT); /* the only edge with a span */
    }
    fputs("],\n\"final_history\": ", f);
    rc_json_put_ids(f, run->history, run->n_history);
    fputs("}\n", f);
    return cli_commit("replay", &af, 1);
}

int cli_replay(const cli_args *a) {
    if (cli_ctx_needs_full(a, a->loop.arm == RC_ARM_FULL)) return 2;
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_bench *bench = NULL;
    rc_recall *r = NULL;
    rc_problem p = {0};
    rc_problem_run run = {0};
    rc_recall_opts o;
    int rc = 1;
    if (cli_blob_open(a, a->pos[0], RC_OPEN_VERIFY, &b, &err) || rc_bench_load(a->bench, &bench, &err) ||
        rc_bench_problem(bench, (uint32_t)a->problem, &p, &err))
        goto fail;
    cli_loop_opts(a, b, &o);
    char top_k[24];
    snprintf(top_k, sizeof top_k, ", top-k %d", o.k);
    if ((rc = cli_loop_threshold(a, b, &o))) goto out;
    rc = 1;
    if (rc_recall_open(b, &o, &r, &err)) goto fail;
    fprintf(stderr, "replay: problem %ld, arm %s, simd %s, %d thread%s, profile %s, numerics %s, kv %s%s%s%s%s%s%s\n", a->problem,
            rc_arm_name(o.arm), rc_recall_simd_name(r), rc_recall_threads(r), rc_recall_threads(r) == 1 ? "" : "s",
            cli_profile_name(b, o.exec.numerics, o.kv, a->loop.lm_screen), rc_numerics_name(o.exec.numerics),
            rc_kv_dtype_name((rc_kv_dtype)o.kv), o.edge ? ", edge " : "", o.edge ? rc_edge_name(o.edge) : "",
            o.span ? ", span exchange" : "", o.rerank ? ", rerank " : "", o.rerank ? rc_rerank_name(o.rerank) : "", a->top_k ? top_k : "");
    replay_view view = {r, o.arm == RC_ARM_FULL ? 0 : o.window, o.arm, o.threshold};
    if (rc_run_problem(r, &p, NULL, on_turn, &view, &run, &err)) goto fail;
    rc_lm_stats lm;
    rc_recall_lm_stats(r, &lm);
    if (lm.screening && lm.picks > 0)
        fprintf(stderr, "lm_head screening: %ld greedy picks, %.1f exact rows per pick, %ld fell back to all logits; "
                "%.1f MB of lm_head data per pick (%.1f MB unscreened)\n", lm.picks, (double)lm.exact_rows / lm.picks,
                lm.full, lm.bytes / lm.picks / 1e6, lm.full_bytes / lm.picks / 1e6);
    rc = write_trace(a, b, &o, &p, &run, rc_recall_bpe(r));
    goto out;
fail:
    rc = cli_fail("replay", &err);
out:
    rc_problem_run_free(&run);
    rc_recall_close(r);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
    return rc;
}
