/* checksum.c - CRC-32 (IEEE 802.3, reflected, as zip uses) and XXH64. */
#include "checksum.h"

#include <string.h>

static uint32_t crc_table_entry(uint32_t i) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    return c;
}

uint32_t rc_crc32(uint32_t crc, const void *data, size_t len) {
    /* The 1 KiB table is rebuilt per call: no globals, and CRCs only guard small npz members. */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) table[i] = crc_table_entry(i);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#define P1 11400714785074694791ULL
#define P2 14029467366897019727ULL
#define P3 1609587929392839161ULL
#define P4 9650029242287828579ULL
#define P5 2870177450012600261ULL

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Little-endian loads regardless of host order, so checksums are portable. */
static uint64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round1(uint64_t acc, uint64_t in) {
    acc += in * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}
static uint64_t merge(uint64_t acc, uint64_t v) {
    acc ^= round1(0, v);
    return acc * P1 + P4;
}

void rc_xxh64_init(rc_xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
}

static void consume32(uint64_t v[4], const unsigned char *p) {
    v[0] = round1(v[0], rd64(p));
    v[1] = round1(v[1], rd64(p + 8));
    v[2] = round1(v[2], rd64(p + 16));
    v[3] = round1(v[3], rd64(p + 24));
}

void rc_xxh64_update(rc_xxh64_state *s, const void *data, size_t len) {
    if (len == 0) return; /* data may be NULL then (an empty section) */
    const unsigned char *p = data;
    s->total += len;
    if (s->nbuf) {
        size_t take = 32 - s->nbuf < len ? 32 - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        len -= take;
        if (s->nbuf < 32) return;
        consume32(s->v, s->buf);
        s->nbuf = 0;
    }
    while (len >= 32) {
        consume32(s->v, p);
        p += 32;
        len -= 32;
    }
    memcpy(s->buf, p, len);
    s->nbuf = len;
}

uint64_t rc_xxh64_digest(const rc_xxh64_state *s) {
    uint64_t h;
    if (s->total >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = merge(h, s->v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    const unsigned char *p = s->buf, *end = s->buf + s->nbuf;
    while (p + 8 <= end) {
        h ^= round1(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
    }
    if (p + 4 <= end) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (*p) * P5;
        h = rotl(h, 11) * P1;
        p++;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t rc_xxh64(const void *data, size_t len, uint64_t seed) {
    rc_xxh64_state s;
    rc_xxh64_init(&s, seed);
    rc_xxh64_update(&s, data, len);
    return rc_xxh64_digest(&s);
}

uint64_t rc_xxh64_ids(const int32_t *ids, size_t n) {
    rc_xxh64_state s;
    uint8_t le[256]; /* 64 ids at a time, byte order fixed so the hash is the same on any host */
    rc_xxh64_init(&s, 0);
    for (size_t i = 0; i < n;) {
        size_t m = n - i < 64 ? n - i : 64;
        for (size_t j = 0; j < m; j++)
            for (int k = 0; k < 4; k++) le[j * 4 + k] = (uint8_t)((uint32_t)ids[i + j] >> (8 * k));
        rc_xxh64_update(&s, le, m * 4);
        i += m;
    }
    return rc_xxh64_digest(&s);
}
