/* heads.h - the recall gate (logistic) and the bridge head (docs/LOOP.md), scalar fp32.
 *
 * Gate tensors (f32): gate.coef [F], gate.mean [F], gate.scale [F], gate.intercept (0-d),
 * gate.thresh (0-d); F = 3 * NH * D (q_proj outputs of layers 8, 14, 20 concatenated).
 *   z_i = (f_i - mean_i) / scale_i (fp32); s = dot(z, coef) (canonical order, ops.h) + intercept,
 *   the add in fp32: the reference computes `((f-mean)/scale) @ coef` in numpy float32 and adds
 *   the intercept as a Python float, which NumPy 2 (weak scalars) keeps in float32.
 *   Fire iff s > thresh (strict).
 * Bridge tensors (f32): bridge.Wq.0.weight [d,qdim] + bias [d], bridge.Wq.2.weight [d,d] + bias,
 * bridge.Wk.0.weight [d,kdim] + bias, bridge.Wk.2.weight [d,d] + bias.
 *   Wq(x) = W2 GELU(W0 x + b0) + b2 (exact-erf GELU), likewise Wk; score = dot(Wq(f_raw), Wk(e)).
 */
#ifndef RECALL_HEADS_H
#define RECALL_HEADS_H

#include "blob.h"
#include "status.h"

typedef struct rc_heads rc_heads;

recall_status rc_heads_open(const rc_blob *b, rc_heads **out, recall_err *err);
void rc_heads_close(rc_heads *h);

int rc_gate_dim(const rc_heads *h);
float rc_gate_thresh(const rc_heads *h);
/* s for the raw feature f[gate_dim]. */
float rc_gate_score(const rc_heads *h, const float *f);
/* 1 iff score > thresh. */
int rc_gate_fires(const rc_heads *h, float score);

int rc_bridge_qdim(const rc_heads *h);
int rc_bridge_kdim(const rc_heads *h);
int rc_bridge_d(const rc_heads *h);
/* out[d] = Wq(f[qdim]) / Wk(e[kdim]); scratch is internal (not thread-safe per context). */
void rc_bridge_query(rc_heads *h, const float *f, float *out);
void rc_bridge_key(rc_heads *h, const float *e, float *out);
/* dot(q[d], k[d]) in the canonical order. */
float rc_bridge_score(const rc_heads *h, const float *q, const float *k);

#endif
