/* topk.h - torch.topk(v, k) on CPU, ties included (docs/NUMERICS.md, "Ties").
 *
 * Input v[n] (fp32), 1 <= k <= n. Output idx[k] (and val[k] when asked): the k greatest values in
 * descending order, with exactly the indices torch.topk returns for equal values. torch's CPU
 * kernel (ATen TopKImpl.h, largest=True, sorted=True) fills (value, index) pairs in index order
 * and, with comp(x, y) = (isnan(x) && !isnan(y)) || x > y on the values alone (NaN is greatest):
 *   k*64 >  n: std::nth_element(p, p + k - 1, p + n), then std::sort(p, p + k - 1)
 *   k*64 <= n: std::partial_sort(p, p + k, p + n)
 * rc_topk replays GNU libstdc++'s implementations of those calls move for move, because which of
 * two equal values ends first depends on every swap and heap hole the algorithms make.
 * No allocation: the caller passes scratch of rc_topk_scratch(n, k) pairs, which is below 64*k
 * (the partial_sort path needs only k pairs: it streams v past a k-element heap).
 */
#ifndef RECALL_TOPK_H
#define RECALL_TOPK_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    float v;
    int32_t i;
} rc_topk_pair;

/* Pairs of scratch rc_topk needs for (n, k): n on the nth_element path (n < 64k), else k. */
size_t rc_topk_scratch(int n, int k);

/* 1 <= k <= n (otherwise nothing is written). val may be NULL. */
void rc_topk(const float *v, int n, int k, rc_topk_pair *scratch, int32_t *idx, float *val);

#endif
