/* topk.c - torch.topk(v, k) on CPU (largest, sorted) as GNU libstdc++ executes it (topk.h).
 *
 * v[n] -> idx[k], val[k]. Each routine below is the libstdc++ one of the same name
 * (bits/stl_algo.h, bits/stl_heap.h) on an array of (value, index) pairs, with iterators turned
 * into array positions. Copies stand for std::move: the order of the moves, the heap "hole" and
 * the unguarded scans are kept exactly, since they alone decide where equal values land.
 * The comparator is torch's "greater" with NaN as the greatest value; it looks at values only.
 */
#include "topk.h"

#include <math.h>
#include <string.h>

typedef rc_topk_pair pair;

/* torch's comparator for largest=True: x goes before y */
static int gt(pair x, pair y) {
    return (isnan(x.v) && !isnan(y.v)) || x.v > y.v;
}

static void swap(pair *p, int a, int b) {
    pair t = p[a];
    p[a] = p[b];
    p[b] = t;
}

/* std::__lg: floor(log2 n), n > 0 */
static int lg(int n) {
    int r = 0;
    while (n >>= 1) r++;
    return r;
}

/* ---- heap (stl_heap.h): a heap over p[0..len) under gt, so p[0] is the "smallest" ---------- */

static void push_heap(pair *p, int hole, int top, pair value) {
    int parent = (hole - 1) / 2;
    while (hole > top && gt(p[parent], value)) {
        p[hole] = p[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    p[hole] = value;
}

/* Moves the hole at `hole` down to a leaf along the preferred children, then pushes value up. */
static void adjust_heap(pair *p, int hole, int len, pair value) {
    const int top = hole;
    int second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (gt(p[second], p[second - 1])) second--;
        p[hole] = p[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) { /* the last parent has a left child only */
        second = 2 * (second + 1);
        p[hole] = p[second - 1];
        hole = second - 1;
    }
    push_heap(p, hole, top, value);
}

static void make_heap(pair *p, int len) {
    if (len < 2) return;
    for (int parent = (len - 2) / 2;; parent--) {
        adjust_heap(p, parent, len, p[parent]);
        if (parent == 0) return;
    }
}

/* std::__pop_heap(first, first + len, result): *result takes the top, its old value sifts in. */
static void pop_heap(pair *p, int len, pair *result) {
    pair value = *result;
    *result = p[0];
    adjust_heap(p, 0, len, value);
}

static void sort_heap(pair *p, int len) {
    while (len > 1) {
        len--;
        pop_heap(p, len, p + len);
    }
}

/* std::__heap_select(p, p + mid, p + len) */
static void heap_select(pair *p, int mid, int len) {
    make_heap(p, mid);
    for (int i = mid; i < len; i++)
        if (gt(p[i], p[0])) pop_heap(p, mid, p + i);
}

/* ---- insertion sort, partition (stl_algo.h) ------------------------------------------------ */

static void unguarded_linear_insert(pair *p, int last) {
    pair val = p[last];
    int next = last - 1;
    while (gt(val, p[next])) {
        p[last] = p[next];
        last = next;
        next--;
    }
    p[last] = val;
}

static void insertion_sort(pair *p, int first, int last) {
    if (first == last) return;
    for (int i = first + 1; i != last; i++) {
        if (gt(p[i], p[first])) { /* new front: move_backward the whole prefix */
            pair val = p[i];
            memmove(p + first + 1, p + first, (size_t)(i - first) * sizeof *p);
            p[first] = val;
        } else {
            unguarded_linear_insert(p, i);
        }
    }
}

static void move_median_to_first(pair *p, int result, int a, int b, int c) {
    if (gt(p[a], p[b])) {
        if (gt(p[b], p[c]))
            swap(p, result, b);
        else if (gt(p[a], p[c]))
            swap(p, result, c);
        else
            swap(p, result, a);
    } else if (gt(p[a], p[c])) {
        swap(p, result, a);
    } else if (gt(p[b], p[c])) {
        swap(p, result, c);
    } else {
        swap(p, result, b);
    }
}

/* Hoare partition of [first, last) around p[pivot], no bounds checks (the median guards it). */
static int unguarded_partition(pair *p, int first, int last, int pivot) {
    for (;;) {
        while (gt(p[first], p[pivot])) first++;
        last--;
        while (gt(p[pivot], p[last])) last--;
        if (!(first < last)) return first;
        swap(p, first, last);
        first++;
    }
}

static int unguarded_partition_pivot(pair *p, int first, int last) {
    int mid = first + (last - first) / 2;
    move_median_to_first(p, first, first + 1, mid, last - 1);
    return unguarded_partition(p, first + 1, last, first);
}

/* ---- std::nth_element, std::sort --------------------------------------------------------- */

static void nth_element(pair *p, int first, int nth, int last) {
    if (first == last || nth == last) return;
    int depth = lg(last - first) * 2;
    while (last - first > 3) {
        if (depth == 0) {
            heap_select(p + first, nth + 1 - first, last - first);
            swap(p, first, nth); /* the nth element to its final place */
            return;
        }
        depth--;
        int cut = unguarded_partition_pivot(p, first, last);
        if (cut <= nth)
            first = cut;
        else
            last = cut;
    }
    insertion_sort(p, first, last);
}

enum { SORT_THRESHOLD = 16 }; /* libstdc++'s _S_threshold */

static void introsort_loop(pair *p, int first, int last, int depth) {
    while (last - first > SORT_THRESHOLD) {
        if (depth == 0) { /* std::__partial_sort(first, last, last) */
            heap_select(p + first, last - first, last - first);
            sort_heap(p + first, last - first);
            return;
        }
        depth--;
        int cut = unguarded_partition_pivot(p, first, last);
        introsort_loop(p, cut, last, depth);
        last = cut;
    }
}

static void sort(pair *p, int first, int last) {
    if (first == last) return;
    introsort_loop(p, first, last, lg(last - first) * 2);
    if (last - first > SORT_THRESHOLD) { /* __final_insertion_sort */
        insertion_sort(p, first, first + SORT_THRESHOLD);
        for (int i = first + SORT_THRESHOLD; i != last; i++) unguarded_linear_insert(p, i);
    } else {
        insertion_sort(p, first, last);
    }
}

/* ---- torch.topk ---------------------------------------------------------------------------- */

static int use_partial_sort(int n, int k) {
    return (int64_t)k * 64 <= n;
}

size_t rc_topk_scratch(int n, int k) {
    return use_partial_sort(n, k) ? (size_t)k : (size_t)n;
}

void rc_topk(const float *v, int n, int k, pair *s, int32_t *idx, float *val) {
    if (k < 1 || k > n) return; /* torch: k = 0 selects nothing; k > n is an error there */
    if (use_partial_sort(n, k)) {
        /* std::partial_sort(p, p + k, p + n) = heap_select + sort_heap. heap_select writes p[i]
         * (i >= k) only when it visits i and never reads it again, so v streams past a k-pair heap
         * with the same result as the full pair array. */
        for (int j = 0; j < k; j++) s[j] = (pair){v[j], j};
        make_heap(s, k);
        for (int i = k; i < n; i++) {
            pair x = {v[i], i};
            if (gt(x, s[0])) adjust_heap(s, 0, k, x); /* pop_heap(p, p + k, p + i) */
        }
        sort_heap(s, k);
    } else {
        for (int j = 0; j < n; j++) s[j] = (pair){v[j], j};
        nth_element(s, 0, k - 1, n);
        sort(s, 0, k - 1); /* torch sorts the first k - 1; the kth is in place */
    }
    for (int j = 0; j < k; j++) {
        idx[j] = s[j].i;
        if (val) val[j] = s[j].v;
    }
}
