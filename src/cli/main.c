/* main.c - the recall CLI: dispatches to the subcommands in src/cli/cli_*.c. The library never
 * prints or exits; only these files do. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command commands[] = {
    {"convert", cli_convert, "safetensors/npz/.pt artifacts -> one recall blob"},
    {"info", cli_info, "print a blob's config and tensor table"},
    {"verify", cli_verify, "re-check every checksum of a blob"},
    {"tokenize", cli_tokenize, "text -> JSON array of token ids (Qwen2 BPE or --bge WordPiece)"},
    {"detokenize", cli_detokenize, "JSON array of ids -> text"},
    {"forward", cli_forward, "one Qwen2 prefill of given ids; dump logits/hidden/q to .npz"},
    {"score", cli_score, "teacher-forced NLL, greedy tokens and llama-perplexity PPL of given ids"},
    {"embed", cli_embed, "BERT (bge) embedding of a text; dump to .npz"},
    {"pool", cli_pool, "AttnPoolSP soft tokens of given ids; dump to .npz"},
    {"heads", cli_heads, "gate score and bridge score of given feature vectors"},
    {"replay", cli_replay, "run one benchmark problem through the recall loop, write a trace"},
    {"chat", cli_chat, "interactive multi-turn chat with recall (--session FILE keeps it)"},
    {"eval", cli_eval, "the reference recall benchmark over problems x arms: table + JSON"},
    {"calibrate", cli_calibrate, "suggest a gate threshold from needle dialogues (p10 at recall positions)"},
    {"trace-svg", cli_trace_svg, "draw a replay trace (gate scores, fires, injected blocks) as SVG"},
    {"longctx", cli_longctx, "exact-answer long-context tasks (needle, multikey, vartrack) on each arm"},
    {"compare", cli_compare, "engine output vs reference (.npz dumps or loop traces): where and why they differ"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: recall COMMAND [ARGS]   (recall COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "recall: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
