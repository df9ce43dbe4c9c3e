/* simd_selftest.c - kernel equivalence checks: every kernel of a SIMD path against the scalar
 * reference, BITWISE, on deterministic synthetic data (several magnitudes, odd sizes, tails,
 * row sub-ranges, strides, NaN-poisoned outputs so an unwritten or extra-written element shows).
 * Used by tests/test_simd.c (Criterion) and, built with -DRC_SELFTEST_MAIN, as a standalone
 * driver for targets without Criterion (the aarch64 cross build run under qemu):
 *   prints "N passed, N failed" and exits non-zero on any failure.
 * A failure prints the kernel, the case, the first differing index and both values as hex bits. */
#include "simd_selftest.h"

#include "lm_screen.h"
#include "nf4.h"
#include "ops.h"
#include "q8.h"
#include "simd.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef __wasi__ /* WASI (the browser build's self-test) has no page protection nor signals */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "lcg.h"

/* a float in +-[2^-6, 2^6) with a random mantissa: sums of these round in every lane */
static float next_f(lcg *g) {
    uint32_t u = next_u32(g);
    float m = 1.0f + (float)(u & 0xffffffu) / 16777216.0f;
    int e = (int)((u >> 24) % 13) - 6;
    float v = ldexpf(m, e);
    return (u >> 31) ? -v : v;
}

static void fill_f(lcg *g, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = next_f(g);
}

static void poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

typedef struct {
    const char *path;
    int passed, failed;
} tally;

static void check(tally *t, const char *kernel, const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (bits(got[i]) != bits(want[i])) {
            printf("FAIL %s %s [%s]: first difference at index %zu: got 0x%08x (%.9g) want 0x%08x (%.9g)\n", t->path,
                   kernel, what, i, bits(got[i]), (double)got[i], bits(want[i]), (double)want[i]);
            t->failed++;
            return;
        }
    }
    t->passed++;
}

static void check_dot(tally *t, const rc_kernels *k, lcg *g) {
    static const size_t ns[] = {0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 128, 255, 1541};
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        size_t n = ns[c];
        float *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
        fill_f(g, a, n);
        fill_f(g, b, n);
        char what[64];
        snprintf(what, sizeof what, "n=%zu", n);
        float got = k->dot_f32(a, b, n), want = rc_dot_f32(a, b, n);
        check(t, "dot_f32", what, &got, &want, 1);
        got = k->sumsq_f32(a, n);
        want = rc_sumsq_f32(a, n);
        check(t, "sumsq_f32", what, &got, &want, 1);
        free(a);
        free(b);
    }
}

/* A random weight matrix of dtype dt, [rows, cols] (nf4: rows*cols % 64 == 0). */
typedef struct {
    rc_mat m;
    void *data;
    float *absmax;
} test_mat;

static void make_mat(lcg *g, rc_dtype dt, int64_t rows, int64_t cols, test_mat *tm) {
    size_t n = (size_t)(rows * cols);
    memset(tm, 0, sizeof *tm);
    tm->m.dtype = dt;
    tm->m.rows = rows;
    tm->m.cols = cols;
    if (dt == RC_DT_F32) {
        float *w = malloc(n * sizeof *w);
        fill_f(g, w, n);
        tm->data = w;
    } else if (dt == RC_DT_BF16 || dt == RC_DT_F16) {
        uint16_t *w = malloc(n * sizeof *w);
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)next_u32(g);
            if (dt == RC_DT_BF16) h = (uint16_t)((h & 0x807f) | ((uint16_t)(121 + (h >> 8) % 12) << 7));
            else h = (uint16_t)((h & 0x83ff) | ((uint16_t)(10 + (h >> 10) % 10) << 10));
            w[i] = h;
        }
        tm->data = w;
    } else {
        uint8_t *c = malloc(n / 2);
        for (size_t i = 0; i < n / 2; i++) c[i] = (uint8_t)next_u32(g);
        const size_t nblk = (n + 63) / 64; /* absmax blocks of the flat matrix, the last one partial */
        tm->absmax = malloc(nblk * sizeof(float));
        for (size_t i = 0; i < nblk; i++) tm->absmax[i] = fabsf(next_f(g));
        if (n / 64 > 1) tm->absmax[1] = 0.0f; /* a zero block */
        tm->data = c;
        tm->m.absmax = tm->absmax;
    }
    tm->m.data = tm->data;
}

static void free_mat(test_mat *tm) {
    free(tm->data);
    free(tm->absmax);
}

/* one matmul case: rows 1..rows-2 (the rest of Y must stay NaN), with and without bias, against the
 * scalar reference and against nt separate single-input calls (batch invariance) */
static void check_matmul_case(tally *t, const rc_kernels *k, lcg *g, const rc_mat *w, int nt) {
    const size_t ldx = (size_t)w->cols + 3, ldy = (size_t)w->rows + 2;
    float *X = malloc((size_t)nt * ldx * sizeof(float)), *bias = malloc((size_t)w->rows * sizeof(float));
    float *Yg = malloc((size_t)nt * ldy * sizeof(float)), *Yw = malloc((size_t)nt * ldy * sizeof(float));
    float *Y1 = malloc((size_t)nt * ldy * sizeof(float));
    /* the kernel's scratch, poisoned: nothing it holds on entry may reach an output */
    const size_t ns = k->matmul_scratch;
    float *scratch = ns ? aligned_alloc(64, ns * sizeof(float)) : NULL;
    fill_f(g, X, (size_t)nt * ldx);
    fill_f(g, bias, (size_t)w->rows);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *b = with_bias ? bias : NULL;
        /* a row sub-range [r0, r1): the rest of Y must stay untouched (NaN) */
        int64_t r0 = w->rows > 2 ? 1 : 0, r1 = w->rows > 3 ? w->rows - 1 : w->rows;
        poison(Yg, (size_t)nt * ldy);
        poison(Yw, (size_t)nt * ldy);
        if (scratch) poison(scratch, ns);
        k->matmul(w, b, X, ldx, nt, Yg, ldy, r0, r1, scratch);
        for (int64_t r = r0; r < r1; r++) /* the reference: ops.h canonical dot per output */
            for (int tt = 0; tt < nt; tt++) {
                float d = rc_dot_row(w, r, X + (size_t)tt * ldx);
                Yw[(size_t)tt * ldy + (size_t)r] = b ? d + b[r] : d;
            }
        char what[96];
        snprintf(what, sizeof what, "%s %lldx%lld nt=%d bias=%d rows %lld..%lld", rc_dtype_name(w->dtype),
                 (long long)w->rows, (long long)w->cols, nt, with_bias, (long long)r0, (long long)r1);
        check(t, "matmul", what, Yg, Yw, (size_t)nt * ldy);
        /* batch invariance: the same outputs one input row at a time */
        poison(Y1, (size_t)nt * ldy);
        for (int tt = 0; tt < nt; tt++)
            k->matmul(w, b, X + (size_t)tt * ldx, ldx, 1, Y1 + (size_t)tt * ldy, ldy, r0, r1, scratch);
        check(t, "matmul batch-invariance", what, Y1, Yg, (size_t)nt * ldy);
        /* without scratch (a slower path where the kernel has one): the same bits */
        poison(Y1, (size_t)nt * ldy);
        k->matmul(w, b, X, ldx, nt, Y1, ldy, r0, r1, NULL);
        check(t, "matmul without scratch", what, Y1, Yg, (size_t)nt * ldy);
    }
    free(X);
    free(bias);
    free(Yg);
    free(Yw);
    free(Y1);
    free(scratch);
}

static void check_matmul(tally *t, const rc_kernels *k, lcg *g) {
    static const struct {
        rc_dtype dt;
        int64_t rows, cols;
    } shapes[] = {
        {RC_DT_F32, 5, 16},   {RC_DT_F32, 7, 37},   {RC_DT_F32, 33, 200},  {RC_DT_F32, 3, 1},
        {RC_DT_BF16, 6, 48},  {RC_DT_BF16, 9, 29},  {RC_DT_BF16, 17, 192}, {RC_DT_F16, 5, 33},
        {RC_DT_NF4, 7, 64},   {RC_DT_NF4, 4, 48},   {RC_DT_NF4, 8, 40},    {RC_DT_NF4, 19, 320},
        {RC_DT_NF4, 2, 1536},
        /* rows wide enough that the x86 kernels cut the rows into several L2 panels */
        {RC_DT_F32, 19, 8000},  {RC_DT_BF16, 13, 12352}, {RC_DT_NF4, 21, 43008},
    };
    static const int nts[] = {1, 2, 3, 4, 5, 8, 9, 13, 19};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        test_mat tm;
        make_mat(g, shapes[s].dt, shapes[s].rows, shapes[s].cols, &tm);
        const rc_mat *w = &tm.m;
        for (size_t ci = 0; ci < sizeof nts / sizeof nts[0]; ci++) check_matmul_case(t, k, g, w, nts[ci]);
        free_mat(&tm);
    }
    /* the x86 prefill kernels (nt >= 16): column blocks of 512 with and without a tail, panels of
     * 12 rows with 1-5 rows left (AVX-512 groups of 6 rows, AVX2 of 3), input tiles of 4 with 1-3
     * inputs left, nf4 rows that do not start a 16-block or a 64-block, fewer than 16 columns,
     * more inputs than one accumulator block (AVX-512 341, AVX2 682) */
    static const struct {
        rc_dtype dt;
        int64_t rows, cols;
        int nt;
    } prefill[] = {
        {RC_DT_F32, 29, 1100, 16}, {RC_DT_F32, 14, 48, 17},  {RC_DT_BF16, 10, 1030, 18}, {RC_DT_NF4, 17, 1088, 23},
        {RC_DT_NF4, 6, 1048, 16},  {RC_DT_NF4, 5, 64, 345}, {RC_DT_F32, 4, 7, 20},      {RC_DT_NF4, 13, 2048, 32},
        {RC_DT_BF16, 7, 512, 21}, {RC_DT_NF4, 11, 1040, 19}, {RC_DT_F32, 9, 768, 64},
    };
    for (size_t s = 0; s < sizeof prefill / sizeof prefill[0]; s++) {
        test_mat tm;
        make_mat(g, prefill[s].dt, prefill[s].rows, prefill[s].cols, &tm);
        check_matmul_case(t, k, g, &tm.m, prefill[s].nt);
        free_mat(&tm);
    }
}

#ifndef __wasi__
/* ---- operands between inaccessible pages ----
 * A guarded buffer: `bytes` of readable, writable memory with a PROT_NONE page right after its last
 * byte (at_end) or right before its first; touching one byte outside faults. The kernel calls in
 * check_matmul_guarded run under a SIGSEGV / SIGBUS handler that jumps back and counts a failure
 * (the only process-wide state of the self-test: the jump target of the one call in flight). */
typedef struct {
    void *map;
    size_t len;
    unsigned char *p; /* the usable bytes */
} guarded;

static int guarded_new(guarded *gb, size_t bytes, int at_end) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
    gb->len = body + 2 * pg;
    gb->map = mmap(NULL, gb->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gb->map == MAP_FAILED) return -1;
    unsigned char *m = gb->map;
    if (mprotect(m, pg, PROT_NONE) || mprotect(m + pg + body, pg, PROT_NONE)) return -1;
    gb->p = at_end ? m + pg + body - bytes : m + pg;
    return 0;
}

static void guarded_free(guarded *gb) { munmap(gb->map, gb->len); }

static sigjmp_buf fault_jump;
static void on_fault(int sig) { siglongjmp(fault_jump, sig); }

/* One guarded matmul: rows [r0, r1) of w (its other rows are not mapped: the bytes of rows
 * [r0, r1) sit against a guard page after (w_at_end) or before them, the nf4 absmax blocks of
 * those rows likewise), nt inputs of exactly cols floats each (guard after the last), the bias
 * and the outputs touched (guard after), the scratch (matmul_scratch floats, guard after). The
 * outputs must be the scalar reference's bits, everything else in Y untouched (NaN). */
static void guarded_case(tally *t, const rc_kernels *k, lcg *g, const test_mat *src, int nt, int64_t r0, int64_t r1,
                         int w_at_end, int with_scratch) {
    const rc_mat *w = &src->m;
    const size_t cols = (size_t)w->cols, ldx = cols, ldy = (size_t)w->rows + 2;
    char what[128];
    snprintf(what, sizeof what, "%s %lldx%zu nt=%d rows %lld..%lld, guard %s the rows%s", rc_dtype_name(w->dtype),
             (long long)w->rows, cols, nt, (long long)r0, (long long)r1, w_at_end ? "after" : "before",
             with_scratch ? "" : ", no scratch");
    guarded gw, ga = {0}, gx, gy, gbias, gs = {0};
    rc_mat m = *w;
    const size_t esz = w->dtype == RC_DT_NF4 ? 0 : rc_dtype_size(w->dtype);
    const size_t b0 = esz ? (size_t)r0 * cols * esz : (size_t)r0 * cols / 2; /* the rows' bytes [b0, b1) */
    const size_t b1 = esz ? (size_t)r1 * cols * esz : (size_t)r1 * cols / 2;
    const size_t ny = (size_t)(nt - 1) * ldy + (size_t)r1 - (size_t)r0; /* Y[t*ldy + r], r0 <= r < r1 */
    int ok = !guarded_new(&gw, b1 - b0, w_at_end) && !guarded_new(&gx, (size_t)nt * ldx * sizeof(float), 1) &&
             !guarded_new(&gy, ny * sizeof(float), 1) && !guarded_new(&gbias, (size_t)(r1 - r0) * sizeof(float), 1);
    if (ok && w->dtype == RC_DT_NF4) {
        const size_t a0 = (size_t)r0 * cols / 64, a1 = ((size_t)r1 * cols + 63) / 64;
        ok = !guarded_new(&ga, (a1 - a0) * sizeof(float), w_at_end);
        if (ok) {
            memcpy(ga.p, w->absmax + a0, (a1 - a0) * sizeof(float));
            m.absmax = (const float *)(const void *)ga.p - a0; /* blocks before a0 are not there */
        }
    }
    if (ok && with_scratch && k->matmul_scratch) ok = !guarded_new(&gs, k->matmul_scratch * sizeof(float), 1);
    if (!ok) {
        printf("FAIL %s matmul guarded [%s]: cannot map the guarded buffers\n", t->path, what);
        t->failed++;
        return;
    }
    memcpy(gw.p, (const unsigned char *)w->data + b0, b1 - b0);
    m.data = gw.p - b0; /* rows before r0 are not there */
    float *X = (float *)(void *)gx.p, *Y = (float *)(void *)gy.p - r0, *bias = (float *)(void *)gbias.p - r0;
    float *scratch = gs.map ? (float *)(void *)gs.p : NULL;
    fill_f(g, X, (size_t)nt * ldx);
    fill_f(g, bias + r0, (size_t)(r1 - r0));
    float *want = malloc(ny * sizeof(float));
    poison(want, ny);
    for (int64_t r = r0; r < r1; r++)
        for (int tt = 0; tt < nt; tt++)
            want[(size_t)tt * ldy + (size_t)(r - r0)] = rc_dot_row(&m, r, X + (size_t)tt * ldx) + bias[r];
    poison(Y + r0, ny);
    if (scratch) poison(scratch, k->matmul_scratch);
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    const int sig = sigsetjmp(fault_jump, 1);
    if (!sig) k->matmul(&m, bias, X, ldx, nt, Y, ldy, r0, r1, scratch);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    if (sig) {
        printf("FAIL %s matmul guarded [%s]: signal %d, an access outside the operands\n", t->path, what, sig);
        t->failed++;
    } else {
        check(t, "matmul guarded", what, Y + r0, want, ny);
    }
    free(want);
    guarded_free(&gw);
    if (ga.map) guarded_free(&ga);
    guarded_free(&gx);
    guarded_free(&gy);
    guarded_free(&gbias);
    if (gs.map) guarded_free(&gs);
}

/* Widths that are not multiples of 64 (and two that are) through every matmul path of the kernel
 * table: one input (decode matvec / row blocks), a few, and 16+ inputs with and without scratch
 * (the x86 prefill panels, whose nf4 decode handles a 64-block at a time only when the block is
 * whole), every row range end (so that each row in turn is the one against the guard). */
static void check_matmul_guarded(tally *t, const rc_kernels *k, lcg *g) {
    static const struct {
        rc_dtype dt;
        int64_t rows, cols;
    } shapes[] = {
        {RC_DT_NF4, 12, 80},  {RC_DT_NF4, 8, 48},    {RC_DT_NF4, 4, 16},   {RC_DT_NF4, 8, 112},  {RC_DT_NF4, 8, 144},
        {RC_DT_NF4, 6, 592},  {RC_DT_NF4, 10, 1040}, {RC_DT_NF4, 9, 1088}, {RC_DT_NF4, 4, 40},   {RC_DT_NF4, 6, 128},
        {RC_DT_F32, 7, 80},   {RC_DT_F32, 5, 37},    {RC_DT_F32, 6, 592},  {RC_DT_BF16, 7, 80},  {RC_DT_BF16, 5, 1040},
        {RC_DT_BF16, 4, 29},  {RC_DT_F16, 5, 48},
    };
    static const int nts[] = {1, 3, 16, 19};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        test_mat tm;
        make_mat(g, shapes[si].dt, shapes[si].rows, shapes[si].cols, &tm);
        for (size_t ni = 0; ni < sizeof nts / sizeof nts[0]; ni++)
            for (int64_t r1 = 1; r1 <= tm.m.rows; r1++)
                for (int at_end = 0; at_end < 2; at_end++) {
                    const int64_t r0 = at_end ? 0 : r1 - 1 - (r1 - 1) % 3; /* ranges of 1-3 rows, then from row 0 */
                    guarded_case(t, k, g, &tm, nts[ni], at_end ? (r1 > 2 ? 1 : 0) : r0, r1, at_end, 1);
                    if (nts[ni] >= 16 && r1 == tm.m.rows) guarded_case(t, k, g, &tm, nts[ni], 0, r1, at_end, 0);
                }
        free_mat(&tm);
    }
}
#else
/* wasm memory is one linear array without guard pages: an access outside the operands cannot
 * fault, so the guarded cases have nothing to catch there */
static void check_matmul_guarded(tally *t, const rc_kernels *k, lcg *g) {
    (void)t, (void)k, (void)g;
}
#endif

/* Attention over a binary16 K / V (the f16 KV cache), one (D, n) case: the kernels against the
 * references that widen each element exactly (rc_dot_f16, rc_axpy_f16), whole and split at a key. */
static void check_attn_f16_case(tally *t, const rc_kernels *k, lcg *g, size_t D, int n) {
    const size_t ld = D + 3;
    const int a = n / 3 + 1;
    float *q = malloc(D * sizeof(float)), *Kf = malloc((size_t)n * ld * sizeof(float));
    uint16_t *K = malloc((size_t)n * ld * sizeof(uint16_t));
    float *sg = malloc(((size_t)n + 1) * sizeof(float)), *sw = malloc(((size_t)n + 1) * sizeof(float));
    float *og = malloc((D + 1) * sizeof(float)), *ow = malloc((D + 1) * sizeof(float));
    fill_f(g, q, D);
    fill_f(g, Kf, (size_t)n * ld);
    for (size_t i = 0; i < (size_t)n * ld; i++) K[i] = rc_f32_to_f16(Kf[i]);
    const float scale = 0.08838834764831845f;
    char what[64];
    snprintf(what, sizeof what, "D=%zu n=%d", D, n);
    for (int split = 0; split < 2; split++) {
        const int a0 = split ? a : n; /* keys [0, a0) in one call, the rest in a second */
        poison(sg, (size_t)n + 1);
        poison(sw, (size_t)n + 1);
        k->attn_scores_f16(q, K, ld, a0, D, scale, sg);
        if (a0 < n) k->attn_scores_f16(q, K + (size_t)a0 * ld, ld, n - a0, D, scale, sg + a0);
        for (int j = 0; j < n; j++) sw[j] = rc_dot_f16(K + (size_t)j * ld, q, D) * scale;
        check(t, split ? "attn_scores_f16 split" : "attn_scores_f16", what, sg, sw, (size_t)n + 1);
        rc_softmax(sw, (size_t)n);
        poison(og, D + 1);
        poison(ow, D + 1);
        for (size_t i = 0; i < D; i++) og[i] = ow[i] = 0.0f; /* attn_wsum_f16 continues from out */
        k->attn_wsum_f16(sw, K, ld, a0, D, og);
        if (a0 < n) k->attn_wsum_f16(sw + a0, K + (size_t)a0 * ld, ld, n - a0, D, og);
        for (int j = 0; j < n; j++) rc_axpy_f16(sw[j], K + (size_t)j * ld, ow, D);
        check(t, split ? "attn_wsum_f16 split" : "attn_wsum_f16", what, og, ow, D + 1);
    }
    free(q);
    free(Kf);
    free(K);
    free(sg);
    free(sw);
    free(og);
    free(ow);
}

static void check_attn(tally *t, const rc_kernels *k, lcg *g) {
    static const size_t Ds[] = {1, 13, 16, 48, 64, 72, 96, 128, 192, 200, 248};
    static const int ns[] = {1, 2, 5, 33};
    for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const size_t D = Ds[di], ld = D + 5;
            const int n = ns[ni];
            float *q = malloc(D * sizeof(float)), *K = malloc((size_t)n * ld * sizeof(float));
            float *sg = malloc(((size_t)n + 1) * sizeof(float)), *sw = malloc(((size_t)n + 1) * sizeof(float));
            float *og = malloc((D + 1) * sizeof(float)), *ow = malloc((D + 1) * sizeof(float));
            fill_f(g, q, D);
            fill_f(g, K, (size_t)n * ld);
            poison(sg, (size_t)n + 1);
            poison(sw, (size_t)n + 1);
            const float scale = 0.08838834764831845f;
            k->attn_scores(q, K, ld, n, D, scale, sg);
            for (int j = 0; j < n; j++) sw[j] = rc_dot_f32(q, K + (size_t)j * ld, D) * scale;
            char what[64];
            snprintf(what, sizeof what, "D=%zu n=%d", D, n);
            check(t, "attn_scores", what, sg, sw, (size_t)n + 1);
            rc_softmax(sw, (size_t)n);
            poison(og, D + 1);
            poison(ow, D + 1);
            for (size_t i = 0; i < D; i++) og[i] = 0.0f; /* attn_wsum continues from out */
            k->attn_wsum(sw, K, ld, n, D, og);
            for (size_t i = 0; i < D; i++) ow[i] = 0.0f;
            for (int j = 0; j < n; j++) rc_axpy(sw[j], K + (size_t)j * ld, ow, D);
            check(t, "attn_wsum", what, og, ow, D + 1);
            /* the keys split at a: two calls in ascending order give the bits of one (prefill
             * attention walks the keys in tiles) */
            const int a = n / 3 + 1;
            poison(sg, (size_t)n + 1);
            k->attn_scores(q, K, ld, a, D, scale, sg);
            if (a < n) k->attn_scores(q, K + (size_t)a * ld, ld, n - a, D, scale, sg + a);
            for (int j = 0; j < n; j++) sw[j] = rc_dot_f32(q, K + (size_t)j * ld, D) * scale;
            check(t, "attn_scores split", what, sg, sw, (size_t)n + 1);
            rc_softmax(sw, (size_t)n);
            poison(og, D + 1);
            for (size_t i = 0; i < D; i++) og[i] = 0.0f;
            k->attn_wsum(sw, K, ld, a, D, og);
            if (a < n) k->attn_wsum(sw + a, K + (size_t)a * ld, ld, n - a, D, og);
            check(t, "attn_wsum split", what, og, ow, D + 1);
            check_attn_f16_case(t, k, g, D, n); /* the same case over an f16 cache */
            free(q);
            free(K);
            free(sg);
            free(sw);
            free(og);
            free(ow);
        }
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 -> f16 (the path's instruction: vcvtps2ph / vcvt_f16_f32) against the oracle
 * rc_f32_to_f16, bit for bit, on every value class: zeros, fp32 subnormals, the f16 subnormal range
 * and its rounding boundaries (2^-25 ties to 0), ties to even everywhere (the 13 dropped bits at
 * 0x1000 with the kept lsb 0 and 1) and around each of them, the largest f16 and the overflow
 * boundary 65520, infinities, quiet and signalling NaNs with payloads, both signs; then every
 * exponent with a spread of fractions, and random bit patterns. Odd lengths take the tails. */
static void check_f32_to_f16(tally *t, const rc_kernels *k, lcg *g) {
    static const uint32_t special[] = {
        0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x33000000u, 0x33000001u, 0x337fffffu, 0x33800000u,
        0x33c00000u, 0x34200000u, 0x34400000u, 0x387fc000u, 0x387fe000u, 0x387fffffu, 0x38800000u, 0x38801000u,
        0x38803000u, 0x3f800000u, 0x3f801000u, 0x3f802000u, 0x3f803000u, 0x3f800fffu, 0x3f801001u, 0x477fe000u,
        0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fbfffffu,
        0x7fc00000u, 0x7fc00001u, 0x7fd5a000u, 0x7fffffffu, 0x7fa02000u, 0x7f802000u, 0x3dcccccdu, 0x42f6e979u};
    enum { N = 4099 };
    uint32_t *u = malloc(N * sizeof *u);
    float *x = malloc(N * sizeof *x);
    uint16_t *hg = malloc((N + 1) * sizeof *hg), *hw = malloc((N + 1) * sizeof *hw);
    for (int batch = 0; batch < 16 + 256; batch++) {
        size_t n = 0;
        if (batch == 0) { /* the specials, both signs */
            for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
                u[n++] = special[i];
                u[n++] = special[i] | 0x80000000u;
            }
        } else if (batch < 16) { /* random bit patterns */
            for (; n < N; n++) u[n] = next_u32(g);
        } else { /* exponent e: fractions at and around the rounding point of the 13 dropped bits */
            static const uint32_t low[] = {0, 1, 0x7ff, 0xfff, 0x1000, 0x1001, 0x17ff, 0x1fff};
            const uint32_t e = (uint32_t)(batch - 16);
            for (; n + 16 <= N; n += 16)
                for (int j = 0; j < 16; j++) {
                    const uint32_t hi = next_u32(g) & 0x7fc000u, kept_lsb = (uint32_t)(j & 1) << 13;
                    u[n + (size_t)j] = ((uint32_t)(j >> 3) << 31) | (e << 23) | hi | kept_lsb | low[(j >> 1) & 7];
                }
        }
        for (size_t i = 0; i < n; i++) x[i] = from_bits(u[i]);
        for (size_t i = 0; i < n; i++) hw[i] = rc_f32_to_f16(x[i]);
        for (size_t len = n; len + 5 > n && len > 0; len -= 3) { /* the tails of every path */
            for (size_t i = 0; i <= n; i++) hg[i] = 0xdeadu;
            k->f32_to_f16(x, hg, len);
            size_t bad = n + 1;
            for (size_t i = 0; i <= n && bad > n; i++)
                if (hg[i] != (i < len ? hw[i] : 0xdeadu)) bad = i;
            if (bad <= n) {
                printf("FAIL %s f32_to_f16 [batch %d, n=%zu]: index %zu: input 0x%08x got 0x%04x want 0x%04x\n",
                       t->path, batch, len, bad, bad < n ? u[bad] : 0u, hg[bad], bad < len ? hw[bad] : 0xdeadu);
                t->failed++;
            } else {
                t->passed++;
            }
        }
    }
    free(u);
    free(x);
    free(hg);
    free(hw);
}

static void check_dequant(tally *t, const rc_kernels *k, lcg *g) {
    test_mat tm;
    make_mat(g, RC_DT_NF4, 1, 640, &tm);
    static const size_t starts[] = {0, 1, 3, 16, 17, 64, 100};
    static const size_t lens[] = {0, 1, 15, 16, 47, 64, 200, 500};
    float *og = malloc(641 * sizeof(float)), *ow = malloc(641 * sizeof(float));
    for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t st = starts[si], n = lens[li];
            if (st + n > 640) continue;
            poison(og, 641);
            poison(ow, 641);
            k->nf4_dequant((const uint8_t *)tm.data, tm.absmax, st, n, og);
            rc_nf4_dequant((const uint8_t *)tm.data, tm.absmax, st, n, ow);
            char what[64];
            snprintf(what, sizeof what, "start=%zu n=%zu", st, n);
            check(t, "nf4_dequant", what, og, ow, 641);
        }
    free(og);
    free(ow);
    free_mat(&tm);
}

/* sincos: the pooler's arguments (float)pos * rc_expf(j * c) for positions up to 70k, edge
 * values (NaN, +-inf, +-0, quadrant boundaries, the 2^30 cut to the scalar lanes, huge), random
 * bit patterns and floats of the usual range, at lengths that leave every tail. */
static void check_sincos(tally *t, const rc_kernels *k, lcg *g) {
    static const float edge[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 0.78539819f, -0.78539819f, 1.5707964f,
                                 -1.5707964f, 3.1415927f, -3.1415927f, 4.712389f, 6.2831855f, 1073741824.0f,
                                 1073741760.0f, -1073741824.0f, 1048576.0f, 3e38f, -3e38f, 1e-30f, -1e-40f, 65535.0f,
                                 70000.5f, 0.5f, 2.3561945f};
    static const size_t lens[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 33, 100, 768, 1000};
    const size_t ne = sizeof edge / sizeof edge[0], nmax = 1000 + 1;
    float *x = malloc(nmax * sizeof(float)), *sg = malloc(nmax * sizeof(float)), *cg = malloc(nmax * sizeof(float));
    float *sw = malloc(nmax * sizeof(float)), *cw = malloc(nmax * sizeof(float));
    const float cdiv = (float)(-9.210340371976184 / 1536.0);
    for (int round = 0; round < 4; round++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const size_t n = lens[li];
            const float pos = (float)(next_u32(g) % 70000u);
            for (size_t i = 0; i < n; i++) {
                if (round == 0) x[i] = edge[i % ne];
                else if (round == 1) {
                    uint32_t b = next_u32(g);
                    memcpy(&x[i], &b, 4);
                } else if (round == 2) x[i] = next_f(g) * 64.0f;
                else x[i] = pos * rc_expf((float)(2 * (i % 768)) * cdiv);
            }
            char what[64];
            snprintf(what, sizeof what, "round=%d n=%zu", round, n);
            poison(sg, n + 1);
            poison(cg, n + 1);
            poison(sw, n + 1);
            poison(cw, n + 1);
            k->sincos(x, sg, cg, n);
            rc_sincos_f32(x, sw, cw, n);
            check(t, "sincos (sin)", what, sg, sw, n + 1);
            check(t, "sincos (cos)", what, cg, cw, n + 1);
        }
    free(x);
    free(sg);
    free(cg);
    free(sw);
    free(cw);
}

/* silu_mul / gelu / softmax: edge values of rc_expf and rc_erff (NaN, +-inf, +-0, overflow and
 * underflow bounds, erf interval boundaries and the |x| >= 4 cut), random floats of every
 * magnitude (raw bit patterns) and of the usual range, at lengths that leave every tail. */
static void check_act(tally *t, const rc_kernels *k, lcg *g) {
    static const float edge[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 88.72283935546875f, 88.7228469848632812f,
                                 -88.72283935546875f, -103.97208404541015625f, -103.9720916748046875f, 103.98f,
                                 3.9199998f, -3.92f, 4.0f, -4.0f, 3.9999998f, 3.75f, 3.7499998f, 3.5f, 0.5f,
                                 0.49999997f, 1.0f, 0.99999994f, -1.5f, 2.5f, 3.0f, 1e-30f, -1e-40f, 5.656854f,
                                 -5.656854f, 1e6f, -1e6f, 150.0f, -150.0f, 0.34657359f, -0.34657359f};
    static const size_t lens[] = {0, 1, 7, 8, 15, 16, 17, 33, 100, 1000};
    const size_t ne = sizeof edge / sizeof edge[0], nmax = 1000 + 1;
    float *x = malloc(nmax * sizeof(float)), *u = malloc(nmax * sizeof(float));
    float *got = malloc(nmax * sizeof(float)), *want = malloc(nmax * sizeof(float));
    for (int round = 0; round < 3; round++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const size_t n = lens[li];
            for (size_t i = 0; i < n; i++) {
                if (round == 0) x[i] = edge[i % ne] * (i / ne % 2 ? 0.70710677f : 1.0f);
                else if (round == 1) {
                    uint32_t b = next_u32(g);
                    memcpy(&x[i], &b, 4);
                } else x[i] = next_f(g) * 0.5f;
                u[i] = next_f(g);
            }
            char what[64];
            snprintf(what, sizeof what, "round=%d n=%zu", round, n);
            memcpy(got, x, n * sizeof(float));
            memcpy(want, x, n * sizeof(float));
            got[n] = want[n] = NAN;
            k->silu_mul(got, u, n);
            rc_silu_mul_f32(want, u, n);
            check(t, "silu_mul", what, got, want, n + 1);
            memcpy(got, x, n * sizeof(float));
            memcpy(want, x, n * sizeof(float));
            k->gelu(got, n);
            rc_gelu_f32(want, n);
            check(t, "gelu", what, got, want, n + 1);
            if (n > 0 && round != 1) { /* attention scores: finite */
                memcpy(got, x, n * sizeof(float));
                for (size_t i = 0; i < n; i++)
                    if (!isfinite(got[i])) got[i] = (float)i * -0.25f;
                memcpy(want, got, n * sizeof(float));
                k->softmax(got, n);
                rc_softmax(want, n);
                check(t, "softmax", what, got, want, n + 1);
            }
        }
    free(x);
    free(u);
    free(got);
    free(want);
}

/* screen_i8: the lm_head screening approximation, on widths of 1 .. 40 groups (every tail of the
 * 8- and 16-group blocks), zero scales (zero groups), negative products, and row sub-ranges; the
 * output row after the range stays NaN. The codes q and p take every byte value, -128 included
 * (every path computes it as -128; the blob's loader refuses such a code, lm_screen.c, and the
 * quantiser never makes one, but a kernel must not depend on that): uniform bytes, and rows of
 * only -128 / -127 / 127 against groups of p all -128 / -127 / 127 (the largest pair sums). */
static void check_screen(tally *t, const rc_kernels *k, lcg *g) {
    static const size_t groups[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 33, 40};
    const int64_t rows = 37;
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        const size_t G = groups[gi], H = G * RC_LM_SCREEN_GROUP;
        int8_t *Q = malloc((size_t)rows * H), *p = malloc(H);
        float *S = malloc((size_t)rows * G * sizeof(float)), *tt = malloc(G * sizeof(float));
        float *got = malloc((size_t)(rows + 1) * sizeof(float)), *want = malloc((size_t)(rows + 1) * sizeof(float));
        int seen[256] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (size_t i = 0; i < H; i++) {
                const uint32_t u = next_u32(g);
                int v = (int)(int8_t)(uint8_t)(u >> 8); /* every byte value */
                if (r == 4) v = -128;
                if (r == 5) v = (i % 3 == 0) ? -127 : -128;
                if (r == 6) v = 127;
                if (r == 7) v = (u & 1) ? -128 : 127;
                Q[(size_t)r * H + i] = (int8_t)v;
                seen[(uint8_t)v] = 1;
            }
        int pseen[256] = {0};
        const uint32_t off = next_u32(g) >> 24;
        for (size_t i = 0; i < H; i++) {
            p[i] = (int8_t)(uint8_t)(i * 167u + off); /* any 256 consecutive columns: every byte value */
            if (G > 2 && i < 3 * RC_LM_SCREEN_GROUP) /* groups of p all -128, all -127, all 127 */
                p[i] = (int8_t)(i < RC_LM_SCREEN_GROUP ? -128 : i < 2 * RC_LM_SCREEN_GROUP ? -127 : 127);
            pseen[(uint8_t)p[i]] = 1;
        }
        int nseen = 0, npseen = 0;
        for (int v = 0; v < 256; v++) nseen += seen[v], npseen += pseen[v];
        if (G >= 8 && (nseen != 256 || npseen != 256)) {
            printf("FAIL %s screen_i8 [groups=%zu]: only %d / %d of the 256 bytes drawn in q / p\n", t->path, G, nseen,
                   npseen);
            t->failed++;
        }
        for (size_t i = 0; i < (size_t)rows * G; i++) S[i] = (next_u32(g) % 11 == 0) ? 0.0f : fabsf(next_f(g));
        for (size_t i = 0; i < G; i++) tt[i] = fabsf(next_f(g)) * 1e-3f;
        static const int64_t r0s[] = {0, 3, 36};
        for (size_t ri = 0; ri < sizeof r0s / sizeof r0s[0]; ri++) {
            const int64_t r0 = r0s[ri], r1 = ri == 2 ? rows : rows - 2;
            poison(got, (size_t)rows + 1);
            poison(want, (size_t)rows + 1);
            k->screen_i8(Q, S, H, p, tt, r0, r1, got);
            rc_screen_i8_ref(Q, S, H, p, tt, r0, r1, want);
            char what[64];
            snprintf(what, sizeof what, "groups=%zu rows=[%lld,%lld)", G, (long long)r0, (long long)r1);
            check(t, "screen_i8", what, got, want, (size_t)rows + 1);
        }
        free(Q);
        free(p);
        free(S);
        free(tt);
        free(got);
        free(want);
    }
}

/* screen_norms: the two double sums of squares of a row against rc_screen_norms_ref, bitwise, on
 * 1 .. 40 groups, codes of every byte value, zero scales, weights of every magnitude. */
static void check_screen_norms(tally *t, const rc_kernels *k, lcg *g) {
    static const size_t groups[] = {1, 2, 3, 7, 8, 17, 24, 40};
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
        for (int round = 0; round < 3; round++) {
            const size_t G = groups[gi], H = G * RC_LM_SCREEN_GROUP;
            float *w = malloc(H * sizeof(float)), *sc = malloc(G * sizeof(float));
            int8_t *q = malloc(H);
            for (size_t i = 0; i < H; i++) {
                w[i] = round == 1 ? ldexpf(next_f(g), (int)(next_u32(g) % 200) - 100) : next_f(g);
                q[i] = (int8_t)(uint8_t)(next_u32(g) >> 8);
            }
            for (size_t i = 0; i < G; i++) sc[i] = (round == 2 && i % 3 == 0) ? 0.0f : fabsf(next_f(g)) / 127.0f;
            double got[3] = {NAN, NAN, NAN}, want[3] = {NAN, NAN, NAN};
            k->screen_norms(w, q, sc, H, got);
            rc_screen_norms_ref(w, q, sc, H, want);
            char what[64];
            snprintf(what, sizeof what, "groups=%zu round=%d", G, round);
            if (memcmp(got, want, sizeof got)) {
                printf("FAIL %s screen_norms [%s]: got %a %a %a want %a %a %a\n", t->path, what, got[0], got[1], got[2],
                       want[0], want[1], want[2]);
                t->failed++;
            } else {
                t->passed++;
            }
            free(w);
            free(sc);
            free(q);
        }
}

/* ---- the q8 profile (simd/q8.h) ---- */

/* bitwise equality of byte / int arrays */
static void check_bytes(tally *t, const char *kernel, const char *what, const void *got, const void *want, size_t n) {
    const unsigned char *a = got, *b = want;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("FAIL %s %s [%s]: first difference at byte %zu: got 0x%02x want 0x%02x\n", t->path, kernel, what, i,
                   a[i], b[i]);
            t->failed++;
            return;
        }
    t->passed++;
}

/* An input row for q8: blocks of several kinds, by block index: random magnitudes, all zero, tiny
 * (below 2^-96), an inf, a NaN, ties (x * s lands on k + 0.5), one huge peak among small values,
 * subnormals beside a tiny maximum, a peak whose rest is tiny, two equal maxima, a maximum of
 * exactly 1.5 x the second (no peak) and one just above it (a peak). */
static void fill_q8_row(lcg *g, float *x, size_t n, int special) {
    fill_f(g, x, n);
    if (!special) return;
    for (size_t b = 0; b < n / 32; b++) {
        float *xb = x + 32 * b;
        switch ((b + (size_t)special) % 12) {
        case 1: memset(xb, 0, 32 * sizeof *xb); break;
        case 2: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -110); break;
        case 3: xb[next_u32(g) % 32] = (next_u32(g) & 1) ? INFINITY : -INFINITY; break;
        case 4: xb[next_u32(g) % 32] = NAN; break;
        case 5: /* a = 127: s = 1, so x.5 values are exact ties */
            for (int i = 0; i < 32; i++) xb[i] = (float)((int)(next_u32(g) % 253) - 126) + 0.5f;
            xb[0] = 127.0f;
            break;
        case 6: for (int i = 0; i < 32; i++) xb[i] *= 1e-3f; xb[next_u32(g) % 32] = 3000.0f; break;
        case 7: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -130); xb[5] = 1e-30f; break;
        case 8: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -120); xb[next_u32(g) % 32] = -2.5f; break;
        case 9: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -8); xb[17] = -5.0f; xb[3] = 5.0f; break;
        case 10: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -8); xb[30] = 3.0f; xb[9] = -2.0f; break;
        case 11: for (int i = 0; i < 32; i++) xb[i] = ldexpf(next_f(g), -8); xb[30] = -3.0000002f; xb[9] = 2.0f; break;
        default: break;
        }
    }
}

/* the rows of two quantised-activation buffers, every field the kernels read */
static void check_q8act(tally *t, const char *what, const rc_q8act *g, const rc_q8act *w, int rows) {
    const size_t K = (size_t)w->cols, nb = (size_t)w->nb;
    check_bytes(t, "q8_quant q", what, g->q, w->q, (size_t)rows * K);
    check_bytes(t, "q8_quant d", what, g->d, w->d, (size_t)rows * nb * sizeof(float));
    check_bytes(t, "q8_quant corr", what, g->corr, w->corr, (size_t)rows * nb * sizeof(int32_t));
    check_bytes(t, "q8_quant npk", what, g->npk, w->npk, (size_t)rows * sizeof(int32_t));
    for (int r = 0; r < rows; r++) {
        check_bytes(t, "q8_quant pk_c", what, g->pk_c + (size_t)r * nb, w->pk_c + (size_t)r * nb,
                    (size_t)w->npk[r] * sizeof(int32_t));
        check_bytes(t, "q8_quant pk_x", what, g->pk_x + (size_t)r * nb, w->pk_x + (size_t)r * nb,
                    (size_t)w->npk[r] * sizeof(float));
    }
}

/* poisons every buffer of a (so that a field the kernel forgets shows) */
static void poison_q8act(rc_q8act *a) {
    memset(a->q, 0x5a, a->qcap);
    memset(a->corr, 0x5a, a->bcap * sizeof(int32_t));
    memset(a->pk_c, 0x5a, a->bcap * sizeof(int32_t));
    memset(a->npk, 0x5a, a->rcap * sizeof(int32_t));
    poison(a->d, a->bcap);
    poison(a->pk_x, a->bcap);
}

static void check_q8_quant(tally *t, const rc_kernels *k, lcg *g) {
    static const size_t ns[] = {32, 64, 96, 288, 1536};
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++)
        for (int special = 0; special < 3; special++) {
            const size_t n = ns[c];
            const int rows = 3;
            float *x = malloc((size_t)rows * n * sizeof *x);
            rc_q8act ag = {0}, aw = {0};
            recall_err err = {0};
            if (rc_q8act_reserve(&ag, rows, (int64_t)n, &err) || rc_q8act_reserve(&aw, rows, (int64_t)n, &err)) {
                printf("FAIL %s q8_quant setup: %s\n", t->path, err.msg);
                t->failed++;
                return;
            }
            poison_q8act(&ag);
            poison_q8act(&aw);
            for (int r = 0; r < rows; r++) {
                fill_q8_row(g, x + (size_t)r * n, n, special ? special + r : 0);
                k->q8_quant(x + (size_t)r * n, &ag, r);
                rc_q8_quant_row_ref(x + (size_t)r * n, &aw, r);
            }
            char what[64];
            snprintf(what, sizeof what, "n=%zu special=%d", n, special);
            check_q8act(t, what, &ag, &aw, rows);
            free(x);
            rc_q8act_free(&ag);
            rc_q8act_free(&aw);
        }
}

/* one q8 matmul case: the packed kernel against the oracle from the unpacked weight (the pack is
 * checked with it), rows [r0, r1) only (the rest of Y stays NaN), with and without bias, one
 * input at a time (batch invariance) and without scratch */
static void check_q8_case(tally *t, const rc_kernels *k, lcg *g, const rc_mat *w, int nt, int special) {
    recall_err err = {0};
    rc_q8mat pk;
    rc_q8act xa = {0};
    const size_t K = (size_t)w->cols, ldx = K + 3, ldy = (size_t)w->rows + 2;
    if (rc_q8_alloc(w, &pk, &err) || rc_q8act_reserve(&xa, nt, w->cols, &err)) {
        printf("FAIL %s q8 setup: %s\n", t->path, err.msg);
        t->failed++;
        return;
    }
    rc_q8_pack_groups(w, &pk, 0, pk.groups);
    float *X = malloc((size_t)nt * ldx * sizeof(float)), *bias = malloc((size_t)w->rows * sizeof(float));
    float *Yg = malloc((size_t)nt * ldy * sizeof(float)), *Yw = malloc((size_t)nt * ldy * sizeof(float));
    const size_t ns = k->matmul_scratch;
    float *scratch = ns ? aligned_alloc(64, ns * sizeof(float)) : NULL;
    for (int tt = 0; tt < nt; tt++) fill_q8_row(g, X + (size_t)tt * ldx, K, special ? tt + 1 : 0);
    fill_f(g, bias, (size_t)w->rows);
    for (int tt = 0; tt < nt; tt++) k->q8_quant(X + (size_t)tt * ldx, &xa, tt);
    xa.n = nt;
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *b = with_bias ? bias : NULL;
        const int64_t r0 = w->rows > 2 ? 1 : 0, r1 = w->rows > 3 ? w->rows - 1 : w->rows;
        poison(Yg, (size_t)nt * ldy);
        poison(Yw, (size_t)nt * ldy);
        if (scratch) poison(scratch, ns);
        k->q8_matmul(&pk, b, &xa, nt, Yg, ldy, r0, r1, scratch);
        rc_q8_matmul_ref(w, b, X, ldx, nt, Yw, ldy, r0, r1);
        char what[112];
        snprintf(what, sizeof what, "%s %lldx%lld nt=%d bias=%d rows %lld..%lld special=%d", rc_dtype_name(w->dtype),
                 (long long)w->rows, (long long)w->cols, nt, with_bias, (long long)r0, (long long)r1, special);
        check(t, "q8_matmul", what, Yg, Yw, (size_t)nt * ldy);
        poison(Yw, (size_t)nt * ldy);
        for (int tt = 0; tt < nt; tt++) {
            rc_q8act one = xa;
            one.q += (size_t)tt * K;
            one.d += (size_t)tt * (size_t)xa.nb;
            one.corr += (size_t)tt * (size_t)xa.nb;
            one.pk_c += (size_t)tt * (size_t)xa.nb;
            one.pk_x += (size_t)tt * (size_t)xa.nb;
            one.npk += tt;
            one.n = 1;
            k->q8_matmul(&pk, b, &one, 1, Yw + (size_t)tt * ldy, ldy, r0, r1, scratch);
        }
        check(t, "q8_matmul batch-invariance", what, Yw, Yg, (size_t)nt * ldy);
        poison(Yw, (size_t)nt * ldy);
        k->q8_matmul(&pk, b, &xa, nt, Yw, ldy, r0, r1, NULL);
        check(t, "q8_matmul without scratch", what, Yw, Yg, (size_t)nt * ldy);
    }
    free(X);
    free(bias);
    free(Yg);
    free(Yw);
    free(scratch);
    rc_q8_free(&pk);
    rc_q8act_free(&xa);
}

static void check_q8_matmul(tally *t, const rc_kernels *k, lcg *g) {
    static const struct {
        rc_dtype dt;
        int64_t rows, cols;
        int nt;
    } cases[] = {
        {RC_DT_NF4, 16, 64, 1},   {RC_DT_NF4, 5, 64, 3},     {RC_DT_NF4, 37, 160, 2},  {RC_DT_NF4, 33, 96, 5},
        {RC_DT_NF4, 50, 1536, 1}, {RC_DT_NF4, 48, 1536, 4},  {RC_DT_NF4, 21, 320, 9},  {RC_DT_NF4, 70, 512, 23},
        {RC_DT_NF4, 35, 160, 17}, {RC_DT_NF4, 17, 9216, 8},  {RC_DT_NF4, 9, 9248, 8},  {RC_DT_NF4, 64, 2048, 64},
        {RC_DT_F32, 7, 32, 1},    {RC_DT_F32, 19, 96, 6},    {RC_DT_F32, 40, 640, 16}, {RC_DT_BF16, 33, 1536, 2},
        {RC_DT_BF16, 18, 256, 13}, {RC_DT_F16, 5, 64, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        test_mat tm;
        make_mat(g, cases[c].dt, cases[c].rows, cases[c].cols, &tm);
        check_q8_case(t, k, g, &tm.m, cases[c].nt, (int)(c % 2));
        free_mat(&tm);
    }
}

int rc_simd_selftest(int path, int *passed, int *failed) {
    rc_kernels k;
    recall_err err = {0};
    *passed = *failed = 0;
    if (rc_simd_select(rc_simd_name((rc_simd_path)path), &k, &err) != RECALL_OK) {
        printf("path %s: %s\n", rc_simd_name((rc_simd_path)path), err.msg);
        return -1;
    }
    tally t = {k.name, 0, 0};
    lcg g = {0x5eed0000u + (uint64_t)path};
    check_dot(&t, &k, &g);
    check_matmul(&t, &k, &g);
    check_matmul_guarded(&t, &k, &g);
    check_attn(&t, &k, &g);
    check_f32_to_f16(&t, &k, &g);
    check_dequant(&t, &k, &g);
    check_act(&t, &k, &g);
    check_sincos(&t, &k, &g);
    check_screen(&t, &k, &g);
    check_screen_norms(&t, &k, &g);
    check_q8_quant(&t, &k, &g);
    check_q8_matmul(&t, &k, &g);
    *passed = t.passed;
    *failed = t.failed;
    return 0;
}

#ifdef RC_SELFTEST_MAIN
int main(void) {
    int total_p = 0, total_f = 0, ran = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!rc_simd_available((rc_simd_path)p)) {
            printf("path %s: not available here, skipped\n", rc_simd_name((rc_simd_path)p));
            continue;
        }
        int np, nf;
        if (rc_simd_selftest(p, &np, &nf) != 0) return 2;
        rc_kernels k;
        recall_err err = {0};
        rc_simd_select(rc_simd_name((rc_simd_path)p), &k, &err);
        printf("path %s (q8 kernels %s): %d passed, %d failed\n", rc_simd_name((rc_simd_path)p), k.q8_name, np, nf);
        total_p += np;
        total_f += nf;
        ran++;
    }
#if defined(__wasm_simd128__)
    printf("wasm kernels: %s\n", rc_wasm_madd_info()); /* which multiply-add the wasm path ran */
#endif
    printf("%d passed, %d failed (%d paths)\n", total_p, total_f, ran);
    return total_f ? 1 : 0;
}
#endif
