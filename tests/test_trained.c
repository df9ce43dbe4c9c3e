/* test_trained.c - the two trained worlds (made by tools/train_world/train.py, walked through in
 * docs/WORLD.md), on which the engine's answers are right, so these tests assert answers, not just
 * bits. Suite `templated`: the first world (tests/golden/templated), which knows the benchmark's
 * own keywords and templates. Suite `trained`: the trained world (tests/golden/trained), the world
 * of broad English in a phrasing grammar. Suite `wide`: the wide world (tests/golden/wide), that
 * world continued on people's own wording, the one a person meets first (each section below says
 * what it pins).
 *   manifest   every committed file of the world has the XXH64 and size its recipe recorded
 *              (MANIFEST.xxh64): CI never retrains, and a changed file is named
 *   eval       `recall eval` on held-out problems (keywords and values never seen in training):
 *              FULL and RC_bge answer, SP (the gist alone) does not; the gate fires in the
 *              question turns and the bridge head brings back the block that holds the value
 *   calibrate  `recall calibrate --svg` on the world: a threshold sweep picture with both marks
 * The long-context needle answered on this world is in test_longctx.c. */
#include "checksum.h"
#include "fixture.h"
#include "json.h"
#include "longctx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T FIXTURE_TEMPLATED

/* The measured run (docs/WORLD.md, "The templated world: measured"): held-out problems 0-3,
 * faithful mode. FULL keeps the facts in view and copies every value; RC_bge gets each fact's block
 * back and copies it; SP has the gist only and says it does not know. */
#define EXPECT_FULL_OK 12
#define EXPECT_SP_OK 0
#define EXPECT_RC_OK 12
#define EXPECT_RC_RET 12
#define EXPECT_FULL_EXACT 12
#define EXPECT_RC_EXACT 12
/* make demo's problem and the value its first question asks for */
#define DEMO_PROBLEM 0
#define DEMO_VALUE "218"

static const json_value *get(const json_value *o, const char *k, json_type t) {
    const json_value *v = json_get_type(o, k, t);
    cr_assert(v, "field %s (%s) missing", k, json_type_name(t));
    return v;
}

/* Every file a world's MANIFEST.xxh64 lists has the size and XXH64 its recipe recorded. */
static void check_manifest(const char *dir, int min_files) {
    char *text, mpath[256];
    size_t len;
    recall_err err = {0};
    snprintf(mpath, sizeof mpath, "%s/MANIFEST.xxh64", dir);
    cr_assert_eq(rc_read_file(mpath, &text, &len, &err), RECALL_OK, "%s", err.msg);
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long long want;
        size_t size;
        char name[256], path[512];
        cr_assert_eq(sscanf(line, "%16llx %zu %255s", &want, &size, name), 3, "manifest line: %s", line);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        char *data;
        size_t dl;
        cr_assert_eq(rc_read_file(path, &data, &dl, &err), RECALL_OK, "%s", err.msg);
        cr_expect_eq(dl, size, "%s: %zu bytes, the manifest says %zu", name, dl, size);
        cr_expect_eq(rc_xxh64(data, dl, 0), want, "%s: XXH64 differs from the manifest (retrain or restore it)", name);
        free(data);
        n++;
    }
    cr_expect_geq(n, min_files, "%d files listed", n);
    free(text);
}

Test(templated, manifest_matches_the_committed_files) { check_manifest(T, 17); }

/* One `recall eval` run of a world's blob on a bench file; returns the parsed JSON (caller frees). */
static json_doc *eval_world(const char *blob, const char *bench, const char *problems, const char *arms,
                            const char *mode) {
    cr_assert(blob);
    char json[128], cmd[1024], *out;
    snprintf(json, sizeof json, "build/ttrained_%d_eval.json", (int)getpid());
    snprintf(cmd, sizeof cmd, "./recall eval %s --bench %s --problems %s --arms %s --mode %s --json %s 2>&1", blob,
             bench, problems, arms, mode, json);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    free(out);
    json_doc *doc = fixture_json(json);
    unlink(json);
    return doc;
}

static const json_value *arm(const json_doc *doc, int i, const char *label) {
    const json_value *arms = get(json_root(doc), "arms", JSON_ARR);
    cr_assert_gt(arms->len, (size_t)i);
    cr_assert_str_eq(get(&arms->items[i], "label", JSON_STR)->str, label);
    return &arms->items[i];
}

/* Per arm: the question turns whose reply holds the value (recall_ok, recounted from the turns)
 * and those that answer it exactly (the text after the last </think> is the value: the rule of
 * `recall longctx`, rc_lctx_answer). */
static void count_answers(const json_value *a, int *ok, int *exact) {
    const json_value *pp = get(a, "per_problem", JSON_ARR);
    *ok = *exact = 0;
    for (size_t p = 0; p < pp->len; p++) {
        const json_value *turns = get(&pp->items[p], "turns", JSON_ARR);
        for (size_t t = 0; t < turns->len; t++) {
            const json_value *u = &turns->items[t];
            if (strcmp(get(u, "kind", JSON_STR)->str, "q")) continue;
            *ok += (int)get(u, "recall_ok", JSON_BOOL)->num;
            *exact += rc_lctx_answer(get(u, "reply_text", JSON_STR)->str, get(u, "val", JSON_STR)->str, NULL, 0);
        }
    }
}

/* Held-out problems 0-3 (12 questions, 8 probes): the counts of the measured run, exactly (the
 * engine is deterministic). FULL keeps the facts in view and answers; SP has only the gist of
 * them and does not; RC_bge gets the fact's block back when its gate fires and answers from it. */
Test(templated, eval_answers_held_out_questions, .timeout = 600) {
    json_doc *doc = eval_world(fixture_templated_blob("f32"), T "/eval_bench.json", "0-3", "FULL,SP,RC_bge", "faithful");
    const json_value *full = arm(doc, 0, "FULL"), *sp = arm(doc, 1, "SP"), *rc = arm(doc, 2, "RC_bge");
    cr_assert_eq(get(full, "questions", JSON_NUM)->i, 12);
    cr_expect_eq(get(full, "recall_ok", JSON_NUM)->i, EXPECT_FULL_OK);
    cr_expect_eq(get(sp, "recall_ok", JSON_NUM)->i, EXPECT_SP_OK);
    cr_expect_eq(get(rc, "recall_ok", JSON_NUM)->i, EXPECT_RC_OK);
    cr_expect_eq(get(rc, "retrieved_ok", JSON_NUM)->i, EXPECT_RC_RET);
    int ok, exact;
    count_answers(full, &ok, &exact);
    cr_expect_eq(ok, EXPECT_FULL_OK);
    cr_expect_eq(exact, EXPECT_FULL_EXACT, "FULL answered %d/12 exactly", exact);
    count_answers(rc, &ok, &exact);
    cr_expect_eq(ok, EXPECT_RC_OK);
    cr_expect_eq(exact, EXPECT_RC_EXACT, "RC_bge answered %d/12 exactly", exact);
    count_answers(sp, &ok, &exact);
    cr_expect_eq(exact, 0, "SP answered %d/12 exactly", exact);
    /* the gate fired in every question turn and what it injected held the value; the SP and
     * FULL arms never score a gate */
    const json_value *pp = get(rc, "per_problem", JSON_ARR);
    int q_turns = 0, injected = 0;
    for (size_t p = 0; p < pp->len; p++) {
        const json_value *turns = get(&pp->items[p], "turns", JSON_ARR);
        for (size_t t = 0; t < turns->len; t++) {
            const json_value *u = &turns->items[t];
            if (strcmp(get(u, "kind", JSON_STR)->str, "q")) continue;
            q_turns++;
            injected += get(u, "n_injected", JSON_NUM)->i > 0;
        }
    }
    cr_expect_eq(q_turns, 12);
    cr_expect_eq(injected, 12, "question turns with an injection: %d/12", injected);
    cr_expect_eq(get(sp, "fires", JSON_NUM)->i, 0);
    cr_expect_eq(get(full, "fires", JSON_NUM)->i, 0);
    json_free(doc);
}

Test(templated, calibrate_draws_the_threshold_sweep, .timeout = 600) {
    const char *blob = fixture_templated_blob("f32");
    cr_assert(blob);
    char svg[128], cmd[1024], *out;
    snprintf(svg, sizeof svg, "build/ttrained_%d_cal.svg", (int)getpid());
    snprintf(cmd, sizeof cmd, "./recall calibrate %s --bench " T "/eval_bench.json --problems 0-1 --svg %s 2>&1", blob,
             svg);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    cr_expect(strstr(out, "suggested threshold: "), "%s", out);
    free(out);
    char *text;
    size_t len;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(svg, &text, &len, &err), RECALL_OK, "%s", err.msg);
    cr_expect(strstr(text, "<polyline"), "the sweep curve");
    cr_expect(strstr(text, "suggested threshold"), "the suggested threshold marked");
    cr_expect(strstr(text, "the gate file's threshold"), "the file's threshold marked");
    cr_expect(!strncmp(text + len - 7, "</svg>\n", 7), "a complete SVG");
    free(text);
    unlink(svg);
}

/* The reply line of the first question turn ("turn N (q)") of a replay's output. */
static char *first_question_reply(const char *out) {
    const char *q = strstr(out, " (q): ");
    cr_assert(q, "%s", out);
    const char *r = strstr(q, "  reply: \"");
    cr_assert(r, "%s", out);
    const char *eol = strchr(r, '\n');
    size_t n = eol ? (size_t)(eol - r) : strlen(r);
    char *line = malloc(n + 1);
    cr_assert(line);
    memcpy(line, r, n);
    line[n] = 0;
    return line;
}

/* What `make demo` shows: on RC_bge the first question turn prints the fire and the block it
 * brought back, which holds the value; on SP no gate fires, nothing comes back and the reply
 * ends "</think>I don't know.". */
Test(templated, replay_shows_the_block_come_back, .timeout = 600) {
    const char *blob = fixture_templated_blob("f32");
    cr_assert(blob);
    char cmd[1024], *rc_out, *sp_out;
    snprintf(cmd, sizeof cmd, "./recall replay %s --bench " T "/eval_bench.json --problem %d --trace build/ttrained_%d_rc.json"
             " 2>&1", blob, DEMO_PROBLEM, (int)getpid());
    cr_assert_eq(fixture_sh(cmd, &rc_out), 0, "%s", rc_out);
    snprintf(cmd, sizeof cmd, "./recall replay %s --bench " T "/eval_bench.json --problem %d --arm SP "
             "--trace build/ttrained_%d_sp.json 2>&1", blob, DEMO_PROBLEM, (int)getpid());
    cr_assert_eq(fixture_sh(cmd, &sp_out), 0, "%s", sp_out);
    const char *back = strstr(rc_out, "the bridge head brought back");
    cr_assert(back, "%s", rc_out);
    const char *eol = strchr(back, '\n'), *val = strstr(back, "is " DEMO_VALUE ".");
    cr_expect(val && eol && val < eol, "the first question's block holds the value: %s", rc_out);
    cr_expect(!strstr(sp_out, "gate fired"), "%s", sp_out);
    /* SP, with nothing injected, says it does not know; RC_bge, with the block back, copies the
     * value: the reply ends "</think> 218" */
    char *rc_reply = first_question_reply(rc_out), *sp_reply = first_question_reply(sp_out);
    const char *sp_tail = strstr(sp_reply, "</think>I don't know.\"");
    cr_expect(sp_tail && sp_tail[strlen("</think>I don't know.\"")] == 0, "SP: %s", sp_reply);
    const char *rc_tail = strstr(rc_reply, "</think> " DEMO_VALUE "\"");
    cr_expect(rc_tail && rc_tail[strlen("</think> " DEMO_VALUE "\"")] == 0, "RC_bge: %s", rc_reply);
    free(rc_reply);
    free(sp_reply);
    free(rc_out);
    free(sp_out);
    char p[128];
    snprintf(p, sizeof p, "build/ttrained_%d_rc.json", (int)getpid());
    unlink(p);
    snprintf(p, sizeof p, "build/ttrained_%d_sp.json", (int)getpid());
    unlink(p);
}

/* ---- the trained world (tests/golden/trained: train.py --world broad, docs/WORLD.md) ------------
 * Keywords, names, words and a whole kind of value it never saw in training (every time of day),
 * casual talk from held-out sentences, and phrasings it never saw: the tests pin the measured
 * answers. The templated world above garbles the typed facts (docs/WORLD.md). */
#define B FIXTURE_TRAINED
/* held-out problems 0-3 of eval_bench.json (12 questions), faithful: exact answers per arm */
#define TRAINED_FULL_EXACT 9
#define TRAINED_SP_EXACT 0
#define TRAINED_RC_EXACT 10
/* the same problems in clean mode (the chat setting's loop): RC_bge exact (the 1,024-id world
 * before this one: 10 of 12 in clean mode, 7 in faithful) */
#define TRAINED_CLEAN_RC_EXACT 10
/* held-out problems 4-7, clean mode, RC_bge exact with the sealed blocks and with --span exchange
 * (two of the misses are facts sealed across two blocks: docs/LOOP.md, "Whole exchanges") */
#define TRAINED_CLEAN_47_BLOCK 8
#define TRAINED_CLEAN_47_MESSAGE 10
/* the chat setting docs/WORLD.md recommends */
#define WHOLE_MODE "clean --span exchange --edge exchange --rerank single"
#define WHOLE "--mode " WHOLE_MODE
/* the same problems with the facts told and asked in phrasings never trained (eval_phrasing.json) */
#define TRAINED_PHR_FULL_EXACT 9
#define TRAINED_PHR_RC_EXACT 6

Test(trained, manifest_matches_the_committed_files) { check_manifest(B, 20); }

static int arm_exact(const json_doc *doc, int i, const char *label) {
    int ok, exact;
    count_answers(arm(doc, i, label), &ok, &exact);
    return exact;
}

Test(trained, eval_answers_held_out_facts, .timeout = 600) {
    json_doc *doc = eval_world(fixture_trained_blob("f32"), B "/eval_bench.json", "0-3", "FULL,SP,RC_bge", "faithful");
    cr_expect_eq(arm_exact(doc, 0, "FULL"), TRAINED_FULL_EXACT);
    cr_expect_eq(arm_exact(doc, 1, "SP"), TRAINED_SP_EXACT);
    cr_expect_eq(arm_exact(doc, 2, "RC_bge"), TRAINED_RC_EXACT);
    json_free(doc);
}

Test(trained, eval_answers_held_out_facts_in_clean_mode, .timeout = 600) {
    json_doc *doc = eval_world(fixture_trained_blob("f32"), B "/eval_bench.json", "0-3", "RC_bge", "clean");
    cr_expect_eq(arm_exact(doc, 0, "RC_bge"), TRAINED_CLEAN_RC_EXACT);
    json_free(doc);
}

Test(trained, whole_exchanges_answer_facts_sealed_across_blocks, .timeout = 600) {
    json_doc *doc = eval_world(fixture_trained_blob("f32"), B "/eval_bench.json", "4-7", "RC_bge", "clean");
    cr_expect_eq(arm_exact(doc, 0, "RC_bge"), TRAINED_CLEAN_47_BLOCK);
    json_free(doc);
    doc = eval_world(fixture_trained_blob("f32"), B "/eval_bench.json", "4-7", "RC_bge", "clean --span exchange");
    cr_expect_eq(arm_exact(doc, 0, "RC_bge"), TRAINED_CLEAN_47_MESSAGE);
    json_free(doc);
}

Test(trained, eval_answers_in_phrasings_never_trained, .timeout = 600) {
    json_doc *doc = eval_world(fixture_trained_blob("f32"), B "/eval_phrasing.json", "0-3", "FULL,RC_bge", "faithful");
    cr_expect_eq(arm_exact(doc, 0, "FULL"), TRAINED_PHR_FULL_EXACT);
    cr_expect_eq(arm_exact(doc, 1, "RC_bge"), TRAINED_PHR_RC_EXACT);
    json_free(doc);
}

/* `recall chat` on the given lines: its replies (stdout), or with `trace` its --trace lines (stderr). */
static char *run_chat(const char *blob, const char *opts, const char *lines, int trace) {
    char path[128], cmd[512], *out;
    snprintf(path, sizeof path, "build/ttrained_%d_chat.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(lines, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "./recall chat %s --threads 1 %s %s < %s %s", blob, trace ? "--trace" : "", opts, path,
             trace ? "2>&1 >/dev/null" : "2>/dev/null");
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    unlink(path);
    return out;
}

/* The text after the last </think> of a `recall chat` on the given lines (the last reply). */
static char *chat_answer_opts(const char *blob, const char *opts, const char *lines) {
    char *out = run_chat(blob, opts, lines, 0);
    const char *t = out, *p;
    while ((p = strstr(t, "</think>"))) t = p + strlen("</think>");
    char *ans = strdup(t);
    cr_assert(ans);
    for (size_t n = strlen(ans); n && (ans[n - 1] == '\n' || ans[n - 1] == ' '); n--) ans[n - 1] = 0;
    free(out);
    return ans;
}
static char *chat_answer(const char *blob, const char *lines) { return chat_answer_opts(blob, "", lines); }

/* Facts typed as a person would (none from a bench file), asked with the fact in view and once
 * evicted: the value comes back exactly. The name list, "flight number", "password" and every
 * time of day are held out of training; the last three are told and asked in phrasings the
 * training grammar never generates (typed.sh's second set). The four facts of the templated
 * world's failure (Halvorsen, LH 2214, 14:30, sunflower) are all answered in view. */
#define CASUAL6 "How is your week going so far?\nI finally finished painting the kitchen last night.\n" \
                "The weather has been strange lately, warm one day and cold the next.\n" \
                "We are thinking about getting a dog, maybe a small one.\n" \
                "My brother is visiting next month and I need to clean the guest room.\n" \
                "I tried a new recipe for lentil soup and it turned out great.\n"
Test(trained, typed_facts_are_answered, .timeout = 600) {
    static const struct { const char *lines, *want; } typed[] = {
        {"My dentist's name is Halvorsen.\nWhat's my dentist's name?\n", " Halvorsen"},
        {"Important to note: the flight number is LH 2214.\n"
         "Quick \xe2\x80\x94 what was the flight number I mentioned? Just the value.\n", " LH 2214"},
        {"Just so you know, the meeting time is 14:30.\nWhat was the meeting time again?\n", " 14:30"},
        {"Please remember that the password is sunflower.\nWhat is my password?\n", " sunflower"},
        {"Before I forget, the pickup time is 6 pm.\nAny idea what the pickup time is?\n", " 6 pm"},
        /* evicted: six casual lines push the fact out of the 96-token window; recall brings it back */
        {"My dentist's name is Halvorsen.\n" CASUAL6 "What's my dentist's name?\n", " Halvorsen"},
        {"Just so you know, the meeting time is 14:30.\n" CASUAL6 "What was the meeting time again?\n", " 14:30"},
        {"My cat's name is Biscuit.\n" CASUAL6 "What's my cat's name?\n", " Biscuit"},
        {"Just so you know, the gate code is 4471.\n" CASUAL6 "What's the gate code?\n", " 4471"},
        {"Oh, one more thing: the plumber's name is Nakamura.\n" CASUAL6 "Remember the plumber's name? What was it?\n",
         " Nakamura"},
        {"Don't let me forget: the insurance policy number is 5590 2281.\n" CASUAL6
         "I forgot the insurance policy number. What was it?\n", " 5590 2281"},
    };
    const char *blob = fixture_trained_blob("f32");
    cr_assert(blob);
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        char *a = chat_answer(blob, typed[i].lines);
        cr_expect_str_eq(a, typed[i].want, "%s", typed[i].lines);
        free(a);
    }
}

/* A fact at the window's edge: one casual line between the fact and its question, so the fact's
 * first tokens leave the 96-token window while the reply is written. The reference loop does not
 * answer ("I don't know." for the locker labels: the gate never fires, nothing was archived when
 * the reply began; a garbled copy for the others); in the recommended
 * setting (WHOLE, docs/LOOP.md) the window starts where the fact's exchange starts and the value is
 * copied. */
Test(trained, a_fact_at_the_window_edge_is_answered_in_the_recommended_setting, .timeout = 600) {
    static const struct { const char *lines, *want; } edge[] = {
        {"Important to note: the locker label is 4821.\nI have been thinking about the traffic a lot.\n"
         "Quick \xe2\x80\x94 what was the locker label I mentioned? Just the value.\n", " 4821"},
        {"Important to note: the locker label is 9045.\nI have been thinking about the traffic a lot.\n"
         "Quick \xe2\x80\x94 what was the locker label I mentioned? Just the value.\n", " 9045"},
        {"By the way, the wifi password is blue-otter-42.\nHow is your week going so far?\n"
         "Can you remind me of my wifi password?\n", " blue-otter-42"},
        {"Don't let me forget: the school trip date is 12 June.\nHow is your week going so far?\n"
         "Which school trip date did I give you earlier?\n", " 12 June"},
    };
    const char *blob = fixture_trained_blob("f32");
    cr_assert(blob);
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        char *a = chat_answer(blob, edge[i].lines), *w = chat_answer_opts(blob, WHOLE, edge[i].lines);
        cr_expect_str_neq(a, edge[i].want, "%s", edge[i].lines);
        cr_expect_str_eq(w, edge[i].want, "%s", edge[i].lines);
        free(a);
        free(w);
    }
}

/* `make demo`'s chat (demo_bench.json, problem 0: three facts a person tells, eleven lines of
 * small talk, then the three questions), replayed as make demo does (the recommended setting
 * WHOLE, the gate file's threshold): RC_bge answers all three with the value, SP none (each reply
 * ends "</think>I don't know."). The reference's faithful loop answers the dentist's name with
 * small talk on this world (bench/NOTES.md, "One dialogue, step by step, on the trained and
 * templated worlds"). */
/* make demo's chat replayed on `blob` in the recommended setting: each `want` in the RC_bge run's
 * output; in SP's, none of them and `sp_idk` replies "I don't know." (its three questions, and on
 * the wide world a small-talk question too). */
static void expect_demo(const char *blob, const char *bench, const char *const *want, size_t nwant, int sp_idk) {
    cr_assert(blob);
    char cmd[1024], *rc_out, *sp_out;
    snprintf(cmd, sizeof cmd, "./recall replay %s --bench %s --problem 0 " WHOLE " --trace build/ttrained_%d_demo.json 2>&1",
             blob, bench, (int)getpid());
    cr_assert_eq(fixture_sh(cmd, &rc_out), 0, "%s", rc_out);
    snprintf(cmd, sizeof cmd, "./recall replay %s --bench %s --problem 0 --arm SP " WHOLE
             " --trace build/ttrained_%d_demo.json 2>&1", blob, bench, (int)getpid());
    cr_assert_eq(fixture_sh(cmd, &sp_out), 0, "%s", sp_out);
    for (size_t i = 0; i < nwant; i++) {
        cr_expect(strstr(rc_out, want[i]), "RC_bge: %s", rc_out);
        cr_expect(!strstr(sp_out, want[i]), "SP: %s", sp_out);
    }
    int idk = 0;
    for (const char *p = sp_out; (p = strstr(p, "</think>I don't know.\"")); p++) idk++;
    cr_expect_eq(idk, sp_idk, "SP: %s", sp_out);
    free(rc_out);
    free(sp_out);
    char p[128];
    snprintf(p, sizeof p, "build/ttrained_%d_demo.json", (int)getpid());
    unlink(p);
}

Test(trained, demo_chat_is_answered_with_recall_and_not_without, .timeout = 600) {
    static const char *const want[] = {"</think> Halvorsen\"", "</think> 14:30\"", "</think> LH 2214\""};
    expect_demo(fixture_trained_blob("f32"), B "/demo_bench.json", want, 3, 3);
}

/* ---- the wide world (tests/golden/wide: the trained world's decoder continued on facts, questions
 * and small talk worded as people type them, train.py --wording wide; docs/WORLD.md "Wide wording")
 * What `make demo` and the page run. The tests pin its measured answers: the benchmark's held-out
 * problems, facts told and asked in a person's own words (tools/train_world/dev_typed.json, the set
 * the recipe was tuned on: the blind set's figures are in docs/WORLD.md, never pinned here), small
 * talk that asks questions without firing the gate, and the demo. */
#define WW FIXTURE_WIDE
/* held-out problems 0-3 of eval_bench.json (12 questions), faithful and in the recommended
 * setting (WHOLE): exact answers per arm */
#define WIDE_FULL_EXACT 11
#define WIDE_SP_EXACT 0
#define WIDE_RC_EXACT 11
#define WIDE_WHOLE_RC_EXACT 8

Test(wide, manifest_matches_the_committed_files) { check_manifest(WW, 20); }

Test(wide, eval_answers_held_out_facts, .timeout = 600) {
    const char *blob = fixture_wide_blob("f32");
    json_doc *doc = eval_world(blob, WW "/eval_bench.json", "0-3", "FULL,SP,RC_bge", "faithful");
    cr_expect_eq(arm_exact(doc, 0, "FULL"), WIDE_FULL_EXACT);
    cr_expect_eq(arm_exact(doc, 1, "SP"), WIDE_SP_EXACT);
    cr_expect_eq(arm_exact(doc, 2, "RC_bge"), WIDE_RC_EXACT);
    json_free(doc);
    doc = eval_world(blob, WW "/eval_bench.json", "0-3", "RC_bge", WHOLE_MODE);
    cr_expect_eq(arm_exact(doc, 0, "RC_bge"), WIDE_WHOLE_RC_EXACT);
    json_free(doc);
}

/* Facts told and asked back in a person's own words (dev_typed.json's chats, the recommended
 * setting): in view, and evicted behind three small-talk lines (recall brings them back). The value
 * after the last </think>, exactly as measured. */
#define DEV_TALK3 "How is your week going so far?\nI finally finished painting the kitchen last night.\n" \
                  "Any tips for sleeping better?\n"
Test(wide, facts_in_a_person_s_own_words_are_answered, .timeout = 600) {
    static const struct { const char *lines, *want; } typed[] = {
        {"My flight lands at 7:40 tomorrow.\n" DEV_TALK3 "When does my flight land?\n", " 7:40"},
        {"The code for the side gate is 4471.\n" "What was the code for the side gate?\n", " 4471"},
        {"The team meeting got moved to 3:30.\n" "What time is the team meeting now?\n", " 3:30"},
        {"The team meeting got moved to 3:30.\n" DEV_TALK3 "What time is the team meeting now?\n", " 3:30"},
        {"just so you know our anniversary is on June 12\n" "when's our anniversary?\n", " June 12"},
        {"just so you know our anniversary is on June 12\n" DEV_TALK3 "when's our anniversary?\n", " June 12"},
        {"The new office is on Harwick Road, near the station.\n" DEV_TALK3 "Where is the new office?\n",
         " Harwick Road"},
        {"Ugh, what a day. Anyway, my hotel room is 312.\n" "which hotel room was it?\n", " 312"},
        {"Ugh, what a day. Anyway, my hotel room is 312.\n" DEV_TALK3 "which hotel room was it?\n", " 312"},
        {"The password for the guest wifi is marigold.\n"
         "I can't remember the password for the guest wifi, can you remind me?\n", " marigold"},
        {"The password for the guest wifi is marigold.\n" DEV_TALK3
         "I can't remember the password for the guest wifi, can you remind me?\n", " marigold"},
        {"Dinner reservation is booked for 6:15 pm on Friday.\n" "What time is the dinner reservation booked for?\n", " 6:15 pm"},
        {"Dinner reservation is booked for 6:15 pm on Friday.\n" DEV_TALK3
         "What time is the dinner reservation booked for?\n", " 6:15 pm"},
        {"The boat we rented is called blue heron.\n" "what's the name of the boat we rented?\n", " blue heron"},
        {"The boat we rented is called blue heron.\n" DEV_TALK3 "what's the name of the boat we rented?\n", " blue heron"},
        /* the question right after its fact, in the fact's own verb (tools/train_world/world_plain.py:
         * the wide world before this one answered these with small talk), and a noun never told */
        {"My train leaves at 8:05 tomorrow morning.\n" "When does my train leave?\n", " 8:05"},
        {"My train leaves at 8:05 tomorrow morning.\n" DEV_TALK3 "When does my train leave?\n", " 8:05"},
        {"My flight lands at 7:40 tomorrow.\n" "When does my flight land?\n", " 7:40"},
        {"My train leaves at 8:05.\n" "When does my bus leave?\n", "I don't know."},
    };
    const char *blob = fixture_wide_blob("f32");
    cr_assert(blob);
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        char *a = chat_answer_opts(blob, WHOLE, typed[i].lines);
        cr_expect_str_eq(a, typed[i].want, "%s", typed[i].lines);
        free(a);
    }
}

/* The gate's checks and fires in each turn of a `recall chat --trace` on the given lines ("turn
 * done" lines): returns how many turns there were, checks[i] and fires[i] those of turn i. */
static int chat_fires(const char *blob, const char *opts, const char *lines, int *checks, int *fires, int max) {
    char *out = run_chat(blob, opts, lines, 1);
    int n = 0;
    for (const char *p = out; (p = strstr(p, "[trace] turn done: ")) && n < max; p++) {
        const char *c = strstr(p, " gate check");
        cr_assert(c && sscanf(c + strlen(" gate checks, "), "%d", &fires[n]) == 1, "%s", p);
        while (c > p && c[-1] >= '0' && c[-1] <= '9') c--;
        checks[n++] = atoi(c);
    }
    free(out);
    return n;
}

/* Small talk that asks things ("Any tips for ...?", "What should I cook tonight?") after a fact has
 * left the window: the gate checks these turns and does not fire; the question that follows them
 * fires and is answered. */
Test(wide, small_talk_questions_do_not_fire_the_gate, .timeout = 600) {
    static const char lines[] = "My flight lands at 7:40 tomorrow.\nAny tips for sleeping better?\n"
                                "What should I cook tonight?\nDo you have any tips for learning guitar?\n"
                                "How was your weekend?\nWhen does my flight land?\n";
    const char *blob = fixture_wide_blob("f32");
    cr_assert(blob);
    int checks[16], fires[16];
    const int n = chat_fires(blob, WHOLE, lines, checks, fires, 16);
    cr_assert_eq(n, 6, "turns");
    for (int i = 1; i < n - 1; i++) cr_expect_eq(fires[i], 0, "small-talk turn %d fired %d times", i, fires[i]);
    /* the last two small-talk turns come once the fact has been evicted: the gate checks them */
    cr_expect_gt(checks[3], 0, "turn 3: no gate check");
    cr_expect_gt(checks[4], 0, "turn 4: no gate check");
    cr_expect_gt(fires[n - 1], 0, "the question fires");
    char *a = chat_answer_opts(blob, WHOLE, lines);
    cr_expect_str_eq(a, " 7:40");
    free(a);
}

/* Small talk sent right after a fact, the fact in view: the reply is small talk (no "<think>" look-up,
 * neither the value nor "I don't know."). The wide world before this one answered the first with
 * the fact ("...the meeting time is 14:30.</think> 14:30") and the second with "I don't know.". */
Test(wide, small_talk_right_after_a_fact_is_small_talk, .timeout = 600) {
    static const struct { const char *lines, *value; } after[] = {
        {"Just so you know, my meeting time is 14:30.\nHow is your week going so far?\n", "14:30"},
        {"My dentist appointment is at 9:15.\nHow is your week going so far?\n", "9:15"},
        {"The parking spot is B12.\nDid you sleep well?\n", "B12"},
        {"My locker number is 118.\nHow was your weekend?\n", "118"},
    };
    const char *blob = fixture_wide_blob("f32");
    cr_assert(blob);
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) {
        char *out = run_chat(blob, WHOLE, after[i].lines, 0);
        const char *last = out, *p;
        for (p = out; *p; p++)
            if (p[0] == '\n' && p[1]) last = p + 1;
        cr_expect(*last && !strstr(last, "<think>") && !strstr(last, after[i].value) && !strstr(last, "I don't know"),
                  "%s-> %s", after[i].lines, last);
        free(out);
    }
}

/* The single-quoted strings of page.js's EXAMPLES line "  KEY: [...]" (web/page.js keeps each list on
 * one line): returns how many, at most max, each malloc'd into out. */
static int page_examples(const char *js, const char *key, char **out, int max) {
    char head[32];
    snprintf(head, sizeof head, "\n  %s: [", key);
    const char *p = strstr(js, head);
    cr_assert(p, "web/page.js: no EXAMPLES line '%s: ['", key);
    const char *end = strchr(p + 1, '\n');
    int n = 0;
    for (p += strlen(head); n < max && (p = memchr(p, '\'', (size_t)(end - p))); n++) {
        const char *q = memchr(p + 1, '\'', (size_t)(end - p - 1));
        cr_assert(q, "web/page.js: an unclosed string in '%s'", key);
        out[n] = strndup(p + 1, (size_t)(q - p - 1));
        cr_assert(out[n] && !strchr(out[n], '\\'), "web/page.js: '%s' holds an escape", key);
        p = q + 1;
    }
    return n;
}

/* What the page offers to try (web/page.js EXAMPLES): its facts, its small talk, then each of its
 * questions in turn, in the page's setting, answer the values the page promises. */
Test(wide, the_page_s_examples_are_answered, .timeout = 600) {
    size_t len;
    char *js = fixture_read("web/page.js", &len);
    char *tell[4], *chat[4], *ask[4], *want[4];
    const int nt = page_examples(js, "tell", tell, 4), nc = page_examples(js, "chat", chat, 4);
    const int na = page_examples(js, "ask", ask, 4), nw = page_examples(js, "answers", want, 4);
    free(js);
    cr_assert(nt >= 2 && na == nt && nw == na, "web/page.js: %d facts, %d questions, %d answers", nt, na, nw);
    const char *blob = fixture_wide_blob("f32");
    cr_assert(blob);
    char lines[2048] = "";
    for (int i = 0; i < nt; i++) strcat(strcat(lines, tell[i]), "\n");
    for (int i = 0; i < nc; i++) strcat(strcat(lines, chat[i]), "\n");
    for (int i = 0; i < na; i++) {
        strcat(strcat(lines, ask[i]), "\n");
        char *a = chat_answer_opts(blob, WHOLE, lines);
        cr_expect_str_eq(a + (a[0] == ' '), want[i], "the page's question '%s'", ask[i]);
        free(a);
    }
    for (int i = 0; i < nt; i++) free(tell[i]), free(ask[i]), free(want[i]);
    for (int i = 0; i < nc; i++) free(chat[i]);
}

Test(wide, demo_chat_is_answered_with_recall_and_not_without, .timeout = 600) {
    static const char *const want[] = {"</think> Halvorsen\"", "</think> 14:30\"", "</think> LH 2214\""};
    /* SP answers its three questions "I don't know." and "How is your week going so far?" as small
     * talk (the wide world before this one took it for a question there too) */
    expect_demo(fixture_wide_blob("f32"), WW "/demo_bench.json", want, 3, 3);
}
