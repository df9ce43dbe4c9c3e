/* bench_util.h - what every bench program does the same way: read a monotonic clock, the CPU time
 * and the resident memory, and open the blob as RECALL_BENCH_LOAD asks (huge = copied into
 * huge-page-advised memory, else mapped).
 * Header-only: each bench is its own program, and bench_sbs.c is also compiled against the
 * headers of older trees by side_by_side.sh --old-tree. */
#ifndef RECALL_BENCH_UTIL_H
#define RECALL_BENCH_UTIL_H

#include "blob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* A benchmark stops at its first error: "tool: message", exit status 1. */
static inline void bench_check(recall_status s, const char *tool, const recall_err *err) {
    if (s == RECALL_OK) return;
    fprintf(stderr, "%s: %s\n", tool, err->msg);
    exit(1);
}

/* The usage text: with no arguments on stderr (exit 2), asked for with --help or -h on stdout
 * (exit 0); otherwise nothing. */
static inline void bench_usage(int argc, char **argv, const char *usage) {
    if (argc >= 2 && strcmp(argv[1], "--help") && strcmp(argv[1], "-h")) return;
    fputs(usage, argc < 2 ? stderr : stdout);
    exit(argc < 2 ? 2 : 0);
}

/* seconds on CLOCK_MONOTONIC */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system, all threads) this process has used: on a shared machine, work per
 * CPU-second is the figure that other processes' load disturbs least. */
static inline double bench_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The process's peak resident set since it started (getrusage ru_maxrss), MiB. */
static inline double bench_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

/* A field of /proc/self/status in MiB ("VmRSS:" now, "VmHWM:" the peak since start or since
 * bench_reset_peak), or -1 where /proc is missing. */
static inline double bench_status_mib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    const size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = atof(line + n);
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* Resets VmHWM to the current resident set (Linux: clear_refs 5); 0 on success. */
static inline int bench_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* rc_blob_open flags for RECALL_BENCH_LOAD: "huge" -> RC_OPEN_HUGEPAGES, anything else -> 0 */
static inline unsigned bench_open_flags(void) {
    const char *load = getenv("RECALL_BENCH_LOAD");
    return load && !strcmp(load, "huge") ? RC_OPEN_HUGEPAGES : 0;
}

#endif
