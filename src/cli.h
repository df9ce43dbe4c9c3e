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

#endif
