/* qwen2.h - Qwen2 decoder (HF Qwen2ForCausalLM semantics), scalar fp32 reference path.
 *
 * Shapes (config keys qwen2.*): H hidden, NL layers, NH heads, NKV kv_heads, D head_dim, F ffn,
 * V vocab. Weights (blob names "qwen2.<HF name>"): embed_tokens [V,H], per layer q_proj [NH*D,H]
 * + bias, k_proj/v_proj [NKV*D,H] + bias, o_proj [H,NH*D], gate_proj/up_proj [F,H],
 * down_proj [H,F], input_layernorm/post_attention_layernorm [H], model.norm [H], lm_head [V,H]
 * (falls back to embed_tokens if absent). Matrices may be f32 / bf16 / f16 / nf4.
 *
 * One forward call runs T rows at positions n_cached .. n_cached+T-1, appends their K/V to the
 * cache and leaves n_cached += T. Each row is computed independently (ops.h order), so:
 *   - decoding token by token gives bitwise the logits of a one-shot prefill at the same positions;
 *   - crop(n) + re-forward gives bitwise the logits of a fresh run.
 * Layer math per row (all fp32):
 *   xn = RMSNorm(x); q,k,v = W xn + b; [q capture, after bias, before RoPE]; RoPE(q,k) at pos;
 *   score_j = dot(q_h, k_j) * scale, scale = (float)(1/sqrt((double)D)), j = 0..pos;
 *   p = softmax(score); att_h = sum_j p_j v_j (sequential fmaf, j ascending); x = x + o_proj(att);
 *   xn = RMSNorm(x); x = x + down(silu(gate xn) * (up xn)).
 * RoPE (HF rotate_half): inv_freq[i] = 1.0f / powf(theta, (float)(2i) / (float)D), i < D/2
 *   (YaRN: rope.h's blend, and c/s below multiplied by the attention factor);
 *   angle = inv_freq[i] * (float)pos (fp32), c/s = rc_sincosf(angle); the per-position table
 *   rows are built as the cache grows (each row depends only on its position). out[i] = q[i]*c - q[i+D/2]*s, out[i+D/2] = q[i+D/2]*c + q[i]*s.
 * KV memory follows the context in use: the cache starts empty and grows on demand to
 * RC_QWEN2_KV_UNIT positions, then by doubling, never past max_ctx; growing copies the cached
 * rows unchanged, so a cache that grew many times gives bitwise the logits of a reserved one.
 * rc_qwen2_reserve sizes it once for a request of known length; rc_qwen2_kv_bytes reports it.
 * The cache holds f32 (exact, the default) or binary16 (rc_qwen2_set_kv_dtype: half the bytes, each
 * K / V value rounded once as it enters; the math stays fp32).
 * Rows are processed in chunks of RC_QWEN2_CHUNK rows (more where the kernels ask for it,
 * rc_kernels.matmul_rows, up to RC_QWEN2_CHUNK_MAX), RC_QWEN2_CHUNK_Q8 under the q8 profile
 * (scratch allocated once at open; rows are independent, so the chunk never changes a bit); the kernels
 * come from the execution context's table (simd/kernels.h, bitwise the scalar order) and the pool
 * splits weight output rows / heads, never a reduction (a call of few rows, i.e. decode, in units
 * of whole KV groups where the threads allow, so each KV head's cache is streamed once per step;
 * the cache is laid out [layer][KV head][position][D] for the same reason: contiguous keys and
 * values per KV head, in huge-page-advised memory). Attention walks the keys in tiles shared by
 * a block of (head, row) pairs of one KV head (cache reuse at long context); each pair keeps its
 * own full softmax and ascending-key sums, so the blocking never changes a bit
 * (rc_qwen2_set_attn_blocking, for tests and benchmarks). The last layer computes K and V of
 * every row (the cache) but its attention, o_proj and MLP only for the rows whose output the call
 * asks for (logits_all / normed_all: all; logits_last / normed_last / hidden_last: the last row;
 * none: a cache fill), as llama.cpp does: 1/28 of a 1.5B prefill that outputs one row.
 *
 * The faithful loop's "standalone seal forward" (no cache, from position 0) is simply a second
 * rc_qwen2 context (weights are shared zero-copy views of the blob; only cache+scratch are new).
 */
#ifndef RECALL_QWEN2_H
#define RECALL_QWEN2_H

#include "blob.h"
#include "kv_pages.h"
#include "pool.h"
#include "rope.h"
#include "status.h"

#ifndef RC_QWEN2_CHUNK /* rows per chunk: a speed knob only (rows are independent) */
#define RC_QWEN2_CHUNK 64
#endif
/* The most rows a chunk of the exact profile holds where the kernels ask for more than
 * RC_QWEN2_CHUNK (rc_kernels.matmul_rows: the AVX2 path's panel decode wants 128); the memory
 * estimate counts this many, so it stays on the high side on every path. */
#define RC_QWEN2_CHUNK_MAX 128
/* The q8 profile's chunk: its prefill reads each packed weight panel once per chunk and decodes
 * it for every row of the chunk, so more rows a chunk amortise the panel (measured in
 * bench/NOTES.md: 256 rows +8-10 % q8 prefill against 64; the exact tile gains nothing). */
#ifndef RC_QWEN2_CHUNK_Q8
#define RC_QWEN2_CHUNK_Q8 256
#endif
#define RC_QWEN2_MAX_GATE 8
#define RC_QWEN2_KV_UNIT 256 /* positions: the first KV allocation and the reserve granularity */

typedef struct rc_qwen2 rc_qwen2;

typedef struct {
    int hidden, layers, heads, kv_heads, head_dim, ffn, vocab, max_pos;
    float rms_eps;
    double rope_theta;
    int bos_id, eos_id;               /* -1 if the blob has no qwen2.bos_id / eos_id */
    int n_gate;                       /* gate capture layers (from gate.layers, default 8,14,20) */
    int gate_layers[RC_QWEN2_MAX_GATE];
    rc_rope_profile rope;             /* plain or YaRN (rope.h): qwen2.rope.* or a runtime profile */
    int trained_pos;                  /* positions trained under that profile: max_pos, or YaRN's
                                         floor(factor x original); the most a context may hold */
    float rope_attention;             /* the factor the cos/sin tables carry (1 for plain RoPE) */
} rc_qwen2_config;

/* One forward call. Exactly one of ids / embeds is non-NULL. */
typedef struct {
    const int32_t *ids;   /* [n] token ids, or NULL */
    const float *embeds;  /* [n][H] input embeddings (pooler output, injected blocks), or NULL */
    int n;                /* rows, >= 1 */
    float *logits_all;    /* [n][V] or NULL */
    float *logits_last;   /* [V] or NULL; with logits_all also NULL, lm_head is skipped */
    float *hidden_last;   /* [NL+1][H] or NULL: HF hidden_states at the last row (0 = embeddings,
                             i = input of layer i, NL = after the final norm) */
    float *q_all;         /* [n_gate][n][NH*D] or NULL: q_proj outputs of every row */
    float *normed_all;    /* [n][H] or NULL: every row after the final norm (the lm_head input) */
    float *normed_last;   /* [H] or NULL: the last row after the final norm (lm_screen.h picks from it) */
} rc_qwen2_fwd;

/* max_ctx: the most positions the context may hold (1 .. trained_pos); a request above the trained
 * window (qwen2.max_pos, or YaRN's factor x original) fails with RECALL_E_LIMIT naming both
 * numbers, before anything is computed. No KV memory is allocated at open; it grows with the
 * positions in use. */
recall_status rc_qwen2_open(const rc_blob *b, int max_ctx, rc_qwen2 **out, recall_err *err);
/* Same, running on ex (kernel table + thread pool, borrowed: it must outlive the model; several
 * models may share one ex when they are used from one thread). ex NULL = a private context from
 * rc_exec_open(NULL) (RECALL_SIMD / RECALL_THREADS, default 1 thread), which is what
 * rc_qwen2_open does. Results are bitwise identical for every ex. */
recall_status rc_qwen2_open_ex(const rc_blob *b, int max_ctx, const rc_exec *ex, rc_qwen2 **out, recall_err *err);
/* A second context on base's blob and execution context that borrows base's q8 weights (the
 * faithful loop's seal forward): nothing is packed twice. base must outlive it. */
recall_status rc_qwen2_open_shared(const rc_blob *b, int max_ctx, const rc_qwen2 *base, rc_qwen2 **out,
                                   recall_err *err);
void rc_qwen2_close(rc_qwen2 *m);
/* The numerics profile the context runs (q8.h: RC_NUMERICS_EXACT or RC_NUMERICS_Q8, from its
 * execution context), and for q8 the packed weights' bytes and the seconds packing took at open
 * (0 for a shared context's borrowed weights: counted once, by the owner... reported as the owner's). */
int rc_qwen2_numerics(const rc_qwen2 *m);
void rc_qwen2_q8_stats(const rc_qwen2 *m, size_t *bytes, double *seconds);

/* Attention kept exact under q8 (blob key RC_Q8_EXACT_KEY, written by `recall convert --q8-exact
 * SPEC`; docs/PROFILES.md, "Layers kept exact"). A model can be far more sensitive to rounding in
 * a few matrices than in the rest: on the trained world the attention projections of its first two
 * layers carry most of q8's distance to exact. The q8 profile computes the named matrices with the
 * exact profile's kernels over the blob's own weights (those matrices are not packed) and every
 * other layer matrix in q8, so the bits are still one function of the blob and the profile, the
 * same for every SIMD path and thread count; without the key q8 is unchanged, and the exact
 * profile never reads it.
 * SPEC: comma-separated items LAYER:LETTERS or FIRST-LAST:LETTERS, LETTERS a set of q, k, v, o
 * (the attention projections), each layer below `layers` and named once, e.g. "0-1:qkvo".
 * mask[l] gets bit RC_Q8X_Q, _K, _V, _O of each named matrix (0 elsewhere); a malformed spec is
 * RECALL_E_ARG naming the text. rc_q8_exact_format writes the canonical SPEC of a mask (layers
 * in order, runs of equal sets joined, letters in qkvo order; "" when nothing is exact). */
#define RC_Q8_EXACT_KEY "qwen2.q8.exact"
/* A blob converted with `--weights nf4 --nf4-keep SPEC` (the same SPEC grammar) stores the named
 * attention projections in bf16 instead of NF4 and names them in this key (canonical SPEC); the
 * engine reads each tensor's own dtype, so the key only tells what was kept (info, outputs). */
#define RC_NF4_KEEP_KEY "qwen2.nf4.keep"
enum { RC_Q8X_Q = 1, RC_Q8X_K = 2, RC_Q8X_V = 4, RC_Q8X_O = 8 };
recall_status rc_q8_exact_parse(const char *spec, int layers, uint8_t *mask, recall_err *err);
void rc_q8_exact_format(const uint8_t *mask, int layers, char *out, size_t n);
/* The canonical SPEC this context keeps exact under q8 ("" for none, or under the exact profile). */
const char *rc_qwen2_q8_exact(const rc_qwen2 *m);
const rc_qwen2_config *rc_qwen2_cfg(const rc_qwen2 *m);
/* Rows per forward chunk as opened (RC_QWEN2_CHUNK, the kernels' matmul_rows up to RC_QWEN2_CHUNK_MAX,
 * or RC_QWEN2_CHUNK_Q8): the scratch holds this many rows. */
int rc_qwen2_chunk_rows(const rc_qwen2 *m);

recall_status rc_qwen2_forward(rc_qwen2 *m, const rc_qwen2_fwd *f, recall_err *err);

/* q_proj outputs (after bias, before RoPE) of the LAST row of the latest forward at the gate
 * layers, concatenated: [n_gate * NH * D]. Zero before the first forward. */
const float *rc_qwen2_gate_q(const rc_qwen2 *m);

/* KV cache storage: RC_KV_DT_F32 (the default: exact) or RC_KV_DT_F16 (`--kv f16`: binary16
 * storage, half the bytes). Under f16 the K rows (after RoPE) and V rows are rounded to nearest even
 * (rc_f32_to_f16) as they enter the cache and attention reads them widened exactly, its math fp32
 * in the order above: an opt-in approximation, deterministic like the rest (the same bits for every
 * SIMD path, thread count, chunk and call size). rc_qwen2_set_kv_dtype works only while nothing is
 * cached (RECALL_E_ARG otherwise); the cache keeps the positions it had allocated. */
typedef enum { RC_KV_DT_F32 = 0, RC_KV_DT_F16 = 1 } rc_kv_dtype;
const char *rc_kv_dtype_name(rc_kv_dtype t); /* "f32" / "f16" */
int rc_kv_dtype_parse(const char *s);        /* "f32" / "f16" -> rc_kv_dtype; -1 otherwise */
#define RC_KV_DTYPE_NAMES "f32 or f16"        /* the list a refusal names */
/* The one check of a kv storage value (recall_open_opts.kv, rc_recall_opts.kv, rc_qwen2_set_kv_dtype):
 * RECALL_E_ARG "kv storage N unknown (f32 = 0, f16 = 1)" unless it is an rc_kv_dtype. */
recall_status rc_kv_dtype_check(int kv, recall_err *err);
recall_status rc_qwen2_set_kv_dtype(rc_qwen2 *m, rc_kv_dtype t, recall_err *err);
rc_kv_dtype rc_qwen2_kv_dtype(const rc_qwen2 *m);

int rc_qwen2_n_cached(const rc_qwen2 *m);
int rc_qwen2_max_ctx(const rc_qwen2 *m);
/* Positions the KV cache has allocated now (0 .. max_ctx), and its size in bytes (K and V,
 * all layers): 2 * layers * capacity * kv_heads * head_dim * (4 for f32, 2 for f16). */
int rc_qwen2_kv_capacity(const rc_qwen2 *m);
size_t rc_qwen2_kv_bytes(const rc_qwen2 *m);
size_t rc_qwen2_kv_bytes_for(const rc_qwen2 *m, int positions);
/* Grows the cache once to hold n positions (rounded up to RC_QWEN2_KV_UNIT, capped at max_ctx),
 * so a request of known size never grows by doubling; n > max_ctx fails. Keeps the contents. */
recall_status rc_qwen2_reserve(rc_qwen2 *m, int n, recall_err *err);
/* The RoPE inverse frequencies [D/2] (rope.h), and the cos / sin table rows [D/2] of position
 * pos (< max_ctx; the tables grow to hold it, as a forward would). For tests and tools. */
const float *rc_qwen2_inv_freq(const rc_qwen2 *m);
recall_status rc_qwen2_rope_row(rc_qwen2 *m, int pos, const float **cos_row, const float **sin_row, recall_err *err);
/* Keeps the first n cached positions (0 <= n <= n_cached). */
recall_status rc_qwen2_crop(rc_qwen2 *m, int n, recall_err *err);

/* Attention blocking: up to `pairs` (query head, row) pairs of one KV head share each tile of
 * `tile` keys (defaults RC_QWEN2_ATT_PAIRS, RC_QWEN2_ATT_TILE; pairs 1 and tile 0 = one whole row
 * at a time, the unblocked loop). Pairs are clamped to [1, RC_QWEN2_ATT_PAIRS]. Same bits for any
 * setting; exists so tests can prove that and benchmarks can time it. */
#define RC_QWEN2_ATT_PAIRS 64
#define RC_QWEN2_ATT_TILE 256
void rc_qwen2_set_attn_blocking(rc_qwen2 *m, int pairs, int tile);

/* Page-sparse decode attention (kv_pages.h, REQ-CTX-006): o NULL or o->page 0 = dense (the
 * default); otherwise every later forward call of exactly one row attends to the sink, the recent
 * window and the selected pages, and calls of more rows stay dense. The page key bounds are
 * built from the cached keys at once and kept as rows are appended or cropped. */
recall_status rc_qwen2_set_kv_pages(rc_qwen2 *m, const rc_kv_pages_opts *o, recall_err *err);
const rc_kv_pages_opts *rc_qwen2_kv_pages(const rc_qwen2 *m);
/* For tests: the key bounds [kv_heads * D] of a cached page at a layer, and a cached K row into
 * out [kv_heads * D] (after RoPE, as attention reads it: f16 widened; RECALL_E_ARG outside the cache). */
recall_status rc_qwen2_kv_page_bounds(const rc_qwen2 *m, int layer, int page, const float **mn, const float **mx,
                                      recall_err *err);
recall_status rc_qwen2_k_row(const rc_qwen2 *m, int layer, int pos, float *out, recall_err *err);

/* out[n][H] = embed_tokens rows (exact fp32 values). Ids are bounds-checked. */
recall_status rc_qwen2_embed(const rc_qwen2 *m, const int32_t *ids, int n, float *out, recall_err *err);
/* A history of ids as rows of their embeddings, fetched a few at a time (the pooler's row source,
 * rc_pooler_rows_fn in pooler.h): rc_qwen2_embed_rows(&(rc_qwen2_id_rows){m, ids}, j0, n, dst, err)
 * writes the embeddings of ids[j0 .. j0 + n). */
typedef struct {
    const rc_qwen2 *m;
    const int32_t *ids;
} rc_qwen2_id_rows;
recall_status rc_qwen2_embed_rows(void *ctx, int j0, int n, float *dst, recall_err *err);

#endif
