/* bench_kv_pages.c - perplexity and decode speed of page-sparse decode attention (--kv-pages,
 * src/engine/kv_pages.h) on one chunk of N ids: the numbers `recall score --chunk N --scoring-rows 1
 * --kv-pages PAGE:BUDGET` gives for one chunk, with the dense first half computed once for all
 * configurations, and the decode speed at the end of the context side by side.
 *   1. ids[0..P) prefilled once (dense); P = N/2 by default, llama-perplexity's scored range
 *      (positions P .. N-2, each predicting id j+1; NLL in double from the fp32 logits, as score);
 *   2. the dense reference: ids[P..N) prefilled in 64-row calls (bitwise the dense decode path:
 *      tests/test_kv_pages.c), its NLLs (--dense-nll X: taken from an earlier run instead);
 *   3. each configuration: crop to P, ids P..N-1 decoded one call each, their NLLs and PPL, and
 *      against the dense run position by position: mean and max |NLL - dense NLL|, and how many
 *      greedy ids (argmax of the logits) equal the dense ones;
 *   4. --time S: the cache cropped to N-S and S decode steps per configuration, configurations
 *      interleaved, R rounds; tok/s per step batch, under --lock PATH (flock) for this part only.
 * usage: bench_kv_pages BLOB IDS_FILE N [--from P] [--threads T] [--configs C[,C..]] [--time S]
 *                       [--rounds R] [--lock PATH] [--no-ppl] [--dense-nll X]
 *   IDS_FILE: decimal ids separated by whitespace; C: dense | PAGE:BUDGET | PAGE:BUDGET:rSEED
 *   (the seeded random control). Results go to stdout, progress to stderr. */
#include "bench_util.h"
#include "blob.h"
#include "ops.h"
#include "kv_pages.h"
#include "pool.h"
#include "qwen2.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define MAX_CFG 16
#define BATCH 64

static void die(const char *what, const recall_err *e) {
    fprintf(stderr, "bench_kv_pages: %s: %s\n", what, e ? e->msg : "");
    exit(1);
}

static int32_t *read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1024, k = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    long v;
    while (ids && fscanf(f, "%ld", &v) == 1) {
        if (k == cap) {
            int32_t *t = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!t) free(ids);
            ids = t;
            if (!ids) break;
        }
        ids[k++] = (int32_t)v;
    }
    fclose(f);
    *n = (int)k;
    return ids;
}

static void describe(const rc_kv_pages_opts *o, char *buf, size_t n) {
    if (!o->page) snprintf(buf, n, "dense");
    else if (o->random) snprintf(buf, n, "%d:%d random(seed %llu)", o->page, o->budget, (unsigned long long)o->seed);
    else snprintf(buf, n, "%d:%d ranked", o->page, o->budget);
}

typedef struct {
    rc_qwen2 *m;
    const int32_t *ids;
    size_t V;
    float *logits; /* BATCH x V */
    double *pos_nll; /* [N]: the NLL and the greedy id of each scored position j (of the feed) */
    int *pos_greedy;
} run;

/* ids[from..to) through the model, `rows` per call; the summed NLL of the positions j < last
 * (predicting ids[j+1]) into *sum / *sum2 / *count. */
static void feed(run *r, int from, int to, int rows, int last, double *sum, double *sum2, long *count) {
    recall_err err = {0};
    for (int j = from; j < to;) {
        const int nr = to - j < rows ? to - j : rows;
        rc_qwen2_fwd f = {.ids = r->ids + j, .n = nr, .logits_all = r->logits};
        if (rc_qwen2_forward(r->m, &f, &err)) die("forward", &err);
        for (int t = 0; sum && t < nr; t++)
            if (j + t < last) {
                const double v = rc_row_nll(r->logits + (size_t)t * r->V, r->V, r->ids[j + t + 1], &r->pos_greedy[j + t]);
                r->pos_nll[j + t] = v;
                *sum += v;
                *sum2 += v * v;
                (*count)++;
            }
        j += nr;
        if (rows == 1 && (j - from) % 512 == 0) fprintf(stderr, "  decode %d/%d\n", j - from, to - from);
    }
}

static void set_pages(run *r, const rc_kv_pages_opts *o) {
    recall_err err = {0};
    if (rc_qwen2_set_kv_pages(r->m, o, &err)) die("kv pages", &err);
}

static void crop(run *r, int n) {
    recall_err err = {0};
    if (rc_qwen2_crop(r->m, n, &err)) die("crop", &err);
}

/* PPL and mean NLL; against the dense run's positions (dn / dg, NULL for the dense run itself):
 * the mean and largest |NLL - dense NLL| per position and how many greedy ids agree */
static void report_ppl(const char *name, const run *r, int P, int last, const double *dn, const int *dg, double sum,
                       double sum2, long count, double dense_mean, double secs) {
    const double mean = sum / (double)count, ppl = exp(mean);
    const double var = sum2 / (double)count - mean * mean;
    const double err = count > 1 && var > 0 ? ppl * sqrt(var / (double)(count - 1)) : 0.0;
    printf("ppl %-26s PPL %.4f +/- %.5f  mean_nll %.9f  d_mean_nll %+.6f  scored %ld", name, ppl, err, mean,
           mean - dense_mean, count);
    if (dn) {
        double sad = 0, mad = 0;
        int agree = 0;
        for (int j = P; j < last; j++) {
            const double d = fabs(r->pos_nll[j] - dn[j]);
            sad += d;
            mad = d > mad ? d : mad;
            agree += r->pos_greedy[j] == dg[j];
        }
        printf("  mean|dNLL| %.6f  max|dNLL| %.6f  greedy=dense %d/%d", sad / (last - P), mad, agree, last - P);
    }
    printf("  (%.0f s)\n", secs);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_kv_pages BLOB IDS_FILE N [--from P] [--threads T] [--configs C,..] [--time S]\n"
                        "                      [--rounds R] [--lock PATH] [--no-ppl]\n");
        return 2;
    }
    const char *blob = argv[1], *lock_path = NULL;
    double dense_given = 0; /* --dense-nll X: the dense mean NLL of an earlier run (skips step 2) */
    int N = atoi(argv[3]), P = -1, threads = 1, time_steps = 0, rounds = 3, ppl = 1, ncfg = 0, n_ids = 0;
    rc_kv_pages_opts cfg[MAX_CFG];
    char cfgs[1024] = "dense,64:1024";
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--no-ppl")) {
            ppl = 0;
            continue;
        }
        if (!strcmp(a, "--from")) P = atoi(v);
        else if (!strcmp(a, "--dense-nll")) dense_given = atof(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--time")) time_steps = atoi(v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--lock")) lock_path = v;
        else if (!strcmp(a, "--configs")) snprintf(cfgs, sizeof cfgs, "%s", v);
        else {
            fprintf(stderr, "bench_kv_pages: unknown argument %s\n", a);
            return 2;
        }
        i++;
    }
    for (char *tok = strtok(cfgs, ","); tok && ncfg < MAX_CFG; tok = strtok(NULL, ",")) {
        rc_kv_pages_opts o = {0};
        recall_err err = {0};
        if (strcmp(tok, "dense")) {
            char *r = strstr(tok, ":r");
            if (r) {
                o.random = 1;
                o.seed = strtoull(r + 2, NULL, 10);
                *r = 0;
            }
            if (rc_kvp_parse(tok, &o, &err)) die("--configs", &err);
        }
        cfg[ncfg++] = o;
    }
    int32_t *ids = read_ids(argv[2], &n_ids);
    if (!ids || n_ids < N || N < 4) {
        fprintf(stderr, "bench_kv_pages: %s: need at least N = %d ids (have %d)\n", argv[2], N, n_ids);
        return 1;
    }
    if (P < 0) P = N / 2;
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *ex = NULL;
    run r = {0};
    rc_exec_opts eo = {.threads = threads};
    if (rc_blob_open(blob, 0, &b, &err) || rc_exec_open(&eo, &ex, &err) || rc_qwen2_open_ex(b, N, ex, &r.m, &err) ||
        rc_qwen2_reserve(r.m, N, &err))
        die(blob, &err);
    r.ids = ids;
    r.V = (size_t)rc_qwen2_cfg(r.m)->vocab;
    r.logits = malloc((size_t)BATCH * r.V * sizeof(float));
    r.pos_nll = calloc((size_t)N, sizeof(double));
    r.pos_greedy = calloc((size_t)N, sizeof(int));
    double *dense_nll = calloc((size_t)N, sizeof(double));
    int *dense_greedy = calloc((size_t)N, sizeof(int));
    if (!r.logits || !r.pos_nll || !r.pos_greedy || !dense_nll || !dense_greedy) die("out of memory", NULL);
    printf("bench_kv_pages: N %d, dense prefill of 0..%d, scored %d..%d, threads %d, simd %s\n", N, P, P, N - 2, threads,
           ex->k.name);
    double t0 = bench_now_s();
    feed(&r, 0, P, BATCH, 0, NULL, NULL, NULL);
    fprintf(stderr, "prefill 0..%d: %.0f s\n", P, bench_now_s() - t0);
    double dsum = 0, dsum2 = 0, dense_mean = dense_given;
    long dcount = 0;
    if (!dense_given) {
        t0 = bench_now_s();
        feed(&r, P, N, BATCH, N - 1, &dsum, &dsum2, &dcount);
        dense_mean = dsum / (double)dcount;
        report_ppl("dense (prefill rows)", &r, P, N - 1, NULL, NULL, dsum, dsum2, dcount, dense_mean, bench_now_s() - t0);
        memcpy(dense_nll, r.pos_nll, (size_t)N * sizeof(double));
        memcpy(dense_greedy, r.pos_greedy, (size_t)N * sizeof(int));
    }
    for (int c = 0; ppl && c < ncfg; c++) {
        if (!cfg[c].page) continue; /* the dense reference above */
        char nm[96];
        describe(&cfg[c], nm, sizeof nm);
        fprintf(stderr, "%s\n", nm);
        crop(&r, P);
        set_pages(&r, &cfg[c]);
        double sum = 0, sum2 = 0;
        long count = 0;
        t0 = bench_now_s();
        feed(&r, P, N, 1, N - 1, &sum, &sum2, &count);
        report_ppl(nm, &r, P, N - 1, dense_given ? NULL : dense_nll, dense_greedy, sum, sum2, count, dense_mean,
                   bench_now_s() - t0);
    }
    if (time_steps > 0) {
        /* the cache now holds N positions (the last configuration's history past P: the speed of a
         * step does not depend on the values) */
        const int T0 = N - time_steps;
        int fd = -1;
        if (lock_path) {
            fd = open(lock_path, O_RDONLY | O_CREAT, 0666);
            if (fd < 0 || flock(fd, LOCK_EX)) die("lock", NULL);
        }
        FILE *la = fopen("/proc/loadavg", "r");
        char load[64] = "?";
        if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = 0;
        if (la) fclose(la);
        printf("decode speed at positions %d..%d, %d steps per configuration, %d rounds (load %s)\n", T0, N - 1,
               time_steps, rounds, load);
        double tps[MAX_CFG][16];
        for (int k = 0; k < rounds && k < 16; k++)
            for (int c = 0; c < ncfg; c++) {
                crop(&r, T0);
                set_pages(&r, &cfg[c]);
                const double s = bench_now_s();
                feed(&r, T0, N, 1, 0, NULL, NULL, NULL);
                tps[c][k] = (double)time_steps / (bench_now_s() - s);
            }
        for (int c = 0; c < ncfg; c++) {
            char nm[96];
            describe(&cfg[c], nm, sizeof nm);
            double best = 0, sum = 0;
            printf("tok/s %-26s", nm);
            for (int k = 0; k < rounds && k < 16; k++) {
                printf(" %.2f", tps[c][k]);
                sum += tps[c][k];
                best = tps[c][k] > best ? tps[c][k] : best;
            }
            double dsumt = 0;
            for (int k = 0; k < rounds && k < 16; k++) dsumt += tps[0][k];
            printf("  mean %.2f  vs %s x%.3f\n", sum / rounds, c ? "the first" : "itself", sum / dsumt);
        }
        la = fopen("/proc/loadavg", "r");
        if (la && fgets(load, sizeof load, la)) printf("load after: %s", load);
        if (la) fclose(la);
        fflush(stdout);
        if (fd >= 0) close(fd); /* releases the lock */
    }
    free(r.logits);
    free(r.pos_nll);
    free(r.pos_greedy);
    free(dense_nll);
    free(dense_greedy);
    free(ids);
    rc_qwen2_close(r.m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return 0;
}
