/* test_blob.c - blob writer/loader round trip and every corruption the loader must refuse. */
#include "blob.h"
#include "checksum.h"
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(checksum, xxh64_reference_vectors) {
    cr_expect_eq(rc_xxh64("", 0, 0), 0xEF46DB3751D8E999ULL);
    cr_expect_eq(rc_xxh64("abc", 3, 0), 0x44BC2CF5AD770999ULL);
    /* streaming in odd pieces equals one shot */
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 7 + 3);
    rc_xxh64_state s;
    rc_xxh64_init(&s, 0);
    size_t pos = 0, step = 1;
    while (pos < sizeof buf) {
        size_t n = step < sizeof buf - pos ? step : sizeof buf - pos;
        rc_xxh64_update(&s, buf + pos, n);
        pos += n;
        step = step * 3 % 41 + 1;
    }
    cr_expect_eq(rc_xxh64_digest(&s), rc_xxh64(buf, sizeof buf, 0));
}

Test(checksum, crc32_reference_vector) {
    cr_expect_eq(rc_crc32(0, "123456789", 9), 0xCBF43926u);
}

static char *tmp_path(const char *tag) {
    static char p[256];
    snprintf(p, sizeof p, "build/test_blob_%s_%d.blob", tag, (int)getpid());
    return p;
}

/* Writes a small blob with config keys, an f32, a bf16 and an nf4 tensor, and a section. */
static void write_sample(const char *path) {
    rc_blob_writer *w;
    recall_err err = {0};
    cr_assert_eq(rc_writer_new(&w, &err), RECALL_OK);
    int64_t layers[3] = {8, 14, 20};
    cr_assert_eq(rc_writer_kv_i64(w, "gate.layers", layers, 3, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_f64(w, "qwen2.rope_theta", 10000.0, &err), RECALL_OK);
    cr_assert_eq(rc_writer_kv_str(w, "qwen2.weights", "nf4", &err), RECALL_OK);
    float *a = malloc(6 * sizeof *a);
    for (int i = 0; i < 6; i++) a[i] = (float)i - 2.5f;
    int64_t sa[] = {2, 3};
    cr_assert_eq(rc_writer_tensor(w, "a", RC_DT_F32, 2, sa, a, 24, &err), RECALL_OK);
    uint16_t *b = malloc(4 * sizeof *b);
    for (int i = 0; i < 4; i++) b[i] = (uint16_t)(0x3F80 + i);
    int64_t sb[] = {4};
    cr_assert_eq(rc_writer_tensor(w, "b", RC_DT_BF16, 1, sb, b, 8, &err), RECALL_OK);
    size_t nb = (size_t)rc_nf4_nbytes(128);
    uint8_t *q = calloc(1, nb);
    for (int i = 0; i < 64; i++) q[i] = (uint8_t)i;
    float *am = (float *)(q + rc_nf4_absmax_offset(128));
    am[0] = 0.5f;
    am[1] = 2.0f;
    int64_t sq[] = {2, 64};
    cr_assert_eq(rc_writer_tensor(w, "q", RC_DT_NF4, 2, sq, q, nb, &err), RECALL_OK);
    char *sec = malloc(5);
    memcpy(sec, "hello", 5);
    cr_assert_eq(rc_writer_section(w, RC_SECT_TOK_BPE, sec, 5, &err), RECALL_OK);
    cr_assert_eq(rc_writer_write(w, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(w);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

Test(blob, round_trip_views) {
    const char *p = tmp_path("rt");
    write_sample(p);
    rc_blob *b;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(p, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg);
    const rc_tensor *a = rc_blob_find(b, "a");
    cr_assert(a);
    cr_expect_eq(a->dtype, RC_DT_F32);
    cr_expect_eq(a->ndim, 2);
    cr_expect_eq(a->shape[0], 2);
    cr_expect_eq(a->shape[1], 3);
    cr_expect_eq(((const float *)a->data)[5], 2.5f);
    cr_expect_eq(a->offset % RECALL_BLOB_ALIGN, 0);
    const rc_tensor *q = rc_blob_find(b, "q");
    cr_assert(q);
    cr_expect_eq(q->numel, 128);
    cr_expect_eq(((const uint8_t *)q->data)[63], 63);
    cr_expect_eq(q->absmax[1], 2.0f);
    cr_expect_eq((uintptr_t)q->absmax % 64, 0);
    int64_t v;
    double f;
    cr_expect_eq(rc_blob_get_i64(b, "gate.layers", &v, &err), RECALL_OK);
    cr_expect_eq(v, 8);
    cr_expect_eq(rc_blob_kv_find(b, "gate.layers")->v.i[2], 20);
    cr_expect_eq(rc_blob_get_f64(b, "qwen2.rope_theta", &f, &err), RECALL_OK);
    cr_expect_eq(f, 10000.0);
    size_t size;
    const char *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
    cr_assert(sec);
    cr_expect_eq(size, 5);
    cr_expect(memcmp(sec, "hello", 5) == 0);
    cr_expect_null(rc_blob_section(b, RC_SECT_TOK_WORDPIECE, &size));
    recall_err e2 = {0};
    cr_expect_eq(rc_blob_get_i64(b, "nope", &v, &e2), RECALL_E_MISSING);
    cr_expect(strstr(e2.msg, "nope"));
    const rc_tensor *t;
    int64_t want[] = {3, 2};
    recall_err e3 = {0};
    cr_expect_eq(rc_blob_expect(b, "a", 1u << RC_DT_F32, 2, want, &t, &e3), RECALL_E_SHAPE);
    cr_expect(strstr(e3.msg, "[2,3]") && strstr(e3.msg, "[3,2]"), "%s", e3.msg);
    cr_expect_eq(rc_blob_verify(b, &err), RECALL_OK);
    rc_blob_close(b);
    unlink(p);
}

Test(blob, writing_is_deterministic) {
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s", tmp_path("d1"));
    write_sample(p1);
    snprintf(p2, sizeof p2, "%s", tmp_path("d2"));
    write_sample(p2);
    size_t l1, l2;
    unsigned char *a = slurp(p1, &l1), *b = slurp(p2, &l2);
    cr_assert_eq(l1, l2);
    cr_expect(memcmp(a, b, l1) == 0);
    free(a);
    free(b);
    unlink(p1);
    unlink(p2);
}

/* Opens a corrupted in-memory copy; returns the status and message. */
static recall_status open_bytes(unsigned char *buf, size_t len, unsigned flags, recall_err *err) {
    rc_blob *b = NULL;
    recall_status s = rc_blob_open_mem(buf, len, "corrupt.blob", flags, &b, err);
    rc_blob_close(b);
    return s;
}

static void reseal_header(unsigned char *buf) {
    rc_blob_header *h = (rc_blob_header *)buf;
    h->header_checksum = rc_xxh64(h, offsetof(rc_blob_header, header_checksum), 0);
}

Test(blob, refuses_corruption) {
    const char *p = tmp_path("bad");
    write_sample(p);
    size_t len;
    unsigned char *orig = slurp(p, &len);
    unsigned char *buf = malloc(len);
    recall_err err;

    /* truncated */
    memcpy(buf, orig, len);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len - 1, 0, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "truncated"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, 50, 0, &err), RECALL_E_FORMAT);

    /* wrong magic */
    memcpy(buf, orig, len);
    buf[0] = 'X';
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "magic"), "%s", err.msg);

    /* future version */
    memcpy(buf, orig, len);
    ((rc_blob_header *)buf)->version = RECALL_BLOB_VERSION + 1;
    reseal_header(buf);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_VERSION);
    cr_expect(strstr(err.msg, "newer"), "%s", err.msg);

    /* foreign byte order */
    memcpy(buf, orig, len);
    ((rc_blob_header *)buf)->endian = 0x04030201u;
    reseal_header(buf);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_VERSION);

    /* a header byte changed without resealing */
    memcpy(buf, orig, len);
    buf[20] ^= 1;
    memset(&err, 0, sizeof err);
    cr_expect_neq(open_bytes(buf, len, 0, &err), RECALL_OK);

    /* one flipped byte in every tensor's data: structural open passes, verify fails */
    const rc_blob_sect *sect = (const rc_blob_sect *)(orig + ((rc_blob_header *)orig)->sect_off);
    const rc_blob_tensor *tt = (const rc_blob_tensor *)(orig + sect[1].offset);
    for (uint32_t i = 0; i < sect[1].count; i++) {
        memcpy(buf, orig, len);
        buf[tt[i].offset + tt[i].nbytes - 1] ^= 0x10;
        memset(&err, 0, sizeof err);
        cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_OK, "%s", err.msg);
        memset(&err, 0, sizeof err);
        cr_expect_eq(open_bytes(buf, len, RC_OPEN_VERIFY, &err), RECALL_E_CHECKSUM);
        cr_expect(strstr(err.msg, tt[i].name), "%s", err.msg);
    }

    /* a flipped byte in the config section is caught even without verify */
    memcpy(buf, orig, len);
    buf[sect[0].offset + 3] ^= 1;
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_CHECKSUM);

    /* a flipped padding byte is caught by the whole-body checksum */
    memcpy(buf, orig, len);
    buf[len - 1] ^= 1; /* q's absmax ends the file; pick a padding byte instead */
    memcpy(buf, orig, len);
    buf[tt[0].offset + tt[0].nbytes + 1] ^= 1;
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, RC_OPEN_VERIFY, &err), RECALL_E_CHECKSUM);

    /* tensor offsets out of range / overlapping (table resealed so only the bound check fires) */
    memcpy(buf, orig, len);
    rc_blob_sect *ws = (rc_blob_sect *)(buf + ((rc_blob_header *)buf)->sect_off);
    rc_blob_tensor *wt = (rc_blob_tensor *)(buf + ws[1].offset);
    wt[0].offset = len;
    ws[1].checksum = rc_xxh64(wt, ws[1].size, 0);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "'a'"), "%s", err.msg);
    memcpy(buf, orig, len);
    wt[1].offset = wt[0].offset;
    ws[1].checksum = rc_xxh64(wt, ws[1].size, 0);
    memset(&err, 0, sizeof err);
    cr_expect_eq(open_bytes(buf, len, 0, &err), RECALL_E_FORMAT);
    cr_expect(strstr(err.msg, "overlap"), "%s", err.msg);

    free(buf);
    free(orig);
    unlink(p);
}

Test(blob, failed_write_leaves_nothing) {
    rc_blob_writer *w;
    recall_err err = {0};
    cr_assert_eq(rc_writer_new(&w, &err), RECALL_OK);
    float *a = malloc(4);
    int64_t s1[] = {1};
    cr_assert_eq(rc_writer_tensor(w, "a", RC_DT_F32, 1, s1, a, 4, &err), RECALL_OK);
    cr_expect_eq(rc_writer_write(w, "build/no/such/dir/x.blob", NULL, NULL, &err), RECALL_E_IO);
    cr_expect_neq(access("build/no/such/dir/x.blob", F_OK), 0);
    /* a size that does not match the shape is refused up front */
    float *bad = malloc(8);
    memset(&err, 0, sizeof err);
    cr_expect_eq(rc_writer_tensor(w, "bad", RC_DT_F32, 1, s1, bad, 8, &err), RECALL_E_ARG);
    rc_writer_free(w);
}

/* The three ways to load a blob (file mapping, read into malloc, copy into huge-page-advised
 * anonymous memory) expose the same tensors with the same bytes. */
Test(blob, load_modes_agree) {
    const char *path = fixture_worldA_blob("nf4");
    const unsigned modes[] = {RC_OPEN_NO_MMAP, RC_OPEN_HUGEPAGES | RC_OPEN_VERIFY};
    rc_blob *ref = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(path, 0, &ref, &err), RECALL_OK, "%s", err.msg);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        rc_blob *b = NULL;
        cr_assert_eq(rc_blob_open(path, modes[m], &b, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_blob_n_tensors(b), rc_blob_n_tensors(ref));
        for (size_t i = 0; i < rc_blob_n_tensors(ref); i++) {
            const rc_tensor *a = rc_blob_tensor_at(ref, i), *t = rc_blob_tensor_at(b, i);
            cr_assert_str_eq(t->name, a->name);
            cr_assert_eq(t->nbytes, a->nbytes);
            cr_assert_neq(t->data, a->data, "a separate copy");
            cr_assert_eq(memcmp(t->data, a->data, a->nbytes), 0, "tensor %s differs (mode %u)", a->name, modes[m]);
        }
        rc_blob_close(b);
    }
    rc_blob_close(ref);
}
