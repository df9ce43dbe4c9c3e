/* test_cli_opts.c - the CLI's option tables (src/cli/cli_opts.c) through ./recall (built by `make test`):
 *   every_command_x_every_option  `recall help --table` lists each command's options; every
 *                           command is run with every option name any command knows: one it takes
 *                           is accepted (the run ends as it does without it: a missing blob, exit
 *                           1), one it does not take exits 2 with exactly one line naming it
 *   help_lists_exactly_the_table  each `recall CMD --help` lists the options of its table, no more
 *   one_name_one_meaning    a name takes a value in every command or in none (three documented
 *                           exceptions: the subject is the same, the action differs)
 *   docs_cli_md_is_generated  docs/CLI.md holds `recall help --markdown` byte for byte
 *   ignored_options_refused  the options that used to be accepted and ignored are refused or used:
 *                           forward/score --lm-head-screen, embed/pool/heads --ctx, --rope-scaling,
 *                           score --ctx (naming --chunk), longctx --task needle,needle, --ctx
 *                           without a FULL arm; longctx --lm-head-screen on reaches the loop; replay
 *                           takes --fire-once, --hysteresis and --floor
 *   chat_session_limit_skips_the_message  a message past the session limit is skipped with exit 1
 *                           and the next line is still read
 *   default_threads_are_the_cores  without --threads / RECALL_THREADS the banner names the cores
 *                           this process may use, and the bits equal --threads 1's */
#define _GNU_SOURCE /* sched_getaffinity */
#include "fixture.h"
#include "json.h"

#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char cmd[32], name[32], alias[32], arg[32];
} row;

/* `recall help --table` */
static row *load_table(int *n) {
    char *out;
    cr_assert_eq(fixture_sh("./recall help --table", &out), 0);
    int cap = 0;
    for (const char *p = out; *p; p++) cap += *p == '\n';
    row *r = calloc((size_t)cap + 1, sizeof *r);
    cr_assert(r);
    *n = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        row *x = &r[(*n)++];
        cr_assert_eq(sscanf(line, "%31[^\t]\t%31[^\t]\t%31[^\t]\t%31s", x->cmd, x->name, x->alias, x->arg), 4, "%s",
                     line);
    }
    free(out);
    cr_assert_gt(*n, 100, "the table has %d rows", *n);
    return r;
}

/* The commands, each with arguments that make it fail at once on a missing file (exit 1; compare:
 * 2, unreadable input), so that only parsing is exercised. */
static const struct {
    const char *cmd, *base;
} COMMANDS[] = {
    {"convert", "-o build/nope-cli.blob"},
    {"info", "nope.blob"},
    {"verify", "nope.blob"},
    {"tokenize", "nope.blob </dev/null"},
    {"detokenize", "nope.blob </dev/null"},
    {"forward", "nope.blob --ids '[1,2,3]'"},
    {"score", "nope.blob --ids '[1,2,3]'"},
    {"embed", "nope.blob --file nope.txt"},
    {"pool", "nope.blob --ids '[1,2,3]'"},
    {"heads", "nope.blob --q nope.npy"},
    {"replay", "nope.blob --bench nope.json --problem 0 --trace build/nope-cli.json"},
    {"chat", "nope.blob </dev/null"},
    {"eval", "nope.blob --bench nope.json"},
    {"eval --merge", "nope1.json"},
    {"calibrate", "nope.blob --bench nope.json"},
    {"trace-svg", "nope.json -o build/nope-cli.svg"},
    {"longctx", "nope.blob --task needle --len 10"},
    {"compare", "nope_a.npz nope_b.npz"},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

/* A valid value for an option (by name; the switch forms take none). */
static const char *sample(const char *name) {
    static const char *const v[][2] = {
        {"--threads", "2"}, {"--simd", "scalar"}, {"--ctx", "64"}, {"--rope-scaling", "yarn:2:4096"},
        {"--kv-pages", "16:32"}, {"--kv-pages-random", "3"}, {"--mode", "clean"}, {"--edge", "inject"}, {"--span", "exchange"}, {"--rerank", "words"}, {"--top-k", "1"}, {"--arm", "SP"},
        {"--threshold", "-3"}, {"--hysteresis", "2"}, {"--floor", "-20"}, {"--max-turn-tokens", "5"},
        {"--draft", "4"}, {"--pooler-cache", "16"}, {"--kv", "f16"}, {"--numerics", "q8"}, {"--profile", "device"}, {"--lm-head-screen", "off"}, {"--pooler-heads", "4"}, {"--weights", "nf4"},
        {"--bge-weights", "nf4"},
        {"--decode-from", "1"}, {"--chunk", "3"}, {"--scoring-rows", "1"}, {"--problem", "0"},
        {"--problems", "0"}, {"--arms", "SP"}, {"--shard", "1/2"}, {"--percentile", "10"}, {"--task", "needle"},
        {"--len", "10"}, {"--cases", "3"}, {"--fact-share", "0.5"}, {"--depth", "0.5"}, {"--seed", "1"}, {"--max-new", "4"}, {"--ids", "'[1,2]'"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(v[i][0], name)) return v[i][1];
    return "nope.x"; /* a path */
}

/* What an accepted option needs beside it so that the run still ends at the missing file. */
static const char *companion(const char *cmd, const char *name) {
    static const char *const c[][3] = {
        {"forward", "--kv-pages", "--decode-from 1"},
        {"forward", "--kv-pages-random", "--kv-pages 16:32 --decode-from 1"},
        {"score", "--kv-pages", "--scoring-rows 1"},
        {"score", "--kv-pages-random", "--kv-pages 16:32 --scoring-rows 1"},
        {"replay", "--ctx", "--arm FULL"},
        {"chat", "--ctx", "--arm FULL"},
        {"replay", "--edge", "--mode clean"}, /* faithful mode refuses the edge */
        {"chat", "--edge", "--mode clean"},
        {"eval", "--edge", "--mode clean"},
        {"longctx", "--edge", "--mode clean"},
        {"replay", "--span", "--mode clean"}, /* and the widened span */
        {"chat", "--span", "--mode clean"},
        {"eval", "--span", "--mode clean"},
        {"longctx", "--span", "--mode clean"},
        {"replay", "--rerank", "--mode clean"},
        {"chat", "--rerank", "--mode clean"},
        {"eval", "--rerank", "--mode clean"},
        {"longctx", "--rerank", "--mode clean"},
        {"eval", "--ctx", "--arms FULL"},
        {"eval", "--shard", "--json build/nope-cli.json"},
        {"longctx", "--bench", "--task farfact"},
        {"longctx", "--cases", "--task farfact --bench nope.json"},
        {"longctx", "--fact-share", "--task farfact --bench nope.json"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (!strcmp(c[i][0], cmd) && !strcmp(c[i][1], name)) return c[i][2];
    return "";
}

static const row *takes(const row *t, int n, const char *cmd, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].cmd, cmd) && (!strcmp(t[i].name, name) || !strcmp(t[i].alias, name))) return &t[i];
    return NULL;
}

/* Runs `./recall CMD ARGS` with stdout dropped; the exit status, stderr in *err. */
static int run(const char *cmd, const char *args, char **err) {
    char line[1024];
    const char *redir = strchr(args, '<') ? "" : " </dev/null";
    snprintf(line, sizeof line, "./recall %s %s%s 2>&1 >/dev/null", cmd, args, redir);
    return fixture_sh(line, err);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(cli_opts, every_command_x_every_option, .timeout = 600) {
    int n;
    row *t = load_table(&n);
    /* every name any command knows, both spellings */
    const char *names[256];
    int n_names = 0;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) {
            const char *x = s ? t[i].alias : t[i].name;
            int seen = !strcmp(x, "-");
            for (int k = 0; k < n_names && !seen; k++) seen = !strcmp(names[k], x);
            if (!seen) names[n_names++] = x;
        }
    cr_assert_gt(n_names, 50);
    int accepted = 0, refused = 0;
    for (int c = 0; c < N_COMMANDS; c++) {
        const char *cmd = COMMANDS[c].cmd;
        char *err;
        const int base = run(cmd, COMMANDS[c].base, &err);
        cr_assert(base == 1 || (base == 2 && !strcmp(cmd, "compare")), "%s %s -> %d: %s", cmd, COMMANDS[c].base,
                  base, err);
        free(err);
        for (int k = 0; k < n_names; k++) {
            const row *r = takes(t, n, cmd, names[k]);
            char args[600];
            if (r) {
                snprintf(args, sizeof args, "%s %s %s %s", COMMANDS[c].base, names[k],
                         strcmp(r->arg, "-") ? sample(r->name) : "", companion(cmd, r->name));
                const int rc = run(cmd, args, &err);
                cr_expect(rc == base && !strstr(err, "not an option") && !strstr(err, "unknown option"),
                          "recall %s %s: accepted in the table, but exit %d: %s", cmd, args, rc, err);
                accepted++;
            } else {
                snprintf(args, sizeof args, "%s %s 5", COMMANDS[c].base, names[k]);
                const int rc = run(cmd, args, &err);
                char want[96];
                snprintf(want, sizeof want, "recall %s: %s is not an option of %s", cmd, names[k], cmd);
                cr_expect(rc == 2 && lines(err) == 1 && strstr(err, want),
                          "recall %s %s: not in the table, but exit %d: %s", cmd, args, rc, err);
                refused++;
            }
            free(err);
        }
    }
    cr_log_info("%d commands x %d option names: %d accepted, %d refused", N_COMMANDS, n_names, accepted, refused);
    cr_assert_eq(accepted + refused, N_COMMANDS * n_names);
    cr_assert_gt(accepted, 120);
    cr_assert_gt(refused, 600);
    /* every command of the table was walked */
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int c = 0; c < N_COMMANDS && !found; c++) found = !strcmp(COMMANDS[c].cmd, t[i].cmd);
        cr_expect(found, "command %s is not walked", t[i].cmd);
    }
    free(t);
}

Test(cli_opts, help_lists_exactly_the_table) {
    int n;
    row *t = load_table(&n);
    for (int c = 0; c < N_COMMANDS; c++) {
        char line[128], *out;
        snprintf(line, sizeof line, "./recall %s --help", COMMANDS[c].cmd);
        cr_assert_eq(fixture_sh(line, &out), 0, "%s", line);
        int listed = 0;
        /* option lines: two spaces, then the name */
        for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
            if (strncmp(l, "  -", 3)) continue;
            char name[64];
            sscanf(l + 2, "%63[^ ,]", name);
            if (!strcmp(name, "-h")) continue;
            cr_expect(takes(t, n, COMMANDS[c].cmd, name) != NULL, "%s --help lists %s, its table does not",
                      COMMANDS[c].cmd, name);
            listed++;
        }
        int in_table = 0;
        for (int i = 0; i < n; i++) in_table += !strcmp(t[i].cmd, COMMANDS[c].cmd);
        cr_expect_eq(listed, in_table, "%s --help lists %d options, its table has %d", COMMANDS[c].cmd, listed, in_table);
        free(out);
    }
    free(t);
}

Test(cli_opts, one_name_one_meaning) {
    int n;
    row *t = load_table(&n);
    /* the subject is the same, the action differs: convert stores the int8 lm_head copy, the loop
     * commands use it; replay writes the trace to a file, chat prints it as it happens; convert
     * reads the bge folder, tokenize uses its tokenizer */
    static const char *const exceptions[] = {"--lm-head-screen", "--trace", "--bge"};
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++) {
            if (strcmp(t[i].name, t[k].name)) continue;
            int exc = 0;
            for (size_t e = 0; e < 3; e++) exc |= !strcmp(t[i].name, exceptions[e]);
            if (!exc)
                cr_expect_eq(!strcmp(t[i].arg, "-"), !strcmp(t[k].arg, "-"), "%s takes a value in %s but not in %s",
                             t[i].name, strcmp(t[i].arg, "-") ? t[i].cmd : t[k].cmd,
                             strcmp(t[i].arg, "-") ? t[k].cmd : t[i].cmd);
        }
    /* --ctx is the instance context wherever it is taken */
    char *out;
    cr_assert_eq(fixture_sh("./recall help --markdown", &out), 0);
    for (const char *p = strstr(out, "| `--ctx` |"); p; p = strstr(p + 1, "| `--ctx` |"))
        cr_expect(!strncmp(strstr(p, "| `N` | ") + 8, "the instance context", 20), "%.120s", p);
    free(out);
    free(t);
}

Test(cli_opts, docs_cli_md_is_generated) {
    char *doc, *gen;
    size_t len;
    recall_err err = {0};
    cr_assert_eq(rc_read_file("docs/CLI.md", &doc, &len, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(fixture_sh("./recall help --markdown", &gen), 0);
    const char *begin = "<!-- generated by `recall help --markdown` (make cli-doc): do not edit by hand -->\n";
    char *a = strstr(doc, begin), *b = a ? strstr(a, "<!-- end of the generated part -->") : NULL;
    cr_assert(a && b, "docs/CLI.md lacks the generated part's markers");
    a += strlen(begin);
    cr_expect(strlen(gen) == (size_t)(b - a) && !memcmp(a, gen, strlen(gen)),
              "docs/CLI.md differs from `recall help --markdown`: run make cli-doc");
    free(doc);
    free(gen);
}

/* recall CMD ARGS must exit 2 with one line holding `want`. */
static void expect_refused(const char *cmd, const char *args, const char *want) {
    char *err;
    const int rc = run(cmd, args, &err);
    cr_expect(rc == 2 && lines(err) == 1 && strstr(err, want), "recall %s %s -> %d: %s (wanted '%s')", cmd, args, rc,
              err, want);
    free(err);
}

Test(cli_opts, ignored_options_refused) {
    expect_refused("forward", "B --ids '[1]' --lm-head-screen off", "--lm-head-screen is not an option of forward");
    expect_refused("score", "B --ids '[1,2,3]' --lm-head-screen on", "--lm-head-screen is not an option of score");
    for (int k = 0; k < 2; k++) {
        const char *opt = k ? "--rope-scaling yarn:2:4096" : "--ctx 64";
        char args[128], want[96];
        const char *cmds[][2] = {{"embed", "B --file x"}, {"pool", "B --ids '[1]'"}, {"heads", "B --q x"}};
        for (int c = 0; c < 3; c++) {
            snprintf(args, sizeof args, "%s %s", cmds[c][1], opt);
            snprintf(want, sizeof want, "%.*s is not an option of %s", (int)strcspn(opt, " "), opt, cmds[c][0]);
            expect_refused(cmds[c][0], args, want);
        }
    }
    expect_refused("heads", "B --q x --threads 2", "--threads is not an option of heads");
    expect_refused("score", "B --ids '[1,2,3]' --ctx 8", "the chunk length is --chunk N");
    expect_refused("longctx", "B --task needle,needle --len 10", "each once");
    expect_refused("longctx", "B --task needle --len 10 --arms SP --ctx 64", "no FULL arm runs");
    expect_refused("replay", "B --bench x --problem 0 --trace y --ctx 64", "no FULL arm runs");
    expect_refused("eval", "B --bench x --arms SP,RC_bge --ctx 64", "no FULL arm runs");
    expect_refused("calibrate", "B --bench x --ctx 64", "--ctx is not an option of calibrate");
    expect_refused("eval", "B --bench x --merge a.json", "--merge must come first");
    /* replay takes the loop's precision options */
    char *err;
    cr_expect_eq(run("replay", "nope.blob --bench x --problem 0 --trace y --fire-once --hysteresis 2 --floor -20", &err),
                 1, "%s", err);
    free(err);
    /* longctx --lm-head-screen reaches the loop: worldA has no int8 copy, so "on" is an error */
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char args[512];
    snprintf(args, sizeof args, "%s --task needle --len 200 --arms SP --max-new 1 --lm-head-screen on", blob);
    cr_expect_eq(run("longctx", args, &err), 1, "%s", err);
    cr_expect(strstr(err, "lm_head screening asked for but the blob has no"), "%s", err);
    free(err);
    /* and the help of calibrate and longctx lists what they take */
    char *out;
    cr_assert_eq(fixture_sh("./recall calibrate --help", &out), 0);
    cr_expect(strstr(out, "--threads N") && strstr(out, "--lm-head-screen M") && strstr(out, "--rope-scaling"), "%s",
              out);
    free(out);
    cr_assert_eq(fixture_sh("./recall longctx --help", &out), 0);
    cr_expect(strstr(out, "--lm-head-screen M") && strstr(out, "--hugepages"), "%s", out);
    free(out);
}

Test(cli_opts, chat_session_limit_skips_the_message, .timeout = 300) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char cmd[600], *err;
    /* a reply cap of the whole session limit: no message fits beside it, and each is skipped */
    snprintf(cmd, sizeof cmd,
             "printf 'first\\nsecond\\n' | ./recall chat %s --max-turn-tokens 268435456 2>&1 >/dev/null", blob);
    const int rc = fixture_sh(cmd, &err);
    cr_expect_eq(rc, 1, "%s", err);
    int skipped = 0;
    for (const char *p = strstr(err, "above the session limit"); p; p = strstr(p + 1, "above the session limit"))
        skipped++;
    cr_expect_eq(skipped, 2, "both lines were read and skipped: %s", err);
    free(err);
}

Test(cli_opts, default_threads_are_the_cores, .timeout = 300) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
#ifdef RECALL_NO_THREADS
    const int cores = 1; /* a build without threads runs one, whatever the cores */
#else
    const int cores = CPU_COUNT(&set);
#endif
    char cmd[1024], *out[2], want[64];
    const char *threads[2] = {"", "--threads 1"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "env -u RECALL_THREADS ./recall forward %s --ids '[17, 52, 11, 279, 974]' %s 2>&1",
                 blob, threads[k]);
        cr_assert_eq(fixture_sh(cmd, &out[k]), 0, "%s", out[k]);
    }
    snprintf(want, sizeof want, "recall forward: simd ");
    cr_expect(strstr(out[0], want), "%s", out[0]);
    snprintf(want, sizeof want, ", %d thread%s\n", cores, cores == 1 ? "" : "s");
    cr_expect(strstr(out[0], want), "default: %s (wanted '%s')", out[0], want);
    cr_expect(strstr(out[1], ", 1 thread\n"), "%s", out[1]);
    /* the same logits: everything after the banner is equal */
    cr_expect_str_eq(strchr(out[0], '\n'), strchr(out[1], '\n'));
    free(out[0]);
    free(out[1]);
}

/* --top-k takes 1..RC_MAX_K blocks a fire; out of range it is refused before anything opens. */
Test(cli_opts, top_k_range_refused) {
    expect_refused("chat", "nope.blob --top-k 0", "recall chat: --top-k 0: expected an integer in 1..8");
    expect_refused("eval", "nope.blob --bench nope.json --top-k 9", "recall eval: --top-k 9: expected an integer in 1..8");
    expect_refused("longctx", "nope.blob --task needle --len 10 --top-k -1",
                   "recall longctx: --top-k -1: expected an integer in 1..8");
}
