/* fuzz_npy.c - libFuzzer target: arbitrary bytes as a .npy file (header parse, conversion to
 * float32, scalar read) and, re-encoded, checked to parse back to the same array. */
#include "npy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_npy a;
    recall_err err = {0};
    if (rc_npy_parse(data, size, "fuzz", &a, &err) != RECALL_OK) return 0;
    if (a.nbytes != a.numel * a.itemsize || a.data_offset + a.nbytes != size) abort();
    float *f;
    if (rc_npy_to_f32(&a, "fuzz", &f, &err) == RECALL_OK) free(f);
    int64_t v;
    (void)rc_npy_scalar_i64(&a, "fuzz", &v, &err);

    /* Round trip through the encoder (host-order copy of the elements). */
    void *host = malloc(a.nbytes ? a.nbytes : 1);
    if (!host) return 0;
    if (a.nbytes) memcpy(host, a.data, a.nbytes);
    uint8_t *enc;
    size_t enc_len;
    if (rc_npy_encode(a.dtype, a.ndim, a.shape, host, &enc, &enc_len, &err) == RECALL_OK) {
        rc_npy b;
        recall_err e2 = {0};
        if (rc_npy_parse(enc, enc_len, "re", &b, &e2) != RECALL_OK || b.dtype != a.dtype || b.ndim != a.ndim ||
            b.nbytes != a.nbytes || (a.nbytes && memcmp(b.data, a.data, a.nbytes) != 0))
            abort();
        free(enc);
    }
    free(host);
    return 0;
}
