/* wasm_fmaf.h - an exact fmaf for wasm32, force-included into every file of the wasm build
 * (web/web.mk: -include). wasm has no scalar fused multiply-add, so wasi-libc's fmaf is a call
 * into libm's software routine on every element of every dot product (two thirds of a replay's
 * time). This one is inlined and gives the same bits, by the argument below; nothing else in the
 * engine changes, and native builds never see this file.
 *
 * Why it is exact: a float times a float has at most 48 significant bits, so p = (double)a * b is
 * exact, and s = p + c is the exact sum rounded once to double. Rounding s to float then gives the
 * exact sum rounded once to float unless s is itself a midpoint between two floats (any float
 * midpoint is a double, so a midpoint strictly between s and the exact sum would be a double nearer
 * to the sum than s). Every such midpoint, normal, subnormal or at the overflow threshold, has the
 * low 28 bits of its double mantissa zero; so when they are not all zero the fast path is exact.
 * Otherwise (a midpoint, an exact float, zero, inf, NaN) the slow path finds the rounding error of
 * s exactly (TwoSum) and, at a true midpoint with a nonzero error, takes the float on the error's
 * side, as one rounding of the exact sum would. */
#ifndef RECALL_WASM_FMAF_H
#define RECALL_WASM_FMAF_H
#if defined(__wasm__) || defined(RC_WASM_FMAF_CHECK) /* the check runs it natively */
#include <math.h>
#include <stdint.h>
#include <string.h>

static float rc_wasm_fmaf_slow(float a, float b, float c) {
    const double p = (double)a * (double)b, cd = c, s = p + cd;
    float r = (float)s;
    if (s != s || s - s != 0) return r; /* NaN or inf: an input was not finite, nothing to round */
    const double bp = s - p, e = (p - (s - bp)) + (cd - bp); /* TwoSum: s + e is the exact sum */
    if (e == 0 || (double)r == s) return r; /* s was exact, or a float: one rounding either way */
    const float o = nextafterf(r, s > (double)r ? INFINITY : -INFINITY); /* the float on s's other side */
    const double rd = isinf(r) ? copysign(0x1p128, r) : r, od = isinf(o) ? copysign(0x1p128, o) : o;
    if (s - rd != od - s) return r; /* not a midpoint: (float)s already rounded the exact sum */
    return (e > 0) == (od > rd) ? o : r; /* a midpoint: the exact sum lies on the error's side */
}

static inline float rc_wasm_fmaf(float a, float b, float c) {
    const double s = (double)a * (double)b + (double)c;
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    if (__builtin_expect((u & 0x0fffffffu) != 0, 1)) return (float)s;
    return rc_wasm_fmaf_slow(a, b, c);
}
#define fmaf(a, b, c) rc_wasm_fmaf((a), (b), (c))
#endif
#endif
