/* q8_avxvnni.c - the AVX2 q8 kernels (q8_avx2.c) compiled with -mavxvnni: the integer dots by VEX
 * vpdpbusd instead of vpmaddubsw + vpmaddwd. The same sums, so the same bits. simd.c uses them on
 * the avx2 path (and on avx512 without AVX512_VNNI) when the CPU has AVX-VNNI. */
#define RC_Q8_AVXVNNI 1
#include "q8_avx2.c"
