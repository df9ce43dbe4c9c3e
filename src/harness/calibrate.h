/* calibrate.h - a build's gate threshold by the rule its gate was trained with (docs/LOOP.md,
 * "Calibration"), and the threshold file that carries it to later runs.
 *
 * Why: quantising the decoder (NF4) or changing its numerics moves the q_proj outputs the gate
 * reads, so its scores shift and the gate file's threshold, fitted on fp32, no longer sits at the
 * same operating point. The remedy the design prescribes: at startup, run a few short needle
 * dialogues through the deployed model and set the threshold from them.
 *
 * The rule (tools/train_world/train.py, stage 5, which set the gate file's `thresh`): the gate's
 * positives are the positions of a question turn from the first token after the question's
 * keyword up to the reply's restatement of it ("the answer needs evicted history"), counted only
 * while the fact's turn has left the window; every such token is scored on its own q, as the
 * loop runs it (opts.score_rows), with firing disabled; the threshold is the P-th percentile
 * (numpy "linear", P = 10) of those scores. The dialogues are the benchmark problems of a bench
 * file, run through an RC_bge loop opened on the model with the caller's weights, numerics and
 * KV storage. Row scores do not pass through the faithful seal quirk, so the rule gives the same
 * number in both modes. When the reply never restates the keyword, its whole reply counts.
 *
 * Threshold file (JSON, one object): {"recall_calibration": 1, "threshold", "blob",
 * "blob_xxh64", "weights", "bge_weights", "numerics", "kv", "mode", "rule", "percentile", "bench",
 * "bench_xxh64", "problems", "positions", "gate_file_thresh"}. A run that reads it must open the
 * same blob (body XXH64) with the same numerics and KV storage; anything else is refused, naming
 * what differs. */
#ifndef RECALL_CALIBRATE_H
#define RECALL_CALIBRATE_H

#include "blob.h"
#include "problems.h"
#include "recall_loop.h"
#include "status.h"

#include <stdint.h>
#include <stdio.h>

#define RC_CALIBRATION_VERSION 1

typedef struct {
    double pct;       /* the percentile taken */
    float threshold;  /* the pct-th percentile of the recall-position scores, as the gate compares it */
    float *pos;       /* every recall-position score, ascending */
    int n_pos;
    int n_q, n_q_used; /* question turns; those with at least one recall position */
} rc_calibration;

void rc_calibration_free(rc_calibration *c);

/* A growing array of scores (the calibration's positions, the calibrate report's columns). */
typedef struct {
    float *v;
    int n, cap;
} rc_floats;
/* Appends x; 0, or -1 when memory runs out (f unchanged). */
int rc_floats_push(rc_floats *f, float x);

/* Called with each problem's run (r: the loop it ran on, firing disabled) for callers that
 * report more of it; may be NULL. */
typedef void (*rc_calibrate_fn)(void *ctx, const rc_recall *r, const rc_problem_run *run);

/* Runs problems seeds[0..n) of bench through an RC_bge loop opened on b with `base` (its
 * numerics, KV storage, mode, execution; firing disabled, rows scored) and applies the rule.
 * RECALL_E_ARG when no position qualifies (no question turn had its fact evicted). */
recall_status rc_calibrate(const rc_blob *b, const rc_recall_opts *base, const rc_bench *bench, const uint32_t *seeds,
                           int n, double pct, rc_calibrate_fn on_run, void *ctx, rc_calibration *out, recall_err *err);

/* What a threshold file records besides the threshold. */
typedef struct {
    const char *bench;
    uint64_t bench_xxh64;
    const uint32_t *seeds;
    int n_seeds;
} rc_calibration_src;

/* The threshold file of c, made on b with o (its numerics, kv, mode). */
void rc_calibration_write(FILE *f, const rc_blob *b, const rc_recall_opts *o, const rc_calibration *c,
                          const rc_calibration_src *src);
/* Reads a threshold file and checks it against the run: b's body XXH64, o's numerics and KV
 * storage. *threshold on success; RECALL_E_ARG naming the file and what differs otherwise
 * (RECALL_E_FORMAT / RECALL_E_IO for a damaged or missing file). */
recall_status rc_calibration_read(const char *path, const rc_blob *b, const rc_recall_opts *o, float *threshold,
                                  recall_err *err);

#endif
