/* simd.c - builds the kernel table (simd.h): the scalar path (thin wrappers over the reference
 * kernels of src/ops.c, which define the canonical order) and runtime selection among the
 * paths compiled into this binary, checked against the CPU (cpuid via __builtin_cpu_supports on
 * x86-64; NEON is architectural on aarch64, SIMD128 on a wasm module built with it).
 * RECALL_SIMD=scalar|avx2|avx512|neon|wasm overrides. */
#include "simd.h"

#include "nf4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

static const char *const path_names[RC_SIMD_COUNT] = {"scalar", "avx2", "avx512", "neon", "wasm"};

const char *rc_simd_name(rc_simd_path p) { return (unsigned)p < RC_SIMD_COUNT ? path_names[p] : "?"; }

int rc_simd_parse(const char *name) {
    for (int i = 0; i < RC_SIMD_COUNT; i++)
        if (name && !strcmp(name, path_names[i])) return i;
    return -1;
}

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

/* ---- selection ---- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* F16C (the f16 KV conversions: cpuid leaf 1, ECX bit 29) and AVX-VNNI (leaf 7 sub-leaf 1, EAX bit
 * 4) read from cpuid itself: older compilers' __builtin_cpu_supports (clang 14) know neither name. */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
}
static int cpu_has_avxvnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
}
#endif

static int cpu_has(rc_simd_path p) {
    switch (p) {
    case RC_SIMD_SCALAR: return 1;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    case RC_SIMD_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case RC_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#endif
#if defined(__aarch64__)
    case RC_SIMD_NEON: return 1;
#endif
#if defined(__wasm_simd128__)
    case RC_SIMD_WASM: return 1; /* a module built with SIMD128 only loads where the engine has it */
#endif
    default: return 0;
    }
}

/* AVX512_VBMI: the avx512 path's nf4 index build in one instruction (same bits) */
static int cpu_vbmi(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (getenv("RECALL_NO_VBMI")) return 0; /* to compare the two builds of the path */
    return __builtin_cpu_supports("avx512vbmi");
#else
    return 0;
#endif
}

/* The dot-product instructions of the q8 kernels: AVX512_VNNI (avx512 path), AVX-VNNI (avx2 path),
 * the NEON dot-product extension. RECALL_NO_DOT=1 turns them off, to compare the builds of each
 * path (same bits). */
static int cpu_vnni(int avx512) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (getenv("RECALL_NO_DOT")) return 0;
    if (avx512) return __builtin_cpu_supports("avx512vnni");
    return cpu_has_avxvnni();
#else
    (void)avx512;
    return 0;
#endif
}

/* The q8 kernels of an x86 path: the best VNNI form the CPU has, else AVX2's maddubs form
 * (always compiled where the x86 paths are). */
static int fill_q8_x86(rc_kernels *k, int avx512) {
    if (avx512 && cpu_vnni(1) && rc_q8_avx512(k)) return 1;
    if (cpu_vnni(0) && rc_q8_avxvnni(k)) return 1;
    return rc_q8_avx2(k);
}

static int cpu_neon_dot(void) {
#if defined(__aarch64__) && defined(__linux__) && defined(HWCAP_ASIMDDP)
    return !getenv("RECALL_NO_DOT") && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP);
#else
    return 0;
#endif
}

static int fill(rc_simd_path p, rc_kernels *k) {
    rc_kernels_scalar(k); /* every entry a path does not override stays the reference */
    switch (p) {
    case RC_SIMD_SCALAR: return 1;
    case RC_SIMD_AVX2: return rc_kernels_avx2(k) && rc_act_avx2(k) && rc_screen_avx2(k) && fill_q8_x86(k, 0);
    case RC_SIMD_AVX512:
        return ((cpu_vbmi() && rc_kernels_avx512vbmi(k)) || rc_kernels_avx512(k)) && rc_act_avx512(k) &&
               rc_screen_avx512(k) && fill_q8_x86(k, 1);
    case RC_SIMD_NEON:
        return rc_kernels_neon(k) && rc_act_neon(k) && rc_screen_neon(k) && ((cpu_neon_dot() && rc_q8_neon_dot(k)) || rc_q8_neon(k));
    case RC_SIMD_WASM: return rc_kernels_wasm(k);
    default: return 0;
    }
}

int rc_simd_available(rc_simd_path p) {
    rc_kernels k;
    return (unsigned)p < RC_SIMD_COUNT && cpu_has(p) && fill(p, &k);
}

recall_status rc_simd_select(const char *name, rc_kernels *k, recall_err *err) {
    if (!name || !*name) name = getenv("RECALL_SIMD");
    if (!name || !*name || !strcmp(name, "auto")) {
        const rc_simd_path order[] = {RC_SIMD_AVX512, RC_SIMD_AVX2, RC_SIMD_NEON, RC_SIMD_WASM};
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
            if (rc_simd_available(order[i])) return fill(order[i], k) ? RECALL_OK : RECALL_E_UNSUPPORTED;
        rc_kernels_scalar(k);
        return RECALL_OK;
    }
    int p = rc_simd_parse(name);
    if (p < 0)
        return rc_fail(err, RECALL_E_ARG, "simd: unknown path '%s' (scalar, avx2, avx512, neon, wasm, auto)", name);
    if (!rc_simd_available((rc_simd_path)p))
        return rc_fail(err, RECALL_E_UNSUPPORTED, "simd: path '%s' is not available on this CPU / build", name);
    fill((rc_simd_path)p, k);
    return RECALL_OK;
}
