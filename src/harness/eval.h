/* eval.h - the reference recall benchmark's scoring (docs/LOOP.md, "The benchmark") and its result document:
 * what `recall eval` counts, here so that a program on the library gets the same numbers, and the
 * JSON document that `recall eval --json` writes and `recall eval --merge` reads back.
 *
 * Scoring, per generated turn of a problem run (rc_run_problem):
 *   question turn: recall_ok    = strip(val, ", ").lower() in strip(reply_text, ", ").lower()
 *                  retrieved_ok = strip(val, ",").lower() in strip(decode(rid), ",").lower()
 *                                 for any injected fire of the turn
 *   probe turn:    casual false-fire = the turn has at least one fire (anywhere in the turn,
 *                  teacher-forced history included, as the reference counts len(fires))
 * Aggregates: recall = ok / questions, retrieved = ret / questions, casual = fired probes / probes.
 * strip removes the listed characters; lower-casing is ASCII-only (the benchmark values are ASCII).
 *
 * Jobs: a run over A arms and P problems has A*P jobs, numbered j = a*P + i (arm a of the arm
 * list, problem i of the problem list), the order one unsharded run executes them in. Shard K of
 * N (K from 1) runs the jobs with j % N == K-1.
 *
 * The document (one per run, or per shard):
 *   {"blob": PATH, "mode": "faithful"|"clean", "problems": [seeds],
 *    "options": {FLAG: value, ...},         every option that changes bits or what is measured,
 *                                           beyond the arms, mode and problems (rc_eval_opt)
 *    "shard": {"k", "n", "n_jobs", "jobs": [the shard's jobs, ascending], "blob_xxh64",
 *              "bench", "bench_xxh64", "threads", "simd"},            shards only
 *    "arms": [{"label", "threshold", "floor" (null: none), "per_problem": [one object per job
 *              run, in job order: {"seed", "seconds", "turns": [...]}], the counts, the ratios,
 *              "top_bridge_q_fires", "top_bridge_c_fires" (sorted)}],
 *    "failed": [{"job", "arm", "seed", "error"}]}                       only when a job failed
 * A merge refuses shards whose blob or benchmark checksum, mode, problems, arms (label,
 * threshold, floor) or any "options" value differ ("threads" and "simd" may: they never change
 * bits), a job held twice, and a job held by no file (naming why, when a shard recorded it failed).
 */
#ifndef RECALL_EVAL_H
#define RECALL_EVAL_H

#include "json.h"
#include "chat.h" /* rc_eval_contains: the rule below */
#include "problems.h"
#include "status.h"

#include <stdint.h>
#include <stdio.h>

struct rc_bpe;

/* ---- scoring ---------------------------------------------------------------------------------- */


/* One generated turn, scored. */
typedef struct {
    const rc_step *step;       /* the problem's step (user, kw, val), borrowed */
    const rc_problem_turn *pt; /* the run's turn (feed_len, records), borrowed */
    char *reply_text;          /* the reply decoded (malloc'd) */
    int recall_ok, retrieved_ok; /* question turns */
    int n_injected;
    double max_gate, top_bridge; /* the largest gate score / best bridge score of a fire; -inf: none */
} rc_eval_turn;

typedef struct {
    rc_eval_turn turns[8];
    int n_turns;
    int n_q, n_ok, n_ret, n_probe, n_probe_fired; /* this problem's counts */
} rc_eval_problem;

/* Scores the generated turns of run (of problem p); decodes with bpe. */
recall_status rc_eval_score(const struct rc_bpe *bpe, const rc_problem *p, const rc_problem_run *run,
                            rc_eval_problem *out, recall_err *err);
void rc_eval_problem_free(rc_eval_problem *e);

/* Sums over the scored problems of one arm, plus the best bridge score of every fire, split by
 * turn kind (question / casual probe); the lists are written sorted, so their order is free. */
typedef struct {
    int n_q, n_ok, n_ret, n_probe, n_probe_fired, fires, injected;
    double *top_q, *top_c;
    int n_top_q, n_top_c, cap_top_q, cap_top_c;
    int oom; /* a push failed: the lists are incomplete */
} rc_eval_tally;

/* Adds a scored problem (its counts and every fire's best bridge score). RECALL_E_NOMEM if a list
 * could not grow. */
recall_status rc_eval_tally_add(rc_eval_tally *t, const rc_eval_problem *e, recall_err *err);
void rc_eval_tally_push(rc_eval_tally *t, int question, double best);
void rc_eval_tally_free(rc_eval_tally *t);

/* ---- the document ------------------------------------------------------------------------------ */

/* One arm as the document and the table name it: the label as given and the resolved options. */
typedef struct {
    char label[64];
    double threshold;
    int has_floor;
    double floor;
} rc_eval_arm_info;

/* One entry of "options": the flag as the CLI spells it and its value (a string, null, or an
 * integer). Every entry must be equal across the shards of one run. */
typedef struct {
    const char *flag;
    int is_int;
    long long num;   /* is_int */
    const char *str; /* else: NULL = null */
} rc_eval_opt;

/* What a shard file adds: its place among the jobs and what identifies the run beyond the
 * options (the blob's body checksum, the benchmark file's), and the machine's execution choices
 * (recorded, never compared). */
typedef struct {
    int k, n, n_jobs;    /* shard K of N, of n_jobs jobs in all */
    const int *jobs;     /* the jobs this shard holds, ascending */
    int n_ran;
    uint64_t blob_xxh64; /* rc_blob_header.body_checksum */
    const char *bench;   /* the --bench path as given */
    uint64_t bench_xxh64;
    int threads;
    const char *simd;
} rc_eval_shard_info;

/* A job that did not finish: recorded in "failed". */
typedef struct {
    int job;
    const char *arm;
    uint32_t seed;
    const char *error;
} rc_eval_failure;

/* The document in pieces: head, then per arm arm_head, its problems (rc_eval_json_problem,
 * separated by ",\n"), arm_tail; then end. sh is NULL for a whole run (or a merge). build[0..4]
 * name the blob's decoder and BERT storage, the profile that ran, the layers q8 kept exact and the
 * attention projections an nf4 blob keeps in bf16
 * ("weights", "bge_weights": rc_blob_weights; "profile": docs/PROFILES.md; "q8_exact": the
 * blob's qwen2.q8.exact when q8 ran; "nf4_keep": its qwen2.nf4.keep); a NULL entry is left out
 * (no such layers, or a merge of shards written before the keys existed). */
#define RC_EVAL_BUILD_KEYS 5
void rc_eval_json_str(FILE *f, const char *s);
void rc_eval_json_num(FILE *f, double x); /* %.9g; non-finite as null */
void rc_eval_json_head(FILE *f, const char *blob, const char *const build[RC_EVAL_BUILD_KEYS], const char *mode,
                       const uint32_t *seeds, int n_seeds, const rc_eval_opt *opts, int n_opts,
                       const rc_eval_shard_info *sh);
void rc_eval_json_arm_head(FILE *f, int a, const rc_eval_arm_info *arm);
void rc_eval_json_problem(FILE *f, uint32_t seed, double seconds, const rc_eval_problem *e);
void rc_eval_json_arm_tail(FILE *f, rc_eval_tally *t); /* sorts t's lists */
void rc_eval_json_end(FILE *f, const rc_eval_failure *failed, int n_failed);

/* ---- reading shard documents back, and merging them ------------------------------------------ */

typedef struct {
    const char *path; /* borrowed */
    char *text;
    size_t len;
    json_doc *doc;
    const json_value *root, *problems, *arms, *options, *shard, *jobs, *failed;
    int k, n, n_jobs, n_seeds;
} rc_eval_shard;

/* Parses and checks one shard document (text[0..len), taken over: freed by rc_eval_shard_free):
 * the fields the merge reads, its jobs exactly {j < n_jobs : j % n == k-1}, per arm one
 * per-problem object per job that did not fail, with that job's seed. Untrusted input: every
 * refusal is RECALL_E_FORMAT with one line naming path. */
recall_status rc_eval_shard_parse(rc_eval_shard *s, const char *path, char *text, size_t len, recall_err *err);
/* rc_read_file, then rc_eval_shard_parse. */
recall_status rc_eval_shard_load(rc_eval_shard *s, const char *path, recall_err *err);
void rc_eval_shard_free(rc_eval_shard *s);

/* The shards of one run, checked for a merge. */
typedef struct {
    int n_arms, n_jobs, n_seeds;
    int *owner;               /* [n_jobs]: the file index holding each job */
    rc_eval_arm_info *info;   /* [n_arms] */
    rc_eval_tally *tally;     /* [n_arms]: the summed counts and lists */
} rc_eval_merge;

/* Every later shard must be of the first one's run; every job held by exactly one file. Refusals
 * (RECALL_E_FORMAT) name the file and the first difference, or the job and why it is missing. */
recall_status rc_eval_merge_plan(const rc_eval_shard *s, int n_files, rc_eval_merge *m, recall_err *err);
/* The merged document: the per-problem objects copied byte for byte from the file that ran them,
 * in job order; the counts summed, the lists concatenated, the ratios recomputed. */
recall_status rc_eval_merge_write(FILE *f, const rc_eval_shard *s, int n_files, rc_eval_merge *m, recall_err *err);
void rc_eval_merge_free(rc_eval_merge *m);

#endif
