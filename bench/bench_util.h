/* bench_util.h - what every bench program does the same way: read a monotonic clock, and open the
 * blob as RECALL_BENCH_LOAD asks (huge = copied into huge-page-advised memory, else mapped).
 * Header-only: each bench is its own program, and bench_sbs.c is also compiled against the
 * headers of older trees by side_by_side.sh --old-tree. */
#ifndef RECALL_BENCH_UTIL_H
#define RECALL_BENCH_UTIL_H

#include "blob.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* seconds on CLOCK_MONOTONIC */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* rc_blob_open flags for RECALL_BENCH_LOAD: "huge" -> RC_OPEN_HUGEPAGES, anything else -> 0 */
static inline unsigned bench_open_flags(void) {
    const char *load = getenv("RECALL_BENCH_LOAD");
    return load && !strcmp(load, "huge") ? RC_OPEN_HUGEPAGES : 0;
}

#endif
