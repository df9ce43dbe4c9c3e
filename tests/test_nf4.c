/* test_nf4.c - NF4 quantiser rules (docs/NUMERICS.md, "NF4") and the NF4 dot through a synthetic blob
 * (row-straddling blocks, nibble order). The golden bytes of worldA are in test_models.c. */
#include "blob.h"
#include "nf4.h"
#include "ops.h"

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
