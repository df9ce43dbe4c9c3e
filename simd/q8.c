/* q8.c - the q8 numerics profile's scalar side (the scheme is in q8.h): the int8 NF4 table, the
 * activation quantiser, packing a weight into the int8 tile layout, the oracle straight from the
 * definition, and the scalar kernel over the packed form. */
#include "q8.h"

#include "nf4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const int8_t RC_Q8_NF4[16] = {-112, -78, -59, -44, -32, -21, -10, 0, 9, 18, 28, 38, 49, 63, 81, 112};
const uint8_t RC_Q8_NF4_U8[16] = {16, 50, 69, 84, 96, 107, 118, 128, 137, 146, 156, 166, 177, 191, 209, 240};

int rc_numerics_parse(const char *s) {
    if (s && !strcmp(s, "exact")) return RC_NUMERICS_EXACT;
    if (s && !strcmp(s, "q8")) return RC_NUMERICS_Q8;
    return -1;
}

const char *rc_numerics_name(int n) { return n == RC_NUMERICS_Q8 ? "q8" : n == RC_NUMERICS_EXACT ? "exact" : "?"; }

recall_status rc_numerics_check(int n, recall_err *err) {
    if (n == RC_NUMERICS_EXACT || n == RC_NUMERICS_Q8) return RECALL_OK;
    return rc_fail(err, RECALL_E_ARG, "numerics %d unknown (exact = %d, q8 = %d)", n, RC_NUMERICS_EXACT,
                   RC_NUMERICS_Q8);
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- activations ----------------------------------------------------------------------------- */

static float nan_f(void) { return u2f(0x7fc00000u); }

/* Quantises x[0..32) with the scale of a (the float with bits m, RC_Q8_TINY <= m < inf), skipping
 * column `skip` (q = 0 there; -1: none): q [32], returns d; *sum = sum of q. */
static float quant_scaled(const float *x, uint32_t m, int skip, int8_t *q, int32_t *sum) {
    const float a = u2f(m), s = 127.0f / a;
    *sum = 0;
    for (int i = 0; i < RC_Q8_BLOCK; i++) {
        /* nearbyintf in the default rounding mode: round half to even; |x * s| <= 127 (1 + 2^-23) */
        const int v = i == skip ? 0 : (int)nearbyintf(x[i] * s);
        q[i] = (int8_t)v;
        *sum += v;
    }
    return a / 127.0f;
}

/* One block of 32 (q8.h): q [32], returns d; *sum = sum of q; *peak = the peak's column in the
 * block (-1: none; never with peaks == 0, the weights' rule). */
static float quant_block(const float *x, int peaks, int8_t *q, int32_t *sum, int *peak) {
    uint32_t m = 0, m2 = 0;
    int j = 0;
    for (int i = 0; i < RC_Q8_BLOCK; i++) {
        const uint32_t u = f2u(x[i]) & 0x7fffffffu;
        if (u > m) {
            m2 = m;
            m = u;
            j = i;
        } else if (u > m2) {
            m2 = u;
        }
    }
    *sum = 0;
    *peak = -1;
    if (m >= 0x7f800000u || m < RC_Q8_TINY) {
        memset(q, 0, RC_Q8_BLOCK);
        return m >= 0x7f800000u ? nan_f() : 0.0f;
    }
    if (peaks && (m2 < RC_Q8_TINY || u2f(m) > RC_Q8_PEAK * u2f(m2))) {
        *peak = j;
        if (m2 < RC_Q8_TINY) {
            memset(q, 0, RC_Q8_BLOCK);
            return 0.0f;
        }
        return quant_scaled(x, m2, j, q, sum);
    }
    return quant_scaled(x, m, -1, q, sum);
}

void rc_q8_quant_row_ref(const float *x, rc_q8act *a, int t) {
    const size_t K = (size_t)a->cols, nb = (size_t)a->nb;
    int8_t *q = a->q + (size_t)t * K;
    float *d = a->d + (size_t)t * nb, *px = a->pk_x + (size_t)t * nb;
    int32_t *corr = a->corr + (size_t)t * nb, *pc = a->pk_c + (size_t)t * nb, n = 0;
    for (size_t b = 0; b < nb; b++) {
        int32_t sum;
        int pk;
        d[b] = quant_block(x + b * RC_Q8_BLOCK, 1, q + b * RC_Q8_BLOCK, &sum, &pk);
        corr[b] = -128 * sum;
        if (pk >= 0) {
            pc[n] = (int32_t)(b * RC_Q8_BLOCK) + pk;
            px[n++] = x[b * RC_Q8_BLOCK + (size_t)pk];
        }
    }
    a->npk[t] = n;
}

recall_status rc_q8act_reserve(rc_q8act *a, int rows, int64_t cols, recall_err *err) {
    if (cols % RC_Q8_BLOCK || cols <= 0 || rows < 1)
        return rc_fail(err, RECALL_E_ARG, "q8: %d x %lld activations (columns must be a multiple of %d)", rows,
                       (long long)cols, RC_Q8_BLOCK);
    const size_t nb = (size_t)cols / RC_Q8_BLOCK, nq = (size_t)rows * (size_t)cols, nd = (size_t)rows * nb;
    if (nq > a->qcap || nd > a->bcap || (size_t)rows > a->rcap) {
        rc_q8act_free(a);
        /* sizes rounded up to 64 bytes for aligned_alloc */
#define Q8_ALLOC(n, size) aligned_alloc(64, ((n) * (size) + 63) / 64 * 64)
        a->q = Q8_ALLOC(nq, 1);
        a->d = Q8_ALLOC(nd, sizeof(float));
        a->corr = Q8_ALLOC(nd, sizeof(int32_t));
        a->pk_c = Q8_ALLOC(nd, sizeof(int32_t));
        a->pk_x = Q8_ALLOC(nd, sizeof(float));
        a->npk = Q8_ALLOC((size_t)rows, sizeof(int32_t));
#undef Q8_ALLOC
        if (!a->q || !a->d || !a->corr || !a->pk_c || !a->pk_x || !a->npk) {
            rc_q8act_free(a);
            return rc_fail(err, RECALL_E_NOMEM, "q8: out of memory for %d x %lld quantised activations", rows,
                           (long long)cols);
        }
        a->qcap = nq;
        a->bcap = nd;
        a->rcap = (size_t)rows;
    }
    a->cols = cols;
    a->nb = (int64_t)nb;
    a->n = 0;
    return RECALL_OK;
}

void rc_q8act_free(rc_q8act *a) {
    free(a->q);
    free(a->d);
    free(a->corr);
    free(a->pk_c);
    free(a->pk_x);
    free(a->npk);
    memset(a, 0, sizeof *a);
}

/* ---- packing --------------------------------------------------------------------------------- */

recall_status rc_q8_shape(const rc_mat *w, rc_q8mat *p, recall_err *err) {
    memset(p, 0, sizeof *p);
    if (w->cols % RC_Q8_BLOCK || w->cols <= 0 || w->rows <= 0)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "q8: a %lld x %lld weight (columns must be a multiple of %d)",
                       (long long)w->rows, (long long)w->cols, RC_Q8_BLOCK);
    if (w->dtype != RC_DT_NF4 && w->dtype != RC_DT_F32 && w->dtype != RC_DT_BF16 && w->dtype != RC_DT_F16)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "q8: weights of dtype %s", rc_dtype_name(w->dtype));
    p->kind = w->dtype == RC_DT_NF4 ? RC_Q8_W4 : RC_Q8_W8;
    p->rows = w->rows;
    p->cols = w->cols;
    p->groups = (w->rows + RC_Q8_GROUP - 1) / RC_Q8_GROUP;
    p->nb = w->cols / RC_Q8_BLOCK;
    p->sshift = p->kind == RC_Q8_W4 && w->cols % 64 == 0 ? 1 : 0;
    return RECALL_OK;
}

/* codes, then scales: both multiples of 64 bytes already (256 / 512 per block, 16 floats per scale) */
static size_t code_bytes(const rc_q8mat *p) { return (size_t)p->groups * (size_t)p->nb * rc_q8_block_bytes(p); }

size_t rc_q8_bytes(const rc_q8mat *p) {
    return code_bytes(p) + (size_t)p->groups * (size_t)(p->nb >> p->sshift) * RC_Q8_GROUP * sizeof(float);
}

void rc_q8_place(rc_q8mat *p, void *mem) {
    p->w = mem;
    p->ws = (float *)((uint8_t *)mem + code_bytes(p));
}

recall_status rc_q8_alloc(const rc_mat *w, rc_q8mat *p, recall_err *err) {
    RC_TRY(rc_q8_shape(w, p, err));
    p->own = aligned_alloc(64, rc_q8_bytes(p));
    if (!p->own)
        return rc_fail(err, RECALL_E_NOMEM, "q8: out of memory packing a %lld x %lld weight (%zu bytes)",
                       (long long)w->rows, (long long)w->cols, rc_q8_bytes(p));
    rc_q8_place(p, p->own);
    return RECALL_OK;
}

void rc_q8_free(rc_q8mat *p) {
    free(p->own);
    memset(p, 0, sizeof *p);
}

/* nf4 rows of group g: codes repacked, scales absmax / 112. A row's 32 codes of a block are 16
 * source bytes (element 2m in the high nibble of byte m); chunk s takes columns 8s .. 8s+3 (low
 * nibbles) and 8s+4 .. 8s+7 (high nibbles), i.e. source bytes 4s, 4s+1 and 4s+2, 4s+3. */
static void pack_w4_group(const rc_mat *w, rc_q8mat *p, int64_t g) {
    const uint8_t *codes = (const uint8_t *)w->data;
    const size_t K = (size_t)w->cols, nsb = (size_t)(p->nb >> p->sshift);
    for (int l = 0; l < RC_Q8_GROUP; l++) {
        const int64_t r = g * RC_Q8_GROUP + l;
        for (int64_t b = 0; b < p->nb; b++) {
            uint8_t *dst = p->w + ((size_t)g * (size_t)p->nb + (size_t)b) * 256 + 4 * (size_t)l;
            if (r >= w->rows) { /* padding rows: code 7 is the value 0 */
                for (int s = 0; s < 4; s++) memset(dst + 64 * s, 0x77, 4);
                continue;
            }
            const uint8_t *src = codes + ((size_t)r * K + (size_t)b * RC_Q8_BLOCK) / 2; /* K % 32 == 0: whole bytes */
            for (int s = 0; s < 4; s++, src += 4) {
                uint8_t *d = dst + 64 * s;
                d[0] = (uint8_t)((src[0] >> 4) | (src[2] & 0xf0));
                d[1] = (uint8_t)((src[0] & 15) | (src[2] & 15) << 4);
                d[2] = (uint8_t)((src[1] >> 4) | (src[3] & 0xf0));
                d[3] = (uint8_t)((src[1] & 15) | (src[3] & 15) << 4);
            }
        }
    }
    for (size_t sb = 0; sb < nsb; sb++)
        for (int l = 0; l < RC_Q8_GROUP; l++) {
            const int64_t r = g * RC_Q8_GROUP + l;
            const size_t e = (size_t)r * K + (sb << p->sshift) * RC_Q8_BLOCK;
            p->ws[((size_t)g * nsb + sb) * RC_Q8_GROUP + (size_t)l] =
                r < w->rows ? w->absmax[e >> 6] / RC_Q8_NF4_SCALE : 0.0f;
        }
}

/* f32 / bf16 / f16 rows of group g: each block quantised like an activation block */
static void pack_w8_group(const rc_mat *w, rc_q8mat *p, int64_t g) {
    const size_t nb = (size_t)p->nb;
    for (int l = 0; l < RC_Q8_GROUP; l++) {
        const int64_t r = g * RC_Q8_GROUP + l;
        for (size_t b = 0; b < nb; b++) {
            float v[RC_Q8_BLOCK];
            int8_t q[RC_Q8_BLOCK];
            int32_t sum;
            int pk;
            const size_t e0 = (size_t)r * (size_t)w->cols + b * RC_Q8_BLOCK;
            for (int c = 0; c < RC_Q8_BLOCK; c++) /* exact fp32 values (ops.h) */
                v[c] = r >= w->rows              ? 0.0f
                       : w->dtype == RC_DT_F32  ? ((const float *)w->data)[e0 + (size_t)c]
                       : w->dtype == RC_DT_BF16 ? rc_bf16_to_f32(((const uint16_t *)w->data)[e0 + (size_t)c])
                                                : rc_mat_get(w, r, (int64_t)(b * RC_Q8_BLOCK) + c);
            const float d = quant_block(v, 0, q, &sum, &pk);
            uint8_t *dst = p->w + ((size_t)g * nb + b) * 512;
            for (int c = 0; c < RC_Q8_BLOCK; c++) dst[64 * (c / 4) + 4 * l + c % 4] = (uint8_t)(q[c] + 128);
            p->ws[((size_t)g * nb + b) * RC_Q8_GROUP + (size_t)l] = d;
        }
    }
}

void rc_q8_pack_groups(const rc_mat *w, rc_q8mat *p, int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; g++) {
        if (p->kind == RC_Q8_W4) pack_w4_group(w, p, g);
        else pack_w8_group(w, p, g);
    }
}

int rc_q8_value(const rc_q8mat *w, int64_t r, int64_t c) {
    const int64_t g = r / RC_Q8_GROUP, b = c / RC_Q8_BLOCK;
    const int l = (int)(r % RC_Q8_GROUP), cc = (int)(c % RC_Q8_BLOCK);
    if (w->kind == RC_Q8_W4) {
        const uint8_t byte = w->w[((size_t)g * (size_t)w->nb + (size_t)b) * 256 + 64 * (size_t)(cc / 8) + 4 * (size_t)l +
                                  (size_t)(cc % 4)];
        return RC_Q8_NF4[cc % 8 >= 4 ? byte >> 4 : byte & 15];
    }
    return (int)w->w[((size_t)g * (size_t)w->nb + (size_t)b) * 512 + 64 * (size_t)(cc / 4) + 4 * (size_t)l +
                     (size_t)(cc % 4)] -
           128;
}

/* ---- the oracle and the scalar kernel -------------------------------------------------------- */

void rc_q8_matmul_ref(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                      int64_t r0, int64_t r1) {
    const size_t K = (size_t)w->cols, nb = K / RC_Q8_BLOCK;
    int8_t *wq = malloc(K);
    float *wd = malloc(nb * sizeof *wd), *row = malloc(K * sizeof *row);
    rc_q8act xa = {0};
    recall_err err = {0};
    /* tests only: on failure they see the NaN-poisoned Y */
    if (!wq || !wd || !row || rc_q8act_reserve(&xa, 1, (int64_t)K, &err)) goto done;
    for (int64_t r = r0; r < r1; r++) {
        if (w->dtype == RC_DT_NF4) {
            for (size_t c = 0; c < K; c++) wq[c] = RC_Q8_NF4[rc_nf4_code((const uint8_t *)w->data, (size_t)r * K + c)];
            for (size_t b = 0; b < nb; b++) wd[b] = w->absmax[((size_t)r * K + b * RC_Q8_BLOCK) >> 6] / RC_Q8_NF4_SCALE;
        } else {
            rc_mat_row_f32(w, r, row);
            for (size_t b = 0; b < nb; b++) {
                int32_t sum;
                int pk;
                wd[b] = quant_block(row + b * RC_Q8_BLOCK, 0, wq + b * RC_Q8_BLOCK, &sum, &pk);
            }
        }
        for (int t = 0; t < nt; t++) {
            rc_q8_quant_row_ref(X + (size_t)t * ldx, &xa, 0);
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (size_t i = b * RC_Q8_BLOCK; i < (b + 1) * RC_Q8_BLOCK; i++) isum += (int32_t)wq[i] * (int32_t)xa.q[i];
                acc = fmaf((float)isum, wd[b] * xa.d[b], acc);
            }
            for (int k = 0; k < xa.npk[0]; k++) {
                const int32_t c = xa.pk_c[k];
                acc = fmaf((float)wq[c], wd[c / RC_Q8_BLOCK] * xa.pk_x[k], acc);
            }
            Y[(size_t)t * ldy + (size_t)r] = bias ? acc + bias[r] : acc;
        }
    }
done:
    free(wq);
    free(wd);
    free(row);
    rc_q8act_free(&xa);
}

void rc_q8_matmul_scalar(const rc_q8mat *w, const float *bias, const rc_q8act *x, int nt, float *Y, size_t ldy,
                         int64_t r0, int64_t r1, void *scratch) {
    (void)scratch;
    const size_t K = (size_t)x->cols; /* == w->cols */
    const int64_t nb = x->nb;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t g = r / RC_Q8_GROUP;
        const int l = (int)(r % RC_Q8_GROUP);
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = x->q + (size_t)t * K;
            const float *xd = x->d + (size_t)t * (size_t)nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = w->w + ((size_t)g * (size_t)nb + (size_t)b) * rc_q8_block_bytes(w);
                const int8_t *xb = xq + (size_t)b * RC_Q8_BLOCK;
                int32_t isum = 0;
                if (w->kind == RC_Q8_W4) {
                    for (int s = 0; s < 4; s++)
                        for (int kk = 0; kk < 4; kk++) {
                            const uint8_t byte = blk[64 * s + 4 * l + kk];
                            isum += RC_Q8_NF4[byte & 15] * xb[8 * s + kk] + RC_Q8_NF4[byte >> 4] * xb[8 * s + 4 + kk];
                        }
                } else {
                    for (int c = 0; c < RC_Q8_BLOCK; c++) isum += ((int32_t)blk[64 * (c / 4) + 4 * l + c % 4] - 128) * xb[c];
                }
                acc = fmaf((float)isum, rc_q8_scale(w, g, b, l) * xd[b], acc);
            }
            const int32_t *pc = x->pk_c + (size_t)t * (size_t)nb;
            const float *px = x->pk_x + (size_t)t * (size_t)nb;
            for (int k = 0; k < x->npk[t]; k++)
                acc = fmaf((float)rc_q8_value(w, r, pc[k]), rc_q8_scale(w, g, pc[k] / RC_Q8_BLOCK, l) * px[k], acc);
            Y[(size_t)t * ldy + (size_t)r] = bias ? acc + bias[r] : acc;
        }
    }
}
