/* kernels.h - the kernel table: one set of hot kernels per instruction set (scalar, AVX2+FMA,
 * AVX-512F/BW/VL, NEON), chosen once per execution context, all giving BITWISE the results of
 * the scalar reference in simd/ops.c. The per-path files (kernels_*.c, act_*.c,
 * screen_*.c, q8_*.c) include this header only; simd.h chooses among them.
 *
 * THE CANONICAL ORDER (every path, every kernel; copied from ops.h, which is the specification):
 *   Reduction over a contraction dimension n (dot, matvec/matmul row, attention score, sumsq):
 *     16 fp32 lane accumulators, all +0.0f. Element i (its position inside the vector: for a
 *     weight row the column, never a global index) goes to lane i % 16:
 *       acc[i % 16] = fmaf(w_i, x_i, acc[i % 16])        (one rounding, explicit FMA)
 *     The tail (n % 16 elements) continues the same lane rule (lanes 0 .. n%16-1).
 *     Final tree: s[l] = acc[l] + acc[l+8] (l < 8); s[l] = s[l] + s[l+4] (l < 4);
 *                 s[l] = s[l] + s[l+2] (l < 2); result = s[0] + s[1].
 *     A bias is added after the tree (one fp32 add).
 *   So an AVX2 path keeps lanes 0..7 and 8..15 in two ymm registers, an AVX-512 path all 16 in
 *   one zmm, NEON in four q registers; the first tree level is then one vector add. The lanes
 *   may sit in another register order while they accumulate, if the input is permuted alike and
 *   the order is restored before the tree (the AVX-512 nf4 decode matvec, mv_nf4).
 *   Weight decoding before the FMA is exact: bf16 = bits << 16; f16 = exact widening;
 *   nf4 = RC_NF4_CODEBOOK[code] * absmax[block] as ONE fp32 product (a table of the 16 products
 *   per 64-weight block is the same product), looked up with permutes / vqtbl, never branches.
 *   Weighted sums (attention P.V, axpy): out[j] = +0.0f; for k ascending:
 *     out[j] = fmaf(p_k, v_k[j], out[j])  - vectorised over j, never over k.
 *   Multi-row matmul (prefill): a decoded weight row is reused across up to several input rows,
 *   but each output element has its own 16 accumulators in the order above, so an output never
 *   depends on how many rows were computed alongside it (batch invariance), nor on threads.
 *
 * Threads split output rows / heads only, never a reduction (see src/engine/pool.h).
 */
#ifndef RECALL_KERNELS_H
#define RECALL_KERNELS_H

#include "ops.h"
#include "q8.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

/* RC_SIMD_WASM: wasm32 with SIMD128 (the browser build, docs/WEB.md) */
typedef enum { RC_SIMD_SCALAR = 0, RC_SIMD_AVX2, RC_SIMD_AVX512, RC_SIMD_NEON, RC_SIMD_WASM, RC_SIMD_COUNT } rc_simd_path;

typedef struct {
    rc_simd_path path;
    const char *name; /* "scalar", "avx2", "avx512", "neon", "wasm" */
    /* canonical dot / sum of squares */
    float (*dot_f32)(const float *a, const float *b, size_t n);
    float (*sumsq_f32)(const float *x, size_t n);
    /* Y[t*ldy + r] = dot(W[r,:], X + t*ldx) (+ bias[r] if bias) for r in [r0, r1), t in [0, nt).
     * W is f32 / bf16 / f16 / nf4 (rc_mat). scratch: matmul_scratch floats, 64-byte aligned, one
     * buffer per concurrent call (rc_exec keeps one per thread); NULL only makes it slower. */
    void (*matmul)(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                   int64_t r0, int64_t r1, float *scratch);
    size_t matmul_scratch; /* floats of working memory matmul wants, a multiple of 16 (0: none) */
    int matmul_rows;       /* exact prefill: input rows per call this matmul wants, where its panel
                            * decode needs more rows to pay for itself than the model's default
                            * chunk (0: the default). A speed hint only: rows are independent */
    /* scores[j] = dot(q, K + j*ldk, D) * scale for j in [0, n) (attention scores of one head). */
    void (*attn_scores)(const float *q, const float *K, size_t ldk, int n, size_t D, float scale, float *scores);
    /* out[i] = sum over j ascending of fmaf(p[j], V[j*ldv + i], .), continuing from the current
     * out[i], i < D. Callers start out at +0.0f, so keys split over several calls (tiles, in
     * ascending order) give the bits of one call. */
    void (*attn_wsum)(const float *p, const float *V, size_t ldv, int n, size_t D, float *out);
    /* The same two over a binary16 K / V (the f16 KV cache): every element widened exactly, then
     * the fp32 order above (references rc_dot_f16, rc_axpy_f16). */
    void (*attn_scores_f16)(const float *q, const uint16_t *K, size_t ldk, int n, size_t D, float scale,
                            float *scores);
    void (*attn_wsum_f16)(const float *p, const uint16_t *V, size_t ldv, int n, size_t D, float *out);
    /* y[i] = rc_f32_to_f16(x[i]) for i < n: round to nearest even (F16C / AVX-512 vcvtps2ph imm 0,
     * NEON vcvt_f16_f32), elementwise, so any split gives the same bits. */
    void (*f32_to_f16)(const float *x, uint16_t *y, size_t n);
    /* out[i] = exact fp32 value of nf4 flat element start + i, i < n. */
    void (*nf4_dequant)(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out);
    /* Elementwise (simd/act_*.c): g[i] = rc_silu(g[i]) * u[i]; x[i] = rc_gelu(x[i]);
     * rc_softmax(s, n) in place (n >= 1). */
    void (*silu_mul)(float *g, const float *u, size_t n);
    void (*gelu)(float *x, size_t n);
    void (*softmax)(float *s, size_t n);
    /* s[i], c[i] = rc_sincosf(x[i]) for i < n (the pooler's positional encoding): the same
     * double-precision steps on several lanes; lanes that are not finite or have |x| >= 2^30 go
     * through rc_sincosf itself. */
    void (*sincos)(const float *x, float *s, float *c, size_t n);
    /* lm_head screening (src/engine/lm_screen.h; the reference rc_screen_i8_ref is in ops.h): A[r - r0]
     * for rows [r0, r1) of the int8 copy Q [.][H] with scales S [.][H/64], against the int8 h codes
     * p [H], scales t [H/64]:
     * per 64-column group an exact int32 dot, then acc[g % 16] = fmaf((float)isum, S*t, acc) and
     * the canonical tree. H % 64 == 0. Exact for any bytes in Q and p (-128 included). */
    void (*screen_i8)(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                      int64_t r1, float *A);
    /* ss[0] = sum (w - s q)^2, ss[1] = sum (s q)^2 over one row of H columns (H % 64 == 0) in
     * double, 8 lanes (rc_screen_norms_ref): what lm_screen.c checks the stored norms against. */
    void (*screen_norms)(const float *w, const int8_t *q, const float *s, size_t H, double *ss);
    /* The q8 numerics profile (simd/q8.h; the same bits on every path): q8_quant quantises x
     * [a->cols] into row t of a (rc_q8_quant_row_ref); q8_matmul computes Y[t*ldy + r] (+ bias[r])
     * for r in [r0, r1), t < nt, from the packed w and the quantised rows x (rc_q8_matmul_ref's
     * bits). scratch: matmul_scratch floats as for matmul, or NULL. */
    void (*q8_quant)(const float *x, rc_q8act *a, int t);
    void (*q8_matmul)(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                      int64_t r0, int64_t r1, void *scratch);
    const char *q8_name; /* which q8 kernels: "scalar", "avx2", "avx-vnni", "avx512-vnni", "neon", "neon-dotprod" */
} rc_kernels;

/* Element i of a K / V row of fp32 (f16 = 0) or binary16 (f16 = 1) values, as fp32 (the widening
 * is exact), and the address of element i: the paths' attention kernels are written once for both
 * KV caches (their vector loads are the paths' own). */
static inline float rc_kv_elem(const void *p, size_t i, int f16) {
    return f16 ? rc_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline const void *rc_kv_elem_at(const void *p, size_t i, int f16) {
    return f16 ? (const void *)((const uint16_t *)p + i) : (const void *)((const float *)p + i);
}

/* The installer of a path this build or target does not compile (its file is empty of kernels
 * elsewhere): it installs nothing and says so. */
#define RC_KERNELS_ABSENT(fn)                                                                              \
    int fn(rc_kernels *k) {                                                                                 \
        (void)k;                                                                                            \
        return 0;                                                                                           \
    }

/* The installers of a path's kernels. A path names its kernels <pfx>_<slot>, so the slots of each
 * family are listed once, here: a slot added to rc_kernels is added for every path at once, and a
 * path cannot forget one. RC_SET_BASE sets what every path has (the dot products, the matmul and
 * its scratch size, fp32 attention); RC_INSTALL_F32 adds the f16 KV attention, the f16 conversion
 * and nf4 dequantisation; the others are the optional families a path may have in its own file
 * (activations, lm_head screening). */
#define RC_SET_BASE(k, path_, name_, pfx, scratch)                                                      \
    (k)->path = path_;                                                                                  \
    (k)->name = name_;                                                                                  \
    (k)->dot_f32 = pfx##_dot_f32;                                                                       \
    (k)->sumsq_f32 = pfx##_sumsq_f32;                                                                   \
    (k)->matmul = pfx##_matmul;                                                                         \
    (k)->matmul_scratch = scratch;                                                                      \
    (k)->attn_scores = pfx##_attn_scores;                                                               \
    (k)->attn_wsum = pfx##_attn_wsum
#define RC_INSTALL_F32(fn, path_, name_, pfx, scratch)                                                  \
    int fn(rc_kernels *k) {                                                                             \
        RC_SET_BASE(k, path_, name_, pfx, scratch);                                                     \
        k->attn_scores_f16 = pfx##_attn_scores_f16;                                                     \
        k->attn_wsum_f16 = pfx##_attn_wsum_f16;                                                         \
        k->f32_to_f16 = pfx##_f32_to_f16;                                                               \
        k->nf4_dequant = pfx##_nf4_dequant;                                                             \
        return 1;                                                                                       \
    }
#define RC_INSTALL_ACT(fn, pfx)                                                                         \
    int fn(rc_kernels *k) {                                                                             \
        k->silu_mul = pfx##_silu_mul, k->gelu = pfx##_gelu;                                             \
        k->softmax = pfx##_softmax, k->sincos = pfx##_sincos;                                           \
        return 1;                                                                                       \
    }
#define RC_INSTALL_SCREEN(fn, pfx)                                                                      \
    int fn(rc_kernels *k) {                                                                             \
        k->screen_norms = pfx##_screen_norms, k->screen_i8 = pfx##_screen_i8;                           \
        return 1;                                                                                       \
    }

/* The four attention entries of a path whose file writes its kernels once for both K / V
 * element types, as attn_scores_any / attn_wsum_any(..., f16) with f16 = 0 (fp32) or 1 (binary16):
 * defines pfx_attn_scores, pfx_attn_scores_f16, pfx_attn_wsum, pfx_attn_wsum_f16. */
#define RC_ATTN_KERNELS(pfx)                                                                               \
    static void pfx##_attn_scores(const float *q, const float *K, size_t ldk, int n, size_t D, float scale,   \
                                  float *s) {                                                               \
        attn_scores_any(q, K, ldk, n, D, scale, s, 0);                                                      \
    }                                                                                                       \
    static void pfx##_attn_scores_f16(const float *q, const uint16_t *K, size_t ldk, int n, size_t D,        \
                                      float scale, float *s) {                                              \
        attn_scores_any(q, K, ldk, n, D, scale, s, 1);                                                      \
    }                                                                                                       \
    static void pfx##_attn_wsum(const float *p, const float *V, size_t ldv, int n, size_t D, float *out) {    \
        attn_wsum_any(p, V, ldv, n, D, out, 0);                                                             \
    }                                                                                                       \
    static void pfx##_attn_wsum_f16(const float *p, const uint16_t *V, size_t ldv, int n, size_t D,          \
                                    float *out) {                                                           \
        attn_wsum_any(p, V, ldv, n, D, out, 1);                                                             \
    }


/* Bytes of the matmul scratch the x86 q8 prefill kernels may use for a decoded weight panel
 * (2 groups x 288 blocks of 512 bytes: every K up to 9216), or on AVX-512 for a panel's slice
 * and lanes plus its weights by column for the peaks (3 groups x 9216 columns x 16 bytes); a
 * path that installs them raises matmul_scratch to at least this. */
#define RC_Q8_SCRATCH_BYTES ((size_t)288 * 2 * 512 + (size_t)3 * 9216 * 16)

/* The per-ISA tables (each returns 0 when the path is not compiled in). Internal to simd/. */
int rc_kernels_scalar(rc_kernels *k);
int rc_kernels_avx2(rc_kernels *k);
int rc_kernels_avx512(rc_kernels *k);
int rc_kernels_avx512vbmi(rc_kernels *k); /* avx512 with the VBMI nf4 index build */
int rc_kernels_neon(rc_kernels *k);
int rc_kernels_wasm(rc_kernels *k); /* f32 weights and the f32 KV cache; the rest stays the reference */
/* Which multiply-add the wasm path runs in this module, and why (wasm builds only; kernels_wasm.c) */
const char *rc_wasm_madd_info(void);
/* The elementwise kernels of a path, overriding the scalar ones (0 when not compiled in). */
int rc_act_avx2(rc_kernels *k);
int rc_act_avx512(rc_kernels *k);
int rc_act_neon(rc_kernels *k);
/* The lm_head screening kernel of a path (simd/screen_*.c; 0 when not compiled in: the reference stays). */
int rc_screen_avx2(rc_kernels *k);
int rc_screen_avx512(rc_kernels *k);
int rc_screen_neon(rc_kernels *k);
/* The q8 kernels of a path (simd/q8_*.c; 0 when not compiled in: the scalar kernel stays).
 * avx512: needs AVX512_VNNI; avxvnni: the AVX2 kernels with VEX vpdpbusd (AVX-VNNI). simd.c picks
 * the dot-product forms the CPU has; RECALL_NO_DOT=1 turns them off (to test the other builds). */
int rc_q8_avx512(rc_kernels *k);
int rc_q8_avx2(rc_kernels *k);
int rc_q8_avxvnni(rc_kernels *k);
int rc_q8_neon(rc_kernels *k);
int rc_q8_neon_dot(rc_kernels *k); /* NEON with the dot-product extension (sdot) */
/* The x86 prefill paths' last step for weight rows [p, p + pr) x nt inputs when cols % 16 != 0:
 * each output's 16 lanes waiting in acc (output (q, t) at acc + q*acc_ld + 16*t; unused when
 * cols < 16, the lanes then start at +0.0f) take the n % 16 tail columns on their first lanes
 * with fmaf in column order, then the tree and the bias: the canonical order (ops.h). */
void rc_pf_finish_tail(const rc_mat *w, const float *acc, size_t acc_ld, const float *X, size_t ldx, int nt,
                       const float *bias, float *Y, size_t ldy, int64_t p, int pr);

#endif
