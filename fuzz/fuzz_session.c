/* fuzz_session.c - libFuzzer target: arbitrary bytes as a chat session file. The parser must refuse
 * or accept without reading outside the buffer; an accepted file must re-encode to the same bytes
 * (the format has exactly one encoding of each session). */
#include "session.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_session s;
    recall_err err = {0};
    if (rc_session_parse(data, size, "fuzz.sess", &s, &err) != RECALL_OK) return 0;
    uint8_t *again;
    size_t len;
    if (rc_session_encode(s.ids, s.n, s.vocab, &again, &len, &err) != RECALL_OK) abort();
    if (len != size || memcmp(again, data, size) != 0) abort();
    free(again);
    rc_session_free(&s);
    return 0;
}
