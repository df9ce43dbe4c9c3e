/* cli.h - the subcommands of ./recall. Each takes argv after the subcommand name's position
 * (argv[0] is the subcommand), prints its own --help, and returns a process exit code. */
#ifndef RECALL_CLI_H
#define RECALL_CLI_H

int cli_convert(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_forward(int argc, char **argv);
int cli_embed(int argc, char **argv);
int cli_pool(int argc, char **argv);
int cli_heads(int argc, char **argv);
int cli_replay(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
int cli_trace_svg(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_score(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_longctx(int argc, char **argv);

/* ---- helpers shared by the subcommands (cli_score.c) ---- */
#include "pool.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

/* --threads N / --simd P (0 / NULL: RECALL_THREADS / RECALL_SIMD decide); --hugepages: copy the
 * blob into huge-page-advised memory (RC_OPEN_HUGEPAGES) instead of mapping the file;
 * --rope-scaling yarn:FACTOR:ORIG: a YaRN profile for a blob without one (rope.h; one that
 * contradicts the file's fails naming both), applied by cli_blob_open; --ctx N: the decoder's
 * instance context (above the trained positions the open fails naming both numbers). */
typedef struct {
    int threads;
    const char *simd;
    int hugepages;
    const char *rope_scaling;
    int ctx; /* --ctx N: the instance context (KV grows on demand up to N); 0 = the command's default */
    int lm_screen; /* --lm-head-screen on|off|auto: RC_LM_SCREEN_* (recall_loop.h); 0 = auto */
    int numerics;  /* --numerics exact|q8: RC_NUMERICS_* (q8.h); 0 = exact */
} cli_exec_args;
/* If argv[*i] is --threads, --simd, --hugepages, --rope-scaling, --ctx, --lm-head-screen or --numerics, consumes it and its value
 * (advancing *i) and returns 1; returns 0 for any other argument and -1 (message printed) for a
 * bad value. */
int cli_exec_flag(const char *cmd, int argc, char **argv, int *i, cli_exec_args *x);
/* The numerics line of forward / score / info: "exact", or for q8 what was packed at open (bytes,
 * seconds) and what stays exact. */
struct rc_qwen2;
void cli_numerics_describe(const struct rc_qwen2 *m, char *buf, size_t n);
/* --kv-pages PAGE:BUDGET / --kv-pages-random SEED (kv_pages.h) into o: same protocol as
 * cli_exec_flag. cli_kv_pages_check: -1 (message printed) for a random control without pages.
 * cli_kv_pages_describe: one line for the output ("dense", or the page, budget and ranking). */
#include "kv_pages.h"
int cli_kv_pages_flag(const char *cmd, int argc, char **argv, int *i, rc_kv_pages_opts *o);
int cli_kv_pages_check(const char *cmd, const rc_kv_pages_opts *o);
void cli_kv_pages_describe(const rc_kv_pages_opts *o, char *buf, size_t n);
/* --draft N: an integer in 0..RC_DRAFT_MAX (draft.h) into *out; 0, or 2 after printing why not. */
int cli_parse_draft(const char *cmd, const char *v, int *out);
/* rc_blob_open with cli_blob_flags(x, base), then the --rope-scaling profile attached. */
recall_status cli_blob_open(const cli_exec_args *x, const char *path, unsigned base, struct rc_blob **out,
                            recall_err *err);
recall_status cli_exec_open(const cli_exec_args *x, rc_exec **out, recall_err *err);
/* The rc_blob_open flags the arguments ask for, added to `base`. */
unsigned cli_blob_flags(const cli_exec_args *x, unsigned base);
/* Token ids from text: a JSON array of ids, or decimal ids separated by whitespace. Errors name
 * `what` (the file) and the byte offset. */
recall_status cli_parse_ids_text(const char *text, size_t len, const char *what, int32_t **out, int *n,
                                 recall_err *err);
recall_status cli_read_tokens_file(const char *path, int32_t **out, int *n, recall_err *err);
/* Exactly one of inline_ids (--ids) / tokens_file (--tokens-file) must be given. */
recall_status cli_get_ids(const char *inline_ids, const char *tokens_file, int32_t **out, int *n, recall_err *err);

#endif
