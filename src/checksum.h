/* checksum.h - CRC-32 (zip/npz members) and XXH64 (blob sections and tensors).
 * XXH64 is the public xxHash 64-bit algorithm with seed 0; the values recall writes can be
 * checked with any xxhsum implementation (`xxhsum -H1`). */
#ifndef RECALL_CHECKSUM_H
#define RECALL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint32_t rc_crc32(uint32_t crc, const void *data, size_t len); /* start with crc = 0 */
uint64_t rc_xxh64(const void *data, size_t len, uint64_t seed);

/* Streaming XXH64: same result as rc_xxh64 over the concatenated input. */
typedef struct {
    uint64_t v[4];
    uint64_t total;
    uint64_t seed;
    unsigned char buf[32];
    size_t nbuf;
} rc_xxh64_state;
void rc_xxh64_init(rc_xxh64_state *s, uint64_t seed);
void rc_xxh64_update(rc_xxh64_state *s, const void *data, size_t len);
uint64_t rc_xxh64_digest(const rc_xxh64_state *s);

/* The token-id hash of `score` and `longctx`: XXH64 (seed 0) of the ids as little-endian int32. */
uint64_t rc_xxh64_ids(const int32_t *ids, size_t n);

#endif
