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
 */
#ifndef RECALL_POOLER_H
#define RECALL_POOLER_H

#include "blob.h"
#include "pool.h"
#include "status.h"

typedef struct rc_pooler rc_pooler;

typedef struct {
    int n_sp, hidden, heads, blocks, ffn;
    float ln_eps;
    float out_scale; /* |out_scale| */
} rc_pooler_config;

recall_status rc_pooler_open(const rc_blob *b, rc_pooler **out, recall_err *err);
/* Same on an execution context (borrowed; NULL = private one, as rc_pooler_open). */
recall_status rc_pooler_open_ex(const rc_blob *b, const rc_exec *ex, rc_pooler **out, recall_err *err);
void rc_pooler_close(rc_pooler *p);
const rc_pooler_config *rc_pooler_cfg(const rc_pooler *p);

/* past [L][H] (may be NULL when L == 0), out [n_sp][H]. Scratch for L rows is kept in the
 * context and grown when a larger L arrives (the only allocation after open). */
recall_status rc_pooler_run(rc_pooler *p, const float *past, int L, float *out, recall_err *err);

#endif
