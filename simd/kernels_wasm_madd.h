/* kernels_wasm_madd.h - the wasm kernels on a four-lane multiply-add, included by kernels_wasm.c
 * (relaxed-simd builds only) once per definition of MADD4 with its own name prefix MZ(...):
 *   mz_*: MADD4 = f32x4.relaxed_madd, installed only when the load-time proof found it fused
 *         (one rounding: then each lane is exactly fmaf, and these are the canonical order's bits);
 *   uz_*: MADD4 = a multiply then an add (two roundings), the code an engine that does not fuse
 *         would run; kernels_wasm.c proves it is caught (RECALL_WASM_MADD=unfused, make test-web).
 * The order is kernels.h's: 16 lanes as four f32x4 (lanes 0-3, 4-7, 8-11, 12-15), the tail
 * (n % 16) on the first lanes by the exact fmaf, the canonical tree; weighted sums vectorised over
 * the output only. Nothing here needs a midpoint check: a fused multiply-add IS fmaf. */

/* The canonical dot of w and x (n elements): acc[i % 16] = fmaf(w_i, x_i, acc[i % 16]) */
static float MZ(dot)(const float *w, const float *x, size_t n) {
    v128_t a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = MADD4(wasm_v128_load(w + i), wasm_v128_load(x + i), a0);
        a1 = MADD4(wasm_v128_load(w + i + 4), wasm_v128_load(x + i + 4), a1);
        a2 = MADD4(wasm_v128_load(w + i + 8), wasm_v128_load(x + i + 8), a2);
        a3 = MADD4(wasm_v128_load(w + i + 12), wasm_v128_load(x + i + 12), a3);
    }
    return tree4(a0, a1, a2, a3, w + i, x + i, n - i);
}

static float MZ(dot_f32)(const float *w, const float *x, size_t n) { return MZ(dot)(w, x, n); }
static float MZ(sumsq_f32)(const float *x, size_t n) { return MZ(dot)(x, x, n); }

/* Two inputs against one weight row at once (prefill): the row's loads shared, each output its
 * own 16 lanes, so each is the bits of MZ(dot) (batch invariance). */
static void MZ(dot2)(const float *w, const float *x0, const float *x1, size_t n, float *y0, float *y1) {
    v128_t a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const v128_t w0 = wasm_v128_load(w + i), w1 = wasm_v128_load(w + i + 4);
        const v128_t w2 = wasm_v128_load(w + i + 8), w3 = wasm_v128_load(w + i + 12);
        a0 = MADD4(w0, wasm_v128_load(x0 + i), a0);
        b0 = MADD4(w0, wasm_v128_load(x1 + i), b0);
        a1 = MADD4(w1, wasm_v128_load(x0 + i + 4), a1);
        b1 = MADD4(w1, wasm_v128_load(x1 + i + 4), b1);
        a2 = MADD4(w2, wasm_v128_load(x0 + i + 8), a2);
        b2 = MADD4(w2, wasm_v128_load(x1 + i + 8), b2);
        a3 = MADD4(w3, wasm_v128_load(x0 + i + 12), a3);
        b3 = MADD4(w3, wasm_v128_load(x1 + i + 12), b3);
    }
    *y0 = tree4(a0, a1, a2, a3, w + i, x0 + i, n - i);
    *y1 = tree4(b0, b1, b2, b3, w + i, x1 + i, n - i);
}

static void MZ(matmul)(const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt, float *Y, size_t ldy,
                       int64_t r0, int64_t r1, float *scratch) {
    (void)scratch;
    const size_t n = (size_t)w->cols;
    if (w->dtype != RC_DT_F32) { /* bf16 / f16 / nf4: the reference's dot, one row at a time */
        for (int64_t r = r0; r < r1; r++)
            for (int t = 0; t < nt; t++) {
                const float d = rc_dot_row(w, r, X + (size_t)t * ldx);
                Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
            }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const float *row = (const float *)w->data + (size_t)r * n;
        int t = 0;
        for (; t + 2 <= nt; t += 2) {
            float d0, d1;
            MZ(dot2)(row, X + (size_t)t * ldx, X + (size_t)(t + 1) * ldx, n, &d0, &d1);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d0 + bias[r] : d0;
            Y[(size_t)(t + 1) * ldy + (size_t)r] = bias ? d1 + bias[r] : d1;
        }
        for (; t < nt; t++) {
            const float d = MZ(dot)(row, X + (size_t)t * ldx, n);
            Y[(size_t)t * ldy + (size_t)r] = bias ? d + bias[r] : d;
        }
    }
}

static void MZ(attn_scores)(const float *q, const float *K, size_t ldk, int n, size_t D, float scale,
                            float *scores) {
    for (int j = 0; j < n; j++) scores[j] = MZ(dot)(q, K + (size_t)j * ldk, D) * scale;
}

/* out[i] = fmaf(p[j], V[j][i], out[i]) for j ascending: 16 outputs held in registers across all
 * keys, then the next 16; the rest four, then one, at a time. */
static void MZ(attn_wsum)(const float *p, const float *V, size_t ldv, int n, size_t D, float *out) {
    size_t i = 0;
    for (; i + 16 <= D; i += 16) {
        v128_t o0 = wasm_v128_load(out + i), o1 = wasm_v128_load(out + i + 4);
        v128_t o2 = wasm_v128_load(out + i + 8), o3 = wasm_v128_load(out + i + 12);
        for (int j = 0; j < n; j++) {
            const v128_t pj = wasm_f32x4_splat(p[j]);
            const float *v = V + (size_t)j * ldv + i;
            o0 = MADD4(pj, wasm_v128_load(v), o0);
            o1 = MADD4(pj, wasm_v128_load(v + 4), o1);
            o2 = MADD4(pj, wasm_v128_load(v + 8), o2);
            o3 = MADD4(pj, wasm_v128_load(v + 12), o3);
        }
        wasm_v128_store(out + i, o0);
        wasm_v128_store(out + i + 4, o1);
        wasm_v128_store(out + i + 8, o2);
        wasm_v128_store(out + i + 12, o3);
    }
    for (; i + 4 <= D; i += 4) {
        v128_t o = wasm_v128_load(out + i);
        for (int j = 0; j < n; j++) o = MADD4(wasm_f32x4_splat(p[j]), wasm_v128_load(V + (size_t)j * ldv + i), o);
        wasm_v128_store(out + i, o);
    }
    for (; i < D; i++)
        for (int j = 0; j < n; j++) out[i] = fmaf(p[j], V[(size_t)j * ldv + i], out[i]);
}

/* rc_expf of four lanes by the reference's own steps, each fmaf one MADD4; *bad when a lane is
 * outside the plain range (the reference's special cases: the caller takes rc_expf for those four) */
static v128_t MZ(expf4)(v128_t x, int *bad) {
    const v128_t in = wasm_v128_and(wasm_f32x4_le(x, wasm_f32x4_splat(88.72283935546875f)),
                                    wasm_f32x4_ge(x, wasm_f32x4_splat(-103.97208404541015625f))); /* NaN: false */
    const v128_t t = wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269502162933349609375f));
    const v128_t k = wasm_i32x4_trunc_sat_f32x4(
        wasm_f32x4_add(t, wasm_v128_bitselect(wasm_f32x4_splat(0.5f), wasm_f32x4_splat(-0.5f),
                                              wasm_f32x4_ge(t, wasm_f32x4_splat(0.0f)))));
    const v128_t nkf = wasm_f32x4_neg(wasm_f32x4_convert_i32x4(k));
    v128_t r = MADD4(nkf, wasm_f32x4_splat(0.693145751953125f), x);
    r = MADD4(nkf, wasm_f32x4_splat(1.428606765330187045e-06f), r);
    v128_t p = wasm_f32x4_splat(1.0f / 5040.0f);
    p = MADD4(p, r, wasm_f32x4_splat(1.0f / 720.0f));
    p = MADD4(p, r, wasm_f32x4_splat(1.0f / 120.0f));
    p = MADD4(p, r, wasm_f32x4_splat(1.0f / 24.0f));
    p = MADD4(p, r, wasm_f32x4_splat(1.0f / 6.0f));
    p = MADD4(p, r, wasm_f32x4_splat(0.5f));
    p = MADD4(p, r, wasm_f32x4_splat(1.0f));
    p = MADD4(p, r, wasm_f32x4_splat(1.0f));
    *bad = !wasm_i32x4_all_true(in);
    const v128_t k1 = wasm_i32x4_shr(wasm_i32x4_add(k, wasm_v128_and(wasm_i32x4_shr(k, 31), wasm_i32x4_splat(1))), 1);
    const v128_t k2 = wasm_i32x4_sub(k, k1);
    const v128_t e1 = wasm_i32x4_shl(wasm_i32x4_add(k1, wasm_i32x4_splat(127)), 23);
    const v128_t e2 = wasm_i32x4_shl(wasm_i32x4_add(k2, wasm_i32x4_splat(127)), 23);
    return wasm_f32x4_mul(wasm_f32x4_mul(p, e1), e2);
}

static void MZ(silu_mul)(float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v128_t gv = wasm_v128_load(g + i);
        int bad;
        const v128_t e = MZ(expf4)(wasm_f32x4_neg(gv), &bad);
        if (bad) {
            for (size_t j = i; j < i + 4; j++) g[j] = rc_silu(g[j]) * u[j];
            continue;
        }
        const v128_t si = wasm_f32x4_div(gv, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e));
        wasm_v128_store(g + i, wasm_f32x4_mul(si, wasm_v128_load(u + i)));
    }
    for (; i < n; i++) g[i] = rc_silu(g[i]) * u[i];
}

static void MZ(softmax)(float *s, size_t n) {
    const float m = rc_softmax_max(s, n);
    const v128_t mv = wasm_f32x4_splat(m);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int bad;
        const v128_t e = MZ(expf4)(wasm_f32x4_sub(wasm_v128_load(s + i), mv), &bad);
        if (bad)
            for (size_t j = i; j < i + 4; j++) s[j] = rc_expf(s[j] - m);
        else
            wasm_v128_store(s + i, e);
    }
    for (; i < n; i++) s[i] = rc_expf(s[i] - m);
    const float sum = rc_sum_f32(s, n);
    const v128_t sv = wasm_f32x4_splat(sum);
    for (i = 0; i + 4 <= n; i += 4) wasm_v128_store(s + i, wasm_f32x4_div(wasm_v128_load(s + i), sv));
    for (; i < n; i++) s[i] = s[i] / sum;
}

/* MADD4 on the probe's operands: out[i] = a[i] * b[i] + c[i] as this build's MADD4 computes it */
static void MZ(madd_lanes)(const float *a, const float *b, const float *c, float *out, size_t n) {
    for (size_t i = 0; i + 4 <= n; i += 4)
        wasm_v128_store(out + i, MADD4(wasm_v128_load(a + i), wasm_v128_load(b + i), wasm_v128_load(c + i)));
}

static void MZ(install)(rc_kernels *k) {
    k->dot_f32 = MZ(dot_f32);
    k->sumsq_f32 = MZ(sumsq_f32);
    k->matmul = MZ(matmul);
    k->attn_scores = MZ(attn_scores);
    k->attn_wsum = MZ(attn_wsum);
    k->silu_mul = MZ(silu_mul);
    k->softmax = MZ(softmax);
}
