/* fuzz_blob.c - libFuzzer target: arbitrary bytes as a recall blob. The loader must refuse or
 * accept without reading outside the buffer; every accepted tensor view must lie inside it, and
 * a verifying open must agree with rc_blob_verify. On an accepted blob the optional sections are
 * read as the model does: the RoPE profile keys (qwen2.rope.*: a profile or a refusal with a
 * message) and the lm_head screening tensors (rc_lmscreen_open): a screen it accepts must pick,
 * for every k, exactly what the full lm_head logits pick (the seeds carry a small screened
 * lm_head, fuzz/make_seeds.c), for a hidden row led by lm_head row 0 and for a row of ones. */
#include "blob.h"
#include "lm_screen.h"
#include "pool.h"
#include "rope.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const rc_exec *fuzz_exec(void) {
    static rc_exec *ex; /* fuzz harness only: one execution context per process */
    recall_err err = {0};
    if (!ex && rc_exec_open(NULL, &ex, &err)) abort();
    return ex;
}

static void check_screen(const rc_blob *b) {
    const rc_exec *ex = fuzz_exec();
    rc_lmscreen *scr = NULL;
    recall_err err = {0};
    if (rc_lmscreen_open(b, ex, &scr, &err) != RECALL_OK) {
        if (scr || !err.msg[0]) abort();
        return;
    }
    if (!scr) return;
    int V = 0, H = 0;
    rc_mat w;
    if (rc_blob_get_int(b, "qwen2.vocab", 1, 1 << 24, &V, &err) ||
        rc_blob_get_int(b, "qwen2.hidden", 1, 1 << 16, &H, &err))
        abort(); /* the screen opened: both were read */
    const char *lm = rc_blob_find(b, "qwen2.lm_head.weight") ? "qwen2.lm_head.weight" : "qwen2.model.embed_tokens.weight";
    if (rc_blob_mat(b, lm, V, H, &w, &err)) abort();
    if ((size_t)V * (size_t)H > ((size_t)1 << 22)) { /* a pick per input only on small matrices */
        rc_lmscreen_close(scr);
        return;
    }
    float *h = malloc((size_t)H * sizeof *h), *logits = malloc((size_t)V * sizeof *logits);
    if (!h || !logits) abort();
    for (int round = 0; round < 2; round++) {
        if (round == 0) rc_mat_row_f32(&w, 0, h);
        else
            for (int i = 0; i < H; i++) h[i] = 1.0f;
        rc_exec_matmul(ex, &w, NULL, h, (size_t)H, 1, logits, (size_t)V);
        for (int k = 0; k <= RC_LM_SCREEN_MAXK; k++) {
            rc_lm_pick want, got;
            rc_lm_pick_full(logits, V, k, &want);
            if (rc_lmscreen_pick(scr, h, k, &got, &err) != RECALL_OK) abort();
            if (got.argmax != want.argmax || memcmp(&got.margin, &want.margin, sizeof got.margin) || got.k != want.k ||
                memcmp(got.ids, want.ids, sizeof got.ids[0] * (size_t)got.k) ||
                memcmp(got.logits, want.logits, sizeof got.logits[0] * (size_t)got.k))
                abort(); /* an accepted screen picked another token than the full logits */
        }
    }
    free(h);
    free(logits);
    rc_lmscreen_close(scr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_blob *b;
    recall_err err = {0};
    if (rc_blob_open_mem(data, size, "fuzz.blob", 0, &b, &err) != RECALL_OK) return 0;
    for (size_t i = 0; i < rc_blob_n_tensors(b); i++) {
        const rc_tensor *t = rc_blob_tensor_at(b, i);
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) abort();
        if (rc_blob_find(b, t->name) != t) abort();
    }
    for (size_t i = 0; i < rc_blob_n_kv(b); i++) (void)rc_blob_kv_find(b, rc_blob_kv_at(b, i)->key);
    size_t sz;
    (void)rc_blob_section(b, RC_SECT_TOK_BPE, &sz);
    rc_rope_profile rp;
    recall_err er = {0};
    if (rc_rope_read(b, &rp, &er) != RECALL_OK && !er.msg[0]) abort();
    check_screen(b);
    recall_err e2 = {0};
    recall_status v = rc_blob_verify(b, &e2);
    rc_blob_close(b);
    rc_blob *b2;
    recall_err e3 = {0};
    recall_status v2 = rc_blob_open_mem(data, size, "fuzz.blob", RC_OPEN_VERIFY, &b2, &e3);
    if ((v == RECALL_OK) != (v2 == RECALL_OK)) abort();
    if (v2 == RECALL_OK) rc_blob_close(b2);
    return 0;
}
