/* cli_eval.h - what `recall eval` (cli_eval.c) and `recall eval --merge` (cli_eval_merge.c) share:
 * the per-arm tally, the JSON document writer and the table, so that a merge of shards prints
 * and writes exactly what one run does.
 *
 * Jobs: a run over A arms and P problems has A*P jobs, numbered j = a*P + i (arm a of the --arms
 * list, problem i of the --problems list), the order one unsharded run executes them in.
 * `--shard K/N` (K 1-based) runs the jobs with j % N == K-1. */
#ifndef RECALL_CLI_EVAL_H
#define RECALL_CLI_EVAL_H

#include <stdint.h>
#include <stdio.h>

/* Sums over the scored problems of one arm, plus the best bridge score of every fire, split by turn
 * kind (question / casual probe); the lists are written sorted, so their order of arrival is free. */
typedef struct {
    int n_q, n_ok, n_ret, n_probe, n_probe_fired, fires, injected;
    double *top_q, *top_c;
    int n_top_q, n_top_c, cap_top_q, cap_top_c;
    int oom; /* a push failed: the lists are incomplete */
} eval_tally;

void eval_tally_push(eval_tally *t, int question, double best);
void eval_tally_free(eval_tally *t);

/* One arm as the JSON and the table name it: the label as given and the resolved options. */
typedef struct {
    char label[64];
    double threshold;
    int has_floor;
    double floor;
} eval_arm_info;

/* What a shard file adds to the document: its place among the jobs and what identifies the run
 * beyond the options already in the document (the blob's body checksum, the benchmark file's). */
typedef struct {
    int k, n, n_jobs;    /* shard K of N, of n_jobs jobs in all */
    const int *jobs;     /* the jobs this shard ran, ascending */
    int n_ran;
    uint64_t blob_xxh64; /* rc_blob_header.body_checksum */
    const char *bench;   /* the --bench path as given */
    uint64_t bench_xxh64;
} eval_shard_info;

/* The JSON document, written in pieces: head, then per arm arm_head, its per-problem objects
 * (separated by ",\n"), arm_tail; then end. sh is NULL for a whole run (or a merge). */
void eval_json_str(FILE *f, const char *s);
void eval_json_num(FILE *f, double x);
void eval_json_head(FILE *f, const char *blob, const char *mode, const char *numerics, const uint32_t *seeds, int n_seeds,
                    const eval_shard_info *sh);
void eval_json_arm_head(FILE *f, int a, const eval_arm_info *arm);
void eval_json_arm_tail(FILE *f, eval_tally *t); /* sorts t's lists */
void eval_json_end(FILE *f);

/* path.tmp.PID opened for writing (*tmp malloc'd); NULL with a message printed on failure. */
FILE *eval_json_create(const char *path, char **tmp);
/* Closes f and renames *tmp over path; 0, or 1 with a message printed and the temp file removed. */
int eval_json_commit(FILE *f, const char *tmp, const char *path);

/* The result table on stdout. */
void eval_print_table(const eval_arm_info *arms, const eval_tally *tally, int n_arms);

/* `recall eval --merge FILE... [--json OUT]`: returns the process exit code. */
int cli_eval_merge(const char *const *files, int n_files, const char *json_path);

#endif
