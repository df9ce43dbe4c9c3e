/* test_api_abi.c - the option structs' size field (recall.h, docs/API.md) and the public scoring
 * rules, through the public API only:
 *   init_writes_only_struct_size   the _init functions write exactly struct_size bytes (a poisoned
 *                                  tail stays), zero the bytes they do not know, set struct_size
 *   newer_caller_zero_tail_accepted  a struct longer than the library's, its tail zero, opens; a
 *                                  nonzero byte past the known fields (even in the library's own
 *                                  trailing padding) is RECALL_E_VERSION naming the sizes
 *   too_small_refused              struct_size below this API's first layout: RECALL_E_ARG
 *   version7_sized_structs         recall_model_get_dims writes only the caller's struct_size bytes;
 *                                  recall_forward_out takes the size rules of the option structs;
 *                                  a capture buffer shorter than the model needs is refused naming
 *                                  both numbers; captures equal recall_forward's logits bitwise
 *   the version-1 layouts (programs built against the previous header) are tests/abi_v1.c
 *   scoring_rules_match_reference  recall_eval_recall_ok / _retrieved_ok against normalise +
 *                                  strstr on random strings; recall_longctx_exact on examples */
#include "fixture.h"
#include "recall.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define POISON 0xa5
#define EXTRA 64

/* Bytes past the last field this library knows: the end of the fields declared in recall.h. */
#define OPEN_END (offsetof(recall_open_opts, numerics) + sizeof(int))
#define OPEN_MIN (offsetof(recall_open_opts, rope_scaling) + sizeof(const char *))
#define LOOP_END (offsetof(recall_loop_opts, rerank) + sizeof(int))
#define DIMS_END (offsetof(recall_model_dims, pooler_hidden) + sizeof(int))
#define FWD_OUT_END (offsetof(recall_forward_out, q_gate_len) + sizeof(size_t))
/* The first layout of API version 2: no caller's struct is smaller. */
#define LOOP_MIN (offsetof(recall_loop_opts, draft) + sizeof(int))

static recall_model *open_worldA(void) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    recall_model *m = NULL;
    recall_err err = {0};
    cr_assert_eq(recall_open(blob, NULL, &m, &err), RECALL_OK, "%s", err.msg);
    return m;
}

Test(api_abi, init_writes_only_struct_size) {
    _Alignas(16) unsigned char buf[sizeof(recall_loop_opts) + EXTRA];
    for (size_t size = sizeof(recall_open_opts); size <= sizeof(recall_open_opts) + 16; size += 8) {
        memset(buf, POISON, sizeof buf);
        recall_open_opts_init2((recall_open_opts *)(void *)buf, size);
        cr_assert_eq(((recall_open_opts *)(void *)buf)->struct_size, size);
        for (size_t i = sizeof(size_t); i < size; i++) cr_assert_eq(buf[i], 0, "size %zu: byte %zu", size, i);
        for (size_t i = size; i < sizeof buf; i++) cr_assert_eq(buf[i], POISON, "size %zu: byte %zu written", size, i);
    }
    recall_model *m = open_worldA();
    recall_loop_opts ref;
    recall_loop_opts_init(m, &ref);
    cr_assert_eq(ref.struct_size, sizeof ref);
    cr_assert(ref.window > 0 && ref.chunk > 0 && ref.turn_cap > 0 && ref.mode == RECALL_MODE_FAITHFUL);
    for (size_t size = sizeof(recall_loop_opts); size <= sizeof(recall_loop_opts) + 16; size += 8) {
        memset(buf, POISON, sizeof buf);
        recall_loop_opts *o = (recall_loop_opts *)(void *)buf;
        recall_loop_opts_init2(m, o, size);
        cr_assert_eq(o->struct_size, size);
        cr_assert(o->window == ref.window && o->chunk == ref.chunk && o->block == ref.block && o->k == ref.k &&
                  o->turn_cap == ref.turn_cap && !memcmp(&o->threshold, &ref.threshold, sizeof ref.threshold));
        for (size_t i = LOOP_END; i < size; i++) cr_assert_eq(buf[i], 0, "size %zu: byte %zu not zeroed", size, i);
        for (size_t i = size; i < sizeof buf; i++) cr_assert_eq(buf[i], POISON, "size %zu: byte %zu written", size, i);
    }
    recall_close(m);
}

Test(api_abi, newer_caller_zero_tail_accepted, .timeout = 120) {
    recall_model *m = open_worldA();
    const char *blob = fixture_worldA_blob("f32");
    _Alignas(16) unsigned char buf[sizeof(recall_loop_opts) + EXTRA];
    recall_err err = {0};
    /* open: a caller 24 bytes newer, the new fields zero */
    recall_open_opts *oo = (recall_open_opts *)(void *)buf;
    recall_open_opts_init2(oo, sizeof *oo + 24);
    recall_model *m2 = NULL;
    cr_assert_eq(recall_open(blob, oo, &m2, &err), RECALL_OK, "%s", err.msg);
    recall_close(m2);
    buf[sizeof *oo + 20] = 1;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_open(blob, oo, &m2, &err), RECALL_E_VERSION);
    cr_assert_null(m2);
    char want[96];
    snprintf(want, sizeof want, "of %zu bytes set byte %zu, past the %zu bytes", sizeof *oo + 24, sizeof *oo + 20,
             (size_t)OPEN_END);
    cr_assert(strstr(err.msg, want), "%s (wanted '%s')", err.msg, want);
    /* the loop: the same, and a nonzero byte in the library's own trailing padding counts too */
    recall_loop_opts *lo = (recall_loop_opts *)(void *)buf;
    recall_loop *l = NULL;
    for (size_t extra = 0; extra <= 24; extra += 24) {
        recall_loop_opts_init2(m, lo, sizeof *lo + extra);
        memset(&err, 0, sizeof err);
        cr_assert_eq(recall_loop_open(m, lo, &l, &err), RECALL_OK, "extra %zu: %s", extra, err.msg);
        recall_loop_close(l);
        l = NULL;
    }
    const size_t bad[] = {LOOP_END, sizeof *lo + 3};
    for (size_t b = 0; b < 2; b++) {
        if (bad[b] >= sizeof *lo + 24) continue;
        recall_loop_opts_init2(m, lo, sizeof *lo + 24);
        buf[bad[b]] = 7;
        memset(&err, 0, sizeof err);
        cr_assert_eq(recall_loop_open(m, lo, &l, &err), RECALL_E_VERSION, "byte %zu: %s", bad[b], err.msg);
        cr_assert_null(l);
    }
    recall_close(m);
}

Test(api_abi, too_small_refused) {
    recall_model *m = open_worldA();
    const char *blob = fixture_worldA_blob("f32");
    recall_err err = {0};
    recall_open_opts oo;
    recall_open_opts_init(&oo);
    oo.struct_size = 0; /* a struct set up by hand, struct_size forgotten */
    recall_model *m2 = NULL;
    cr_assert_eq(recall_open(blob, &oo, &m2, &err), RECALL_E_ARG);
    cr_assert(strstr(err.msg, "struct_size 0"), "%s", err.msg);
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.struct_size = LOOP_MIN - 4;
    recall_loop *l = NULL;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_ARG);
    cr_assert(strstr(err.msg, "recall_loop_opts: struct_size"), "%s", err.msg);
    recall_close(m);
}

Test(api_abi, version7_sized_structs) {
    recall_model *m = open_worldA();
    recall_err err = {0};
    _Alignas(16) unsigned char buf[sizeof(recall_model_dims) + EXTRA];
    recall_model_dims full;
    recall_model_get_dims(m, &full);
    recall_model_info info;
    recall_model_get_info(m, &info);
    cr_assert(full.struct_size == sizeof full && full.vocab == info.vocab && full.layers == info.layers &&
              full.n_gate == 3 && full.gate_dim == full.n_gate * full.heads * full.head_dim && full.n_sp > 0);
    /* an older caller (the struct up to hidden), and a newer one: only their bytes, no more */
    const size_t sizes[] = {offsetof(recall_model_dims, layers), sizeof full + 24};
    for (size_t k = 0; k < 2; k++) {
        memset(buf, POISON, sizeof buf);
        recall_model_get_dims2(m, (recall_model_dims *)(void *)buf, sizes[k]);
        const size_t known = sizes[k] < DIMS_END ? sizes[k] : DIMS_END;
        cr_assert_eq(((recall_model_dims *)(void *)buf)->struct_size, sizes[k]);
        cr_assert(!memcmp(buf + sizeof(size_t), (unsigned char *)&full + sizeof(size_t), known - sizeof(size_t)));
        for (size_t i = known; i < sizeof buf; i++) cr_assert_eq(buf[i], POISON, "size %zu: byte %zu written", sizes[k], i);
    }
    /* recall_forward_out: a newer caller's zero tail is accepted, a nonzero byte refused */
    const int32_t ids[3] = {39, 576, 75};
    float *logits = calloc(3 * (size_t)full.vocab, sizeof(float)), *last = calloc((size_t)full.vocab, sizeof(float));
    _Alignas(16) unsigned char ob[sizeof(recall_forward_out) + 24];
    recall_forward_out *o = (recall_forward_out *)(void *)ob;
    recall_forward_out_init2(o, sizeof ob);
    o->logits = logits;
    o->logits_len = 3 * (size_t)full.vocab - 1;
    cr_assert_eq(recall_forward_capture(m, ids, 3, o, &err), RECALL_E_ARG);
    char want[96];
    snprintf(want, sizeof want, "logits holds %zu floats, %zu needed", 3 * (size_t)full.vocab - 1, 3 * (size_t)full.vocab);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    o->logits_len++;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_forward_capture(m, ids, 3, o, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(recall_forward(m, ids, 3, last, (size_t)full.vocab, &err), RECALL_OK, "%s", err.msg);
    cr_assert(!memcmp(last, logits + 2 * (size_t)full.vocab, (size_t)full.vocab * sizeof(float)));
    ob[FWD_OUT_END + 4] = 1;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_forward_capture(m, ids, 3, o, &err), RECALL_E_VERSION, "%s", err.msg);
    free(logits);
    free(last);
    recall_close(m);
}

/* The reference: drop the characters, lower-case, strstr. */
static char *norm(const char *s, const char *drop) {
    char *o = malloc(strlen(s) + 1), *w = o;
    for (; *s; s++)
        if (!strchr(drop, *s)) *w++ = (char)tolower((unsigned char)*s);
    *w = 0;
    return o;
}

static int ref_contains(const char *hay, const char *needle, const char *drop) {
    char *h = norm(hay, drop), *n = norm(needle, drop);
    int r = strstr(h, n) != NULL;
    free(h);
    free(n);
    return r;
}

Test(api_abi, scoring_rules_match_reference) {
    static const char alphabet[] = "aB, ,1x";
    unsigned s = 12345;
    int hits = 0;
    for (int it = 0; it < 20000; it++) {
        char hay[24], val[8];
        const int hl = (int)((s = s * 1103515245u + 12345u) >> 16) % 20, vl = (int)((s = s * 1103515245u + 12345u) >> 16) % 6;
        for (int i = 0; i < hl; i++) hay[i] = alphabet[((s = s * 1103515245u + 12345u) >> 16) % 7];
        for (int i = 0; i < vl; i++) val[i] = alphabet[((s = s * 1103515245u + 12345u) >> 16) % 7];
        hay[hl] = val[vl] = 0;
        const int r1 = recall_eval_recall_ok(hay, val), r2 = recall_eval_retrieved_ok(hay, val);
        cr_assert_eq(r1, ref_contains(hay, val, ", "), "recall_ok('%s', '%s')", hay, val);
        cr_assert_eq(r2, ref_contains(hay, val, ","), "retrieved_ok('%s', '%s')", hay, val);
        hits += r1 + r2;
    }
    cr_assert_gt(hits, 5000, "the random cases must hold matches (%d)", hits);
    cr_assert_eq(recall_eval_recall_ok("The code is ZX 9,043.", "zx9043"), 1);
    cr_assert_eq(recall_eval_retrieved_ok("The code is ZX 9,043.", "zx9043"), 0); /* spaces count here */
    cr_assert_eq(recall_longctx_exact("<think>hmm\n</think>\n\n  482913  \nmore", "482913"), 1);
    cr_assert_eq(recall_longctx_exact("482913.", "482913"), 0);
    cr_assert_eq(recall_longctx_exact("</think>a</think>482913", "482913"), 1);
}
