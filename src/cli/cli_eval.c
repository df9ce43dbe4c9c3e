/* cli_eval.c - `recall eval`: the reference multi-fact recall benchmark (RECALL_SPEC §8.1).
 *
 * Every arm replays every problem from scratch (rc_run_problem). Per generated turn:
 *   question turn: recall_ok    = strip(val, ", ").lower() in strip(reply_text, ", ").lower()
 *                  retrieved_ok = strip(val, ",").lower() in strip(decode(rid), ",").lower()
 *                                 for any injected fire of the turn
 *   probe turn:    casual false-fire = the turn has at least one fire (anywhere in the turn,
 *                  teacher-forced history included, as the reference counts len(fires))
 * Aggregates: recall = ok / questions, retrieved = ret / questions, casual = fired probes / probes.
 * Lower-casing is ASCII-only (the benchmark values are ASCII). Arm labels: BASE[@THRESH][:rFLOOR],
 * BASE in SP, RC_bge, FULL; THRESH overrides the gate threshold, FLOOR sets the relevance floor. */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "recall_loop.h"
#include "tokenize_bpe.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_parse_mode_arm(const char *cmd, const char *mode, const char *arm, rc_recall_opts *o);

#define MAX_PROBLEMS 1024
#define MAX_ARMS 32

/* "0-7", "3", "0,2,5-6" -> ascending-as-written list of seeds. Returns the count, -1 on error. */
int cli_parse_problems(const char *spec, uint32_t *out, int cap) {
    int n = 0;
    const char *p = spec;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno || a < 0 || a > 0x7fffffffL) return -1;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b > 0x7fffffffL) return -1;
            p = end;
        } else {
            b = a;
        }
        for (long i = a; i <= b; i++) {
            if (n == cap) return -1;
            out[n++] = (uint32_t)i;
        }
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

typedef struct {
    char label[64];
    rc_arm base;
    int has_thresh, has_floor;
    float thresh, floor;
} arm_spec;

/* BASE[@THRESH][:rFLOOR] */
static int parse_arm(const char *s, arm_spec *a) {
    memset(a, 0, sizeof *a);
    size_t bl = strcspn(s, "@:");
    if (strlen(s) >= sizeof a->label || bl == 0) return -1;
    snprintf(a->label, sizeof a->label, "%s", s);
    if (bl == 2 && !strncmp(s, "SP", 2)) a->base = RC_ARM_SP;
    else if (bl == 6 && !strncmp(s, "RC_bge", 6)) a->base = RC_ARM_RC_BGE;
    else if (bl == 4 && !strncmp(s, "FULL", 4)) a->base = RC_ARM_FULL;
    else return -1;
    const char *p = s + bl;
    char *end;
    if (*p == '@') {
        a->thresh = strtof(p + 1, &end);
        if (end == p + 1 || isnan(a->thresh)) return -1;
        a->has_thresh = 1;
        p = end;
    }
    if (*p == ':') {
        if (p[1] != 'r') return -1;
        a->floor = strtof(p + 2, &end);
        if (end == p + 2 || isnan(a->floor)) return -1;
        a->has_floor = 1;
        p = end;
    }
    return *p ? -1 : 0;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

/* Copy of s without the characters in `drop`, ASCII-lowercased. */
static char *normalise(const char *s, const char *drop) {
    char *o = malloc(strlen(s) + 1);
    if (!o) return NULL;
    size_t n = 0;
    for (const char *p = s; *p; p++)
        if (!strchr(drop, *p)) o[n++] = (char)tolower((unsigned char)*p);
    o[n] = 0;
    return o;
}

static int contains_norm(const char *hay, const char *needle, const char *drop) {
    char *h = normalise(hay, drop), *n = normalise(needle, drop);
    int r = h && n && strstr(h, n) != NULL;
    free(h);
    free(n);
    return r;
}

static char *decode(const rc_bpe *bpe, const int32_t *ids, int n) {
    char *text = NULL;
    size_t len;
    recall_err err = {0};
    if (rc_bpe_decode(bpe, ids, (size_t)(n > 0 ? n : 0), 0, &text, &len, &err)) return NULL;
    return text;
}

typedef struct {
    int n_q, n_ok, n_ret, n_probe, n_probe_fired, fires, injected;
    double *top_q, *top_c; /* best bridge score of every fire, split by turn kind */
    int n_top_q, n_top_c, cap_top_q, cap_top_c;
    int oom;
} arm_tally;

static void push_top(arm_tally *t, int q, double v) {
    double **arr = q ? &t->top_q : &t->top_c;
    int *n = q ? &t->n_top_q : &t->n_top_c, *cap = q ? &t->cap_top_q : &t->cap_top_c;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        double *na = realloc(*arr, (size_t)nc * sizeof *na);
        if (!na) {
            t->oom = 1;
            return;
        }
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_list(FILE *f, double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        json_num(f, v[i]);
    }
    fputc(']', f);
}

/* Scores one problem run into the tally; writes its JSON object when f is non-NULL. */
static int score_problem(FILE *f, const rc_bpe *bpe, const rc_problem *p, uint32_t seed, const rc_problem_run *run,
                         double seconds, arm_tally *t, int *ok, int *ret, int *nq, int *pf, int *np) {
    *ok = *ret = *nq = *pf = *np = 0;
    if (f) fprintf(f, "{\"seed\": %u, \"seconds\": %.1f, \"turns\": [", seed, seconds);
    for (int i = 0, ti = 0; i < p->n && ti < run->n_turns; i++) {
        const rc_step *st = &p->steps[i];
        if (st->kind != RC_STEP_PROBE && st->kind != RC_STEP_Q) continue;
        const rc_problem_turn *pt = &run->turns[ti];
        const rc_turn *u = &pt->turn;
        char *text = decode(bpe, u->reply, u->n_reply);
        if (!text) return -1;
        int injected = 0, rok = 0, rret = 0;
        double top_best = -INFINITY, max_gate = -INFINITY;
        for (int g = 0; g < u->n_gates; g++)
            if (u->gates[g].score > max_gate) max_gate = u->gates[g].score;
        for (int k = 0; k < u->n_fires; k++) {
            const rc_fire_rec *fr = &u->fires[k];
            double best = -INFINITY;
            for (int c = 0; c < fr->ncand; c++)
                if (fr->bridge[c] > best) best = fr->bridge[c];
            if (best > top_best) top_best = best;
            push_top(t, st->kind == RC_STEP_Q, best);
            if (!fr->injected) continue;
            injected++;
            if (st->kind == RC_STEP_Q && !rret) {
                char *blk = decode(bpe, fr->rid, fr->nrid);
                if (!blk) {
                    free(text);
                    return -1;
                }
                rret = contains_norm(blk, st->val, ",");
                free(blk);
            }
        }
        t->fires += u->n_fires;
        t->injected += injected;
        if (st->kind == RC_STEP_Q) {
            rok = contains_norm(text, st->val, ", ");
            (*nq)++, t->n_q++;
            *ok += rok, t->n_ok += rok;
            *ret += rret, t->n_ret += rret;
        } else {
            (*np)++, t->n_probe++;
            int fired = u->n_fires > 0;
            *pf += fired, t->n_probe_fired += fired;
        }
        if (f) {
            fprintf(f, "%s{\"kind\": \"%s\", \"user\": ", ti ? ", " : "", rc_step_kind_name(st->kind));
            json_str(f, st->user);
            if (st->kind == RC_STEP_Q) {
                fputs(", \"kw\": ", f), json_str(f, st->kw);
                fputs(", \"val\": ", f), json_str(f, st->val);
                fprintf(f, ", \"recall_ok\": %s, \"retrieved_ok\": %s", rok ? "true" : "false", rret ? "true" : "false");
            } else {
                fprintf(f, ", \"false_fire\": %s", u->n_fires > 0 ? "true" : "false");
            }
            fprintf(f, ", \"feed_len\": %d, \"n_reply\": %d, \"reply_text\": ", pt->feed_len, u->n_reply);
            json_str(f, text);
            fprintf(f, ", \"n_gates\": %d, \"max_gate\": ", u->n_gates);
            json_num(f, max_gate);
            fprintf(f, ", \"n_fires\": %d, \"n_injected\": %d, \"fire_c0\": [", u->n_fires, injected);
            for (int k = 0; k < u->n_fires; k++) fprintf(f, "%s%d", k ? ", " : "", u->fires[k].c0);
            fputs("], \"top_bridge\": ", f);
            json_num(f, top_best);
            fputc('}', f);
        }
        free(text);
        ti++;
    }
    if (f) fputs("]}", f);
    return t->oom ? -1 : 0;
}

static void eval_usage(FILE *f) {
    fprintf(f,
            "usage: recall eval BLOB --bench FILE [--problems 0-7] [--arms SP,RC_bge@-2.0,...]\n"
            "                   [--mode faithful|clean] [--json OUT.json]\n"
            "\n"
            "The reference multi-fact recall benchmark (RECALL_SPEC 8.1): every arm replays each problem\n"
            "(built with CPython's random.Random(seed)) from scratch; 3 questions and 2 casual probes per\n"
            "problem are generated and scored.\n"
            "  --problems LIST  seeds: 0-7 (default), 3, or 0,2,5-6\n"
            "  --arms LIST      comma-separated arm labels BASE[@THRESH][:rFLOOR] (default SP,RC_bge)\n"
            "                   BASE: SP (no recall), RC_bge (recall), FULL (no eviction)\n"
            "                   @THRESH: gate threshold (default: the gate file's thresh)\n"
            "                   :rFLOOR: relevance floor on the best bridge score (e.g. RC_bge@-3.5:r-21.3)\n"
            "  --mode M         faithful (default) or clean\n"
            "  --json OUT       per-problem, per-turn details (reply text, fires, scores)\n"
            "  --threads N      worker threads (default: RECALL_THREADS, else 1); same bits for any N\n"
            "  --ctx N          FULL arm context (default: the trained positions; more is refused)\n"
            "  --rope-scaling yarn:FACTOR:ORIG  YaRN for a blob without a profile (floor(FACTOR x ORIG) positions)\n"
            "  --hugepages      copy the blob into huge-page memory (faster decode, slower start)\n"
            "  --simd P         kernel path scalar|avx2|avx512|neon (default: RECALL_SIMD, else the best)\n"
            "Scoring: recall = value (commas/spaces removed, lower-cased) found in the reply;\n"
            "retrieved = value (commas removed, lower-cased) found in an injected block's text;\n"
            "casual false-fire = probe turns with any fire (the reference counts fires anywhere in the\n"
            "turn, teacher-forced history included); fires = all fires of generated turns (injected).\n"
            "Progress goes to stderr, one line per problem; the table to stdout.\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double pct(int a, int b) { return b ? 100.0 * a / b : 0.0; }

int cli_eval(int argc, char **argv) {
    const char *blob_path = NULL, *bench_path = NULL, *problems_s = "0-7", *arms_s = "SP,RC_bge", *mode = NULL;
    const char *json_path = NULL;
    cli_exec_args xa = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            eval_usage(stdout);
            return 0;
        }
        {
            int xf = cli_exec_flag("eval", argc, argv, &i, &xa);
            if (xf < 0) return 2;
            if (xf > 0) continue;
        }

        const char **slot = !strcmp(a, "--bench") ? &bench_path : !strcmp(a, "--problems") ? &problems_s
                          : !strcmp(a, "--arms") ? &arms_s : !strcmp(a, "--mode") ? &mode
                          : !strcmp(a, "--json") ? &json_path : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall eval: %s needs a value\n", a);
                return 2;
            }
            *slot = argv[++i];
        } else if (a[0] == '-' || blob_path) {
            fprintf(stderr, "recall eval: unexpected argument '%s' (see --help)\n", a);
            return 2;
        } else {
            blob_path = a;
        }
    }
    if (!blob_path || !bench_path) {
        fprintf(stderr, "recall eval: needs BLOB and --bench (see --help)\n");
        return 2;
    }
    const int cap_problems = MAX_PROBLEMS;
    uint32_t *seeds = malloc((size_t)cap_problems * sizeof *seeds);
    arm_spec arms[MAX_ARMS];
    arm_tally tally[MAX_ARMS];
    memset(tally, 0, sizeof tally);
    int n_arms = 0;
    if (!seeds) {
        fprintf(stderr, "recall eval: out of memory\n");
        return 1;
    }
    int n_seeds = cli_parse_problems(problems_s, seeds, cap_problems);
    if (n_seeds <= 0) {
        fprintf(stderr, "recall eval: --problems %s: expected seeds like 0-7, 3 or 0,2,5-6 (at most %d)\n",
                problems_s, cap_problems);
        free(seeds);
        return 2;
    }
    for (const char *p = arms_s; *p;) {
        size_t l = strcspn(p, ",");
        char one[128];
        if (l >= sizeof one || n_arms == MAX_ARMS) {
            fprintf(stderr, "recall eval: --arms: too many or too long labels\n");
            free(seeds);
            return 2;
        }
        memcpy(one, p, l);
        one[l] = 0;
        if (parse_arm(one, &arms[n_arms])) {
            fprintf(stderr, "recall eval: arm label '%s': expected BASE[@THRESH][:rFLOOR] with BASE SP, RC_bge or FULL\n",
                    one);
            free(seeds);
            return 2;
        }
        n_arms++;
        p += l;
        if (*p == ',') p++;
    }
    if (!n_arms) {
        fprintf(stderr, "recall eval: --arms is empty\n");
        free(seeds);
        return 2;
    }
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_bench *bench = NULL;
    rc_recall *r = NULL;
    FILE *jf = NULL;
    char *tmp = NULL;
    int rc = 1;
    rc_recall_opts base;
    if (cli_blob_open(&xa, blob_path, RC_OPEN_VERIFY, &b, &err) || rc_bench_load(bench_path, &bench, &err)) goto fail;
    rc_recall_defaults(b, &base);
    base.threads = xa.threads;
    base.max_ctx = xa.ctx;
    base.simd = xa.simd;
    if (cli_parse_mode_arm("eval", mode, NULL, &base)) {
        rc = 2;
        goto out;
    }
    if (json_path) {
        tmp = malloc(strlen(json_path) + 32);
        if (!tmp) goto out;
        sprintf(tmp, "%s.tmp.%ld", json_path, (long)getpid());
        jf = fopen(tmp, "w");
        if (!jf) {
            fprintf(stderr, "recall eval: %s: %s\n", tmp, strerror(errno));
            goto out;
        }
        fprintf(jf, "{\"blob\": ");
        json_str(jf, blob_path);
        fprintf(jf, ", \"mode\": \"%s\", \"problems\": [", base.mode == RC_MODE_FAITHFUL ? "faithful" : "clean");
        for (int i = 0; i < n_seeds; i++) fprintf(jf, "%s%u", i ? ", " : "", seeds[i]);
        fputs("],\n\"arms\": [", jf);
    }
    for (int a = 0; a < n_arms; a++) {
        rc_recall_opts o = base;
        o.arm = arms[a].base;
        if (arms[a].has_thresh) o.threshold = arms[a].thresh;
        o.use_floor = arms[a].has_floor;
        o.floor = arms[a].floor;
        if (rc_recall_open(b, &o, &r, &err)) goto fail;
        if (jf) {
            fprintf(jf, "%s\n{\"label\": ", a ? "," : "");
            json_str(jf, arms[a].label);
            fputs(", \"threshold\": ", jf);
            json_num(jf, o.threshold);
            fputs(", \"floor\": ", jf);
            if (o.use_floor) json_num(jf, o.floor);
            else fputs("null", jf);
            fputs(", \"per_problem\": [", jf);
        }
        for (int i = 0; i < n_seeds; i++) {
            rc_problem p;
            rc_problem_run run;
            double t0 = now_s();
            if (rc_bench_problem(bench, seeds[i], &p, &err)) goto fail;
            if (rc_run_problem(r, &p, NULL, NULL, NULL, &run, &err)) {
                rc_problem_free(&p);
                goto fail;
            }
            double dt = now_s() - t0;
            int ok, ret, nq, pf, np;
            if (jf && i) fputs(",\n", jf);
            int bad = score_problem(jf, rc_recall_bpe(r), &p, seeds[i], &run, dt, &tally[a], &ok, &ret, &nq, &pf, &np);
            rc_problem_run_free(&run);
            rc_problem_free(&p);
            if (bad) {
                fprintf(stderr, "recall eval: out of memory while scoring\n");
                goto out;
            }
            fprintf(stderr, "[%s] problem %u: recall %d/%d, retrieved %d/%d, probes fired %d/%d (%.1f s)\n",
                    arms[a].label, seeds[i], ok, nq, ret, nq, pf, np, dt);
        }
        rc_recall_close(r);
        r = NULL;
        if (jf) {
            const arm_tally *t = &tally[a];
            fprintf(jf, "],\n \"questions\": %d, \"recall_ok\": %d, \"retrieved_ok\": %d, \"probes\": %d, "
                        "\"probes_fired\": %d, \"fires\": %d, \"injected\": %d, \"recall\": ",
                    t->n_q, t->n_ok, t->n_ret, t->n_probe, t->n_probe_fired, t->fires, t->injected);
            json_num(jf, t->n_q ? (double)t->n_ok / t->n_q : NAN);
            fputs(", \"retrieved\": ", jf);
            json_num(jf, t->n_q ? (double)t->n_ret / t->n_q : NAN);
            fputs(", \"casual_fire\": ", jf);
            json_num(jf, t->n_probe ? (double)t->n_probe_fired / t->n_probe : NAN);
            fputs(", \"top_bridge_q_fires\": ", jf);
            json_list(jf, tally[a].top_q, tally[a].n_top_q);
            fputs(", \"top_bridge_c_fires\": ", jf);
            json_list(jf, tally[a].top_c, tally[a].n_top_c);
            fputc('}', jf);
        }
    }
    printf("%-24s %-14s %-14s %-18s %s\n", "arm", "recall", "retrieved", "casual false-fire", "fires (injected)");
    for (int a = 0; a < n_arms; a++) {
        const arm_tally *t = &tally[a];
        char c1[32], c2[32], c3[32];
        snprintf(c1, sizeof c1, "%d/%d %3.0f%%", t->n_ok, t->n_q, pct(t->n_ok, t->n_q));
        snprintf(c2, sizeof c2, "%d/%d %3.0f%%", t->n_ret, t->n_q, pct(t->n_ret, t->n_q));
        snprintf(c3, sizeof c3, "%d/%d %3.0f%%", t->n_probe_fired, t->n_probe, pct(t->n_probe_fired, t->n_probe));
        printf("%-24s %-14s %-14s %-18s %d (%d)\n", arms[a].label, c1, c2, c3, t->fires, t->injected);
    }
    fflush(stdout);
    if (jf) {
        fputs("]}\n", jf);
        int bad = ferror(jf) != 0;
        int cl = fclose(jf);
        jf = NULL;
        if (bad || cl != 0 || rename(tmp, json_path) != 0) {
            fprintf(stderr, "recall eval: cannot write %s: %s\n", json_path, strerror(errno));
            remove(tmp);
            goto out;
        }
        fprintf(stderr, "wrote %s\n", json_path);
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "recall eval: %s\n", err.msg);
out:
    if (jf) {
        fclose(jf);
        remove(tmp);
    }
    free(tmp);
    for (int a = 0; a < n_arms; a++) {
        free(tally[a].top_q);
        free(tally[a].top_c);
    }
    free(seeds);
    rc_recall_close(r);
    rc_bench_free(bench);
    rc_blob_close(b);
    return rc;
}
