/* test_simd.c - every SIMD path compiled in and runnable here (avx2, avx512, neon) against the
 * scalar reference, bitwise (checks in tests/simd_selftest.c), plus dispatch/override rules. */
#include "fixture.h"
#include "simd.h"
#include "simd_selftest.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static void run_path(rc_simd_path p) {
    if (!fixture_path_runs(p)) { /* fails when the CPU runs the path's instruction set */
        cr_skip_test("path %s not available on this machine/build", rc_simd_name(p));
        return;
    }
    int np = 0, nf = 0;
    cr_assert_eq(rc_simd_selftest((int)p, &np, &nf), 0);
    cr_assert_gt(np, 500, "only %d checks ran", np);
    cr_assert_eq(nf, 0, "%s: %d of %d kernel checks differ from scalar (see stdout)", rc_simd_name(p), nf, np + nf);
}

Test(simd_equiv, scalar_self) { run_path(RC_SIMD_SCALAR); }
Test(simd_equiv, avx2) { run_path(RC_SIMD_AVX2); }
Test(simd_equiv, avx512) { run_path(RC_SIMD_AVX512); }
/* the avx512 path without the VBMI index build (what an AVX-512 CPU without VBMI runs); each
 * Criterion test is its own process, so the variable stays here */
Test(simd_equiv, avx512_without_vbmi) {
    setenv("RECALL_NO_VBMI", "1", 1);
    run_path(RC_SIMD_AVX512);
}
Test(simd_equiv, neon) { run_path(RC_SIMD_NEON); }

/* The q8 kernels a path installs: the dot-product build where the CPU has the instructions, the
 * other build under RECALL_NO_DOT; both checked bitwise by the self-test (each test its own process). */
static void expect_q8(rc_simd_path p, const char *want) {
    rc_kernels k;
    recall_err err = {0};
    if (!rc_simd_available(p)) {
        cr_skip_test("path %s not available on this machine/build", rc_simd_name(p));
        return;
    }
    cr_assert_eq(rc_simd_select(rc_simd_name(p), &k, &err), RECALL_OK, "%s", err.msg);
    cr_expect_str_eq(k.q8_name, want, "path %s", rc_simd_name(p));
    run_path(p);
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
Test(simd_equiv, q8_dot_builds) {
    if (__builtin_cpu_supports("avx512vnni")) expect_q8(RC_SIMD_AVX512, "avx512-vnni");
    if (__builtin_cpu_supports("avxvnni")) expect_q8(RC_SIMD_AVX2, "avx-vnni");
}
#endif
Test(simd_equiv, q8_without_dot_instructions) {
    setenv("RECALL_NO_DOT", "1", 1);
    expect_q8(RC_SIMD_SCALAR, "scalar");
#if defined(__x86_64__)
    expect_q8(RC_SIMD_AVX2, "avx2");
    expect_q8(RC_SIMD_AVX512, "avx2"); /* AVX-512 without VNNI runs the AVX2 q8 kernels */
#endif
#if defined(__aarch64__)
    expect_q8(RC_SIMD_NEON, "neon");
#endif
}

Test(simd_dispatch, override_and_errors) {
    rc_kernels k;
    recall_err err = {0};
    cr_assert_eq(rc_simd_select("scalar", &k, &err), RECALL_OK);
    cr_assert_str_eq(k.name, "scalar");
    cr_assert_eq(rc_simd_select("sse9", &k, &err), RECALL_E_ARG);
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        recall_err e2 = {0};
        recall_status s = rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &e2);
        if (rc_simd_available((rc_simd_path)p)) {
            cr_assert_eq(s, RECALL_OK, "%s", e2.msg);
            cr_assert_str_eq(k.name, rc_simd_name((rc_simd_path)p));
        } else {
            cr_assert_eq(s, RECALL_E_UNSUPPORTED, "unavailable path %s must be an error", rc_simd_name((rc_simd_path)p));
        }
    }
    /* the environment override is honoured, and an unavailable request is an error */
    setenv("RECALL_SIMD", "scalar", 1);
    cr_assert_eq(rc_simd_select(NULL, &k, &err), RECALL_OK);
    cr_assert_str_eq(k.name, "scalar");
    setenv("RECALL_SIMD", "bogus", 1);
    cr_assert_eq(rc_simd_select(NULL, &k, &err), RECALL_E_ARG);
    unsetenv("RECALL_SIMD");
    cr_assert_eq(rc_simd_select(NULL, &k, &err), RECALL_OK);
#if defined(__x86_64__)
    cr_assert(!rc_simd_available(RC_SIMD_NEON));
#endif
}
