/* cli_score.c - `recall score`: teacher-forced scoring and perplexity with llama-perplexity's
 * protocol, plus the CLI helpers every model command shares (--tokens-file, --threads, --simd).
 *
 * Per position (natural log, double precision from the fp32 logits of row j, target t = ids[j+1]):
 *   nll_j = -(logit[t] - lse),  lse = m + log(sum_i exp((double)logit[i] - m)),  m = max_i logit[i]
 *   greedy_j = argmax_i logit[i] (lowest id on ties)
 * Perplexity (llama.cpp tools/perplexity/perplexity.cpp, perplexity(), ppl_stride 0):
 *   - the ids are split into n_chunk = floor(n / n_ctx) chunks of n_ctx ids; a trailing
 *     remainder is not scored;
 *   - each chunk is evaluated from an empty cache at positions 0 .. n_ctx-1; with --bos (or a
 *     blob whose tok.add_bos is 1) its first id is replaced by tok.bos for the evaluation, as
 *     llama-perplexity does for vocabularies with add_bos (Qwen2's does not, hence off by default);
 *   - positions j in [first, n_ctx-1), first = n_ctx/2, are scored (predicting id j+1), i.e.
 *     n_ctx - first - 1 positions per chunk;
 *   - after chunk i the running estimate exp(sum nll / count) is printed as "[i]%.4f,";
 *   - final: PPL = exp(mean nll) +/- PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)).
 * Differences from llama-perplexity, on purpose: llama sums expf(logit - max) in double and takes
 * logf-rounded intermediates; here everything after the fp32 logits is double (diffs ~1e-7).
 * llama refuses inputs under 2*n_ctx tokens; here one full chunk (n_ctx tokens) is enough.
 * The token-id hash is XXH64 (seed 0) of the int32 ids in little-endian order.
 * Only this file (and the other cli_*.c) print; the library returns errors as values. */
#include "blob.h"
#include "checksum.h"
#include "draft.h"
#include "cli.h"
#include "recall_loop.h"
#include "json.h"
#include "ops.h"
#include "pool.h"
#include "qwen2.h"
#include "rope.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- shared CLI helpers */

int cli_parse_draft(const char *cmd, const char *v, int *out) {
    char *end;
    errno = 0;
    long d = strtol(v, &end, 10);
    if (!*v || *end || errno || d < 0 || d > RC_DRAFT_MAX) {
        fprintf(stderr, "recall %s: --draft %s: expected an integer in 0..%d\n", cmd, v, RC_DRAFT_MAX);
        return 2;
    }
    *out = (int)d;
    return 0;
}

int cli_exec_flag(const char *cmd, int argc, char **argv, int *i, cli_exec_args *x) {
    const char *a = argv[*i];
    if (!strcmp(a, "--hugepages")) {
        x->hugepages = 1;
        return 1;
    }
    if (!strcmp(a, "--numerics")) { /* exact (the default) | q8 (q8.h) */
        if (*i + 1 >= argc || rc_numerics_parse(argv[*i + 1]) < 0) {
            fprintf(stderr, "recall %s: --numerics %s: expected exact or q8\n", cmd, *i + 1 < argc ? argv[*i + 1] : "");
            return -1;
        }
        x->numerics = rc_numerics_parse(argv[++*i]);
        return 1;
    }
    int is_threads = !strcmp(a, "--threads"), is_simd = !strcmp(a, "--simd"), is_rope = !strcmp(a, "--rope-scaling");
    int is_ctx = !strcmp(a, "--ctx"), is_screen = !strcmp(a, "--lm-head-screen");
    if (!is_threads && !is_simd && !is_rope && !is_ctx && !is_screen) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "recall %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (is_screen) {
        if (rc_lm_screen_parse(v) < 0) {
            fprintf(stderr, "recall %s: --lm-head-screen %s: expected on, off or auto\n", cmd, v);
            return -1;
        }
        x->lm_screen = rc_lm_screen_parse(v);
    } else if (is_rope) {
        rc_rope_profile p;
        recall_err e = {0};
        if (rc_rope_parse(v, &p, &e)) {
            fprintf(stderr, "recall %s: --rope-scaling: %s\n", cmd, e.msg);
            return -1;
        }
        x->rope_scaling = v;
    } else if (is_ctx) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < 1 || n > (1L << 24)) {
            fprintf(stderr, "recall %s: --ctx %s: expected 1..%ld positions\n", cmd, v, 1L << 24);
            return -1;
        }
        x->ctx = (int)n;
    } else if (is_threads) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < 1 || n > RC_MAX_THREADS) {
            fprintf(stderr, "recall %s: --threads %s: expected 1..%d\n", cmd, v, RC_MAX_THREADS);
            return -1;
        }
        x->threads = (int)n;
    } else {
        if (rc_simd_parse(v) < 0 && strcmp(v, "auto")) {
            fprintf(stderr, "recall %s: --simd %s: expected scalar, avx2, avx512, neon or auto\n", cmd, v);
            return -1;
        }
        x->simd = v;
    }
    return 1;
}

int cli_kv_pages_flag(const char *cmd, int argc, char **argv, int *i, rc_kv_pages_opts *o) {
    const char *a = argv[*i];
    const int is_pages = !strcmp(a, "--kv-pages"), is_random = !strcmp(a, "--kv-pages-random");
    if (!is_pages && !is_random) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "recall %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (is_pages) {
        recall_err e = {0};
        if (rc_kvp_parse(v, o, &e)) {
            fprintf(stderr, "recall %s: --kv-pages: %s\n", cmd, e.msg);
            return -1;
        }
        return 1;
    }
    char *end;
    errno = 0;
    unsigned long long seed = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "recall %s: --kv-pages-random %s: expected a decimal seed\n", cmd, v);
        return -1;
    }
    o->random = 1;
    o->seed = (uint64_t)seed;
    return 1;
}

int cli_kv_pages_check(const char *cmd, const rc_kv_pages_opts *o) {
    if (o->random && !o->page) {
        fprintf(stderr, "recall %s: --kv-pages-random needs --kv-pages PAGE:BUDGET\n", cmd);
        return -1;
    }
    return 0;
}

void cli_numerics_describe(const rc_qwen2 *m, char *buf, size_t n) {
    if (rc_qwen2_numerics(m) != RC_NUMERICS_Q8) {
        snprintf(buf, n, "exact");
        return;
    }
    size_t bytes;
    double secs;
    rc_qwen2_q8_stats(m, &bytes, &secs);
    snprintf(buf, n, "q8 (layer matrices int8: %.1f MB packed at open in %.2f s; lm_head, attention, norms exact)",
             (double)bytes / 1e6, secs);
}

void cli_kv_pages_describe(const rc_kv_pages_opts *o, char *buf, size_t n) {
    if (!o->page)
        snprintf(buf, n, "dense");
    else if (o->random)
        snprintf(buf, n, "page %d, budget %d, random pages (seed %llu)", o->page, o->budget,
                 (unsigned long long)o->seed);
    else
        snprintf(buf, n, "page %d, budget %d, ranked by key bounds", o->page, o->budget);
}

unsigned cli_blob_flags(const cli_exec_args *x, unsigned base) {
    return base | (x && x->hugepages ? RC_OPEN_HUGEPAGES : 0u);
}

recall_status cli_blob_open(const cli_exec_args *x, const char *path, unsigned base, rc_blob **out, recall_err *err) {
    RC_TRY(rc_blob_open(path, cli_blob_flags(x, base), out, err));
    if (!x || !x->rope_scaling) return RECALL_OK;
    rc_rope_profile p;
    recall_status s = rc_rope_parse(x->rope_scaling, &p, err);
    if (!s) s = rc_rope_attach(*out, &p, err);
    if (s) {
        rc_blob_close(*out);
        *out = NULL;
    }
    return s;
}

recall_status cli_exec_open(const cli_exec_args *x, rc_exec **out, recall_err *err) {
    rc_exec_opts o = {x->threads, x->simd, x->numerics};
    return rc_exec_open(&o, out, err);
}

/* Validates a parsed JSON array of ids. */
static recall_status ids_from_json(const json_value *r, const char *what, int32_t **out, int *n, recall_err *err) {
    if (r->type != JSON_ARR)
        return rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: expected a JSON array of token ids", what, r->offset);
    if (r->len > (1u << 26)) return rc_fail(err, RECALL_E_LIMIT, "%s: %zu ids is too many", what, r->len);
    int32_t *ids = (int32_t *)malloc((r->len ? r->len : 1) * sizeof(int32_t));
    if (!ids) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
    for (size_t i = 0; i < r->len; i++) {
        const json_value *v = &r->items[i];
        if (v->type != JSON_NUM || !v->is_int || v->i < 0 || v->i > INT32_MAX) {
            free(ids);
            return rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: element %zu is not a token id", what, v->offset, i);
        }
        ids[i] = (int32_t)v->i;
    }
    *out = ids;
    *n = (int)r->len;
    return RECALL_OK;
}

recall_status cli_parse_ids_text(const char *text, size_t len, const char *what, int32_t **out, int *n,
                                 recall_err *err) {
    *out = NULL;
    *n = 0;
    size_t p = 0;
    while (p < len && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) p++;
    if (p < len && text[p] == '[') {
        json_doc *doc = NULL;
        RC_TRY(json_parse(text, len, what, &doc, err));
        recall_status st = ids_from_json(json_root(doc), what, out, n, err);
        json_free(doc);
        return st;
    }
    /* whitespace-separated decimal ids */
    size_t cap = 0;
    int count = 0;
    int32_t *ids = NULL;
    while (p < len) {
        char ch = text[p];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            p++;
            continue;
        }
        if (ch < '0' || ch > '9') {
            free(ids);
            return rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: expected a token id (decimal digits), found 0x%02x",
                           what, p, (unsigned)(unsigned char)ch);
        }
        size_t start = p;
        int64_t v = 0;
        while (p < len && text[p] >= '0' && text[p] <= '9') {
            v = v * 10 + (text[p] - '0');
            if (v > INT32_MAX) {
                free(ids);
                return rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: token id too large", what, start);
            }
            p++;
        }
        if (p < len && !(text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) {
            free(ids);
            return rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: expected whitespace after a token id, found 0x%02x",
                           what, p, (unsigned)(unsigned char)text[p]);
        }
        if ((size_t)count == cap) {
            if (cap >= (1u << 26)) {
                free(ids);
                return rc_fail(err, RECALL_E_LIMIT, "%s: too many ids", what);
            }
            size_t nc = cap ? cap * 2 : 256;
            int32_t *t = (int32_t *)realloc(ids, nc * sizeof(int32_t));
            if (!t) {
                free(ids);
                return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
            }
            ids = t;
            cap = nc;
        }
        ids[count++] = (int32_t)v;
    }
    if (!count) {
        free(ids);
        return rc_fail(err, RECALL_E_FORMAT, "%s: no token ids", what);
    }
    *out = ids;
    *n = count;
    return RECALL_OK;
}

recall_status cli_read_tokens_file(const char *path, int32_t **out, int *n, recall_err *err) {
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    *n = 0;
    RC_TRY(rc_read_file(path, &buf, &len, err));
    recall_status st = cli_parse_ids_text(buf, len, path, out, n, err);
    free(buf);
    return st;
}

recall_status cli_get_ids(const char *inline_ids, const char *tokens_file, int32_t **out, int *n, recall_err *err) {
    if (inline_ids && tokens_file)
        return rc_fail(err, RECALL_E_ARG, "give either --ids or --tokens-file, not both");
    if (tokens_file) return cli_read_tokens_file(tokens_file, out, n, err);
    if (inline_ids) return cli_parse_ids_text(inline_ids, strlen(inline_ids), "--ids", out, n, err);
    return rc_fail(err, RECALL_E_ARG, "--ids or --tokens-file is required");
}

/* ---------------------------------------------------------------- recall score */

static const char SCORE_USAGE[] =
    "usage: recall score BLOB (--tokens-file F | --ids '[...]') [--ctx N] [--bos] [--json OUT]\n"
    "                    [--per-position] [--threads N] [--simd scalar|avx2|avx512|neon]\n"
    "                    [--scoring-rows R] [--kv-pages PAGE:BUDGET [--kv-pages-random SEED]]\n"
    "Teacher-forced scoring: per-position negative log-likelihood (natural log, double from the fp32\n"
    "logits) and greedy token, and perplexity with llama-perplexity's protocol: the ids are cut into\n"
    "chunks of N (default: all ids, at most the model's trained positions), each chunk is evaluated\n"
    "from an empty cache and positions [N/2, N-1) are scored; prints the running PPL per chunk\n"
    "('[1]x,[2]y,...'), 'Final estimate: PPL = P +/- E', the XXH64 of the int32 ids and the KV bytes.\n"
    "  --tokens-file F  a JSON array of ids, or ids separated by whitespace\n"
    "  --ctx N          chunk length (3 .. the trained positions); input shorter than N is rejected\n"
    "  --rope-scaling yarn:FACTOR:ORIG  YaRN for a blob without a profile (trained positions:\n"
    "                   floor(FACTOR x ORIG)); one contradicting the blob's fails\n"
    "  --bos            replace each chunk's first id by tok.bos (llama-perplexity with add_bos;\n"
    "                   default: on iff the blob says tok.add_bos = 1)\n"
    "  --per-position   print (and write to --json) every position: chunk, pos, target, nll, greedy\n"
    "  --json OUT       the results as JSON\n"
    "  --scoring-rows R rows per forward call from position N/2 on (the scored ones; 1..64, default\n"
    "                   64); the unscored first half is always prefilled in calls of 64 rows.\n"
    "                   R = 1 scores every position through the decode path (bitwise the same NLLs\n"
    "                   as prefill when attention is dense) and reports the decode tok/s\n"
    "  --kv-pages PAGE:BUDGET  page-sparse decode attention (an approximation, with R = 1 only): each\n"
    "                   decode step attends to page 0, the last two pages and the best BUDGET/PAGE\n"
    "                   other pages of PAGE positions, ranked by a per-page bound of q.k\n"
    "  --kv-pages-random SEED  the control: the same number of pages, drawn at random (seeded)\n"
    "  --threads N / --simd P   execution (defaults: RECALL_THREADS / RECALL_SIMD); bitwise the same\n"
    "  --numerics exact|q8      the decoder's numerics profile (default exact; q8: int8 matmuls,\n"
    "                   deterministic, its distance to exact in docs/PROFILES.md); named in the output\n"
    "  --hugepages              copy the blob into huge-page memory (faster decode, slower start)\n"
    "Prefill progress goes to stderr.\n";

#define SCORE_BATCH 64 /* rows per forward call: bounds the logits buffer to 64 x vocab floats */

typedef struct {
    int chunk, pos, target, greedy, scored;
    double nll;
} score_pos;

typedef struct {
    const char *blob_path, *ids_s, *tokens_file, *json_path;
    long ctx_req; /* 0: the default chunk */
    int per_pos, bos_flag;
    int rows;     /* --scoring-rows: rows per call over the scored positions */
    cli_exec_args xa;
    rc_kv_pages_opts kvp;
} score_opts;

/* Fills o from argv; returns -1 to go on, else the exit code (0 after --help). */
static int score_parse_args(int argc, char **argv, score_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(SCORE_USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--per-position")) {
            o->per_pos = 1;
            continue;
        }
        if (!strcmp(a, "--bos")) {
            o->bos_flag = 1;
            continue;
        }
        int x = cli_exec_flag("score", argc, argv, &i, &o->xa);
        if (!x) x = cli_kv_pages_flag("score", argc, argv, &i, &o->kvp);
        if (x < 0) return 2;
        if (x > 0) continue;
        if (!strcmp(a, "--scoring-rows")) {
            char *end;
            long r = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || end == argv[i + 1] || *end || r < 1 || r > SCORE_BATCH) {
                fprintf(stderr, "recall score: --scoring-rows needs a value in 1..%d\n", SCORE_BATCH);
                return 2;
            }
            o->rows = (int)r;
            i++;
            continue;
        }
        const char **slot = !strcmp(a, "--ids") ? &o->ids_s : !strcmp(a, "--tokens-file") ? &o->tokens_file
                          : !strcmp(a, "--json") ? &o->json_path : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall score: %s needs a value\n", a);
                return 2;
            }
            *slot = argv[++i];
        } else if (a[0] == '-' || o->blob_path) {
            fprintf(stderr, "recall score: unexpected argument '%s'\n%s", a, SCORE_USAGE);
            return 2;
        } else {
            o->blob_path = a;
        }
    }
    if (!o->blob_path || (!o->ids_s && !o->tokens_file)) {
        fprintf(stderr, "recall score: needs BLOB and --tokens-file or --ids\n%s", SCORE_USAGE);
        return 2;
    }
    if (cli_kv_pages_check("score", &o->kvp)) return 2;
    if (o->kvp.page && o->rows != 1) {
        fprintf(stderr, "recall score: --kv-pages acts on decode steps only: add --scoring-rows 1\n");
        return 2;
    }
    if (!o->rows) o->rows = SCORE_BATCH;
    o->ctx_req = o->xa.ctx; /* --ctx (cli_exec_flag) */
    if (o->ctx_req && o->ctx_req < 3) {
        fprintf(stderr, "recall score: --ctx %ld: expected an integer >= 3\n", o->ctx_req);
        return 2;
    }
    return -1;
}

/* The scoring run: the model, the ids, the chunking and the running sums. */
typedef struct {
    rc_blob *b;
    rc_exec *ex;
    rc_qwen2 *m;
    int32_t *ids, *chunk_ids;
    int n;
    const char *src; /* names the ids in messages: the file or "--ids" */
    int use_bos;
    int64_t bos_id;
    int n_ctx, n_chunk, first;
    size_t V;
    float *logits;     /* SCORE_BATCH x V */
    double *chunk_ppl; /* running PPL after each chunk */
    score_pos *pp;     /* --per-position rows */
    size_t ip;
    uint64_t hash;
    long count;
    double nll, nll2;
    double decode_tps; /* --scoring-rows 1: the speed of the latest full window of SCORE_TPS_WINDOW */
    int tps_rows;      /* decode rows (or of the only, shorter, window) */
} score_run;

static void score_close(score_run *s) {
    free(s->pp);
    free(s->chunk_ppl);
    free(s->chunk_ids);
    free(s->logits);
    free(s->ids);
    rc_qwen2_close(s->m);
    rc_exec_close(s->ex);
    rc_blob_close(s->b);
}

/* Reads the ids, opens the blob and the model for the chunk length, checks the ids against the
 * vocab and allocates the buffers. */
static recall_status score_open(const score_opts *o, score_run *s, recall_err *err) {
    RC_TRY(cli_get_ids(o->ids_s, o->tokens_file, &s->ids, &s->n, err));
    RC_TRY(cli_blob_open(&o->xa, o->blob_path, 0, &s->b, err));
    s->src = o->tokens_file ? o->tokens_file : "--ids";
    int64_t add_bos = 0;
    int max_pos = 0; /* trained positions under the RoPE profile */
    s->bos_id = -1;
    RC_TRY(rc_rope_blob_positions(s->b, &max_pos, err));
    if (rc_blob_kv_find(s->b, "tok.add_bos")) RC_TRY(rc_blob_get_i64(s->b, "tok.add_bos", &add_bos, err));
    s->use_bos = o->bos_flag || add_bos == 1;
    if (s->use_bos) RC_TRY(rc_blob_get_i64(s->b, "tok.bos", &s->bos_id, err));
    /* default chunk: the whole input, but never silently past the trained window */
    const int n = s->n;
    s->n_ctx = o->ctx_req ? (int)o->ctx_req : (n < max_pos ? n : max_pos);
    if (s->n_ctx < 3) return rc_fail(err, RECALL_E_ARG, "%s: %d tokens; scoring needs a chunk of at least 3", s->src, n);
    RC_TRY(cli_exec_open(&o->xa, &s->ex, err));
    RC_TRY(rc_qwen2_open_ex(s->b, s->n_ctx, s->ex, &s->m, err));
    RC_TRY(rc_qwen2_set_kv_pages(s->m, &o->kvp, err));
    if (n < s->n_ctx)
        return rc_fail(err, RECALL_E_ARG, "%s: %d tokens is shorter than one chunk of %d (--ctx)", s->src, n, s->n_ctx);
    /* a request of known size: reserve the chunk once instead of growing by doubling */
    RC_TRY(rc_qwen2_reserve(s->m, s->n_ctx, err));
    const rc_qwen2_config *c = rc_qwen2_cfg(s->m);
    s->V = (size_t)c->vocab;
    if (s->use_bos && (s->bos_id < 0 || s->bos_id >= c->vocab))
        return rc_fail(err, RECALL_E_FORMAT, "%s: tok.bos %lld outside the vocab (%d)", o->blob_path,
                       (long long)s->bos_id, c->vocab);
    for (int i = 0; i < n; i++)
        if (s->ids[i] >= c->vocab)
            return rc_fail(err, RECALL_E_ARG, "%s: token id %d at index %d outside [0, %d)", s->src, (int)s->ids[i], i,
                           c->vocab);
    s->n_chunk = n / s->n_ctx;
    s->first = s->n_ctx / 2;
    const size_t n_pp = o->per_pos ? (size_t)s->n_chunk * (size_t)(s->n_ctx - 1) : 0;
    s->logits = (float *)malloc((size_t)SCORE_BATCH * s->V * sizeof(float));
    s->chunk_ids = (int32_t *)malloc((size_t)s->n_ctx * sizeof(int32_t));
    s->chunk_ppl = (double *)malloc((size_t)s->n_chunk * sizeof(double));
    s->pp = (score_pos *)malloc((n_pp ? n_pp : 1) * sizeof(score_pos));
    if (!s->logits || !s->chunk_ids || !s->chunk_ppl || !s->pp) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    s->hash = rc_xxh64_ids(s->ids, (size_t)n);
    return RECALL_OK;
}

/* Every chunk from an empty cache, SCORE_BATCH rows per forward; prints the running PPL per chunk. */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rows of the call starting at r0: SCORE_BATCH, or --scoring-rows from the first scored one on
 * (the unscored rows before it in prefill calls that stop there). */
static int score_call_rows(const score_opts *o, const score_run *s, int r0) {
    int nr = SCORE_BATCH;
    if (o->rows != SCORE_BATCH) nr = r0 < s->first ? (s->first - r0 < SCORE_BATCH ? s->first - r0 : SCORE_BATCH) : o->rows;
    return s->n_ctx - r0 < nr ? s->n_ctx - r0 : nr;
}

#define SCORE_TPS_WINDOW 256 /* decode rows per tok/s report */

static recall_status score_chunks(const score_opts *o, score_run *s, recall_err *err) {
    const int n_ctx = s->n_ctx;
    const long rows_total = (long)s->n_chunk * n_ctx;
    long rows_done = 0;
    for (int ch = 0; ch < s->n_chunk; ch++) {
        const int32_t *tok = s->ids + (size_t)ch * n_ctx;
        memcpy(s->chunk_ids, tok, (size_t)n_ctx * sizeof(int32_t));
        if (s->use_bos) s->chunk_ids[0] = (int32_t)s->bos_id;
        RC_TRY(rc_qwen2_crop(s->m, 0, err));
        double t_win = now_s();
        int n_win = 0;
        for (int r0 = 0, nr; r0 < n_ctx; r0 += nr) {
            nr = score_call_rows(o, s, r0);
            rc_qwen2_fwd f = {.ids = s->chunk_ids + r0, .n = nr, .logits_all = s->logits};
            if (r0 == s->first) t_win = now_s();
            RC_TRY(rc_qwen2_forward(s->m, &f, err));
            /* decode speed per SCORE_TPS_WINDOW rows, and over the chunk's last (partial) window */
            if (o->rows == 1 && r0 >= s->first && (++n_win == SCORE_TPS_WINDOW || r0 + 1 == n_ctx)) {
                const double t = now_s();
                if (n_win == SCORE_TPS_WINDOW || s->tps_rows < SCORE_TPS_WINDOW) {
                    s->decode_tps = (double)n_win / (t - t_win);
                    s->tps_rows = n_win;
                }
                fprintf(stderr, "score: decode rows %d..%d: %.2f tok/s\n", r0 + 1 - n_win, r0, (double)n_win / (t - t_win));
                t_win = t;
                n_win = 0;
            }
            for (int t = 0; t < nr; t++) {
                const int j = r0 + t;
                if (j >= n_ctx - 1) break; /* the last row has no target inside the chunk */
                int greedy;
                const int target = tok[j + 1]; /* in range: checked in score_open */
                const double v = rc_row_nll(s->logits + (size_t)t * s->V, s->V, target, &greedy);
                const int scored = j >= s->first;
                if (scored) {
                    s->nll += v;
                    s->nll2 += v * v;
                    s->count++;
                }
                if (o->per_pos) s->pp[s->ip++] = (score_pos){ch, j, target, greedy, scored, v};
            }
            rows_done += nr;
            if (rows_done % 1024 < (long)nr || r0 + nr == n_ctx || (o->rows == 1 && r0 + nr == s->first))
                fprintf(stderr, "score: %s %ld/%ld rows (chunk %d/%d)\n", o->rows == 1 && r0 >= s->first ? "decode" : "prefill",
                        rows_done, rows_total, ch + 1, s->n_chunk);
        }
        s->chunk_ppl[ch] = exp(s->nll / (double)s->count);
        printf("[%d]%.4f,", ch + 1, s->chunk_ppl[ch]);
        fflush(stdout);
    }
    printf("\n");
    return RECALL_OK;
}

static recall_status score_write_json(const score_opts *o, const score_run *s, double mean, double ppl,
                                      double ppl_err, recall_err *err) {
    FILE *jf = fopen(o->json_path, "w");
    if (!jf) return rc_fail(err, RECALL_E_IO, "%s: %s", o->json_path, strerror(errno));
    fprintf(jf,
            "{\"n_tokens\": %d, \"ids_xxh64\": \"%016llx\", \"n_ctx\": %d, \"n_chunks\": %d, \"first\": %d, "
            "\"bos\": %s, \"scored\": %ld, \"mean_nll\": %.17g, \"ppl\": %.17g, \"ppl_err\": %.17g, "
            "\"kv_bytes\": %zu, \"chunk_ppl\": [",
            s->n, (unsigned long long)s->hash, s->n_ctx, s->n_chunk, s->first, s->use_bos ? "true" : "false",
            s->count, mean, ppl, ppl_err, rc_qwen2_kv_bytes(s->m));
    for (int i = 0; i < s->n_chunk; i++) fprintf(jf, "%s%.17g", i ? ", " : "", s->chunk_ppl[i]);
    char kvp[128];
    cli_kv_pages_describe(&o->kvp, kvp, sizeof kvp);
    fprintf(jf, "], \"scoring_rows\": %d, \"attention\": \"%s\", \"numerics\": \"%s\"", o->rows, kvp,
            rc_numerics_name(rc_qwen2_numerics(s->m)));
    if (s->decode_tps > 0) fprintf(jf, ", \"decode_tok_s\": %.6g, \"decode_tok_s_rows\": %d", s->decode_tps, s->tps_rows);
    if (o->per_pos) {
        fputs(", \"positions\": [", jf);
        for (size_t i = 0; i < s->ip; i++)
            fprintf(jf, "%s\n{\"chunk\": %d, \"pos\": %d, \"target\": %d, \"nll\": %.17g, \"greedy\": %d, "
                        "\"scored\": %s}",
                    i ? "," : "", s->pp[i].chunk, s->pp[i].pos, s->pp[i].target, s->pp[i].nll, s->pp[i].greedy,
                    s->pp[i].scored ? "true" : "false");
        fputs("]", jf);
    }
    fputs("}\n", jf);
    int bad = ferror(jf) != 0;
    int cl = fclose(jf);
    if (bad || cl) return rc_fail(err, RECALL_E_IO, "%s: write failed", o->json_path);
    return RECALL_OK;
}

/* The final estimate and the per-position rows (stdout), then --json. */
static recall_status score_report(const score_opts *o, const score_run *s, recall_err *err) {
    const double mean = s->nll / (double)s->count, ppl = exp(mean);
    double var = s->nll2 / (double)s->count - mean * mean, ppl_err = 0.0;
    if (s->count > 1 && var > 0) ppl_err = sqrt(var / (double)(s->count - 1)) * ppl;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
    printf("scored %ld positions, mean nll %.9f\n", s->count, mean);
    printf("kv_bytes %zu (%d positions allocated, context %d)\n", rc_qwen2_kv_bytes(s->m), rc_qwen2_kv_capacity(s->m),
           rc_qwen2_max_ctx(s->m));
    if (s->decode_tps > 0)
        printf("decode %.2f tok/s over the last %d positions of the last chunk\n", s->decode_tps, s->tps_rows);
    if (o->per_pos)
        for (size_t i = 0; i < s->ip; i++)
            printf("chunk %d pos %d target %d nll %.9f greedy %d%s\n", s->pp[i].chunk, s->pp[i].pos, s->pp[i].target,
                   s->pp[i].nll, s->pp[i].greedy, s->pp[i].scored ? " scored" : "");
    return o->json_path ? score_write_json(o, s, mean, ppl, ppl_err, err) : RECALL_OK;
}

int cli_score(int argc, char **argv) {
    score_opts o;
    int rc = score_parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    recall_err err = {0};
    score_run s;
    memset(&s, 0, sizeof s);
    rc = 1;
    if (!score_open(&o, &s, &err)) {
        printf("tokens %d xxh64 %016llx\n", s.n, (unsigned long long)s.hash);
        char kvp[128];
        cli_kv_pages_describe(&o.kvp, kvp, sizeof kvp);
        printf("n_ctx %d chunks %d scored_per_chunk %d bos %s\n", s.n_ctx, s.n_chunk, s.n_ctx - s.first - 1,
               s.use_bos ? "replaced" : "off");
        printf("scoring rows per call %d, attention %s\n", o.rows, kvp);
        char num[192];
        cli_numerics_describe(s.m, num, sizeof num);
        printf("numerics %s\n", num);
        fflush(stdout);
        if (!score_chunks(&o, &s, &err) && !score_report(&o, &s, &err)) rc = 0;
    }
    if (rc) fprintf(stderr, "recall score: %s\n", err.msg[0] ? err.msg : recall_strerror(err.code));
    score_close(&s);
    return rc;
}
