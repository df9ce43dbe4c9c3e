/* cli_eval.c - `recall eval`: the reference multi-fact recall benchmark (docs/LOOP.md, "The benchmark"), and
 * `recall eval --merge`: the shard files of one run back into that run's table and JSON.
 *
 * Every arm replays every problem from scratch (rc_run_problem); the scoring and the document are
 * the library's (eval.h), this file runs the jobs, prints the table and the progress, and keeps
 * what finished: a job that fails is recorded in the document's "failed" with its error, the
 * other jobs still run, and the document is written (exit 1). Arm labels: BASE[@THRESH][:rFLOOR],
 * BASE in SP, RC_bge, FULL; THRESH overrides the gate threshold, FLOOR sets the relevance floor.
 *
 * Scale-out: the run is A*P jobs (arm, problem), j = a*P + i (eval.h); `--shard K/N` runs the jobs
 * with j % N == K-1 and writes them to --json together with what identifies the run: the options
 * that change bits or what is measured (eval_options below), the blob's and the benchmark's
 * checksums. Each job is independent: a problem replays from scratch, so the bits do not depend on
 * which other jobs ran before it. */
#include "blob.h"
#include "checksum.h"
#include "cli.h"
#include "eval.h"
#include "json.h"
#include "problems.h"
#include "qwen2.h"
#include "recall_loop.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PROBLEMS 1024
#define MAX_ARMS 32
#define MAX_SHARDS 1000000

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
    snprintf(a->label, sizeof a->label, "%.*s", (int)bl, s); /* the base alone, then the whole label */
    const int base = rc_arm_parse(a->label, NULL);
    if (base < 0) return -1;
    a->base = (rc_arm)base;
    snprintf(a->label, sizeof a->label, "%s", s);
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

static double pct(int a, int b) { return b ? 100.0 * a / b : 0.0; }

/* The result table on stdout. */
static void print_table(const rc_eval_arm_info *arms, const rc_eval_tally *tally, int n_arms) {
    printf("%-24s %-14s %-14s %-18s %s\n", "arm", "recall", "retrieved", "casual false-fire", "fires (injected)");
    for (int a = 0; a < n_arms; a++) {
        const rc_eval_tally *t = &tally[a];
        char c1[32], c2[32], c3[32];
        snprintf(c1, sizeof c1, "%d/%d %3.0f%%", t->n_ok, t->n_q, pct(t->n_ok, t->n_q));
        snprintf(c2, sizeof c2, "%d/%d %3.0f%%", t->n_ret, t->n_q, pct(t->n_ret, t->n_q));
        snprintf(c3, sizeof c3, "%d/%d %3.0f%%", t->n_probe_fired, t->n_probe, pct(t->n_probe_fired, t->n_probe));
        printf("%-24s %-14s %-14s %-18s %d (%d)\n", arms[a].label, c1, c2, c3, t->fires, t->injected);
    }
    fflush(stdout);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- the plan */

typedef struct {
    uint32_t *seeds;
    int n_seeds;
    arm_spec arms[MAX_ARMS];
    int n_arms;
    int shard_k, shard_n; /* 1/1 without --shard */
} eval_plan;

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
    if (errno || N < 0 || *end)
        return cli_usage_error("eval", "--shard %s: expected K/N, e.g. 2/8 (shard K of N, K counted from 1)", s);
    if (N < 1 || N > MAX_SHARDS) return cli_usage_error("eval", "--shard %s: N must be in 1..%d", s, MAX_SHARDS);
    if (K < 1 || K > N) return cli_usage_error("eval", "--shard %s: K must be in 1..%ld (K is counted from 1)", s, N);
    *k = (int)K;
    *n = (int)N;
    return 0;
}

/* The problems, arms and shard of the run; 0, or the exit code with the message printed. */
static int eval_make_plan(const cli_args *a, eval_plan *p) {
    memset(p, 0, sizeof *p);
    p->shard_k = p->shard_n = 1;
    if (a->shard && parse_shard(a->shard, &p->shard_k, &p->shard_n)) return 2;
    if (a->shard && !a->json) return cli_usage_error("eval", "--shard needs --json OUT (the file recall eval --merge reads)");
    const char *problems = a->problems ? a->problems : "0-7", *arms = a->arms ? a->arms : "SP,RC_bge";
    p->seeds = malloc((size_t)MAX_PROBLEMS * sizeof *p->seeds);
    if (!p->seeds) {
        fprintf(stderr, "recall eval: out of memory\n");
        return 1;
    }
    p->n_seeds = cli_parse_problems(problems, p->seeds, MAX_PROBLEMS);
    if (p->n_seeds <= 0)
        return cli_usage_error("eval", "--problems %s: expected seeds like 0-7, 3 or 0,2,5-6 (at most %d)", problems,
                               MAX_PROBLEMS);
    int has_full = 0;
    for (const char *s = arms; *s;) {
        size_t l = strcspn(s, ",");
        char one[128];
        if (l >= sizeof one || p->n_arms == MAX_ARMS) return cli_usage_error("eval", "--arms: too many or too long labels");
        memcpy(one, s, l);
        one[l] = 0;
        if (parse_arm(one, &p->arms[p->n_arms]))
            return cli_usage_error("eval", "arm label '%s': expected BASE[@THRESH][:rFLOOR] with BASE " RC_ARM_NAMES,
                                   one);
        has_full |= p->arms[p->n_arms++].base == RC_ARM_FULL;
        s += l;
        if (*s == ',') s++;
    }
    if (!p->n_arms) return cli_usage_error("eval", "--arms is empty");
    return cli_ctx_needs_full(a, has_full);
}

/* ---------------------------------------------------------------- the run */

/* The options a shard records and a merge compares: every one that changes bits or what is
 * measured and is not already in the document (arms, mode and problems are). Screening is
 * recorded as asked, after RECALL_LM_SCREEN ("auto" then depends only on the blob, whose checksum
 * is compared too). Adding such an option to eval: one entry here. */
#define N_EVAL_OPTS 12
static void eval_options(const cli_args *a, int k, rc_eval_opt *o) {
    int screen = a->loop.lm_screen;
    const int asked = rc_lm_screen_resolve(screen);
    if (asked >= 0) screen = asked;
    o[0] = (rc_eval_opt){"--ctx", 1, a->ctx, NULL};
    o[1] = (rc_eval_opt){"--draft", 1, a->loop.draft, NULL};
    o[2] = (rc_eval_opt){"--lm-head-screen", 0, 0, rc_lm_screen_name(screen)};
    o[3] = (rc_eval_opt){"--rope-scaling", 0, 0, a->rope_scaling};
    o[4] = (rc_eval_opt){"--kv", 0, 0, rc_kv_dtype_name((rc_kv_dtype)a->loop.kv)};
    o[5] = (rc_eval_opt){"--numerics", 0, 0, rc_numerics_name(a->loop.exec.numerics)};
    o[6] = (rc_eval_opt){"--edge", 0, 0, rc_edge_name(a->loop.edge)};
    o[7] = (rc_eval_opt){"--fire-once", 1, a->loop.fire_once, NULL};
    o[8] = (rc_eval_opt){"--hysteresis", 1, a->loop.hysteresis, NULL};
    o[9] = (rc_eval_opt){"--span", 0, 0, rc_span_name(a->loop.span)};
    o[10] = (rc_eval_opt){"--rerank", 0, 0, rc_rerank_name(a->loop.rerank)};
    o[11] = (rc_eval_opt){"--top-k", 1, k, NULL}; /* as resolved: the blob's loop.k unless given */
}

typedef struct {
    const cli_args *a;
    const eval_plan *p;
    rc_blob *b;
    rc_bench *bench;
    rc_recall_opts base;              /* the blob's loop defaults with the command line's options */
    rc_eval_arm_info info[MAX_ARMS];  /* labels and resolved threshold / floor */
    rc_eval_tally tally[MAX_ARMS];
    rc_eval_failure *failed;          /* the jobs that did not finish */
    int n_failed, n_ran;
    const char *simd;                 /* the path the loops run (the first one opened) */
    int threads;
    rc_afile jf;                      /* --json, until committed */
    recall_err err;
} eval_run;

static int job_in_shard(const eval_plan *p, int j) { return j % p->shard_n == p->shard_k - 1; }

/* Opens the blob and the benchmark and resolves every arm's options. */
static int eval_open(eval_run *r) {
    if (cli_blob_open(r->a, r->a->pos[0], RC_OPEN_VERIFY, &r->b, &r->err) ||
        rc_bench_load(r->a->bench, &r->bench, &r->err))
        return cli_fail("eval", &r->err);
    cli_loop_opts(r->a, r->b, &r->base);
    const int rc = cli_loop_threshold(r->a, r->b, &r->base);
    if (rc) return rc;
    for (int a = 0; a < r->p->n_arms; a++) {
        const arm_spec *s = &r->p->arms[a];
        rc_eval_arm_info *in = &r->info[a];
        snprintf(in->label, sizeof in->label, "%s", s->label);
        in->threshold = s->has_thresh ? s->thresh : r->base.threshold;
        in->has_floor = s->has_floor;
        in->floor = s->floor;
    }
    const int n_jobs = r->p->n_arms * r->p->n_seeds;
    r->failed = calloc((size_t)n_jobs, sizeof *r->failed);
    if (!r->failed) {
        fprintf(stderr, "recall eval: out of memory\n");
        return 1;
    }
    return 0;
}

/* Runs job j (arm a, problem i) on rec (opened on first use): its progress line, its JSON object,
 * its sums. RECALL_OK, or the job's error in r->err. */
static recall_status run_job(eval_run *r, rc_recall **rec, const rc_recall_opts *o, int a, int i, int *written) {
    const eval_plan *p = r->p;
    if (!*rec) {
        RC_TRY(rc_recall_open(r->b, o, rec, &r->err));
        if (!r->simd) {
            r->simd = rc_recall_simd_name(*rec);
            r->threads = rc_recall_threads(*rec);
            cli_banner("eval", r->simd, r->threads);
        }
    }
    rc_problem prob;
    rc_problem_run run;
    rc_eval_problem e;
    const double t0 = now_s();
    RC_TRY(rc_bench_problem(r->bench, p->seeds[i], &prob, &r->err));
    recall_status s = rc_run_problem(*rec, &prob, NULL, NULL, NULL, &run, &r->err);
    if (!s) {
        s = rc_eval_score(rc_recall_bpe(*rec), &prob, &run, &e, &r->err);
        if (!s) s = rc_eval_tally_add(&r->tally[a], &e, &r->err);
        const double dt = now_s() - t0;
        if (!s && r->jf.f) {
            if ((*written)++) fputs(",\n", r->jf.f);
            rc_eval_json_problem(r->jf.f, p->seeds[i], dt, &e);
        }
        if (!s)
            fprintf(stderr, "[%s] problem %u: recall %d/%d, retrieved %d/%d, probes fired %d/%d (%.1f s)\n",
                    p->arms[a].label, p->seeds[i], e.n_ok, e.n_q, e.n_ret, e.n_q, e.n_probe_fired, e.n_probe, dt);
        rc_eval_problem_free(&e);
        rc_problem_run_free(&run);
    }
    rc_problem_free(&prob);
    return s;
}

/* Arm a's jobs of this shard (all of them without --shard). A failed job is recorded and the
 * next one runs (a failure to open the arm's loop fails every job of the arm). 0, or 1 out of
 * memory. */
static int eval_run_arm(eval_run *r, int a) {
    const eval_plan *p = r->p;
    const arm_spec *s = &p->arms[a];
    rc_recall *rec = NULL;
    int written = 0;
    rc_recall_opts o = r->base;
    o.arm = s->base;
    if (s->has_thresh) o.threshold = s->thresh;
    o.use_floor = s->has_floor;
    o.floor = s->floor;
    if (r->jf.f) rc_eval_json_arm_head(r->jf.f, a, &r->info[a]);
    for (int i = 0; i < p->n_seeds; i++) {
        const int j = a * p->n_seeds + i;
        if (!job_in_shard(p, j)) continue;
        r->n_ran++;
        memset(&r->err, 0, sizeof r->err);
        if (!run_job(r, &rec, &o, a, i, &written)) continue;
        if (r->err.code == RECALL_E_NOMEM && r->tally[a].oom) break;
        fprintf(stderr, "[%s] problem %u: failed: %s\n", s->label, p->seeds[i], r->err.msg);
        char *msg = malloc(strlen(r->err.msg) + 1);
        if (!msg) break;
        strcpy(msg, r->err.msg);
        r->failed[r->n_failed++] = (rc_eval_failure){j, s->label, p->seeds[i], msg};
    }
    rc_recall_close(rec);
    if (r->jf.f) rc_eval_json_arm_tail(r->jf.f, &r->tally[a]);
    if (r->tally[a].oom) fprintf(stderr, "recall eval: out of memory while scoring\n");
    return r->tally[a].oom;
}

/* Creates the --json temp file and writes the document head: for a shard, with its jobs, the
 * blob's and benchmark's checksums and this machine's execution choice. */
static int eval_json_start(eval_run *r) {
    const eval_plan *p = r->p;
    const int n_jobs = p->n_arms * p->n_seeds;
    rc_eval_opt opts[N_EVAL_OPTS];
    eval_options(r->a, r->base.k, opts);
    rc_eval_shard_info sh = {p->shard_k, p->shard_n, n_jobs, NULL, 0, 0, r->a->bench, 0, 0, NULL};
    int *jobs = NULL;
    rc_exec *ex = NULL;
    if (r->a->shard) { /* the execution the loops will run with: recorded, never compared */
        if (cli_exec_open(r->a, &ex, &r->err)) return cli_fail("eval", &r->err);
        sh.threads = ex->threads;
        sh.simd = ex->k.name;
    }
    if (r->a->shard) {
        char *text = NULL;
        size_t len = 0;
        jobs = malloc((size_t)n_jobs * sizeof *jobs);
        if (!jobs || rc_read_file(r->a->bench, &text, &len, &r->err)) {
            fprintf(stderr, "recall eval: %s\n", jobs ? r->err.msg : "out of memory");
            free(jobs);
            rc_exec_close(ex);
            return 1;
        }
        sh.bench_xxh64 = rc_xxh64(text, len, 0);
        free(text);
        sh.blob_xxh64 = rc_blob_hdr(r->b)->body_checksum;
        for (int j = 0; j < n_jobs; j++)
            if (job_in_shard(p, j)) jobs[sh.n_ran++] = j;
        sh.jobs = jobs;
    }
    FILE *f = cli_create("eval", &r->jf, r->a->json);
    const rc_recall_opts *lo = &r->a->loop;
    const char *const build[RC_EVAL_BUILD_KEYS] = {rc_blob_weights(r->b, "qwen2"), rc_blob_weights(r->b, "bert"),
                                                   cli_profile_name(r->b, lo->exec.numerics, lo->kv, lo->lm_screen),
                                                   cli_q8_exact(r->b, lo->exec.numerics), cli_nf4_keep(r->b)};
    if (f)
        rc_eval_json_head(f, r->a->pos[0], build, rc_mode_name(r->base.mode), p->seeds, p->n_seeds, opts,
                          N_EVAL_OPTS, r->a->shard ? &sh : NULL);
    free(jobs);
    rc_exec_close(ex);
    return f ? 0 : 1;
}

static void eval_close(eval_run *r) {
    rc_afile_abort(&r->jf);
    for (int i = 0; i < r->n_failed; i++) free((char *)r->failed[i].error);
    free(r->failed);
    for (int a = 0; a < r->p->n_arms; a++) rc_eval_tally_free(&r->tally[a]);
    rc_bench_free(r->bench);
    rc_blob_close(r->b);
}

/* Every job of the shard, then the table and the JSON (with the failures recorded). */
static int eval_execute(const cli_args *a, const eval_plan *p) {
    eval_run r;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.p = p;
    int rc = eval_open(&r);
    if (!rc && a->json) rc = eval_json_start(&r);
    if (!rc && a->shard) fprintf(stderr, "eval: shard %d/%d of %d jobs\n", p->shard_k, p->shard_n, p->n_arms * p->n_seeds);
    if (!rc && a->loop.exec.numerics) fprintf(stderr, "eval: numerics %s\n", rc_numerics_name(a->loop.exec.numerics));
    if (!rc && a->loop.edge) fprintf(stderr, "eval: edge %s\n", rc_edge_name(a->loop.edge));
    if (!rc && a->loop.span) fprintf(stderr, "eval: span %s\n", rc_span_name(a->loop.span));
    if (!rc && a->loop.rerank) fprintf(stderr, "eval: rerank %s\n", rc_rerank_name(a->loop.rerank));
    if (!rc && a->top_k) fprintf(stderr, "eval: top-k %d\n", a->top_k);
    for (int k = 0; !rc && k < p->n_arms; k++) rc = eval_run_arm(&r, k);
    if (!rc) {
        print_table(r.info, r.tally, p->n_arms);
        if (r.jf.f) {
            rc_eval_json_end(r.jf.f, r.failed, r.n_failed);
            rc = cli_commit("eval", &r.jf, 1);
        }
        if (r.n_failed) {
            fprintf(stderr, "recall eval: %d of %d jobs failed%s\n", r.n_failed, r.n_ran,
                    a->json ? " (recorded in the --json \"failed\" list)" : "");
            rc = 1;
        }
    }
    eval_close(&r);
    return rc;
}

int cli_eval(const cli_args *a) {
    eval_plan p;
    int rc = eval_make_plan(a, &p);
    if (!rc) rc = eval_execute(a, &p);
    free(p.seeds);
    return rc;
}

/* ---------------------------------------------------------------- recall eval --merge */

int cli_eval_merge(const cli_args *a) {
    const int n = a->n_pos;
    rc_eval_shard *s = calloc((size_t)n, sizeof *s);
    rc_eval_merge m;
    memset(&m, 0, sizeof m);
    recall_err err = {0};
    recall_status st = s ? RECALL_OK : rc_fail(&err, RECALL_E_NOMEM, "out of memory");
    for (int f = 0; !st && f < n; f++) st = rc_eval_shard_load(&s[f], a->pos[f], &err);
    if (!st) st = rc_eval_merge_plan(s, n, &m, &err);
    int rc = 0;
    if (st) {
        fprintf(stderr, "recall eval --merge: %s\n", err.msg);
        rc = st == RECALL_E_IO || st == RECALL_E_NOMEM ? 1 : 2;
    } else {
        fprintf(stderr, "eval: merged %d shard file%s, %d jobs\n", n, n == 1 ? "" : "s", m.n_jobs);
        print_table(m.info, m.tally, m.n_arms);
        rc_afile af;
        if (a->json && !cli_create("eval --merge", &af, a->json)) rc = 1;
        else if (a->json && rc_eval_merge_write(af.f, s, n, &m, &err)) rc = cli_fail("eval --merge", &err);
        else if (a->json) rc = cli_commit("eval --merge", &af, 1);
        if (a->json) rc_afile_abort(&af);
    }
    rc_eval_merge_free(&m);
    for (int f = 0; s && f < n; f++) rc_eval_shard_free(&s[f]);
    free(s);
    return rc;
}
