/* realshape.c - smoke run of the decoder at the real DeepSeek-R1-Distill-Qwen-1.5B shape: one
 * 64-token prefill and 16 greedy decode steps on the synthetic nf4 blob (`make synth`), checking
 * the logits' shape and that every value is finite, and reporting tokens/s per path.
 *
 * usage: realshape BLOB [--simd scalar|avx2|avx512|neon] [--threads N]
 */
#include "bench_util.h"
#include "blob.h"
#include "pool.h"
#include "qwen2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: realshape BLOB [--simd PATH] [--threads N]\n");
        return 2;
    }
    rc_exec_opts eo = {.threads = 0};
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--simd")) eo.simd = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) eo.threads = atoi(argv[i + 1]);
    }
    recall_err err = {0};
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    if (rc_blob_open(argv[1], 0, &b, &err) || rc_exec_open(&eo, &ex, &err) || rc_qwen2_open_ex(b, 128, ex, &m, &err)) {
        fprintf(stderr, "realshape: %s\n", err.msg);
        return 1;
    }
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    int V = c->vocab, T = 64, steps = 16;
    int32_t ids[64];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 7919 + 13) % 151643); /* deterministic, below the specials */
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int i = 0; i < V; i++) logits[i] = NAN; /* poisoned: a skipped row would stay NaN */
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = ids;
    f.n = T;
    f.logits_last = logits;
    double t0 = bench_now_s();
    if (rc_qwen2_forward(m, &f, &err)) {
        fprintf(stderr, "realshape: %s\n", err.msg);
        return 1;
    }
    double t_prefill = bench_now_s() - t0;
    int ok = all_finite(logits, (size_t)V) && rc_qwen2_n_cached(m) == T;
    double t1 = bench_now_s();
    for (int s = 0; s < steps && ok; s++) {
        int32_t t = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[t]) t = i;
        for (int i = 0; i < V; i++) logits[i] = NAN;
        f.ids = &t;
        f.n = 1;
        if (rc_qwen2_forward(m, &f, &err)) {
            fprintf(stderr, "realshape: %s\n", err.msg);
            return 1;
        }
        ok = all_finite(logits, (size_t)V) && rc_qwen2_n_cached(m) == T + s + 1;
    }
    double t_decode = bench_now_s() - t1;
    printf("realshape %s: hidden %d, layers %d, heads %d/%d, head_dim %d, ffn %d, vocab %d; simd %s, %d thread(s)\n",
           argv[1], c->hidden, c->layers, c->heads, c->kv_heads, c->head_dim, c->ffn, V, ex->k.name, ex->threads);
    printf("prefill %d tokens: %.2f s (%.2f tok/s); decode %d steps: %.2f s (%.2f tok/s); logits finite: %s\n", T,
           t_prefill, T / t_prefill, steps, t_decode, steps / t_decode, ok ? "yes" : "NO");
    free(logits);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return ok ? 0 : 1;
}
