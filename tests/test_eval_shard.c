/* test_eval_shard.c - `recall eval --shard K/N` and `recall eval --merge` (./recall, built by `make test`):
 *   shards_merge_to_one_run  worldA f32, problems 0-2 x arms SP, RC_bge@-3:r-30 (6 jobs, fires in
 *                            question and probe turns): the whole run, 2 shards (each holds several
 *                            jobs of one arm) and 4 shards (3/4 and 4/4 hold no job of one of the
 *                            arms); each merge (files in any order)
 *                            prints the same table and writes the same JSON as the whole run, byte
 *                            for byte once the per-problem "seconds" are blanked; each shard file
 *                            lists exactly its jobs. Refused with exit 2, one line naming the file,
 *                            and no output written: a shard given twice, a missing shard, a shard
 *                            of another run (--mode clean, --kv f16), and shard files edited to claim another
 *                            blob, benchmark, problem list, job list, arm label, threshold or floor,
 *                            a shard without the "options" record, and a whole-run file.
 *   every_option_that_changes_bits_must_match  one job (FULL arm, problem 0) in shards 1/3, 2/3,
 *                            3/3: a merge with 2/3 run under another --ctx, --draft,
 *                            --lm-head-screen, --rope-scaling or --kv is refused naming that option and
 *                            both values; one run under other --threads / --simd merges (they never
 *                            change bits); the shard records its options, threads and SIMD path
 *   failed_job_recorded_and_named  problem 0 on SP and on FULL with --ctx 200 (too small for the
 *                            FULL arm's first turn): exit 1, the SP job's results written, the
 *                            FULL job in "failed" with its error; the merge names the missing job,
 *                            the shard it failed in and why
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

/* The document with every per-problem "seconds" value (the only timing field) blanked; asserts
 * there was at least one, so a format change cannot make the comparison vacuous. */
static char *no_timing(const char *path) {
    char *t = fixture_read(path, NULL), *o = malloc(strlen(t) + 1), *w = o;
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

/* The worldA f32 blob (converted on demand) and the temporary directory d (a mkdtemp template). */
static const char *blob_and_dir(char *d) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    cr_assert(mkdtemp(d));
    return blob;
}

static void run_shard(const char *blob, const char *d, const char *extra, int k, int n, const char *name) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0-2 --arms " ARMS " %s --shard %d/%d "
             "--json %s/%s 2>/dev/null", blob, extra, k, n, d, name);
    free(sh_ok(cmd));
}

/* The shard file's "jobs" equal want[0..n). */
static void expect_jobs(const char *path, const int *want, size_t n) {
    char *t = fixture_read(path, NULL);
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
    char d[] = "/tmp/recall_shard_XXXXXX", cmd[2048], path[300], files[2048];
    const char *blob = blob_and_dir(d);
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0-2 --arms " ARMS " --json %s/whole.json "
             "2>/dev/null", blob, d);
    char *table = sh_ok(cmd);
    snprintf(path, sizeof path, "%s/whole.json", d);
    char *whole = no_timing(path);
    /* the case is not vacuous: both arms, fires in question and probe turns */
    cr_assert(strstr(table, "RC_bge@-3:r-30") && strstr(whole, "\"top_bridge_q_fires\": [-") &&
              strstr(whole, "\"top_bridge_c_fires\": [-"), "%s", table);
    cr_expect(strstr(whole, "\"--numerics\": \"exact\""), "the run names its profile");

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
    /* ... and with an f16 KV cache: the results differ, so the shards must not mix */
    run_shard(blob, d, "--kv f16", 3, 4, "f16_3_4.json");
    snprintf(b, sizeof b, "%s/f16_3_4.json", d);
    char *f16 = fixture_read(b, NULL);
    cr_expect(strstr(f16, "\"--kv\": \"f16\""), "%s", f16);
    free(f16);
    snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
    expect_refused(d, files, b, "option --kv: f16 vs f32");
    /* a shard of the q8 profile: the profiles are never mixed */
    run_shard(blob, d, "--numerics q8", 3, 4, "q8_3_4.json");
    snprintf(b, sizeof b, "%s/q8_3_4.json", d);
    char *q8s = fixture_read(b, NULL);
    cr_expect(strstr(q8s, "\"--numerics\": \"q8\""), "a q8 shard names its profile");
    free(q8s);
    snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
    expect_refused(d, files, b, "option --numerics: q8 vs exact");
    /* shard files edited to claim another blob, benchmark, problem list, job list */
    snprintf(path, sizeof path, "%s/s3_4.json", d);
    char *s34 = fixture_read(path, NULL);
    const struct { const char *from, *to, *msg; } edits[] = {
        {"\"blob_xxh64\": \"", "\"blob_xxh64\": \"f", "blob_xxh64"},
        {"\"bench_xxh64\": \"", "\"bench_xxh64\": \"f", "bench_xxh64"},
        {"\"problems\": [0, 1, 2]", "\"problems\": [0, 1, 3]", "seed 3"},
        {"\"jobs\": [2]", "\"jobs\": [3]", "jobs"},
        {"\"label\": \"SP\"", "\"label\": \"FULL\"", "arm 0 label FULL vs SP"},
        {"\"threshold\": -3,", "\"threshold\": -2.5,", "arm 1 threshold -2.5 vs -3"},
        {"\"floor\": -30,", "\"floor\": null,", "arm 1 floor nan vs -30"},
        {"\"options\": {", "\"no_options\": {", "no \"options\" record"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *e = edit(s34, edits[i].from, edits[i].to);
        snprintf(b, sizeof b, "%s/edit%zu.json", d, i);
        fixture_write(b, e);
        free(e);
        snprintf(files, sizeof files, "%s/s1_4.json %s/s2_4.json %s %s/s4_4.json", d, d, b, d);
        expect_refused(d, files, b, edits[i].msg);
        unlink(b);
    }
    free(s34);

    const char *names[] = {"whole.json", "s1_2.json", "s2_2.json", "s1_4.json", "s2_4.json", "s3_4.json",
                           "s4_4.json", "clean3_4.json", "f16_3_4.json", "q8_3_4.json",
                           "merged.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, names[i]);
        unlink(path);
    }
    cr_expect_eq(rmdir(d), 0, "%s not empty", d);
    free(whole);
    free(table);
}

/* The value of a key in the file, as text up to the next ',' or '}'. */
static void expect_field(const char *path, const char *key, const char *value) {
    char *t = fixture_read(path, NULL), want[200];
    snprintf(want, sizeof want, "%s: %s", key, value);
    cr_expect(strstr(t, want), "%s lacks '%s'", path, want);
    free(t);
}

Test(eval_shard, every_option_that_changes_bits_must_match, .timeout = 900) {
    char d[] = "/tmp/recall_shopt_XXXXXX", cmd[4096], files[1024], path[300];
    const char *blob = blob_and_dir(d);
    /* one job: FULL arm, problem 0; 1/3 holds it, 2/3 and 3/3 hold none */
    for (int k = 1; k <= 3; k++) {
        snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0 --arms FULL --shard %d/3 --json "
                 "%s/s%d.json 2>/dev/null", blob, k, d, k);
        free(sh_ok(cmd));
    }
    snprintf(path, sizeof path, "%s/s2.json", d);
    expect_field(path, "\"options\"", "{\"--ctx\": 0, \"--draft\": 0, \"--lm-head-screen\": \"auto\", "
                                      "\"--rope-scaling\": null, \"--kv\": \"f32\", \"--numerics\": \"exact\", "
                                      "\"--edge\": \"off\", \"--fire-once\": 0, \"--hysteresis\": 0, "
                                      "\"--span\": \"block\", \"--rerank\": \"off\"}");
    snprintf(files, sizeof files, "%s/s1.json %s/s2.json %s/s3.json", d, d, d);
    char out[300];
    snprintf(out, sizeof out, "%s/m.json", d);
    snprintf(cmd, sizeof cmd, "./recall eval --merge %s --json %s 2>/dev/null", files, out);
    char *table = sh_ok(cmd);
    cr_assert(strstr(table, "FULL"), "%s", table);
    free(table);
    const struct { const char *extra, *msg; } variants[] = {
        {"--ctx 4000", "option --ctx: 4000 vs 0"},
        {"--draft 4", "option --draft: 4 vs 0"},
        {"--lm-head-screen off", "option --lm-head-screen: off vs auto"},
        {"--rope-scaling yarn:2:4096", "option --rope-scaling: yarn:2:4096 vs null"},
        {"--kv f16", "option --kv: f16 vs f32"},
        {"--numerics q8", "option --numerics: q8 vs exact"},
        {"--fire-once", "option --fire-once: 1 vs 0"},
        {"--hysteresis 2", "option --hysteresis: 2 vs 0"},
        {"--threads 1 --simd scalar", NULL},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0 --arms FULL --shard 2/3 %s --json "
                 "%s/v.json 2>/dev/null", blob, variants[v].extra, d);
        free(sh_ok(cmd));
        snprintf(files, sizeof files, "%s/s1.json %s/v.json %s/s3.json", d, d, d);
        snprintf(path, sizeof path, "%s/v.json", d);
        if (variants[v].msg) {
            expect_refused(d, files, path, variants[v].msg);
        } else {
            expect_field(path, "\"threads\"", "1");
            expect_field(path, "\"simd\"", "\"scalar\"");
            snprintf(cmd, sizeof cmd, "./recall eval --merge %s --json %s 2>/dev/null", files, out);
            free(sh_ok(cmd));
        }
        unlink(path);
    }
    for (int k = 1; k <= 3; k++) {
        snprintf(path, sizeof path, "%s/s%d.json", d, k);
        unlink(path);
    }
    unlink(out);
    cr_expect_eq(rmdir(d), 0, "%s not empty", d);
}

Test(eval_shard, failed_job_recorded_and_named, .timeout = 900) {
    char d[] = "/tmp/recall_shfail_XXXXXX", cmd[2048], path[300], *msg;
    const char *blob = blob_and_dir(d);
    snprintf(path, sizeof path, "%s/s.json", d);
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench " BENCH " --problems 0 --arms SP,FULL --ctx 200 --shard 1/1 "
             "--json %s 2>&1 >/dev/null", blob, path);
    cr_assert_eq(fixture_sh(cmd, &msg), 1, "%s", msg);
    cr_expect(strstr(msg, "[FULL] problem 0: failed: ") && strstr(msg, "1 of 2 jobs failed"), "%s", msg);
    free(msg);
    /* the finished job is there, the failed one is recorded with its error */
    char *t = fixture_read(path, NULL);
    json_doc *doc;
    recall_err err = {0};
    cr_assert_eq(json_parse(t, strlen(t), path, &doc, &err), RECALL_OK, "%s", err.msg);
    const json_value *root = json_root(doc), *arms = json_get(root, "arms"), *failed = json_get(root, "failed");
    cr_assert(arms && arms->len == 2 && failed && failed->len == 1, "%s", t);
    cr_expect_eq(json_get(&arms->items[0], "per_problem")->len, 1);
    cr_expect_eq(json_get(&arms->items[1], "per_problem")->len, 0);
    cr_expect_eq(json_get(&failed->items[0], "job")->i, 1);
    cr_expect_str_eq(json_get(&failed->items[0], "arm")->str, "FULL");
    cr_expect(strstr(json_get(&failed->items[0], "error")->str, "the cache holds 200"), "%s", t);
    json_free(doc);
    free(t);
    expect_refused(d, path, path, "job 1 (arm FULL, seed 0) of its run is missing: it failed in shard 1/1: ");
    expect_refused(d, path, "FULL arm needs", "the cache holds 200");
    unlink(path);
    cr_expect_eq(rmdir(d), 0, "%s not empty", d);
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
        {"--merge a.json --bench " BENCH, "--bench is not an option of eval --merge"},
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
