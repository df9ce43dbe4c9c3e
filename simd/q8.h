/* q8.h - the q8 numerics profile: int8 activations times int8 weights, exact integer sums, a
 * fixed fp32 epilogue. An opt-in profile (`--numerics q8`); the default profile, `exact`, is the
 * fp32 order of ops.h. q8 is deterministic in its own right: every SIMD path, thread count and
 * batch size gives the bits of the scalar oracle rc_q8_matmul_ref below.
 *
 * THE SCHEME (a matmul Y[t][r] = W[r,:] . X[t] (+ bias[r]) with K = cols, K % 32 == 0):
 *   Activations: each input row is cut into blocks of 32 columns. Per block, with bits(x) the
 *   IEEE-754 bit pattern and u_i = bits(x_i) & 0x7fffffff compared as unsigned integers (the
 *   order of |x|; exact, independent of the order of the comparisons):
 *     m = max u_i, j = the lowest index with u_j = m (the peak), m2 = max over i != j of u_i;
 *     m >= 0x7f800000 (an inf or a NaN in the block): d = NaN, q_i = 0, no peak (every output that
 *         reads the block is NaN, as in the exact profile);
 *     m < RC_Q8_TINY (|x| < 2^-96): d = 0, q_i = 0, no peak (the block adds nothing);
 *     a = the float with bits m, a2 = the float with bits m2;
 *     a > RC_Q8_PEAK * a2 (one fp32 product) or m2 < RC_Q8_TINY: the block has a PEAK: the
 *         column 32b + j and its value p = x_j are kept aside, q_j = 0, and the other 31 values
 *         are quantised with the scale of a2 (below, with a2 for a; all q_i = 0, d = 0 when
 *         m2 < RC_Q8_TINY);
 *     quantising with scale a: d = a / 127.0f; s = 127.0f / a (each one fp32 rounding);
 *         q_i = round-half-to-even(x_i * s), the product rounded to fp32 first; |q_i| <= 127.
 *   (A block whose largest value stands out, the heavy tail of the SwiGLU product and Qwen2's
 *   massive activations, so keeps its other values at full resolution and the peak exact.)
 *   Weights: row r, block b (columns 32b .. 32b+31) has int8 values w_i and one fp32 scale ws:
 *     nf4: w_i = RC_Q8_NF4[code_i] = round(112 * RC_NF4_CODEBOOK[code_i]) (the NF4 codebook as
 *          integers: 112 minimises the table's rms error, 0.0019 of absmax against 0.0023 at 127);
 *          ws = absmax[e / 64] / 112.0f with e the flat index of the block's first element
 *          (K % 32 == 0, so a block never straddles two 64-blocks);
 *     f32 / bf16 / f16: the exact fp32 values of the row quantised per block as activations are,
 *          without peaks (w_i = q_i in [-127, 127], ws = d).
 *   Epilogue, per output: acc = +0.0f; for b = 0, 1, .. K/32 - 1 (ascending):
 *     isum = sum over the block of w_i * q_i  (an exact integer: |isum| <= 32 * 127 * 127);
 *     c = ws * d                              (one fp32 product);
 *     acc = fmaf((float)isum, c, acc)          (one rounding; (float)isum is exact);
 *   then for each block with a peak, in ascending order (column 32b + j, value p):
 *     acc = fmaf((float)w_j, ws * p, acc)      (w_j the int8 weight of that column, ws its block's);
 *   Y = acc, or acc + bias[r] (one fp32 add). Integer sums are exact in any order, so a kernel
 *   may add the products of a block in any grouping (VNNI's 4-byte dots, NEON's sdot) and still
 *   give these bits; only the epilogue order is fixed.
 *
 * What the profile covers (qwen2.c): the seven matrices of every decoder layer (q, k, v, o,
 * gate, up, down), whatever their dtype. lm_head stays exact: it is the last rounding before the
 * greedy pick, and an int8 lm_head cost about 1 point of greedy agreement on the random real-shape
 * model, an nf4 one 13 points (docs/PROFILES.md); with the blob's int8 screen a greedy step still
 * reads a fraction of it (lm_screen.h), picking exactly what the full exact lm_head would from
 * the q8 hidden state. Embedding lookups, norms, RoPE, attention (QK^T, softmax, PV) and the
 * activations stay fp32 as in exact.
 *
 * The packed weight (rc_q8mat): rows in groups of 16 (the last group padded with zero rows),
 * laid out for an int8 tile whose 16 int32 lanes are 16 rows, each lane taking 4 consecutive
 * columns per step (x86 VNNI vpdpbusd with a broadcast input; NEON sdot does the same 4 rows at
 * a time). Values are stored biased, u = w + 128 (0 .. 255), so VNNI's unsigned x signed dot
 * applies as is; its extra 128 * sum(q) per block is taken off with the activation's `corr`.
 *   RC_Q8_W4 (from nf4): per (group, block) 256 bytes: four chunks of 64 bytes; byte j of chunk s
 *     holds, for row j / 4 of the group, the code of column 8s + j % 4 in its low nibble and the
 *     code of column 8s + 4 + j % 4 in its high nibble (columns relative to the block). So the low
 *     nibbles of a chunk are step 2s of the tile and the high nibbles step 2s + 1; a kernel maps
 *     a nibble through the biased table RC_Q8_NF4_U8 (vpshufb / vqtbl1q / a load).
 *   RC_Q8_W8 (from f32 / bf16 / f16): per (group, block) 512 bytes: eight steps of 64 bytes;
 *     step s, byte j = u of row j / 4, column 4s + j % 4.
 *   Scales: ws [group][scale block][16 rows], one scale block = 64 columns when W4 and
 *     K % 64 == 0 (the two 32-blocks of a 64-block share absmax), else 32 columns.
 */
#ifndef RECALL_Q8_H
#define RECALL_Q8_H

#include "ops.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

#define RC_Q8_BLOCK 32
#define RC_Q8_GROUP 16            /* rows per packed group (int32 lanes of one AVX-512 vector) */
#define RC_Q8_TINY 0x0f800000u    /* bits of 2^-96: blocks whose largest |x| is below count as 0 */
#ifndef RC_Q8_PEAK
#define RC_Q8_PEAK 1.25f          /* a block's peak is kept aside when it exceeds 1.25 x the rest */
#endif
#define RC_Q8_NF4_SCALE 112.0f    /* the NF4 codebook as integers: round(112 * value) */

/* round(112 * RC_NF4_CODEBOOK[k]), and the same + 128 (the packed, biased form) */
extern const int8_t RC_Q8_NF4[16];
extern const uint8_t RC_Q8_NF4_U8[16];

typedef enum { RC_NUMERICS_EXACT = 0, RC_NUMERICS_Q8 = 1 } rc_numerics;
/* "exact" | "q8" -> rc_numerics, -1 when unknown; and back. RC_NUMERICS_NAMES: the list a refusal names. */
#define RC_NUMERICS_NAMES "exact or q8"
int rc_numerics_parse(const char *s);
const char *rc_numerics_name(int n);
/* The one check of a numerics value (rc_exec_opts.numerics, pool.h, is the knob's one home):
 * RECALL_E_ARG "numerics N unknown (exact = 0, q8 = 1)" unless it is an rc_numerics. */
recall_status rc_numerics_check(int n, recall_err *err);

typedef enum { RC_Q8_W4 = 1, RC_Q8_W8 = 2 } rc_q8_kind;

typedef struct {
    rc_q8_kind kind;
    int64_t rows, cols;   /* the logical matrix */
    int64_t groups;       /* ceil(rows / 16) */
    int64_t nb;           /* cols / 32 */
    int sshift;           /* ws holds one scale per (1 << sshift) blocks: 1 (W4, cols % 64 == 0) or 0 */
    uint8_t *w;           /* W4: [groups][nb][256]; W8: [groups][nb][512] (64-byte aligned) */
    float *ws;            /* [groups][nb >> sshift][16] */
    void *own;            /* the allocation rc_q8_alloc made (rc_q8_free releases it), else NULL */
} rc_q8mat;

/* Bytes of packed data per (group, block). */
static inline size_t rc_q8_block_bytes(const rc_q8mat *w) { return w->kind == RC_Q8_W4 ? 256u : 512u; }
/* The scale of row group g, block b, lane (row in group) l. */
static inline float rc_q8_scale(const rc_q8mat *w, int64_t g, int64_t b, int l) {
    return w->ws[((size_t)g * (size_t)(w->nb >> w->sshift) + (size_t)(b >> w->sshift)) * RC_Q8_GROUP + (size_t)l];
}

/* rc_q8_shape: the packed form's shape for w (f32 / bf16 / f16 / nf4 with cols % 32 == 0;
 * RECALL_E_UNSUPPORTED otherwise, naming the shape), no memory yet. rc_q8_bytes: the bytes it
 * needs (codes, then scales; each part a multiple of 64). rc_q8_place: its arrays at mem (64-byte
 * aligned, rc_q8_bytes long, the caller's). rc_q8_alloc: shape and an allocation of its own
 * (rc_q8_free releases it). rc_q8_pack_groups fills row groups [g0, g1): independent pieces, so
 * a caller may split the groups over threads. */
recall_status rc_q8_shape(const rc_mat *w, rc_q8mat *p, recall_err *err);
size_t rc_q8_bytes(const rc_q8mat *p);
void rc_q8_place(rc_q8mat *p, void *mem);
recall_status rc_q8_alloc(const rc_mat *w, rc_q8mat *p, recall_err *err);
void rc_q8_pack_groups(const rc_mat *w, rc_q8mat *p, int64_t g0, int64_t g1);
void rc_q8_free(rc_q8mat *p);

/* Quantised activations: n rows of `cols` columns (row t at q + t*cols, d / corr / pk_* + t*nb). */
typedef struct {
    int64_t cols, nb;
    int n;
    int8_t *q;     /* [n][cols] */
    float *d;      /* [n][nb] */
    int32_t *corr; /* [n][nb]: -128 * (sum of q over the block), for the biased weights */
    int32_t *npk;  /* [n]: peaks of the row */
    int32_t *pk_c; /* [n][nb]: the peaks' columns (32b + j), ascending */
    float *pk_x;   /* [n][nb]: their values */
    size_t qcap, bcap, rcap; /* elements allocated in q, in d / corr / pk_*, in npk */
} rc_q8act;

/* Makes a hold rows x cols (cols % 32 == 0), reusing its buffers when they are large enough. */
recall_status rc_q8act_reserve(rc_q8act *a, int rows, int64_t cols, recall_err *err);
void rc_q8act_free(rc_q8act *a);

/* Row t of a (a->cols columns) from x, as above: the scalar reference of the kernel table's
 * q8_quant. */
void rc_q8_quant_row_ref(const float *x, rc_q8act *a, int t);

/* The oracle: Y[t*ldy + r] for r in [r0, r1), t < nt, from the unpacked weight w and the fp32
 * inputs X (row t at X + t*ldx), straight from the definition above. Slow; tests only. */
void rc_q8_matmul_ref(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                      int64_t r0, int64_t r1);

/* The scalar kernel over the packed form (the scalar path's q8_matmul): the same bits. */
void rc_q8_matmul_scalar(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                         int64_t r0, int64_t r1, void *scratch);

/* The integer value (-127 .. 127) of packed element (r, c). For tests and the scalar kernel. */
int rc_q8_value(const rc_q8mat *w, int64_t r, int64_t c);

#endif
