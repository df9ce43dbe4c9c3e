/* cli_opts.h - the option tables of the recall CLI.
 *
 * Every command is one cli_command: its synopsis, its text, and the rows of the options it takes
 * (cli_opt). The parser (cli_parse) and the help (cli_help, and `recall help --markdown`, which
 * docs/CLI.md holds) are generated from the rows, so a command accepts exactly what its --help
 * lists: an option that another command takes, or none does, exits 2 with one line naming it.
 * A row is one option name with one meaning; rows that share a name share their parser and the
 * shape of their value (tests/test_cli_opts.c checks it, and walks every command x every option).
 *
 * Adding an option: one row (name, value placeholder, help, setter, the cli_args field it fills)
 * in cli_opts.c, its pointer in the table of each command that uses it, the field in cli_args
 * (cli_common.h), and the code that reads the field. */
#ifndef RECALL_CLI_OPTS_H
#define RECALL_CLI_OPTS_H

#include "cli_common.h"

#include <stddef.h>
#include <stdio.h>

typedef struct cli_opt cli_opt;

/* Parses val (NULL for a switch) into a; 0, or 2 after one line on stderr naming the option. */
typedef int (*cli_set_fn)(const cli_opt *o, const char *val, cli_args *a);

struct cli_opt {
    const char *name;  /* "--threads" */
    const char *alias; /* another spelling ("--out" for "-o"), or NULL */
    const char *arg;   /* the value's placeholder ("N"); NULL: a switch */
    const char *help;  /* what it does and its default; "\n" continues on the next line */
    cli_set_fn set;
    size_t field; /* offsetof(cli_args, ...) for the generic setters */
    double lo, hi; /* the range of a number */
};

/* An option a command no longer takes under this name: refused, naming the new one. */
typedef struct {
    const char *name, *instead;
} cli_moved;

typedef struct {
    const char *name;     /* "score"; "eval --merge" is a command of its own */
    const char *synopsis; /* after "recall NAME ": positional arguments and required options */
    const char *summary;  /* one line for `recall help` */
    const char *about;    /* the text before the options */
    const char *notes;    /* the text after them (formats, exit codes), or NULL */
    const char *pos_name; /* the positional arguments as messages name them ("BLOB") */
    int min_pos, max_pos;
    const char *required;             /* options that must be given, space-separated, or NULL */
    const cli_opt *const *opts;       /* NULL-terminated */
    const cli_moved *moved;           /* {NULL, NULL}-terminated, or NULL */
    int (*run)(const cli_args *a);
} cli_command;

extern const cli_command cli_commands[];
extern const int cli_n_commands;

/* Every distinct row of every table (for the tests and the docs), NULL-terminated. */
extern const cli_opt *const cli_all_opts[];

/* The command named argv[1] (with "eval --merge" for `eval --merge ...`), or NULL. *skip: the
 * argv entries its name took (1 or 2). */
const cli_command *cli_find(int argc, char **argv, int *skip);
/* argv[0..argc) (the arguments after the command's name) into a: the exit code of a usage error
 * or of --help (0), else -1 to go on. */
int cli_parse(const cli_command *c, int argc, char **argv, cli_args *a);
/* The command's help, as --help prints it. */
void cli_help(const cli_command *c, FILE *f);
/* `recall help`: the commands, one line each. */
void cli_list(FILE *f);
/* `recall help --markdown`: every command's synopsis, text and options table (docs/CLI.md). */
void cli_markdown(FILE *f);
/* `recall help --table`: one line per command and option, "COMMAND<TAB>NAME<TAB>ALIAS<TAB>ARG"
 * ("-" for none), for the tests that walk every command x every option. */
void cli_table(FILE *f);
/* Does c take an option spelled name (either spelling)? The row, or NULL. */
const cli_opt *cli_takes(const cli_command *c, const char *name);

#endif
