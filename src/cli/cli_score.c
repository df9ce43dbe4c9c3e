/* cli_score.c - `recall score`: teacher-forced scoring and perplexity with llama-perplexity's
 * protocol (the chunk length is --chunk N; the instance context is sized to the chunk).
 *
 * Per position (natural log, double precision from the fp32 logits of row j, target t = ids[j+1]):
 *   nll_j = -(logit[t] - lse),  lse = m + log(sum_i exp((double)logit[i] - m)),  m = max_i logit[i]
 *   greedy_j = argmax_i logit[i] (lowest id on ties)
 * Perplexity (llama.cpp tools/perplexity/perplexity.cpp, perplexity(), ppl_stride 0):
 *   - the ids are split into n_chunk = floor(n / n_ctx) chunks of n_ctx ids; a trailing
 *     remainder is not scored;
 *   - each chunk is evaluated from an empty cache at positions 0 .. n_ctx-1; with --bos (or a
 *     blob whose tok.add_bos is 1) its first id is replaced by tok.bos for the evaluation, as
 *     llama-perplexity does for vocabularies with add_bos (Qwen2's does not, hence off by default);
 *   - positions j in [first, n_ctx-1), first = n_ctx/2, are scored (predicting id j+1), i.e.
 *     n_ctx - first - 1 positions per chunk;
 *   - after chunk i the running estimate exp(sum nll / count) is printed as "[i]%.4f,";
 *   - final: PPL = exp(mean nll) +/- PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)).
 * Differences from llama-perplexity, on purpose: llama sums expf(logit - max) in double and takes
 * logf-rounded intermediates; here everything after the fp32 logits is double (diffs ~1e-7).
 * llama refuses inputs under 2*n_ctx tokens; here one full chunk (n_ctx tokens) is enough.
 * The token-id hash is XXH64 (seed 0) of the int32 ids in little-endian order.
 * Only this file (and the other cli_*.c) print; the library returns errors as values. */
#include "blob.h"
#include "checksum.h"
#include "draft.h"
#include "cli.h"
#include "recall_loop.h"
#include "json.h"
#include "ops.h"
#include "pool.h"
#include "qwen2.h"
#include "rope.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- recall score */

#define SCORE_BATCH 64 /* rows per forward call: bounds the logits buffer to 64 x vocab floats */

typedef struct {
    int chunk, pos, target, greedy, scored;
    double nll;
} score_pos;

/* The checks of the command line beyond single values; 0, or 2 (printed). */
static int score_check_args(const cli_args *a) {
    if (!a->ids && !a->tokens_file) return cli_usage_error("score", "--tokens-file or --ids is required");
    if (a->kvp.random && !a->kvp.page) return cli_usage_error("score", "--kv-pages-random needs --kv-pages PAGE:BUDGET");
    if (a->kvp.page && a->scoring_rows != 1)
        return cli_usage_error("score", "--kv-pages acts on decode steps only: add --scoring-rows 1");
    return 0;
}

/* The scoring run: the model, the ids, the chunking and the running sums. */
typedef struct {
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    int32_t *ids, *chunk_ids;
    int n;
    const char *src; /* names the ids in messages: the file or "--ids" */
    int use_bos;
    int64_t bos_id;
    int n_ctx, n_chunk, first;
    size_t V;
    float *logits;     /* SCORE_BATCH x V */
    double *chunk_ppl; /* running PPL after each chunk */
    score_pos *pp;     /* --per-position rows */
    size_t ip;
    uint64_t hash;
    long count;
    double nll, nll2;
    double decode_tps; /* --scoring-rows 1: the speed of the latest full window of SCORE_TPS_WINDOW */
    int tps_rows;      /* decode rows (or of the only, shorter, window) */
} score_run;

static void score_close(score_run *s) {
    free(s->pp);
    free(s->chunk_ppl);
    free(s->chunk_ids);
    free(s->logits);
    free(s->ids);
    rc_qwen2_close(s->m);
    rc_exec_close(s->ex);
    rc_blob_close(s->b);
}

/* Reads the ids, opens the blob and the model for the chunk length, checks the ids against the
 * vocab and allocates the buffers. */
static recall_status score_open(const cli_args *o, score_run *s, recall_err *err) {
    RC_TRY(cli_get_ids(o, &s->ids, &s->n, err));
    RC_TRY(cli_blob_open(o, o->pos[0], 0, &s->b, err));
    s->src = cli_ids_source(o);
    int64_t add_bos = 0;
    int max_pos = 0; /* trained positions under the RoPE profile */
    s->bos_id = -1;
    RC_TRY(rc_rope_blob_positions(s->b, &max_pos, err));
    if (rc_blob_kv_find(s->b, "tok.add_bos")) RC_TRY(rc_blob_get_i64(s->b, "tok.add_bos", &add_bos, err));
    s->use_bos = o->bos || add_bos == 1;
    if (s->use_bos) RC_TRY(rc_blob_get_i64(s->b, "tok.bos", &s->bos_id, err));
    /* default chunk: the whole input, but never silently past the trained window */
    const int n = s->n;
    s->n_ctx = o->chunk ? o->chunk : (n < max_pos ? n : max_pos);
    if (s->n_ctx < 3) return rc_fail(err, RECALL_E_ARG, "%s: %d tokens; scoring needs a chunk of at least 3", s->src, n);
    RC_TRY(cli_exec_open(o, &s->ex, err));
    cli_banner("score", s->ex->k.name, s->ex->threads);
    RC_TRY(rc_qwen2_open_ex(s->b, s->n_ctx, s->ex, &s->m, err));
    RC_TRY(rc_qwen2_set_kv_dtype(s->m, (rc_kv_dtype)o->loop.kv, err));
    RC_TRY(rc_qwen2_set_kv_pages(s->m, &o->kvp, err));
    if (n < s->n_ctx)
        return rc_fail(err, RECALL_E_ARG, "%s: %d tokens is shorter than one chunk of %d (--chunk)", s->src, n, s->n_ctx);
    /* a request of known size: reserve the chunk once instead of growing by doubling */
    RC_TRY(rc_qwen2_reserve(s->m, s->n_ctx, err));
    const rc_qwen2_config *c = rc_qwen2_cfg(s->m);
    s->V = (size_t)c->vocab;
    if (s->use_bos && (s->bos_id < 0 || s->bos_id >= c->vocab))
        return rc_fail(err, RECALL_E_FORMAT, "%s: tok.bos %lld outside the vocab (%d)", o->pos[0],
                       (long long)s->bos_id, c->vocab);
    for (int i = 0; i < n; i++)
        if (s->ids[i] >= c->vocab)
            return rc_fail(err, RECALL_E_ARG, "%s: token id %d at index %d outside [0, %d)", s->src, (int)s->ids[i], i,
                           c->vocab);
    s->n_chunk = n / s->n_ctx;
    s->first = s->n_ctx / 2;
    const size_t n_pp = o->per_position ? (size_t)s->n_chunk * (size_t)(s->n_ctx - 1) : 0;
    s->logits = (float *)malloc((size_t)SCORE_BATCH * s->V * sizeof(float));
    s->chunk_ids = (int32_t *)malloc((size_t)s->n_ctx * sizeof(int32_t));
    s->chunk_ppl = (double *)malloc((size_t)s->n_chunk * sizeof(double));
    s->pp = (score_pos *)malloc((n_pp ? n_pp : 1) * sizeof(score_pos));
    if (!s->logits || !s->chunk_ids || !s->chunk_ppl || !s->pp) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    s->hash = rc_xxh64_ids(s->ids, (size_t)n);
    return RECALL_OK;
}

/* Every chunk from an empty cache, SCORE_BATCH rows per forward; prints the running PPL per chunk. */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rows of the call starting at r0: SCORE_BATCH, or --scoring-rows from the first scored one on
 * (the unscored rows before it in prefill calls that stop there). */
static int score_call_rows(const cli_args *o, const score_run *s, int r0) {
    int nr = SCORE_BATCH;
    if (o->scoring_rows != SCORE_BATCH) nr = r0 < s->first ? (s->first - r0 < SCORE_BATCH ? s->first - r0 : SCORE_BATCH) : o->scoring_rows;
    return s->n_ctx - r0 < nr ? s->n_ctx - r0 : nr;
}

#define SCORE_TPS_WINDOW 256 /* decode rows per tok/s report */

static recall_status score_chunks(const cli_args *o, score_run *s, recall_err *err) {
    const int n_ctx = s->n_ctx;
    const long rows_total = (long)s->n_chunk * n_ctx;
    long rows_done = 0;
    for (int ch = 0; ch < s->n_chunk; ch++) {
        const int32_t *tok = s->ids + (size_t)ch * n_ctx;
        memcpy(s->chunk_ids, tok, (size_t)n_ctx * sizeof(int32_t));
        if (s->use_bos) s->chunk_ids[0] = (int32_t)s->bos_id;
        RC_TRY(rc_qwen2_crop(s->m, 0, err));
        double t_win = now_s();
        int n_win = 0;
        for (int r0 = 0, nr; r0 < n_ctx; r0 += nr) {
            nr = score_call_rows(o, s, r0);
            rc_qwen2_fwd f = {.ids = s->chunk_ids + r0, .n = nr, .logits_all = s->logits};
            if (r0 == s->first) t_win = now_s();
            RC_TRY(rc_qwen2_forward(s->m, &f, err));
            /* decode speed per SCORE_TPS_WINDOW rows, and over the chunk's last (partial) window */
            if (o->scoring_rows == 1 && r0 >= s->first && (++n_win == SCORE_TPS_WINDOW || r0 + 1 == n_ctx)) {
                const double t = now_s();
                if (n_win == SCORE_TPS_WINDOW || s->tps_rows < SCORE_TPS_WINDOW) {
                    s->decode_tps = (double)n_win / (t - t_win);
                    s->tps_rows = n_win;
                }
                fprintf(stderr, "score: decode rows %d..%d: %.2f tok/s\n", r0 + 1 - n_win, r0, (double)n_win / (t - t_win));
                t_win = t;
                n_win = 0;
            }
            for (int t = 0; t < nr; t++) {
                const int j = r0 + t;
                if (j >= n_ctx - 1) break; /* the last row has no target inside the chunk */
                int greedy;
                const int target = tok[j + 1]; /* in range: checked in score_open */
                const double v = rc_row_nll(s->logits + (size_t)t * s->V, s->V, target, &greedy);
                const int scored = j >= s->first;
                if (scored) {
                    s->nll += v;
                    s->nll2 += v * v;
                    s->count++;
                }
                if (o->per_position) s->pp[s->ip++] = (score_pos){ch, j, target, greedy, scored, v};
            }
            rows_done += nr;
            if (rows_done % 1024 < (long)nr || r0 + nr == n_ctx || (o->scoring_rows == 1 && r0 + nr == s->first))
                fprintf(stderr, "score: %s %ld/%ld rows (chunk %d/%d)\n", o->scoring_rows == 1 && r0 >= s->first ? "decode" : "prefill",
                        rows_done, rows_total, ch + 1, s->n_chunk);
        }
        s->chunk_ppl[ch] = exp(s->nll / (double)s->count);
        printf("[%d]%.4f,", ch + 1, s->chunk_ppl[ch]);
        fflush(stdout);
    }
    printf("\n");
    return RECALL_OK;
}

static recall_status score_write_json(const cli_args *o, const score_run *s, double mean, double ppl,
                                      double ppl_err, recall_err *err) {
    rc_afile af;
    RC_TRY(rc_afile_open(&af, o->json, err));
    FILE *jf = af.f;
    fprintf(jf,
            "{\"n_tokens\": %d, \"ids_xxh64\": \"%016llx\", \"n_ctx\": %d, \"n_chunks\": %d, \"first\": %d, "
            "\"bos\": %s, \"scored\": %ld, \"mean_nll\": %.17g, \"ppl\": %.17g, \"ppl_err\": %.17g, "
            "\"kv_bytes\": %zu, \"chunk_ppl\": [",
            s->n, (unsigned long long)s->hash, s->n_ctx, s->n_chunk, s->first, s->use_bos ? "true" : "false",
            s->count, mean, ppl, ppl_err, rc_qwen2_kv_bytes(s->m));
    for (int i = 0; i < s->n_chunk; i++) fprintf(jf, "%s%.17g", i ? ", " : "", s->chunk_ppl[i]);
    char kvp[128];
    cli_kv_pages_describe(&o->kvp, kvp, sizeof kvp);
    fprintf(jf, "], \"scoring_rows\": %d, \"attention\": \"%s\", \"kv\": \"%s\", \"numerics\": \"%s\"", o->scoring_rows,
            kvp, rc_kv_dtype_name(rc_qwen2_kv_dtype(s->m)), rc_numerics_name(rc_qwen2_numerics(s->m)));
    if (s->decode_tps > 0) fprintf(jf, ", \"decode_tok_s\": %.6g, \"decode_tok_s_rows\": %d", s->decode_tps, s->tps_rows);
    if (o->per_position) {
        fputs(", \"positions\": [", jf);
        for (size_t i = 0; i < s->ip; i++)
            fprintf(jf, "%s\n{\"chunk\": %d, \"pos\": %d, \"target\": %d, \"nll\": %.17g, \"greedy\": %d, "
                        "\"scored\": %s}",
                    i ? "," : "", s->pp[i].chunk, s->pp[i].pos, s->pp[i].target, s->pp[i].nll, s->pp[i].greedy,
                    s->pp[i].scored ? "true" : "false");
        fputs("]", jf);
    }
    fputs("}\n", jf);
    return rc_afile_commit(&af, err);
}

/* The final estimate and the per-position rows (stdout), then --json. */
static recall_status score_report(const cli_args *o, const score_run *s, recall_err *err) {
    const double mean = s->nll / (double)s->count, ppl = exp(mean);
    double var = s->nll2 / (double)s->count - mean * mean, ppl_err = 0.0;
    if (s->count > 1 && var > 0) ppl_err = sqrt(var / (double)(s->count - 1)) * ppl;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
    printf("scored %ld positions, mean nll %.9f\n", s->count, mean);
    printf("kv_bytes %zu (%d positions allocated, context %d)\n", rc_qwen2_kv_bytes(s->m), rc_qwen2_kv_capacity(s->m),
           rc_qwen2_max_ctx(s->m));
    if (s->decode_tps > 0)
        printf("decode %.2f tok/s over the last %d positions of the last chunk\n", s->decode_tps, s->tps_rows);
    if (o->per_position)
        for (size_t i = 0; i < s->ip; i++)
            printf("chunk %d pos %d target %d nll %.9f greedy %d%s\n", s->pp[i].chunk, s->pp[i].pos, s->pp[i].target,
                   s->pp[i].nll, s->pp[i].greedy, s->pp[i].scored ? " scored" : "");
    return o->json ? score_write_json(o, s, mean, ppl, ppl_err, err) : RECALL_OK;
}

int cli_score(const cli_args *a) {
    int rc = score_check_args(a);
    if (rc) return rc;
    recall_err err = {0};
    score_run s;
    memset(&s, 0, sizeof s);
    rc = 1;
    if (!score_open(a, &s, &err)) {
        printf("tokens %d xxh64 %016llx\n", s.n, (unsigned long long)s.hash);
        char kvp[128];
        cli_kv_pages_describe(&a->kvp, kvp, sizeof kvp);
        printf("n_ctx %d chunks %d scored_per_chunk %d bos %s\n", s.n_ctx, s.n_chunk, s.n_ctx - s.first - 1,
               s.use_bos ? "replaced" : "off");
        printf("scoring rows per call %d, attention %s, kv %s\n", a->scoring_rows, kvp,
               rc_kv_dtype_name(rc_qwen2_kv_dtype(s.m)));
        char num[320];
        cli_numerics_describe(s.m, num, sizeof num);
        printf("numerics %s\n", num);
        fflush(stdout);
        if (!score_chunks(a, &s, &err) && !score_report(a, &s, &err)) rc = 0;
    }
    if (rc) fprintf(stderr, "recall score: %s\n", err.msg[0] ? err.msg : recall_strerror(err.code));
    score_close(&s);
    return rc;
}
