/* bench_open.c - how fast a blob opens (structural validation, no data hashing) and how long
 * a full verify takes; for a blob with the lm_head screening copy, how long rc_lmscreen_open's
 * checks take (every code, scale and norm, the norms re-derived from lm_head) at 1 and 2 threads.
 * Usage: bench_open BLOB [repeats]. Prints the median open time in ms. */
#include "blob.h"
#include "lm_screen.h"
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        const int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        fprintf(help ? stdout : stderr, "usage: bench_open BLOB [repeats]\n"
                                        "  times rc_blob_open (median and min of repeats, default 21) and one full verify\n");
        return help ? 0 : 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 21;
    if (n < 1 || n > 1000) n = 21;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return 1;
    size_t tensors = 0;
    for (int i = 0; i < n; i++) {
        rc_blob *b;
        recall_err err = {0};
        double t0 = now_ms();
        if (rc_blob_open(argv[1], 0, &b, &err)) {
            fprintf(stderr, "bench_open: %s\n", err.msg);
            return 1;
        }
        t[i] = now_ms() - t0;
        tensors = rc_blob_n_tensors(b);
        rc_blob_close(b);
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    rc_blob *b;
    recall_err err = {0};
    double t0 = now_ms();
    if (rc_blob_open(argv[1], RC_OPEN_VERIFY, &b, &err)) {
        fprintf(stderr, "bench_open: %s\n", err.msg);
        return 1;
    }
    double tv = now_ms() - t0;
    printf("open %s (%zu tensors, %llu bytes): median %.2f ms, min %.2f ms over %d opens; full verify %.0f ms\n",
           argv[1], tensors, (unsigned long long)rc_blob_hdr(b)->file_size, t[n / 2], t[0], n, tv);
    if (rc_blob_find(b, RC_LM_SCREEN_Q)) /* the first open reads the pages; the rest the page cache */
        for (int th = 1; th <= 2; th++) {
            rc_exec *ex;
            rc_exec_opts xo = {.threads = th};
            if (rc_exec_open(&xo, &ex, &err)) {
                fprintf(stderr, "bench_open: %s\n", err.msg);
                return 1;
            }
            const int reps = n < 5 ? n : 5;
            double cpu[5];
            for (int i = 0; i < reps; i++) {
                rc_lmscreen *scr;
                double t1 = now_ms();
                const clock_t c1 = clock();
                if (rc_lmscreen_open(b, ex, &scr, &err)) {
                    fprintf(stderr, "bench_open: %s\n", err.msg);
                    return 1;
                }
                t[i] = now_ms() - t1;
                cpu[i] = (double)(clock() - c1) * 1e3 / CLOCKS_PER_SEC;
                rc_lmscreen_close(scr);
            }
            const double first = t[0];
            qsort(t, (size_t)reps, sizeof *t, cmp);
            qsort(cpu, (size_t)reps, sizeof *cpu, cmp);
            printf("lm_head screen open (checks: codes, scales, norms re-derived), %d thread%s, %s: first %.0f ms, "
                   "median %.0f ms, min %.0f ms wall over %d; CPU time median %.0f ms\n", th, th > 1 ? "s" : "",
                   ex->k.name, first, t[reps / 2], t[0], reps, cpu[reps / 2]);
            rc_exec_close(ex);
        }
    rc_blob_close(b);
    free(t);
    return 0;
}
