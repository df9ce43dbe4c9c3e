/* fuzz_longctx.c - libFuzzer target: the long-context tasks' inputs (longctx.h), with the worldA
 * BPE. Input byte 0 picks the mode, the rest is the payload:
 *   0  the payload as the haystack text (rc_lctx_haystack_from_text: refused or tokenized), then a
 *      needle case built on it (mostly "haystack too short": refused with a message)
 *   1  payload bytes 0-4: task, length (80 .. 1100 tokens), depth, seed; the rest appended to the
 *      first 6000 bytes of the committed haystack (tests/golden/longctx/haystack.txt): a case is
 *      built and must hold: prompt tokens <= the length, every insert and the context inside the
 *      prompt, depth_actual in [0, 1], the 6-digit answer in the user text
 *   2  the payload as a reply read by rc_lctx_answer: the answer recorded is NUL-terminated
 *      inside its buffer, whole UTF-8 characters, and "matches" only when it is the expected text
 * (`recall longctx --prompts DIR` writes each case's ids and text for other engines: this target
 * covers what those files are made from.) Run from the repository root. */
#include "fuzz_bpe.h"
#include "longctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE_BYTES 6000

static const char *base_text(size_t *len) {
    static char buf[BASE_BYTES]; /* fuzz harness only: read once per process */
    static size_t n;
    if (!n) {
        FILE *f = fopen("tests/golden/longctx/haystack.txt", "rb");
        if (!f) abort();
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        if (n < BASE_BYTES) abort();
    }
    *len = n;
    return buf;
}

static void check_case(const rc_lctx_case *c, const rc_lctx_haystack *h, int len) {
    if (c->n_ids < 1 || c->n_ids > len) abort();
    if (!(c->ctx_first >= 0 && c->ctx_first <= c->ctx_end && c->ctx_end <= c->n_ids)) abort();
    if (c->n_inserts < 1 || c->n_inserts > RC_LCTX_MAX_INSERTS || c->key < 0 || c->key >= c->n_inserts) abort();
    for (int i = 0; i < c->n_inserts; i++)
        if (!(c->ins_first[i] >= 0 && c->ins_first[i] <= c->ins_last[i] && c->ins_last[i] < c->n_ids)) abort();
    if (!(c->depth_actual >= 0.0 && c->depth_actual <= 1.0)) abort();
    if (strlen(c->expected) != 6 || !strstr(c->user, c->expected)) abort();
    if (c->hay_off < 0 || c->hay_tokens < 0 || c->hay_off + c->hay_tokens > h->n) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const rc_bpe *bpe = fuzz_worldA_bpe();
    const int mode = data[0] % 3;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    recall_err err = {0};
    if (mode == 2) {
        char *reply = malloc(n + 1), answer[16];
        if (!reply) abort();
        memcpy(reply, p, n);
        reply[n] = 0;
        const int hit = rc_lctx_answer(reply, "123456", answer, sizeof answer);
        if (strlen(answer) >= sizeof answer || (hit && strcmp(answer, "123456"))) abort();
        free(reply);
        return 0;
    }
    int task = 0, len = 96;
    double depth = 0.5;
    uint64_t seed = 1;
    char *text;
    size_t tl;
    if (mode == 1) {
        if (n < 5) return 0;
        task = p[0] % RC_LCTX_NTASKS;
        len = 80 + 4 * p[2] + (p[1] & 3);
        depth = p[3] / 255.0;
        seed = p[4];
        p += 5;
        n -= 5;
        size_t bl;
        const char *base = base_text(&bl);
        text = malloc(bl + n);
        if (!text) abort();
        memcpy(text, base, bl);
        memcpy(text + bl, p, n);
        tl = bl + n;
    } else {
        text = malloc(n ? n : 1);
        if (!text) abort();
        memcpy(text, p, n);
        tl = n;
    }
    rc_lctx_haystack h;
    if (rc_lctx_haystack_from_text(bpe, text, tl, "fuzz", &h, &err) == RECALL_OK) {
        if (h.n < 0 || h.off[0] != 0 || h.off[h.n] != h.len) abort();
        rc_lctx_case c;
        recall_err e2 = {0};
        if (rc_lctx_build(bpe, &h, (rc_lctx_task)task, len, depth, seed, &c, &e2) == RECALL_OK) {
            check_case(&c, &h, len);
            rc_lctx_case_free(&c);
        } else if (!e2.msg[0]) {
            abort();
        }
        rc_lctx_haystack_free(&h);
    } else if (!err.msg[0]) {
        abort();
    }
    free(text);
    return 0;
}
