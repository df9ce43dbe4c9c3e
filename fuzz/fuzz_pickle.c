/* fuzz_pickle.c - the restricted pickle VM on arbitrary bytes as data.pkl.
 *
 * Bypasses the zip: every persistent id resolves to a constant zero storage of STORAGE_BYTES,
 * so tensor rebuilding, bounds checks and the allowlist are all reachable. After a successful
 * run it walks the top-level value (dicts, sequences, tensors, f32 conversion) the way the
 * loaders do, to catch accessor bugs on odd trees (self-referencing lists, shared values).
 * Also feeds the same bytes to rc_torch_load, which must fail or succeed without crashing.
 */
#include "pickle.h"

#include <stdlib.h>

#define STORAGE_BYTES 65536u

static const uint8_t k_zero_storage[STORAGE_BYTES];

static recall_status zero_storage(void *ctx, const char *key, rc_pt_dtype dtype, uint64_t numel,
                                  const uint8_t **data, size_t *len, recall_err *err) {
    (void)ctx;
    (void)dtype;
    (void)numel;
    (void)err;
    if (key[0] == 'x') return rc_fail(err, RECALL_E_MISSING, "storage '%s' absent", key);
    *data = k_zero_storage;
    *len = STORAGE_BYTES;
    return RECALL_OK;
}

static void touch_tensor(const rc_pv *v) {
    rc_torch_tensor t;
    recall_err err = {0};
    if (rc_torch_tensor_of(v, &t, &err) != RECALL_OK) return;
    float *f = NULL;
    if (rc_torch_tensor_f32(&t, &f, &err) == RECALL_OK) {
        volatile float sink = t.numel ? f[t.numel - 1] : 0.0f;
        (void)sink;
        free(f);
    }
}

/* numpy arrays / opaque scalars: every byte the view promises must be readable. */
static void touch_ndarray(const rc_pv *v) {
    rc_np_array a;
    if (!rc_pv_as_ndarray(v, &a)) return;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < a.nbytes; i += 64) sink ^= ((const uint8_t *)a.data)[i];
    if (a.nbytes) sink ^= ((const uint8_t *)a.data)[a.nbytes - 1];
    if (a.items) (void)rc_pv_len(a.items);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_pickle *p = NULL;
    recall_err err = {0};
    if (rc_pickle_load(data, size, "fuzz", zero_storage, NULL, &p, &err) == RECALL_OK) {
        const rc_pv *root = rc_pickle_root(p);
        size_t n = rc_pv_len(root);
        for (size_t i = 0; i < n; i++) {
            rc_torch_tensor t;
            recall_err e2 = {0};
            (void)rc_torch_dict_tensor(root, i, &t, &e2);
            const rc_pv *v = rc_pv_dict_value_at(root, i);
            if (!v) v = rc_pv_item_at(root, i);
            touch_tensor(v);
            touch_ndarray(v);
            size_t m = rc_pv_len(v); /* one level down: state dicts under "pooler" etc. */
            for (size_t j = 0; j < m && j < 256; j++) {
                const rc_pv *w = rc_pv_dict_value_at(v, j);
                touch_tensor(w ? w : rc_pv_item_at(v, j));
                touch_ndarray(w ? w : rc_pv_item_at(v, j));
            }
            size_t sl;
            (void)rc_pv_as_str(rc_pv_dict_key_at(root, i), &sl);
        }
        int64_t x;
        recall_err e3 = {0};
        (void)rc_pv_path_int(root, (const char *const[]){"args", "heads", NULL}, &x, &e3);
        rc_pickle_free(p);
    }
    rc_torch_file *f = NULL;
    recall_err e4 = {0};
    if (rc_torch_load(data, size, "fuzz.pt", &f, &e4) == RECALL_OK) rc_torch_free(f);
    return 0;
}
