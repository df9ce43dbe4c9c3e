/* fuzz_compare.c - libFuzzer target: `recall compare` on hostile inputs (rc_compare_mem): loop
 * traces (the golden JSON schema) and .npz dumps. The input is A, or A NUL B. Without a NUL byte
 * A is compared with itself: whatever it parses to must agree with itself (verdict 0, nothing
 * diverged). With one, A is compared with B: any verdict, or an error, never a crash. */
#include "compare.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t la = nul ? (size_t)(nul - data) : size;
    const uint8_t *b = nul ? nul + 1 : data;
    const size_t lb = nul ? size - la - 1 : size;
    /* copies of exactly the bytes, so that ASan sees a read past either end */
    char *a_copy = malloc(la ? la : 1), *b_copy = malloc(lb ? lb : 1);
    if (!a_copy || !b_copy) abort();
    memcpy(a_copy, data, la);
    memcpy(b_copy, b, lb);
    rc_cmp_report r;
    recall_err err = {0};
    const rc_cmp_opts opts = {1, 0.5f};
    if (rc_compare_mem(a_copy, la, "A", b_copy, lb, nul ? "B" : "A", &opts, &r, &err) == RECALL_OK) {
        if (r.kind != 1 && r.kind != 2) abort();
        if (!nul && (r.verdict != 0 || r.diverged || r.n_failed)) abort(); /* a file agrees with itself */
        rc_cmp_report_free(&r);
    } else if (!err.msg[0]) {
        abort();
    }
    free(a_copy);
    free(b_copy);
    return 0;
}
