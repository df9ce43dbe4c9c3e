/* cli_common.h - what the recall CLI's commands share: the parsed command line (cli_args, filled by
 * cli_parse from the option tables of cli_opts.c) and the helpers that turn it into the library's
 * options, read token ids, open the blob and the execution context, and print. Only src/cli/
 * prints or exits; every helper that can fail returns a recall_status or an exit code. */
#ifndef RECALL_CLI_COMMON_H
#define RECALL_CLI_COMMON_H

#include "atomic_file.h"
#include "blob.h"
#include "kv_pages.h"
#include "pool.h"
#include "recall_loop.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_MAX_POS 64 /* positional arguments (eval --merge's shard files) */

/* Every value any command takes; a command reads only the fields of the options its table lists
 * (the others keep the defaults of cli_args_init). One field per option name. */
typedef struct cli_args {
    const char *cmd; /* the command's name, for messages ("eval --merge" for the merge) */
    const char *pos[CLI_MAX_POS];
    int n_pos;
    /* The loop's and the decoder's options that need no blob to be set: the engine's own struct
     * (recall_loop.h, where each is documented and checked once), filled by the option rows:
     * --threads, --simd, --numerics (loop.exec; threads 0: RECALL_THREADS, else the cores available,
     * cli_threads), --kv, --mode, --arm, --edge, --fire-once, --hysteresis, --draft,
     * --reference-schedule, --lm-head-screen. The window, block, ... are the blob's (cli_loop_opts). */
    rc_recall_opts loop;
    int hugepages;    /* --hugepages */
    /* the decoder */
    int ctx;                  /* --ctx N: the instance context; 0: the command's default */
    const char *rope_scaling; /* --rope-scaling yarn:FACTOR:ORIG */
    rc_kv_pages_opts kvp;     /* --kv-pages, --kv-pages-random */
    const char *profile;      /* --profile exact|device (sets numerics, kv, lm_screen); NULL: not given */
    /* inputs and outputs */
    const char *ids, *tokens_file, *file, *dump, *json, *out, *trace_out, *session, *bench, *q, *emb;
    int trace_live;          /* --trace-live */
    /* the recall loop's options whose default is the blob's (or needs it): NaN / -1 = the blob's value */
    int turn_cap;            /* --max-turn-tokens; -1: the blob's loop.turn_cap */
    int top_k;               /* --top-k N: the blocks a fire injects; 0: the blob's loop.k */
    int pooler_cache_mb;     /* --pooler-cache MB; -1: the default budget (0 given: no cache) */
    double threshold, floor; /* --threshold, --floor; NaN: the blob's threshold / no floor */
    const char *threshold_file, *calibrate; /* --threshold-file FILE, --calibrate BENCH (calibrate.h) */
    /* eval, calibrate, longctx */
    const char *problems, *arms, *shard, *task, *len, *depth, *haystack, *prompts;
    long problem;    /* replay --problem; -1: none */
    double percentile;
    const char *svg; /* calibrate --svg OUT */
    const char *write; /* calibrate --write FILE: the threshold file (calibrate.h) */
    unsigned long long seed;
    int max_new, no_run; /* --max-new; 0: the task's default (32; farfact: the blob's loop.turn_cap) */
    int cases;           /* longctx --cases (farfact); 0: 10 */
    double fact_share;   /* longctx --fact-share (farfact); NaN: RC_FF_FACT_SHARE */
    /* score */
    int chunk, bos, per_position, scoring_rows;
    long decode_from; /* forward --decode-from; -1: none */
    /* convert */
    const char *qwen2, *bge, *pooler, *gate, *bridge, *weights, *bge_weights, *q8_exact, *nf4_keep;
    int pooler_heads, tokenizers_only, store_screen, quiet;
    /* tokenize, detokenize, info */
    int use_bge, special, skip_special, no_tensors;
} cli_args;

/* The defaults: all zero / NULL but threshold, floor and fact_share NaN, turn_cap, pooler_cache_mb, problem and
 * decode_from -1, percentile 10, scoring_rows 64. */
void cli_args_init(cli_args *a, const char *cmd);

/* ---- printing and exit codes ---- */

/* "recall CMD: MSG" on stderr (err's message, else its code's name); returns 1. */
int cli_fail(const char *cmd, const recall_err *err);
/* One line on stderr, "recall CMD: ...", for a usage error; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The execution choice on stderr: "recall CMD: simd P, N thread(s)". */
void cli_banner(const char *cmd, const char *simd, int threads);
/* Opens PATH.tmp.PID (atomic_file.h); NULL with the reason printed. */
FILE *cli_create(const char *cmd, rc_afile *af, const char *path);
/* Commits the file (fsync + rename); 0, or 1 with the reason printed. Prints "wrote PATH" when
 * say_wrote. */
int cli_commit(const char *cmd, rc_afile *af, int say_wrote);

/* ---- the execution context and the blob ---- */

/* The thread count to run with: --threads, else RECALL_THREADS (0: the library reads it), else
 * the cores this process may run on (at most RC_MAX_THREADS). */
int cli_threads(const cli_args *a);
/* rc_blob_open (flags | --hugepages), then the --rope-scaling profile attached. */
recall_status cli_blob_open(const cli_args *a, const char *path, unsigned flags, struct rc_blob **out, recall_err *err);
/* rc_exec_open with cli_threads and --simd. */
recall_status cli_exec_open(const cli_args *a, rc_exec **out, recall_err *err);

/* ---- the recall loop ---- */

/* The blob's loop defaults with every loop option of the command line applied (mode, arm,
 * threshold, floor, fire-once, hysteresis, edge, reply cap, draft, schedule, screening, threads,
 * simd, FULL arm context). */
void cli_loop_opts(const cli_args *a, const struct rc_blob *b, rc_recall_opts *o);
/* --threshold-file FILE (read, and checked against b and o: calibrate.h) or --calibrate BENCH
 * (rc_calibrate on b with o, problems 1000-1009, p10) into o->threshold, said on stderr; neither given:
 * o unchanged. 0, or the exit status with the message printed. */
int cli_loop_threshold(const cli_args *a, const struct rc_blob *b, rc_recall_opts *o);
/* --ctx sets the FULL arm's context only: 0, or 2 (printed) when it is given and no FULL arm runs
 * (has_full = 0). */
int cli_ctx_needs_full(const cli_args *a, int has_full);

/* ---- values ---- */

/* "0-7", "3", "0,2,5-6" -> the seeds as written (ranges ascending). The count, -1 on error. */
int cli_parse_problems(const char *spec, uint32_t *out, int cap);
/* A comma list "a,b,c": one(ctx, item) for each item (items of 1..cap-1 bytes, cap <= 64); -1 on
 * an empty or too long item or when one refuses it, else 0. */
int cli_each_item(const char *list, size_t cap, int (*one)(void *ctx, const char *item), void *ctx);
/* Adds the arm label s (rc_arm_parse: RC_bge, SP or FULL) as arms[*n] (rows of `width` bytes, at most max rows);
 * -1 when it is another label, already there, or there is no room. */
int cli_add_arm(char *arms, size_t width, int *n, int max, const char *s);
/* --kv-pages in one line: "dense", or the page, budget and ranking. */
void cli_kv_pages_describe(const rc_kv_pages_opts *o, char *buf, size_t n);
/* Token ids from text: a JSON array of ids, or decimal ids separated by whitespace. Errors name
 * `what` (the file) and the byte offset. */
recall_status cli_parse_ids_text(const char *text, size_t len, const char *what, int32_t **out, int *n,
                                 recall_err *err);
/* Exactly one of --ids / --tokens-file must be given; the ids it holds. */
recall_status cli_get_ids(const cli_args *a, int32_t **out, int *n, recall_err *err);
/* The name of the ids' source in messages: the file, or "--ids". */
const char *cli_ids_source(const cli_args *a);

/* The numerics line of forward / score / info: "exact", or for q8 what was packed at open (bytes,
 * seconds) and what stays exact. */
struct rc_qwen2;
void cli_numerics_describe(const struct rc_qwen2 *m, char *buf, size_t n);
/* The profile a run is (docs/PROFILES.md): "device" when the blob holds an nf4 decoder, an nf4 BERT
 * encoder and the int8 lm_head screen and the run uses q8 numerics, f16 KV and the screen; "exact"
 * with exact numerics and f32 KV (whatever the blob's storage); "custom" otherwise. lm_screen is the
 * --lm-head-screen setting (auto: RECALL_LM_SCREEN, else the blob's copy if it has one). */
const char *cli_profile_name(const rc_blob *b, int numerics, int kv, int lm_screen);
/* The layers whose attention q8 kept exact (the blob's qwen2.q8.exact, checked when its model
 * opened) when the run used q8, else NULL: the "q8_exact" of traces and records. */
const char *cli_q8_exact(const rc_blob *b, int numerics);
/* The blob's qwen2.nf4.keep (the attention projections an nf4 blob stores in bf16), else NULL:
 * the "nf4_keep" of traces and records. */
const char *cli_nf4_keep(const rc_blob *b);
/* Writes `, "weights": "<decoder storage>", "bge_weights": "<BERT storage>", "profile": "<name>"`
 * (rc_blob_weights, cli_profile_name), and `, "q8_exact": "<spec>"` when cli_q8_exact gives one,
 * into a JSON object being written: every trace and record names the blob's storage and the
 * profile that ran. */
void cli_put_build(FILE *f, const rc_blob *b, int numerics, int kv, int lm_screen);
/* Writes `, "threshold": T, "hysteresis": N, "fire_once": B, "floor": F|null` (the loop's firing
 * rules as they ran) into a JSON object being written. */
void cli_put_firing(FILE *f, const rc_recall_opts *o);

#endif
