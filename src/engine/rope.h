/* rope.h - the decoder's RoPE profile: plain RoPE or YaRN (transformers' `rope_type: "yarn"`),
 * its inverse frequencies [D/2] and attention factor, and the positions it was trained for.
 *
 * Where a profile comes from: the blob's optional qwen2.rope.* config keys (written by `convert`
 * from config.json's `rope_scaling` / `rope_parameters`), or, for a blob without them, a runtime
 * profile (`--rope-scaling yarn:FACTOR:ORIG`, recall_open_opts.rope_scaling) attached to the open
 * blob with rc_rope_attach. A runtime profile that contradicts the file's fails naming both.
 *
 * Trained positions: plain RoPE: qwen2.max_pos; YaRN: floor(factor x original_max_pos).
 *
 * YaRN, exactly as transformers' _compute_yarn_parameters (4.4x `rope_scaling`, 5.x
 * `rope_parameters`) and the rotary embedding compute it, dim = D = head_dim, base = rope_theta:
 *   fp64 (Python floats):
 *     corr(r) = (D * ln(orig / (r * 2 * pi))) / (2 * ln(base))
 *     low = corr(beta_fast), high = corr(beta_slow); truncate (default): low = floor(low),
 *     high = ceil(high); low = max(low, 0), high = min(high, D - 1); high += 0.001 if equal
 *     attention = attention_factor if given, else get_mscale(factor, mscale) /
 *       get_mscale(factor, mscale_all_dim) when both are given and non-zero, else
 *       get_mscale(factor); get_mscale(s, m) = s <= 1 ? 1 : 0.1 * m * ln(s) + 1
 *   fp32 (torch float32 tensors; Python scalars enter as (float)):
 *     pf_i   = powf(base, (float)(2i) / (float)D)              (as plain RoPE)
 *     ext_i  = 1.0f / pf_i                                     (= the plain inv_freq)
 *     int_i  = 1.0f / ((float)factor * pf_i)
 *     ramp_i = clamp(((float)i - (float)low) / (float)(high - low), 0, 1)
 *     e_i    = 1.0f - ramp_i
 *     inv_i  = int_i * (1.0f - e_i) + ext_i * e_i              (two products, one sum, no fma)
 *   per position p: c, s = cos, sin((float)p * inv_i); the table holds c * (float)attention and
 *   s * (float)attention (torch: emb.cos() * attention_scaling).
 * Plain RoPE: inv_i = ext_i and the tables hold c, s themselves (bitwise the earlier tables).
 * ln is rc_log_d (ops.h), our own double log: the fp64 constants are rounded to fp32 or floored,
 * so a last-bit difference from libm's log cannot change them except at an exact tie.
 */
#ifndef RECALL_ROPE_H
#define RECALL_ROPE_H

#include "blob.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { RC_ROPE_DEFAULT = 0, RC_ROPE_YARN = 1 } rc_rope_type;

typedef struct {
    rc_rope_type type;
    double factor;           /* YaRN scale factor (>= 1) */
    int64_t orig;            /* original_max_position_embeddings */
    double beta_fast;        /* default 32 */
    double beta_slow;        /* default 1 */
    double mscale;           /* 0 = not given */
    double mscale_all_dim;   /* 0 = not given */
    double attention_factor; /* 0 = not given (derived from factor) */
    int truncate;            /* default 1 */
} rc_rope_profile;

/* The config keys (all optional; no qwen2.rope.type = plain RoPE). */
#define RC_ROPE_KEY_TYPE "qwen2.rope.type" /* str: "yarn" */
#define RC_ROPE_KEY_FACTOR "qwen2.rope.factor"
#define RC_ROPE_KEY_ORIG "qwen2.rope.orig_max_pos"
#define RC_ROPE_KEY_BETA_FAST "qwen2.rope.beta_fast"
#define RC_ROPE_KEY_BETA_SLOW "qwen2.rope.beta_slow"
#define RC_ROPE_KEY_MSCALE "qwen2.rope.mscale"
#define RC_ROPE_KEY_MSCALE_ALL "qwen2.rope.mscale_all_dim"
#define RC_ROPE_KEY_ATTN "qwen2.rope.attention_factor"
#define RC_ROPE_KEY_TRUNCATE "qwen2.rope.truncate"

/* A YaRN profile with transformers' defaults for everything but factor and orig. */
void rc_rope_yarn_init(rc_rope_profile *p, double factor, int64_t orig);
/* Range checks (factor in [1, 1e6], orig in [1, 2^24], trained positions <= 2^24, betas > 0,
 * mscales >= 0, attention factor >= 0); `what` names the source in the message. */
recall_status rc_rope_check(const rc_rope_profile *p, const char *what, recall_err *err);
/* "yarn:FACTOR:ORIG" (the CLI / API spelling); RECALL_E_ARG naming the text otherwise. */
recall_status rc_rope_parse(const char *spec, rc_rope_profile *p, recall_err *err);
/* The effective profile of an open blob: the attached runtime profile, else the file's keys. */
recall_status rc_rope_read(const rc_blob *b, rc_rope_profile *p, recall_err *err);
/* Attaches a runtime profile to b (every decoder opened on b afterwards uses it). A blob whose
 * file declares a profile accepts only the same type, factor and original size: anything else
 * fails with RECALL_E_ARG naming both. */
recall_status rc_rope_attach(rc_blob *b, const rc_rope_profile *p, recall_err *err);
/* Positions the model was trained for under p (max_pos: qwen2.max_pos). */
int64_t rc_rope_trained_positions(const rc_rope_profile *p, int64_t max_pos);
/* The same from an open blob (qwen2.max_pos and the effective profile). */
recall_status rc_rope_blob_positions(const rc_blob *b, int *out, recall_err *err);
/* One line such as `yarn factor 4 x 256 original = 1024 positions (beta 32/1, attention 1.13862944)`
 * or `default (4096 positions)`. */
void rc_rope_describe(const rc_rope_profile *p, int64_t max_pos, char *buf, size_t n);

/* inv_freq[D/2] and the attention factor as fp32 (1.0f for plain RoPE), as described above. */
void rc_rope_inv_freq(const rc_rope_profile *p, double theta, int D, float *inv_freq, float *attention);
/* The YaRN fp64 constants: correction range [low, high] (after the 0.001 nudge) and the attention
 * factor in double. Exposed for the tests. */
void rc_rope_yarn_constants(const rc_rope_profile *p, double theta, int D, double *low, double *high,
                            double *attention);

#endif
