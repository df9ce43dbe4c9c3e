/* q8_neon_dot.c - the NEON q8 kernels (q8_neon.c) compiled with the dot-product extension
 * (-march=armv8.2-a+dotprod on aarch64): the integer dots by sdot instead of smull + sadalp. The
 * same sums, so the same bits. simd.c uses them where the CPU reports ASIMDDP. */
#define RC_Q8_NEON_DOT 1
#include "q8_neon.c"
