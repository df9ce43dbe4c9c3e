/* cli_recall.c - `recall replay`: one benchmark problem through the recall loop, written as a
 * trace in the schema of the loop goldens (shared/goldens/README.md). */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_ids(FILE *f, const int32_t *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fputc(']', f);
}

/* float32 values print with 9 significant digits: enough to round-trip exactly. JSON has no
 * infinities (a turn that generated nothing has no margin): those are written as null. */
static void json_float(FILE *f, float x) {
    if (!isfinite(x)) fputs("null", f);
    else fprintf(f, "%.9g", x);
}

static void write_turn(FILE *f, const rc_bpe *bpe, const rc_problem_turn *pt) {
    const rc_turn *t = &pt->turn;
    char *text = NULL;
    size_t tl = 0;
    recall_err err = {0};
    if (rc_bpe_decode(bpe, t->reply, (size_t)t->n_reply, 0, &text, &tl, &err)) text = NULL;
    fprintf(f, "{\"kind\": \"%s\", \"user\": ", rc_step_kind_name(pt->kind));
    json_str(f, pt->user);
    fprintf(f, ", \"feed_len\": %d, \"reply\": ", pt->feed_len);
    json_ids(f, t->reply, t->n_reply);
    fputs(", \"reply_text\": ", f);
    json_str(f, text ? text : "");
    free(text);
    fputs(", \"gates\": [", f);
    for (int i = 0; i < t->n_gates; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->gates[i].c0);
        json_float(f, t->gates[i].score);
        fprintf(f, ", %s]", t->gates[i].fired ? "true" : "false");
    }
    fputs("], \"fires\": [", f);
    for (int i = 0; i < t->n_fires; i++) {
        const rc_fire_rec *r = &t->fires[i];
        fprintf(f, "%s{\"c0\": %d, \"score\": ", i ? ", " : "", r->c0);
        json_float(f, r->score);
        fprintf(f, ", \"ncand\": %d, \"bridge\": [", r->ncand);
        for (int c = 0; c < r->ncand; c++) {
            if (c) fputs(", ", f);
            json_float(f, r->bridge[c]);
        }
        fputs("], \"top\": ", f);
        json_ids(f, r->top, r->ntop);
        fputs(", \"rid\": ", f);
        json_ids(f, r->rid, r->nrid);
        fprintf(f, ", \"injected\": %s}", r->injected ? "true" : "false");
    }
    fputs("], \"rebuilds\": [", f);
    for (int i = 0; i < t->n_rebuilds; i++)
        fprintf(f, "%s[%d, %d, %d, %d]", i ? ", " : "", t->rebuilds[i].c0, t->rebuilds[i].has_sp,
                t->rebuilds[i].inj_len, t->rebuilds[i].window_len);
    fputs("], \"rebuild_reused\": [", f); /* prefix rows each rebuild kept (fast schedule) */
    for (int i = 0; i < t->n_rebuilds; i++) fprintf(f, "%s%d", i ? ", " : "", t->rebuilds[i].reused);
    fprintf(f, "], \"rows_computed\": %ld, \"rows_reused\": %ld, \"bert_encodes\": %d", t->rows_computed,
            t->rows_reused, t->bert_encodes);
    fputs(", \"rebuild_top5\": [", f);
    for (int i = 0; i < t->n_top5; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->top5[i].c0);
        json_ids(f, t->top5[i].ids, 5);
        fputs(", [", f);
        for (int k = 0; k < 5; k++) {
            if (k) fputs(", ", f);
            json_float(f, t->top5[i].logits[k]);
        }
        fputs("]]", f);
    }
    fputs("], \"greedy_min_margin\": ", f);
    json_float(f, t->min_margin);
    fputs(", \"greedy_low_margin\": [", f);
    for (int i = 0; i < t->n_low; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->low[i].pos);
        json_float(f, t->low[i].margin);
        fputc(']', f);
    }
    fputs("]}", f);
}

static void replay_usage(FILE *f) {
    fprintf(f,
            "usage: recall replay BLOB --bench FILE --problem N [--mode faithful|clean]\n"
            "                     [--arm RC_bge|SP|FULL] [--threshold T] [--reference-schedule] [--draft N]\n"
            "                     [--threads N] [--simd scalar|avx2|avx512|neon] --trace OUT.json\n"
            "\n"
            "Runs benchmark problem N (built with CPython's random.Random(N), as the reference does)\n"
            "through the recall loop and writes a trace in the schema of the loop goldens.\n"
            "  --bench FILE     the benchmark data (shared/data/recall_bench.json)\n"
            "  --mode M         faithful (default: the reference, seal forward included) or clean\n"
            "  --arm A          RC_bge (default), SP (no recall) or FULL (no eviction)\n"
            "  --threshold T    gate threshold (default: the gate file's thresh)\n"
            "  --reference-schedule  run the plain reference schedule (one forward per token, every\n"
            "                   turn replayed from BOS); the default fast schedule gives the same bits\n"
            "  --draft N        exact speculative decoding: verify up to N tokens guessed by prompt lookup\n"
            "                   per forward (0 = off, default; at most 32); the trace is the same bits\n"
            "  --trace OUT      trace JSON, written to OUT.tmp then renamed\n"
            "  --threads N      worker threads (default: RECALL_THREADS, else 1); results are bitwise the same\n"
            "  --ctx N          FULL arm context (default: the trained positions; more is refused)\n"
            "  --rope-scaling yarn:FACTOR:ORIG  YaRN for a blob without a profile (floor(FACTOR x ORIG) positions)\n"
            "  --hugepages      copy the blob into huge-page memory (faster decode, slower start)\n"
            "  --simd P         kernel path (default: RECALL_SIMD, else the best this CPU runs)\n"
            "  --lm-head-screen M on, off or auto (default: RECALL_LM_SCREEN, else on when the\n"
            "                 blob has convert --lm-head-screen's int8 lm_head): greedy picks read\n"
            "                 it and recompute exactly only rows that can win; same tokens\n"
            "Progress goes to stderr: the SIMD path and thread count, then one line per generated turn.\n");
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

int cli_parse_mode_arm(const char *cmd, const char *mode, const char *arm, rc_recall_opts *o);
int cli_parse_mode_arm(const char *cmd, const char *mode, const char *arm, rc_recall_opts *o) {
    if (mode) {
        if (!strcmp(mode, "faithful")) o->mode = RC_MODE_FAITHFUL;
        else if (!strcmp(mode, "clean")) o->mode = RC_MODE_CLEAN;
        else {
            fprintf(stderr, "recall %s: --mode %s: expected faithful or clean\n", cmd, mode);
            return 2;
        }
    }
    if (arm) {
        if (!strcmp(arm, "RC_bge")) o->arm = RC_ARM_RC_BGE;
        else if (!strcmp(arm, "SP")) o->arm = RC_ARM_SP;
        else if (!strcmp(arm, "FULL")) o->arm = RC_ARM_FULL;
        else {
            fprintf(stderr, "recall %s: --arm %s: expected RC_bge, SP or FULL\n", cmd, arm);
            return 2;
        }
    }
    return 0;
}

typedef struct {
    const char *blob_path, *bench_path, *trace, *mode, *arm, *thr;
    long problem;
    int reference, draft;
    cli_exec_args xa;
} replay_opts;

/* Fills o from argv; returns -1 to go on, else the exit code (0 after --help). */
static int replay_parse_args(int argc, char **argv, replay_opts *o) {
    memset(o, 0, sizeof *o);
    o->problem = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            replay_usage(stdout);
            return 0;
        }
        {
            int xf = cli_exec_flag("replay", argc, argv, &i, &o->xa);
            if (xf < 0) return 2;
            if (xf > 0) continue;
        }
        if (!strcmp(a, "--reference-schedule")) {
            o->reference = 1;
            continue;
        }
        const char **slot = !strcmp(a, "--bench") ? &o->bench_path : !strcmp(a, "--trace") ? &o->trace
                          : !strcmp(a, "--mode") ? &o->mode : !strcmp(a, "--arm") ? &o->arm
                          : !strcmp(a, "--threshold") ? &o->thr : NULL;
        if (slot || !strcmp(a, "--problem") || !strcmp(a, "--draft")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall replay: %s needs a value\n", a);
                return 2;
            }
            if (slot) {
                *slot = argv[++i];
            } else if (!strcmp(a, "--draft")) {
                if (cli_parse_draft("replay", argv[++i], &o->draft)) return 2;
            } else {
                char *end;
                o->problem = strtol(argv[++i], &end, 10);
                if (*end || o->problem < 0 || o->problem > 0x7fffffffL) {
                    fprintf(stderr, "recall replay: --problem %s: expected a non-negative integer\n", argv[i]);
                    return 2;
                }
            }
        } else if (a[0] == '-' || o->blob_path) {
            fprintf(stderr, "recall replay: unexpected argument '%s' (see --help)\n", a);
            return 2;
        } else {
            o->blob_path = a;
        }
    }
    if (!o->blob_path || !o->bench_path || o->problem < 0 || !o->trace) {
        fprintf(stderr, "recall replay: needs BLOB, --bench, --problem and --trace (see --help)\n");
        return 2;
    }
    return -1;
}

/* The loop options: the blob's defaults with the command line applied; 0 or 2 (message printed). */
static int replay_loop_opts(const replay_opts *ro, const rc_blob *b, rc_recall_opts *o) {
    rc_recall_defaults(b, o);
    o->reference_schedule = ro->reference;
    o->draft = ro->draft;
    o->threads = ro->xa.threads;
    o->max_ctx = ro->xa.ctx;
    o->simd = ro->xa.simd;
    o->lm_screen = ro->xa.lm_screen;
    if (cli_parse_mode_arm("replay", ro->mode, ro->arm, o)) return 2;
    if (ro->thr) {
        char *end;
        o->threshold = strtof(ro->thr, &end);
        if (*end || isnan(o->threshold)) {
            fprintf(stderr, "recall replay: --threshold %s: expected a number\n", ro->thr);
            return 2;
        }
    }
    return 0;
}

/* The trace document (the loop goldens' schema), written to path.tmp.PID then renamed. */
static int write_trace(const char *path, long problem, const rc_recall_opts *o, const rc_problem *p,
                       const rc_problem_run *run, const rc_bpe *bpe) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "recall replay: %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    fprintf(f, "{\"seed\": %ld, \"mode\": \"%s\", \"arm\": \"%s\", \"threshold\": ", problem,
            o->mode == RC_MODE_FAITHFUL ? "faithful" : "clean",
            o->arm == RC_ARM_RC_BGE ? "RC_bge" : o->arm == RC_ARM_SP ? "SP" : "FULL");
    json_float(f, o->threshold);
    fprintf(f, ", \"constants\": {\"RW\": %d, \"C\": %d, \"BLOCK\": %d, \"RECALL_K\": %d, \"TURN_CAP\": %d},\n",
            o->window, o->chunk, o->block, o->k, o->turn_cap);
    fputs("\"steps\": [", f);
    for (int i = 0; i < p->n; i++) {
        fprintf(f, "%s{\"kind\": \"%s\", \"u\": ", i ? ", " : "", rc_step_kind_name(p->steps[i].kind));
        json_str(f, p->steps[i].user);
        if (p->steps[i].assistant) fputs(", \"a\": ", f), json_str(f, p->steps[i].assistant);
        if (p->steps[i].kw) {
            fputs(", \"kw\": ", f), json_str(f, p->steps[i].kw);
            fputs(", \"val\": ", f), json_str(f, p->steps[i].val);
        }
        fputc('}', f);
    }
    fputs("],\n\"turns\": [\n", f);
    for (int i = 0; i < run->n_turns; i++) {
        if (i) fputs(",\n", f);
        write_turn(f, bpe, &run->turns[i]);
    }
    fputs("],\n\"final_history\": ", f);
    json_ids(f, run->history, run->n_history);
    fputs("}\n", f);
    int bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        fprintf(stderr, "recall replay: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", path);
    return 0;
}

int cli_replay(int argc, char **argv) {
    replay_opts ro;
    int rc = replay_parse_args(argc, argv, &ro);
    if (rc >= 0) return rc;
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_bench *bench = NULL;
    rc_recall *r = NULL;
    rc_problem p = {0};
    rc_problem_run run = {0};
    rc_recall_opts o;
    rc = 1;
    if (cli_blob_open(&ro.xa, ro.blob_path, RC_OPEN_VERIFY, &b, &err) ||
        rc_bench_load(ro.bench_path, &bench, &err) || rc_bench_problem(bench, (uint32_t)ro.problem, &p, &err))
        goto fail;
    if (replay_loop_opts(&ro, b, &o)) {
        rc = 2;
        goto out;
    }
    if (rc_recall_open(b, &o, &r, &err)) goto fail;
    fprintf(stderr, "replay: problem %ld, arm %s, simd %s, %d thread%s\n", ro.problem,
            o.arm == RC_ARM_SP ? "SP" : o.arm == RC_ARM_FULL ? "FULL" : "RC_bge", rc_recall_simd_name(r),
            rc_recall_threads(r), rc_recall_threads(r) == 1 ? "" : "s");
    replay_view view = {r, o.arm == RC_ARM_FULL ? 0 : o.window, o.arm, o.threshold};
    if (rc_run_problem(r, &p, NULL, on_turn, &view, &run, &err)) goto fail;
    rc_lm_stats lm;
    rc_recall_lm_stats(r, &lm);
    if (lm.screening && lm.picks > 0)
        fprintf(stderr, "lm_head screening: %ld greedy picks, %.1f exact rows per pick, %ld fell back to all logits; "
                "%.1f MB of lm_head data per pick (%.1f MB unscreened)\n", lm.picks, (double)lm.exact_rows / lm.picks,
                lm.full, lm.bytes / lm.picks / 1e6, lm.full_bytes / lm.picks / 1e6);
    rc = write_trace(ro.trace, ro.problem, &o, &p, &run, rc_recall_bpe(r));
    goto out;
fail:
    fprintf(stderr, "recall replay: %s\n", err.msg);
out:
    rc_problem_run_free(&run);
    rc_recall_close(r);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
    return rc;
}
