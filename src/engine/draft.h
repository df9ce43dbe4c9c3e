/* draft.h - prompt-lookup drafting for exact speculative decoding (no second model).
 *
 * Input: the token history hist[0..n) (the conversation so far, the newest greedy token last).
 * Lookup: for g = RC_DRAFT_NGRAM down to 1, the suffix hist[n-g..n) is searched for its most
 * recent earlier occurrence hist[j..j+g) (j + g < n); the first g that occurs proposes k
 * tokens continuing as they did there: out[i] = hist[j+g+i], which past the history's end is
 * out[j+g+i-n] (the repeat goes on with period n-g-j, so a loop drafts its whole length).
 * No occurrence: no draft. The proposals are only guesses: the caller verifies each one
 * against the model's own greedy choice (recall.c), so they change speed, never results.
 *
 * Length: rc_drafter adapts k to the acceptance: it doubles after a fully accepted draft (up
 * to the user's maximum) and becomes accepted + 1 after one at least half accepted. A draft
 * less than half accepted is a miss: the length becomes the smaller of accepted + 1 and half
 * of it (at least 1), and drafting waits 1, 3, 7, ... greedy steps (doubling per consecutive
 * miss, at most 63), so histories that do not repeat (random ids) pay for few wasted rows.
 * (A verify row is not free: at real shape, 2 rows cost 1.6x one row and 9 rows 4.1x,
 * bench_draft --case rows, so a draft pays only when most of it is accepted.)
 */
#ifndef RECALL_DRAFT_H
#define RECALL_DRAFT_H

#include <stdint.h>

#define RC_DRAFT_NGRAM 3    /* longest suffix n-gram looked up */
#define RC_DRAFT_MAX 32     /* the largest --draft */
#define RC_DRAFT_SPAN 65536 /* history positions searched back from the end */

/* k proposals into out[0..k); returns k, or 0 when the history has no earlier occurrence. */
int rc_draft_lookup(const int32_t *hist, int n, int k, int32_t *out);

typedef struct {
    int max;   /* the user's --draft (0 = off) */
    int len;   /* current draft length, 1..max */
    int miss;  /* consecutive drafts with nothing accepted */
    int wait;  /* greedy steps left before the next draft */
} rc_drafter;

void rc_drafter_init(rc_drafter *d, int max);
/* The draft length to try now (0: do not draft at this step; a waiting step is counted). */
int rc_drafter_len(rc_drafter *d);
/* After verifying a draft of k tokens of which `accepted` (leading ones) matched. */
void rc_drafter_update(rc_drafter *d, int k, int accepted);

#endif
