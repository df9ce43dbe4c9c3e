/* inflate.c - raw DEFLATE decoder (RFC 1951).
 *
 * Bits are read LSB-first from a 64-bit buffer. Huffman codes are canonical (RFC 1951 3.2.2);
 * each table keeps a 10-bit direct lookup (codes of length <= 10, bit-reversed because the
 * stream sends Huffman codes MSB-first) plus the per-length counts and the symbols sorted by
 * code, which decode the rare longer codes one bit at a time (the method of zlib's puff.c).
 * Every input and output access is bounds-checked; errors carry the input byte offset.
 */
#include "inflate.h"

#include <string.h>

#define MAX_BITS 15      /* longest Huffman code */
#define MAX_LITLEN 288   /* literal/length alphabet incl. the two invalid fixed-code symbols */
#define MAX_DIST 32      /* distance alphabet incl. the two invalid fixed-code symbols */
#define FAST_BITS 10

typedef struct {
    uint16_t count[MAX_BITS + 1]; /* number of codes of each length; count[0] = unused symbols */
    uint16_t symbol[MAX_LITLEN];  /* symbols ordered by (length, value) = canonical code order */
    uint16_t fast[1u << FAST_BITS]; /* (symbol << 4) | length for codes <= FAST_BITS; 0 = none */
} huff;

typedef struct {
    const uint8_t *in;
    size_t in_len;
    size_t pos;      /* next byte of `in` to load into bitbuf */
    uint64_t bitbuf; /* LSB = next bit of the stream */
    unsigned bitcnt;
    uint8_t *out;
    size_t out_cap;
    size_t out_len;
    recall_err *err;
} inflater;

/* Offset of the byte holding the next unread bit, for messages. */
static size_t byte_pos(const inflater *s) { return s->pos - (s->bitcnt + 7) / 8; }

static recall_status bad(inflater *s, const char *what) {
    return rc_fail(s->err, RECALL_E_FORMAT, "inflate: %s at byte %zu", what, byte_pos(s));
}

static void refill(inflater *s) {
    while (s->bitcnt <= 56 && s->pos < s->in_len) {
        s->bitbuf |= (uint64_t)s->in[s->pos++] << s->bitcnt;
        s->bitcnt += 8;
    }
}

/* Reads n <= 32 bits (first bit in the LSB). */
static recall_status get_bits(inflater *s, unsigned n, uint32_t *v) {
    if (s->bitcnt < n) refill(s);
    if (s->bitcnt < n) return bad(s, "unexpected end of stream");
    *v = (uint32_t)(s->bitbuf & ((1ull << n) - 1));
    s->bitbuf >>= n;
    s->bitcnt -= n;
    return RECALL_OK;
}

/* Builds a canonical code from code lengths. Returns <0 if over-subscribed, 0 if complete and
 * >0 (the number of missing codes) if incomplete; the caller decides whether that is allowed. */
static int huff_build(huff *h, const uint8_t *lengths, unsigned n) {
    memset(h->count, 0, sizeof h->count);
    for (unsigned i = 0; i < n; i++) h->count[lengths[i]]++;
    if (h->count[0] == n) {
        memset(h->fast, 0, sizeof h->fast);
        return 1; /* no codes: incomplete, decoding anything fails */
    }
    int left = 1;
    for (unsigned len = 1; len <= MAX_BITS; len++) {
        left <<= 1;
        left -= h->count[len];
        if (left < 0) return -1;
    }
    uint16_t offs[MAX_BITS + 2];
    offs[1] = 0;
    for (unsigned len = 1; len <= MAX_BITS; len++) offs[len + 1] = (uint16_t)(offs[len] + h->count[len]);
    for (unsigned i = 0; i < n; i++)
        if (lengths[i]) h->symbol[offs[lengths[i]]++] = (uint16_t)i;

    /* Direct table: walk the codes in canonical order, assigning consecutive code values. */
    memset(h->fast, 0, sizeof h->fast);
    unsigned code = 0, idx = 0;
    for (unsigned len = 1; len <= FAST_BITS; len++) {
        for (unsigned k = 0; k < h->count[len]; k++, idx++, code++) {
            unsigned rev = 0;
            for (unsigned b = 0; b < len; b++) rev |= ((code >> b) & 1u) << (len - 1 - b);
            uint16_t entry = (uint16_t)((h->symbol[idx] << 4) | len);
            for (unsigned fill = rev; fill < (1u << FAST_BITS); fill += 1u << len) h->fast[fill] = entry;
        }
        code <<= 1;
    }
    return left;
}

static recall_status decode_sym(inflater *s, const huff *h, unsigned *sym) {
    if (s->bitcnt < MAX_BITS) refill(s);
    uint32_t window = (uint32_t)(s->bitbuf & ((1u << MAX_BITS) - 1)); /* zeros past the end */
    uint16_t e = h->fast[window & ((1u << FAST_BITS) - 1)];
    unsigned len;
    if (e) {
        len = e & 15u;
        *sym = e >> 4;
    } else {
        /* Slow path: canonical decode bit by bit (codes longer than FAST_BITS). */
        int code = 0, first = 0, index = 0;
        for (len = 1; len <= MAX_BITS; len++) {
            code |= (int)((window >> (len - 1)) & 1u);
            int count = h->count[len];
            if (code - count < first) {
                *sym = h->symbol[index + (code - first)];
                break;
            }
            index += count;
            first += count;
            first <<= 1;
            code <<= 1;
        }
        if (len > MAX_BITS) {
            if (s->bitcnt < MAX_BITS) return bad(s, "unexpected end of stream");
            return bad(s, "invalid Huffman code");
        }
    }
    if (len > s->bitcnt) return bad(s, "unexpected end of stream");
    s->bitbuf >>= len;
    s->bitcnt -= len;
    return RECALL_OK;
}

static const uint16_t LEN_BASE[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t LEN_EXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t DIST_BASE[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                       33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                       1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t DIST_EXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static recall_status out_limit(inflater *s) {
    return rc_fail(s->err, RECALL_E_LIMIT, "inflate: output exceeds %zu bytes at byte %zu", s->out_cap,
                   byte_pos(s));
}

static recall_status inflate_codes(inflater *s, const huff *lit, const huff *dist) {
    for (;;) {
        unsigned sym;
        RC_TRY(decode_sym(s, lit, &sym));
        if (sym < 256) {
            if (s->out_len >= s->out_cap) return out_limit(s);
            s->out[s->out_len++] = (uint8_t)sym;
        } else if (sym == 256) {
            return RECALL_OK;
        } else {
            sym -= 257;
            if (sym >= 29) return bad(s, "invalid length symbol");
            uint32_t extra;
            RC_TRY(get_bits(s, LEN_EXTRA[sym], &extra));
            size_t len = LEN_BASE[sym] + extra;
            unsigned dsym;
            RC_TRY(decode_sym(s, dist, &dsym));
            if (dsym >= 30) return bad(s, "invalid distance symbol");
            RC_TRY(get_bits(s, DIST_EXTRA[dsym], &extra));
            size_t d = DIST_BASE[dsym] + extra;
            if (d > s->out_len) return bad(s, "distance too far back");
            if (len > s->out_cap - s->out_len) return out_limit(s);
            /* Byte-wise copy: the source may overlap the bytes being written (d < len). */
            uint8_t *dst = s->out + s->out_len;
            const uint8_t *src = dst - d;
            for (size_t i = 0; i < len; i++) dst[i] = src[i];
            s->out_len += len;
        }
    }
}

static recall_status inflate_stored(inflater *s) {
    /* Drop the rest of the current byte, then give back the whole bytes already buffered so
     * that LEN/NLEN and the data are read straight from the input. */
    s->bitbuf >>= s->bitcnt & 7u;
    s->bitcnt -= s->bitcnt & 7u;
    s->pos -= s->bitcnt / 8;
    s->bitbuf = 0;
    s->bitcnt = 0;
    if (s->in_len - s->pos < 4) return bad(s, "unexpected end of stream in stored block header");
    unsigned len = s->in[s->pos] | (unsigned)s->in[s->pos + 1] << 8;
    unsigned nlen = s->in[s->pos + 2] | (unsigned)s->in[s->pos + 3] << 8;
    if (len != (~nlen & 0xffffu)) return bad(s, "stored block LEN/NLEN mismatch");
    s->pos += 4;
    if (s->in_len - s->pos < len) return bad(s, "unexpected end of stream in stored block");
    if (len > s->out_cap - s->out_len) return out_limit(s);
    if (len) memcpy(s->out + s->out_len, s->in + s->pos, len);
    s->out_len += len;
    s->pos += len;
    return RECALL_OK;
}

static recall_status inflate_fixed(inflater *s, huff *lit, huff *dist) {
    uint8_t lengths[MAX_LITLEN];
    unsigned i = 0;
    for (; i < 144; i++) lengths[i] = 8;
    for (; i < 256; i++) lengths[i] = 9;
    for (; i < 280; i++) lengths[i] = 7;
    for (; i < MAX_LITLEN; i++) lengths[i] = 8;
    huff_build(lit, lengths, MAX_LITLEN);
    for (i = 0; i < MAX_DIST; i++) lengths[i] = 5;
    huff_build(dist, lengths, MAX_DIST);
    return inflate_codes(s, lit, dist);
}

static recall_status inflate_dynamic(inflater *s, huff *lit, huff *dist) {
    static const uint8_t ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    uint32_t hlit, hdist, hclen;
    RC_TRY(get_bits(s, 5, &hlit));
    RC_TRY(get_bits(s, 5, &hdist));
    RC_TRY(get_bits(s, 4, &hclen));
    unsigned nlen = hlit + 257, ndist = hdist + 1, ncode = hclen + 4;
    if (nlen > 286 || ndist > 30) return bad(s, "too many length or distance codes");

    uint8_t lengths[MAX_LITLEN + MAX_DIST];
    memset(lengths, 0, 19);
    for (unsigned i = 0; i < ncode; i++) {
        uint32_t v;
        RC_TRY(get_bits(s, 3, &v));
        lengths[ORDER[i]] = (uint8_t)v;
    }
    /* The code-length code must be complete (as zlib requires). */
    if (huff_build(lit, lengths, 19) != 0) return bad(s, "invalid code-length code");

    unsigned index = 0;
    while (index < nlen + ndist) {
        unsigned sym;
        RC_TRY(decode_sym(s, lit, &sym));
        if (sym < 16) {
            lengths[index++] = (uint8_t)sym;
            continue;
        }
        uint8_t value = 0;
        uint32_t rep;
        if (sym == 16) {
            if (index == 0) return bad(s, "repeat with no previous length");
            value = lengths[index - 1];
            RC_TRY(get_bits(s, 2, &rep));
            rep += 3;
        } else if (sym == 17) {
            RC_TRY(get_bits(s, 3, &rep));
            rep += 3;
        } else {
            RC_TRY(get_bits(s, 7, &rep));
            rep += 11;
        }
        if (index + rep > nlen + ndist) return bad(s, "code lengths overflow the alphabet");
        while (rep--) lengths[index++] = value;
    }
    if (lengths[256] == 0) return bad(s, "no end-of-block code");

    /* Incomplete codes are only allowed for a single code of length 1 (RFC 1951 3.2.7). */
    int r = huff_build(lit, lengths, nlen);
    if (r < 0 || (r > 0 && nlen - lit->count[0] != 1)) return bad(s, "invalid literal/length code");
    r = huff_build(dist, lengths + nlen, ndist);
    if (r < 0 || (r > 0 && ndist - dist->count[0] > 1)) return bad(s, "invalid distance code");
    return inflate_codes(s, lit, dist);
}

recall_status rc_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                         size_t *out_len, size_t *in_used, recall_err *err) {
    if (out_len) *out_len = 0;
    if (in_used) *in_used = 0;
    if ((!in && in_len) || (!out && out_cap) || !out_len)
        return rc_fail(err, RECALL_E_ARG, "inflate: NULL buffer");
    inflater s = {.in = in, .in_len = in_len, .out = out, .out_cap = out_cap, .err = err};
    huff lit, dist;
    uint32_t last;
    do {
        uint32_t type;
        RC_TRY(get_bits(&s, 1, &last));
        RC_TRY(get_bits(&s, 2, &type));
        recall_status st;
        switch (type) {
        case 0: st = inflate_stored(&s); break;
        case 1: st = inflate_fixed(&s, &lit, &dist); break;
        case 2: st = inflate_dynamic(&s, &lit, &dist); break;
        default: st = bad(&s, "invalid block type 3"); break;
        }
        if (st != RECALL_OK) return st;
    } while (!last);
    *out_len = s.out_len;
    if (in_used) *in_used = s.pos - s.bitcnt / 8; /* a partly used last byte counts */
    return RECALL_OK;
}
