/* simd.h - choosing a kernel path at run time: which paths this binary has and this CPU runs,
 * their names, and rc_simd_select, which fills the kernel table (kernels.h) for one of them. */
#ifndef RECALL_SIMD_H
#define RECALL_SIMD_H

#include "kernels.h"
#include "status.h"

/* Which paths this binary was compiled with AND this CPU can run (scalar always). */
int rc_simd_available(rc_simd_path p);
/* Name <-> path; rc_simd_parse returns -1 for an unknown name. */
const char *rc_simd_name(rc_simd_path p);
int rc_simd_parse(const char *name);

/* Fills *k for a path. name: NULL or "" = the environment variable RECALL_SIMD if set, else
 * the best available path (avx512 > avx2 > neon > scalar); "auto" = best available;
 * otherwise "scalar" | "avx2" | "avx512" | "neon". Asking for a path that is unknown or not
 * available here is an error (RECALL_E_UNSUPPORTED / RECALL_E_ARG), never a silent fallback. */
recall_status rc_simd_select(const char *name, rc_kernels *k, recall_err *err);

#endif
