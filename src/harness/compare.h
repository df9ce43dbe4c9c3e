/* compare.h - `recall compare A B`: an engine output (A) against a reference output (B) of the
 * same kind, judged by the tolerance table of docs/NUMERICS.md (docs/VERIFYING.md explains the
 * report).
 *
 *   .npz dumps (forward: ids, logits [T,V], hidden_last [L+1,H], q_layers [3,T,Hq*D];
 *   pool: sp [n_sp,H]; embed: ids, emb [H]): per array held by both files the shape, max abs
 *   error, max relative error (max abs error / max |B|), the worst index, the tolerance of its
 *   table row and PASS/FAIL; integer arrays are compared exactly. Arrays held by one side only
 *   are named and not compared.
 *
 *   loop traces (the golden schema, which `recall replay --trace` writes): the turns are walked
 *   in order, each turn chronologically (at a chunk start c0: gate check, fire, rebuild, rebuild
 *   top-5; then the reply tokens at positions c0 ..), and the first divergence is reported with the
 *   numbers that decide it, classified as a near-tie (the deciding values are within
 *   RC_CMP_NEAR_TIE_ULPS ulps on one side) or a real divergence. Later differences are counted
 *   as its consequences, never as new errors.
 *
 *   score files (`recall score --per-position --json`): the scored positions of the same ids and
 *   protocol, side by side: mean and max |NLL A - NLL B|, the mean signed difference, how many
 *   greedy tokens agree, and both perplexities (the distance of one numerics profile to another,
 *   docs/PROFILES.md). They agree when every |dNLL| is within the table's score.nll row and every
 *   greedy token is the same.
 *
 * No printing: the CLI (src/cli/cli_compare.c) renders the report. Inputs that cannot be compared
 * (different kinds, shapes or problems; a truncated or malformed file) are errors naming the file
 * and what differs. */
#ifndef RECALL_COMPARE_H
#define RECALL_COMPARE_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

/* Deciding values at most this many ulps apart (rc_ulp_gap) on one side make a near-tie. */
#define RC_CMP_NEAR_TIE_ULPS 4

/* Distance between two floats in units in the last place: |ord(a) - ord(b)| where ord maps the
 * IEEE bits to integers in the order of the values (+0 and -0 both 0; adjacent floats differ by
 * 1). INT64_MAX when either is NaN. */
int64_t rc_ulp_gap(float a, float b);

/* ---- the tolerance table (docs/NUMERICS.md, one row per quantity) ---- */
typedef enum {
    RC_TOL_EXACT = 0,   /* integers: identical */
    RC_TOL_REL_MAX = 1, /* max |A - B| / max |B| <= tol (over the array, or the trace record) */
    RC_TOL_ABS = 2      /* |A - B| <= tol */
} rc_tol_kind;
typedef struct {
    const char *name; /* npz array name, or "trace.gate" / "trace.bridge" / "trace.top5" */
    rc_tol_kind kind;
    double tol;
    const char *row; /* the numerics-table row it comes from */
} rc_cmp_tol;
/* The whole table (n entries). Float arrays not in it are compared bitwise. */
const rc_cmp_tol *rc_cmp_tolerances(size_t *n);
const rc_cmp_tol *rc_cmp_tolerance(const char *name); /* NULL when absent */

/* The name of the KV-storage marker array in a forward dump (int32 [1]: 32 or 16). */
#define RC_CMP_KV_ARRAY "kv_bits"

/* ---- npz report ---- */
#define RC_CMP_MAX_DIMS 8
typedef struct {
    char name[64];
    int in_a, in_b;        /* presence; compared only when both */
    int integer;           /* integer dtypes on both sides: exact comparison */
    char dtype_a[12], dtype_b[12];
    int ndim;
    int64_t shape[RC_CMP_MAX_DIMS];
    uint64_t numel;
    rc_tol_kind tol_kind;  /* RC_TOL_EXACT also for float arrays without a table row (bitwise) */
    double tol;
    const char *tol_row;   /* NULL: no table row */
    double max_abs;        /* max |A - B| (inf when one side is NaN there) */
    double ref_max_abs;    /* max |B| */
    double max_rel;        /* max_abs / ref_max_abs (max_abs when ref_max_abs is 0) */
    uint64_t n_diff;       /* elements that differ at all (bitwise for floats) */
    int64_t worst[RC_CMP_MAX_DIMS]; /* multi-index of the largest |A - B| (first differing element) */
    uint64_t worst_flat;
    double worst_a, worst_b;
    int64_t worst_ulps;    /* float arrays: rc_ulp_gap at the worst element */
    int pass;
} rc_cmp_array;

/* ---- trace report ---- */
typedef enum {
    RC_DIV_NONE = 0,
    RC_DIV_TURNS,        /* different number of turns */
    RC_DIV_FEED,         /* feed_len differs */
    RC_DIV_GATE_CHECKS,  /* a gate check at a c0 on one side only */
    RC_DIV_GATE,         /* gate decision */
    RC_DIV_GATE_SCORE,   /* same decision, score beyond tolerance */
    RC_DIV_FIRE,         /* fire record on one side only (or its c0 differs) */
    RC_DIV_CANDIDATES,   /* candidate count or the chosen set */
    RC_DIV_BRIDGE_SCORE, /* same choice, bridge scores beyond tolerance */
    RC_DIV_INJECTED,     /* same choice, injected ids differ */
    RC_DIV_REBUILD,      /* rebuild shape [c0, has_SP, injected_len, window_len] */
    RC_DIV_TOP5,         /* rebuild top-5 ids */
    RC_DIV_TOP5_LOGIT,   /* same ids, logits beyond tolerance */
    RC_DIV_REPLY,        /* a reply token (or where the reply ends) */
    RC_DIV_HISTORY       /* final_history differs with every turn alike */
} rc_div_kind;
const char *rc_div_kind_name(rc_div_kind k);

/* The numbers that decide a divergence, on one side. */
typedef struct {
    int present;          /* the record exists on this side */
    int fired;            /* gate */
    int has_score;        /* gate score (NaN in the trace is "absent") */
    float score;
    int ncand;            /* candidates */
    int top[8], ntop;     /* chosen candidate indices, as in the trace */
    int has_pair;         /* vals[0..1]: the competing values on this side (bridge scores of cand[0..1],
                           * logits of ids[0..1] for top-5 / reply) */
    float vals[2];
    int32_t ids[2];       /* top-5 / reply: the token ids behind vals (A's choice first) */
    int32_t token;        /* reply: the token this side generated there, -1 = the reply ended */
    int has_margin;       /* reply: top1 - top2 */
    float margin;
    int margin_bound;     /* 1: only a lower bound on the margin is known (margin = the bound) */
    int64_t ulps;         /* gap between the deciding values on this side; -1 unknown */
    int ulps_estimated;   /* 1: ulps derived from a margin and the turn's largest top-5 logit */
    int64_t rb[4];        /* rebuild: [c0, has_SP, injected_len, window_len] */
    int64_t n;            /* feed_len / number of turns / count */
    char note[200];       /* what is absent from this side's trace, where it matters */
} rc_div_side;

typedef struct {
    rc_div_kind kind;
    int turn;             /* 0-based turn index (reports say turn + 1) */
    int c0;               /* chunk start of the record; -1 when none */
    int reply_index;      /* reply tokens: index j in the reply; -1 otherwise */
    int position;         /* reply tokens: absolute history position feed_len + j */
    int cand[2];          /* candidates: the competing candidates (in A's set only, in B's set only) */
    int rank;             /* top-5: first differing rank */
    int near_tie;
    int has_threshold;
    float threshold;
    double delta, tol;    /* float kinds: |A - B| (rel for bridge / top-5) and its tolerance */
    int index;            /* float kinds: the element (candidate / rank) at delta */
    rc_div_side a, b;
} rc_cmp_divergence;

typedef struct {
    int kind;                  /* 1 npz, 2 trace, 3 score */
    char what[16];             /* npz: "forward", "pool", "embed" or "npz"; trace: "trace"; "score" */
    /* The numerics profile each side ran (q8.h): a trace's "numerics" (absent: "exact", as the
     * Python reference is), an npz holding numerics_q8 = [1] ran q8. Different profiles are no
     * error of either side: the report says so and compares as usual. */
    char numerics_a[8], numerics_b[8];
    /* npz */
    rc_cmp_array *arrays;
    size_t n_arrays;
    int n_compared, n_failed;
    /* trace */
    int n_turns;               /* turns compared */
    long n_tokens, n_gates, n_fires, n_rebuilds, n_top5; /* records compared before the divergence */
    double max_gate_abs, max_bridge_rel, max_top5_rel;   /* before the divergence */
    int has_threshold;
    float threshold;
    char not_compared[160];    /* record lists one side's trace lacks ("rebuild_top5 (absent from A)") */
    int diverged;
    rc_cmp_divergence first;
    long n_consequences;       /* later records that differ (not counted as errors) */
    int last_turn_affected;    /* 0-based; -1 when none */
    /* score files */
    long n_scored, greedy_same;
    double nll_mean_abs, nll_max_abs, nll_mean_signed, ppl_a, ppl_b;
    int worst_chunk, worst_pos;      /* where |dNLL| is largest */
    /* verdict: 0 agree within tolerance, 1 real divergence / array beyond tolerance,
     * 3 only near-ties (the CLI's exit codes) */
    int verdict;
    /* The KV cache storage each side names: a trace's "kv", a forward dump's "kv_bits" (32 / 16;
     * not compared as an array): "f32" / "f16", or "" when the file does not say (a reference, or
     * an output from before the setting: f32 both). kv_differ: the two (absent read as f32)
     * differ, so differences beyond the numerics table are the f16 rounding's, not a bug. */
    char kv_a[8], kv_b[8];
    int kv_differ;
} rc_cmp_report;

typedef struct {
    int has_threshold; /* gate threshold when neither trace records one */
    float threshold;
} rc_cmp_opts;

/* Compares the files at path_a (engine) and path_b (reference). The kind comes from the contents
 * (a zip archive: npz; a JSON object with "turns": a trace). *out is filled on RECALL_OK and must
 * be released with rc_cmp_report_free. Errors: RECALL_E_IO / E_FORMAT / E_CHECKSUM for unreadable
 * files, RECALL_E_SHAPE for files that cannot be compared (kinds, shapes, dtypes, problems). */
recall_status rc_compare_files(const char *path_a, const char *path_b, const rc_cmp_opts *opts, rc_cmp_report *out,
                               recall_err *err);
/* The same on two buffers already in memory (borrowed; what_a / what_b name them in messages). */
recall_status rc_compare_mem(const void *a, size_t len_a, const char *what_a, const void *b, size_t len_b,
                             const char *what_b, const rc_cmp_opts *opts, rc_cmp_report *out, recall_err *err);
void rc_cmp_report_free(rc_cmp_report *r);

#endif
