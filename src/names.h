/* names.h - the one lookup of a record by its name in a table of records: the tensors of a blob,
 * of a blob being written, of a safetensors file and of the converter's dictionaries, the members
 * of a zip archive. Linear: a table holds at most a few thousand names, each looked up once at
 * load time, and a linear scan keeps the first of equal names (the readers refuse duplicates).
 *
 *   size_t i = RC_NAME_INDEX(b->tensors, b->n_tensors, rc_tensor, name, key);   (n when absent)
 *
 * The record's field may be a char pointer or a char array; the macro tells them apart from the
 * field's type, so every table is searched by the same loop. */
#ifndef RECALL_NAMES_H
#define RECALL_NAMES_H

#include <stddef.h>
#include <string.h>

static inline size_t rc_name_index(const void *table, size_t n, size_t stride, size_t off, int is_array,
                                   const char *key) {
    const char *rec = (const char *)table;
    for (size_t i = 0; i < n; i++, rec += stride) {
        const char *s;
        if (is_array) s = rec + off;
        else memcpy(&s, rec + off, sizeof s);
        if (strcmp(s, key) == 0) return i;
    }
    return n;
}

/* table: a pointer to the first of n records of type type (NULL when n is 0); field: the name. */
#define RC_NAME_INDEX(table, n, type, field, key)                                                         \
    rc_name_index((table), (n), sizeof(type), offsetof(type, field),                                      \
                  _Generic(&((type *)0)->field, char **: 0, const char **: 0, default: 1), (key))

#endif
