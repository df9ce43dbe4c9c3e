/* kv_pages.c - page-sparse decode attention: the per-page key bounds, the q.k upper bound of a
 * page and the page selection of one decode step (the rules in kv_pages.h; qwen2.c keeps the
 * bounds, gathers the chosen rows and runs the dense kernels on them). */
#include "kv_pages.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

recall_status rc_kvp_parse(const char *text, rc_kv_pages_opts *o, recall_err *err) {
    char *end;
    errno = 0;
    long page = strtol(text, &end, 10);
    if (errno || end == text || *end != ':' || page < 1 || page > 65536)
        return rc_fail(err, RECALL_E_ARG, "kv pages '%s': expected PAGE:BUDGET with PAGE in 1..65536", text);
    const char *b = end + 1;
    errno = 0;
    long budget = strtol(b, &end, 10);
    if (errno || end == b || *end || budget < 0 || budget > (1L << 30))
        return rc_fail(err, RECALL_E_ARG, "kv pages '%s': expected PAGE:BUDGET with BUDGET in 0..%ld", text, 1L << 30);
    o->page = (int)page;
    o->budget = (int)budget;
    return RECALL_OK;
}

void rc_kvp_fold(float *mn, float *mx, const float *k, size_t D, int first) {
    if (first) {
        memcpy(mn, k, D * sizeof(float));
        memcpy(mx, k, D * sizeof(float));
        return;
    }
    for (size_t i = 0; i < D; i++) {
        if (k[i] < mn[i]) mn[i] = k[i];
        if (k[i] > mx[i]) mx[i] = k[i];
    }
}

/* Why this is an upper bound of the fp32 score of every key k of the page (finite values).
 * Exact arithmetic: q_i*k_i is linear in k_i in [mn_i, mx_i], so q_i*k_i <= t_i = max(q_i*mn_i,
 * q_i*mx_i) and q.k <= U = sum t_i. Rounding of the kernels' fp32 dot (16 lane accumulators of
 * FMAs, then a 4-level tree, or any other order): each term passes through at most D + 4
 * roundings, so fl(q.k) <= q.k + g * sum |q_i k_i| with g = n u / (1 - n u), n = D + 4,
 * u = 2^-24 (Higham, Accuracy and Stability, 2nd ed., eq. 4.4), and |q_i k_i| <= a_i =
 * |q_i| * max(|mn_i|, |mx_i|), so fl(q.k) <= U + g * A, A = sum a_i. Here in double: t_i and a_i
 * are products of two floats, exact in double; the two sums round by at most D * 2^-53 * A each
 * (|t_i| <= a_i); the slack 2 n u A covers g A (g < 1.01 n u for n u < 0.01) with room for all
 * of those and the final additions' rounding (~1e-16 A each, against n u A >= 3.5e-7 A). */
double rc_kvp_bound(const float *q, const float *mn, const float *mx, size_t D) {
    double u = 0.0, a = 0.0;
    for (size_t i = 0; i < D; i++) {
        const double qi = (double)q[i], lo = qi * (double)mn[i], hi = qi * (double)mx[i];
        const double m = fabs((double)mn[i]) > fabs((double)mx[i]) ? fabs((double)mn[i]) : fabs((double)mx[i]);
        u += lo > hi ? lo : hi;
        a += fabs(qi) * m;
    }
    return u + 2.0 * (double)(D + 4) * 0x1p-24 * a;
}

/* splitmix64 (Steele, Lea, Flood 2014): the control's random stream */
static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, r), r >= 1, without modulo bias */
static uint32_t draw_below(uint64_t *s, uint32_t r) {
    const uint64_t lim = UINT64_MAX - UINT64_MAX % r;
    uint64_t x;
    do x = mix64(s);
    while (x >= lim);
    return (uint32_t)(x % r);
}

/* largest bound first; the lower page on ties (a total order: no two entries share a page) */
static int by_bound(const void *pa, const void *pb) {
    const rc_kvp_rank *a = pa, *b = pb;
    if (a->bound != b->bound) return a->bound > b->bound ? -1 : 1;
    return a->page < b->page ? -1 : 1;
}

int rc_kvp_select(const rc_kv_pages_opts *o, int n_pages, rc_kvp_rank *rank, int layer, int kv_head, int pos,
                  unsigned char *keep) {
    const int first = 1, n_cand = n_pages - 3 > 0 ? n_pages - 3 : 0; /* candidates first .. first+n_cand-1 */
    const int want = o->budget / o->page;
    memset(keep, 0, (size_t)n_pages);
    keep[0] = 1;                           /* sink */
    keep[n_pages - 1] = 1;                 /* the current page */
    if (n_pages >= 2) keep[n_pages - 2] = 1; /* and the one before it */
    if (want >= n_cand) {
        for (int p = first; p < first + n_cand; p++) keep[p] = 1;
    } else if (want > 0) {
        rc_kvp_rank *c = rank + first;
        if (o->random) {
            /* partial Fisher-Yates over the candidates: the first `want` slots are the draw */
            uint64_t s = o->seed;
            s = mix64(&s) ^ (uint64_t)(uint32_t)layer;
            s = mix64(&s) ^ (uint64_t)(uint32_t)kv_head;
            s = mix64(&s) ^ (uint64_t)(uint32_t)pos;
            for (int i = 0; i < n_cand; i++) c[i].page = first + i;
            for (int i = 0; i < want; i++) {
                const int j = i + (int)draw_below(&s, (uint32_t)(n_cand - i));
                const int t = c[i].page;
                c[i].page = c[j].page;
                c[j].page = t;
            }
        } else {
            for (int i = 0; i < n_cand; i++) c[i].page = first + i;
            qsort(c, (size_t)n_cand, sizeof *c, by_bound);
        }
        for (int i = 0; i < want; i++) keep[c[i].page] = 1;
    }
    int kept = 0;
    for (int p = 0; p < n_pages; p++) kept += keep[p];
    return kept;
}
