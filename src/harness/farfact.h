/* farfact.h - far-back recall cases (docs/LONG_CONTEXT.md, "Far-back recall"): a chat in the
 * benchmark's shape (docs/LOOP.md, "The benchmark") in which one fact is stated DIST tokens before
 * the question about it, with other facts and casual exchanges between. `recall longctx --task
 * farfact` (src/cli/cli_farfact.c) forces the whole chat through the recall loop as one feed, as
 * `eval` forces a problem's history, and answers the question on each arm; bench/bench_farback.c
 * measures what a fire costs at each distance.
 *
 * A case (bench B, distance D, seed S, case index i, fact share F) is built as:
 *   rng       splitmix64 seeded from XXH64 of (S, D, i) (rc_ff_case_seed): a case does not depend
 *             on which other cases or distances were asked for, and the target and lead (drawn
 *             first) do not depend on F.
 *   target    fact t of B, uniform: its keyword is asked, its value is the answer.
 *   filler    one exchange: with probability F a fact, fact_user with the keyword of one of B's
 *             other facts and the value of one of them (each uniform, independently: any other
 *             keyword with any other value; never the target's keyword or value, compared as
 *             strings), answered fact_assistant; otherwise one of B's casual pairs, uniform,
 *             with replacement. F defaults to RC_FF_FACT_SHARE, the benchmark problems' own mix
 *             (3 facts to 9 casual exchanges); F = 0 leaves casual talk only between fact and
 *             question (distance without distractor facts).
 *   chat      `lead` filler exchanges (uniform in 0..RC_FF_MAX_LEAD), the target's fact exchange
 *             (fact_user, fact_assistant), filler exchanges while the distance is below D, then
 *             the question segment: question_user with the target's keyword, open (the loop
 *             writes the reply).
 *   encoding  exchange by exchange with rc_chat_segment, the EOS string before every exchange but
 *             the first, exactly as rc_run_problem encodes a problem's history; no BOS (the loop
 *             primes it).
 *   distance  the tokens from just after the value's last token to the question segment's first
 *             token, q_first - (val_last + 1): at least D, and less than D plus one exchange.
 * The value's tokens are found by byte offsets in the fact exchange (every token decoded on its
 * own, special strings kept); a bench whose fact exchange does not decode token by token to its
 * bytes (a character split across tokens) is refused, as are templates without {kw} (all three)
 * or {val} (fact_user), and a bench whose facts leave no other keyword or value.
 *
 * Scoring one turn (rc_ff_score) on the recall loop's geometry (window W, block B, buf_min):
 *   a fire at rebuild c0 sees the archive of feed tokens [0, nd), nd = max(0, c0 - W): sealed
 *   block j holds [j*B, (j+1)*B), and the pending buffer [floor(nd/B)*B, nd) is a candidate when it
 *   holds at least buf_min ids. A fire whose candidate count is not that is an error: the turn did
 *   not run the loop the geometry describes.
 *   fired      some fire at a check of the question or the reply, c0 > q_first (the gate read the
 *              q of token c0 - 1, a question or reply token);
 *   injected   such a fire injected its candidates;
 *   retrieved  such an injected fire's chosen candidates hold every token of the value;
 *   rank       at the first such fire: 1 + the number of candidates scored above the one holding
 *              the value's first token (0: no such fire, or that token not yet archived);
 *   early      fires at checks of the forced chat, c0 <= q_first;
 *   q_gates, q_gate_max  the gate checks at c0 > q_first and their largest score (-inf: none),
 *              to tell a gate that stayed below the threshold from one that never ran;
 *   answer     rc_lctx_answer: the reply text after its last "</think>", from its first non-blank
 *              character to the next newline, trailing blanks trimmed, equals the value.
 */
#ifndef RECALL_FARFACT_H
#define RECALL_FARFACT_H

#include "problems.h"
#include "recall_loop.h"
#include "status.h"

#include <stdint.h>

struct rc_bpe;

#define RC_FF_MAX_LEAD 3
#define RC_FF_FACT_SHARE 0.25

typedef struct {
    int dist;          /* D, tokens */
    uint64_t seed;     /* S */
    int index;         /* i */
    double fact_share; /* F in [0, 1] */
} rc_ff_spec;

typedef struct {
    rc_ff_spec spec;         /* what was asked */
    int target;              /* the bench's fact asked about */
    char *kw, *val, *question;
    int32_t *ids;            /* the feed: the chat, then the question segment */
    int n_ids;
    uint64_t ids_xxh64;      /* rc_xxh64_ids(ids) */
    int lead;                /* filler exchanges before the target's */
    int n_exchanges;         /* forced exchanges, the target's included */
    int n_fill_facts, n_fill_casual; /* filler exchanges of each kind, lead included */
    int fact_first, fact_last; /* the target's fact exchange in the feed, inclusive */
    int val_first, val_last;   /* the value's tokens, inclusive */
    int q_first;             /* the question segment's first token */
    int distance;            /* q_first - (val_last + 1) */
} rc_ff_case;

uint64_t rc_ff_case_seed(uint64_t seed, int dist, int index);

/* Builds the case of spec from bench b; eos_id is the blob's tok.eos. RECALL_E_ARG for a negative
 * distance or a share outside [0, 1]. */
recall_status rc_ff_build(const struct rc_bpe *bpe, int eos_id, const rc_bench *b, const rc_ff_spec *spec,
                          rc_ff_case *out, recall_err *err);
void rc_ff_case_free(rc_ff_case *c);

typedef struct {
    int fired, injected, retrieved, rank, early;
    int q_gates;
    float q_gate_max;
    int first_c0;  /* c0 of the first question fire; -1: none */
    int ncand;     /* its candidates (archived blocks, plus the buffer); 0: none */
    char answer[64];
    int exact;
} rc_ff_result;

/* Scores turn t (the reply of c's feed on the loop opened with o; reply_text its decoded reply,
 * special tokens skipped). RECALL_E_FORMAT when a fire's candidates are not the geometry's. */
recall_status rc_ff_score(const rc_ff_case *c, const rc_turn *t, const char *reply_text, const rc_recall_opts *o,
                          rc_ff_result *out, recall_err *err);

#endif
