/* bench_depth.c - decode speed against the context depth: decode steps from position DEPTH, timed
 * step by step, for several depths (and KV storages) in one process, interleaved so that the host's
 * drift hits every configuration alike. Per (kv, depth) one decoder (the weights are shared views
 * of the blob): DEPTH pseudo-random ids prefilled once (untimed); then every round, per
 * configuration in a rotated order: `steps` decode steps from DEPTH (each computing its row's
 * logits [V], as bench_sbs's tg64 does), then a crop back to DEPTH. The last logits of every round
 * must be bitwise those of the first round (printed as "same bits yes").
 *
 * Per configuration it prints the median and the mean of the step times and the CPU seconds per
 * step (user + system of every thread: on a shared host the figure other processes disturb least),
 * and the ratio of each to the first depth of the same kv. --perf-fifo F: the control FIFO of
 * `perf record --control fifo:F -D -1`; perf is enabled only around the decode steps of
 * --perf-depth D (of the first kv).
 *
 * usage: bench_depth BLOB [--depths 0,512,2048] [--kv f32,f16] [--steps N] [--rounds R] [--threads T]
 *                    [--simd P] [--numerics exact|q8] [--perf-fifo F --perf-depth D]
 * (--numerics q8: the decoders share one packed decoder, simd/q8.h)
 * (RECALL_BENCH_LOAD=huge copies the blob into huge-page-advised memory, as the other benches)
 */
#include "bench_util.h"
#include "blob.h"
#include "checksum.h"
#include "pool.h"
#include "q8.h"
#include "qwen2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { MAX_DEPTHS = 8, MAX_KV = 2, MAX_STEPS = 512, MAX_ROUNDS = 64 };

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_depth: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void perf_ctl(const char *fifo, const char *cmd) {
    if (!fifo) return;
    FILE *f = fopen(fifo, "w");
    if (!f) die("cannot open the perf control fifo", NULL);
    fputs(cmd, f);
    fclose(f);
}

/* comma-separated list of at most max items; item(text, len, out index) parses one, 0 = bad */
static int parse_list(const char *s, int max, int (*item)(const char *, size_t, void *, int), void *out) {
    int n = 0;
    for (const char *c = s; c && *c; n++) {
        const char *e = strchr(c, ',');
        const size_t len = e ? (size_t)(e - c) : strlen(c);
        if (n == max || !item(c, len, out, n)) return -1;
        c = e ? e + 1 : NULL;
    }
    return n;
}
static int depth_item(const char *c, size_t len, void *out, int i) {
    char *end;
    const long d = strtol(c, &end, 10);
    ((int *)out)[i] = (int)d;
    return end == c + len && d >= 0 && d <= (1L << 20);
}
static int kv_item(const char *c, size_t len, void *out, int i) {
    char name[8] = {0};
    if (len >= sizeof name) return 0;
    memcpy(name, c, len);
    ((int *)out)[i] = rc_kv_dtype_parse(name);
    return ((int *)out)[i] >= 0;
}

typedef struct {
    int depth;
    rc_kv_dtype kv;
    rc_qwen2 *m;
    double *step_s; /* [rounds * steps] */
    double cpu;     /* CPU seconds of the timed steps */
    uint64_t first_hash;
    int same;
} depth_run;

int main(int argc, char **argv) {
    const char *usage =
        "usage: bench_depth BLOB [--depths 0,512,2048] [--kv f32,f16] [--steps N] [--rounds R] [--threads T]\n"
        "                   [--simd P] [--numerics exact|q8] [--perf-fifo F --perf-depth D]\n";
    bench_usage(argc, argv, usage);
    rc_exec_opts eo = {.threads = 0};
    const char *depths_s = "0,512,2048", *kv_s = "f32", *fifo = NULL;
    int steps = 32, rounds = 4, perf_depth = -1;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_depth: %s needs a value\n%s", argv[i], usage);
            return 2;
        }
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--depths")) depths_s = v;
        else if (!strcmp(argv[i], "--kv")) kv_s = v;
        else if (!strcmp(argv[i], "--steps")) steps = atoi(v);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(v);
        else if (!strcmp(argv[i], "--threads")) eo.threads = atoi(v);
        else if (!strcmp(argv[i], "--simd")) eo.simd = v;
        else if (!strcmp(argv[i], "--numerics")) {
            const int n = rc_numerics_parse(v);
            if (n < 0) {
                fprintf(stderr, "bench_depth: --numerics exact|q8, not '%s'\n", v);
                return 2;
            }
            eo.numerics = n;
        }
        else if (!strcmp(argv[i], "--perf-fifo")) fifo = v;
        else if (!strcmp(argv[i], "--perf-depth")) perf_depth = atoi(v);
        else {
            fprintf(stderr, "bench_depth: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    int depths[MAX_DEPTHS], kvs[MAX_KV];
    const int n_depths = parse_list(depths_s, MAX_DEPTHS, depth_item, depths);
    const int nk = parse_list(kv_s, MAX_KV, kv_item, kvs);
    if (steps < 1 || steps > MAX_STEPS || rounds < 1 || rounds > MAX_ROUNDS || n_depths < 1 || nk < 1) {
        fprintf(stderr, "bench_depth: --steps 1..%d, --rounds 1..%d, --depths up to %d positions, --kv f32 and / or f16\n",
                MAX_STEPS, MAX_ROUNDS, MAX_DEPTHS);
        return 2;
    }
    depth_run runs[MAX_DEPTHS * MAX_KV];
    int nd = 0;
    for (int k = 0; k < nk; k++)
        for (int d = 0; d < n_depths; d++, nd++) {
            runs[nd].kv = (rc_kv_dtype)kvs[k];
            runs[nd].depth = depths[d];
        }
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *ex = NULL;
    const unsigned flags = bench_open_flags();
    if (rc_blob_open(argv[1], flags, &b, &err)) die(argv[1], &err);
    if (rc_exec_open(&eo, &ex, &err)) die("exec", &err);
    int maxd = 0;
    for (int d = 0; d < n_depths; d++) maxd = depths[d] > maxd ? depths[d] : maxd;
    const int nids = maxd + steps;
    int32_t *ids = malloc((size_t)nids * sizeof *ids);
    if (!ids) die("out of memory", NULL);
    for (int i = 0; i < nids; i++) ids[i] = (int32_t)(((int64_t)i * 7919 + 13) % 151643); /* below the specials */
    float *logits = NULL;
    for (int d = 0; d < nd; d++) {
        depth_run *r = &runs[d];
        const int ctx = r->depth + steps;
        const recall_status st = d ? rc_qwen2_open_shared(b, ctx, runs[0].m, &r->m, &err) /* q8: one pack */
                                   : rc_qwen2_open_ex(b, ctx, ex, &r->m, &err);
        if (st || rc_qwen2_set_kv_dtype(r->m, r->kv, &err) ||
            rc_qwen2_reserve(r->m, ctx, &err))
            die("qwen2", &err);
        if (!logits) logits = malloc((size_t)rc_qwen2_cfg(r->m)->vocab * sizeof *logits);
        r->step_s = malloc((size_t)rounds * (size_t)steps * sizeof *r->step_s);
        if (!logits || !r->step_s) die("out of memory", NULL);
        for (int at = 0; at < r->depth; at += 512) { /* untimed prefill, cache only */
            rc_qwen2_fwd f = {.ids = ids + at, .n = r->depth - at < 512 ? r->depth - at : 512};
            if (rc_qwen2_forward(r->m, &f, &err)) die("prefill", &err);
        }
        r->cpu = 0.0;
        r->same = 1;
    }
    const size_t V = (size_t)rc_qwen2_cfg(runs[0].m)->vocab;
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < nd; k++) {
            depth_run *r = &runs[(k + round) % nd]; /* rotated order */
            const int perf = fifo && r->depth == perf_depth && r->kv == (rc_kv_dtype)kvs[0];
            if (perf) perf_ctl(fifo, "enable");
            const double c0 = cpu_s();
            for (int s = 0; s < steps; s++) {
                rc_qwen2_fwd f = {.ids = ids + r->depth + s, .n = 1, .logits_last = logits};
                const double t0 = bench_now_s();
                if (rc_qwen2_forward(r->m, &f, &err)) die("decode", &err);
                r->step_s[round * steps + s] = bench_now_s() - t0;
            }
            r->cpu += cpu_s() - c0;
            if (perf) perf_ctl(fifo, "disable");
            const uint64_t h = rc_xxh64(logits, V * sizeof *logits, 0);
            if (round == 0) r->first_hash = h;
            else r->same &= h == r->first_hash;
            if (rc_qwen2_crop(r->m, r->depth, &err)) die("crop", &err);
        }
    printf("bench_depth %s: simd %s, numerics %s, %d thread(s), load %s, %d steps x %d rounds per configuration "
           "(interleaved)\n",
           argv[1], ex->k.name, rc_numerics_name(eo.numerics), ex->threads, flags ? "huge" : "mmap", steps, rounds);
    double med0 = 0, mean0 = 0, cpu0 = 0;
    for (int d = 0; d < nd; d++) {
        depth_run *r = &runs[d];
        const int n = rounds * steps;
        double mean = 0;
        for (int i = 0; i < n; i++) mean += r->step_s[i];
        mean /= n;
        qsort(r->step_s, (size_t)n, sizeof *r->step_s, cmp_double);
        const double med = r->step_s[n / 2], cpu = r->cpu / n;
        if (d % n_depths == 0) med0 = med, mean0 = mean, cpu0 = cpu; /* the first depth of this kv */
        printf("kv %s depth %5d: step median %.2f ms (%.2f tok/s), mean %.2f ms (%.2f tok/s), min %.2f ms; cpu %.2f "
               "ms/step; vs depth %d: median %.3f, mean %.3f, cpu %.3f; kv %.1f MiB; same bits %s\n",
               rc_kv_dtype_name(r->kv), r->depth, med * 1e3, 1.0 / med, mean * 1e3, 1.0 / mean, r->step_s[0] * 1e3,
               cpu * 1e3, depths[0], med0 / med, mean0 / mean, cpu0 / cpu, rc_qwen2_kv_bytes(r->m) / 1048576.0,
               r->same ? "yes" : "NO");
    }
    for (int d = nd - 1; d >= 0; d--) rc_qwen2_close(runs[d].m), free(runs[d].step_s); /* runs[0] last: the others
                                                                                          borrow its weights */
    free(ids);
    free(logits);
    rc_exec_close(ex); /* after the decoders that borrow it */
    rc_blob_close(b);
    return 0;
}
