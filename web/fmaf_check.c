/* fmaf_check.c - web/wasm_fmaf.h's exact fmaf against the native one (hardware FMA or glibc, both
 * exact), built and run natively by make test-web: random operands of every magnitude, products
 * that cancel, sums that land on float midpoints (normal, subnormal, at the overflow threshold),
 * zeros of both signs, inf and NaN. Prints "fmaf_check: N passed, 0 failed" or the first misses. */
#define RC_WASM_FMAF_CHECK 1
#include "wasm_fmaf.h"
#undef fmaf /* the header maps fmaf to its own; the reference here is the native one */

#include <stdio.h>

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float f_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits_f(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static long passed, failed;
static void check(float a, float b, float c) {
    const float want = fmaf(a, b, c), got = rc_wasm_fmaf(a, b, c);
    if (bits_f(want) == bits_f(got) || (want != want && got != got)) {
        passed++;
        return;
    }
    if (failed++ < 10)
        printf("fmaf(%a, %a, %a): native %a (%08x), wasm %a (%08x)\n", a, b, c, want, bits_f(want), got, bits_f(got));
}

int main(void) {
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, 0x1.fffffep127f,
                              -0x1.fffffep127f, INFINITY, -INFINITY, NAN, 0x1p-75f, 0x1.000002p-63f, 3.0f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ns; j++)
            for (int k = 0; k < ns; k++) check(specials[i], specials[j], specials[k]);
    for (long n = 0; n < 4000000; n++) {
        const uint32_t kind = next32() % 6;
        float a = f_bits(next32()), b = f_bits(next32()), c = f_bits(next32());
        if (kind == 0) { /* magnitudes of a model's activations and weights */
            a = f_bits((next32() & 0x807fffffu) | (uint32_t)(112 + next32() % 32) << 23);
            b = f_bits((next32() & 0x807fffffu) | (uint32_t)(112 + next32() % 32) << 23);
            c = f_bits((next32() & 0x807fffffu) | (uint32_t)(112 + next32() % 32) << 23);
        } else if (kind == 1) { /* c cancels the product: results far below both */
            c = -(float)((double)a * b) * (1.0f + (float)(next32() % 8) * 0x1p-23f);
        } else if (kind == 2) { /* the sum a hair off a float midpoint: c = r, a b = half an ulp of r
                                  * times (1 + 2^-23)(1 - 2^-23) = 1 - 2^-46, a sum that rounds to the
                                  * midpoint in double; or exactly the midpoint, or a little off */
            const float r = f_bits((next32() & 0x807fffffu) | (uint32_t)(100 + next32() % 60) << 23);
            const float h = f_bits(bits_f(r) & 0xff800000u) * 0x1p-24f; /* half an ulp of r */
            const uint32_t v = next32() % 4;
            c = r;
            a = h * (v == 0 ? 1.0f : 1.0f + 0x1p-23f);
            b = (next32() & 1 ? 1.0f : -1.0f) * (v == 0 ? 1.0f : v == 1 ? 1.0f + 0x1p-23f : 1.0f - 0x1p-23f);
        } else if (kind == 3) { /* subnormal results: products near 2^-140, c subnormal */
            a = f_bits((next32() & 0x807fffffu) | (uint32_t)(50 + next32() % 20) << 23);
            b = f_bits((next32() & 0x807fffffu) | (uint32_t)(50 + next32() % 20) << 23);
            c = f_bits(next32() & 0x807fffffu);
        } else if (kind == 4) { /* subnormal midpoints: c an odd multiple of 2^-150 apart, product tiny */
            c = f_bits(next32() & 0x803fffffu);
            a = 0x1p-75f * (1.0f + 0x1p-23f);
            b = (next32() & 1 ? 0x1p-75f : -0x1p-75f) * (next32() & 1 ? 1.0f - 0x1p-23f : 1.0f);
        } else { /* near the overflow threshold */
            a = 0x1.fffffep127f;
            b = 1.0f + (float)(next32() % 4) * 0x1p-24f;
            c = f_bits((next32() & 0x807fffffu) | (uint32_t)(100 + next32() % 4) << 23);
        }
        check(a, b, c);
    }
    printf("fmaf_check: %ld passed, %ld failed\n", passed, failed);
    return failed != 0;
}
