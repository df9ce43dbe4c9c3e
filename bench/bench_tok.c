/* bench_tok.c - `make bench-tok`: tokenizer throughput, single thread, no model blob needed.
 *
 * Loads the real tokenizers (tests/golden/tokenizers/: DeepSeek-R1 byte-level BPE and bge-base
 * WordPiece) through build -> section bytes -> load, exactly as a blob would, then:
 *   1. checks every golden encode case of HF tokenizers (both add_special settings) so a speed
 *      change that alters an id stops the benchmark before anything is timed;
 *   2. builds an English corpus deterministically: the given files (default README.md,
 *      bench/NOTES.md, tests/golden/recall_bench.json) concatenated, each followed by "\n",
 *      repeated whole until it reaches --mb MB (default 6);
 *   3. times BPE encode, BPE decode and WordPiece encode of the whole corpus, --runs times each
 *      (default 5): MB/s of input text (decode: of output text) for the best run by thread CPU
 *      time (time descheduled by other jobs on the shared cores does not count) and by wall time.
 * Every timed run's output must equal the untimed reference run's output byte for byte; the
 * FNV-1a 64 of each id stream is printed so two builds (old / new tree) can be compared.
 * usage: bench_tok [--mb N] [--runs N] [--tok DIR] [FILE...] */
#include "json.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double cpu, wall;
} stamp;

static stamp now(void) {
    struct timespec c, w;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
    clock_gettime(CLOCK_MONOTONIC, &w);
    return (stamp){(double)c.tv_sec + 1e-9 * (double)c.tv_nsec,
                   (double)w.tv_sec + 1e-9 * (double)w.tv_nsec};
}

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_tok: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

static uint64_t fnv64(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

typedef enum { OP_BPE_ENC, OP_BPE_DEC, OP_WP_ENC } op_kind;

typedef struct {
    const rc_bpe *bpe;
    const rc_wp *wp;
    const char *text; /* encode input */
    size_t len;
    const int32_t *ids; /* decode input */
    size_t n_ids;
} tok_set;

/* One run of op; the output (ids or text) goes to *out / *out_bytes (malloc'd). */
static void run_op(const tok_set *t, op_kind op, void **out, size_t *out_bytes) {
    recall_err err = {0};
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0;
    recall_status s;
    if (op == OP_BPE_ENC) s = rc_bpe_encode(t->bpe, t->text, t->len, 0, &ids, &n, &err);
    else if (op == OP_WP_ENC) s = rc_wp_encode(t->wp, t->text, t->len, 0, &ids, &n, &err);
    else s = rc_bpe_decode(t->bpe, t->ids, t->n_ids, 0, &text, &n, &err);
    if (s) die("tokenizer call", &err);
    *out = op == OP_BPE_DEC ? (void *)text : (void *)ids;
    *out_bytes = op == OP_BPE_DEC ? n : n * sizeof(int32_t);
}

/* Reference run, then `runs` timed runs each checked against it; prints one row. Returns the
 * reference output (caller frees). */
static void *bench_op(const tok_set *t, op_kind op, const char *name, int runs, size_t *ref_bytes) {
    void *ref;
    run_op(t, op, &ref, ref_bytes);
    double best_cpu = 1e30, best_wall = 1e30;
    for (int r = 0; r < runs; r++) {
        void *out;
        size_t bytes;
        stamp a = now();
        run_op(t, op, &out, &bytes);
        stamp b = now();
        if (bytes != *ref_bytes || memcmp(out, ref, bytes) != 0) {
            fprintf(stderr, "bench_tok: %s run %d output differs from the reference run\n", name, r);
            exit(1);
        }
        free(out);
        if (b.cpu - a.cpu < best_cpu) best_cpu = b.cpu - a.cpu;
        if (b.wall - a.wall < best_wall) best_wall = b.wall - a.wall;
    }
    double mb = (double)(op == OP_BPE_DEC ? *ref_bytes : t->len) / 1e6;
    printf("%-18s %8.2f MB/s (cpu, best of %d) %8.2f MB/s (wall)  %9zu %s  fnv64 %016llx\n", name,
           mb / best_cpu, runs, mb / best_wall, op == OP_BPE_DEC ? *ref_bytes : *ref_bytes / 4,
           op == OP_BPE_DEC ? "bytes" : "ids  ", (unsigned long long)fnv64(ref, *ref_bytes));
    return ref;
}


/* Every golden encode case of `path` must give HF's ids under op (OP_BPE_ENC or OP_WP_ENC);
 * returns the number of cases. */
static size_t check_goldens(const char *path, const tok_set *t, op_kind op) {
    size_t cases = 0;
    recall_err err = {0};
    json_doc *doc = NULL;
    if (json_read_file(path, &doc, &err)) die(path, &err);
    const json_value *encs = json_get_type(json_root(doc), "encode", JSON_ARR);
    if (!encs) die("golden file has no encode array", NULL);
    for (size_t i = 0; i < encs->len; i++) {
        const json_value *e = &encs->items[i], *s = json_get_type(e, "text", JSON_STR);
        for (int sp = 0; sp < 2 && s; sp++) {
            const json_value *want = json_get_type(e, sp ? "ids_special" : "ids", JSON_ARR);
            int32_t *ids;
            size_t n;
            if (!want) continue;
            if (op == OP_WP_ENC ? rc_wp_encode(t->wp, s->str, s->len, sp, &ids, &n, &err)
                                : rc_bpe_encode(t->bpe, s->str, s->len, sp, &ids, &n, &err))
                die(path, &err);
            int ok = n == want->len;
            for (size_t k = 0; ok && k < n; k++) ok = ids[k] == want->items[k].i;
            if (!ok) {
                fprintf(stderr, "bench_tok: %s encode[%zu] special=%d differs from HF\n", path, i, sp);
                exit(1);
            }
            free(ids);
            cases++;
        }
    }
    json_free(doc);
    return cases;
}

static char *make_corpus(char **files, int n_files, size_t target, size_t *len) {
    size_t one = 0;
    char *unit = NULL;
    for (int f = 0; f < n_files; f++) {
        char *s;
        size_t l;
        recall_err err = {0};
        if (rc_read_file(files[f], &s, &l, &err)) die(files[f], &err);
        unit = realloc(unit, one + l + 1);
        if (!unit) die("out of memory", NULL);
        memcpy(unit + one, s, l);
        unit[one + l] = '\n';
        one += l + 1;
        free(s);
    }
    if (one == 0) die("empty corpus", NULL);
    size_t reps = (target + one - 1) / one;
    if (reps == 0) reps = 1;
    char *c = malloc(reps * one + 1);
    if (!c) die("out of memory", NULL);
    for (size_t r = 0; r < reps; r++) memcpy(c + r * one, unit, one);
    c[reps * one] = 0;
    *len = reps * one;
    printf("corpus: %d file(s), %zu bytes, repeated %zu times = %zu bytes\n", n_files, one, reps, *len);
    free(unit);
    return c;
}

static void load_tokenizers(const char *dir, rc_bpe **bpe, rc_wp **wp) {
    char a[1024], b[1024];
    uint8_t *sec;
    size_t size;
    recall_err err = {0};
    snprintf(a, sizeof a, "%s/deepseek-r1-distill-qwen/tokenizer.json", dir);
    snprintf(b, sizeof b, "%s/deepseek-r1-distill-qwen/tokenizer_config.json", dir);
    if (rc_bpe_build_from_json(a, b, &sec, &size, &err) || rc_bpe_load(sec, size, bpe, &err))
        die(a, &err);
    free(sec);
    snprintf(a, sizeof a, "%s/bge-base-en-v1.5/vocab.txt", dir);
    snprintf(b, sizeof b, "%s/bge-base-en-v1.5/tokenizer_config.json", dir);
    if (rc_wp_build(a, b, &sec, &size, &err)) die(a, &err);
    /* model_max_length (u32 at byte 20 of the section, weights/FORMAT_TOKENIZERS.md) := 0, i.e.
     * unlimited, so the whole corpus's ids are compared, not only the first 512 that the
     * truncation keeps (encoding does the whole text either way). */
    if (size < 24 || sec[20] != 0 || sec[21] != 2 || sec[22] || sec[23])
        die("WordPiece section: model_max_length is not 512 at byte 20", NULL);
    memset(sec + 20, 0, 4);
    if (rc_wp_load(sec, size, wp, &err)) die(a, &err);
    free(sec);
}

int main(int argc, char **argv) {
    const char *dir = "tests/golden/tokenizers";
    double mb = 6;
    int runs = 5, n_files = 0;
    static char *defaults[] = {"README.md", "bench/NOTES.md", "tests/golden/recall_bench.json"};
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) die("out of memory", NULL);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tok") && i + 1 < argc) dir = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_tok [--mb N] [--runs N] [--tok DIR] [FILE...]\n");
            return 2;
        } else files[n_files++] = argv[i];
    }
    if (mb <= 0 || runs < 1) die("--mb and --runs must be positive", NULL);
    if (!n_files) {
        free(files);
        files = defaults;
        n_files = 3;
    }
    rc_bpe *bpe;
    rc_wp *wp;
    load_tokenizers(dir, &bpe, &wp);
    tok_set t = {bpe, wp, NULL, 0, NULL, 0};
    char gp[1024];
    snprintf(gp, sizeof gp, "%s/deepseek-r1-distill-qwen.json", dir);
    size_t nb = check_goldens(gp, &t, OP_BPE_ENC);
    snprintf(gp, sizeof gp, "%s/bge-base-en-v1.5.json", dir);
    size_t nw = check_goldens(gp, &t, OP_WP_ENC);
    printf("goldens: BPE %zu / WordPiece %zu encode cases equal HF's ids\n", nb, nw);
    t.text = make_corpus(files, n_files, (size_t)(mb * 1e6), &t.len);
    size_t bytes;
    int32_t *ids = bench_op(&t, OP_BPE_ENC, "BPE encode", runs, &bytes);
    t.ids = ids;
    t.n_ids = bytes / sizeof *ids;
    char *back = bench_op(&t, OP_BPE_DEC, "BPE decode", runs, &bytes);
    printf("BPE round trip: decode(encode(corpus)) %s the corpus\n",
           bytes == t.len && !memcmp(back, t.text, bytes) ? "equals" : "DIFFERS FROM");
    free(back);
    free(bench_op(&t, OP_WP_ENC, "WordPiece encode", runs, &bytes));
    free(ids);
    free((char *)t.text);
    rc_bpe_free(bpe);
    rc_wp_free(wp);
    if (files != defaults) free(files);
    return 0;
}
