/* api_example.c - a user's program against the public API only: includes "recall.h", links
 * librecall.a (+ -lm -lpthread), runs the first generated turn of benchmark problem 0 on the worldA
 * blob and checks it against the loop golden.
 *
 *   api_example BLOB GOLDEN.json
 * BLOB: `recall convert` of tests/golden/worldA (fp32). GOLDEN: loop_A_seed0_faithful_fp32.json;
 * the feed is final_history[0 : turns[0].feed_len] (the conversation up to the first question),
 * the expected reply turns[0].reply. Checks: the reply ids equal the golden's, the streamed TOKEN
 * events equal the reply, a detokenize -> tokenize round trip of the first exchange's user text
 * gives its ids back, and the API's own errors (bad ids, over-long forward) are values.
 * Prints "N passed, M failed"; exit status 0 only if nothing failed.
 *
 *   api_example BLOB GOLDEN.json --write-logits FILE N | --check-logits FILE N  [q8]
 * The cross-build check (a whole turn is too slow under qemu): instead of the turn, forward the
 * first N feed ids and write the last row's logits (raw fp32 bytes) to FILE, or compare them
 * bitwise with FILE as written by the native build (which passed the full turn check). With q8,
 * the forward runs the q8 numerics profile (recall_open_opts.numerics): its bits too are the same
 * on every build.
 *
 * Built only with -DRC_API_EXAMPLE_MAIN (`make api-example`); the tests/ glob of the suite compiles it to
 * nothing.
 */
#ifdef RC_API_EXAMPLE_MAIN
#include "check.h"
#include "recall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

/* The golden is trusted test data; a key's first occurrence after `from` is the one wanted
 * (turns[0] precedes final_history). Reads the integer array that follows "key": into *out. */
static long read_int_array(const char *from, const char *key, int32_t **out) {
    const char *p = strstr(from, key);
    if (!p || !(p = strchr(p, '['))) return -1;
    long n = 0, cap = 256;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    for (p++; v && *p && *p != ']';) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (n == cap) {
            int32_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) free(v);
            v = nv;
            if (!v) break;
        }
        v[n++] = (int32_t)x;
        p = end;
    }
    *out = v;
    return v ? n : -1;
}

typedef struct {
    int32_t ids[4096];
    int n_tokens, n_rebuilds, n_gates;
} stream;

static int on_event(void *ctx, const recall_event *ev) {
    stream *s = ctx;
    if (ev->kind == RECALL_EV_TOKEN && s->n_tokens < 4096) s->ids[s->n_tokens++] = ev->token;
    if (ev->kind == RECALL_EV_REBUILD) s->n_rebuilds++;
    if (ev->kind == RECALL_EV_GATE) s->n_gates++;
    return 0;
}

/* Forwards history[0:n] and writes (write = 1) or bitwise-compares the last logits with path. */
static void logits_file(recall_model *m, const int32_t *history, long n, int vocab, const char *path, int write) {
    recall_err err = {0};
    float *logits = malloc((size_t)vocab * sizeof *logits), *want = malloc((size_t)vocab * sizeof *want);
    recall_status s = logits && want ? recall_forward(m, history, (size_t)n, logits, (size_t)vocab, &err)
                                     : RECALL_E_NOMEM;
    CHECK(s == RECALL_OK, "recall_forward(%ld ids): %s (%s)", n, recall_strerror(s), err.msg);
    FILE *f = s ? NULL : fopen(path, write ? "wb" : "rb");
    CHECK(s || f, "%s: cannot open", path);
    if (f && write) CHECK(fwrite(logits, sizeof *logits, (size_t)vocab, f) == (size_t)vocab, "%s: short write", path);
    if (f && !write) {
        size_t got = fread(want, sizeof *want, (size_t)vocab, f);
        CHECK(got == (size_t)vocab, "%s: %zu of %d logits", path, got, vocab);
        long diff = -1;
        for (long i = 0; i < vocab && diff < 0 && got == (size_t)vocab; i++)
            if (memcmp(&logits[i], &want[i], sizeof *want) != 0) diff = i;
        CHECK(diff < 0, "logit %ld differs from the native build's: %.9g vs %.9g", diff, diff < 0 ? 0 : logits[diff],
              diff < 0 ? 0 : want[diff]);
    }
    if (f && fclose(f) != 0) CHECK(0, "%s: close failed", path);
    free(logits);
    free(want);
}

int main(int argc, char **argv) {
    const char *lfile = NULL;
    int lwrite = 0;
    long ln = 0;
    recall_open_opts oo;
    recall_open_opts_init(&oo);
    if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "q8"))) &&
        (!strcmp(argv[3], "--write-logits") || !strcmp(argv[3], "--check-logits"))) {
        lfile = argv[4];
        lwrite = !strcmp(argv[3], "--write-logits");
        ln = strtol(argv[5], NULL, 10);
        if (argc == 7) oo.numerics = RECALL_NUMERICS_Q8;
    } else if (argc != 3) {
        fprintf(stderr, "usage: %s BLOB GOLDEN.json [--write-logits|--check-logits FILE N [q8]]\n", argv[0]);
        return 2;
    }
    char *golden = slurp(argv[2]);
    if (!golden) {
        fprintf(stderr, "%s: cannot read\n", argv[2]);
        return 2;
    }
    const char *turns = strstr(golden, "\"turns\"");
    const char *fl = turns ? strstr(turns, "\"feed_len\":") : NULL;
    long feed_len = fl ? strtol(fl + strlen("\"feed_len\":"), NULL, 10) : -1;
    int32_t *want = NULL, *history = NULL;
    long n_want = turns ? read_int_array(turns, "\"reply\":", &want) : -1;
    long n_history = read_int_array(golden, "\"final_history\":", &history);
    if (feed_len <= 0 || n_want <= 0 || n_history < feed_len) {
        fprintf(stderr, "%s: no turns[0].feed_len / reply / final_history\n", argv[2]);
        return 2;
    }

    recall_err err = {0};
    recall_model *m = NULL;
    recall_status s = recall_open(argv[1], &oo, &m, &err);
    CHECK(s == RECALL_OK, "recall_open: %s (%s)", recall_strerror(s), err.msg);
    if (s) goto done;
    recall_model_info info;
    recall_model_get_info(m, &info);
    CHECK(info.vocab > 0 && info.eos_id >= 0, "model info: vocab %d eos %d", info.vocab, info.eos_id);

    /* The chat template helper reproduces the golden's first exchange ids: find where the first
     * exchange ends (the first EOS) and compare a round trip through detokenize + tokenize. */
    long first_end = 0;
    while (first_end < feed_len && history[first_end] != info.eos_id) first_end++;
    char *text = NULL;
    size_t text_len = 0;
    s = recall_detokenize(m, history, (size_t)first_end, 0, &text, &text_len, &err);
    CHECK(s == RECALL_OK, "recall_detokenize: %s", err.msg);
    if (!s) {
        int32_t *ids = NULL;
        size_t n = 0;
        s = recall_tokenize(m, text, text_len, 0, &ids, &n, &err);
        CHECK(s == RECALL_OK && n == (size_t)first_end && memcmp(ids, history, n * sizeof *ids) == 0,
              "tokenize(detokenize(first exchange)) gives %zu ids, want %ld", n, first_end);
        recall_free(m, ids);
    }
    recall_free(m, text);

    if (lfile) {
        CHECK(ln >= 1 && ln <= feed_len, "N = %ld outside 1..%ld", ln, feed_len);
        if (ln >= 1 && ln <= feed_len) logits_file(m, history, ln, info.vocab, lfile, lwrite);
    }
    recall_loop *loop = NULL;
    s = lfile ? RECALL_E_ARG : recall_loop_open(m, NULL, &loop, &err);
    CHECK(lfile || s == RECALL_OK, "recall_loop_open: %s", err.msg);
    if (!s) {
        stream st;
        memset(&st, 0, sizeof st);
        recall_reply reply;
        s = recall_turn(loop, history, (size_t)feed_len, on_event, &st, &reply, &err);
        CHECK(s == RECALL_OK, "recall_turn: %s", err.msg);
        if (!s) {
            CHECK(reply.n_ids == (size_t)n_want, "reply has %zu ids, golden %ld", reply.n_ids, n_want);
            long diff = -1;
            for (long i = 0; i < n_want && i < (long)reply.n_ids && diff < 0; i++)
                if (reply.ids[i] != want[i]) diff = i;
            CHECK(diff < 0, "reply differs from the golden at id %ld", diff);
            CHECK(st.n_tokens == (int)reply.n_ids && memcmp(st.ids, reply.ids, reply.n_ids * sizeof *st.ids) == 0,
                  "streamed %d tokens, reply %zu", st.n_tokens, reply.n_ids);
            CHECK(st.n_rebuilds == reply.n_rebuilds && st.n_rebuilds > 0 && st.n_gates == reply.n_gates,
                  "events: %d rebuilds / %d gates streamed, reply counts %d / %d", st.n_rebuilds, st.n_gates,
                  reply.n_rebuilds, reply.n_gates);
            recall_reply_free(loop, &reply);
        }
        /* A bad id is an error value naming the position, not a crash. */
        int32_t bad[2] = {0, info.vocab};
        recall_err e2 = {0};
        s = recall_turn(loop, bad, 2, NULL, NULL, &reply, &e2);
        CHECK(s == RECALL_E_ARG && strstr(e2.msg, "position 1"), "bad id: %s (%s)", recall_strerror(s), e2.msg);
        recall_loop_close(loop);
    }
    /* forward: a too-long input is a limit error with the numbers named. */
    {
        float *logits = malloc((size_t)info.vocab * sizeof *logits);
        recall_err e3 = {0};
        int32_t *ids = calloc((size_t)info.max_pos + 1, sizeof *ids);
        s = logits && ids ? recall_forward(m, ids, (size_t)info.max_pos + 1, logits, (size_t)info.vocab, &e3)
                          : RECALL_E_NOMEM;
        CHECK(s == RECALL_E_LIMIT && strstr(e3.msg, "exceed"), "long forward: %s (%s)", recall_strerror(s), e3.msg);
        free(ids);
        free(logits);
    }
    recall_close(m);
done:
    free(want);
    free(history);
    free(golden);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#else
/* Compiled into the Criterion binary by the tests/ glob: nothing to contribute there. */
typedef int rc_api_example_is_a_standalone_program;
#endif
