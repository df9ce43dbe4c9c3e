/* fuzz_blob.c - libFuzzer target: arbitrary bytes as a recall blob. The loader must refuse or
 * accept without reading outside the buffer; every accepted tensor view must lie inside it, and
 * a verifying open must agree with rc_blob_verify. */
#include "blob.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
