/* bench.c - `make bench`: speed of the hot paths, each checked BITWISE against the scalar path
 * before it is timed. Prints machine (CPU model), compiler, flags, then:
 *   read bandwidth (STREAM-like integer sum over 1 GiB with the widest loads, 1 and 2 threads);
 *   nf4 matvec 1536x1536, 8960x1536, 1536x8960: GB/s of weight traffic (codes + absmax), both
 *     cache-resident (one matrix) and streamed from memory (copies cycled past the caches);
 *   decode tok/s and prefill tok/s (512 rows) on the synthetic 1.5B nf4 blob, 1 and 2 threads;
 *   bge-base encode of one 128-token block (ms); one recall rebuild (pooler over 256 injected
 *     rows + a forward of [SP 32][injected 256][window 512] = 800 rows) (ms).
 * usage: bench [blob] [--quick] [--kernels-only | --models-only | --micro | --prefill-micro] (blob default build/synth/r1-1.5b-nf4.blob; made by `make synth`).
 * RECALL_BENCH_PATHS=avx2,avx512 restricts the SIMD paths timed. */
#include "bench_util.h"
#include "bert.h"
#include "blob.h"
#include "nf4.h"
#include "pool.h"
#include "pooler.h"
#include "qwen2.h"
#include "simd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_FLAGS
#define BENCH_FLAGS "?"
#endif

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static rc_exec *exec_num(rc_simd_path p, int threads, int numerics) {
    rc_exec_opts o = {.threads = threads, .simd = rc_simd_name(p), .numerics = numerics};
    rc_exec *e = NULL;
    recall_err err = {0};
    if (rc_exec_open(&o, &e, &err)) die("exec", &err);
    return e;
}

static rc_exec *exec_for(rc_simd_path p, int threads) { return exec_num(p, threads, RC_NUMERICS_EXACT); }

static int same_bits(const float *a, const float *b, size_t n, const char *what) {
    if (!memcmp(a, b, n * sizeof(float))) return 1;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4)) {
            uint32_t x, y;
            memcpy(&x, a + i, 4);
            memcpy(&y, b + i, 4);
            fprintf(stderr, "bench: %s differs from scalar at %zu: 0x%08x vs 0x%08x\n", what, i, x, y);
            break;
        }
    return 0;
}

static int path_wanted(rc_simd_path p) {
    const char *env = getenv("RECALL_BENCH_PATHS");
    if (p == RC_SIMD_SCALAR || !rc_simd_available(p)) return 0;
    return !env || strstr(env, rc_simd_name(p)) != NULL;
}

static void machine(void) {
    char line[512], model[256] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    int ncpu = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && model[0] == '?') {
            const char *c = strchr(line, ':');
            if (c) snprintf(model, sizeof model, "%s", c + 2);
            model[strcspn(model, "\n")] = 0;
        }
        if (!strncmp(line, "processor", 9)) ncpu++;
    }
    if (f) fclose(f);
    printf("machine : %s, %d logical CPUs\n", model, ncpu);
    printf("compiler: %s\n", __VERSION__);
    printf("flags   : %s\n", BENCH_FLAGS);
    printf("paths   :");
    for (int p = 0; p < RC_SIMD_COUNT; p++)
        if (rc_simd_available((rc_simd_path)p)) printf(" %s", rc_simd_name((rc_simd_path)p));
    printf("\n\n");
}

/* ---- read bandwidth: the array summed as 64-bit integers with 4 independent accumulators of the
 * widest vectors the CPU has, split over threads. (The canonical sumsq is one dependent FMA chain:
 * it measured 18 GB/s on one core where these loads reach 30, so it was no bandwidth yardstick.) ---- */

typedef struct {
    const rc_exec *e;
    const float *x;
    size_t per;
    uint64_t out[RC_MAX_THREADS];
} bw_job;

/* One source; on x86-64 gcc/clang build it for AVX-512, AVX2 and baseline and pick the widest the
 * CPU runs (target_clones: a 64-byte vector becomes one zmm, two ymm or four xmm loads). */
typedef uint64_t u64x8 __attribute__((vector_size(64), aligned(8)));
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static uint64_t sum_wide(const void *p, size_t bytes) {
    const u64x8 *v = p;
    u64x8 a = {0}, b = a, c = a, d = a;
    for (size_t i = 0; i + 4 <= bytes / 64; i += 4) {
        a += v[i];
        b += v[i + 1];
        c += v[i + 2];
        d += v[i + 3];
    }
    a += b + c + d;
    uint64_t r = 0;
    for (int l = 0; l < 8; l++) r += a[l];
    return r;
}

static const char *bw_loads(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? "AVX-512 loads" : __builtin_cpu_supports("avx2") ? "AVX2 loads" : "SSE2 loads";
#else
    return "64-byte vectors";
#endif
}

static void bw_piece(void *ctx, int64_t b, int64_t e, int worker) {
    bw_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->out[worker] += sum_wide(j->x + (size_t)i * j->per, j->per * sizeof(float));
}

static double read_bw(rc_exec *e, const float *x, size_t n) {
    bw_job j = {e, x, 1 << 16, {0}};
    int64_t pieces = (int64_t)(n / j.per);
    rc_pool_for(e->pool, pieces, 1, bw_piece, &j); /* warm */
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = bench_now_s();
        rc_pool_for(e->pool, pieces, 1, bw_piece, &j);
        double dt = bench_now_s() - t0;
        if (dt < best) best = dt;
    }
    return (double)pieces * (double)j.per * 4.0 / best / 1e9;
}

/* ---- nf4 matvec ---- */

/* Each row's "% of bw" divides by a read bandwidth measured right before it at the same thread
 * count: this host's speed drifts by up to 30 % from one minute to the next, so a bandwidth taken
 * once at the start is no yardstick for a matvec timed minutes later. Both are best of 5 passes. */
static void nf4_matvec(void) {
    static const int shapes[3][2] = {{1536, 1536}, {8960, 1536}, {1536, 8960}};
    const size_t big = (size_t)1 << 28; /* 1 GiB of floats */
    float *arr = malloc(big * sizeof(float));
    if (!arr) die("out of memory", NULL);
    for (size_t i = 0; i < big; i++) arr[i] = (float)(i & 1023) * 0.001f;
    rc_exec *ebw[3] = {NULL, exec_for(RC_SIMD_SCALAR, 1), exec_for(RC_SIMD_SCALAR, 2)}; /* for their pools */
    printf("read bandwidth (integer sum over 1 GiB, %s): %.1f GB/s 1 thread, %.1f GB/s 2 threads\n\n", bw_loads(),
           read_bw(ebw[1], arr, big), read_bw(ebw[2], arr, big));
    printf("nf4 matvec (weights = codes + absmax; 'mem' = copies cycled through 512 MiB, best of 5 passes;\n"
           "'cache' = one matrix; 'bw' = read bandwidth measured just before, same threads)\n");
    printf("%-12s %-7s %3s %10s %8s %10s %8s %8s %8s\n", "shape", "path", "thr", "mem us", "mem GB/s", "cache us",
           "cache GB/s", "bw GB/s", "% of bw");
    for (int s = 0; s < 3; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1];
        const size_t n = (size_t)(rows * cols), wbytes = n / 2 + n / 64 * 4;
        const int copies = (int)((512u << 20) / wbytes) + 1;
        uint8_t *codes = malloc(n / 2 * (size_t)copies);
        float *absmax = malloc(n / 64 * sizeof(float) * (size_t)copies);
        float *x = malloc((size_t)cols * sizeof(float)), *y0 = malloc((size_t)rows * 4), *y = malloc((size_t)rows * 4);
        if (!codes || !absmax || !x || !y0 || !y) die("out of memory", NULL);
        uint64_t st = 99;
        for (size_t i = 0; i < n / 2 * (size_t)copies; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            codes[i] = (uint8_t)(st >> 56);
        }
        for (size_t i = 0; i < n / 64 * (size_t)copies; i++) absmax[i] = 0.01f + (float)(i % 97) * 0.001f;
        for (int64_t i = 0; i < cols; i++) x[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
        rc_mat w = {RC_DT_NF4, codes, absmax, rows, cols};
        rc_exec *es = exec_for(RC_SIMD_SCALAR, 1);
        rc_exec_matmul(es, &w, NULL, x, (size_t)cols, 1, y0, (size_t)rows);
        rc_exec_close(es);
        for (int p = 1; p < RC_SIMD_COUNT; p++) {
            if (!path_wanted((rc_simd_path)p)) continue;
            for (int th = 1; th <= 2; th++) {
                rc_exec *e = exec_for((rc_simd_path)p, th);
                rc_exec_matmul(e, &w, NULL, x, (size_t)cols, 1, y, (size_t)rows);
                if (!same_bits(y, y0, (size_t)rows, "nf4 matvec")) exit(1);
                const double bw = read_bw(ebw[th], arr, big);
                /* streamed: each call a different copy; one pass = every copy once */
                double tm = 1e30;
                for (int pass = 0; pass < 5; pass++) {
                    double t0 = bench_now_s();
                    for (int r = 0; r < copies; r++) {
                        rc_mat wc = {RC_DT_NF4, codes + (size_t)r * (n / 2), absmax + (size_t)r * (n / 64), rows, cols};
                        rc_exec_matmul(e, &wc, NULL, x, (size_t)cols, 1, y, (size_t)rows);
                    }
                    const double t = (bench_now_s() - t0) / copies;
                    if (t < tm) tm = t;
                }
                double t0 = bench_now_s();
                for (int r = 0; r < 50; r++) rc_exec_matmul(e, &w, NULL, x, (size_t)cols, 1, y, (size_t)rows);
                double tc = (bench_now_s() - t0) / 50;
                char shape[32];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
                printf("%-12s %-7s %3d %10.1f %8.1f %10.1f %8.1f %8.1f %7.0f%%\n", shape, e->k.name, th, tm * 1e6,
                       (double)wbytes / tm / 1e9, tc * 1e6, (double)wbytes / tc / 1e9, bw,
                       100.0 * ((double)wbytes / tm / 1e9) / bw);
                fflush(stdout);
                rc_exec_close(e);
            }
        }
        free(codes);
        free(absmax);
        free(x);
        free(y0);
        free(y);
    }
    rc_exec_close(ebw[1]);
    rc_exec_close(ebw[2]);
    free(arr);
    printf("\n");
}

/* ---- micro-benchmark (--micro): the matmul kernel alone, 1 thread, min of N calls (thread CPU time) ----
 * nf4 8960x1536 and 1536x8960 at nt = 1 (decode), 4, 8, 32 (prefill chunks), and a bf16 32768x1536 matvec
 * (lm_head-like, 100 MB: streamed), and an f32 3072x768 matmul of 128 inputs (bge-base ffn). RECALL_MICRO_NT=1,16,64 picks other nt. Every path's output is first compared bitwise with the
 * scalar path. Prints weights/ns (rows*cols / time) and GFLOP/s (2*rows*cols*nt / time). */

/* CPU time of this thread: on a shared machine, time spent descheduled does not count */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void micro_one(const char *label, const rc_mat *w, int nt, int reps) {
    const size_t rows = (size_t)w->rows, cols = (size_t)w->cols;
    float *X = malloc(cols * (size_t)nt * sizeof(float)), *bias = malloc(rows * sizeof(float));
    float *y0 = malloc(rows * (size_t)nt * sizeof(float)), *y = malloc(rows * (size_t)nt * sizeof(float));
    if (!X || !bias || !y0 || !y) die("out of memory", NULL);
    for (size_t i = 0; i < cols * (size_t)nt; i++) X[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
    for (size_t i = 0; i < rows; i++) bias[i] = (float)(i % 13) * 0.01f;
    rc_kernels ks, k;
    recall_err err = {0};
    if (rc_simd_select("scalar", &ks, &err)) die("simd", &err);
    ks.matmul(w, bias, X, cols, nt, y0, rows, 0, (int64_t)rows, NULL);
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        if (rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &err)) die("simd", &err);
        float *scratch = k.matmul_scratch ? aligned_alloc(64, k.matmul_scratch * sizeof(float)) : NULL;
        memset(y, 0, rows * (size_t)nt * sizeof(float));
        k.matmul(w, bias, X, cols, nt, y, rows, 0, (int64_t)rows, scratch);
        if (!same_bits(y, y0, rows * (size_t)nt, label)) exit(1);
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_now();
            k.matmul(w, bias, X, cols, nt, y, rows, 0, (int64_t)rows, scratch);
            double dt = cpu_now() - t0;
            if (dt < best) best = dt;
        }
        printf("%-22s nt=%-3d %-7s %9.1f us %7.2f weights/ns %7.1f GFLOP/s\n", label, nt, k.name, best * 1e6,
               (double)(rows * cols) / best * 1e-9, 2.0 * (double)(rows * cols) * nt / best * 1e-9);
        free(scratch);
    }
    free(X);
    free(bias);
    free(y0);
    free(y);
}

/* nf4 8960x1536 matvec streamed from memory: each call a different one of 32 copies (220 MB),
 * mean thread CPU time per call (decode reads every weight once per token, from DRAM), with the
 * kernel's scratch as the engine passes it. */
static void micro_stream(void) {
    const int64_t rows = 8960, cols = 1536;
    const size_t n = (size_t)(rows * cols), copies = 32;
    uint8_t *codes = malloc(n / 2 * copies);
    float *absmax = malloc(n / 64 * copies * sizeof(float)), *x = malloc((size_t)cols * sizeof(float));
    float *y0 = malloc((size_t)rows * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
    if (!codes || !absmax || !x || !y0 || !y) die("out of memory", NULL);
    uint64_t st = 11;
    for (size_t i = 0; i < n / 2 * copies; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (uint8_t)(st >> 56);
    }
    for (size_t i = 0; i < n / 64 * copies; i++) absmax[i] = 0.01f + (float)(i % 97) * 0.001f;
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
    rc_kernels ks, k;
    recall_err err = {0};
    if (rc_simd_select("scalar", &ks, &err)) die("simd", &err);
    rc_mat w0 = {RC_DT_NF4, codes, absmax, rows, cols};
    ks.matmul(&w0, NULL, x, (size_t)cols, 1, y0, (size_t)rows, 0, rows, NULL);
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        if (rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &err)) die("simd", &err);
        float *scratch = k.matmul_scratch ? aligned_alloc(64, k.matmul_scratch * sizeof(float)) : NULL;
        k.matmul(&w0, NULL, x, (size_t)cols, 1, y, (size_t)rows, 0, rows, scratch);
        if (!same_bits(y, y0, (size_t)rows, "nf4 streamed")) exit(1);
        double tot = 0.0;
        for (size_t c = 1; c < copies * 2; c++) {
            rc_mat wc = {RC_DT_NF4, codes + (c % copies) * (n / 2), absmax + (c % copies) * (n / 64), rows, cols};
            double t0 = cpu_now();
            k.matmul(&wc, NULL, x, (size_t)cols, 1, y, (size_t)rows, 0, rows, scratch);
            tot += cpu_now() - t0;
        }
        free(scratch);
        const double per = tot / (double)(copies * 2 - 1);
        printf("%-22s nt=1   %-7s %9.1f us %7.2f weights/ns %7.1f GB/s (codes + absmax)\n", "nf4 8960x1536 DRAM",
               k.name, per * 1e6, (double)n / per * 1e-9, (double)(n / 2 + n / 16) / per * 1e-9);
    }
    free(codes);
    free(absmax);
    free(x);
    free(y0);
    free(y);
}

static void micro(void) {
    micro_stream();
    const int64_t rows = 8960, cols = 1536;
    const size_t n = (size_t)(rows * cols);
    uint8_t *codes = malloc(n / 2);
    float *absmax = malloc(n / 64 * sizeof(float));
    const size_t bn = (size_t)32768 * 1536;
    uint16_t *bf = malloc(bn * sizeof(uint16_t));
    if (!codes || !absmax || !bf) die("out of memory", NULL);
    uint64_t st = 7;
    for (size_t i = 0; i < n / 2; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (uint8_t)(st >> 56);
    }
    for (size_t i = 0; i < n / 64; i++) absmax[i] = 0.01f + (float)(i % 97) * 0.001f;
    for (size_t i = 0; i < bn; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        bf[i] = (uint16_t)(0x3c00 + ((st >> 40) & 0x7ff) - ((st >> 60) & 1) * 0x8000u); /* |v| ~ 2^-7..2^-3, both signs */
    }
    rc_mat w = {RC_DT_NF4, codes, absmax, rows, cols};
    int nts[16] = {1, 4, 8, 32}, nnt = 4;
    const char *env = getenv("RECALL_MICRO_NT"); /* e.g. "1,16,64" */
    if (env && *env) {
        nnt = 0;
        for (const char *c = env; *c && nnt < 16; c = strchr(c, ',') ? strchr(c, ',') + 1 : c + strlen(c)) {
            int v = atoi(c);
            if (v > 0 && v <= 512) nts[nnt++] = v;
        }
    }
    for (int i = 0; i < nnt; i++) micro_one("nf4 8960x1536", &w, nts[i], nts[i] == 1 ? 40 : nts[i] >= 32 ? 4 : 10);
    rc_mat wd = {RC_DT_NF4, codes, absmax, 1536, 8960}; /* the same codes as a down_proj shape */
    for (int i = 0; i < nnt; i++) micro_one("nf4 1536x8960", &wd, nts[i], nts[i] == 1 ? 40 : nts[i] >= 32 ? 4 : 10);
    rc_mat wb = {RC_DT_BF16, bf, NULL, 32768, 1536};
    micro_one("bf16 32768x1536", &wb, 1, 10);
    /* bge-base ffn shape, f32 weights, one 128-token block (the weights: any 9.4 MB of floats) */
    float *wf = malloc((size_t)3072 * 768 * sizeof(float));
    if (!wf) die("out of memory", NULL);
    for (size_t i = 0; i < (size_t)3072 * 768; i++) wf[i] = (float)((i * 2654435761u) % 2001) * 1e-4f - 0.1f;
    rc_mat wff = {RC_DT_F32, wf, NULL, 3072, 768};
    micro_one("f32 3072x768", &wff, 128, 4);
    free(wf);
    free(codes);
    free(absmax);
    free(bf);
}

/* ---- model benchmarks on the synthetic blob ---- */

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of n values (sorts a copy); a shared VM's decode has 2x spikes, so the mean alone
 * mixes the engine with the neighbours */
static double median(const double *v, int n) {
    double c[64];
    memcpy(c, v, (size_t)n * sizeof *v);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    return n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

static double fma_peak(rc_simd_path p);
static double mac_peak(rc_simd_path p);

/* ---- peaks: what the model rows are measured against ----
 * Per core: the fp32 FMA peak (12 register chains of vfmadd, GFLOP/s = 2 x FMAs) and the int8 MAC
 * peak of the q8 kernels' instruction (12 chains of vpdpbusd: 64 MACs per zmm, 32 per ymm with
 * AVX-VNNI; GMAC/s), each the best of 5 by thread CPU time, and both run on every thread at once
 * (the 2-thread figure is what 2 threads can do together). Then the streaming read bandwidth. */
typedef struct {
    rc_simd_path path;
    int mac; /* 0: fp32 FMA, 1: int8 MAC */
    double out[RC_MAX_THREADS];
} peak_job;

static void peak_piece(void *ctx, int64_t b, int64_t e, int worker) {
    peak_job *j = ctx;
    (void)b;
    (void)e;
    j->out[worker] = j->mac ? mac_peak(j->path) : fma_peak(j->path);
}

/* the sum over threads of each thread's peak, all running together */
static double peak_threads(rc_simd_path p, int mac, int threads) {
    rc_exec *e = exec_for(RC_SIMD_SCALAR, threads);
    peak_job j = {p, mac, {0}};
    rc_pool_for(e->pool, threads, 1, peak_piece, &j);
    double s = 0.0;
    for (int t = 0; t < threads; t++) s += j.out[t];
    rc_exec_close(e);
    return s;
}

typedef struct {
    double fma[RC_SIMD_COUNT][3], mac[RC_SIMD_COUNT][3]; /* [path][threads 1, 2] */
    double bw[3];                                       /* GB/s at 1, 2 threads */
} peaks;

static void measure_peaks(peaks *pk) {
    memset(pk, 0, sizeof *pk);
    const size_t big = (size_t)1 << 28; /* 1 GiB of floats */
    float *arr = malloc(big * sizeof(float));
    if (!arr) die("out of memory", NULL);
    for (size_t i = 0; i < big; i++) arr[i] = (float)(i & 1023) * 0.001f;
    for (int th = 1; th <= 2; th++) {
        rc_exec *e = exec_for(RC_SIMD_SCALAR, th);
        pk->bw[th] = read_bw(e, arr, big);
        rc_exec_close(e);
    }
    free(arr);
    printf("peaks (each the best of 5, every thread running at once; the read bandwidth as in the nf4 table):\n");
    printf("  streaming read (%s): %.1f GB/s 1 thread, %.1f GB/s 2 threads\n", bw_loads(), pk->bw[1], pk->bw[2]);
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        rc_kernels k;
        recall_err err = {0};
        if (rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &err)) die("simd", &err);
        for (int th = 1; th <= 2; th++) {
            pk->fma[p][th] = peak_threads((rc_simd_path)p, 0, th);
            pk->mac[p][th] = peak_threads((rc_simd_path)p, 1, th);
        }
        printf("  %-7s fp32 FMA %7.1f / %7.1f GFLOP/s (1 / 2 threads); int8 MAC (%s) %7.1f / %7.1f GMAC/s\n", k.name,
               pk->fma[p][1], pk->fma[p][2], k.q8_name, pk->mac[p][1], pk->mac[p][2]);
    }
    printf("\n");
}

/* Multiply-adds of a forward of n rows from position 0 at the config's shapes: the seven layer
 * matrices and attention (q.k and p.v over the positions each row sees); lm_head for `logits` rows. */
static double forward_macs(const rc_qwen2_config *c, int n, int logits) {
    const double H = c->hidden, QD = (double)c->heads * c->head_dim, KVD = (double)c->kv_heads * c->head_dim;
    const double layer = H * QD * 2 + H * KVD * 2 + 3 * H * c->ffn;
    const double attn = 2.0 * c->heads * c->head_dim * ((double)n * (n + 1) / 2);
    return c->layers * (layer * n + attn) + (double)logits * c->vocab * H;
}

/* Bytes a decode step at position pos reads: the layer weights as stored (nf4 codes + absmax, or the
 * q8 packed form), lm_head as stored, the K and V rows of every layer. */
static double decode_bytes(const rc_blob *b, const rc_qwen2 *m, int pos) {
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    size_t q8b;
    double secs, w = 0.0;
    rc_qwen2_q8_stats(m, &q8b, &secs);
    if (q8b) w = (double)q8b;
    else
        for (size_t i = 0; i < rc_blob_n_tensors(b); i++) {
            const rc_tensor *t = rc_blob_tensor_at(b, i);
            if (!strncmp(t->name, "qwen2.model.layers.", 19) && t->ndim == 2) w += (double)t->nbytes;
        }
    const rc_tensor *lm = rc_blob_find(b, "qwen2.lm_head.weight");
    if (!lm) lm = rc_blob_find(b, "qwen2.model.embed_tokens.weight");
    return w + (lm ? (double)lm->nbytes : 0.0) + 2.0 * c->layers * (pos + 1) * c->kv_heads * c->head_dim * 4.0;
}

/* What the model benchmark's rows share: the blob, the ids it feeds, the scalar references every
 * row must equal, the peaks it reports against. */
typedef struct {
    rc_blob *b;
    int quick, NP, ND, V, H;
    int32_t *ids;
    float *ref[2], *got; /* scalar logits of 4 prefill rows, exact [0] and q8 [1]; scratch */
    rc_qwen2_config cfg;
    double pf_macs;
    peaks pk;
} model_ctx;

static rc_blob *open_bench_blob(const char *path) {
    rc_blob *b = NULL;
    recall_err err = {0};
    /* RECALL_BENCH_LOAD=huge: the blob copied into THP-advised anonymous memory (RC_OPEN_HUGEPAGES)
     * instead of the file mapping; on this VM the kernel's DAMON reclaim keeps deactivating and
     * refaulting the mapped file pages (decode spikes of 2x), which anonymous memory avoids. */
    const char *load = getenv("RECALL_BENCH_LOAD");
    const int huge = load && !strcmp(load, "huge");
    double t_open = bench_now_s();
    if (rc_blob_open(path, huge ? RC_OPEN_HUGEPAGES : 0, &b, &err)) {
        fprintf(stderr, "bench: %s\n  (the synthetic 1.5B blob is made by `make synth`: ~3.6 GB of inputs, 2.4 GB blob)\n",
                err.msg);
        exit(1);
    }
    printf("blob    : %s, %s (open %.2f s)\n", path,
           huge ? "copied into huge-page-advised memory (RECALL_BENCH_LOAD=huge)" : "file mapping", bench_now_s() - t_open);
    return b;
}

/* The scalar reference for the equality checks: 4 prefill rows per numerics profile. */
static void scalar_refs(model_ctx *c) {
    recall_err err = {0};
    for (int nu = 0; nu < 2; nu++) {
        rc_exec *es = exec_num(RC_SIMD_SCALAR, 2, nu ? RC_NUMERICS_Q8 : RC_NUMERICS_EXACT);
        rc_qwen2 *ms = NULL;
        if (rc_qwen2_open_ex(c->b, 8, es, &ms, &err)) die("qwen2", &err);
        c->cfg = *rc_qwen2_cfg(ms);
        c->V = c->cfg.vocab;
        c->H = c->cfg.hidden;
        c->ref[nu] = malloc((size_t)4 * c->V * 4);
        if (!c->got) c->got = malloc((size_t)4 * c->V * 4);
        rc_qwen2_fwd f = {.ids = c->ids, .n = 4, .logits_all = c->ref[nu]};
        if (rc_qwen2_forward(ms, &f, &err)) die("qwen2 forward", &err);
        rc_qwen2_close(ms);
        rc_exec_close(es);
    }
}

/* The same 4 rows, prefill and decode, must be the scalar reference's bits. */
static void check_rows(model_ctx *c, rc_qwen2 *m, int nu) {
    recall_err err = {0};
    rc_qwen2_fwd f = {.ids = c->ids, .n = 4, .logits_all = c->got};
    if (rc_qwen2_forward(m, &f, &err)) die("qwen2 forward", &err);
    if (!same_bits(c->got, c->ref[nu], (size_t)4 * c->V, "prefill logits")) exit(1);
    rc_qwen2_crop(m, 0, &err);
    for (int t = 0; t < 4; t++) {
        rc_qwen2_fwd d = {.ids = c->ids + t, .n = 1, .logits_last = c->got + (size_t)t * c->V};
        if (rc_qwen2_forward(m, &d, &err)) die("qwen2 decode", &err);
    }
    if (!same_bits(c->got, c->ref[nu], (size_t)4 * c->V, "decode logits")) exit(1);
    rc_qwen2_crop(m, 0, &err);
}

/* Prefill tok/s, median of 3 (the host drifts, see nf4_matvec); with `timed` 0 the cache is only
 * filled (0 returned). */
static double time_prefill(model_ctx *c, rc_qwen2 *m, int timed) {
    recall_err err = {0};
    if (!timed) {
        rc_qwen2_fwd pf = {.ids = c->ids, .n = c->NP}; /* fill the cache untimed */
        if (rc_qwen2_forward(m, &pf, &err)) die("prefill", &err);
        return 0.0;
    }
    double tp[3];
    for (int r = 0; r < 3; r++) {
        rc_qwen2_crop(m, 0, &err);
        double t0 = bench_now_s();
        rc_qwen2_fwd pf = {.ids = c->ids, .n = c->NP, .logits_last = c->got};
        if (rc_qwen2_forward(m, &pf, &err)) die("prefill", &err);
        tp[r] = bench_now_s() - t0;
    }
    return c->NP / median(tp, 3);
}

/* One row of the qwen2 table: path p, numerics nu, th threads. */
static void qwen2_row(model_ctx *c, int p, int nu, int th) {
    recall_err err = {0};
    rc_exec *e = exec_num((rc_simd_path)p, th, nu ? RC_NUMERICS_Q8 : RC_NUMERICS_EXACT);
    rc_qwen2 *m = NULL;
    if (rc_qwen2_open_ex(c->b, c->NP + 1 + c->ND, e, &m, &err)) die("qwen2", &err);
    check_rows(c, m, nu);
    const double pre = time_prefill(c, m, !c->quick || th == 2);
    { /* one untimed step: it grows the KV cache past the prefill's 512 rows (a copy, once) */
        rc_qwen2_fwd d = {.ids = c->ids + c->NP, .n = 1, .logits_last = c->got};
        if (rc_qwen2_forward(m, &d, &err)) die("decode", &err);
    }
    double step[64], total = 0.0;
    for (int t = 0; t < c->ND; t++) {
        rc_qwen2_fwd d = {.ids = c->ids + c->NP + 1 + t, .n = 1, .logits_last = c->got};
        double t0 = bench_now_s();
        if (rc_qwen2_forward(m, &d, &err)) die("decode", &err);
        step[t] = bench_now_s() - t0;
        total += step[t];
    }
    const double dt = total / c->ND, med = median(step, c->ND);
    const double mb = decode_bytes(c->b, m, c->NP + c->ND / 2) / 1e6;
    const double peak = nu ? c->pk.mac[p][th] : c->pk.fma[p][th] / 2.0; /* multiply-adds per second */
    printf("%-7s %3d %-8s %12.2f %12.1f %10.1f %9.1f %5.0f%% %14.1f %6.1f%%\n", e->k.name, th, nu ? "q8" : "exact",
           1.0 / dt, dt * 1e3, med * 1e3, mb, 100.0 * mb / 1e3 / dt / c->pk.bw[th], pre,
           pre > 0 && peak > 0 ? 100.0 * c->pf_macs / c->NP * pre / (peak * 1e9) : 0.0);
    fflush(stdout);
    rc_qwen2_close(m);
    rc_exec_close(e);
}

static void qwen2_table(model_ctx *c) {
    /* the whole forward's multiply-adds: prefill = 512 rows from 0 and the last row's logits */
    c->pf_macs = forward_macs(&c->cfg, c->NP, 1);
    const rc_tensor *lm = rc_blob_find(c->b, "qwen2.lm_head.weight");
    printf("qwen2 1.5B-shape nf4 (lm_head %s): decode = 1 new row at position 513.. (logits of the row;\n"
           "one untimed step at 512 first, it grows the KV cache), prefill = 512 rows from position 0 (logits of the last row), median of 3\n"
           "decode MB = weights as the profile stores them + lm_head + the KV rows read per token; %% bw = MB x tok/s / the\n"
           "streaming read at those threads; %% peak = the whole prefill's multiply-adds (%.3g per 512 rows) per second against\n"
           "the fp32 FMA peak (exact) or the int8 MAC peak (q8) at those threads\n",
           rc_dtype_name(lm ? lm->dtype : RC_DT_NF4), c->pf_macs);
    printf("%-7s %3s %-8s %12s %12s %10s %9s %6s %14s %7s\n", "path", "thr", "numerics", "decode tok/s", "ms/token",
           "median ms", "decode MB", "% bw", "prefill tok/s", "% peak");
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        for (int nu = 0; nu < 2; nu++)
            for (int th = 1; th <= 2; th++) qwen2_row(c, p, nu, th);
    }
}

/* One recall rebuild: the pooler over `inj` evicted rows, then the forward of `rows` rows whose
 * first n_sp are the gist. Returns its seconds. */
static double time_rebuild(model_ctx *c, rc_exec *e, const float *past, int inj, float *in, int rows) {
    recall_err err = {0};
    rc_pooler *pl = NULL;
    rc_qwen2 *m = NULL;
    if (rc_pooler_open_ex(c->b, e, &pl, &err) || rc_qwen2_open_ex(c->b, rows + 1, e, &m, &err)) die("open", &err);
    float *sp = malloc((size_t)rc_pooler_cfg(pl)->n_sp * c->H * 4);
    int32_t bos = 151646;
    rc_qwen2_fwd f0 = {.ids = &bos, .n = 1};
    if (rc_qwen2_forward(m, &f0, &err)) die("bos", &err);
    double t0 = bench_now_s();
    if (rc_pooler_run(pl, past, inj, sp, &err)) die("pooler", &err);
    memcpy(in, sp, (size_t)rc_pooler_cfg(pl)->n_sp * c->H * 4);
    rc_qwen2_fwd fr = {.embeds = in, .n = rows, .logits_last = c->got};
    if (rc_qwen2_forward(m, &fr, &err)) die("rebuild", &err);
    const double reb = bench_now_s() - t0;
    free(sp);
    rc_pooler_close(pl);
    rc_qwen2_close(m);
    return reb;
}

/* bge-base encode of one 128-token block (checked against scalar) and one recall rebuild. */
static void bge_rebuild_table(model_ctx *c) {
    recall_err err = {0};
    printf("\nbge-base encode (128 tokens) and one recall rebuild (pooler L=256 + 800-row forward)\n");
    printf("%-7s %3s %-8s %10s %12s\n", "path", "thr", "numerics", "bge ms", "rebuild ms");
    int32_t bids[128];
    for (int i = 0; i < 128; i++) bids[i] = (int32_t)((i * 131 + 7) % 30000);
    float emb_ref[768], emb[768];
    {
        rc_exec *e = exec_for(RC_SIMD_SCALAR, 2);
        rc_bert *mb = NULL;
        if (rc_bert_open_ex(c->b, e, &mb, &err)) die("bert", &err);
        if (rc_bert_cfg(mb)->hidden > 768) die("bert hidden > 768", NULL);
        if (rc_bert_embed(mb, bids, 128, emb_ref, &err)) die("bert", &err);
        rc_bert_close(mb);
        rc_exec_close(e);
    }
    const int inj = 256, rows = 800;
    float *past = malloc((size_t)inj * c->H * 4), *in = malloc((size_t)rows * c->H * 4);
    for (size_t i = 0; i < (size_t)inj * c->H; i++) past[i] = (float)((i * 2654435761u) % 2001) * 1e-4f - 0.1f;
    for (size_t i = 0; i < (size_t)rows * c->H; i++) in[i] = (float)((i * 40503u) % 2001) * 1e-4f - 0.1f;
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        for (int nu = 0; nu < 2; nu++)
        for (int th = 1; th <= 2; th++) {
            rc_exec *e = exec_num((rc_simd_path)p, th, nu ? RC_NUMERICS_Q8 : RC_NUMERICS_EXACT);
            rc_bert *mb = NULL;
            if (rc_bert_open_ex(c->b, e, &mb, &err)) die("bert", &err);
            if (rc_bert_embed(mb, bids, 128, emb, &err)) die("bert", &err);
            if (!same_bits(emb, emb_ref, (size_t)rc_bert_cfg(mb)->hidden, "bge embedding")) exit(1);
            double t0 = bench_now_s();
            const int reps = 3;
            for (int r = 0; r < reps; r++)
                if (rc_bert_embed(mb, bids, 128, emb, &err)) die("bert", &err);
            double bge = (bench_now_s() - t0) / reps;
            rc_bert_close(mb);
            const double reb = !c->quick || th == 2 ? time_rebuild(c, e, past, inj, in, rows) : 0.0;
            printf("%-7s %3d %-8s %10.1f %12.0f\n", e->k.name, th, nu ? "q8" : "exact", bge * 1e3, reb * 1e3);
            fflush(stdout);
            rc_exec_close(e);
        }
    }
    free(past);
    free(in);
}

static void model_bench(const char *path, int quick) {
    model_ctx c = {0};
    measure_peaks(&c.pk);
    c.b = open_bench_blob(path);
    c.quick = quick;
    c.NP = 512;
    c.ND = quick ? 8 : 32;
    c.ids = malloc((size_t)(c.NP + 1 + c.ND) * sizeof *c.ids);
    for (int i = 0; i < c.NP + 1 + c.ND; i++) c.ids[i] = (int32_t)((i * 7919 + 13) % 150000);
    scalar_refs(&c);
    qwen2_table(&c);
    bge_rebuild_table(&c);
    free(c.ref[0]);
    free(c.ref[1]);
    free(c.got);
    free(c.ids);
    rc_blob_close(c.b);
}

/* ---- prefill micro-benchmark (--prefill-micro): the matmul at prefill input counts against the FMA peak ----
 * The FMA peak of one core: 12 independent chains of register-only FMAs (AVX-512: 16 lanes, AVX2: 8),
 * best of 5 by thread CPU time. Then the real prefill shapes (nf4 qwen2 1.5B: 1536x1536, 256x1536,
 * 8960x1536, 1536x8960; f32 bge-base: 768x768, 3072x768, 768x3072) at nt = 64, 128, 512 inputs
 * (RECALL_MICRO_NT overrides), 1 thread, min of 3 calls, GFLOP/s and % of the path's peak. The output
 * is first compared bitwise with the same path called with 8 inputs at a time (the register-tile
 * kernel, which tests/simd_selftest.c checks against scalar; the scalar path itself would take
 * minutes here). */
#if defined(__x86_64__)
#include <immintrin.h>
#define PEAK_ITERS 20000000L
/* 12 named accumulators (an array would live on the stack through the asm barrier) */
#define PEAK_LOOP(V, FMA)                                                                                              \
    V a0 = init, a1 = init, a2 = init, a3 = init, a4 = init, a5 = init, a6 = init, a7 = init, a8 = init, a9 = init,    \
      a10 = init, a11 = init;                                                                                          \
    const double t0 = cpu_now();                                                                                       \
    for (long i = 0; i < PEAK_ITERS; i++) {                                                                            \
        a0 = FMA(a0, m, c), a1 = FMA(a1, m, c), a2 = FMA(a2, m, c), a3 = FMA(a3, m, c), a4 = FMA(a4, m, c);            \
        a5 = FMA(a5, m, c), a6 = FMA(a6, m, c), a7 = FMA(a7, m, c), a8 = FMA(a8, m, c), a9 = FMA(a9, m, c);            \
        a10 = FMA(a10, m, c), a11 = FMA(a11, m, c);                                                                    \
        __asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),         \
                "+v"(a9), "+v"(a10), "+v"(a11));                                                                       \
    }                                                                                                                  \
    const double dt = cpu_now() - t0;                                                                                  \
    V sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;                                               \
    float s0;                                                                                                          \
    memcpy(&s0, &sum, 4);                                                                                              \
    if (s0 == 12345.0f) printf(" ");
__attribute__((target("avx512f,fma"))) static double peak_avx512(void) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f), init = _mm512_set1_ps(1.0f);
    PEAK_LOOP(__m512, _mm512_fmadd_ps)
    return 2.0 * 16 * 12 * (double)PEAK_ITERS / dt * 1e-9;
}
__attribute__((target("avx2,fma"))) static double peak_avx2(void) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f), init = _mm256_set1_ps(1.0f);
    PEAK_LOOP(__m256, _mm256_fmadd_ps)
    return 2.0 * 8 * 12 * (double)PEAK_ITERS / dt * 1e-9;
}
static double fma_peak(rc_simd_path p) {
    double best = 0.0;
    for (int r = 0; r < 5; r++) {
        const double g = p == RC_SIMD_AVX512 ? peak_avx512() : p == RC_SIMD_AVX2 ? peak_avx2() : 0.0;
        if (g > best) best = g;
    }
    return best;
}
/* int8 MACs: 12 chains of vpdpbusd (the q8 kernels' instruction), 4 MACs per int32 lane */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
/* MAC_PEAK(name, target, vector type, lanes x 4 MACs, set1 of bytes, set1 of int32 lanes, dpbusd) */
#define MAC_PEAK(NAME, TARGET, V, MACS, SET8, SET32, DP)                                                           \
    __attribute__((target(TARGET))) static double NAME(void) {                                                     \
        const V m = SET8(3), c = SET8(-2), init = SET32(1);                                                        \
        PEAK_LOOP(V, DP)                                                                                           \
        return MACS * 12 * (double)PEAK_ITERS / dt * 1e-9;                                                         \
    }
MAC_PEAK(mac_avx512vnni, "avx512f,avx512vnni", __m512i, 64.0, _mm512_set1_epi8, _mm512_set1_epi32, _mm512_dpbusd_epi32)
MAC_PEAK(mac_avxvnni, "avx2,avxvnni", __m256i, 32.0, _mm256_set1_epi8, _mm256_set1_epi32, _mm256_dpbusd_avx_epi32)
#endif
static double mac_peak(rc_simd_path p) {
    rc_kernels k;
    recall_err err = {0};
    if (rc_simd_select(rc_simd_name(p), &k, &err)) return 0.0;
    double best = 0.0;
    for (int r = 0; r < 5; r++) {
        double g = 0.0;
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
        if (!strcmp(k.q8_name, "avx512-vnni")) g = mac_avx512vnni();
        else if (!strcmp(k.q8_name, "avx-vnni")) g = mac_avxvnni();
#endif
        if (g > best) best = g;
    }
    return best;
}
#else
static double fma_peak(rc_simd_path p) {
    (void)p;
    return 0.0;
}
static double mac_peak(rc_simd_path p) {
    (void)p;
    return 0.0;
}
#endif

static void prefill_micro(void) {
    static const struct {
        rc_dtype dt;
        int64_t rows, cols;
        const char *what;
    } shapes[] = {
        {RC_DT_NF4, 1536, 1536, "nf4 q/o 1536x1536"},  {RC_DT_NF4, 256, 1536, "nf4 k/v 256x1536"},
        {RC_DT_NF4, 8960, 1536, "nf4 gate/up 8960x1536"}, {RC_DT_NF4, 1536, 8960, "nf4 down 1536x8960"},
        {RC_DT_F32, 768, 768, "f32 bge 768x768"},       {RC_DT_F32, 3072, 768, "f32 bge 3072x768"},
        {RC_DT_F32, 768, 3072, "f32 bge 768x3072"},
    };
    int nts[16] = {64, 128, 512}, nnt = 3;
    const char *env = getenv("RECALL_MICRO_NT");
    if (env && *env) {
        nnt = 0;
        for (const char *c = env; *c && nnt < 16; c = strchr(c, ',') ? strchr(c, ',') + 1 : c + strlen(c)) {
            int v = atoi(c);
            if (v > 0 && v <= 512) nts[nnt++] = v;
        }
    }
    const size_t maxw = (size_t)8960 * 1536;
    uint8_t *codes = malloc(maxw / 2);
    float *absmax = malloc(maxw / 64 * sizeof(float)), *wf = malloc((size_t)3072 * 768 * sizeof(float));
    float *X = malloc(maxw / 1536 * 512 * sizeof(float)); /* 512 inputs of up to 8960 columns */
    float *y0 = malloc((size_t)8960 * 512 * sizeof(float)), *y = malloc((size_t)8960 * 512 * sizeof(float));
    float *bias = malloc(8960 * sizeof(float));
    if (!codes || !absmax || !wf || !X || !y0 || !y || !bias) die("out of memory", NULL);
    uint64_t st = 7;
    for (size_t i = 0; i < maxw / 2; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (uint8_t)(st >> 56);
    }
    for (size_t i = 0; i < maxw / 64; i++) absmax[i] = 0.01f + (float)(i % 97) * 0.001f;
    for (size_t i = 0; i < (size_t)3072 * 768; i++) wf[i] = (float)((i * 2654435761u) % 2001) * 1e-4f - 0.1f;
    for (size_t i = 0; i < (size_t)8960 * 512; i++) X[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
    for (size_t i = 0; i < 8960; i++) bias[i] = (float)(i % 13) * 0.01f;
    for (int p = 1; p < RC_SIMD_COUNT; p++) {
        if (!path_wanted((rc_simd_path)p)) continue;
        rc_kernels k;
        recall_err err = {0};
        if (rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &err)) die("simd", &err);
        const double peak = fma_peak((rc_simd_path)p);
        printf("%-24s        %-7s FMA peak %7.1f GFLOP/s (12 register chains, best of 5)\n", "1 core", k.name, peak);
        float *scratch = k.matmul_scratch ? aligned_alloc(64, k.matmul_scratch * sizeof(float)) : NULL;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const rc_mat w = {shapes[s].dt, shapes[s].dt == RC_DT_NF4 ? (void *)codes : (void *)wf,
                              shapes[s].dt == RC_DT_NF4 ? absmax : NULL, shapes[s].rows, shapes[s].cols};
            const size_t rows = (size_t)w.rows, cols = (size_t)w.cols;
            for (int ni = 0; ni < nnt; ni++) {
                const int nt = nts[ni];
                for (int t = 0; t < nt; t += 8)
                    k.matmul(&w, bias, X + (size_t)t * cols, cols, nt - t < 8 ? nt - t : 8, y0 + (size_t)t * rows, rows,
                             0, (int64_t)rows, scratch);
                memset(y, 0, rows * (size_t)nt * sizeof(float));
                k.matmul(&w, bias, X, cols, nt, y, rows, 0, (int64_t)rows, scratch);
                if (!same_bits(y, y0, rows * (size_t)nt, shapes[s].what)) exit(1);
                double best = 1e30;
                for (int r = 0; r < 3; r++) {
                    const double t0 = cpu_now();
                    k.matmul(&w, bias, X, cols, nt, y, rows, 0, (int64_t)rows, scratch);
                    const double dt = cpu_now() - t0;
                    if (dt < best) best = dt;
                }
                const double gf = 2.0 * (double)(rows * cols) * nt / best * 1e-9;
                printf("%-24s nt=%-3d %-7s %9.1f us %7.1f GFLOP/s %5.1f %% of peak\n", shapes[s].what, nt, k.name,
                       best * 1e6, gf, peak > 0 ? 100.0 * gf / peak : 0.0);
                fflush(stdout);
            }
        }
        /* the q8 kernels at the nf4 shapes: GMAC/s against the int8 MAC peak (checked bitwise
         * against the same kernel fed 8 inputs at a time: a different tiling, no decoded panel) */
        const double mpeak = mac_peak((rc_simd_path)p);
        printf("%-24s        %-7s int8 MAC peak %7.1f GMAC/s (q8 kernels %s)\n", "1 core", k.name, mpeak, k.q8_name);
        for (size_t s = 0; s < 4; s++) {
            const rc_mat w = {RC_DT_NF4, codes, absmax, shapes[s].rows, shapes[s].cols};
            const size_t rows = (size_t)w.rows, cols = (size_t)w.cols;
            rc_q8mat pw;
            rc_q8act xa = {0}, x8 = {0};
            recall_err qe = {0};
            if (rc_q8_alloc(&w, &pw, &qe) || rc_q8act_reserve(&xa, 512, (int64_t)cols, &qe) ||
                rc_q8act_reserve(&x8, 8, (int64_t)cols, &qe))
                die("q8", &qe);
            rc_exec_q8_pack(NULL, &w, &pw);
            for (int t = 0; t < 512; t++) k.q8_quant(X + (size_t)t * cols, &xa, t);
            for (int ni = 0; ni < nnt; ni++) {
                const int nt = nts[ni];
                for (int t = 0; t < nt; t += 8) {
                    const int n8 = nt - t < 8 ? nt - t : 8;
                    for (int u = 0; u < n8; u++) k.q8_quant(X + (size_t)(t + u) * cols, &x8, u);
                    k.q8_matmul(&pw, bias, &x8, n8, y0 + (size_t)t * rows, rows, 0, (int64_t)rows, NULL);
                }
                memset(y, 0, rows * (size_t)nt * sizeof(float));
                k.q8_matmul(&pw, bias, &xa, nt, y, rows, 0, (int64_t)rows, scratch);
                if (!same_bits(y, y0, rows * (size_t)nt, shapes[s].what)) exit(1);
                double best = 1e30;
                for (int r = 0; r < 3; r++) {
                    const double t0 = cpu_now();
                    k.q8_matmul(&pw, bias, &xa, nt, y, rows, 0, (int64_t)rows, scratch);
                    const double dt = cpu_now() - t0;
                    if (dt < best) best = dt;
                }
                const double gm = (double)(rows * cols) * nt / best * 1e-9;
                printf("%-24s nt=%-3d %-7s %9.1f us %7.1f GMAC/s %5.1f %% of int8 peak (q8)\n", shapes[s].what, nt,
                       k.name, best * 1e6, gm, mpeak > 0 ? 100.0 * gm / mpeak : 0.0);
                fflush(stdout);
            }
            rc_q8_free(&pw);
            rc_q8act_free(&xa);
            rc_q8act_free(&x8);
        }
        free(scratch);
    }
    free(codes);
    free(absmax);
    free(wf);
    free(X);
    free(y0);
    free(y);
    free(bias);
}

int main(int argc, char **argv) {
    const char *path = "build/synth/r1-1.5b-nf4.blob";
    int quick = 0, models = 1, kernels = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--kernels-only")) models = 0;
        else if (!strcmp(argv[i], "--models-only")) kernels = 0;
        else if (!strcmp(argv[i], "--micro")) {
            micro();
            return 0;
        } else if (!strcmp(argv[i], "--prefill-micro")) {
            prefill_micro();
            return 0;
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench [blob] [--quick] [--kernels-only | --models-only | --micro | --prefill-micro]\n"
                   "  blob            the synthetic 1.5B nf4 blob (default %s; `make synth` makes it)\n"
                   "  --quick         8 decode steps instead of 32; prefill and the rebuild at 2 threads only\n"
                   "  --kernels-only  read bandwidth and the nf4 matvec table only\n"
                   "  --models-only   decode, prefill, bge-base and the recall rebuild only\n"
                   "  --micro         the matmul kernel alone, 1 thread (RECALL_MICRO_NT=1,16,64 picks input counts)\n"
                   "  --prefill-micro the FMA peak of one core, then the matmul at the real prefill shapes (nf4 qwen2,\n"
                   "                  f32 bge) at 64, 128, 512 inputs (RECALL_MICRO_NT overrides), 1 thread, %% of peak\n"
                   "environment: RECALL_BENCH_PATHS=avx2,avx512 restricts the SIMD paths timed;\n"
                   "  RECALL_BENCH_LOAD=huge copies the blob into huge-page-advised memory first\n"
                   "every timed kernel and model is first checked bitwise against the scalar path\n",
                   path);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "bench: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        } else path = argv[i];
    }
    machine();
    if (kernels) nf4_matvec();
    if (models) model_bench(path, quick);
    return 0;
}
