/* pool.c - fixed pthread pool (see pool.h): [0, n) handed out in runs of grains from an atomic
 * cursor (runs shrinking with the work left); workers spin a little on an atomic generation
 * counter, then sleep on a condition variable; the caller thread is worker 0 and waits for an
 * atomic count of pending workers. Plus the execution context (kernel table + pool) and the
 * row-split matmuls every model uses. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#ifndef RECALL_NO_THREADS
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#endif

#ifdef RECALL_NO_THREADS

struct rc_pool {
    int n;
};

recall_status rc_pool_create(int nthreads, rc_pool **out, recall_err *err) {
    *out = NULL;
    if (nthreads < 1 || nthreads > RC_MAX_THREADS)
        return rc_fail(err, RECALL_E_ARG, "pool: %d threads outside [1, %d]", nthreads, RC_MAX_THREADS);
    rc_pool *p = calloc(1, sizeof *p);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "pool: out of memory");
    p->n = 1; /* built without threads: everything runs on the caller */
    *out = p;
    return RECALL_OK;
}

void rc_pool_destroy(rc_pool *p) { free(p); }
int rc_pool_threads(const rc_pool *p) { return p ? p->n : 1; }
void rc_pool_for(rc_pool *p, int64_t n, int64_t grain, rc_pool_fn fn, void *ctx) {
    (void)p;
    (void)grain;
    if (n > 0) fn(ctx, 0, n, 0);
}

#else

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

struct rc_pool {
    int n;
    long spin; /* spin iterations before sleeping (0 when oversubscribed) */
    pthread_t *tid;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    atomic_uint gen;
    atomic_int pending;
    atomic_int stop;
    /* the current job (written before gen is bumped) */
    rc_pool_fn fn;
    void *ctx;
    int64_t jn, jgrain, junits;
    atomic_llong next; /* next unit (of jgrain items) not yet taken */
};

typedef struct {
    rc_pool *p;
    int idx;
} worker_arg;

/* Every participant takes runs of units from a shared cursor until none are left, so a thread
 * slowed by the machine (memory, a neighbour) does less and nobody waits long at the end. The
 * runs shrink as the work does (guided: a run is the remaining units / (2 x threads), at least
 * one): long runs first keep the prefetchers streaming, short ones last keep the finish even.
 * Which thread computes an item never changes its value (items are rows / heads / elements,
 * each computed whole by one call), so results stay bitwise the same. */
static void run_piece(rc_pool *p, int idx) {
    const int64_t div = 2 * (int64_t)p->n;
    long long u = atomic_load(&p->next);
    for (;;) {
        int64_t step;
        do {
            if (u >= p->junits) return;
            step = (p->junits - u) / div;
            if (step < 1) step = 1;
        } while (!atomic_compare_exchange_weak(&p->next, &u, u + step));
        const int64_t b = u * p->jgrain;
        int64_t e = (u + step) * p->jgrain;
        if (e > p->jn) e = p->jn;
        p->fn(p->ctx, b, e, idx);
        u = atomic_load(&p->next);
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    rc_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load(&p->gen);
        for (long s = 0; g == seen && s < p->spin && !atomic_load(&p->stop); s++) {
            CPU_RELAX();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->start_cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        run_piece(p, wa.idx);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

void rc_pool_destroy(rc_pool *p) {
    if (!p) return;
    if (p->tid) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->start_cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++) pthread_join(p->tid[i], NULL);
        free(p->tid);
    }
    pthread_cond_destroy(&p->start_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

recall_status rc_pool_create(int nthreads, rc_pool **out, recall_err *err) {
    *out = NULL;
    if (nthreads < 1 || nthreads > RC_MAX_THREADS)
        return rc_fail(err, RECALL_E_ARG, "pool: %d threads outside [1, %d]", nthreads, RC_MAX_THREADS);
    rc_pool *p = calloc(1, sizeof *p);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "pool: out of memory");
    p->n = nthreads;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = (ncpu > 0 && nthreads > ncpu) ? 0 : 4000; /* ~50-100 us of pause */
    atomic_init(&p->gen, 0u);
    atomic_init(&p->next, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    if (nthreads > 1) {
        p->tid = calloc((size_t)nthreads - 1, sizeof *p->tid);
        if (!p->tid) {
            rc_pool_destroy(p);
            return rc_fail(err, RECALL_E_NOMEM, "pool: out of memory");
        }
        pthread_attr_t attr;
        const int have_attr = pthread_attr_init(&attr) == 0;
        if (have_attr) (void)pthread_attr_setstacksize(&attr, RC_POOL_STACK); /* else the default */
        for (int i = 1; i < nthreads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) {
                wa->p = p;
                wa->idx = i;
            }
            if (!wa || pthread_create(&p->tid[i - 1], have_attr ? &attr : NULL, worker_main, wa) != 0) {
                free(wa);
                if (have_attr) pthread_attr_destroy(&attr);
                rc_pool_destroy(p);
                return rc_fail(err, RECALL_E_NOMEM, "pool: cannot start thread %d of %d", i, nthreads);
            }
            p->started = i;
        }
        if (have_attr) pthread_attr_destroy(&attr);
    }
    *out = p;
    return RECALL_OK;
}

int rc_pool_threads(const rc_pool *p) { return p ? p->n : 1; }

void rc_pool_for(rc_pool *p, int64_t n, int64_t grain, rc_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->jn = n;
    p->jgrain = grain;
    p->junits = (n + grain - 1) / grain;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1u);
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->mu);
    run_piece(p, 0);
    for (long s = 0; atomic_load(&p->pending) != 0 && s < p->spin; s++) CPU_RELAX();
    if (atomic_load(&p->pending) != 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

#endif

/* ---- execution context ---- */

recall_status rc_exec_opts_check(const rc_exec_opts *o, recall_err *err) {
    return rc_numerics_check(o->numerics, err);
}

recall_status rc_exec_open(const rc_exec_opts *o, rc_exec **out, recall_err *err) {
    *out = NULL;
    static const rc_exec_opts defaults = {0, NULL, RC_NUMERICS_EXACT};
    if (!o) o = &defaults;
    RC_TRY(rc_exec_opts_check(o, err));
    int threads = o->threads;
    if (threads == 0) {
        const char *env = getenv("RECALL_THREADS");
        threads = 1;
        if (env && *env) {
            char *end;
            long v = strtol(env, &end, 10);
            if (*end || v < 1 || v > RC_MAX_THREADS)
                return rc_fail(err, RECALL_E_ARG, "RECALL_THREADS='%s': expected 1..%d", env, RC_MAX_THREADS);
            threads = (int)v;
        }
    }
    rc_exec *e = calloc(1, sizeof *e);
    if (!e) return rc_fail(err, RECALL_E_NOMEM, "exec: out of memory");
    recall_status st = rc_simd_select(o->simd, &e->k, err);
    if (st == RECALL_OK) st = rc_pool_create(threads, &e->pool, err);
    if (st != RECALL_OK) {
        free(e);
        return st;
    }
    e->threads = rc_pool_threads(e->pool);
    e->opts = (rc_exec_opts){e->threads, e->k.name, o->numerics};
    if (e->k.matmul_scratch) { /* a multiple of 16 floats: every thread's part stays 64-byte aligned */
        const size_t bytes = e->k.matmul_scratch * sizeof(float);
        e->scratch = aligned_alloc(64, bytes * (size_t)e->threads);
        if (!e->scratch) {
            rc_exec_close(e);
            return rc_fail(err, RECALL_E_NOMEM, "exec: out of memory (%zu bytes of matmul scratch per thread)", bytes);
        }
    }
    *out = e;
    return RECALL_OK;
}

void rc_exec_close(rc_exec *e) {
    if (!e) return;
    rc_pool_destroy(e->pool);
    free(e->scratch);
    free(e);
}

typedef struct {
    const rc_kernels *k;
    const rc_mm_part *parts;
    int nparts;
    const float *X;
    size_t ldx;
    const rc_q8act *xa; /* the q8 parts' quantised rows */
    int nt;
    float *scratch;
} parts_job;

/* this worker's part of the context's matmul scratch (NULL when the kernels want none) */
static float *worker_scratch(const rc_kernels *k, float *scratch, int worker) {
    return scratch ? scratch + (size_t)worker * k->matmul_scratch : NULL;
}

/* rows [b, e) of the parts laid end to end: each part's share, in its own coordinates */
static void parts_piece(void *ctx, int64_t b, int64_t e, int worker) {
    const parts_job *j = ctx;
    float *scratch = worker_scratch(j->k, j->scratch, worker);
    int64_t off = 0;
    for (int p = 0; p < j->nparts && off < e; p++) {
        const rc_mm_part *pt = &j->parts[p];
        const int64_t rows = pt->q8 ? pt->q8->rows : pt->w->rows;
        const int64_t r0 = b > off ? b - off : 0, r1 = e - off < rows ? e - off : rows;
        if (r0 < r1) {
            if (pt->q8) j->k->q8_matmul(pt->q8, pt->bias, j->xa, j->nt, pt->Y, pt->ldy, r0, r1, scratch);
            else j->k->matmul(pt->w, pt->bias, j->X, j->ldx, j->nt, pt->Y, pt->ldy, r0, r1, scratch);
        }
        off += rows;
    }
}

static void run_parts(const rc_exec *e, parts_job *j) {
    int64_t rows = 0;
    for (int p = 0; p < j->nparts; p++) rows += j->parts[p].q8 ? j->parts[p].q8->rows : j->parts[p].w->rows;
    rc_pool_for(e->pool, rows, 16, parts_piece, j);
}

void rc_exec_matmul_parts(const rc_exec *e, const rc_mm_part *parts, int nparts, const float *X, size_t ldx, int nt) {
    parts_job j = {&e->k, parts, nparts, X, ldx, NULL, nt, e->scratch};
    run_parts(e, &j);
}

void rc_exec_q8_matmul_parts(const rc_exec *e, const rc_mm_part *parts, int nparts, const rc_q8act *xa, int nt) {
    parts_job j = {&e->k, parts, nparts, NULL, 0, xa, nt, e->scratch};
    run_parts(e, &j);
}

void rc_exec_matmul(const rc_exec *e, const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt,
                    float *Y, size_t ldy) {
    const rc_mm_part one = {w, bias, Y, ldy, NULL};
    rc_exec_matmul_parts(e, &one, 1, X, ldx, nt);
}

typedef struct {
    const rc_kernels *k;
    const rc_mat *gate, *up;
    const rc_q8mat *gq, *uq; /* q8: the packed weights, and xa the quantised rows */
    const rc_q8act *xa;
    const float *X;
    size_t ldx;
    int nt;
    float *G, *U, *scratch;
} swiglu_job;

static void swiglu_piece(void *ctx, int64_t b, int64_t e, int worker) {
    const swiglu_job *j = ctx;
    const size_t F = (size_t)(j->gq ? j->gq->rows : j->gate->rows);
    float *scratch = worker_scratch(j->k, j->scratch, worker);
    if (j->gq) {
        j->k->q8_matmul(j->gq, NULL, j->xa, j->nt, j->G, F, b, e, scratch);
        j->k->q8_matmul(j->uq, NULL, j->xa, j->nt, j->U, F, b, e, scratch);
    } else {
        j->k->matmul(j->gate, NULL, j->X, j->ldx, j->nt, j->G, F, b, e, scratch);
        j->k->matmul(j->up, NULL, j->X, j->ldx, j->nt, j->U, F, b, e, scratch);
    }
    for (int t = 0; t < j->nt; t++) /* element-wise: any split gives the same bits */
        j->k->silu_mul(j->G + (size_t)t * F + (size_t)b, j->U + (size_t)t * F + (size_t)b, (size_t)(e - b));
}

void rc_exec_swiglu(const rc_exec *e, const rc_mat *gate, const rc_mat *up, const float *X, size_t ldx, int nt,
                    float *G, float *U) {
    swiglu_job j = {&e->k, gate, up, NULL, NULL, NULL, X, ldx, nt, G, U, e->scratch};
    rc_pool_for(e->pool, gate->rows, 16, swiglu_piece, &j);
}

void rc_exec_q8_swiglu(const rc_exec *e, const rc_q8mat *gate, const rc_q8mat *up, const rc_q8act *xa, int nt,
                       float *G, float *U) {
    swiglu_job j = {&e->k, NULL, NULL, gate, up, xa, NULL, 0, nt, G, U, e->scratch};
    rc_pool_for(e->pool, gate->rows, 16, swiglu_piece, &j);
}

typedef struct {
    const rc_kernels *k;
    const float *X;
    size_t ldx;
    rc_q8act *xa;
} quant_job;

static void quant_rows(void *ctx, int64_t t0, int64_t t1, int worker) {
    (void)worker;
    const quant_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) j->k->q8_quant(j->X + (size_t)t * j->ldx, j->xa, (int)t);
}

void rc_exec_q8_quant(const rc_exec *e, const float *X, size_t ldx, int nt, rc_q8act *xa) {
    quant_job j = {&e->k, X, ldx, xa};
    rc_pool_for(e->pool, nt, 4, quant_rows, &j);
    xa->n = nt;
}

typedef struct {
    const rc_mat *w;
    rc_q8mat *p;
} pack_job;

static void pack_piece(void *ctx, int64_t g0, int64_t g1, int worker) {
    (void)worker;
    const pack_job *j = ctx;
    rc_q8_pack_groups(j->w, j->p, g0, g1);
}

void rc_exec_q8_pack(const rc_exec *e, const rc_mat *w, rc_q8mat *p) {
    pack_job j = {w, p};
    rc_pool_for(e ? e->pool : NULL, p->groups, 8, pack_piece, &j);
}

typedef struct {
    const rc_kernels *k;
    float *x;
} gelu_job;

static void gelu_range(void *ctx, int64_t i0, int64_t i1, int worker) {
    (void)worker;
    const gelu_job *j = ctx;
    j->k->gelu(j->x + i0, (size_t)(i1 - i0));
}

void rc_exec_gelu(const rc_exec *e, float *x, size_t n) {
    rc_kernels scalar;
    if (!e) rc_kernels_scalar(&scalar);
    gelu_job j = {e ? &e->k : &scalar, x};
    rc_pool_for(e ? e->pool : NULL, (int64_t)n, 1024, gelu_range, &j);
}
