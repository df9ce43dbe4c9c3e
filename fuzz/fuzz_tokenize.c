/* fuzz_tokenize.c - libFuzzer target for both tokenizers.
 *
 * Input byte 0 picks the mode, the rest is the payload:
 *   0/1  BPE encode (add_special = mode & 1); ASCII payloads must round-trip through decode
 *   2/3  WordPiece encode (add_special = mode & 1)
 *   4/5  BPE / WordPiece decode of the payload read as little-endian int32 ids (any value),
 *        skip_special = payload length parity
 *   6/7  rc_bpe_load / rc_wp_load of the raw payload (hostile section bytes)
 * Tokenizers come from the committed worldA fixtures (run from the repository root).
 */
#include "fuzz_bpe.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const rc_bpe *bpe;
    rc_wp *wp;
} toks;

static const toks *get_toks(void) {
    static toks t; /* fuzz harness only: built once per process */
    static int ready;
    if (!ready) {
        uint8_t *sec;
        size_t size;
        recall_err err = {0};
        t.bpe = fuzz_worldA_bpe();
        if (rc_wp_build("tests/golden/worldA/bge/vocab.txt", "tests/golden/worldA/bge/tokenizer_config.json",
                        &sec, &size, &err) ||
            rc_wp_load(sec, size, &t.wp, &err))
            abort();
        free(sec);
        ready = 1;
    }
    return &t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const toks *t = get_toks();
    int mode = data[0] & 7;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    int32_t *ids = NULL;
    size_t nids = 0;
    char *text = NULL;
    size_t tl = 0;
    recall_err err = {0};
    switch (mode) {
    case 0:
    case 1: {
        if (rc_bpe_encode(t->bpe, (const char *)p, n, mode & 1, &ids, &nids, &err)) abort();
        int ascii = 1;
        for (size_t i = 0; i < n; i++) ascii &= p[i] < 0x80;
        if (rc_bpe_decode(t->bpe, ids, nids, 1, &text, &tl, &err)) abort();
        if (ascii && (tl != n || memcmp(text, p, n) != 0)) abort(); /* byte-level BPE is lossless */
        break;
    }
    case 2:
    case 3:
        if (rc_wp_encode(t->wp, (const char *)p, n, mode & 1, &ids, &nids, &err)) abort();
        if (rc_wp_decode(t->wp, ids, nids, 0, &text, &tl, &err)) abort();
        break;
    case 4:
    case 5: {
        size_t k = n / 4;
        ids = malloc(k * sizeof *ids + 1);
        if (!ids) return 0;
        for (size_t i = 0; i < k; i++)
            ids[i] = (int32_t)((uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                               (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24) %
                     (mode == 4 ? 1100 : 1010);
        if (mode == 4 ? rc_bpe_decode(t->bpe, ids, k, (int)(n & 1), &text, &tl, &err)
                      : rc_wp_decode(t->wp, ids, k, (int)(n & 1), &text, &tl, &err))
            abort();
        break;
    }
    case 6: {
        rc_bpe *b;
        if (rc_bpe_load(p, n, &b, &err) == RECALL_OK) {
            if (rc_bpe_encode(b, "Hello, world! 123", 17, 1, &ids, &nids, &err)) abort();
            rc_bpe_free(b);
        }
        break;
    }
    default: {
        rc_wp *w;
        if (rc_wp_load(p, n, &w, &err) == RECALL_OK) {
            if (rc_wp_encode(w, "Hello, world! 123", 17, 1, &ids, &nids, &err)) abort();
            rc_wp_free(w);
        }
        break;
    }
    }
    free(ids);
    free(text);
    return 0;
}
