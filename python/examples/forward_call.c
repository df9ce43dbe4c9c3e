/* forward_call.c - the C side of the Python overhead figure (docs/PYTHON.md): the time of one
 * recall_forward call on N ids, the median of R calls after a warm-up, against librecall.so.
 *   cc -O2 -Isrc python/examples/forward_call.c -Lbuild -l:librecall.so -Wl,-rpath,$PWD/build -o build/forward_call
 *   build/forward_call build/worldA-f32.blob N R */
#include "recall.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: forward_call BLOB N R\n"), 2;
    const int n = atoi(argv[2]), reps = atoi(argv[3]);
    recall_err err = {0};
    recall_model *m;
    if (n < 1 || reps < 1 || recall_open(argv[1], NULL, &m, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    recall_model_info info;
    recall_model_get_info(m, &info);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float *logits = malloc((size_t)info.vocab * sizeof *logits);
    double *t = malloc((size_t)reps * sizeof *t);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919) % info.vocab);
    for (int r = -3; r < reps; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (recall_forward(m, ids, (size_t)n, logits, (size_t)info.vocab, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r >= 0) t[r] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    printf("C recall_forward, %d ids: median %.1f us over %d calls\n", n, t[reps / 2], reps);
    recall_close(m);
    free(ids);
    free(logits);
    free(t);
    return 0;
}
