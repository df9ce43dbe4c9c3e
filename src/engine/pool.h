/* pool.h - a fixed thread pool and the execution context (pool + SIMD kernel table) that the
 * model contexts (qwen2, bert, pooler) run on.
 *
 * Determinism: work is only ever split over independent outputs (weight output rows, attention
 * heads); every output element is computed by one thread in the canonical order of kernels.h, so
 * results are bitwise identical for any thread count and any split. The split is dynamic: the
 * threads take runs of `grain`-sized units of [0, n) from a shared cursor (runs shrink as the
 * work left does), so a thread the machine slows down does less; worker 0 is the calling thread.
 *
 * Threads are created once (rc_pool_create), never per call. A parallel-for wakes the workers,
 * which spin briefly and then sleep on a condition variable. rc_pool_for is not reentrant: one
 * caller thread at a time (the model contexts run sequentially). Built with -DRECALL_NO_THREADS,
 * the pool runs everything on the calling thread.
 *
 * Thread count: rc_exec_open(threads = 0) reads RECALL_THREADS, else uses 1 (the default is one
 * thread so that a library user, or a test runner running many processes, never oversubscribes
 * the machine by surprise; the CLI's --threads N / RECALL_THREADS ask for more).
 */
#ifndef RECALL_POOL_H
#define RECALL_POOL_H

#include "simd.h"
#include "status.h"

#include <stdint.h>

#define RC_MAX_THREADS 256
/* Stack of each pool worker, the same on every libc (musl's default is 128 KB). The kernels keep
 * their large buffers in the execution context's scratch (rc_exec.scratch), not on the stack. */
#define RC_POOL_STACK ((size_t)1 << 20)

typedef struct rc_pool rc_pool;

/* fn(ctx, begin, end, worker): process items [begin, end); worker in [0, nthreads). */
typedef void (*rc_pool_fn)(void *ctx, int64_t begin, int64_t end, int worker);

recall_status rc_pool_create(int nthreads, rc_pool **out, recall_err *err);
void rc_pool_destroy(rc_pool *p);
int rc_pool_threads(const rc_pool *p); /* 1 for a NULL pool */
/* Runs fn over [0, n) in pieces taken by the threads from a shared cursor (each piece starts at
 * a multiple of grain >= 1 and spans whole grains except at n; `worker` is the thread's index,
 * for per-thread scratch). A NULL pool, nthreads == 1 or n <= grain calls fn(ctx, 0, n, 0). */
void rc_pool_for(rc_pool *p, int64_t n, int64_t grain, rc_pool_fn fn, void *ctx);

/* ---- execution context ---- */

/* The execution options: the one home of these knobs. The loop embeds them (rc_recall_opts.exec,
 * recall_loop.h), the CLI parses into them (cli_args.loop.exec: --threads, --simd, --numerics), the
 * public API maps recall_open_opts.numerics and recall_loop_opts.threads / .simd / .numerics onto
 * them in one place each (api.c), and rc_exec_opts_check validates them once. */
typedef struct {
    int threads;      /* 0 = RECALL_THREADS or 1 (the CLI: the cores available); at most RC_MAX_THREADS */
    const char *simd; /* NULL/"" = RECALL_SIMD or best available; else scalar|avx2|avx512|neon|auto */
    /* The decoder's numerics profile (q8.h): RC_NUMERICS_EXACT (0, the default: bitwise the same
     * for every thread count and path) or RC_NUMERICS_Q8 (int8 matmuls, deterministic in their own
     * right). The models read it at open; bert and the pooler always run exact. */
    int numerics;
} rc_exec_opts;

/* The one validation of rc_exec_opts that needs nothing opened: numerics known (rc_numerics_check).
 * A thread count is checked where the pool is made (rc_pool_create), a simd name where the path
 * is chosen (rc_simd_select); rc_exec_open runs all three. */
recall_status rc_exec_opts_check(const rc_exec_opts *o, recall_err *err);

typedef struct {
    rc_kernels k;
    rc_pool *pool;
    int threads;
    float *scratch;    /* k.matmul_scratch floats per thread, 64-byte aligned (NULL when 0) */
    rc_exec_opts opts; /* as opened: threads as run, simd = k.name, numerics (the models read it) */
} rc_exec;

recall_status rc_exec_open(const rc_exec_opts *o, rc_exec **out, recall_err *err);
void rc_exec_close(rc_exec *e);

/* Y[t*ldy + r] = W[r,:] . X[t*ldx ..] (+ bias[r]) for all rows r of W, t < nt, split over rows. */
void rc_exec_matmul(const rc_exec *e, const rc_mat *w, const float *bias, const float *X, size_t ldx, int nt,
                    float *Y, size_t ldy);

/* Several matmuls of the same inputs as ONE parallel section (one wake-up and one finish instead
 * of one per matrix): part p computes Y_p[t*ldy_p + r] = W_p[r,:] . X[t*ldx ..] (+ bias_p[r]) for
 * its rows r, t < nt; the threads split the parts' rows laid end to end. Every W_p has X's width. */
typedef struct {
    const rc_mat *w;
    const float *bias; /* NULL: none */
    float *Y;
    size_t ldy;
    const rc_q8mat *q8; /* non-NULL: this part runs the q8 kernel on it (rc_exec_q8_matmul_parts) */
} rc_mm_part;
void rc_exec_matmul_parts(const rc_exec *e, const rc_mm_part *parts, int nparts, const float *X, size_t ldx, int nt);

/* The q8 profile (q8.h). rc_exec_q8_quant: rows t < nt of X (cols each, cols % 32 == 0) quantised
 * into xa (reserved for >= nt rows of cols), split over threads by rows. rc_exec_q8_matmul_parts:
 * as rc_exec_matmul_parts with every part's q8 weight and the quantised rows xa. */
void rc_exec_q8_quant(const rc_exec *e, const float *X, size_t ldx, int nt, rc_q8act *xa);
void rc_exec_q8_matmul_parts(const rc_exec *e, const rc_mm_part *parts, int nparts, const rc_q8act *xa, int nt);
/* The SwiGLU below with q8 weights and quantised rows. */
void rc_exec_q8_swiglu(const rc_exec *e, const rc_q8mat *gate, const rc_q8mat *up, const rc_q8act *xa, int nt,
                       float *G, float *U);
/* Packs w into p (shaped and placed: rc_q8_alloc or rc_q8_shape + rc_q8_place), the row groups
 * split over the threads (e NULL: the calling thread). */
void rc_exec_q8_pack(const rc_exec *e, const rc_mat *w, rc_q8mat *p);

/* The SwiGLU of a gated FFN as one parallel section: for r < F = gate->rows, t < nt,
 *   G[t*F + r] = silu(gate[r,:] . X[t]) * (up[r,:] . X[t]);  U[t*F + r] = up[r,:] . X[t]
 * Each thread computes the gate and up rows of its pieces and multiplies them at once: the same
 * bits as two rc_exec_matmul calls and the kernel table's silu_mul over the whole G. */
void rc_exec_swiglu(const rc_exec *e, const rc_mat *gate, const rc_mat *up, const float *X, size_t ldx, int nt,
                    float *G, float *U);

/* x[i] = gelu(x[i]) for i < n, split over threads (each element is independent, so every split
 * gives the same bits). */
void rc_exec_gelu(const rc_exec *e, float *x, size_t n);

#endif
