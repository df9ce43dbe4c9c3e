/* bert.h - BERT encoder as sentence-transformers runs bge (CLS pooling + L2 normalise), scalar
 * fp32 reference path. Input: WordPiece ids (with [CLS] ... [SEP], already truncated).
 *
 * Config keys bert.*: hidden H, layers, heads, ffn, vocab, max_pos, type_vocab, ln_eps (f64),
 * max_seq. Tensors "bert.<HF name>": embeddings.{word,position,token_type}_embeddings.weight,
 * embeddings.LayerNorm.{weight,bias}; encoder.layer.i.attention.self.{query,key,value}.{weight,bias},
 * .attention.output.dense.{weight,bias}, .attention.output.LayerNorm.*, .intermediate.dense.*,
 * .output.dense.*, .output.LayerNorm.*.
 *
 * Forward (post-LN, ops.h orders): x_t = LN((word[id_t] + type[0]) + pos[t]);
 *   per layer: Q/K/V = W x + b; per head softmax(dot * scale) . V over all n rows (the attention
 *   mask is all ones for one sequence), scale = (float)(1/sqrt((double)H/heads));
 *   x = LN(dense(ctx) + b + x); x = LN(dense2(GELU(dense1 x + b1)) + b2 + x)  (exact-erf GELU).
 *   emb = x_0 / max(||x_0||, 1e-12). The last layer only finishes row 0 (others are not needed).
 */
#ifndef RECALL_BERT_H
#define RECALL_BERT_H

#include "blob.h"
#include "pool.h"
#include "status.h"

typedef struct rc_bert rc_bert;

typedef struct {
    int hidden, layers, heads, ffn, vocab, max_pos, type_vocab, max_seq;
    float ln_eps;
} rc_bert_config;

recall_status rc_bert_open(const rc_blob *b, rc_bert **out, recall_err *err);
/* Same on an execution context (borrowed; NULL = private one, as rc_bert_open). Bitwise the same
 * results for every kernel path and thread count. */
recall_status rc_bert_open_ex(const rc_blob *b, const rc_exec *ex, rc_bert **out, recall_err *err);
void rc_bert_close(rc_bert *m);
const rc_bert_config *rc_bert_cfg(const rc_bert *m);

/* emb[H] = L2-normalised CLS embedding of ids[n], 1 <= n <= min(max_pos, max_seq). */
recall_status rc_bert_embed(rc_bert *m, const int32_t *ids, int n, float *emb, recall_err *err);

#endif
