/* make_seeds.c - writes the fuzz seeds that must be made by the library's own writer (blobs carry
 * checksums): `make fuzz-seeds` (build/fuzz_seeds fuzz/corpus) adds to fuzz/corpus/fuzz_blob/
 *   seed-screen-f32.blob   qwen2.vocab 256, qwen2.hidden 64, an f32 lm_head [256, 64] (row 0
 *                          the largest) and its screening tensors as `convert --lm-head-screen`
 *                          makes them (rc_lmscreen_build)
 *   seed-screen-bf16.blob  the same with a bf16 lm_head
 *   seed-rope-yarn.blob    qwen2.max_pos and a full YaRN profile (every qwen2.rope.* key)
 * Deterministic: the same bytes every run. */
#include "blob.h"
#include "lm_screen.h"
#include "rope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V 256
#define H 64

static int fail(const recall_err *err) {
    fprintf(stderr, "fuzz_seeds: %s\n", err->msg);
    return 1;
}

static int screen_blob(const char *dir, const char *name, int bf16) {
    recall_err err = {0};
    float *w = malloc((size_t)V * H * sizeof *w);
    int8_t *q = malloc((size_t)V * H);
    float *scale = malloc((size_t)V * (H / 64) * sizeof *scale), *norm = malloc((size_t)V * 2 * sizeof *norm);
    uint16_t *wb = malloc((size_t)V * H * sizeof *wb);
    if (!w || !q || !scale || !norm || !wb) return 1;
    uint32_t s = 12345;
    for (size_t i = 0; i < (size_t)V * H; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (i < H ? 0.5f : 0.1f);
        if (bf16) { /* the values a bf16 blob stores (truncated: any bf16 will do for a seed) */
            uint32_t u;
            memcpy(&u, &w[i], 4);
            wb[i] = (uint16_t)(u >> 16);
            u &= 0xffff0000u;
            memcpy(&w[i], &u, 4);
        }
    }
    const rc_mat m = {RC_DT_F32, w, NULL, V, H};
    if (rc_lmscreen_build(&m, q, scale, norm, &err)) return fail(&err);
    rc_blob_writer *wr;
    const int64_t vocab = V, hidden = H;
    if (rc_writer_new(&wr, &err) || rc_writer_kv_i64(wr, "qwen2.vocab", &vocab, 1, &err) ||
        rc_writer_kv_i64(wr, "qwen2.hidden", &hidden, 1, &err))
        return fail(&err);
    recall_status st = bf16 ? rc_writer_tensor(wr, "qwen2.lm_head.weight", RC_DT_BF16, 2, (const int64_t[]){V, H}, wb,
                                               (size_t)V * H * 2, &err)
                            : rc_writer_tensor(wr, "qwen2.lm_head.weight", RC_DT_F32, 2, (const int64_t[]){V, H}, w,
                                               (size_t)V * H * 4, &err);
    if (bf16) free(w);
    else free(wb);
    if (st || rc_writer_tensor(wr, RC_LM_SCREEN_Q, RC_DT_U8, 2, (const int64_t[]){V, H}, q, (size_t)V * H, &err) ||
        rc_writer_tensor(wr, RC_LM_SCREEN_SCALE, RC_DT_F32, 2, (const int64_t[]){V, H / 64}, scale,
                         (size_t)V * (H / 64) * 4, &err) ||
        rc_writer_tensor(wr, RC_LM_SCREEN_NORM, RC_DT_F32, 2, (const int64_t[]){V, 2}, norm, (size_t)V * 8, &err))
        return fail(&err);
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_blob/%s", dir, name);
    st = rc_writer_write(wr, path, NULL, NULL, &err);
    rc_writer_free(wr);
    return st ? fail(&err) : 0;
}

static int rope_blob(const char *dir) {
    recall_err err = {0};
    rc_blob_writer *wr;
    const int64_t max_pos = 4096, orig = 256, trunc = 1;
    if (rc_writer_new(&wr, &err) || rc_writer_kv_i64(wr, "qwen2.max_pos", &max_pos, 1, &err) ||
        rc_writer_kv_str(wr, RC_ROPE_KEY_TYPE, "yarn", &err) || rc_writer_kv_f64(wr, RC_ROPE_KEY_FACTOR, 4.0, &err) ||
        rc_writer_kv_i64(wr, RC_ROPE_KEY_ORIG, &orig, 1, &err) ||
        rc_writer_kv_f64(wr, RC_ROPE_KEY_BETA_FAST, 32.0, &err) || rc_writer_kv_f64(wr, RC_ROPE_KEY_BETA_SLOW, 1.0, &err) ||
        rc_writer_kv_f64(wr, RC_ROPE_KEY_MSCALE, 1.0, &err) || rc_writer_kv_f64(wr, RC_ROPE_KEY_MSCALE_ALL, 1.0, &err) ||
        rc_writer_kv_f64(wr, RC_ROPE_KEY_ATTN, 1.25, &err) || rc_writer_kv_i64(wr, RC_ROPE_KEY_TRUNCATE, &trunc, 1, &err))
        return fail(&err);
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_blob/seed-rope-yarn.blob", dir);
    const recall_status st = rc_writer_write(wr, path, NULL, NULL, &err);
    rc_writer_free(wr);
    return st ? fail(&err) : 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds CORPUS_DIR (fuzz/corpus)\n");
        return 2;
    }
    return screen_blob(argv[1], "seed-screen-f32.blob", 0) || screen_blob(argv[1], "seed-screen-bf16.blob", 1) ||
           rope_blob(argv[1]);
}
