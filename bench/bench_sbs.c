/* bench_sbs.c - recall's side of bench/side_by_side.sh: the tests llama-bench runs, timed the way
 * llama-bench times them, printed as llama-bench's jsonl lines (one per test) so the script reads
 * both engines with one parser.
 *
 *   pp512      prefill of 512 rows from position 0 (logits of the last row only, as a llama.cpp
 *              batch computes): tok/s = 512 / time.
 *   tg64       64 decode steps from position 0, each computing its row's logits [V].
 *   tg64@512   64 decode steps from position 512 (the 512-row prefill before them untimed).
 *   bge128     bge-base encode of one 128-token block ([128] ids -> pooled [768]), if the blob
 *              holds the BERT.
 * Protocol (llama-bench's): per test one untimed warm-up (the whole prefill; one decode step; one
 * encode), then `reps` repetitions from an empty KV cache; per repetition tok/s, printed with the
 * samples, their mean and sample standard deviation. The blob is read into huge-page-advised
 * memory (RC_OPEN_HUGEPAGES: weights in memory, as llama-bench -mmp 0), or mapped with --mmap.
 *
 * It uses only interfaces that 99d74db already has (rc_blob_open, rc_exec_open, rc_qwen2_open_ex,
 * rc_qwen2_forward, rc_qwen2_crop, rc_bert_open_ex, rc_bert_embed), so side_by_side.sh --old-tree
 * compiles THIS file against an older tree's headers and library: both trees run one protocol.
 * Two options need newer trees and compile away on older ones: --numerics exact|q8 (q8.h) and
 * --lm-screen (lm_screen.h: each row's greedy pick through the blob's int8 lm_head screen instead
 * of its full logits; the pick is bitwise the full logits' argmax).
 *
 * usage: bench_sbs BLOB [--threads N] [--reps R] [--simd PATH] [--tests pp512,tg64,tg64@512,bge128]
 *                  [--mmap] [--tag NAME] [--numerics exact|q8] [--lm-screen]
 */
#include "bench_util.h"
#include "bert.h"
#include "blob.h"
#include "pool.h"
#include "qwen2.h"
#if defined(__has_include)
#if __has_include("lm_screen.h")
#include "lm_screen.h"
#define SBS_SCREEN 1
#endif
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NP = 512, NG = 64, NB = 128, MAX_REPS = 100 };

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_sbs: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

/* One jsonl line in llama-bench's field names (the ones side_by_side.sh reads). */
static void report(const char *tag, const char *test, int n_prompt, int n_gen, int n_depth, int threads,
                   const char *simd, const double *sec, int reps, int tokens) {
    double ts[MAX_REPS], mean = 0.0, var = 0.0;
    for (int r = 0; r < reps; r++) {
        ts[r] = tokens / sec[r];
        mean += ts[r];
    }
    mean /= reps;
    for (int r = 0; r < reps; r++) var += (ts[r] - mean) * (ts[r] - mean);
    const double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
    printf("{\"engine\": \"%s\", \"test\": \"%s\", \"simd\": \"%s\", \"n_threads\": %d, \"n_prompt\": %d, "
           "\"n_gen\": %d, \"n_depth\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ns\": [ ",
           tag, test, simd, threads, n_prompt, n_gen, n_depth, mean, sd);
    for (int r = 0; r < reps; r++) printf("%s%.0f", r ? ", " : "", sec[r] * 1e9);
    printf(" ]}\n");
    fflush(stdout);
}

static int wanted(const char *list, const char *test) {
    size_t n = strlen(test);
    for (const char *c = list; c && *c;) {
        const char *e = strchr(c, ',');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == n && !strncmp(c, test, n)) return 1;
        c = e ? e + 1 : NULL;
    }
    return 0;
}

#ifdef SBS_SCREEN
static rc_lmscreen *screen; /* --lm-screen: the greedy pick through the int8 lm_head screen */
#endif

/* a forward of n rows ending with the last row's logits, or (--lm-screen) its greedy pick; logits
 * is [V] floats either way (the final-normed row goes to its start) */
static void forward(rc_qwen2 *m, const int32_t *ids, int n, float *logits) {
    recall_err err = {0};
    rc_qwen2_fwd f = {.ids = ids, .n = n, .logits_last = logits};
#ifdef SBS_SCREEN
    if (screen) {
        rc_lm_pick pick;
        f.logits_last = NULL;
        f.normed_last = logits;
        if (rc_qwen2_forward(m, &f, &err) || rc_lmscreen_pick(screen, logits, 0, &pick, &err)) die("qwen2 forward", &err);
        return;
    }
#endif
    if (rc_qwen2_forward(m, &f, &err)) die("qwen2 forward", &err);
}

static void crop0(rc_qwen2 *m) {
    recall_err err = {0};
    if (rc_qwen2_crop(m, 0, &err)) die("qwen2 crop", &err);
}

/* n decode steps starting at the cache's current position: wall seconds */
static double decode(rc_qwen2 *m, const int32_t *ids, int n, float *logits) {
    double t0 = bench_now_s();
    for (int t = 0; t < n; t++) forward(m, ids + t, 1, logits);
    return bench_now_s() - t0;
}

int main(int argc, char **argv) {
    const char *path = NULL, *tests = "pp512,tg64,tg64@512,bge128", *tag = "recall";
    rc_exec_opts eo = {.threads = 1};
    int reps = 3, lm_screen = 0;
    const char *numerics = "exact";
    unsigned flags = RC_OPEN_HUGEPAGES;
    for (int i = 1; i < argc; i++) {
        const int more = i + 1 < argc;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_sbs BLOB [--threads N] [--reps R] [--simd PATH] [--tests LIST] [--mmap] [--tag NAME]\n"
                   "recall's side of bench/side_by_side.sh: llama-bench's tests and protocol (one untimed warm-up\n"
                   "per test, then R repetitions from an empty KV cache), one llama-bench-style jsonl line per test.\n"
                   "  BLOB         a recall blob at real shape (e.g. build/synth/r1-1.5b-nf4.blob from `make synth`)\n"
                   "  --threads N  worker threads (default 1)\n"
                   "  --reps R     timed repetitions per test (default 3, at most %d)\n"
                   "  --simd PATH  scalar|avx2|avx512|neon (default: the best the CPU has)\n"
                   "  --tests LIST comma-separated subset of pp512,tg64,tg64@512,bge128 (default all; bge128 is\n"
                   "               skipped when the blob has no BERT)\n"
                   "  --mmap       use the file mapping (default: blob read into huge-page-advised memory)\n"
                   "  --tag NAME   the \"engine\" field of every line (default recall)\n"
                   "  --numerics exact|q8  the decoder's numerics profile (default exact; trees with q8.h)\n"
                   "  --lm-screen  greedy picks through the blob's int8 lm_head screen instead of full logits\n",
                   MAX_REPS);
            return 0;
        } else if (!strcmp(argv[i], "--threads") && more) eo.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--simd") && more) eo.simd = argv[++i];
        else if (!strcmp(argv[i], "--tests") && more) tests = argv[++i];
        else if (!strcmp(argv[i], "--tag") && more) tag = argv[++i];
        else if (!strcmp(argv[i], "--mmap")) flags = 0;
        else if (!strcmp(argv[i], "--numerics") && more) numerics = argv[++i];
        else if (!strcmp(argv[i], "--lm-screen")) lm_screen = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "bench_sbs: unknown option or missing value '%s' (try --help)\n", argv[i]);
            return 2;
        } else if (!path) path = argv[i];
        else {
            fprintf(stderr, "bench_sbs: one blob only ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "bench_sbs: no blob given (try --help)\n");
        return 2;
    }
    if (reps < 1 || reps > MAX_REPS || eo.threads < 1 || eo.threads > RC_MAX_THREADS) {
        fprintf(stderr, "bench_sbs: --reps must be 1..%d and --threads 1..%d\n", MAX_REPS, RC_MAX_THREADS);
        return 2;
    }
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *e = NULL;
    if (rc_blob_open(path, flags, &b, &err)) die(path, &err);
#ifdef RC_Q8_BLOCK
    if (rc_numerics_parse(numerics) < 0) die("--numerics: expected exact or q8", NULL);
    eo.numerics = rc_numerics_parse(numerics);
#else
    if (strcmp(numerics, "exact")) die("--numerics: this tree has the exact profile only", NULL);
#endif
    if (rc_exec_open(&eo, &e, &err)) die("exec", &err);
#ifdef SBS_SCREEN
    if (lm_screen && (rc_lmscreen_open(b, e, &screen, &err) || !screen))
        die("--lm-screen: the blob has no int8 lm_head screen (convert --lm-head-screen)", screen ? NULL : &err);
#else
    if (lm_screen) die("--lm-screen: this tree has no lm_head screening", NULL);
#endif
    char simd[96]; /* the "simd" field names the profile and the picks too when they are not the default */
    snprintf(simd, sizeof simd, "%s%s%s%s", e->k.name, strcmp(numerics, "exact") ? " " : "",
             strcmp(numerics, "exact") ? numerics : "", lm_screen ? " lm-screen" : "");

    if (wanted(tests, "pp512") || wanted(tests, "tg64") || wanted(tests, "tg64@512")) {
        rc_qwen2 *m = NULL;
        if (rc_qwen2_open_ex(b, NP + NG + 1, e, &m, &err)) die("qwen2", &err);
        const int V = rc_qwen2_cfg(m)->vocab;
        float *logits = malloc((size_t)V * sizeof *logits);
        int32_t *ids = malloc((size_t)(NP + NG) * sizeof *ids);
        if (!logits || !ids) die("out of memory", NULL);
        /* like llama-bench: BOS first, then ids that look random (content does not change the work) */
        ids[0] = 151646 < V ? 151646 : 0;
        for (int i = 1; i < NP + NG; i++) ids[i] = (int32_t)(((uint32_t)i * 2654435761u >> 7) % (uint32_t)(V < 151643 ? V : 151643));
        double sec[MAX_REPS];
        if (wanted(tests, "pp512")) {
            crop0(m);
            forward(m, ids, NP, logits); /* warm-up: the whole prefill */
            for (int r = 0; r < reps; r++) {
                crop0(m);
                double t0 = bench_now_s();
                forward(m, ids, NP, logits);
                sec[r] = bench_now_s() - t0;
            }
            report(tag, "pp512", NP, 0, 0, eo.threads, simd, sec, reps, NP);
        }
        if (wanted(tests, "tg64")) {
            crop0(m);
            decode(m, ids, 1, logits); /* warm-up: one step */
            for (int r = 0; r < reps; r++) {
                crop0(m);
                sec[r] = decode(m, ids, NG, logits);
            }
            report(tag, "tg64", 0, NG, 0, eo.threads, simd, sec, reps, NG);
        }
        if (wanted(tests, "tg64@512")) {
            crop0(m);
            forward(m, ids, NP, logits); /* warm-up: the prefill and one step (llama-bench's pg warm-up) */
            decode(m, ids + NP, 1, logits);
            for (int r = 0; r < reps; r++) {
                crop0(m);
                forward(m, ids, NP, logits);
                sec[r] = decode(m, ids + NP, NG, logits);
            }
            report(tag, "tg64@512", 0, NG, NP, eo.threads, simd, sec, reps, NG);
        }
        free(ids);
        free(logits);
        rc_qwen2_close(m);
    }
    if (wanted(tests, "bge128") && rc_blob_find(b, "bert.embeddings.word_embeddings.weight")) {
        rc_bert *mb = NULL;
        if (rc_bert_open_ex(b, e, &mb, &err)) die("bert", &err);
        float *emb = malloc((size_t)rc_bert_cfg(mb)->hidden * sizeof *emb);
        int32_t ids[NB];
        if (!emb) die("out of memory", NULL);
        ids[0] = 101; /* [CLS] */
        for (int i = 1; i < NB; i++) ids[i] = (int32_t)(1000 + (i * 131) % 29000);
        double sec[MAX_REPS];
        if (rc_bert_embed(mb, ids, NB, emb, &err)) die("bert", &err); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now_s();
            if (rc_bert_embed(mb, ids, NB, emb, &err)) die("bert", &err);
            sec[r] = bench_now_s() - t0;
        }
        report(tag, "bge128", NB, 0, 0, eo.threads, simd, sec, reps, NB);
        free(emb);
        rc_bert_close(mb);
    }
    rc_exec_close(e);
#ifdef SBS_SCREEN
    rc_lmscreen_close(screen);
#endif
    rc_blob_close(b);
    return 0;
}
