/* bench_problem.h - what the loop benches open the same way: the blob (as bench_open_flags asks)
 * and one problem of a recall benchmark file, cut to its first `turns` generated turns. A failure
 * prints "TOOL: message" and exits with status 1.
 * Header-only, like bench_util.h (which bench_sbs.c also compiles against older trees: this one
 * stays apart from it). */
#ifndef RECALL_BENCH_PROBLEM_H
#define RECALL_BENCH_PROBLEM_H

#include "bench_util.h"
#include "blob.h"
#include "problems.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline void bench_open_problem(const char *tool, const char *blob_path, const char *bench_path, int problem,
                                      int turns, rc_blob **b, rc_bench **bench, rc_problem *p) {
    recall_err err = {0};
    if (rc_blob_open(blob_path, bench_open_flags(), b, &err) || rc_bench_load(bench_path, bench, &err) ||
        rc_bench_problem(*bench, (uint32_t)problem, p, &err)) {
        fprintf(stderr, "%s: %s\n", tool, err.msg);
        exit(1);
    }
    rc_problem_keep_turns(p, turns);
}

#endif
