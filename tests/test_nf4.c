/* test_nf4.c - NF4 quantiser rules (docs/NUMERICS.md, "NF4") and the NF4 dot through a synthetic blob
 * (row-straddling blocks, nibble order). The golden bytes of worldA are in test_models.c. And
 * `convert --nf4-keep`: the named attention projections of an nf4 blob stored in bf16. */
#include "blob.h"
#include "convert.h"
#include "fixture.h"
#include "json.h"
#include "nf4.h"
#include "ops.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(nf4_quant, codebook_roundtrip_zero_block_and_ties) {
    float w[128], am[2];
    uint8_t codes[64];
    for (int i = 0; i < 64; i++) w[i] = RC_NF4_CODEBOOK[i % 16] * 3.0f; /* absmax 3 */
    for (int i = 64; i < 128; i++) w[i] = 0.0f;
    cr_assert_eq(rc_nf4_quantize(w, 128, codes, am), 0);
    cr_assert_eq(am[0], 3.0f);
    cr_assert_eq(am[1], 0.0f);
    for (int i = 0; i < 64; i++) cr_assert_eq(rc_nf4_code(codes, (size_t)i), (unsigned)(i % 16), "i = %d", i);
    cr_assert_eq(codes[0], 0x01); /* element 0 in the high nibble */
    for (int i = 32; i < 64; i++) cr_assert_eq(codes[i], 0x77); /* zero block -> code 7 */
    float deq[64];
    rc_nf4_dequant(codes, am, 0, 64, deq);
    for (int i = 0; i < 64; i++) cr_assert_eq(deq[i], RC_NF4_CODEBOOK[i % 16] * 3.0f);
    /* a value exactly on a midpoint goes to the lower code (strict >) */
    float mid = (float)(((double)RC_NF4_CODEBOOK[9] + (double)RC_NF4_CODEBOOK[10]) / 2.0);
    float t[64] = {1.0f, mid, -1.0f};
    cr_assert_eq(rc_nf4_quantize(t, 64, codes, am), 0);
    cr_assert_eq(rc_nf4_code(codes, 0), 15u);
    cr_assert_eq(rc_nf4_code(codes, 1), 9u);
    cr_assert_eq(rc_nf4_code(codes, 2), 0u);
    cr_assert_eq(rc_nf4_code(codes, 3), 7u);
    cr_assert_eq(rc_nf4_quantize(t, 63, codes, am), -1);
}

Test(nf4_dot, synthetic_blob_row_straddles_blocks) {
    enum { R = 4, C = 48 }; /* 192 elements = 3 blocks; rows cross block boundaries */
    float w[R * C], x[C];
    uint32_t s = 3;
    for (int i = 0; i < R * C; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (1.0f + (float)(i / 64));
    }
    for (int i = 0; i < C; i++) x[i] = (float)(i % 5) - 2.0f;
    size_t nb = rc_nf4_nbytes(R * C);
    uint8_t *data = calloc(1, nb);
    cr_assert(data);
    cr_assert_eq(rc_nf4_quantize(w, R * C, data, (float *)(data + rc_nf4_absmax_offset(R * C))), 0);
    recall_err err = {0};
    rc_blob_writer *wr = NULL;
    cr_assert_eq(rc_writer_new(&wr, &err), RECALL_OK);
    int64_t shape[2] = {R, C};
    cr_assert_eq(rc_writer_tensor(wr, "m", RC_DT_NF4, 2, shape, data, nb, &err), RECALL_OK, "%s", err.msg);
    char path[64];
    snprintf(path, sizeof path, "/tmp/recall_test_nf4_%ld.blob", (long)getpid());
    cr_assert_eq(rc_writer_write(wr, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(wr);
    rc_blob *b = NULL;
    cr_assert_eq(rc_blob_open(path, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg);
    rc_mat m;
    cr_assert_eq(rc_blob_mat(b, "m", R, C, &m, &err), RECALL_OK, "%s", err.msg);
    float y[R], row[C];
    rc_matvec(&m, NULL, x, y);
    for (int r = 0; r < R; r++) {
        rc_mat_row_f32(&m, r, row);
        cr_assert_eq(memcmp(&y[r], &(float){rc_dot_f32(row, x, C)}, 4), 0, "row %d", r);
        for (int c = 0; c < C; c++) {
            size_t e = (size_t)r * C + (size_t)c;
            float am = m.absmax[e / 64];
            cr_assert_eq(row[c], RC_NF4_CODEBOOK[rc_nf4_code(m.data, e)] * am);
            cr_assert_leq(fabsf(row[c] - w[e]), am * 0.2f);
        }
    }
    float v[R * C];
    cr_assert_eq(rc_blob_vec(b, "m", R * C, v, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(v[C + 1], rc_mat_get(&m, 1, 1));
    cr_assert_eq(rc_blob_vec(b, "m", 5, v, &err), RECALL_E_SHAPE);
    rc_blob_close(b);
    unlink(path);
}

/* worldA converted with --weights nf4 --nf4-keep: the named projections are the bf16 blob's bytes,
 * every other matrix the nf4 blob's; the key holds the canonical SPEC, and eval names it. */
Test(nf4_keep, named_projections_stored_as_bf16, .timeout = 300) {
    const char *path = "build/test_nf4_keep_worldA.blob";
    rc_convert_opts co = fixture_worldA_convert_opts("nf4", path);
    co.nf4_keep = "1:v,0:vq";
    recall_err err = {0};
    cr_assert_eq(rc_convert(&co, &err), RECALL_OK, "%s", err.msg);
    rc_blob *bk = fixture_open(path), *bn = fixture_open_worldA("nf4"), *bb = fixture_open_worldA("bf16");
    const rc_blob_kv *kv = rc_blob_kv_find(bk, RC_NF4_KEEP_KEY);
    cr_assert_not_null(kv);
    cr_expect_str_eq(kv->v.s, "0:qv,1:v", "stored in canonical form");
    cr_expect_null(rc_blob_kv_find(bn, RC_NF4_KEEP_KEY), "a blob converted without it keeps its bytes");
    int kept = 0, nf4 = 0;
    for (size_t i = 0; i < rc_blob_n_tensors(bk); i++) {
        const rc_tensor *t = rc_blob_tensor_at(bk, i);
        const int want = strstr(t->name, "layers.0.self_attn.q_proj.weight") ||
                         strstr(t->name, "layers.0.self_attn.v_proj.weight") ||
                         strstr(t->name, "layers.1.self_attn.v_proj.weight");
        const rc_tensor *ref = rc_blob_find(want ? bb : bn, t->name);
        cr_assert_not_null(ref, "%s", t->name);
        cr_expect_eq(t->dtype, ref->dtype, "%s", t->name);
        cr_expect_eq(t->nbytes, ref->nbytes, "%s", t->name);
        cr_expect_eq(memcmp(t->data, ref->data, t->nbytes), 0, "%s: the bytes of the %s blob", t->name,
                     want ? "bf16" : "nf4");
        kept += want && t->dtype == RC_DT_BF16;
        nf4 += t->dtype == RC_DT_NF4;
    }
    cr_expect_eq(kept, 3);
    cr_expect_gt(nf4, 0);
    rc_blob_close(bk);
    rc_blob_close(bn);
    rc_blob_close(bb);
    char ev[128];
    snprintf(ev, sizeof ev, "build/test_nf4_keep_%d.json", (int)getpid());
    free(fixture_cmd(0, NULL, "./recall eval %s --bench tests/golden/recall_bench.json --problems 0 --arms SP --json %s 2>&1",
                     path, ev));
    json_doc *d = fixture_json(ev);
    const json_value *k = json_get_type(json_root(d), "nf4_keep", JSON_STR);
    cr_assert(k, "eval names the kept projections");
    cr_expect_str_eq(k->str, "0:qv,1:v");
    json_free(d);
    remove(ev);
}

Test(nf4_keep, without_nf4_or_with_a_bad_spec_refused) {
    const char *out = "build/test_nf4_keep_refused.blob";
    remove(out);
    rc_convert_opts co = fixture_worldA_convert_opts("f32", out);
    co.nf4_keep = "0:v";
    recall_err err = {0};
    cr_expect_eq(rc_convert(&co, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "--nf4-keep 0:v needs --weights nf4"), "%s", err.msg);
    cr_expect_neq(access(out, F_OK), 0, "nothing written");
    co = fixture_worldA_convert_opts("nf4", out);
    co.nf4_keep = "0-24:v";
    err = (recall_err){0};
    cr_expect_eq(rc_convert(&co, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "--nf4-keep") && strstr(err.msg, "layers"), "%s", err.msg);
    cr_expect_neq(access(out, F_OK), 0, "nothing written");
    co.nf4_keep = "0:x";
    err = (recall_err){0};
    cr_expect_eq(rc_convert(&co, &err), RECALL_E_ARG);
    cr_expect_neq(access(out, F_OK), 0, "nothing written");
}
