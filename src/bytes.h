/* bytes.h - the byte-level helpers both tokenizers' sections use (weights/FORMAT_TOKENIZERS.md):
 * little-endian u32 fields, the FNV-1a string hash of their lookup tables, and a growable byte
 * buffer for building sections and decoded text. One copy, so that a section is read and written
 * the same way by each tokenizer (the hash decides table layouts: it must never differ). */
#ifndef RECALL_BYTES_H
#define RECALL_BYTES_H

#include "status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t rc_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void rc_wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* FNV-1a, continued over n more bytes: start from RC_FNV1A_OFFSET; data that comes in pieces
 * hashes as if it were one buffer (bench_device's digest of a turn's events). */
#define RC_FNV1A_OFFSET 0xcbf29ce484222325ull
static inline uint64_t rc_fnv1a_more(uint64_t h, const void *s, size_t n) {
    const uint8_t *p = s;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}

/* FNV-1a with a final fold of the high bits into the low ones (tables index with the low bits). */
static inline uint64_t rc_hash_bytes(const void *s, size_t n) {
    const uint64_t h = rc_fnv1a_more(RC_FNV1A_OFFSET, s, n);
    return h ^ (h >> 29);
}

/* A growable byte buffer; p[n] always has room for a terminating NUL. Free p when done. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} rc_bytebuf;

static inline recall_status rc_bb_put(rc_bytebuf *b, const void *src, size_t n) {
    if (n > SIZE_MAX - b->n - 1) return RECALL_E_NOMEM;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) return RECALL_E_NOMEM;
            cap *= 2;
        }
        uint8_t *q = realloc(b->p, cap);
        if (!q) return RECALL_E_NOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return RECALL_OK;
}

/* The start of a tokenizer section: at least hdr bytes, the 8-byte magic, the u32 version at byte 8.
 * what names the section in the messages ("tokenizer section (BPE)"). */
static inline recall_status rc_section_head(const uint8_t *p, size_t size, size_t hdr, const char *magic,
                                            uint32_t version, const char *what, recall_err *err) {
    if (!p || size < hdr) return rc_fail(err, RECALL_E_FORMAT, "%s: truncated header", what);
    if (memcmp(p, magic, 8) != 0) return rc_fail(err, RECALL_E_FORMAT, "%s: bad magic", what);
    if (rc_rd32(p + 8) != version) return rc_fail(err, RECALL_E_VERSION, "%s: version %u", what, rc_rd32(p + 8));
    return RECALL_OK;
}

/* The end of a decode: on st == RECALL_OK hands b over as NUL-terminated text (rc_bb_put keeps
 * room for the NUL), else frees it and fails naming who. */
static inline recall_status rc_bb_take_text(rc_bytebuf *b, recall_status st, const char *who, char **text,
                                            size_t *len, recall_err *err) {
    if (st) {
        free(b->p);
        return rc_fail(err, st, "%s: out of memory", who);
    }
    b->p[b->n] = 0;
    *text = (char *)b->p;
    *len = b->n;
    return RECALL_OK;
}

#endif
