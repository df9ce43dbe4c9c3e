/* test_tokenize_bpe_fast.c - the BPE encoder's speed paths give the plain path's ids.
 *
 * rc_bpe_encode keeps a per-call word cache (piece bytes -> ids, emptied when it holds 2^15
 * words) and normalises only the non-ASCII stretches of the text (with the ASCII character
 * before each). tests/test_tokenize.c checks every HF golden; these tests reach what the short
 * goldens cannot: a text with more distinct words than the cache holds, each word twice, must
 * give exactly the ids of encoding every word on its own (where nothing is cached), and a
 * combining mark after an ASCII letter must compose with it as in the precomposed text.
 */
#include <criterion/criterion.h>

#include "tokenize_bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK "tests/golden/tokenizers/deepseek-r1-distill-qwen/"

static rc_bpe *load_r1(void) {
    uint8_t *sec;
    size_t size;
    recall_err err = {0};
    rc_bpe *t;
    cr_assert_eq(rc_bpe_build_from_json(TOK "tokenizer.json", TOK "tokenizer_config.json", &sec,
                                        &size, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bpe_load(sec, size, &t, &err), RECALL_OK, "%s", err.msg);
    free(sec);
    return t;
}

static int32_t *enc(const rc_bpe *t, const char *s, size_t len, size_t *n) {
    int32_t *ids;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_encode(t, s, len, 0, &ids, n, &err), RECALL_OK, "%s", err.msg);
    return ids;
}

/* Word k: " " + letters spelling k in base 26 (distinct for distinct k) + a few pseudo-random
 * letters; every 97th word is longer than the cache's 64-byte key limit, every 89th ends in
 * "e" + U+0301. Each is one pre-tokenizer piece. */
static size_t make_word(unsigned k, char *w) {
    size_t n = 0;
    w[n++] = ' ';
    unsigned x = k, r = k * 2654435761u;
    do {
        w[n++] = (char)((r & 1 ? 'A' : 'a') + x % 26);
        x /= 26;
        r >>= 1;
    } while (x);
    size_t extra = k % 97 == 0 ? 70 : (k * 7u) % 6;
    for (size_t i = 0; i < extra; i++) w[n++] = (char)('a' + (k * 31u + i * 17u) % 26);
    if (k % 89 == 0) n += (size_t)sprintf(w + n, "e\xCC\x81");
    w[n] = 0;
    return n;
}

Test(tok_bpe_fast, word_cache_overflow_equals_words_alone) {
    rc_bpe *t = load_r1();
    enum { WORDS = 40000 }; /* > 2^15: the cache empties once per pass */
    size_t cap = (size_t)WORDS * 2 * 96, len = 0, n_want = 0, want_cap = 1 << 20;
    char *text = malloc(cap);
    int32_t *want = malloc(want_cap * sizeof *want);
    cr_assert(text && want);
    for (int pass = 0; pass < 2; pass++)
        for (unsigned k = 0; k < WORDS; k++) {
            char w[96];
            size_t wl = make_word(k, w), n;
            memcpy(text + len, w, wl);
            len += wl;
            int32_t *ids = enc(t, w, wl, &n);
            cr_assert(n >= 1 && n_want + n <= want_cap);
            memcpy(want + n_want, ids, n * sizeof *ids);
            n_want += n;
            free(ids);
        }
    size_t n;
    int32_t *got = enc(t, text, len, &n);
    cr_assert_eq(n, n_want, "got %zu ids, want %zu", n, n_want);
    for (size_t i = 0; i < n; i++) cr_assert_eq(got[i], want[i], "id %zu: %d vs %d", i, got[i], want[i]);
    free(got);
    free(want);
    free(text);
    rc_bpe_free(t);
}

Test(tok_bpe_fast, combining_mark_after_ascii_composes) {
    rc_bpe *t = load_r1();
    static const char *pairs[][2] = {
        {"a cafe\xCC\x81 x", "a caf\xC3\xA9 x"},         /* e + U+0301 -> U+00E9 */
        {"A\xCC\x8A!", "\xC3\x85!"},                      /* A + ring above -> U+00C5 */
        {"x Ko\xCC\x88\xCC\xA3ln", "x K\xE1\xBB\x8D\xCC\x88ln"}, /* reorder dot below, then compose */
    };
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        size_t na, nb;
        int32_t *a = enc(t, pairs[p][0], strlen(pairs[p][0]), &na);
        int32_t *b = enc(t, pairs[p][1], strlen(pairs[p][1]), &nb);
        cr_assert_eq(na, nb, "pair %zu: %zu vs %zu ids", p, na, nb);
        cr_assert_eq(memcmp(a, b, na * sizeof *a), 0, "pair %zu: ids differ", p);
        free(a);
        free(b);
    }
    rc_bpe_free(t);
}

/* A hostile section (found by fuzz_tokenize under UBSan) in which a pre-tokenized word encodes to
 * no id at all: the word cache must store and replay that empty result without pointer arithmetic
 * on a NULL id buffer (`make ubsan` runs this). Encoding twice goes through the cache the second
 * time and must give the same ids. */
Test(tok_bpe_fast, hostile_section_word_with_no_ids) {
    FILE *f = fopen("tests/golden/bad/bpe_section_word_without_ids.fuzz", "rb") /* also a fuzz_tokenize seed */;
    cr_assert(f);
    uint8_t buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_gt(n, 1);
    cr_assert_eq(buf[0] & 7, 6, "the fuzz input's first byte selects the BPE-section mode");
    rc_bpe *t;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_load(buf + 1, n - 1, &t, &err), RECALL_OK, "%s", err.msg);
    int32_t *a = NULL, *b = NULL;
    size_t na = 99, nb = 98;
    cr_assert_eq(rc_bpe_encode(t, "Hello, world! 123", 17, 1, &a, &na, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bpe_encode(t, "Hello, world! 123", 17, 1, &b, &nb, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(na, nb, "%zu vs %zu ids", na, nb);
    if (na) cr_assert_eq(memcmp(a, b, na * sizeof *a), 0);
    free(a);
    free(b);
    rc_bpe_free(t);
}
