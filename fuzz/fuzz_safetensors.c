/* fuzz_safetensors.c - libFuzzer target: arbitrary bytes as a .safetensors image (header length,
 * JSON header, dtype/shape/offset checks, overlap detection), then fp32 conversion of every
 * tensor it accepts. */
#include "safetensors.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_st *st;
    recall_err err = {0};
    if (rc_st_open_mem(data, size, "fuzz.safetensors", &st, &err) != RECALL_OK) return 0;
    for (size_t i = 0; i < rc_st_count(st); i++) {
        const rc_st_tensor *t = rc_st_at(st, i);
        if (t->data < data || t->data + t->nbytes > data + size) abort();
        float *f;
        recall_err e2 = {0};
        if (rc_st_to_f32(t, &f, &e2) == RECALL_OK) free(f);
    }
    rc_st_close(st);
    return 0;
}
