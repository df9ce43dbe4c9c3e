/* test_cancel.c - cancelling a turn from the public API's event callback: recall_turn returns
 * RECALL_E_CANCELLED at the event that asked, with an empty reply, and the loop stays usable: the
 * next turn on the same handle gives exactly the reply of an untouched loop (worldA f32 blob). */
#include "fixture.h"
#include "recall.h"

#include <criterion/criterion.h>
#include <string.h>

typedef struct {
    recall_event_kind stop_kind;
    int stop_at; /* cancel at the stop_at-th event of stop_kind (1-based); 0 = never */
    int seen, tokens;
} stopper;

static int on_event(void *ctx, const recall_event *ev) {
    stopper *s = ctx;
    if (ev->kind == RECALL_EV_TOKEN) s->tokens++;
    if (ev->kind == s->stop_kind && ++s->seen == s->stop_at) return 1;
    return 0;
}

/* the first user message of a conversation, as recall_chat_segment builds it; `repeat` copies
 * of a sentence make it long enough (> window 512) for blocks to be evicted and the gate to run */
static size_t first_feed(recall_model *m, int repeat, int32_t **feed) {
    recall_err err = {0};
    const char *sentence = "The lighthouse keeper logged the tide at dawn and noted the colour of the sky. ";
    char *text = calloc((size_t)repeat * strlen(sentence) + 64, 1);
    for (int i = 0; i < repeat; i++) strcat(text, sentence);
    strcat(text, "What colour was the sky?");
    size_t n = 0;
    cr_assert_eq(recall_chat_segment(m, 0, text, NULL, feed, &n, &err), RECALL_OK, "%s", err.msg);
    free(text);
    return n;
}

static void turn_ids(recall_loop *l, const int32_t *feed, size_t n, stopper *st, recall_status want,
                     int32_t **ids, size_t *n_ids) {
    recall_err err = {0};
    recall_reply r;
    recall_status s = recall_turn(l, feed, n, on_event, st, &r, &err);
    cr_assert_eq(s, want, "recall_turn: %s (%s)", recall_strerror(s), err.msg);
    if (want == RECALL_E_CANCELLED) {
        cr_assert_eq(r.n_ids, 0u);
        cr_assert_null(r.ids);
        cr_assert(strstr(err.msg, "cancelled"), "%s", err.msg);
    }
    *n_ids = r.n_ids;
    *ids = NULL;
    if (r.n_ids) {
        *ids = malloc(r.n_ids * sizeof **ids);
        memcpy(*ids, r.ids, r.n_ids * sizeof **ids);
    }
    recall_reply_free(l, &r);
}

static void cancel_then_rerun(recall_event_kind kind, int at, int repeat) {
    recall_err err = {0};
    recall_model *m = NULL;
    cr_assert_eq(recall_open(fixture_worldA_blob("f32"), NULL, &m, &err), RECALL_OK, "%s", err.msg);
    int32_t *feed = NULL;
    size_t n = first_feed(m, repeat, &feed);
    recall_loop *clean = NULL, *l = NULL;
    cr_assert_eq(recall_loop_open(m, NULL, &clean, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(recall_loop_open(m, NULL, &l, &err), RECALL_OK, "%s", err.msg);

    stopper none = {RECALL_EV_TOKEN, 0, 0, 0}, stop = {kind, at, 0, 0}, again = {RECALL_EV_TOKEN, 0, 0, 0};
    int32_t *want, *got, *dummy;
    size_t n_want, n_got, n_dummy;
    turn_ids(clean, feed, n, &none, RECALL_OK, &want, &n_want);
    cr_assert_gt(n_want, 8u, "the reply is long enough to cancel inside it");
    turn_ids(l, feed, n, &stop, RECALL_E_CANCELLED, &dummy, &n_dummy);
    cr_assert_eq(stop.seen, at, "stopped at the asked event");
    if (kind == RECALL_EV_TOKEN) cr_assert_eq(stop.tokens, at, "no token streamed after the cancel");
    turn_ids(l, feed, n, &again, RECALL_OK, &got, &n_got);
    cr_assert_eq(n_got, n_want);
    cr_assert_eq(memcmp(got, want, n_want * sizeof *want), 0, "reply after a cancelled turn differs");
    free(want);
    free(got);
    recall_free(m, feed);
    recall_loop_close(clean);
    recall_loop_close(l);
    recall_close(m);
}

Test(api_cancel, at_the_fifth_token) { cancel_then_rerun(RECALL_EV_TOKEN, 5, 1); }
Test(api_cancel, at_the_first_rebuild) { cancel_then_rerun(RECALL_EV_REBUILD, 1, 1); }
Test(api_cancel, at_the_second_gate) { cancel_then_rerun(RECALL_EV_GATE, 2, 36); }
