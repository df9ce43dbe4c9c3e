/* test_zip_npz.c - raw inflate, zip reading, .npy parsing, npz reading and writing.
 *
 * Fixtures (tests/golden/worldA, copied from the Python goldens): gate.npz (stored) and
 * gate_compressed.npz (deflate) hold the same 5 float32 arrays; bge_head.npz has int64 0-d
 * scalars and 2-D weights; nf4_layer0_q_proj.npz has a uint8 and a float32 array.
 * Deflate streams are either produced by zlib (embedded bytes) or hand-assembled here with a
 * small bit writer, which also builds the malformed ones. Zip archives with zip64 fields, data
 * descriptors and torch-style padding are assembled in memory.
 */
#include "checksum.h"
#include "fixture.h"
#include "inflate.h"
#include "npy.h"
#include "zip.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GOLDEN "tests/golden/worldA/"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ==== inflate ================================================================================ */

/* Deflate bit writer: fields LSB-first, Huffman codes MSB-first (RFC 1951 3.1.1). */
typedef struct {
    uint8_t buf[1024];
    size_t bits;
} bitw;

static void put(bitw *w, uint32_t v, unsigned n) {
    for (unsigned i = 0; i < n; i++, w->bits++) {
        if ((v >> i) & 1u) w->buf[w->bits / 8] |= (uint8_t)(1u << (w->bits % 8));
    }
}

static void put_code(bitw *w, uint32_t code, unsigned len) {
    for (unsigned i = len; i-- > 0;) put(w, (code >> i) & 1u, 1);
}

static size_t bytes_of(const bitw *w) { return (w->bits + 7) / 8; }

/* Canonical codes from lengths (RFC 1951 3.2.2). */
static void canon(const uint8_t *len, unsigned n, uint32_t *code) {
    unsigned count[16] = {0}, next[16] = {0};
    for (unsigned i = 0; i < n; i++) count[len[i]]++;
    count[0] = 0;
    unsigned c = 0;
    for (unsigned b = 1; b < 16; b++) {
        c = (c + count[b - 1]) << 1;
        next[b] = c;
    }
    for (unsigned i = 0; i < n; i++)
        if (len[i]) code[i] = next[len[i]]++;
}

/* Fixed-Huffman literal/length symbol. */
static void put_fixed(bitw *w, unsigned sym) {
    if (sym < 144) put_code(w, 0x30 + sym, 8);
    else if (sym < 256) put_code(w, 0x190 + sym - 144, 9);
    else if (sym < 280) put_code(w, sym - 256, 7);
    else put_code(w, 0xc0 + sym - 280, 8);
}

/* Dynamic block header. The code-length code gives symbols 0..14 four bits and 15, 16 five bits
 * (complete); every length is then sent literally. `first_cl` (if >= 0) is emitted as an extra
 * code-length symbol before the lengths, to build malformed headers. */
static uint8_t CL_LEN[19];
static uint32_t CL_CODE[19];
static void put_dynamic_header(bitw *w, int final, const uint8_t *lit, unsigned nlit, const uint8_t *dist,
                               unsigned ndist, int first_cl) {
    static const uint8_t ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    memset(CL_LEN, 0, sizeof CL_LEN);
    for (int s = 0; s <= 14; s++) CL_LEN[s] = 4;
    CL_LEN[15] = CL_LEN[16] = 5;
    canon(CL_LEN, 19, CL_CODE);
    put(w, (uint32_t)final, 1);
    put(w, 2, 2);
    put(w, nlit - 257, 5);
    put(w, ndist - 1, 5);
    put(w, 19 - 4, 4);
    for (int i = 0; i < 19; i++) put(w, CL_LEN[ORDER[i]], 3);
    if (first_cl >= 0) {
        put_code(w, CL_CODE[first_cl], CL_LEN[first_cl]);
        if (first_cl == 16) put(w, 0, 2);
    }
    for (unsigned i = 0; i < nlit; i++) put_code(w, CL_CODE[lit[i]], CL_LEN[lit[i]]);
    for (unsigned i = 0; i < ndist; i++) put_code(w, CL_CODE[dist[i]], CL_LEN[dist[i]]);
}

static recall_status inflate_to(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *got, recall_err *err) {
    memset(err, 0, sizeof *err);
    return rc_inflate(in, n, out, cap, got, NULL, err);
}

Test(zipnpz_inflate, stored_block) {
    static const uint8_t in[] = {0x01, 0x05, 0x00, 0xfa, 0xff, 'h', 'e', 'l', 'l', 'o', 0xee};
    uint8_t out[16];
    memset(out, 0xAA, sizeof out);
    size_t got = 99, used = 99;
    recall_err err = {0};
    cr_assert_eq(rc_inflate(in, sizeof in, out, sizeof out, &got, &used, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, 5);
    cr_assert_eq(used, 10, "trailing byte is not part of the stream");
    cr_assert_eq(memcmp(out, "hello", 5), 0);
    for (size_t i = 5; i < sizeof out; i++) cr_assert_eq(out[i], 0xAA, "byte %zu written past the output", i);
    /* Exactly-sized output works, one byte less is a limit error. */
    cr_assert_eq(inflate_to(in, sizeof in, out, 5, &got, &err), RECALL_OK);
    cr_assert_eq(inflate_to(in, sizeof in, out, 4, &got, &err), RECALL_E_LIMIT);
    cr_assert(strstr(err.msg, "exceeds 4 bytes"), "%s", err.msg);
}

Test(zipnpz_inflate, fixed_huffman_from_zlib) {
    /* zlib -15 Z_FIXED of the text below: literals and overlapping matches (distance 1, 3, 6). */
    static const uint8_t in[] = {0x4b, 0x4c, 0x4a, 0x4e, 0x84, 0x21, 0x85, 0x8c, 0xd4, 0x9c, 0x9c,
                                 0x7c, 0x64, 0x52, 0x47, 0x21, 0x91, 0x58, 0xa0, 0x08, 0x00};
    static const char want[] = "abcabcabcabc hello hello hello, aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!";
    cr_assert_eq((in[0] >> 1) & 3, 1, "fixture is a fixed-Huffman block");
    uint8_t out[128];
    memset(out, 0xAA, sizeof out);
    size_t got;
    recall_err err;
    cr_assert_eq(inflate_to(in, sizeof in, out, sizeof out, &got, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, sizeof want - 1);
    cr_assert_eq(memcmp(out, want, got), 0);
    cr_assert_eq(out[got], 0xAA);
    /* Every truncation fails (never reads past the end: ASan) and never claims success. */
    for (size_t n = 0; n < sizeof in; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, in, n);
        cr_assert_eq(inflate_to(cut, n, out, sizeof out, &got, &err), RECALL_E_FORMAT, "prefix %zu", n);
        free(cut);
    }
    /* Bounded output: the long match hits the cap. */
    cr_assert_eq(inflate_to(in, sizeof in, out, 40, &got, &err), RECALL_E_LIMIT);
}

Test(zipnpz_inflate, multi_block_with_sync_flush) {
    /* zlib: fixed block, empty stored block (sync flush, forces byte alignment), fixed block. */
    static const uint8_t in[] = {0x4a, 0xcb, 0x2c, 0x2a, 0x2e, 0x51, 0x28, 0x48, 0x2c, 0x2a, 0x51, 0x00, 0x00, 0x00,
                                 0x00, 0xff, 0xff, 0x2b, 0x4e, 0x4d, 0xce, 0xcf, 0x4b, 0xc1, 0x60, 0x03, 0x00};
    static const char want[] = "first part second part second part";
    uint8_t out[64];
    size_t got;
    recall_err err;
    cr_assert_eq(inflate_to(in, sizeof in, out, sizeof out, &got, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, sizeof want - 1);
    cr_assert_eq(memcmp(out, want, got), 0);
}

Test(zipnpz_inflate, dynamic_from_zlib) {
    static const uint8_t in[] = {
        0x6d, 0x50, 0x41, 0x0e, 0x80, 0x20, 0x0c, 0xfb, 0x8a, 0x5f, 0x43, 0x1c, 0x68, 0x44, 0x34, 0x82, 0x31,
        0xf1, 0xf5, 0x66, 0x42, 0xd1, 0x2d, 0x1e, 0xa0, 0x30, 0xba, 0xae, 0x34, 0x53, 0x4c, 0xeb, 0xde, 0x79,
        0x93, 0xa9, 0x8b, 0xdb, 0x55, 0x0e, 0x7d, 0x58, 0xed, 0x2c, 0xf6, 0x81, 0x5c, 0xe0, 0x97, 0x93, 0x26,
        0x3f, 0xe6, 0xf4, 0xa5, 0xed, 0x64, 0x4d, 0x08, 0x8d, 0x01, 0xac, 0xe5, 0xc2, 0x61, 0x65, 0xd1, 0x3a,
        0x1e, 0xce, 0x2d, 0x26, 0x82, 0xf5, 0x0b, 0x7a, 0xa6, 0x52, 0x46, 0xf9, 0x6b, 0x13, 0x35, 0xc8, 0xe3,
        0x2e, 0xb9, 0xec, 0x46, 0xcd, 0x78, 0x4c, 0xe5, 0x92, 0x45, 0x8b, 0x01, 0x2a, 0xda, 0x08, 0x13, 0x78,
        0xc9, 0x68, 0xc4, 0x87, 0xb5, 0x67, 0x60, 0x1d, 0x01, 0x65, 0xe0, 0x1b, 0xe7, 0x0d};
    static const char want[] =
        "tensor gate npz gate block block block deflate weights gate block recall deflate deflate recall block "
        "npz weights gate huffman recall recall recall recall deflate weights deflate recall weights block block "
        "weights huffman weights weights block npz recall deflate gate tensor npz gate huffman deflate weights "
        "npz npz block deflate recall block weights deflate deflate tensor huffman huffman gate block";
    cr_assert_eq((in[0] >> 1) & 3, 2, "fixture is a dynamic block");
    uint8_t out[512];
    size_t got;
    recall_err err;
    cr_assert_eq(inflate_to(in, sizeof in, out, sizeof out, &got, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, 400);
    cr_assert_eq(memcmp(out, want, 400), 0);
    for (size_t n = 0; n < sizeof in; n += 7) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, in, n);
        cr_assert_neq(inflate_to(cut, n, out, sizeof out, &got, &err), RECALL_OK, "prefix %zu", n);
        cr_assert(strstr(err.msg, "at byte"), "%s", err.msg);
        free(cut);
    }
}

/* Hand-made dynamic block whose code reaches 15 bits (exercises the slow decode path), with a
 * single 1-bit distance code (allowed incomplete code) and an overlapping match. */
static size_t long_code_stream(bitw *w) {
    uint8_t lit[258] = {0}, dist[1] = {1};
    for (int i = 0; i < 13; i++) lit['a' + i] = (uint8_t)(i + 1); /* a:1 .. m:13 bits */
    lit[257] = 14;                                                /* match length 3 */
    lit[256] = 15;
    lit['z'] = 15;
    uint32_t code[258];
    canon(lit, 258, code);
    memset(w, 0, sizeof *w);
    put_dynamic_header(w, 1, lit, 258, dist, 1, -1);
    for (int i = 0; i < 13; i++) put_code(w, code['a' + i], lit['a' + i]);
    put_code(w, code[257], lit[257]);
    put_code(w, 0, 1); /* distance symbol 0 = distance 1 */
    put_code(w, code['z'], lit['z']);
    put_code(w, code[256], lit[256]);
    return bytes_of(w);
}

Test(zipnpz_inflate, dynamic_hand_made_long_codes) {
    bitw w;
    size_t n = long_code_stream(&w);
    uint8_t out[64];
    size_t got;
    recall_err err;
    cr_assert_eq(inflate_to(w.buf, n, out, sizeof out, &got, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, 17);
    cr_assert_eq(memcmp(out, "abcdefghijklmmmmz", 17), 0);
}

Test(zipnpz_inflate, malformed_streams) {
    uint8_t out[64];
    size_t got;
    recall_err err;
    static const uint8_t type3[] = {0x07};
    cr_assert_eq(inflate_to(type3, 1, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "block type 3 at byte 0"), "%s", err.msg);

    static const uint8_t nlen_bad[] = {0x01, 0x05, 0x00, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
    cr_assert_eq(inflate_to(nlen_bad, sizeof nlen_bad, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "LEN/NLEN"), "%s", err.msg);

    static const uint8_t not_final[] = {0x00, 0x01, 0x00, 0xfe, 0xff, 'x'}; /* no final block follows */
    cr_assert_eq(inflate_to(not_final, sizeof not_final, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "end of stream at byte 6"), "%s", err.msg);

    bitw w;
    /* Fixed block: 'a' then a match at distance 2 (only 1 byte written). */
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_fixed(&w, 'a');
    put_fixed(&w, 257);
    put_code(&w, 1, 5);
    put_fixed(&w, 256);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w), out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "too far back"), "%s", err.msg);
    /* Same with distance 1 is valid: "aaaa". */
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_fixed(&w, 'a');
    put_fixed(&w, 257);
    put_code(&w, 0, 5);
    put_fixed(&w, 256);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w), out, sizeof out, &got, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(got, 4);
    cr_assert_eq(memcmp(out, "aaaa", 4), 0);
    /* Fixed code symbols 286 and distance 30 exist in the code but are invalid. */
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_fixed(&w, 286);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w), out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "invalid length symbol"), "%s", err.msg);
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_fixed(&w, 'a');
    put_fixed(&w, 257);
    put_code(&w, 30, 5);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w), out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "invalid distance symbol"), "%s", err.msg);

    uint8_t lit[258], dist[1] = {1};
    /* Over-subscribed literal code: three 1-bit codes. */
    memset(lit, 0, sizeof lit);
    lit['a'] = lit['b'] = lit[256] = 1;
    memset(&w, 0, sizeof w);
    put_dynamic_header(&w, 1, lit, 258, dist, 1, -1);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w) + 4, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "invalid literal/length code"), "%s", err.msg);
    /* Incomplete literal code with two symbols. */
    memset(lit, 0, sizeof lit);
    lit['a'] = lit[256] = 2;
    memset(&w, 0, sizeof w);
    put_dynamic_header(&w, 1, lit, 258, dist, 1, -1);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w) + 4, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "invalid literal/length code"), "%s", err.msg);
    /* No end-of-block code. */
    memset(lit, 0, sizeof lit);
    lit['a'] = lit['b'] = 1;
    memset(&w, 0, sizeof w);
    put_dynamic_header(&w, 1, lit, 258, dist, 1, -1);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w) + 4, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "end-of-block"), "%s", err.msg);
    /* Repeat (16) as the very first code length. */
    memset(lit, 0, sizeof lit);
    lit['a'] = lit[256] = 1;
    memset(&w, 0, sizeof w);
    put_dynamic_header(&w, 1, lit, 258, dist, 1, 16);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w) + 4, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "no previous length"), "%s", err.msg);
    /* Two distance codes of length 2 (incomplete with more than one code). */
    uint8_t dist2[2] = {2, 2};
    memset(&w, 0, sizeof w);
    put_dynamic_header(&w, 1, lit, 258, dist2, 2, -1);
    cr_assert_eq(inflate_to(w.buf, bytes_of(&w) + 4, out, sizeof out, &got, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "invalid distance code"), "%s", err.msg);

    /* The hand-made long-code stream, truncated anywhere, fails. */
    size_t n = long_code_stream(&w);
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, w.buf, k);
        cr_assert_eq(inflate_to(cut, k, out, sizeof out, &got, &err), RECALL_E_FORMAT, "prefix %zu: %s", k, err.msg);
        free(cut);
    }
}

/* ==== zip ==================================================================================== */

typedef struct {
    const char *name;
    const void *data;
    size_t len;
} tmember;

enum { ZB_DESCRIPTOR = 1, ZB_ZIP64_CD = 2, ZB_ZIP64_EOCD = 4, ZB_PAD_EXTRA = 8 };

static void w16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *p, uint32_t v) { w16(p, v & 0xffff), w16(p + 2, v >> 16); }
static void w64(uint8_t *p, uint64_t v) { w32(p, (uint32_t)v), w32(p + 4, (uint32_t)(v >> 32)); }

/* Builds a zip of stored members in buf; returns its length. */
static size_t build_zip(uint8_t *buf, const tmember *m, size_t n, unsigned opts) {
    size_t pos = 0, offs[8];
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name), extra = 0;
        uint32_t crc = rc_crc32(0, m[i].data, m[i].len);
        offs[i] = pos;
        if (opts & ZB_PAD_EXTRA) { /* torch: "FB" field padding the data to 64 bytes */
            extra = 64 - (pos + 30 + nl + 4) % 64 + 4;
        }
        uint8_t *h = buf + pos;
        memset(h, 0, 30);
        w32(h, 0x04034b50);
        w16(h + 4, 20);
        w16(h + 6, (opts & ZB_DESCRIPTOR) ? 8 : 0);
        if (!(opts & ZB_DESCRIPTOR)) {
            w32(h + 14, crc);
            w32(h + 18, (uint32_t)m[i].len);
            w32(h + 22, (uint32_t)m[i].len);
        }
        w16(h + 26, (unsigned)nl);
        w16(h + 28, (unsigned)extra);
        memcpy(h + 30, m[i].name, nl);
        if (extra) {
            w16(h + 30 + nl, 0x4246);
            w16(h + 32 + nl, (unsigned)extra - 4);
            memset(h + 34 + nl, 'Z', extra - 4);
        }
        pos += 30 + nl + extra;
        memcpy(buf + pos, m[i].data, m[i].len);
        pos += m[i].len;
        if (opts & ZB_DESCRIPTOR) {
            w32(buf + pos, 0x08074b50);
            w32(buf + pos + 4, crc);
            w32(buf + pos + 8, (uint32_t)m[i].len);
            w32(buf + pos + 12, (uint32_t)m[i].len);
            pos += 16;
        }
    }
    size_t cd = pos;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        uint8_t *c = buf + pos;
        memset(c, 0, 46);
        w32(c, 0x02014b50);
        w16(c + 4, 20);
        w16(c + 6, 20);
        w16(c + 8, (opts & ZB_DESCRIPTOR) ? 8 : 0);
        w32(c + 16, rc_crc32(0, m[i].data, m[i].len));
        int z64 = (opts & ZB_ZIP64_CD) != 0;
        w32(c + 20, z64 ? 0xFFFFFFFFu : (uint32_t)m[i].len);
        w32(c + 24, z64 ? 0xFFFFFFFFu : (uint32_t)m[i].len);
        w16(c + 28, (unsigned)nl);
        w16(c + 30, z64 ? 28 : 0);
        w32(c + 42, z64 ? 0xFFFFFFFFu : (uint32_t)offs[i]);
        memcpy(c + 46, m[i].name, nl);
        pos += 46 + nl;
        if (z64) {
            w16(buf + pos, 1);
            w16(buf + pos + 2, 24);
            w64(buf + pos + 4, m[i].len);
            w64(buf + pos + 12, m[i].len);
            w64(buf + pos + 20, offs[i]);
            pos += 28;
        }
    }
    size_t cd_size = pos - cd;
    if (opts & ZB_ZIP64_EOCD) {
        uint8_t *r = buf + pos;
        memset(r, 0, 56 + 20);
        w32(r, 0x06064b50);
        w64(r + 4, 44);
        w64(r + 24, n);
        w64(r + 32, n);
        w64(r + 40, cd_size);
        w64(r + 48, cd);
        w32(r + 56, 0x07064b50);
        w64(r + 56 + 8, pos);
        w32(r + 56 + 16, 1);
        pos += 76;
    }
    uint8_t *e = buf + pos;
    memset(e, 0, 22);
    w32(e, 0x06054b50);
    int sat = (opts & ZB_ZIP64_EOCD) != 0;
    w16(e + 8, sat ? 0xFFFF : (unsigned)n);
    w16(e + 10, sat ? 0xFFFF : (unsigned)n);
    w32(e + 12, sat ? 0xFFFFFFFFu : (uint32_t)cd_size);
    w32(e + 16, sat ? 0xFFFFFFFFu : (uint32_t)cd);
    return pos + 22;
}

static const char PAYLOAD_A[] = "first member payload";
static const char PAYLOAD_B[] = "second";

static void check_two_members(const uint8_t *buf, size_t len, const char *label) {
    rc_zip z;
    recall_err err = {0};
    uint8_t *heap = malloc(len); /* exact size, so ASan sees any over-read */
    memcpy(heap, buf, len);
    cr_assert_eq(rc_zip_open(&z, heap, len, label, &err), RECALL_OK, "%s: %s", label, err.msg);
    cr_assert_eq(z.n, 3, "%s", label);
    const char *names[3] = {"dir/a.bin", "b", "empty"};
    const char *data[3] = {PAYLOAD_A, PAYLOAD_B, ""};
    for (int i = 0; i < 3; i++) {
        const rc_zip_entry *e = rc_zip_find(&z, names[i]);
        cr_assert_not_null(e, "%s: %s", label, names[i]);
        uint8_t *out;
        size_t n;
        cr_assert_eq(rc_zip_read(&z, e, &out, &n, &err), RECALL_OK, "%s: %s", label, err.msg);
        cr_assert_eq(n, strlen(data[i]));
        cr_assert_eq(memcmp(out, data[i], n), 0);
        free(out);
    }
    cr_assert_null(rc_zip_find(&z, "dir"));
    rc_zip_close(&z);
    free(heap);
}

Test(zipnpz_zip, layouts_zip64_descriptor_padding) {
    tmember m[3] = {{"dir/a.bin", PAYLOAD_A, strlen(PAYLOAD_A)}, {"b", PAYLOAD_B, strlen(PAYLOAD_B)}, {"empty", "", 0}};
    static uint8_t buf[4096];
    check_two_members(buf, build_zip(buf, m, 3, 0), "plain");
    check_two_members(buf, build_zip(buf, m, 3, ZB_ZIP64_CD), "zip64-cd");
    check_two_members(buf, build_zip(buf, m, 3, ZB_ZIP64_EOCD), "zip64-eocd");
    /* torch .pt style: data descriptors, "FB" padding extra, zip64 end record. */
    size_t n = build_zip(buf, m, 3, ZB_DESCRIPTOR | ZB_PAD_EXTRA | ZB_ZIP64_EOCD);
    check_two_members(buf, n, "torch-style");
    rc_zip z;
    recall_err err = {0};
    cr_assert_eq(rc_zip_open(&z, buf, n, "torch-style", &err), RECALL_OK);
    for (size_t i = 0; i < z.n; i++) cr_assert_eq(z.entries[i].data_offset % 64, 0, "padded to 64");
    rc_zip_close(&z);
    /* A trailing archive comment is skipped. */
    n = build_zip(buf, m, 3, 0);
    w16(buf + n - 2, 5);
    memcpy(buf + n, "hello", 5);
    check_two_members(buf, n + 5, "comment");
}

Test(zipnpz_zip, empty_archive_and_bad_archives) {
    static uint8_t buf[4096];
    rc_zip z;
    recall_err err = {0};
    size_t n = build_zip(buf, NULL, 0, 0);
    cr_assert_eq(n, 22);
    cr_assert_eq(rc_zip_open(&z, buf, n, "empty", &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(z.n, 0);
    rc_zip_close(&z);

    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, "PK", 2, "tiny", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "tiny"), "%s", err.msg);

    tmember m[1] = {{"x.npy", PAYLOAD_A, strlen(PAYLOAD_A)}};
    size_t len = build_zip(buf, m, 1, 0);
    size_t cd = len - 22 - 46 - 5;
    /* Local header offset pointing past the data. */
    static uint8_t bad[4096];
    memcpy(bad, buf, len);
    w32(bad + cd + 42, 9999);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "x.npy") && strstr(err.msg, "9999"), "%s", err.msg);
    /* Compressed size running past the archive. */
    memcpy(bad, buf, len);
    w32(bad + cd + 20, 5000);
    w32(bad + cd + 24, 5000);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "runs past"), "%s", err.msg);
    /* NUL inside a name. */
    memcpy(bad, buf, len);
    bad[cd + 46 + 1] = 0;
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
    /* Unknown method (bzip2). */
    memcpy(bad, buf, len);
    w16(bad + cd + 10, 12);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "method 12"), "%s", err.msg);
    /* Deflate member claiming an impossible expansion is refused before allocating. */
    memcpy(bad, buf, len);
    w16(bad + cd + 10, 8);
    w32(bad + cd + 24, 0xFFFFFFF0u);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "cannot inflate"), "%s", err.msg);
    /* Saturated size without a zip64 extra. */
    memcpy(bad, buf, len);
    w32(bad + cd + 20, 0xFFFFFFFFu);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "zip64"), "%s", err.msg);
    /* Local header names another member. */
    memcpy(bad, buf, len);
    bad[30] = 'y';
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    /* Entry count larger than the directory can hold. */
    memcpy(bad, buf, len);
    w16(bad + len - 22 + 8, 50);
    w16(bad + len - 22 + 10, 50);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_E_FORMAT);
    /* CRC mismatch on a stored member names it. */
    memcpy(bad, buf, len);
    bad[30 + 5 + 3] ^= 0x01;
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_zip_open(&z, bad, len, "a", &err), RECALL_OK, "%s", err.msg);
    uint8_t *out = (uint8_t *)"poison";
    size_t out_len = 77;
    cr_assert_eq(rc_zip_read(&z, &z.entries[0], &out, &out_len, &err), RECALL_E_CHECKSUM);
    cr_assert_null(out);
    cr_assert_eq(out_len, 0);
    cr_assert(strstr(err.msg, "x.npy") && strstr(err.msg, "CRC"), "%s", err.msg);
    rc_zip_close(&z);
}

static void flip_and_read(const char *file, const char *member, int want_checksum) {
    size_t len;
    uint8_t *buf = (uint8_t *)fixture_read(file, &len);
    rc_zip z;
    recall_err err = {0};
    cr_assert_eq(rc_zip_open(&z, buf, len, file, &err), RECALL_OK, "%s", err.msg);
    const rc_zip_entry *e = rc_zip_find(&z, member);
    cr_assert_not_null(e);
    buf[e->data_offset + e->comp_size / 2] ^= 0x10;
    uint8_t *out;
    size_t n;
    recall_status st = rc_zip_read(&z, e, &out, &n, &err);
    if (want_checksum) cr_assert_eq(st, RECALL_E_CHECKSUM, "%s", err.msg);
    else cr_assert(st == RECALL_E_CHECKSUM || st == RECALL_E_FORMAT || st == RECALL_E_LIMIT, "%d %s", st, err.msg);
    cr_assert(strstr(err.msg, member), "message names the member: %s", err.msg);
    /* Other members are unaffected. */
    for (size_t i = 0; i < z.n; i++) {
        if (&z.entries[i] == e) continue;
        recall_err e2 = {0};
        cr_assert_eq(rc_zip_read(&z, &z.entries[i], &out, &n, &e2), RECALL_OK, "%s", e2.msg);
        free(out);
    }
    rc_zip_close(&z);
    free(buf);
}

Test(zipnpz_zip, flipped_byte_is_a_checksum_error) {
    flip_and_read(GOLDEN "gate.npz", "coef.npy", 1);
    flip_and_read(GOLDEN "bge_head.npz", "Wq.0.weight.npy", 1);
    flip_and_read(GOLDEN "gate_compressed.npz", "coef.npy", 0);
}

Test(zipnpz_zip, truncated_archive_fails) {
    size_t len;
    uint8_t *buf = (uint8_t *)fixture_read(GOLDEN "gate_compressed.npz", &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        rc_zip z;
        recall_err err = {0};
        cr_assert_neq(rc_zip_open(&z, cut, n, "cut", &err), RECALL_OK, "prefix %zu of %zu opened", n, len);
        cr_assert(err.msg[0], "error message set");
        free(cut);
    }
    free(buf);
}

Test(zipnpz_zip, torch_pt_if_present) {
    if (access(GOLDEN "pooler.pt", R_OK) != 0) cr_skip_test("pooler.pt fixture not copied");
    size_t len;
    uint8_t *buf = (uint8_t *)fixture_read(GOLDEN "pooler.pt", &len);
    rc_zip z;
    recall_err err = {0};
    cr_assert_eq(rc_zip_open(&z, buf, len, "pooler.pt", &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(z.n, 70);
    const rc_zip_entry *e = rc_zip_find(&z, "pooler/data.pkl");
    cr_assert_not_null(e);
    cr_assert_eq(e->size, 7751);
    for (size_t i = 0; i < z.n; i++) {
        uint8_t *out;
        size_t n;
        cr_assert_eq(rc_zip_read(&z, &z.entries[i], &out, &n, &err), RECALL_OK, "%s", err.msg);
        free(out);
    }
    rc_zip_close(&z);
    free(buf);
}

/* ==== npy ==================================================================================== */

/* Builds a .npy with the given version and header text, followed by `data`. */
static size_t make_npy(uint8_t *buf, int major, const char *header, const void *data, size_t n) {
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    if (major == 1) w16(buf + 8, (unsigned)hl);
    else w32(buf + 8, (uint32_t)hl);
    memcpy(buf + pre, header, hl);
    memcpy(buf + pre + hl, data, n);
    return pre + hl + n;
}

Test(zipnpz_npy, versions_2_and_3) {
    static const float vals[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 1e-3f};
    uint8_t buf[512];
    for (int major = 1; major <= 3; major++) {
        size_t n = make_npy(buf, major, "{\"descr\":'<f4',  'shape' : ( 2 , 3 ) ,'fortran_order':False}  \n",
                            vals, sizeof vals);
        rc_npy a;
        recall_err err = {0};
        cr_assert_eq(rc_npy_parse(buf, n, "v", &a, &err), RECALL_OK, "v%d: %s", major, err.msg);
        cr_assert_eq(a.major, major);
        cr_assert_eq(a.dtype, RC_NPY_F32);
        cr_assert_eq(a.ndim, 2);
        cr_assert_eq(a.shape[0], 2);
        cr_assert_eq(a.shape[1], 3);
        cr_assert_eq(a.numel, 6);
        cr_assert_eq(a.nbytes, 24);
        cr_assert_eq((const uint8_t *)a.data, buf + n - 24, "zero-copy view");
        cr_assert_null(a.owned);
        float *f;
        cr_assert_eq(rc_npy_to_f32(&a, "v", &f, &err), RECALL_OK);
        cr_assert_eq(memcmp(f, vals, sizeof vals), 0);
        free(f);
    }
    /* Version 4.0 and 1.1 are refused. */
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", vals, 4);
    buf[6] = 4;
    rc_npy a;
    recall_err err = {0};
    cr_assert_eq(rc_npy_parse(buf, n, "v4", &a, &err), RECALL_E_VERSION);
    cr_assert(strstr(err.msg, "4.0"), "%s", err.msg);
}

static recall_status parse_hdr(const char *header, size_t data_len, recall_err *err) {
    static uint8_t buf[1024];
    uint8_t zeros[64] = {0};
    size_t n = make_npy(buf, 1, header, zeros, data_len);
    rc_npy a;
    memset(err, 0, sizeof *err);
    return rc_npy_parse(buf, n, "hdr", &a, err);
}

Test(zipnpz_npy, dtypes_refused_by_name) {
    recall_err err;
    cr_assert_eq(parse_hdr("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "'>f4'"), "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "'<c8'"), "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '<c16', 'fortran_order': False, 'shape': (), }", 16, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "'<c16'"), "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '|O', 'fortran_order': False, 'shape': (), }", 8, &err), RECALL_E_UNSUPPORTED);
    cr_assert_eq(parse_hdr("{'descr': '|f4', 'fortran_order': False, 'shape': (), }", 4, &err), RECALL_E_UNSUPPORTED);
    cr_assert_eq(parse_hdr("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4, &err),
                 RECALL_E_UNSUPPORTED);
    cr_assert_eq(parse_hdr("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "fortran_order"), "%s", err.msg);
    /* Accepted: one-byte types with either order mark, and every little-endian numeric type. */
    cr_assert_eq(parse_hdr("{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", 3, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (1L,), }", 8, &err), RECALL_OK, "%s", err.msg);
}

Test(zipnpz_npy, malformed_headers) {
    recall_err err;
    const char *bad[] = {
        "{'descr': '<f4', 'fortran_order': False}",                       /* no shape */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", /* unknown key */
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
        "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
        "['descr']",
        "",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1234567890123456789,)}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        recall_status st = parse_hdr(bad[i], 8, &err);
        cr_assert_eq(st, RECALL_E_FORMAT, "case %zu (%s): %d %s", i, bad[i], st, err.msg);
    }
    cr_assert_eq(parse_hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, &err), RECALL_OK, "%s", err.msg);
    /* Data length must match exactly. */
    cr_assert_eq(parse_hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 7, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "7 bytes") && strstr(err.msg, "needs 8") && strstr(err.msg, "truncated"), "%s", err.msg);
    cr_assert_eq(parse_hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 9, &err), RECALL_E_FORMAT);
    /* Header length past the end. */
    uint8_t buf[64];
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", "", 0);
    rc_npy a;
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_npy_parse(buf, n - 1, "short", &a, &err), RECALL_E_FORMAT);
    cr_assert_eq(rc_npy_parse(buf, 5, "short", &a, &err), RECALL_E_FORMAT);
}

Test(zipnpz_npy, conversions_to_f32_and_i64) {
    uint8_t buf[256];
    recall_err err = {0};
    rc_npy a;
    float *f;
    static const uint16_t halves[5] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x7bff};
    size_t n = make_npy(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }", halves, sizeof halves);
    cr_assert_eq(rc_npy_parse(buf, n, "h", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npy_to_f32(&a, "h", &f, &err), RECALL_OK);
    cr_assert_eq(f32_bits(f[0]), 0x3f800000u);
    cr_assert_eq(f32_bits(f[1]), 0xc0000000u);
    cr_assert_eq(f32_bits(f[2]), 0x33800000u, "2^-24 subnormal");
    cr_assert_eq(f32_bits(f[3]), 0x7f800000u);
    cr_assert_eq(f[4], 65504.0f);
    free(f);
    static const double doubles[2] = {0.1, -1e300};
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", doubles, sizeof doubles);
    cr_assert_eq(rc_npy_parse(buf, n, "d", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npy_to_f32(&a, "d", &f, &err), RECALL_OK);
    cr_assert_eq(f32_bits(f[0]), f32_bits(0.1f));
    cr_assert_eq(f32_bits(f[1]), 0xff800000u);
    free(f);
    static const int64_t longs[2] = {-7, 16777217};
    n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", longs, sizeof longs);
    cr_assert_eq(rc_npy_parse(buf, n, "l", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npy_to_f32(&a, "l", &f, &err), RECALL_OK);
    cr_assert_eq(f[0], -7.0f);
    cr_assert_eq(f[1], 16777216.0f, "round to nearest even");
    free(f);
    int64_t v = 0;
    cr_assert_eq(rc_npy_scalar_i64(&a, "l", &v, &err), RECALL_E_SHAPE, "two elements is not a scalar");
    n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", &longs[0], 4);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_npy_parse(buf, n, "i", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npy_scalar_i64(&a, "i", &v, &err), RECALL_OK);
    cr_assert_eq(v, -7);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", &longs[0], 4);
    cr_assert_eq(rc_npy_parse(buf, n, "f", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npy_scalar_i64(&a, "f", &v, &err), RECALL_E_SHAPE, "float is not an integer");
    cr_assert_eq(rc_npy_to_rc_dtype(RC_NPY_F32), RC_DT_F32);
    cr_assert_eq(rc_npy_to_rc_dtype(RC_NPY_U8), RC_DT_U8);
    cr_assert_eq(rc_npy_to_rc_dtype(RC_NPY_F64), 0);
}

/* ==== npz ==================================================================================== */

Test(zipnpz_npz, gate_stored_and_deflate_identical) {
    rc_npz *s, *c;
    recall_err err = {0};
    cr_assert_eq(rc_npz_open(GOLDEN "gate.npz", &s, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_open(GOLDEN "gate_compressed.npz", &c, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_zip(s)->entries[0].method, 0);
    cr_assert_eq(rc_npz_zip(c)->entries[0].method, 8);
    static const char *keys[5] = {"coef", "intercept", "mean", "scale", "thresh"};
    cr_assert_eq(rc_npz_count(s), 5);
    for (int i = 0; i < 5; i++) {
        char key[32];
        cr_assert_str_eq(rc_npz_key(s, (size_t)i, key, sizeof key), keys[i]);
        rc_npy a, b;
        cr_assert_eq(rc_npz_get(s, keys[i], &a, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_npz_get(c, keys[i], &b, &err), RECALL_OK, "%s", err.msg);
        cr_assert_null(a.owned, "stored member viewed in place");
        cr_assert_not_null(b.owned, "deflated member owns its bytes");
        cr_assert_eq(a.dtype, RC_NPY_F32);
        cr_assert_eq(b.dtype, RC_NPY_F32);
        cr_assert_eq(a.ndim, b.ndim);
        cr_assert_eq(a.nbytes, b.nbytes);
        cr_assert_eq(memcmp(a.data, b.data, a.nbytes), 0, "%s differs", keys[i]);
        int vec = i == 0 || i == 2 || i == 3;
        cr_assert_eq(a.ndim, vec ? 1 : 0, "%s", keys[i]);
        cr_assert_eq(a.numel, vec ? 192u : 1u);
        if (vec) cr_assert_eq(a.shape[0], 192);
        rc_npy_free(&a);
        rc_npy_free(&b);
    }
    float *coef;
    int ndim;
    int64_t shape[RC_NPY_MAX_DIMS];
    cr_assert_eq(rc_npz_get_f32(c, "coef", &coef, &ndim, shape, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(ndim, 1);
    cr_assert_eq(shape[0], 192);
    cr_assert_eq(f32_bits(coef[0]), 0x3db7fd29u);
    cr_assert_eq(f32_bits(coef[1]), 0xbf4af8b7u);
    free(coef);
    float *icpt;
    cr_assert_eq(rc_npz_get_f32(s, "intercept", &icpt, &ndim, NULL, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(ndim, 0);
    cr_assert_eq(f32_bits(icpt[0]), 0xc045165fu);
    free(icpt);
    /* Full member name works too; absent key names the members. */
    cr_assert(rc_npz_has(s, "scale.npy"));
    cr_assert(!rc_npz_has(s, "scal"));
    rc_npy a;
    cr_assert_eq(rc_npz_get(s, "nope", &a, &err), RECALL_E_MISSING);
    cr_assert(strstr(err.msg, "'nope'") && strstr(err.msg, "coef.npy"), "%s", err.msg);
    rc_npz_close(s);
    rc_npz_close(c);
}

Test(zipnpz_npz, flipped_byte_through_npz_get) {
    const char *files[2] = {GOLDEN "gate.npz", GOLDEN "gate_compressed.npz"};
    for (int fi = 0; fi < 2; fi++) {
        size_t len;
        uint8_t *buf = (uint8_t *)fixture_read(files[fi], &len);
        rc_zip z;
        recall_err err = {0};
        cr_assert_eq(rc_zip_open(&z, buf, len, "x", &err), RECALL_OK);
        const rc_zip_entry *e = rc_zip_find(&z, "mean.npy");
        buf[e->data_offset + e->comp_size - 9] ^= 0x04;
        rc_zip_close(&z);
        rc_npz *npz;
        cr_assert_eq(rc_npz_open_mem(buf, len, files[fi], &npz, &err), RECALL_OK, "%s", err.msg);
        rc_npy a;
        recall_status st = rc_npz_get(npz, "mean", &a, &err);
        if (fi == 0) cr_assert_eq(st, RECALL_E_CHECKSUM, "%s", err.msg);
        else cr_assert_neq(st, RECALL_OK);
        cr_assert(strstr(err.msg, "mean.npy") && strstr(err.msg, files[fi]), "%s", err.msg);
        cr_assert_null(a.data);
        memset(&err, 0, sizeof err);
        cr_assert_eq(rc_npz_get(npz, "coef", &a, &err), RECALL_OK, "%s", err.msg);
        rc_npy_free(&a);
        rc_npz_close(npz);
        free(buf);
    }
}

Test(zipnpz_npz, bge_head_scalars_and_shapes) {
    rc_npz *z;
    recall_err err = {0};
    cr_assert_eq(rc_npz_open(GOLDEN "bge_head.npz", &z, &err), RECALL_OK, "%s", err.msg);
    int64_t q = 0, k = 0, d = 0;
    cr_assert_eq(rc_npz_get_i64(z, "qdim", &q, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_get_i64(z, "kdim", &k, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_get_i64(z, "d", &d, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(q, 192);
    cr_assert_eq(k, 64);
    cr_assert_eq(d, 32);
    rc_npy w;
    cr_assert_eq(rc_npz_get(z, "Wq.0.weight", &w, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(w.ndim, 2);
    cr_assert_eq(w.shape[0], 32);
    cr_assert_eq(w.shape[1], 192);
    cr_assert_str_eq(w.descr, "<f4");
    rc_npy_free(&w);
    float *f;
    cr_assert_eq(rc_npz_get_f32(z, "Wq.0.weight", &f, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(f32_bits(f[0]), 0xbec1cca0u);
    cr_assert_eq(f32_bits(f[31 * 192 + 191]), 0xbe5c91b6u);
    free(f);
    cr_assert_eq(rc_npz_get_i64(z, "Wq.0.bias", &q, &err), RECALL_E_SHAPE);
    rc_npz_close(z);
}

Test(zipnpz_npz, nf4_layer_u8_and_f32) {
    rc_npz *z;
    recall_err err = {0};
    cr_assert_eq(rc_npz_open(GOLDEN "nf4_layer0_q_proj.npz", &z, &err), RECALL_OK, "%s", err.msg);
    rc_npy p, a;
    cr_assert_eq(rc_npz_get(z, "packed", &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(p.dtype, RC_NPY_U8);
    cr_assert_eq(rc_npy_to_rc_dtype(p.dtype), RC_DT_U8);
    cr_assert_eq(p.ndim, 1);
    cr_assert_eq(p.shape[0], 2048);
    const uint8_t *bytes = p.data;
    cr_assert(bytes[0] == 138 && bytes[1] == 7 && bytes[2] == 185 && bytes[3] == 35 && bytes[2047] == 161);
    cr_assert_eq(rc_npz_get(z, "absmax", &a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(a.dtype, RC_NPY_F32);
    cr_assert_eq(a.ndim, 1);
    cr_assert_eq(a.shape[0], 64);
    uint32_t first, last;
    memcpy(&first, a.data, 4);
    memcpy(&last, (const uint8_t *)a.data + 63 * 4, 4);
    cr_assert_eq(first, 0x3e9c0000u);
    cr_assert_eq(last, 0x3e940000u);
    rc_npy_free(&p);
    rc_npy_free(&a);
    rc_npz_close(z);
}

Test(zipnpz_npz, encoder_matches_numpy_bytes) {
    /* Re-encoding each gate/bge_head array gives the member numpy wrote, byte for byte. */
    const char *files[2] = {GOLDEN "gate.npz", GOLDEN "bge_head.npz"};
    for (int fi = 0; fi < 2; fi++) {
        rc_npz *z;
        recall_err err = {0};
        cr_assert_eq(rc_npz_open(files[fi], &z, &err), RECALL_OK, "%s", err.msg);
        const rc_zip *zip = rc_npz_zip(z);
        for (size_t i = 0; i < zip->n; i++) {
            uint8_t *raw;
            size_t raw_len;
            cr_assert_eq(rc_zip_read(zip, &zip->entries[i], &raw, &raw_len, &err), RECALL_OK);
            rc_npy a;
            cr_assert_eq(rc_npy_parse(raw, raw_len, zip->entries[i].name, &a, &err), RECALL_OK, "%s", err.msg);
            /* The encoder takes host-order elements: copy to an aligned buffer first. */
            void *host = malloc(a.nbytes + 1);
            memcpy(host, a.data, a.nbytes);
            uint8_t *enc;
            size_t enc_len;
            cr_assert_eq(rc_npy_encode(a.dtype, a.ndim, a.shape, host, &enc, &enc_len, &err), RECALL_OK);
            cr_assert_eq(enc_len, raw_len, "%s", zip->entries[i].name);
            cr_assert_eq(memcmp(enc, raw, raw_len), 0, "%s", zip->entries[i].name);
            free(enc);
            free(host);
            free(raw);
        }
        rc_npz_close(z);
    }
}

static int have_numpy(void) {
    return access("/usr/bin/python3", X_OK) == 0 &&
           system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

Test(zipnpz_npz, writer_round_trip) {
    char dir[] = "/tmp/recall_npz_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/out.npz", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()); /* atomic_file.h */

    float a[12];
    for (int i = 0; i < 12; i++) a[i] = (float)i * 0.5f - 1.0f;
    const int32_t b[5] = {-2, 0, 7, 2147483647, -2147483647 - 1};
    const int64_t c = 1234567890123;
    const int64_t sa[2] = {3, 4}, sb[1] = {5};
    rc_npz_writer *w;
    recall_err err = {0};
    cr_assert_eq(rc_npz_writer_new(&w, &err), RECALL_OK);
    cr_assert_eq(rc_npz_writer_add(w, "a", RC_NPY_F32, 2, sa, a, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_writer_add(w, "b", RC_NPY_I32, 1, sb, b, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_writer_add(w, "layers.0.c", RC_NPY_I64, 0, NULL, &c, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_writer_add(w, "a", RC_NPY_F32, 2, sa, a, &err), RECALL_E_ARG, "duplicate key");
    memset(&err, 0, sizeof err);
    const int64_t neg[1] = {-1};
    cr_assert_eq(rc_npz_writer_add(w, "n", RC_NPY_F32, 1, neg, a, &err), RECALL_E_ARG);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_npz_writer_write(w, path, &err), RECALL_OK, "%s", err.msg);
    cr_assert_neq(access(path, F_OK), -1);
    cr_assert_eq(access(tmp, F_OK), -1, "temporary file removed");

    rc_npz *z;
    cr_assert_eq(rc_npz_open(path, &z, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_count(z), 3);
    rc_npy ra, rb;
    cr_assert_eq(rc_npz_get(z, "a", &ra, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(ra.dtype, RC_NPY_F32);
    cr_assert_eq(ra.ndim, 2);
    cr_assert(ra.shape[0] == 3 && ra.shape[1] == 4);
    cr_assert_eq(ra.data_offset % 64, 0, "numpy aligns the data to 64 bytes");
    cr_assert_eq(memcmp(ra.data, a, sizeof a), 0);
    cr_assert_eq(rc_npz_get(z, "b", &rb, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rb.dtype, RC_NPY_I32);
    cr_assert_eq(rb.ndim, 1);
    cr_assert_eq(rb.shape[0], 5);
    cr_assert_eq(memcmp(rb.data, b, sizeof b), 0);
    int64_t rc = 0;
    cr_assert_eq(rc_npz_get_i64(z, "layers.0.c", &rc, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc, c);
    rc_npy_free(&ra);
    rc_npy_free(&rb);
    rc_npz_close(z);

    /* In-memory bytes equal the file. */
    uint8_t *mem;
    size_t mem_len, file_len;
    cr_assert_eq(rc_npz_writer_bytes(w, &mem, &mem_len, &err), RECALL_OK);
    uint8_t *file = (uint8_t *)fixture_read(path, &file_len);
    cr_assert_eq(mem_len, file_len);
    cr_assert_eq(memcmp(mem, file, mem_len), 0);
    free(mem);
    free(file);

    if (have_numpy()) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import numpy as np, io, zipfile, sys\n"
                 "d = np.load(sys.argv[1])\n"
                 "assert sorted(d.files) == ['a', 'b', 'layers.0.c'], d.files\n"
                 "a = d['a']; assert a.dtype == np.float32 and a.shape == (3, 4)\n"
                 "assert (a.ravel() == np.arange(12, dtype=np.float32) * 0.5 - 1).all()\n"
                 "b = d['b']; assert b.dtype == np.int32 and b.tolist() == [-2, 0, 7, 2**31 - 1, -2**31]\n"
                 "c = d['layers.0.c']; assert c.dtype == np.int64 and c.shape == () and int(c) == 1234567890123\n"
                 "z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None\n"
                 "for k in d.files:\n"
                 "    f = io.BytesIO(); np.save(f, d[k]); assert z.read(k + '.npy') == f.getvalue(), k\n"
                 "\" %s",
                 path);
        cr_assert_eq(system(cmd), 0, "numpy.load rejected %s", path);
    } else {
        cr_log_info("python3/numpy not available: numpy.load check skipped");
    }

    /* A failed write leaves neither PATH nor PATH.tmp.PID. */
    char bad_path[160];
    snprintf(bad_path, sizeof bad_path, "%s/missing-dir/out.npz", dir);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_npz_writer_write(w, bad_path, &err), RECALL_E_IO);
    cr_assert(strstr(err.msg, "missing-dir"), "%s", err.msg);
    rc_npz_writer_free(w);
    remove(path);
    cr_assert_eq(rmdir(dir), 0, "directory left empty");
}
