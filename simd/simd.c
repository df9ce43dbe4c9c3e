/* simd.c - runtime selection of the kernel table (simd.h) among the paths compiled into this
 * binary (kernels_scalar.c and the per-ISA files), checked against the CPU (cpuid via
 * __builtin_cpu_supports on x86-64; NEON is architectural on aarch64, SIMD128 on a wasm module built with it).
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
