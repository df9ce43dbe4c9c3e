/* fuzz_zip.c - libFuzzer target: arbitrary bytes as a zip archive (open, then extract and CRC-check
 * every member, then parse each as .npy; again through the npz reader) and as a raw DEFLATE stream (bounded output). */
#include "inflate.h"
#include "npy.h"
#include "zip.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_zip z;
    recall_err err = {0};
    if (rc_zip_open(&z, data, size, "fuzz", &err) == RECALL_OK) {
        for (size_t i = 0; i < z.n; i++) {
            uint8_t *out;
            size_t n;
            recall_err e2 = {0};
            if (rc_zip_read(&z, &z.entries[i], &out, &n, &e2) == RECALL_OK) {
                rc_npy a;
                if (rc_npy_parse(out, n, z.entries[i].name, &a, &e2) == RECALL_OK && a.numel <= (1u << 20)) {
                    float *f;
                    if (rc_npy_to_f32(&a, "fuzz", &f, &e2) == RECALL_OK) free(f);
                }
                free(out);
            }
        }
        rc_zip_close(&z);
    }

    /* The npz layer on top: zero-copy views of stored members, inflated copies otherwise. */
    rc_npz *npz;
    recall_err e4 = {0};
    if (rc_npz_open_mem(data, size, "fuzz.npz", &npz, &e4) == RECALL_OK) {
        char key[64];
        for (size_t i = 0; i < rc_npz_count(npz); i++) {
            if (!rc_npz_key(npz, i, key, sizeof key)) continue;
            rc_npy a;
            recall_err e5 = {0};
            if (rc_npz_get(npz, key, &a, &e5) == RECALL_OK) rc_npy_free(&a);
        }
        rc_npz_close(npz);
    }

    static const size_t CAP = 1u << 18;
    uint8_t *out = malloc(CAP);
    if (out) {
        size_t got, used;
        recall_err e3 = {0};
        if (rc_inflate(data, size, out, CAP, &got, &used, &e3) == RECALL_OK && (got > CAP || used > size)) abort();
        free(out);
    }
    return 0;
}
