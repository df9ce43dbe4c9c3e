/* longctx_bench.c - the decoder at one long context length N on a real-shape blob: reserve the KV
 * cache for N positions, prefill N-D ids (pseudo-random, below the specials), then D greedy decode
 * steps that end at position N-1; reports prefill tok/s, decode tok/s at the end of the context,
 * the KV bytes (rc_qwen2_kv_bytes) and the process's peak RSS (getrusage ru_maxrss), plus the
 * RSS before the prefill and the CPU seconds of each phase. Run one N per process (`make
 * bench-long` does) so the peak is per N: peak RSS minus KV bytes staying flat across N shows the
 * prefill memory is linear in N (the score buffer is N floats per (head, row) pair of a worker's
 * attention block, the RoPE tables N x D; no N x N matrix).
 *
 * usage: longctx_bench BLOB --len N [--decode D] [--threads T] [--simd PATH] [--chunk R] [--attn PAIRS:TILE]
 *                      [--kv f32|f16] [--numerics exact|q8] [--prompt IDS]
 * --attn sets the attention blocking (qwen2.h; 1:0 = one row at a time, the loop before blocking):
 * the result line carries an XXH64 of the last logits, equal for every setting. --kv: the KV cache
 * storage (f16: half the KV bytes; other logits). --numerics: the decoder's profile (q8.h; q8 packs
 * the layer matrices at open, before the RSS "before prefill" is read).
 * --prompt IDS: instead of pseudo-random ids, prefill BOS + the ids of file IDS (a JSON array or
 * whitespace-separated ids, e.g. a case of `recall longctx --prompts DIR --no-run`), so N becomes
 * 1 + len(IDS) + D (--len is then not needed), and print the D greedy ids the model answers with
 * ("reply ids [...]"; `recall detokenize` gives the text): a needle case's answer at the length.
 * (RECALL_BENCH_LOAD=huge copies the blob into huge-page-advised memory, as the other benches)
 * Prefill progress goes to stderr; the result is one line on stdout ("longctx N=... ").
 */
#include "bench_util.h"
#include "blob.h"
#include "checksum.h"
#include "pool.h"
#include "q8.h"
#include "qwen2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every decimal integer in file path (a JSON array or whitespace-separated ids); NULL on error. */
static int32_t *read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int cap = 1024, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    int ch, in = 0;
    long long x = 0;
    while (v && (ch = fgetc(f)) != EOF) {
        if (ch >= '0' && ch <= '9') {
            x = in ? x * 10 + (ch - '0') : ch - '0';
            in = 1;
            if (x > 0x7fffffff) break;
            continue;
        }
        if (in) {
            if (k == cap) {
                int32_t *w = realloc(v, (size_t)(cap *= 2) * sizeof *v);
                if (!w) break;
                v = w;
            }
            v[k++] = (int32_t)x;
        }
        in = 0;
    }
    int bad = ferror(f) || ch != EOF || in;
    fclose(f);
    if (bad || !v || k == 0) {
        free(v);
        return NULL;
    }
    *n = k;
    return v;
}

static int argmax(const float *x, int n) {
    int t = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[t]) t = i;
    return t;
}

int main(int argc, char **argv) {
    const char *usage = "usage: longctx_bench BLOB --len N [--decode D] [--threads T] [--simd PATH] [--chunk R] "
                        "[--attn PAIRS:TILE] [--kv f32|f16] [--numerics exact|q8] [--prompt IDS]\n";
    bench_usage(argc, argv, usage);
    rc_exec_opts eo = {.threads = 0};
    int N = 4096, D = 16, R = 512, pairs = RC_QWEN2_ATT_PAIRS, tile = RC_QWEN2_ATT_TILE, kv = RC_KV_DT_F32;
    const char *prompt = NULL;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "longctx_bench: %s needs a value\n%s", argv[i], usage);
            return 2;
        }
        if (!strcmp(argv[i], "--len")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) D = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) R = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) eo.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--simd")) eo.simd = argv[i + 1];
        else if (!strcmp(argv[i], "--kv")) {
            if ((kv = rc_kv_dtype_parse(argv[i + 1])) < 0) {
                fprintf(stderr, "longctx_bench: --kv wants f32 or f16, got '%s'\n", argv[i + 1]);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--prompt")) prompt = argv[i + 1];
        else if (!strcmp(argv[i], "--numerics")) {
            if ((eo.numerics = rc_numerics_parse(argv[i + 1])) < 0) {
                fprintf(stderr, "longctx_bench: --numerics wants exact or q8, got '%s'\n", argv[i + 1]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--attn")) {
            if (sscanf(argv[i + 1], "%d:%d", &pairs, &tile) != 2 || pairs < 1 || tile < 0) {
                fprintf(stderr, "longctx_bench: --attn wants PAIRS:TILE (PAIRS >= 1, TILE >= 0), got '%s'\n", argv[i + 1]);
                return 2;
            }
        } else {
            fprintf(stderr, "longctx_bench: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    int32_t *pids = NULL;
    int np = 0;
    if (prompt) {
        if (!(pids = read_ids(prompt, &np))) {
            fprintf(stderr, "longctx_bench: %s: cannot read token ids (a JSON array or whitespace-separated ids)\n", prompt);
            return 1;
        }
        N = 1 + np + D;
    }
    if (D < 1 || R < 1 || N < D + 1) {
        fprintf(stderr, "longctx_bench: need --len > --decode >= 1 and --chunk >= 1\n");
        return 2;
    }
    const unsigned flags = bench_open_flags();
    recall_err err = {0};
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    if (rc_blob_open(argv[1], flags, &b, &err) || rc_exec_open(&eo, &ex, &err) ||
        rc_qwen2_open_ex(b, N, ex, &m, &err) || rc_qwen2_set_kv_dtype(m, (rc_kv_dtype)kv, &err) ||
        rc_qwen2_reserve(m, N, &err)) {
        fprintf(stderr, "longctx_bench: %s\n", err.msg);
        return 1;
    }
    rc_qwen2_set_attn_blocking(m, pairs, tile);
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    const int V = c->vocab, P = N - D;
    int32_t *ids = malloc((size_t)P * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t *reply = calloc((size_t)D, sizeof *reply);
    if (!ids || !logits || !reply) {
        fprintf(stderr, "longctx_bench: out of memory\n");
        return 1;
    }
    if (pids) {
        int64_t bos = -1;
        if (rc_blob_get_i64(b, "tok.bos", &bos, &err) || bos < 0 || bos >= V) {
            fprintf(stderr, "longctx_bench: --prompt needs the blob's tok.bos: %s\n", err.msg);
            return 1;
        }
        ids[0] = (int32_t)bos;
        for (int i = 0; i < np; i++) {
            if (pids[i] < 0 || pids[i] >= V) {
                fprintf(stderr, "longctx_bench: %s: id %d at index %d is outside the vocabulary (%d)\n", prompt,
                        (int)pids[i], i, V);
                return 1;
            }
            ids[1 + i] = pids[i];
        }
    } else
        for (int i = 0; i < P; i++) ids[i] = (int32_t)(((int64_t)i * 7919 + 13) % 151643); /* below the specials */
    for (int i = 0; i < V; i++) logits[i] = NAN; /* poisoned: a skipped row would stay NaN */
    const double rss_before = bench_status_mib("VmRSS:");
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    double t0 = bench_now_s(), c0 = bench_cpu_s();
    for (int at = 0; at < P; at += R) {
        f.ids = ids + at;
        f.n = P - at < R ? P - at : R;
        f.logits_last = at + f.n == P ? logits : NULL; /* lm_head only for the last row */
        if (rc_qwen2_forward(m, &f, &err)) {
            fprintf(stderr, "longctx_bench: %s\n", err.msg);
            return 1;
        }
        double t = bench_now_s() - t0;
        fprintf(stderr, "\rprefill %d/%d positions, %.1f s, %.2f tok/s   ", at + f.n, P, t, (at + f.n) / t);
    }
    const double t_prefill = bench_now_s() - t0, c_prefill = bench_cpu_s() - c0;
    fprintf(stderr, "\n");
    int ok = rc_qwen2_n_cached(m) == P && isfinite(logits[argmax(logits, V)]);
    double t1 = bench_now_s(), c1 = bench_cpu_s();
    for (int s = 0; s < D && ok; s++) {
        int32_t t = argmax(logits, V);
        reply[s] = t;
        for (int i = 0; i < V; i++) logits[i] = NAN;
        f.ids = &t;
        f.n = 1;
        f.logits_last = logits;
        if (rc_qwen2_forward(m, &f, &err)) {
            fprintf(stderr, "longctx_bench: %s\n", err.msg);
            return 1;
        }
        ok = rc_qwen2_n_cached(m) == P + s + 1 && isfinite(logits[argmax(logits, V)]);
    }
    const double t_decode = bench_now_s() - t1, c_decode = bench_cpu_s() - c1;
    const double kv_mib = rc_qwen2_kv_bytes(m) / 1048576.0, peak = bench_peak_rss_mib();
    printf("longctx N=%d simd=%s threads=%d attn=%d:%d kv=%s numerics=%s load=%s: prefill %d tok %.1f s %.2f tok/s (cpu %.1f s); decode %d steps "
           "at %d..%d %.3f s %.2f tok/s (cpu %.3f s); kv %.1f MiB (%zu B, capacity %d); rss before prefill %.1f MiB; peak rss %.1f MiB; "
           "peak-kv %.1f MiB; finite %s; last logits xxh64 %016llx",
           N, ex->k.name, ex->threads, pairs, tile, rc_kv_dtype_name((rc_kv_dtype)kv), rc_numerics_name(eo.numerics), flags ? "huge" : "mmap", P, t_prefill, P / t_prefill, c_prefill, D, P, N - 1,
           t_decode, D / t_decode, c_decode, kv_mib, rc_qwen2_kv_bytes(m), rc_qwen2_kv_capacity(m), rss_before, peak, peak - kv_mib,
           ok ? "yes" : "NO", (unsigned long long)rc_xxh64(logits, (size_t)V * sizeof *logits, 0));
    if (pids) {
        printf("; prompt %s (%d ids + BOS); reply ids [", prompt, np);
        for (int s = 0; s < D; s++) printf("%s%d", s ? ", " : "", (int)reply[s]);
        printf("]");
    }
    printf("\n");
    free(reply);
    free(pids);
    free(ids);
    free(logits);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return ok ? 0 : 1;
}
