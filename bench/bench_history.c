/* bench_history.c - what one recall rebuild costs when the evicted history is N tokens long, on a
 * real-shape blob: the pooler over the N kept ids (wall and CPU seconds), the decoder forward of
 * the rebuild's rows ([SP 32][injected 256][window 512] = 800 rows, a constant), and the peak
 * resident memory while the pooler runs. One N per process (`make bench-history` runs 1k, 4k,
 * 16k, 64k), so each peak is that N's.
 *
 * usage: bench_history BLOB --len N [--cache-mb M] [--reps R] [--threads T] [--rows ROWS]
 * (--rows 0: the forward is not timed, a 64-row one only makes the weights resident; it is the
 * same at every N, so `make bench-history` times it once.)
 *        bench_history BLOB --other N [--threads T]
 *
 * The pooler runs as the loop runs it: ids embedded a tile at a time (rc_pooler_run_src with
 * rc_qwen2_embed_rows; keys = the ids when --cache-mb M > 0). With the cache, the history up to
 * N - 64 is pooled first (the previous rebuild; untimed), then R rebuilds at N, N + 64, ... are
 * timed, each adding one chunk of 64 tokens as the loop does; without it the R rebuilds run at
 * the same lengths. Built against a tree from before the streaming pooler (no RC_POOLER_TILE),
 * the same program measures that tree: the whole history embedded into one array (the loop's
 * `past`, kept between rebuilds) and rc_pooler_run over it.
 *
 * Memory: the bench first embeds every vocab row once (the embedding table is a file mapping
 * that random ids fault in 2 MiB at a time, whatever the pooler does: 467 MB at real shape) and
 * runs the 800-row forward, so that the mapped weights are resident before anything depends on
 * N. rss_open is the resident set then; VmHWM is reset (clear_refs) before the timed rebuilds and
 * read after them: peak - rss_open is what the history costs (cache included).
 *
 * --other N: the rest of what grows with the history, at N evicted tokens: the archive (ids),
 * the bridge keys of the sealed blocks, one fire's candidate scoring with every sealed block's
 * key cached (the pending buffer of 64 ids is BERT-encoded, as at every fire), one sealed
 * block's BERT encode (once per block, on the fast schedule), the session file of the whole
 * conversation written (fsync'd) once.
 *
 * One line per run on stdout, key=value, with the load average before and after.
 */
#include "bench_util.h"
#include "blob.h"
#include "heads.h"
#include "pool.h"
#include "pooler.h"
#include "qwen2.h"
#include "retriever.h"
#include "session.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_history: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(1);
}

static void loadavg(char *buf, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (fgets(buf, (int)n, f)) {
            char *sp = buf; /* the three averages */
            for (int k = 0; k < 3 && sp; k++) sp = strchr(sp + 1, ' ');
            if (sp) *sp = 0;
        }
        fclose(f);
    }
    for (char *c = buf; *c; c++)
        if (*c == ' ') *c = ',';
}

/* What both measurements open first: the blob, an execution context, and the load average then. */
typedef struct {
    char load0[64], load1[64];
    rc_blob *b;
    rc_exec *ex;
} bench_run;

static bench_run run_open(const char *blob, rc_exec_opts eo) {
    bench_run r;
    loadavg(r.load0, sizeof r.load0);
    r.load1[0] = 0;
    recall_err err = {0};
    if (rc_blob_open(blob, bench_open_flags(), &r.b, &err) || rc_exec_open(&eo, &r.ex, &err)) die(blob, &err);
    return r;
}

static void run_close(bench_run *r) {
    rc_exec_close(r->ex);
    rc_blob_close(r->b);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* pseudo-random ids below the specials, the same for every run */
static int32_t *history_ids(int n) {
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) die("ids", NULL);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % 151643u);
    }
    return ids;
}

#ifdef RC_POOLER_TILE
#define TREE "stream"
/* the loop's gist_rows: ids embedded a tile at a time; with the cache on, the ids are its keys */
static void pool(rc_pooler *p, const rc_qwen2 *m, const int32_t *ids, int L, int cache, float *sp) {
    recall_err err = {0};
    rc_qwen2_id_rows rows = {m, ids};
    const rc_pooler_src src = {rc_qwen2_embed_rows, &rows, cache ? ids : NULL};
    if (rc_pooler_run_src(p, &src, L, sp, &err)) die("pooler", &err);
}
#else
#define TREE "whole"
/* the loop before the streaming pooler: past[L][H] grown on demand and kept, then the pooler */
static float *past;
static size_t cap_past;
static void pool(rc_pooler *p, const rc_qwen2 *m, const int32_t *ids, int L, int cache, float *sp) {
    recall_err err = {0};
    (void)cache;
    const size_t need = (size_t)L * (size_t)rc_qwen2_cfg(m)->hidden;
    if (need > cap_past) {
        free(past);
        past = malloc(need * sizeof *past);
        if (!past) die("past", NULL);
        cap_past = need;
    }
    if (rc_qwen2_embed(m, ids, L, past, &err) || rc_pooler_run(p, past, L, sp, &err)) die("pooler", &err);
}
#endif

static int history(const char *blob, int N, int cache_mb, int reps, rc_exec_opts eo, int rows) {
    bench_run run = run_open(blob, eo);
    recall_err err = {0};
    rc_qwen2 *m;
    rc_pooler *p;
    if (rc_qwen2_open_ex(run.b, (rows > 64 ? rows : 64) + 1, run.ex, &m, &err) ||
        rc_pooler_open_ex(run.b, run.ex, &p, &err))
        die(blob, &err);
#ifdef RC_POOLER_TILE
    if (cache_mb > 0) rc_pooler_set_cache(p, (size_t)cache_mb << 20);
#else
    if (cache_mb > 0) {
        fprintf(stderr, "bench_history: this tree has no pooler cache\n");
        return 2;
    }
#endif
    const int H = rc_qwen2_cfg(m)->hidden, V = rc_qwen2_cfg(m)->vocab, S = rc_pooler_cfg(p)->n_sp;
    if (reps > 64) reps = 64;
    const int last = N + 64 * (reps - 1), R = rows > 64 ? rows : 64;
    int32_t *ids = history_ids(last > R ? last : R), *chunk = malloc((size_t)R * sizeof *chunk);
    float *sp = malloc((size_t)S * H * sizeof *sp), *in = malloc((size_t)R * H * sizeof *in);
    if (!sp || !in || !chunk) die("buffers", NULL);
    /* every embedding row once, the pooler's weights, then the rebuild forward (timed) */
    for (int v0 = 0; v0 < V; v0 += R) {
        const int n = V - v0 < R ? V - v0 : R;
        for (int i = 0; i < n; i++) chunk[i] = v0 + i;
        if (rc_qwen2_embed(m, chunk, n, in, &err)) die("embed", &err);
    }
    free(chunk);
    pool(p, m, ids, 64 < N ? 64 : N, 0, sp);
    memcpy(in, sp, (size_t)S * H * sizeof *sp);
    if (rc_qwen2_embed(m, ids, R - S, in + (size_t)S * H, &err)) die("embed", &err);
    int32_t bos = 151646;
    rc_qwen2_fwd f0 = {.ids = &bos, .n = 1};
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits || rc_qwen2_forward(m, &f0, &err)) die("bos", &err);
    double t0 = bench_now_s(), c0 = bench_cpu_s(), forward_s = -1, forward_cpu = -1;
    rc_qwen2_fwd fr = {.embeds = in, .n = rows ? rows : 64, .logits_last = logits}; /* --rows 0: 64 untimed */
    if (rc_qwen2_forward(m, &fr, &err)) die("rebuild forward", &err);
    if (rows) {
        forward_s = bench_now_s() - t0;
        forward_cpu = bench_cpu_s() - c0;
    }
    const double rss_open = bench_status_mib("VmRSS:");
    /* the previous rebuild (cache: the history up to N - 64 goes in) */
    if (cache_mb > 0 && N > 64) pool(p, m, ids, N - 64, 1, sp);
    const double rss_before = bench_status_mib("VmRSS:");
    const int reset = bench_reset_peak() == 0;
    double wall[64], cpu[64];
    for (int r = 0; r < reps; r++) {
        const double w0 = bench_now_s(), c0 = bench_cpu_s();
        pool(p, m, ids, N + 64 * r, cache_mb > 0, sp);
        wall[r] = bench_now_s() - w0;
        cpu[r] = bench_cpu_s() - c0;
        fprintf(stderr, "bench_history: N=%d rebuild %d/%d: pooler %.3f s\n", N + 64 * r, r + 1, reps, wall[r]);
    }
    const double peak = reset ? bench_status_mib("VmHWM:") : bench_peak_rss_mib();
    qsort(wall, (size_t)reps, sizeof *wall, cmp_d);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
    const double pool_s = wall[reps / 2], pool_cpu = cpu[reps / 2];
    double cache_mib = 0, scratch_mib = 0;
#ifdef RC_POOLER_TILE
    rc_pooler_stats st;
    rc_pooler_get_stats(p, &st);
    cache_mib = st.cache_bytes / 1048576.0;
    scratch_mib = st.scratch_bytes / 1048576.0;
#endif
    double norm = 0;
    for (int i = 0; i < S * H; i++) norm += (double)sp[i] * sp[i];
    loadavg(run.load1, sizeof run.load1);
    printf("history tree=%s N=%d cache_mb=%d threads=%d simd=%s reps=%d pooler_s=%.4f pooler_min_s=%.4f "
           "pooler_cpu_s=%.4f forward_rows=%d forward_s=%.3f forward_cpu_s=%.3f rebuild_s=%.3f rss_open_mib=%.1f rss_before_mib=%.1f "
           "peak_mib=%.1f growth_kib_per_token=%.2f cache_mib=%.1f scratch_mib=%.1f peak_reset=%s sp_sumsq=%.6f "
           "load_before=%s load_after=%s\n",
           TREE, N, cache_mb, run.ex->threads, run.ex->k.name, reps, pool_s, wall[0], pool_cpu, rows, forward_s, forward_cpu,
           forward_s < 0 ? -1.0 : pool_s + forward_s, rss_open, rss_before, peak, (peak - rss_open) * 1024.0 / (double)last, cache_mib,
           scratch_mib, reset ? "yes" : "no", norm, run.load0, run.load1);
    free(ids);
    free(sp);
    free(in);
    free(logits);
    rc_pooler_close(p);
    rc_qwen2_close(m);
    run_close(&run);
    return 0;
}

/* the median of 5 retrievals over archive a with key cache kc */
static double time_fire(const rc_retriever *rt, const rc_archive *a, const float *f, rc_key_cache *kc) {
    double t[5];
    for (int r = 0; r < 5; r++) {
        recall_err err = {0};
        rc_retrieval rv;
        const double t0 = bench_now_s();
        if (rc_retrieve_bge(rt, a, f, 2, 16, kc, &rv, &err)) die("retrieve", &err);
        t[r] = bench_now_s() - t0;
        rc_retrieval_free(&rv);
    }
    qsort(t, 5, sizeof *t, cmp_d);
    return t[2];
}

/* The rest of what grows with the history, at N evicted tokens (see the header). */
static int other(const char *blob, int N, rc_exec_opts eo) {
    bench_run run = run_open(blob, eo);
    recall_err err = {0};
    rc_bert *bert;
    rc_heads *heads;
    rc_bpe *bpe;
    rc_wp *wp;
    size_t size;
    if (rc_bert_open_ex(run.b, run.ex, &bert, &err) || rc_heads_open(run.b, &heads, &err)) die(blob, &err);
    const void *sec = rc_blob_section(run.b, RC_SECT_TOK_BPE, &size);
    if (!sec || rc_bpe_load(sec, size, &bpe, &err)) die("bpe", &err);
    sec = rc_blob_section(run.b, RC_SECT_TOK_WORDPIECE, &size);
    if (!sec || rc_wp_load(sec, size, &wp, &err)) die("wordpiece", &err);
    const int block = 128, pending = 64, nb = N / block;
    int32_t *ids = history_ids(N + pending);
    rc_archive a;
    rc_archive_init(&a, block);
    if (rc_archive_push(&a, ids, nb * block + pending, &err)) die("archive", &err);
    for (int i = 0; i < nb; i++)
        if (!rc_archive_seal(&a, &err)) die("seal", &err);
    const int d = rc_bridge_d(heads), qdim = rc_bridge_qdim(heads);
    rc_retriever rt = {bpe, wp, bert, heads, rc_bert_cfg(bert)->max_seq};
    float *f = malloc((size_t)qdim * sizeof *f);
    if (!f) die("gate feature", NULL);
    for (int i = 0; i < qdim; i++) f[i] = (float)((i * 40503u) % 2001) * 1e-3f - 1.0f;
    /* one sealed block's key: BERT + Wk (the fast schedule does this once per block) */
    rc_key_cache kc = {0};
    rc_archive one = a, sealed = a;
    one.n_blocks = nb > 0 ? 1 : 0;
    one.n_buf = 0;
    sealed.n_buf = 0;
    rc_retrieval rv;
    double blk[4];
    for (int r = 0; r < 4; r++) { /* the first also maps BERT's weights: the median of the last 3 */
        kc.n = 0;
        const double t0 = bench_now_s();
        if (rc_retrieve_bge(&rt, &one, f, 2, 16, &kc, &rv, &err)) die("retrieve", &err);
        blk[r] = bench_now_s() - t0;
        rc_retrieval_free(&rv);
    }
    qsort(blk + 1, 3, sizeof *blk, cmp_d);
    const double block_s = blk[2];
    /* every sealed block's key in the cache (values do not change the cost of scoring them) */
    kc.d = d;
    kc.cap = kc.n = nb;
    free(kc.kz);
    kc.kz = malloc((size_t)(nb ? nb : 1) * d * sizeof *kc.kz);
    if (!kc.kz) die("key cache", NULL);
    for (size_t i = 0; i < (size_t)nb * d; i++) kc.kz[i] = (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
    /* a fire (the pending buffer encoded, every sealed block's key from the cache), then the
     * scoring alone (the same fire with no pending buffer) */
    const double fire_s = time_fire(&rt, &a, f, &kc), score_s = time_fire(&rt, &sealed, f, &kc);
    /* the session file: the whole conversation, written atomically (fsync'd) */
    char path[64];
    snprintf(path, sizeof path, "/tmp/bench_history_%ld.session", (long)getpid());
    const double t0 = bench_now_s();
    if (rc_session_save(path, ids, (size_t)N, 151936, &err)) die("session", &err);
    const double session_s = bench_now_s() - t0;
    unlink(path);
    loadavg(run.load1, sizeof run.load1);
    printf("other N=%d threads=%d simd=%s archive_bytes=%zu key_dim=%d key_cache_bytes=%zu blocks=%d "
           "block_encode_s=%.4f fire_s=%.4f fire_scoring_s=%.5f session_bytes=%zu session_save_s=%.4f "
           "load_before=%s load_after=%s\n",
           N, run.ex->threads, run.ex->k.name, (size_t)(nb * block + pending) * sizeof(int32_t), d,
           (size_t)nb * d * sizeof(float), nb, block_s, fire_s, score_s,
           RC_SESSION_HEADER + (size_t)N * 4u, session_s, run.load0, run.load1);
    rc_key_cache_free(&kc);
    rc_archive_free(&a);
    free(f);
    free(ids);
    rc_wp_free(wp);
    rc_bpe_free(bpe);
    rc_heads_close(heads);
    rc_bert_close(bert);
    run_close(&run);
    return 0;
}

int main(int argc, char **argv) {
    const char *usage = "usage: bench_history BLOB --len N [--cache-mb M] [--reps R] [--threads T] [--rows ROWS]\n"
                        "       bench_history BLOB --other N [--threads T]\n";
    bench_usage(argc, argv, usage);
    rc_exec_opts eo = {.threads = 2};
    int N = -1, oth = -1, cache_mb = 0, reps = 3, rows = 800;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_history: %s needs a value\n%s", argv[i], usage);
            return 2;
        }
        const int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--len")) N = v;
        else if (!strcmp(argv[i], "--other")) oth = v;
        else if (!strcmp(argv[i], "--cache-mb")) cache_mb = v;
        else if (!strcmp(argv[i], "--reps")) reps = v;
        else if (!strcmp(argv[i], "--threads")) eo.threads = v;
        else if (!strcmp(argv[i], "--rows")) rows = v;
        else if (!strcmp(argv[i], "--simd")) eo.simd = argv[i + 1];
        else {
            fprintf(stderr, "bench_history: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (oth >= 0) return other(argv[1], oth, eo);
    if (N < 1 || reps < 1 || rows < 0 || (rows && rows < 64)) {
        fprintf(stderr, "bench_history: need --len N >= 1, --reps >= 1, --rows 0 or >= 64\n%s", usage);
        return 2;
    }
    return history(argv[1], N, cache_mb, reps, eo, rows);
}
