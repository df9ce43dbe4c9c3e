/* chat.c - the reference chat template and the two answer checks of the benchmarks, which the
 * public API exports (chat.h states them). */
#include "chat.h"

#include "tokenize_bpe.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- the chat template ------------------------------------------------------------------------ */

recall_status rc_chat_segment(const rc_bpe *bpe, int eos_id, int with_eos, const char *user, const char *assistant,
                              int32_t **ids, size_t *n, recall_err *err) {
    size_t el = 0;
    const char *eos = with_eos ? rc_bpe_token_str(bpe, eos_id, &el) : "";
    if (!eos) return rc_fail(err, RECALL_E_FORMAT, "tokenizer: EOS id %d has no string", eos_id);
    static const char U[] = "<\xef\xbd\x9cUser\xef\xbd\x9c>", A[] = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";
    size_t ul = strlen(user), al = assistant ? strlen(assistant) : 0;
    size_t len = el + strlen(U) + ul + strlen(A) + al;
    char *text = malloc(len + 1);
    if (!text) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    size_t k = 0;
    memcpy(text + k, eos, el), k += el;
    memcpy(text + k, U, strlen(U)), k += strlen(U);
    memcpy(text + k, user, ul), k += ul;
    memcpy(text + k, A, strlen(A)), k += strlen(A);
    if (al) memcpy(text + k, assistant, al), k += al;
    text[k] = 0;
    recall_status s = rc_bpe_encode(bpe, text, k, 0, ids, n, err);
    free(text);
    return s;
}

/* ---- the answer checks ------------------------------------------------------------------------ */

static int dropped(const char *drop, char c) { return c && strchr(drop, c) != NULL; }

int rc_eval_contains(const char *text, const char *value, const char *drop) {
    for (const char *h = text;; h++) {
        while (dropped(drop, *h)) h++;
        const char *a = h, *b = value;
        for (;;) {
            while (dropped(drop, *b)) b++;
            if (!*b) return 1;
            while (dropped(drop, *a)) a++;
            if (!*a) return 0; /* the text ran out: no later start can hold the value either */
            if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) break;
            a++, b++;
        }
        if (!*h) return 0;
    }
}

int rc_lctx_answer(const char *reply, const char *expected, char *answer, size_t cap) {
    const char *p = reply, *t;
    while ((t = strstr(p, "</think>")) != NULL) p = t + strlen("</think>");
    while (isspace((unsigned char)*p)) p++;
    const char *e = strchr(p, '\n');
    if (!e) e = p + strlen(p);
    while (e > p && isspace((unsigned char)e[-1])) e--;
    size_t n = (size_t)(e - p);
    if (cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        while (k < n && k > 0 && ((unsigned char)p[k] & 0xc0) == 0x80) k--; /* whole UTF-8 characters */
        memcpy(answer, p, k);
        answer[k] = 0;
    }
    return n == strlen(expected) && !memcmp(p, expected, n);
}
