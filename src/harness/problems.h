/* problems.h - the reference multi-fact recall benchmark (docs/LOOP.md, "The benchmark").
 *
 * Problem i is drawn exactly as the reference does with CPython's random.Random(i):
 *   facts = sample(range(12), 3); fillers = sample(CASUAL, 12); order = sample(range(3), 3).
 * CPython's generator is MT19937 seeded by init_by_array([i]); sample() on a population this
 * small uses the pool algorithm with _randbelow = rejection sampling on getrandbits(bit_length).
 * Steps: 3 fact turns, 9 filler turns (both sides forced), 2 probe turns and 3 question turns
 * (generated). The bench file is tests/golden/recall_bench.json.
 */
#ifndef RECALL_PROBLEMS_H
#define RECALL_PROBLEMS_H

#include "status.h"

#include <stdint.h>

typedef enum { RC_STEP_FACT, RC_STEP_FILLER, RC_STEP_PROBE, RC_STEP_Q } rc_step_kind;

typedef struct {
    rc_step_kind kind;
    char *user;       /* user text */
    char *assistant;  /* forced assistant text (fact/filler), else NULL */
    char *kw, *val;   /* question turns: the fact asked for */
} rc_step;

typedef struct {
    rc_step steps[17];
    int n;
} rc_problem;

typedef struct rc_bench rc_bench;

recall_status rc_bench_load(const char *path, rc_bench **out, recall_err *err);
void rc_bench_free(rc_bench *b);
recall_status rc_bench_problem(const rc_bench *b, uint32_t seed, rc_problem *out, recall_err *err);
void rc_problem_free(rc_problem *p);
/* Keeps the steps before the (turns+1)-th generated (probe / q) step: the first `turns` turns. */
void rc_problem_keep_turns(rc_problem *p, int turns);
const char *rc_step_kind_name(rc_step_kind k);
/* The bench's parts, read-only, for builders of other chats in its shape (farfact.h): the three
 * templates, and fact i as [kw, val] / casual pair i as [user, assistant] (i in range). Borrowed:
 * valid until rc_bench_free. */
typedef struct {
    const char *fact_user, *fact_assistant, *question_user;
    int n_facts, n_casual;
} rc_bench_view;
void rc_bench_view_of(const rc_bench *b, rc_bench_view *out);
void rc_bench_fact(const rc_bench *b, int i, const char **kw, const char **val);
void rc_bench_casual(const rc_bench *b, int i, const char **user, const char **assistant);

/* CPython-compatible MT19937 (exposed for tests). */
typedef struct {
    uint32_t mt[624];
    int mti;
} rc_pyrandom;
void rc_pyrandom_seed(rc_pyrandom *r, uint32_t seed);
uint32_t rc_pyrandom_u32(rc_pyrandom *r);
uint32_t rc_pyrandom_below(rc_pyrandom *r, uint32_t n); /* random._randbelow(n), n >= 1 */
/* random.sample(range(n), k) into out[k] (both of CPython's methods; 0 <= k <= n <= RC_PYSAMPLE_MAX). */
#define RC_PYSAMPLE_MAX 256
void rc_pysample(rc_pyrandom *r, int n, int k, int *out);



/* ---- running a problem through the recall loop ------------------------------------------- */
#include "recall_loop.h"

#include "chat.h" /* rc_chat_segment: the reference chat template */

typedef struct {
    rc_step_kind kind;
    const char *user;  /* points into the problem */
    int feed_len;
    rc_turn turn;
} rc_problem_turn;

typedef struct {
    rc_problem_turn turns[8];
    int n_turns;
    int32_t *history;  /* final_history */
    int n_history;
} rc_problem_run;

typedef void (*rc_turn_fn)(void *ctx, int index, const rc_problem_turn *t);

/* Replays every step: forced turns extend the history, generated turns run rc_recall_reply on
 * history + the open user turn, then history = feed + reply. */
recall_status rc_run_problem(rc_recall *r, const rc_problem *p, rc_event_fn on_event, rc_turn_fn on_turn, void *ctx,
                             rc_problem_run *out, recall_err *err);
void rc_problem_run_free(rc_problem_run *run);
#endif
