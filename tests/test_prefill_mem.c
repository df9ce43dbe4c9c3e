/* test_prefill_mem.c - prefill memory is linear in the context (REQ-CTX-003): no N x N score
 * matrix. On the worldA f32 blob (6,144 KV bytes per position) a 2,048-row prefill runs in a fresh
 * context (after a 512-row one that warms the allocator); the process's peak resident set above
 * the resident set before the run (VmHWM - VmRSS, the peak reset through /proc/self/clear_refs) is
 * its KV bytes (12 MiB) within 4 MiB (RoPE rows, one score row per worker), while a single head's
 * 2,048 x 2,048 fp32 score matrix alone would add 16 MiB.
 * The bench that shows the same at 4k..32k on the real-shape model is bench/longctx_bench.c. */
#include "../bench/bench_util.h" /* bench_status_mib, bench_reset_peak */
#include "blob.h"
#include "fixture.h"
#include "pool.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Peak RSS growth in bytes over one fresh T-row prefill with the KV reserved for T positions. */
static long long prefill_peak_growth(const rc_blob *b, int T, size_t *kv_bytes) {
    recall_err err = {0};
    rc_qwen2 *m = NULL;
    cr_assert_eq(rc_qwen2_open(b, T, &m, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    cr_assert(ids && logits);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(((unsigned)i * 2654435761u >> 7) % (unsigned)V);
    cr_assert_eq(bench_reset_peak(), 0);
    const double before = bench_status_mib("VmRSS:");
    cr_assert_eq(rc_qwen2_reserve(m, T, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_fwd f = {.ids = ids, .n = T, .logits_last = logits};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    const double peak = bench_status_mib("VmHWM:");
    cr_assert(before > 0 && peak >= before);
    *kv_bytes = rc_qwen2_kv_bytes(m);
    rc_qwen2_close(m);
    free(ids);
    free(logits);
    return (long long)((peak - before) * 1048576.0);
}

Test(prefill_memory, peak_grows_by_the_kv_bytes_not_quadratically, .timeout = 120) {
    if (bench_reset_peak() != 0 || bench_status_mib("VmHWM:") < 0) cr_skip_test("no /proc/self/clear_refs here");
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(path, RC_OPEN_NO_MMAP, &b, &err), RECALL_OK, "%s", err.msg);
    size_t kv1, kv2;
    (void)prefill_peak_growth(b, 512, &kv1); /* warm the allocator and the blob's pages */
    const long long g = prefill_peak_growth(b, 2048, &kv2);
    cr_log_info("peak RSS growth over a 2,048-row prefill: %lld B; its KV: %zu B", g, kv2);
    cr_assert_eq(kv2, (size_t)2048 * 6144u);
    const long long slack = 4ll << 20, nxn_one_head = 2048ll * 2048 * 4;
    cr_assert_lt(slack, nxn_one_head);
    /* the measurement sees the KV (touched during the prefill), and little else */
    cr_assert_geq(g + slack, (long long)kv2, "peak growth %lld B is far below the KV's %zu B", g, kv2);
    cr_assert_leq(g, (long long)kv2 + slack, "peak grew %lld B over a 2,048-row prefill; the KV is %zu B", g, kv2);
    rc_blob_close(b);
}

/* The memory estimate (api.c, recall_open_opts.max_memory) counts RC_QWEN2_CHUNK_MAX rows of exact
 * scratch. A kernel path may ask for more rows than RC_QWEN2_CHUNK (rc_kernels.matmul_rows: the
 * AVX2 panel decode wants 128) but never gets more than the estimate counts. Where the AVX2 path
 * exists the test sees it take its 128 rows, so it cannot pass without the hint having run. */
Test(prefill_memory, chunk_rows_within_what_the_estimate_counts) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(path, 0, &b, &err), RECALL_OK, "%s", err.msg);
    int hinted = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!rc_simd_available((rc_simd_path)p)) continue;
        for (int q8 = 0; q8 < 2; q8++) {
            rc_exec_opts o = {.threads = 1, .simd = rc_simd_name((rc_simd_path)p), .numerics = q8 ? RC_NUMERICS_Q8 : 0};
            rc_exec *ex = NULL;
            rc_qwen2 *m = NULL;
            cr_assert_eq(rc_exec_open(&o, &ex, &err), RECALL_OK, "%s", err.msg);
            cr_assert_eq(rc_qwen2_open_ex(b, 256, ex, &m, &err), RECALL_OK, "%s", err.msg);
            const int rows = rc_qwen2_chunk_rows(m), hint = ex->k.matmul_rows;
            const char *name = rc_simd_name((rc_simd_path)p);
            if (q8) {
                cr_assert_eq(rows, RC_QWEN2_CHUNK_Q8, "%s q8: %d rows", name, rows);
            } else {
                cr_assert_leq(rows, RC_QWEN2_CHUNK_MAX, "%s: %d rows, the estimate counts %d", name, rows,
                              RC_QWEN2_CHUNK_MAX);
                cr_assert_eq(rows, hint > 0 ? (hint < RC_QWEN2_CHUNK_MAX ? hint : RC_QWEN2_CHUNK_MAX) : RC_QWEN2_CHUNK,
                             "%s: %d rows for a hint of %d", name, rows, hint);
                hinted += hint > 0;
            }
            rc_qwen2_close(m);
            rc_exec_close(ex);
        }
    }
    if (rc_simd_available(RC_SIMD_AVX2)) cr_assert_geq(hinted, 1, "the AVX2 path asked for no rows");
    rc_blob_close(b);
}
