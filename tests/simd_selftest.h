/* simd_selftest.h - kernel equivalence checks of one SIMD path against the scalar reference
 * (tests/simd_selftest.c), shared by the Criterion suite and the standalone cross-test driver. */
#ifndef RECALL_SIMD_SELFTEST_H
#define RECALL_SIMD_SELFTEST_H

/* Runs every check for path (an rc_simd_path); counts in *passed / *failed (each failure is
 * printed with its first differing index and both values as hex bits). Returns -1 if the path
 * is not available here. */
int rc_simd_selftest(int path, int *passed, int *failed);

#endif
