/* test_cli_recall.c - smoke tests of the recall-loop CLI (./recall, built by `make test`):
 *   replay      worldA problem 0 (faithful, f32): every turn's reply ids and the final history equal
 *               the loop golden; trace-svg of that trace draws one point per gate check
 *   trace-svg   on a golden trace: well-formed, one element per gate check / fire / chosen block
 *   chat        piped messages with a session file: the streamed text and the saved ids equal what
 *               the library produces for the same feeds; a second run resumes the session; damaged
 *               session files are refused and left untouched; a FULL-arm context past the trained
 *               positions names both numbers
 *   eval/calibrate argument errors */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "recall_loop.h"
#include "session.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GOLDEN "tests/golden/worldA/loop_A_seed0_faithful_fp32.json"

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static char *tmpdir(void) {
    char *d = strdup("/tmp/recall_cli_XXXXXX");
    cr_assert(d && mkdtemp(d));
    return d;
}

/* Structural checks of a trace-svg output against the trace it was drawn from. */
static void check_svg(const char *svg_path, const json_value *turns) {
    char *svg = fixture_read(svg_path, NULL);
    cr_assert(!strncmp(svg, "<?xml", 5));
    cr_assert(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    size_t L = strlen(svg);
    cr_assert(L > 7 && !strcmp(svg + L - 7, "</svg>\n"));
    size_t gates = 0, fires = 0, chosen = 0, cands = 0;
    for (size_t i = 0; i < turns->len; i++) {
        const json_value *t = &turns->items[i];
        gates += json_get(t, "gates")->len;
        const json_value *f = json_get(t, "fires");
        fires += f->len;
        for (size_t k = 0; k < f->len; k++) {
            chosen += json_get(&f->items[k], "top")->len;
            cands += (size_t)json_get(&f->items[k], "ncand")->num;
        }
    }
    cr_expect_eq(count(svg, "<g class=\"turn\""), turns->len);
    cr_expect_eq(count(svg, "<circle class=\"gate"), gates);
    cr_expect_eq(count(svg, "<line class=\"fire\""), fires);
    cr_expect_eq(count(svg, "<rect class=\"cand chosen\""), chosen);
    cr_expect_eq(count(svg, "<rect class=\"cand"), cands);
    cr_expect_eq(count(svg, "<g "), count(svg, "</g>"));
    cr_expect_eq(count(svg, "<text"), count(svg, "</text>"));
    cr_expect_eq(count(svg, "<title>"), count(svg, "</title>"));
    free(svg);
}

Test(cli_recall, trace_svg_golden) {
    char *d = tmpdir(), cmd[1024], svg[300];
    snprintf(svg, sizeof svg, "%s/t.svg", d);
    snprintf(cmd, sizeof cmd, "./recall trace-svg " GOLDEN " -o %s --threshold 0 2>&1", svg);
    char *out;
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    free(out);
    json_doc *g = fixture_json(GOLDEN);
    const json_value *turns = json_get(json_root(g), "turns");
    check_svg(svg, turns);
    char *s = fixture_read(svg, NULL);
    cr_expect_eq(count(s, "<line class=\"threshold\""), turns->len);
    cr_expect_eq(count(s, "<circle class=\"gate fired\""), 4); /* the golden's four fires */
    free(s);
    json_free(g);
    /* not a trace */
    free(fixture_cmd(1, "turns", "./recall trace-svg tests/golden/recall_bench.json -o %s 2>&1", svg));
    unlink(svg);
    rmdir(d);
    free(d);
}

Test(cli_recall, replay_matches_golden, .timeout = 600) {
    char *d = tmpdir(), svg[300], *out;
    snprintf(svg, sizeof svg, "%s/trace.svg", d);
    /* the trace compare's tests read too (fixture.h: one replay for both suites) */
    const char *trace = fixture_worldA_replay("f32", "faithful", &out);
    cr_expect_eq(count(out, "\nturn ") + !strncmp(out, "turn ", 5), 5, "progress: %s", out);
    free(out);
    json_doc *g = fixture_json(GOLDEN), *t = fixture_json(trace);
    const json_value *gt = json_get(json_root(g), "turns"), *tt = json_get(json_root(t), "turns");
    cr_assert(gt && tt);
    cr_assert_eq(tt->len, gt->len);
    for (size_t i = 0; i < gt->len; i++) {
        const json_value *a = json_get(&tt->items[i], "reply"), *b = json_get(&gt->items[i], "reply");
        cr_assert_eq(a->len, b->len, "turn %zu", i);
        for (size_t k = 0; k < a->len; k++) cr_assert_eq(a->items[k].num, b->items[k].num, "turn %zu reply[%zu]", i, k);
        cr_assert_eq(json_get(&tt->items[i], "gates")->len, json_get(&gt->items[i], "gates")->len);
        cr_assert_eq(json_get(&tt->items[i], "fires")->len, json_get(&gt->items[i], "fires")->len);
    }
    const json_value *a = json_get(json_root(t), "final_history"), *b = json_get(json_root(g), "final_history");
    cr_assert_eq(a->len, b->len);
    for (size_t k = 0; k < a->len; k++) cr_assert_eq(a->items[k].num, b->items[k].num, "final_history[%zu]", k);
    /* the trace it wrote carries its threshold, and draws */
    free(fixture_cmd(0, NULL, "./recall trace-svg %s -o %s 2>&1", trace, svg));
    check_svg(svg, tt);
    json_free(g);
    json_free(t);
    unlink(svg);
    rmdir(d);
    free(d);
}

/* The library's reply for a feed, with the chat defaults. */
static void library_reply(const char *blob_path, const int32_t *feed, int n, rc_turn *t, char **text) {
    rc_blob *b;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(blob_path, 0, &b, &err), RECALL_OK, "%s", err.msg);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_recall_reply(r, feed, n, NULL, NULL, t, &err), RECALL_OK, "%s", err.msg);
    size_t len;
    cr_assert_eq(rc_bpe_decode(rc_recall_bpe(r), t->reply, (size_t)t->n_reply, 0, text, &len, &err), RECALL_OK);
    rc_recall_close(r);
    rc_blob_close(b);
}

static void segment(const char *blob_path, int with_eos, const char *user, int32_t **ids, size_t *n) {
    rc_blob *b;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(blob_path, 0, &b, &err), RECALL_OK);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.arm = RC_ARM_SP;
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK);
    cr_assert_eq(rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), with_eos, user, NULL, ids, n, &err), RECALL_OK);
    rc_recall_close(r);
    rc_blob_close(b);
}

Test(cli_recall, chat_session_round_trip, .timeout = 120) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char *d = tmpdir(), cmd[1024], sess[300];
    snprintf(sess, sizeof sess, "%s/chat.sess", d);
    const char *m1 = "Important to note: the reference code is ZX9043.", *m2 = "Quick, what was the code?";

    /* turn 1: a new session */
    snprintf(cmd, sizeof cmd, "printf '%%s\\n' '%s' | ./recall chat %s --session %s", m1, blob, sess);
    char *out;
    cr_assert_eq(fixture_sh(cmd, &out), 0);
    int32_t *seg1;
    size_t n1;
    segment(blob, 0, m1, &seg1, &n1);
    rc_turn t1;
    char *text1;
    library_reply(blob, seg1, (int)n1, &t1, &text1);
    cr_assert_gt(t1.n_reply, 0);
    char *want = malloc(strlen(text1) + 2);
    sprintf(want, "%s\n", text1);
    cr_expect_str_eq(out, want, "streamed text differs from the decoded reply");
    free(want);
    free(out);
    rc_session s;
    recall_err err = {0};
    cr_assert_eq(rc_session_load(sess, &s, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(s.n, n1 + (size_t)t1.n_reply);
    cr_assert_eq(memcmp(s.ids, seg1, n1 * sizeof *seg1), 0);
    cr_assert_eq(memcmp(s.ids + n1, t1.reply, (size_t)t1.n_reply * sizeof *seg1), 0);

    /* turn 2: resumed; the feed is history + segment with the EOS separator */
    free(fixture_cmd(0, NULL, "printf '\\n%%s\\n' '%s' | ./recall chat %s --session %s --trace 2>%s/trace.txt", m2,
                     blob, sess, d));
    int32_t *seg2;
    size_t n2;
    segment(blob, 1, m2, &seg2, &n2);
    size_t nf = s.n + n2;
    int32_t *feed = malloc(nf * sizeof *feed);
    memcpy(feed, s.ids, s.n * sizeof *feed);
    memcpy(feed + s.n, seg2, n2 * sizeof *feed);
    rc_turn t2;
    char *text2;
    library_reply(blob, feed, (int)nf, &t2, &text2);
    rc_session s2;
    cr_assert_eq(rc_session_load(sess, &s2, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(s2.n, nf + (size_t)t2.n_reply);
    cr_assert_eq(memcmp(s2.ids, feed, nf * sizeof *feed), 0);
    cr_assert_eq(memcmp(s2.ids + nf, t2.reply, (size_t)t2.n_reply * sizeof *feed), 0);
    char tp[400];
    snprintf(tp, sizeof tp, "%s/trace.txt", d);
    char *tr = fixture_read(tp, NULL);
    cr_expect_eq(count(tr, "[trace] rebuild"), (size_t)t2.n_rebuilds, "%s", tr);
    cr_expect(strstr(tr, "[trace] turn done"), "%s", tr);
    free(tr);
    unlink(tp);

    /* a damaged session: refused, exit 1, bytes unchanged */
    size_t len;
    char *before = fixture_read(sess, &len);
    FILE *f = fopen(sess, "r+b");
    cr_assert(f);
    fseek(f, 40, SEEK_SET);
    fputc(before[40] ^ 1, f);
    fclose(f);
    before[40] ^= 1;
    snprintf(cmd, sizeof cmd, "echo hello | ./recall chat %s --session %s 2>&1", blob, sess);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_expect(strstr(out, "refusing session") && strstr(out, "checksum"), "%s", out);
    free(out);
    size_t len2;
    char *after = fixture_read(sess, &len2);
    cr_assert(len2 == len && !memcmp(before, after, len), "the damaged session was modified");
    free(after);
    /* truncated */
    cr_assert_eq(truncate(sess, (off_t)len - 3), 0);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_expect(strstr(out, "truncated"), "%s", out);
    free(out);
    after = fixture_read(sess, &len2);
    cr_assert(len2 == len - 3 && !memcmp(before, after, len2));
    free(after);
    free(before);

    rc_session_free(&s);
    rc_session_free(&s2);
    rc_turn_free(&t1);
    rc_turn_free(&t2);
    free(text1);
    free(text2);
    free(seg1);
    free(seg2);
    free(feed);
    unlink(sess);
    rmdir(d);
    free(d);
}

Test(cli_recall, chat_limits_named) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char cmd[1024], *out;
    /* (a message longer than the window is accepted on the recall arms: tests/test_recall_long.c)
     * FULL arm: history + message + reply cap beyond the model's 4096 trained positions */
    snprintf(cmd, sizeof cmd, "echo hi | ./recall chat %s --arm FULL --max-turn-tokens 5000 2>&1 >/dev/null", blob);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_expect(strstr(out, "trained on 4096") && strstr(out, "5000 reply cap"), "%s", out);
    free(out);
}

Test(cli_recall, argument_errors) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    free(fixture_cmd(2, "RC_xyz",
                     "./recall eval %s --bench tests/golden/recall_bench.json --arms SP,RC_xyz 2>&1", blob));
    free(fixture_cmd(2, NULL, "./recall eval %s --bench tests/golden/recall_bench.json --arms RC_bge@x 2>&1", blob));
    free(fixture_cmd(2, NULL, "./recall eval %s --bench tests/golden/recall_bench.json --problems 3-1 2>&1", blob));
    free(fixture_cmd(2, NULL,
                     "./recall calibrate %s --bench tests/golden/recall_bench.json --percentile 101 2>&1", blob));
    free(fixture_cmd(2, NULL, "./recall chat %s --hysteresis -1 </dev/null 2>&1", blob));
    free(fixture_cmd(0, "BASE[@THRESH][:rFLOOR]", "./recall eval --help"));
}

/* --pooler-cache changes memory and speed only: the traces of replay with the cache off (0), a
 * 1 MiB cache (smaller than the history) and the default are the same bytes; a bad value is a
 * usage error naming the flag. */
Test(cli_recall, pooler_cache_flag_same_trace, .timeout = 600) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char *d = tmpdir(), cmd[1024], trace[3][300], *out;
    static const char *flag[3] = {"", "--pooler-cache 0", "--pooler-cache 1"};
    char *text[3];
    size_t len[3];
    for (int k = 0; k < 3; k++) {
        snprintf(trace[k], sizeof trace[k], "%s/trace%d.json", d, k);
        snprintf(cmd, sizeof cmd, "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 %s --trace %s 2>&1",
                 blob, flag[k], trace[k]);
        cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
        free(out);
        text[k] = fixture_read(trace[k], &len[k]);
    }
    for (int k = 1; k < 3; k++) {
        cr_assert_eq(len[k], len[0], "%s", flag[k]);
        cr_assert(!memcmp(text[k], text[0], len[0]), "%s: the trace differs", flag[k]);
    }
    for (int k = 0; k < 3; k++) {
        free(text[k]);
        unlink(trace[k]);
    }
    snprintf(cmd, sizeof cmd, "./recall chat %s --pooler-cache 12x </dev/null 2>&1", blob);
    cr_assert_eq(fixture_sh(cmd, &out), 2);
    cr_expect(strstr(out, "--pooler-cache 12x"), "%s", out);
    free(out);
    rmdir(d);
    free(d);
}

/* --hugepages only changes where the blob lives: `recall forward` prints exactly the same. */
Test(cli_recall, hugepages_same_output) {
    const char *blob = fixture_worldA_blob("nf4");
    char cmd[1024], *plain = NULL, *huge = NULL;
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '[17, 52, 11, 279, 974]' 2>&1", blob);
    cr_assert_eq(fixture_sh(cmd, &plain), 0, "%s", plain);
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '[17, 52, 11, 279, 974]' --hugepages 2>&1", blob);
    cr_assert_eq(fixture_sh(cmd, &huge), 0, "%s", huge);
    cr_assert(strstr(plain, "argmax"), "%s", plain);
    cr_assert_str_eq(huge, plain);
    free(plain);
    free(huge);
}
