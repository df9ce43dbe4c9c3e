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
 * BASE in SP, RC_bge, FULL; THRESH overrides the gate threshold, FLOOR sets the relevance floor.
 *
 * Scale-out: the run is A*P jobs (arm, problem), j = a*P + i in the order above (cli_eval.h);
 * `--shard K/N` runs the jobs with j % N == K-1 and writes them to --json together with what
 * identifies the run (options, blob and benchmark checksums); `--merge` (cli_eval_merge.c) turns
 * the shard files back into the table and JSON of one run. Each job is independent: a problem
 * replays from scratch, so the bits do not depend on which other jobs ran before it. */
#include "problems.h"
#include "blob.h"
#include "checksum.h"
#include "cli.h"
#include "cli_eval.h"
#include "json.h"
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
#define MAX_SHARDS 1000000

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

/* ---------------------------------------------------------------- the JSON document and the table */

void eval_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* 9 significant digits: a float (or a double made from one) reads back to the same text. */
void eval_json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

void eval_tally_push(eval_tally *t, int q, double v) {
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

void eval_tally_free(eval_tally *t) {
    free(t->top_q);
    free(t->top_c);
    t->top_q = t->top_c = NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_list(FILE *f, double *v, int n) {
    if (n > 0) qsort(v, (size_t)n, sizeof *v, cmp_double); /* v is NULL when a shard ran no such job */
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        eval_json_num(f, v[i]);
    }
    fputc(']', f);
}

void eval_json_head(FILE *f, const char *blob, const char *mode, const char *numerics, const uint32_t *seeds, int n_seeds,
                    const eval_shard_info *sh) {
    fprintf(f, "{\"blob\": ");
    eval_json_str(f, blob);
    fprintf(f, ", \"mode\": \"%s\", \"numerics\": \"%s\", \"problems\": [", mode, numerics);
    for (int i = 0; i < n_seeds; i++) fprintf(f, "%s%u", i ? ", " : "", seeds[i]);
    fputc(']', f);
    if (sh) {
        fprintf(f, ",\n\"shard\": {\"k\": %d, \"n\": %d, \"n_jobs\": %d, \"jobs\": [", sh->k, sh->n, sh->n_jobs);
        for (int i = 0; i < sh->n_ran; i++) fprintf(f, "%s%d", i ? ", " : "", sh->jobs[i]);
        fprintf(f, "], \"blob_xxh64\": \"%016llx\", \"bench\": ", (unsigned long long)sh->blob_xxh64);
        eval_json_str(f, sh->bench);
        fprintf(f, ", \"bench_xxh64\": \"%016llx\"}", (unsigned long long)sh->bench_xxh64);
    }
    fputs(",\n\"arms\": [", f);
}

void eval_json_arm_head(FILE *f, int a, const eval_arm_info *arm) {
    fprintf(f, "%s\n{\"label\": ", a ? "," : "");
    eval_json_str(f, arm->label);
    fputs(", \"threshold\": ", f);
    eval_json_num(f, arm->threshold);
    fputs(", \"floor\": ", f);
    if (arm->has_floor) eval_json_num(f, arm->floor);
    else fputs("null", f);
    fputs(", \"per_problem\": [", f);
}

void eval_json_arm_tail(FILE *f, eval_tally *t) {
    fprintf(f, "],\n \"questions\": %d, \"recall_ok\": %d, \"retrieved_ok\": %d, \"probes\": %d, "
               "\"probes_fired\": %d, \"fires\": %d, \"injected\": %d, \"recall\": ",
            t->n_q, t->n_ok, t->n_ret, t->n_probe, t->n_probe_fired, t->fires, t->injected);
    eval_json_num(f, t->n_q ? (double)t->n_ok / t->n_q : NAN);
    fputs(", \"retrieved\": ", f);
    eval_json_num(f, t->n_q ? (double)t->n_ret / t->n_q : NAN);
    fputs(", \"casual_fire\": ", f);
    eval_json_num(f, t->n_probe ? (double)t->n_probe_fired / t->n_probe : NAN);
    fputs(", \"top_bridge_q_fires\": ", f);
    json_list(f, t->top_q, t->n_top_q);
    fputs(", \"top_bridge_c_fires\": ", f);
    json_list(f, t->top_c, t->n_top_c);
    fputc('}', f);
}

void eval_json_end(FILE *f) { fputs("]}\n", f); }

FILE *eval_json_create(const char *path, char **tmp) {
    *tmp = malloc(strlen(path) + 32);
    if (!*tmp) {
        fprintf(stderr, "recall eval: out of memory\n");
        return NULL;
    }
    sprintf(*tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(*tmp, "w");
    if (!f) fprintf(stderr, "recall eval: %s: %s\n", *tmp, strerror(errno));
    return f;
}

int eval_json_commit(FILE *f, const char *tmp, const char *path) {
    int bad = ferror(f) != 0;
    int cl = fclose(f);
    if (bad || cl != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "recall eval: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", path);
    return 0;
}

static double pct(int a, int b) { return b ? 100.0 * a / b : 0.0; }

void eval_print_table(const eval_arm_info *arms, const eval_tally *tally, int n_arms) {
    printf("%-24s %-14s %-14s %-18s %s\n", "arm", "recall", "retrieved", "casual false-fire", "fires (injected)");
    for (int a = 0; a < n_arms; a++) {
        const eval_tally *t = &tally[a];
        char c1[32], c2[32], c3[32];
        snprintf(c1, sizeof c1, "%d/%d %3.0f%%", t->n_ok, t->n_q, pct(t->n_ok, t->n_q));
        snprintf(c2, sizeof c2, "%d/%d %3.0f%%", t->n_ret, t->n_q, pct(t->n_ret, t->n_q));
        snprintf(c3, sizeof c3, "%d/%d %3.0f%%", t->n_probe_fired, t->n_probe, pct(t->n_probe_fired, t->n_probe));
        printf("%-24s %-14s %-14s %-18s %d (%d)\n", arms[a].label, c1, c2, c3, t->fires, t->injected);
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------- scoring */

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

/* Scores one problem run into the tally; writes its JSON object when f is non-NULL. */
static int score_problem(FILE *f, const rc_bpe *bpe, const rc_problem *p, uint32_t seed, const rc_problem_run *run,
                         double seconds, eval_tally *t, int *ok, int *ret, int *nq, int *pf, int *np) {
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
            eval_tally_push(t, st->kind == RC_STEP_Q, best);
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
            eval_json_str(f, st->user);
            if (st->kind == RC_STEP_Q) {
                fputs(", \"kw\": ", f), eval_json_str(f, st->kw);
                fputs(", \"val\": ", f), eval_json_str(f, st->val);
                fprintf(f, ", \"recall_ok\": %s, \"retrieved_ok\": %s", rok ? "true" : "false", rret ? "true" : "false");
            } else {
                fprintf(f, ", \"false_fire\": %s", u->n_fires > 0 ? "true" : "false");
            }
            fprintf(f, ", \"feed_len\": %d, \"n_reply\": %d, \"reply_text\": ", pt->feed_len, u->n_reply);
            eval_json_str(f, text);
            fprintf(f, ", \"n_gates\": %d, \"max_gate\": ", u->n_gates);
            eval_json_num(f, max_gate);
            fprintf(f, ", \"n_fires\": %d, \"n_injected\": %d, \"fire_c0\": [", u->n_fires, injected);
            for (int k = 0; k < u->n_fires; k++) fprintf(f, "%s%d", k ? ", " : "", u->fires[k].c0);
            fputs("], \"top_bridge\": ", f);
            eval_json_num(f, top_best);
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
            "                   [--mode faithful|clean] [--json OUT.json] [--shard K/N] [--draft N]\n"
            "       recall eval --merge SHARD.json... [--json OUT.json]\n"
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
            "  --draft N        exact speculative decoding: verify up to N tokens guessed by prompt lookup\n"
            "                   per forward (0 = off, default; at most 32); the results are the same bits\n"
            "  --threads N      worker threads (default: RECALL_THREADS, else 1); same bits for any N\n"
            "  --ctx N          FULL arm context (default: the trained positions; more is refused)\n"
            "  --rope-scaling yarn:FACTOR:ORIG  YaRN for a blob without a profile (floor(FACTOR x ORIG) positions)\n"
            "  --hugepages      copy the blob into huge-page memory (faster decode, slower start)\n"
            "  --simd P         kernel path scalar|avx2|avx512|neon (default: RECALL_SIMD, else the best)\n"
            "  --lm-head-screen M on, off or auto (default: RECALL_LM_SCREEN, else on when the\n"
            "                 blob has convert --lm-head-screen's int8 lm_head): greedy picks read\n"
            "                 it and recompute exactly only rows that can win; same tokens\n"
            "  --shard K/N      run shard K of N (K = 1..N): the jobs j with j %% N == K-1, where job\n"
            "                   j = arm index * number of problems + problem index (the order of one\n"
            "                   run); needs --json, which then also records what --merge checks\n"
            "  --merge FILES    (first argument) combine the --json files of all shards of one run into\n"
            "                   that run's table and --json (only the \"seconds\" timings differ);\n"
            "                   refuses shards of different runs (options, blob, benchmark), jobs\n"
            "                   present twice and missing jobs\n"
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

/* ---------------------------------------------------------------- options */

typedef struct {
    const char *blob_path, *bench_path, *problems_s, *arms_s, *mode, *json_path, *shard_s, *draft_s;
    cli_exec_args xa;
    int shard_k, shard_n; /* 1/1 without --shard */
} eval_opts;

/* "K/N" with 1 <= K <= N <= MAX_SHARDS; 0, or 2 with the bound that failed printed. */
static int parse_shard(const char *s, int *k, int *n) {
    char *end;
    errno = 0;
    long K = strtol(s, &end, 10), N = -1;
    if (end != s && *end == '/') {
        const char *q = end + 1;
        N = strtol(q, &end, 10);
        if (end == q) N = -1;
    }
    if (errno || N < 0 || *end) {
        fprintf(stderr, "recall eval: --shard %s: expected K/N, e.g. 2/8 (shard K of N, K counted from 1)\n", s);
        return 2;
    }
    if (N < 1 || N > MAX_SHARDS) {
        fprintf(stderr, "recall eval: --shard %s: N must be in 1..%d\n", s, MAX_SHARDS);
        return 2;
    }
    if (K < 1 || K > N) {
        fprintf(stderr, "recall eval: --shard %s: K must be in 1..%ld (K is counted from 1)\n", s, N);
        return 2;
    }
    *k = (int)K;
    *n = (int)N;
    return 0;
}

/* Fills o from argv; returns -1 to go on, else the exit code (0 after --help). */
static int eval_parse_args(int argc, char **argv, eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->problems_s = "0-7";
    o->arms_s = "SP,RC_bge";
    o->shard_k = o->shard_n = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            eval_usage(stdout);
            return 0;
        }
        int xf = cli_exec_flag("eval", argc, argv, &i, &o->xa);
        if (xf < 0) return 2;
        if (xf > 0) continue;
        const char **slot = !strcmp(a, "--bench") ? &o->bench_path : !strcmp(a, "--problems") ? &o->problems_s
                          : !strcmp(a, "--arms") ? &o->arms_s : !strcmp(a, "--mode") ? &o->mode
                          : !strcmp(a, "--json") ? &o->json_path : !strcmp(a, "--shard") ? &o->shard_s
                          : !strcmp(a, "--draft") ? &o->draft_s : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall eval: %s needs a value\n", a);
                return 2;
            }
            *slot = argv[++i];
        } else if (!strcmp(a, "--merge")) {
            fprintf(stderr, "recall eval: --merge must come first: recall eval --merge SHARD.json... [--json OUT]\n");
            return 2;
        } else if (a[0] == '-' || o->blob_path) {
            fprintf(stderr, "recall eval: unexpected argument '%s' (see --help)\n", a);
            return 2;
        } else {
            o->blob_path = a;
        }
    }
    if (!o->blob_path || !o->bench_path) {
        fprintf(stderr, "recall eval: needs BLOB and --bench (see --help)\n");
        return 2;
    }
    if (o->shard_s) {
        if (parse_shard(o->shard_s, &o->shard_k, &o->shard_n)) return 2;
        if (!o->json_path) {
            fprintf(stderr, "recall eval: --shard needs --json OUT (the file recall eval --merge reads)\n");
            return 2;
        }
    }
    return -1;
}

/* The problems and arms of the run. */
typedef struct {
    uint32_t *seeds;
    int n_seeds;
    arm_spec arms[MAX_ARMS];
    int n_arms;
} eval_plan;

/* 0, or the exit code with the message printed. */
static int eval_make_plan(const eval_opts *o, eval_plan *p) {
    memset(p, 0, sizeof *p);
    p->seeds = malloc((size_t)MAX_PROBLEMS * sizeof *p->seeds);
    if (!p->seeds) {
        fprintf(stderr, "recall eval: out of memory\n");
        return 1;
    }
    p->n_seeds = cli_parse_problems(o->problems_s, p->seeds, MAX_PROBLEMS);
    if (p->n_seeds <= 0) {
        fprintf(stderr, "recall eval: --problems %s: expected seeds like 0-7, 3 or 0,2,5-6 (at most %d)\n",
                o->problems_s, MAX_PROBLEMS);
        return 2;
    }
    for (const char *s = o->arms_s; *s;) {
        size_t l = strcspn(s, ",");
        char one[128];
        if (l >= sizeof one || p->n_arms == MAX_ARMS) {
            fprintf(stderr, "recall eval: --arms: too many or too long labels\n");
            return 2;
        }
        memcpy(one, s, l);
        one[l] = 0;
        if (parse_arm(one, &p->arms[p->n_arms])) {
            fprintf(stderr, "recall eval: arm label '%s': expected BASE[@THRESH][:rFLOOR] with BASE SP, RC_bge or FULL\n",
                    one);
            return 2;
        }
        p->n_arms++;
        s += l;
        if (*s == ',') s++;
    }
    if (!p->n_arms) {
        fprintf(stderr, "recall eval: --arms is empty\n");
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    const eval_opts *o;
    const eval_plan *p;
    rc_blob *b;
    rc_bench *bench;
    rc_recall_opts base;           /* the blob's loop defaults with --mode, --threads, --simd */
    eval_arm_info info[MAX_ARMS];  /* labels and resolved threshold / floor */
    eval_tally tally[MAX_ARMS];
    FILE *jf;                      /* --json, written to jtmp until committed */
    char *jtmp;
    recall_err err;
} eval_run;

static int job_in_shard(const eval_opts *o, int j) { return j % o->shard_n == o->shard_k - 1; }

/* Opens the blob and the benchmark and resolves every arm's options. */
static int eval_open(eval_run *r) {
    if (cli_blob_open(&r->o->xa, r->o->blob_path, RC_OPEN_VERIFY, &r->b, &r->err) ||
        rc_bench_load(r->o->bench_path, &r->bench, &r->err)) {
        fprintf(stderr, "recall eval: %s\n", r->err.msg);
        return 1;
    }
    rc_recall_defaults(r->b, &r->base);
    r->base.threads = r->o->xa.threads;
    r->base.max_ctx = r->o->xa.ctx;
    r->base.simd = r->o->xa.simd;
    r->base.lm_screen = r->o->xa.lm_screen;
    r->base.numerics = r->o->xa.numerics;
    if (cli_parse_mode_arm("eval", r->o->mode, NULL, &r->base)) return 2;
    if (r->o->draft_s && cli_parse_draft("eval", r->o->draft_s, &r->base.draft)) return 2;
    for (int a = 0; a < r->p->n_arms; a++) {
        const arm_spec *s = &r->p->arms[a];
        eval_arm_info *in = &r->info[a];
        snprintf(in->label, sizeof in->label, "%s", s->label);
        in->threshold = s->has_thresh ? s->thresh : r->base.threshold;
        in->has_floor = s->has_floor;
        in->floor = s->floor;
    }
    return 0;
}

/* Creates the --json temp file and writes the document head: for a shard, with its jobs and the
 * blob's and benchmark's checksums. */
static int eval_json_start(eval_run *r) {
    const eval_plan *p = r->p;
    const int n_jobs = p->n_arms * p->n_seeds;
    eval_shard_info sh = {r->o->shard_k, r->o->shard_n, n_jobs, NULL, 0, 0, r->o->bench_path, 0};
    int *jobs = NULL;
    if (r->o->shard_s) {
        char *text = NULL;
        size_t len = 0;
        jobs = malloc((size_t)n_jobs * sizeof *jobs);
        if (!jobs || rc_read_file(r->o->bench_path, &text, &len, &r->err)) {
            fprintf(stderr, "recall eval: %s\n", jobs ? r->err.msg : "out of memory");
            free(jobs);
            return 1;
        }
        sh.bench_xxh64 = rc_xxh64(text, len, 0);
        free(text);
        sh.blob_xxh64 = rc_blob_hdr(r->b)->body_checksum;
        for (int j = 0; j < n_jobs; j++)
            if (job_in_shard(r->o, j)) jobs[sh.n_ran++] = j;
        sh.jobs = jobs;
    }
    r->jf = eval_json_create(r->o->json_path, &r->jtmp);
    if (r->jf)
        eval_json_head(r->jf, r->o->blob_path, r->base.mode == RC_MODE_FAITHFUL ? "faithful" : "clean",
                       rc_numerics_name(r->base.numerics), p->seeds, p->n_seeds, r->o->shard_s ? &sh : NULL);
    free(jobs);
    return r->jf ? 0 : 1;
}

/* Runs arm a's problems of this shard (all of them without --shard), one progress line each. */
static int eval_run_arm(eval_run *r, int a) {
    const eval_plan *p = r->p;
    const arm_spec *s = &p->arms[a];
    rc_recall *rec = NULL;
    int rc = 1, written = 0;
    rc_recall_opts o = r->base;
    o.arm = s->base;
    if (s->has_thresh) o.threshold = s->thresh;
    o.use_floor = s->has_floor;
    o.floor = s->floor;
    if (r->jf) eval_json_arm_head(r->jf, a, &r->info[a]);
    for (int i = 0; i < p->n_seeds; i++) {
        if (!job_in_shard(r->o, a * p->n_seeds + i)) continue;
        if (!rec && rc_recall_open(r->b, &o, &rec, &r->err)) goto fail;
        rc_problem prob;
        rc_problem_run run;
        double t0 = now_s();
        if (rc_bench_problem(r->bench, p->seeds[i], &prob, &r->err)) goto fail;
        if (rc_run_problem(rec, &prob, NULL, NULL, NULL, &run, &r->err)) {
            rc_problem_free(&prob);
            goto fail;
        }
        double dt = now_s() - t0;
        int ok, ret, nq, pf, np;
        if (r->jf && written++) fputs(",\n", r->jf);
        int bad = score_problem(r->jf, rc_recall_bpe(rec), &prob, p->seeds[i], &run, dt, &r->tally[a], &ok, &ret,
                                &nq, &pf, &np);
        rc_problem_run_free(&run);
        rc_problem_free(&prob);
        if (bad) {
            fprintf(stderr, "recall eval: out of memory while scoring\n");
            goto out;
        }
        fprintf(stderr, "[%s] problem %u: recall %d/%d, retrieved %d/%d, probes fired %d/%d (%.1f s)\n", s->label,
                p->seeds[i], ok, nq, ret, nq, pf, np, dt);
    }
    if (r->jf) eval_json_arm_tail(r->jf, &r->tally[a]);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "recall eval: %s\n", r->err.msg);
out:
    rc_recall_close(rec);
    return rc;
}

static void eval_close(eval_run *r) {
    if (r->jf) {
        fclose(r->jf);
        remove(r->jtmp);
    }
    free(r->jtmp);
    for (int a = 0; a < r->p->n_arms; a++) eval_tally_free(&r->tally[a]);
    rc_bench_free(r->bench);
    rc_blob_close(r->b);
}

/* Every job of the shard, then the table and the JSON. */
static int eval_execute(const eval_opts *o, const eval_plan *p) {
    eval_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.p = p;
    int rc = eval_open(&r);
    if (!rc && o->json_path) rc = eval_json_start(&r);
    if (!rc && o->shard_s)
        fprintf(stderr, "eval: shard %d/%d of %d jobs\n", o->shard_k, o->shard_n, p->n_arms * p->n_seeds);
    if (!rc && o->xa.numerics) fprintf(stderr, "eval: numerics %s\n", rc_numerics_name(o->xa.numerics));
    for (int a = 0; !rc && a < p->n_arms; a++) rc = eval_run_arm(&r, a);
    if (!rc) {
        eval_print_table(r.info, r.tally, p->n_arms);
        if (r.jf) {
            eval_json_end(r.jf);
            FILE *f = r.jf;
            r.jf = NULL;
            rc = eval_json_commit(f, r.jtmp, o->json_path);
        }
    }
    eval_close(&r);
    return rc;
}

/* recall eval --merge FILE... [--json OUT] */
static int eval_merge_main(int argc, char **argv) {
    const char **files = malloc((size_t)argc * sizeof *files), *json_path = NULL;
    int n = 0;
    if (!files) {
        fprintf(stderr, "recall eval: out of memory\n");
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            eval_usage(stdout);
            free(files);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall eval --merge: --json needs a value\n");
                free(files);
                return 2;
            }
            json_path = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "recall eval --merge: unexpected argument '%s' (a merge takes shard files and "
                            "--json OUT; the run's options are in the files)\n", a);
            free(files);
            return 2;
        } else {
            files[n++] = a;
        }
    }
    int rc = 2;
    if (!n) fprintf(stderr, "recall eval --merge: needs the shard files (see --help)\n");
    else rc = cli_eval_merge(files, n, json_path);
    free(files);
    return rc;
}

int cli_eval(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--merge")) return eval_merge_main(argc, argv);
    eval_opts o;
    int rc = eval_parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    eval_plan p;
    rc = eval_make_plan(&o, &p);
    if (!rc) rc = eval_execute(&o, &p);
    free(p.seeds);
    return rc;
}
