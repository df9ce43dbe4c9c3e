/* pooler.h - AttnPoolSP, the SP pooler (the gist of docs/LOOP.md): compresses L token embeddings
 * past[L][H] into n_sp soft-prompt rows out[n_sp][H]. Scalar fp32 reference path.
 *
 * Config keys: pooler.n_sp, pooler.hidden (H), pooler.heads, pooler.blocks, pooler.ffn,
 * pooler.ln_eps (f64, 1e-5). Tensors "pooler.<state-dict key>": query [n_sp,H];
 * blocks.i.{lnq1,lnk,lnq2,lnq3}.{weight,bias} [H]; blocks.i.{cross,selfa}.in_proj_weight [3H,H]
 * (rows Wq | Wk | Wv) + in_proj_bias [3H], .out_proj.weight [H,H] + .bias [H];
 * blocks.i.ffn.0.weight [ffn,H] + bias, blocks.i.ffn.2.weight [H,ffn] + bias; ln_out.{weight,bias};
 * out_scale (0-d; stored negative in worldA: |out_scale| is used).
 *
 * Forward (ops.h orders):
 *   if L > 0: P = past + pe, pe[p][j] = sin(p*div_j), pe[p][j+1] = cos(p*div_j) for even j,
 *     div_j = rc_expf((float)j * c), c = (float)(-ln(10000)/H), p*div_j one fp32 product.
 *   q = query; per block: [L > 0: kn = LN_k(P); q = q + MHA(LN_q1(q), kn, kn)];
 *     n = LN_q2(q); q = q + MHA(n, n, n); q = q + (W2 GELU(W0 LN_q3(q) + b0) + b2).
 *   MHA: Q/K/V = in_proj rows . x + bias; per head (hd = H/heads) softmax(dot * scale) . V,
 *     scale = (float)(1/sqrt((double)hd)); concat; out_proj + bias.
 *   sp = LN_out(q); row = (row / max(||row||, 1e-6)) * |out_scale|.
 * L = 0 skips the cross-attention entirely (and the positional encoding).
 *
 * Streaming (memory flat in L): the history is never held whole. A token's P row, its kn and
 * its K / V rows in each block depend on that token and its position alone, so the
 * cross-attention walks the history in tiles of `tile` tokens (rows fetched from the caller's
 * row source, pe added, LN_k, K or V projected for that tile only), twice per block:
 *   pass 1: every score of every (head, query) pair, tile by tile (a score is one dot product:
 *           which keys share its call never matters);
 *   softmax of each pair's full row of L scores (max, exp, canonical sum, divide: rc_softmax);
 *   pass 2: V tile by tile in ascending order, attn_wsum continuing from the previous tile
 *           (out starts at +0.0f, keys ascending: the order of one call over all L keys).
 * So the bits are those of the whole-history computation above, for every tile size, SIMD
 * path and thread count, while the memory that grows with L is the score rows alone:
 * heads x n_sp x L floats (1 KiB per token at 8 heads x 32 queries), held between runs.
 *
 * K/V cache (optional, rc_pooler_set_cache): with keys in the row source (a token id per row),
 * the K and V rows of every block of the oldest tokens are kept between runs, up to a byte
 * budget, in chunks of `tile` tokens: blocks x 2 x H floats per token (36 KiB at real shape:
 * 3 blocks, H = 1536). A run compares the keys with the cached ones and uses the cached rows
 * of the longest equal prefix (a row is a function of its key and position, so they are the
 * bits it would compute); rows past the budget are recomputed every run (streamed), which
 * costs what dropping the oldest to make room would cost, without the churn. Cached or not,
 * the bits are the same.
 */
#ifndef RECALL_POOLER_H
#define RECALL_POOLER_H

#include "blob.h"
#include "pool.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rc_pooler rc_pooler;

typedef struct {
    int n_sp, hidden, heads, blocks, ffn;
    float ln_eps;
    float out_scale; /* |out_scale| */
} rc_pooler_config;

#define RC_POOLER_TILE 64 /* tokens per tile and per cache chunk: a speed knob only */

recall_status rc_pooler_open(const rc_blob *b, rc_pooler **out, recall_err *err);
/* Same on an execution context (borrowed; NULL = private one, as rc_pooler_open). */
recall_status rc_pooler_open_ex(const rc_blob *b, const rc_exec *ex, rc_pooler **out, recall_err *err);
void rc_pooler_close(rc_pooler *p);
const rc_pooler_config *rc_pooler_cfg(const rc_pooler *p);

/* past [L][H] (may be NULL when L == 0), out [n_sp][H]. No cache (past has no keys). */
recall_status rc_pooler_run(rc_pooler *p, const float *past, int L, float *out, recall_err *err);

/* The history as a row source: rows(ctx, j0, n, dst, err) writes past rows [j0, j0 + n) to
 * dst[n][H] (n <= the tile; called on the calling thread, in any order, possibly several times
 * per row); keys: NULL, or keys[j] for j < L such that equal keys at equal positions always give
 * equal rows (e.g. token ids whose rows are their embeddings), which lets the cache serve them. */
typedef recall_status (*rc_pooler_rows_fn)(void *ctx, int j0, int n, float *dst, recall_err *err);
typedef struct {
    rc_pooler_rows_fn rows;
    void *ctx;
    const int32_t *keys;
} rc_pooler_src;
recall_status rc_pooler_run_src(rc_pooler *p, const rc_pooler_src *src, int L, float *out, recall_err *err);

/* The K/V cache's budget in bytes (0 = off, the default). Drops whatever it held. */
void rc_pooler_set_cache(rc_pooler *p, size_t bytes);
/* Bytes the cache spends per token (K and V of every block, and the key). */
size_t rc_pooler_cache_bytes_per_token(const rc_pooler *p);
/* Tokens per tile (>= 1; default RC_POOLER_TILE). Drops the cache. Never changes a bit: exists so
 * tests can prove that and benchmarks can time it. */
recall_status rc_pooler_set_tile(rc_pooler *p, int tile, recall_err *err);

typedef struct rc_pooler_stats {
    int last_L;           /* history length of the latest run */
    int last_cached;      /* of it: tokens whose K/V came from the cache */
    int last_filled;      /* computed once and added to the cache */
    int last_streamed;    /* computed per pass and dropped (no key, no budget left, or the cache off) */
    int cache_tokens;     /* tokens the cache holds */
    size_t cache_bytes;   /* bytes it holds (chunks and keys) */
    size_t scratch_bytes; /* other memory held that grows with L (the score rows) */
} rc_pooler_stats;
void rc_pooler_get_stats(const rc_pooler *p, rc_pooler_stats *out);

#endif
