/* test_eval_shard.c - `recall eval --shard K/N` and `recall eval --merge` (./recall, built by `make test`):
 *   shards_merge_to_one_run  worldA f32, problems 0-2 x arms SP, RC_bge@-3:r-30 (6 jobs, fires in
 *                            question and probe turns): the whole run, 2 shards (each holds several
 *                            jobs of one arm) and 4 shards (3/4 and 4/4 hold no job of one of the
 *                            arms); each merge (files in any order)
 *                            prints the same table and writes the same JSON as the whole run, byte
 *                            for byte once the per-problem "seconds" are blanked; each shard file
 *                            lists exactly its jobs. Refused with exit 2, one line naming the file,
 *                            and no output written: a shard given twice, a missing shard, a shard
 *                            of another run (--mode clean), and shard files edited to claim another
 *                            blob, benchmark, problem list or job list, and a whole-run file.
 *   usage_errors             --shard bounds and syntax, --shard without --json, --merge misuse */
#include "fixture.h"
#include "json.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH "tests/golden/recall_bench.json"
#define ARMS "SP,RC_bge@-3:r-30"

static char *slurp(const char *path) {
    char *t;
    size_t l;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(path, &t, &l, &err), RECALL_OK, "%s", err.msg);
    return t;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The document with every per-problem "seconds" value (the only timing field) blanked; asserts
 * there was at least one, so a format change cannot make the comparison vacuous. */
static char *no_timing(const char *path) {
    char *t = slurp(path), *o = malloc(strlen(t) + 1), *w = o;
    cr_assert(o);
    int n = 0;
    for (const char *p = t; *p;) {
        if (!strncmp(p, "\"seconds\": ", 11)) {
            memcpy(w, p, 11), w += 11, p += 11;
            while ((*p >= '0' && *p <= '9') || *p == '.') p++;
            n++;
        } else {
            *w++ = *p++;
        }
    }
    *w = 0;
    free(t);
    cr_assert(n > 0, "%s: no \"seconds\" field", path);
    return o;
}

/* Copy of text with the first `from` replaced by `to` (which must be present). */
static char *edit(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    cr_assert(at, "'%s' not found", from);
    char *o = malloc(strlen(text) + strlen(to) + 1);
    cr_assert(o);
    sprintf(o, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return o;
}

/* Runs cmd; returns stdout, asserts the exit status. */
static char *sh_ok(const char *cmd) {
    char *out;
    int st = fixture_sh(cmd, &out);
    cr_assert_eq(st, 0, "%s -> %d\n%s", cmd, st, out);
    return out;
}

static void run_shard(const char *blob, const char *d, const char *extra, int k, int n, const char *name) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0-2 --arms " ARMS " %s --shard %d/%d "
             "--json %s/%s 2>/dev/null", blob, extra, k, n, d, name);
    free(sh_ok(cmd));
}

/* The shard file's "jobs" equal want[0..n). */
static void expect_jobs(const char *path, const int *want, size_t n) {
    char *t = slurp(path);
    json_doc *doc;
    recall_err err = {0};
    cr_assert_eq(json_parse(t, strlen(t), path, &doc, &err), RECALL_OK, "%s", err.msg);
    const json_value *jobs = json_path(json_root(doc), "shard.jobs");
    cr_assert(jobs && jobs->type == JSON_ARR, "%s", path);
    cr_expect_eq(jobs->len, n, "%s", path);
    for (size_t i = 0; i < n && i < jobs->len; i++) cr_expect_eq(jobs->items[i].i, want[i], "%s job %zu", path, i);
    /* one per-problem object per job */
    size_t seeds = 0;
    for (const char *p = strstr(t, "{\"seed\": "); p; p = strstr(p + 1, "{\"seed\": ")) seeds++;
    cr_expect_eq(seeds, n, "%s", path);
    json_free(doc);
    free(t);
}

/* `recall eval --merge FILES --json D/m.json` must exit 2 with a message containing `a` and `b`,
 * and leave no D/m.json. */
static void expect_refused(const char *d, const char *files, const char *a, const char *b) {
    char cmd[2048], out[300], *msg;
    snprintf(out, sizeof out, "%s/m.json", d);
    unlink(out);
    snprintf(cmd, sizeof cmd, "./recall eval --merge %s --json %s 2>&1 >/dev/null", files, out);
    cr_expect_eq(fixture_sh(cmd, &msg), 2, "%s\n%s", cmd, msg);
    cr_expect(strstr(msg, a) && strstr(msg, b), "%s\n-> %s (wanted '%s' and '%s')", cmd, msg, a, b);
    cr_expect(strchr(msg, '\n') == msg + strlen(msg) - 1, "not one line: %s", msg);
    cr_expect_neq(access(out, F_OK), 0, "%s was written", out);
    free(msg);
}

static void merge_matches_whole(const char *d, const char *files, const char *table, const char *json) {
    char cmd[2048], out[300];
    snprintf(out, sizeof out, "%s/merged.json", d);
    unlink(out);
    snprintf(cmd, sizeof cmd, "./recall eval --merge %s --json %s 2>/dev/null", files, out);
    char *t = sh_ok(cmd);
    cr_expect_str_eq(t, table, "%s", cmd);
    char *m = no_timing(out);
    cr_expect(!strcmp(m, json), "%s: merged JSON differs from the whole run's", cmd);
    free(m);
    free(t);
}

Test(eval_shard, shards_merge_to_one_run, .timeout = 1200) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char d[] = "/tmp/recall_shard_XXXXXX", cmd[2048], path[300], files[2048];
    cr_assert(mkdtemp(d));
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0-2 --arms " ARMS " --json %s/whole.json "
             "2>/dev/null", blob, d);
    char *table = sh_ok(cmd);
    snprintf(path, sizeof path, "%s/whole.json", d);
    char *whole = no_timing(path);
    /* the case is not vacuous: both arms, fires in question and probe turns */
    cr_assert(strstr(table, "RC_bge@-3:r-30") && strstr(whole, "\"top_bridge_q_fires\": [-") &&
              strstr(whole, "\"top_bridge_c_fires\": [-"), "%s", table);
    cr_expect(strstr(whole, "\"mode\": \"faithful\", \"numerics\": \"exact\""), "the run names its profile");

    for (int k = 1; k <= 2; k++) {
        snprintf(path, sizeof path, "s%d_2.json", k);
        run_shard(blob, d, "", k, 2, path);
    }
    for (int k = 1; k <= 4; k++) {
        snprintf(path, sizeof path, "s%d_4.json", k);
        run_shard(blob, d, "", k, 4, path);
    }
    static const int j12[] = {0, 2, 4}, j22[] = {1, 3, 5}, j14[] = {0, 4}, j24[] = {1, 5}, j34[] = {2}, j44[] = {3};
    const struct { const char *name; const int *jobs; size_t n; } sh[] = {
        {"s1_2.json", j12, 3}, {"s2_2.json", j22, 3}, {"s1_4.json", j14, 2},
        {"s2_4.json", j24, 2}, {"s3_4.json", j34, 1}, {"s4_4.json", j44, 1}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, sh[i].name);
        expect_jobs(path, sh[i].jobs, sh[i].n);
    }

    snprintf(files, sizeof files, "%s/s2_2.json %s/s1_2.json", d, d);
    merge_matches_whole(d, files, table, whole);
    snprintf(files, sizeof files, "%s/s3_4.json %s/s1_4.json %s/s4_4.json %s/s2_4.json", d, d, d, d);
    merge_matches_whole(d, files, table, whole);

    /* refusals */
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/s1_2.json", d);
    snprintf(files, sizeof files, "%s/s1_2.json %s/s2_2.json %s/s1_2.json", d, d, d);
    expect_refused(d, files, "also in", a);
    snprintf(files, sizeof files, "%s/s2_4.json %s/s2_2.json", d, d); /* jobs 1 and 5 twice */
    expect_refused(d, files, "job 1", "also in");
    snprintf(files, sizeof files, "%s/s1_4.json %s/s3_4.json %s/s4_4.json", d, d, d);
    expect_refused(d, files, "shard 2/4 is missing", "job 1");
    snprintf(files, sizeof files, "%s/whole.json %s/s1_2.json", d, d);
    expect_refused(d, files, "whole.json", "not a shard file");
    /* a shard of another run: the same jobs in clean mode */
    run_shard(blob, d, "--mode clean", 3, 4, "clean3_4.json");
    snprintf(b, sizeof b, "%s/clean3_4.json", d);
    snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
    expect_refused(d, files, b, "mode clean vs faithful");
    /* a shard of the q8 profile: the profiles are never mixed */
    run_shard(blob, d, "--numerics q8", 3, 4, "q8_3_4.json");
    snprintf(b, sizeof b, "%s/q8_3_4.json", d);
    char *q8s = slurp(b);
    cr_expect(strstr(q8s, "\"numerics\": \"q8\""), "a q8 shard names its profile");
    free(q8s);
    snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
    expect_refused(d, files, b, "numerics q8 vs exact");
    /* shard files edited to claim another blob, benchmark, problem list, job list */
    snprintf(path, sizeof path, "%s/s3_4.json", d);
    char *s34 = slurp(path);
    const struct { const char *from, *to, *msg; } edits[] = {
        {"\"blob_xxh64\": \"", "\"blob_xxh64\": \"f", "blob_xxh64"},
        {"\"bench_xxh64\": \"", "\"bench_xxh64\": \"f", "bench_xxh64"},
        {"\"problems\": [0, 1, 2]", "\"problems\": [0, 1, 3]", "seed 3"},
        {"\"jobs\": [2]", "\"jobs\": [3]", "jobs"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *e = edit(s34, edits[i].from, edits[i].to);
        snprintf(b, sizeof b, "%s/edit%zu.json", d, i);
        spit(b, e);
        free(e);
        snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
        expect_refused(d, files, b, edits[i].msg);
        unlink(b);
    }
    free(s34);

    const char *names[] = {"whole.json", "s1_2.json", "s2_2.json", "s1_4.json", "s2_4.json", "s3_4.json",
                           "s4_4.json", "clean3_4.json", "q8_3_4.json", "merged.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, names[i]);
        unlink(path);
    }
    cr_expect_eq(rmdir(d), 0, "%s not empty", d);
    free(whole);
    free(table);
}

Test(eval_shard, usage_errors) {
    const struct { const char *args, *msg; } cases[] = {
        {"B --bench " BENCH " --shard 0/2 --json x.json", "K must be in 1..2"},
        {"B --bench " BENCH " --shard 3/2 --json x.json", "K must be in 1..2"},
        {"B --bench " BENCH " --shard 1/0 --json x.json", "N must be in 1..1000000"},
        {"B --bench " BENCH " --shard 1/1000001 --json x.json", "N must be in 1..1000000"},
        {"B --bench " BENCH " --shard 2 --json x.json", "expected K/N"},
        {"B --bench " BENCH " --shard 1/2x --json x.json", "expected K/N"},
        {"B --bench " BENCH " --shard 1/2", "--shard needs --json"},
        {"B --bench " BENCH " --merge a.json", "--merge must come first"},
        {"--merge", "needs the shard files"},
        {"--merge a.json --bench " BENCH, "unexpected argument '--bench'"},
        {"--merge a.json --json", "--json needs a value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out;
        snprintf(cmd, sizeof cmd, "./recall eval %s 2>&1", cases[i].args);
        cr_expect_eq(fixture_sh(cmd, &out), 2, "%s\n%s", cmd, out);
        cr_expect(strstr(out, cases[i].msg), "%s\n-> %s", cmd, out);
        free(out);
    }
    char *out;
    cr_assert_eq(fixture_sh("./recall eval --help", &out), 0);
    cr_expect(strstr(out, "--shard K/N") && strstr(out, "--merge"), "%s", out);
    free(out);
}
