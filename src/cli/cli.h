/* cli.h - the commands of ./recall. Each runs on its parsed command line (cli_args, filled by
 * cli_parse from the command's option table in cli_opts.c) and returns the process exit code:
 * 0 done, 1 failed (one line on stderr), 2 usage error; some commands add their own (see their
 * --help and docs/CLI.md). */
#ifndef RECALL_CLI_H
#define RECALL_CLI_H

#include "cli_common.h"

int cli_convert(const cli_args *a);    /* cli_blob.c */
int cli_info(const cli_args *a);       /* cli_blob.c */
int cli_verify(const cli_args *a);     /* cli_blob.c */
int cli_tokenize(const cli_args *a);   /* cli_tokenize.c */
int cli_detokenize(const cli_args *a); /* cli_tokenize.c */
int cli_forward(const cli_args *a);    /* cli_model.c */
int cli_embed(const cli_args *a);      /* cli_model.c */
int cli_pool(const cli_args *a);       /* cli_model.c */
int cli_heads(const cli_args *a);      /* cli_model.c */
int cli_score(const cli_args *a);      /* cli_score.c */
int cli_replay(const cli_args *a);     /* cli_recall.c */
int cli_chat(const cli_args *a);       /* cli_chat.c */
int cli_eval(const cli_args *a);       /* cli_eval.c */
int cli_eval_merge(const cli_args *a); /* cli_eval.c */
int cli_calibrate(const cli_args *a);  /* cli_calibrate.c */
int cli_trace_svg(const cli_args *a);  /* cli_trace_svg.c */
int cli_longctx(const cli_args *a);    /* cli_longctx.c */
int cli_farfact(const cli_args *a);    /* cli_farfact.c: longctx --task farfact */
int cli_compare(const cli_args *a);    /* cli_compare.c */

#endif
