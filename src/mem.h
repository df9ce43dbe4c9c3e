/* mem.h - releasing what a handle owns in one call: RC_FREE(m->a, m->b, ..., m) frees each
 * pointer, in order (NULL ones included, as free allows). The close functions of the models and
 * tokenizers list their buffers this way. And growing an array by doubling (rc_grow). */
#ifndef RECALL_MEM_H
#define RECALL_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline void rc_free_each(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

#define RC_FREE(...) \
    rc_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* Room for element n of a growable array p of *cap elements of `size` bytes: p itself while
 * n < *cap, else p reallocated to twice the capacity (`first` when it was empty) with *cap updated.
 * NULL when out of memory: p is then untouched (still the caller's) and so is *cap. Doubling keeps
 * the readers' table building linear. */
static inline void *rc_grow(void *p, size_t n, size_t *cap, size_t size, size_t first) {
    if (n < *cap) return p;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc > SIZE_MAX / size) return NULL;
    void *q = realloc(p, nc * size);
    if (q) *cap = nc;
    return q;
}

#endif
