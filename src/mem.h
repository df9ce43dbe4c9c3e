/* mem.h - releasing what a handle owns in one call: RC_FREE(m->a, m->b, ..., m) frees each
 * pointer, in order (NULL ones included, as free allows). The close functions of the models and
 * tokenizers list their buffers this way. */
#ifndef RECALL_MEM_H
#define RECALL_MEM_H

#include <stddef.h>
#include <stdlib.h>

static inline void rc_free_each(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

#define RC_FREE(...) \
    rc_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
