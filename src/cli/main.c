/* main.c - the recall CLI: finds the command (cli_opts.c), parses its options from its table and
 * runs it. The library never prints or exits; only src/cli/ does. */
#include "cli_opts.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        if (argc > 2 && (!strcmp(argv[2], "--markdown") || !strcmp(argv[2], "--table"))) {
            (argv[2][2] == 'm' ? cli_markdown : cli_table)(stdout);
            return 0;
        }
        int skip = 0;
        const cli_command *c = argc > 2 ? cli_find(argc - 1, argv + 1, &skip) : NULL;
        if (c) cli_help(c, stdout);
        else cli_list(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int skip = 1;
    const cli_command *c = cli_find(argc, argv, &skip);
    if (!c) {
        fprintf(stderr, "recall: unknown command '%s'\n", argv[1]);
        cli_list(stderr);
        return 2;
    }
    cli_args a;
    int rc = cli_parse(c, argc - 1 - skip, argv + 1 + skip, &a);
    return rc >= 0 ? rc : c->run(&a);
}
