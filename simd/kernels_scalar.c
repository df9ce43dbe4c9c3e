/* kernels_scalar.c - the scalar path of the kernel table (kernels.h): thin wrappers over the
 * reference kernels of ops.c, which define the canonical order, and the x86 prefill paths' tail
 * step (rc_pf_finish_tail), which is the same reference arithmetic. */
#include "kernels.h"

#include "nf4.h"

#include <math.h>
#include <string.h>

/* ---- scalar path: the reference kernels themselves ---- */

static void scalar_matmul(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y,
                          size_t ldy, int64_t r0, int64_t r1, float *scratch) {
    (void)scratch;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < nt; t++) {
            float d = rc_dot_row(w, r, X + (size_t)t * ldx);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
        }
}

static void scalar_attn_scores(const float *q, const float *K, size_t ldk, int n, size_t D, float scale,
                               float *scores) {
    for (int j = 0; j < n; j++) scores[j] = rc_dot_f32(q, K + (size_t)j * ldk, D) * scale;
}

static void scalar_attn_wsum(const float *p, const float *V, size_t ldv, int n, size_t D, float *out) {
    for (int j = 0; j < n; j++) rc_axpy(p[j], V + (size_t)j * ldv, out, D);
}

static void scalar_attn_scores_f16(const float *q, const uint16_t *K, size_t ldk, int n, size_t D, float scale,
                                   float *scores) {
    for (int j = 0; j < n; j++) scores[j] = rc_dot_f16(K + (size_t)j * ldk, q, D) * scale;
}

static void scalar_attn_wsum_f16(const float *p, const uint16_t *V, size_t ldv, int n, size_t D, float *out) {
    for (int j = 0; j < n; j++) rc_axpy_f16(p[j], V + (size_t)j * ldv, out, D);
}

static void scalar_f32_to_f16(const float *x, uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = rc_f32_to_f16(x[i]);
}

void rc_pf_finish_tail(const rc_mat *w, const float *acc, size_t acc_ld, const float *X, size_t ldx, int nt,
                       const float *bias, float *Y, size_t ldy, int64_t p, int pr) {
    const size_t n = (size_t)w->cols, n16 = n - n % 16;
    for (int q = 0; q < pr; q++) {
        const int64_t r = p + q;
        for (int t = 0; t < nt; t++) {
            float lanes[16];
            if (n16) memcpy(lanes, acc + (size_t)q * acc_ld + 16 * (size_t)t, sizeof lanes);
            else memset(lanes, 0, sizeof lanes);
            const float *x = X + (size_t)t * ldx;
            for (size_t k = n16; k < n; k++) lanes[k - n16] = fmaf(rc_mat_get(w, r, (int64_t)k), x[k], lanes[k - n16]);
            const float d = rc_tree16(lanes);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
        }
    }
}

int rc_kernels_scalar(rc_kernels *k) {
    k->path = RC_SIMD_SCALAR;
    k->name = "scalar";
    k->dot_f32 = rc_dot_f32;
    k->sumsq_f32 = rc_sumsq_f32;
    k->matmul = scalar_matmul;
    k->matmul_scratch = 0;
    k->matmul_rows = 0; /* the model's default chunk */
    k->attn_scores = scalar_attn_scores;
    k->attn_wsum = scalar_attn_wsum;
    k->attn_scores_f16 = scalar_attn_scores_f16;
    k->attn_wsum_f16 = scalar_attn_wsum_f16;
    k->f32_to_f16 = scalar_f32_to_f16;
    k->nf4_dequant = rc_nf4_dequant;
    k->silu_mul = rc_silu_mul_f32;
    k->gelu = rc_gelu_f32;
    k->softmax = rc_softmax;
    k->sincos = rc_sincos_f32;
    k->screen_i8 = rc_screen_i8_ref;
    k->screen_norms = rc_screen_norms_ref;
    k->q8_quant = rc_q8_quant_row_ref;
    k->q8_matmul = rc_q8_matmul_scalar;
    k->q8_name = "scalar";
    return 1;
}

