/* kv_pages.h - page-sparse decode attention (REQ-CTX-006, `--kv-pages PAGE:BUDGET`): an opt-in,
 * named approximation. The decoder (qwen2.c) keeps, per page of PAGE consecutive positions, per
 * layer and per KV head, the elementwise minimum and maximum of the cached (post-RoPE) keys, as
 * attention reads them (under `--kv f16` the f16-rounded values, widened: so the bound stays sound
 * for the keys actually scored); a decode step (a forward call of exactly one row) then attends, per KV head, to
 *   - the sink: page 0;
 *   - the recent window: the page holding the current position and the page before it (so at
 *     least PAGE and at most 2*PAGE of the newest positions, the current one included);
 *   - the best floor(BUDGET / PAGE) of the other pages (1 .. last-2), ranked by an upper bound of
 *     q.k over the page's keys (rc_kvp_bound), the largest bound over the KV head's query heads
 *     (GQA: the heads of a group share one selection, since they share the K/V rows read);
 *     ties: the lower page first. With `--kv-pages-random SEED` the same number of pages is
 *     drawn uniformly at random among those pages instead (the control), from a stream seeded by
 *     (SEED, layer, KV head, position): deterministic, independent of history and threads.
 * The selected pages' K and V rows are gathered in ascending position order and attended with
 * the dense kernels (scores, softmax, P.V in the canonical order), so when the budget covers
 * every page the step gives bitwise the dense logits. Prefill rows (calls of > 1 row) always
 * attend densely; their keys still enter the page bounds.
 *
 * Memory: min and max, [pages][layers][kv_heads][D] fp32 each (page-major, so growing the cache
 * keeps them in place): 2 / PAGE of the K cache; plus one gather buffer of (BUDGET/PAGE + 3)
 * pages of K and V per KV head. */
#ifndef RECALL_KV_PAGES_H
#define RECALL_KV_PAGES_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int page;       /* positions per page, >= 1; 0 = dense attention (the feature off) */
    int budget;     /* positions of ranked pages a step may add (rounded down to whole pages) */
    int random;     /* 1: the control, pages drawn at random with `seed` instead of ranked */
    uint64_t seed;
} rc_kv_pages_opts;

/* "PAGE:BUDGET" (decimal, PAGE 1 .. 65536, BUDGET 0 .. 2^30) into o->page / o->budget; the other
 * fields are left alone. Errors name the text. */
recall_status rc_kvp_parse(const char *text, rc_kv_pages_opts *o, recall_err *err);

/* Folds key row k[D] into a page's elementwise bounds: first = 1 starts the page (mn = mx = k). */
void rc_kvp_fold(float *mn, float *mx, const float *k, size_t D, int first);

/* An upper bound, never below the fp32 dot product fl(q.k) the attention kernels compute (any
 * summation order, with or without FMA), for every key k with mn <= k <= mx elementwise. */
double rc_kvp_bound(const float *q, const float *mn, const float *mx, size_t D);

/* One candidate page and its bound (selection scratch). */
typedef struct {
    double bound;
    int page;
} rc_kvp_rank;

/* The selection of one decode step for one KV head. Candidates are the pages 1 .. n_pages-3
 * (n_pages: the pages holding positions 0 .. pos); rank[0 .. n_pages) holds on entry
 * rank[p].bound for each candidate p (other entries are ignored) and is scratch afterwards.
 * Chooses floor(budget / page) candidates (all when fewer): the largest bounds, the lower page
 * on ties; or (o->random) uniformly at random from the stream of (seed, layer, kv_head, pos).
 * Marks them, the sink and the recent window in keep[0 .. n_pages) (1 = attend) and returns the
 * number of pages kept. */
int rc_kvp_select(const rc_kv_pages_opts *o, int n_pages, rc_kvp_rank *rank, int layer, int kv_head, int pos,
                  unsigned char *keep);

#endif
