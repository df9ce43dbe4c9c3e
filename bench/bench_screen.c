/* bench_screen.c - lm_head screening at real shape (src/engine/lm_screen.h): greedy decode with the
 * picks read off the full logits (off) and through the int8 screen (on), interleaved in one run,
 * the tokens checked identical; plus the lm_head stage alone (full matvec + pick vs screened
 * pick) on the hidden rows of that decode. Needs a blob converted with --lm-head-screen.
 *
 * usage: bench_screen BLOB [--threads N] [--simd P] [--steps N] [--rounds N] [--hugepages]
 * Prints tok/s per mode and round, the on/off ratio (median over rounds), lm_head bytes read per
 * token, exact rows per pick and fallbacks, and the stage timings.
 */
#include "bench_util.h"
#include "blob.h"
#include "lm_screen.h"
#include "pool.h"
#include "qwen2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define PROMPT 16
#define MAXSTEPS 256

/* One greedy decode of `steps` tokens after the prompt; screen NULL = full logits. Returns the
 * decode seconds; ids[steps] the tokens; hs (when not NULL) the hidden rows picked from. */
static double decode(rc_qwen2 *m, rc_lmscreen *scr, const int32_t *prompt, int steps, int32_t *ids, float *hs,
                     float *logits, float *h, rc_lm_pick *acc, recall_err *err) {
    const int H = rc_qwen2_cfg(m)->hidden, V = rc_qwen2_cfg(m)->vocab;
    if (rc_qwen2_crop(m, 0, err)) return -1;
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = prompt;
    f.n = PROMPT;
    if (scr) f.normed_last = h;
    else f.logits_last = logits;
    if (rc_qwen2_forward(m, &f, err)) return -1;
    double t0 = bench_now_s();
    for (int s = 0; s < steps; s++) {
        rc_lm_pick pk;
        if (scr) {
            if (hs) memcpy(hs + (size_t)s * H, h, (size_t)H * sizeof *h);
            if (rc_lmscreen_pick(scr, h, 0, &pk, err)) return -1;
            acc->n_exact += pk.n_exact;
            acc->full += pk.full;
        } else {
            rc_lm_pick_full(logits, V, 0, &pk);
        }
        ids[s] = pk.argmax;
        f.ids = &ids[s];
        f.n = 1;
        if (rc_qwen2_forward(m, &f, err)) return -1;
    }
    return bench_now_s() - t0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_screen BLOB [--threads N] [--simd P] [--steps N] [--rounds N] [--hugepages]\n");
        return 2;
    }
    rc_exec_opts eo = {.threads = 1};
    int steps = 32, rounds = 3;
    unsigned flags = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--hugepages")) flags |= RC_OPEN_HUGEPAGES;
        else if (i + 1 < argc && !strcmp(argv[i], "--simd")) eo.simd = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) eo.threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "bench_screen: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (steps < 1 || steps > MAXSTEPS || rounds < 1 || rounds > 50) {
        fprintf(stderr, "bench_screen: --steps 1..%d, --rounds 1..50\n", MAXSTEPS);
        return 2;
    }
    recall_err err = {0};
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    rc_lmscreen *scr = NULL;
    if (rc_blob_open(argv[1], flags, &b, &err) || rc_exec_open(&eo, &ex, &err) ||
        rc_qwen2_open_ex(b, PROMPT + MAXSTEPS + 1, ex, &m, &err) || rc_lmscreen_open(b, ex, &scr, &err)) {
        fprintf(stderr, "bench_screen: %s\n", err.msg);
        return 1;
    }
    if (!scr) {
        fprintf(stderr, "bench_screen: %s has no %s (convert --lm-head-screen)\n", argv[1], RC_LM_SCREEN_Q);
        return 1;
    }
    const int H = rc_qwen2_cfg(m)->hidden, V = rc_qwen2_cfg(m)->vocab;
    int32_t prompt[PROMPT], ids_off[MAXSTEPS], ids_on[MAXSTEPS];
    for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 7919 + 13) % (V > 151643 ? 151643 : V));
    float *logits = malloc((size_t)V * sizeof *logits), *h = malloc((size_t)H * sizeof *h);
    float *hs = malloc((size_t)steps * H * sizeof *hs);
    double ton[50], toff[50], ratio[50];
    rc_lm_pick acc;
    memset(&acc, 0, sizeof acc);
    printf("bench_screen %s: vocab %d, hidden %d, simd %s, %d thread(s), %d steps after a %d-token prompt\n", argv[1],
           V, H, ex->k.name, ex->threads, steps, PROMPT);
    int same = 1;
    for (int r = 0; r < rounds; r++) { /* interleaved: off, on, off, on ... */
        double a = decode(m, NULL, prompt, steps, ids_off, NULL, logits, h, &acc, &err);
        double c = decode(m, scr, prompt, steps, ids_on, r == 0 ? hs : NULL, logits, h, &acc, &err);
        if (a < 0 || c < 0) {
            fprintf(stderr, "bench_screen: %s\n", err.msg);
            return 1;
        }
        same &= !memcmp(ids_off, ids_on, (size_t)steps * sizeof *ids_on);
        toff[r] = steps / a;
        ton[r] = steps / c;
        ratio[r] = ton[r] / toff[r];
        printf("round %d: off %.2f tok/s, on %.2f tok/s, on/off %.3f\n", r, toff[r], ton[r], ratio[r]);
    }
    /* the lm_head stage alone, on the hidden rows of the first screened decode (best of 3) */
    rc_mat w;
    if (rc_blob_mat(b, "qwen2.lm_head.weight", V, H, &w, &err)) {
        fprintf(stderr, "bench_screen: %s\n", err.msg);
        return 1;
    }
    double t_full = 1e30, t_scr = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = bench_now_s();
        for (int s = 0; s < steps; s++) {
            rc_lm_pick pk;
            if (rc_lmscreen_pick(scr, hs + (size_t)s * H, 0, &pk, &err)) return 1;
        }
        double t1 = bench_now_s();
        if (t1 - t0 < t_scr) t_scr = t1 - t0;
        t0 = bench_now_s();
        for (int s = 0; s < steps; s++) { /* what the unscreened loop does: all V logits, then the pick */
            rc_lm_pick pk;
            rc_exec_matmul(ex, &w, NULL, hs + (size_t)s * H, (size_t)H, 1, logits, (size_t)V);
            rc_lm_pick_full(logits, V, 0, &pk);
        }
        t1 = bench_now_s();
        if (t1 - t0 < t_full) t_full = t1 - t0;
    }
    const double picks = (double)rounds * steps;
    const double exact_per = acc.n_exact / picks;
    const double full_b = rc_lmscreen_full_bytes(scr);
    const double scr_b = (double)V * (H + 4.0 * H / 64 + 8.0) + full_b / V * exact_per;
    printf("tokens identical on/off: %s\n", same ? "yes" : "NO");
    printf("median on/off decode ratio %.3f (off median %.2f tok/s, on median %.2f tok/s)\n", median(ratio, rounds),
           median(toff, rounds), median(ton, rounds));
    printf("lm_head stage per token: full %.2f ms, screened %.2f ms (%.2fx); bytes per token: full %.1f MB, "
           "screened %.1f MB (%.1f exact rows per pick, %d of %.0f picks fell back)\n",
           1e3 * t_full / steps, 1e3 * t_scr / steps, t_full / t_scr, full_b / 1e6, scr_b / 1e6, exact_per, acc.full,
           picks);
    free(logits);
    free(h);
    free(hs);
    rc_lmscreen_close(scr);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return same ? 0 : 1;
}
