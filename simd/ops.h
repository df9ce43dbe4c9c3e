/* ops.h - the scalar fp32 reference kernels: THE numerical specification of recall.
 *
 * Every SIMD path must reproduce these functions bit for bit, so the order of every rounding
 * step is fixed here and documented. Build flag -ffp-contract=off: a*b+c is two roundings unless
 * fmaf() is written.
 *
 * Canonical reduction over a contraction dimension n (rc_dot_*, rc_sum_f32, rc_sumsq_f32):
 *   float acc[16] = {+0.0f ...};
 *   for i in 0..n-1:  acc[i % 16] = fmaf(a_i, b_i, acc[i % 16])   (sum: acc += x_i;
 *                                                                   sumsq: fmaf(x_i, x_i, acc))
 *   tree: s[l] = acc[l] + acc[l+8] (l<8); s[l] = s[l] + s[l+4] (l<4); s[l] = s[l] + s[l+2] (l<2);
 *         result = s[0] + s[1].
 *   The index i is the position inside the vector (for a weight row: the column), never a
 *   global element index. Weights in bf16 / f16 / nf4 are first turned into their exact fp32 value
 *   (bf16: bits << 16; f16: exact widening; nf4: RC_NF4_CODEBOOK[code] * absmax, one fp32 product)
 *   and then enter the same fmaf.
 * Matrix-vector (rc_matvec): y[r] = dot(W[r,:], x) (the tree result) + bias[r] (one fp32 add
 *   after the tree), or just the dot without bias. Rows are independent: a row's result never
 *   depends on which other rows/vectors are computed alongside it (batch invariance).
 * Weighted sums whose vector dimension is independent (attention P.V, axpy):
 *   out[j] = +0.0f; for k in order: out[j] = fmaf(p_k, v_k[j], out[j]).
 * Softmax over n scores: m = max (sequential, first wins); e_i = rc_expf(s_i - m);
 *   sum = canonical sum of e; p_i = e_i / sum.
 *
 * Transcendentals are our own (no libm), so results are identical on every IEEE platform:
 *   rc_expf   : Cody-Waite reduction k = round-half-away(x*log2e), r = fmaf(-k, ln2_hi, x),
 *               r = fmaf(-k, ln2_lo, r); degree-7 Taylor in Horner form with fmaf; scaled by
 *               2^(k/2) * 2^(k-k/2) (two exact-power multiplies). ~1 ulp.
 *   rc_erff   : a = |x| in double; |x| >= 4 gives +-1 (erf rounds to 1 from 3.92 on). Else interval
 *               i = (int)(2a) of 8: i = 0: a * P0(a*a); i > 0: Pi(a - (0.5i + 0.25)); each P of
 *               degree RC_ERF_DEG in Horner form with fma (double), coefficients rc_erf_coef
 *               (tools/fit_erf.py, relative error < 3e-13), rounded once to float; the sign bit
 *               of x is copied. Correctly rounded except in near-ties (tests/test_ops.c).
 *   rc_sincosf: reduction by pi/2 in double (fdlibm 3-part constants, exact for |x| < 2^20),
 *               Taylor polynomials in double on [-pi/4, pi/4], rounded once to float.
 *   rc_powf_pos(b, e): b^e for b > 0 as exp(e*log(b)) in double (own log/exp), rounded to float.
 * Activations (as PyTorch's CPU kernels order them):
 *   SiLU(x) = x / (1.0f + rc_expf(-x));
 *   GELU(x) = (x * 0.5f) * (1.0f + rc_erff(x * (float)M_SQRT1_2))   (exact-erf form).
 * Norms:
 *   RMSNorm (HF Qwen2): r = 1.0f / sqrtf(sumsq(x)/n + (float)eps); y_i = w_i * (x_i * r).
 *   LayerNorm (biased var): mean = sum(x)/n; d_i = x_i - mean; var = sumsq(d)/n;
 *     r = 1.0f / sqrtf(var + (float)eps); y_i = (d_i * r) * w_i + b_i (three roundings, no fma).
 *   L2 normalise: y_i = (x_i / max(sqrtf(sumsq(x)), floor)) * scale.
 */
#ifndef RECALL_OPS_H
#define RECALL_OPS_H

#include "blob.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

/* A read-only weight matrix [rows, cols] in any supported storage dtype (zero-copy view). For
 * NF4 the element (r, c) is flat index r*cols + c of the row-major flattening (blocks of 64 may
 * straddle rows). */
typedef struct {
    rc_dtype dtype;      /* RC_DT_F32, RC_DT_BF16, RC_DT_F16 or RC_DT_NF4 */
    const void *data;    /* elements, or NF4 codes */
    const float *absmax; /* NF4 only */
    int64_t rows, cols;
} rc_mat;

/* Views a 1-D (rows = 1) or 2-D tensor (or >2-D, flattened to [shape[0], rest]). */
recall_status rc_mat_from_tensor(const rc_tensor *t, rc_mat *out, recall_err *err);

/* Looks up a 2-D weight [rows, cols] (f32/bf16/f16/nf4) and views it. */
recall_status rc_blob_mat(const rc_blob *b, const char *name, int64_t rows, int64_t cols, rc_mat *out,
                          recall_err *err);
/* Copies the exact fp32 values of a tensor with numel n (any ndim, f32/bf16/f16/nf4) to dst[n]. */
recall_status rc_blob_vec(const rc_blob *b, const char *name, int64_t n, float *dst, recall_err *err);

/* Exact fp32 value of element (r, c). */
float rc_mat_get(const rc_mat *w, int64_t r, int64_t c);
/* Copies row r as fp32 (exact) into out[cols]. */
void rc_mat_row_f32(const rc_mat *w, int64_t r, float *out);
/* Rows [row0, row0 + n) of w as a matrix of their own, when the storage allows it (nf4: row0 x cols
 * a multiple of 64, the first row starting a block). Returns 0 if not. */
int rc_mat_rows(const rc_mat *w, int64_t row0, int64_t n, rc_mat *out);
/* rc_blob_release of rows [r0, r1) of w (a view into blob b; nf4: its codes and absmax). */
void rc_mat_release(const rc_blob *b, const rc_mat *w, int64_t r0, int64_t r1);

float rc_bf16_to_f32(uint16_t h);
float rc_f16_to_f32(uint16_t h); /* exact widening */
/* IEEE binary16 of x, rounded to nearest, ties to even (what F16C vcvtps2ph with imm 0 and NEON
 * vcvt_f16_f32 under the default FPCR compute, and the bit-exact oracle the SIMD paths are tested
 * against): |x| >= 65520 -> inf; below 2^-14 the f16 subnormals (2^-25 itself rounds to 0, anything
 * above it to at least 2^-24); NaN -> a quiet NaN with the sign and the top 10 fraction bits kept
 * (sign | 0x7e00 | fraction >> 13). Round trip: rc_f16_to_f32(rc_f32_to_f16(x)) is x for every
 * value an f16 holds. */
uint16_t rc_f32_to_f16(float x);

/* ---- canonical reductions ---- */
/* The final tree over the 16 lane accumulators (overwrites acc). */
float rc_tree16(float *acc);
float rc_dot_f32(const float *a, const float *b, size_t n);
float rc_sum_f32(const float *x, size_t n);
float rc_sumsq_f32(const float *x, size_t n);
/* dot(h, x) over n binary16 values h (each widened exactly) and fp32 x, the canonical order:
 * the reference of attention scores over an f16 K cache. */
float rc_dot_f16(const uint16_t *h, const float *x, size_t n);
/* dot(W[r,:], x) with the canonical order. */
float rc_dot_row(const rc_mat *w, int64_t r, const float *x);
/* y[r] = dot(W[r,:], x) (+ bias[r]) for r in [0, rows). bias may be NULL. */
void rc_matvec(const rc_mat *w, const float *bias, const float *x, float *y);
/* Rows [r0, r1) only (for splitting over threads). */
void rc_matvec_rows(const rc_mat *w, const float *bias, const float *x, float *y, int64_t r0, int64_t r1);

/* out[j] = fmaf(a, x[j], out[j]) for j in [0, n); _f16: x binary16, widened exactly. */
void rc_axpy(float a, const float *x, float *out, size_t n);
void rc_axpy_f16(float a, const uint16_t *x, float *out, size_t n);
/* In-place softmax of s[0..n), n >= 1. */
void rc_softmax(float *s, size_t n);
/* Its pieces, for the SIMD paths: the max (sequential, first wins); and, after elements [0, i)
 * (i a multiple of 16) were exponentiated into the 16 canonical lanes, the tail [i, n) into the
 * same lanes and the tree: the canonical sum of the exponentials. */
float rc_softmax_max(const float *s, size_t n);
float rc_softmax_tail(float *s, size_t i, size_t n, float m, float *lanes);

/* ---- transcendentals (see header comment) ---- */
float rc_expf(float x);
float rc_erff(float x);
void rc_sincosf(float x, float *s, float *c);
float rc_sinf(float x);
float rc_cosf(float x);
float rc_powf_pos(float base, float e);
double rc_exp_d(double x);
double rc_log_d(double x); /* x > 0 */

float rc_silu(float x);
float rc_gelu(float x);
/* The activations over arrays (the kernel table's silu_mul / gelu reference):
 * g[i] = rc_silu(g[i]) * u[i]; x[i] = rc_gelu(x[i]). */
void rc_silu_mul_f32(float *g, const float *u, size_t n);
void rc_gelu_f32(float *x, size_t n);
/* rc_sincosf over an array (the kernel table's sincos reference): s[i], c[i] of x[i]. */
void rc_sincos_f32(const float *x, float *s, float *c, size_t n);

/* rc_erff's polynomials: [power][interval], shared with the SIMD paths. */
#define RC_ERF_DEG 10
extern const double rc_erf_coef[RC_ERF_DEG + 1][8];

/* ---- norms (x and y may alias) ---- */
void rc_rmsnorm(const float *x, const float *w, float eps, float *y, size_t n);
void rc_layernorm(const float *x, const float *w, const float *b, float eps, float *y, size_t n);
/* y = x / max(||x||_2, floor) * scale, ||x|| = sqrtf(canonical sumsq). */
void rc_l2_normalize(const float *x, float floor, float scale, float *y, size_t n);

/* ---- lm_head screening's approximation (lm_screen.h explains the screen and its bound) ---- */
/* Columns per int8 group (one scale per row and group). */
#define RC_SCREEN_GROUP 64
/* The scalar reference of the kernel table's screen_i8: A[r - r0] for r in [r0, r1), with Q [V][H]
 * int8 codes, S [V][H/64] their scales, p [H] the codes of h and t [H/64] their scales:
 *   isum_g = sum_{i in g} Q[r][i] p[i] (exact int32), acc[g % 16] = fmaf((float)isum_g, S[r][g] t[g],
 *   acc[g % 16]), A = rc_tree16(acc). */
void rc_screen_i8_ref(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                      int64_t r1, float *A);
/* The two sums of squares of one row (the scalar reference of the kernel table's screen_norms): w [H]
 * the row's exact fp32 values, q [H] its codes, s [H/64] its scales; a = (double)s * q (exact),
 * d = (double)w - a; ss[0] = sum d^2, ss[1] = sum a^2, each over 8 double lanes (column i % 8, a
 * separate multiply and add per term) and the tree (l, l+4), (l, l+2), (0, 1). The converter rounds
 * their roots up into the screen's norm tensor; rc_lmscreen_open re-derives them. */
void rc_screen_norms_ref(const float *w, const int8_t *q, const float *s, size_t H, double *ss);
/* Its last step: l[0..8) the lanes of sum d^2, l[8..16) those of sum a^2 (overwritten) -> ss. */
void rc_screen_norms_tree(double *l, double *ss);

/* Teacher-forced negative log-likelihood of `target` under one row of fp32 logits [V], in double:
 * -(logit[target] - (max + log sum exp(logit - max))), sums in ascending id order; the argmax
 * (lowest id on ties) goes to *greedy. `recall score` and bench_kv_pages use the same definition. */
double rc_row_nll(const float *logits, size_t V, int target, int *greedy);

#endif
