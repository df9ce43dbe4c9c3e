/* kernels_avx512vbmi.c - the AVX-512 kernel table compiled with -mavx512vbmi (x86-64; empty of
 * code elsewhere): kernels_avx512.c itself, with the nf4 index build of 16 weights done by one
 * vpmultishiftqb instead of vpsrlw + vpunpcklbw + vpmovzxbd. The same table values and indices,
 * so the same bits. simd.c uses it for the avx512 path when the CPU has AVX512_VBMI. */
#define RC_AVX512_VBMI 1
#include "kernels_avx512.c"
