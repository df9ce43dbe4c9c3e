/* cli_common.c - the helpers every command of the CLI shares (cli_common.h). */
#define _GNU_SOURCE /* sched_getaffinity: the cores this process may run on */
#include "cli_common.h"

#include "calibrate.h"

#include "json.h"
#include "lm_screen.h"
#include "q8.h"
#include "qwen2.h"
#include "rope.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_args_init(cli_args *a, const char *cmd) {
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->threshold = a->floor = a->fact_share = NAN;
    a->turn_cap = -1;
    a->pooler_cache_mb = -1;
    a->problem = -1;
    a->decode_from = -1;
    a->percentile = 10.0;
    a->scoring_rows = 64;
}

/* ---- printing and exit codes ---- */

int cli_fail(const char *cmd, const recall_err *err) {
    fprintf(stderr, "recall %s: %s\n", cmd, err->msg[0] ? err->msg : recall_strerror(err->code));
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "recall %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

void cli_banner(const char *cmd, const char *simd, int threads) {
    fprintf(stderr, "recall %s: simd %s, %d thread%s\n", cmd, simd, threads, threads == 1 ? "" : "s");
}

FILE *cli_create(const char *cmd, rc_afile *af, const char *path) {
    recall_err err = {0};
    if (rc_afile_open(af, path, &err)) {
        cli_fail(cmd, &err);
        return NULL;
    }
    return af->f;
}

int cli_commit(const char *cmd, rc_afile *af, int say_wrote) {
    recall_err err = {0};
    const char *path = af->path;
    if (rc_afile_commit(af, &err)) return cli_fail(cmd, &err);
    if (say_wrote) fprintf(stderr, "wrote %s\n", path);
    return 0;
}

/* ---- the execution context and the blob ---- */

int cli_threads(const cli_args *a) {
    if (a->loop.exec.threads) return a->loop.exec.threads;
    const char *env = getenv("RECALL_THREADS");
    if (env && *env) return 0; /* the library reads (and checks) it */
    int n = 1;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#else
    n = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return n < 1 ? 1 : n > RC_MAX_THREADS ? RC_MAX_THREADS : n;
}

recall_status cli_blob_open(const cli_args *a, const char *path, unsigned flags, rc_blob **out, recall_err *err) {
    RC_TRY(rc_blob_open(path, flags | (a->hugepages ? RC_OPEN_HUGEPAGES : 0u), out, err));
    recall_status s = RECALL_OK;
    if (a->profile && !strcmp(a->profile, "device") &&
        (strcmp(rc_blob_weights(*out, "qwen2"), "nf4") || strcmp(rc_blob_weights(*out, "bert"), "nf4") ||
         !rc_blob_find(*out, RC_LM_SCREEN_Q)))
        s = rc_fail(err, RECALL_E_ARG, "%s: --profile device needs a blob converted with --weights nf4 --bge-weights nf4 "
                    "--lm-head-screen (this one: decoder %s, BERT %s, %s lm_head screen)", path,
                    rc_blob_weights(*out, "qwen2"), rc_blob_weights(*out, "bert"),
                    rc_blob_find(*out, RC_LM_SCREEN_Q) ? "an" : "no");
    if (!s && !a->rope_scaling) return RECALL_OK;
    rc_rope_profile p;
    if (!s) s = rc_rope_parse(a->rope_scaling, &p, err);
    if (!s) s = rc_rope_attach(*out, &p, err);
    if (s) {
        rc_blob_close(*out);
        *out = NULL;
    }
    return s;
}

recall_status cli_exec_open(const cli_args *a, rc_exec **out, recall_err *err) {
    rc_exec_opts o = a->loop.exec;
    o.threads = cli_threads(a);
    return rc_exec_open(&o, out, err);
}

/* ---- the recall loop ---- */

void cli_loop_opts(const cli_args *a, const rc_blob *b, rc_recall_opts *o) {
    rc_recall_opts blob;
    rc_recall_defaults(b, &blob);
    *o = a->loop; /* every option the command line sets without the blob, as parsed */
    o->window = blob.window;
    o->block = blob.block;
    o->chunk = blob.chunk;
    o->k = a->top_k ? a->top_k : blob.k;
    o->buf_min = blob.buf_min;
    o->turn_cap = a->turn_cap >= 0 ? a->turn_cap : blob.turn_cap;
    o->threshold = isnan(a->threshold) ? blob.threshold : (float)a->threshold;
    o->use_floor = !isnan(a->floor);
    if (o->use_floor) o->floor = (float)a->floor;
    /* rc_recall_opts: 0 = the default budget, < 0 = no cache */
    if (a->pooler_cache_mb >= 0) o->pooler_cache_mb = a->pooler_cache_mb ? a->pooler_cache_mb : -1;
    o->exec.threads = cli_threads(a);
    o->max_ctx = a->ctx;
}

int cli_loop_threshold(const cli_args *a, const rc_blob *b, rc_recall_opts *o) {
    recall_err err = {0};
    if (a->threshold_file) {
        if (rc_calibration_read(a->threshold_file, b, o, &o->threshold, &err)) return cli_fail(a->cmd, &err);
        fprintf(stderr, "recall %s: gate threshold %.4f from %s\n", a->cmd, o->threshold, a->threshold_file);
        return 0;
    }
    if (!a->calibrate) return 0;
    /* ~10 short needle dialogues, seeds apart from the 0.. that eval and the docs measure with */
    static const uint32_t seeds[] = {1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009};
    const int n = (int)(sizeof seeds / sizeof seeds[0]);
    rc_bench *bench = NULL;
    rc_calibration cal = {0};
    if (rc_bench_load(a->calibrate, &bench, &err) ||
        rc_calibrate(b, o, bench, seeds, n, 10.0, NULL, NULL, &cal, &err)) {
        rc_bench_free(bench);
        return cli_fail(a->cmd, &err);
    }
    fprintf(stderr, "recall %s: calibrated gate threshold %.4f (p10 of %d recall-position scores, problems %u-%u of "
            "%s; the gate file's %.4f)\n", a->cmd, cal.threshold, cal.n_pos, seeds[0], seeds[n - 1], a->calibrate,
            o->threshold);
    o->threshold = cal.threshold;
    rc_calibration_free(&cal);
    rc_bench_free(bench);
    return 0;
}

int cli_ctx_needs_full(const cli_args *a, int has_full) {
    if (!a->ctx || has_full) return 0;
    return cli_usage_error(a->cmd, "--ctx %d: --ctx sets the FULL arm's context and no FULL arm runs", a->ctx);
}

/* ---- values ---- */

int cli_parse_problems(const char *spec, uint32_t *out, int cap) {
    int n = 0;
    const char *p = spec;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno || a < 0 || a > 0x7fffffffL) return -1;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b > 0x7fffffffL) return -1;
            p = end;
        } else {
            b = a;
        }
        for (long i = a; i <= b; i++) {
            if (n == cap) return -1;
            out[n++] = (uint32_t)i;
        }
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
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

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

recall_status cli_parse_ids_text(const char *text, size_t len, const char *what, int32_t **out, int *n,
                                 recall_err *err) {
    *out = NULL;
    *n = 0;
    size_t p = 0;
    while (p < len && is_space(text[p])) p++;
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
    recall_status st = RECALL_OK;
    while (p < len && !st) {
        char ch = text[p];
        if (is_space(ch)) {
            p++;
            continue;
        }
        if (ch < '0' || ch > '9') {
            st = rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: expected a token id (decimal digits), found 0x%02x", what,
                         p, (unsigned)(unsigned char)ch);
            break;
        }
        size_t start = p;
        int64_t v = 0;
        while (p < len && text[p] >= '0' && text[p] <= '9' && v <= INT32_MAX) v = v * 10 + (text[p++] - '0');
        if (v > INT32_MAX) st = rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: token id too large", what, start);
        else if (p < len && !is_space(text[p]))
            st = rc_fail(err, RECALL_E_FORMAT, "%s: byte %zu: expected whitespace after a token id, found 0x%02x", what,
                         p, (unsigned)(unsigned char)text[p]);
        else if ((size_t)count == cap && cap >= (1u << 26))
            st = rc_fail(err, RECALL_E_LIMIT, "%s: too many ids", what);
        else if ((size_t)count == cap) {
            size_t nc = cap ? cap * 2 : 256;
            int32_t *t = (int32_t *)realloc(ids, nc * sizeof(int32_t));
            if (!t) st = rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
            else ids = t, cap = nc;
        }
        if (!st) ids[count++] = (int32_t)v;
    }
    if (!st && !count) st = rc_fail(err, RECALL_E_FORMAT, "%s: no token ids", what);
    if (st) {
        free(ids);
        return st;
    }
    *out = ids;
    *n = count;
    return RECALL_OK;
}

recall_status cli_get_ids(const cli_args *a, int32_t **out, int *n, recall_err *err) {
    *out = NULL;
    *n = 0;
    if (a->ids && a->tokens_file) return rc_fail(err, RECALL_E_ARG, "give either --ids or --tokens-file, not both");
    if (a->ids) return cli_parse_ids_text(a->ids, strlen(a->ids), "--ids", out, n, err);
    if (!a->tokens_file) return rc_fail(err, RECALL_E_ARG, "--ids or --tokens-file is required");
    char *buf = NULL;
    size_t len = 0;
    RC_TRY(rc_read_file(a->tokens_file, &buf, &len, err));
    recall_status st = cli_parse_ids_text(buf, len, a->tokens_file, out, n, err);
    free(buf);
    return st;
}

const char *cli_ids_source(const cli_args *a) { return a->tokens_file ? a->tokens_file : "--ids"; }

const char *cli_profile_name(const rc_blob *b, int numerics, int kv, int lm_screen) {
    const int asked = rc_lm_screen_resolve(lm_screen);
    if (asked >= 0) lm_screen = asked;
    const int screen = lm_screen != RC_LM_SCREEN_OFF && rc_blob_find(b, RC_LM_SCREEN_Q) != NULL;
    if (numerics == RC_NUMERICS_Q8 && kv == RC_KV_DT_F16 && screen && !strcmp(rc_blob_weights(b, "qwen2"), "nf4") &&
        !strcmp(rc_blob_weights(b, "bert"), "nf4"))
        return "device";
    return numerics == RC_NUMERICS_EXACT && kv == RC_KV_DT_F32 ? "exact" : "custom";
}

void cli_put_build(FILE *f, const rc_blob *b, int numerics, int kv, int lm_screen) {
    fputs(", \"weights\": ", f);
    rc_json_put_str(f, rc_blob_weights(b, "qwen2"));
    fputs(", \"bge_weights\": ", f);
    rc_json_put_str(f, rc_blob_weights(b, "bert"));
    fprintf(f, ", \"profile\": \"%s\"", cli_profile_name(b, numerics, kv, lm_screen));
    const char *x = cli_q8_exact(b, numerics);
    if (x) {
        fputs(", \"q8_exact\": ", f);
        rc_json_put_str(f, x);
    }
    if ((x = cli_nf4_keep(b))) {
        fputs(", \"nf4_keep\": ", f);
        rc_json_put_str(f, x);
    }
}

void cli_put_firing(FILE *f, const rc_recall_opts *o) {
    fputs(", \"threshold\": ", f);
    rc_json_put_num(f, o->threshold);
    fprintf(f, ", \"hysteresis\": %d, \"fire_once\": %s, \"floor\": ", o->hysteresis, o->fire_once ? "true" : "false");
    if (o->use_floor) rc_json_put_num(f, o->floor);
    else fputs("null", f);
}

const char *cli_nf4_keep(const rc_blob *b) {
    const rc_blob_kv *x = rc_blob_kv_find(b, RC_NF4_KEEP_KEY);
    return x && x->type == RC_KV_STR ? x->v.s : NULL;
}

const char *cli_q8_exact(const rc_blob *b, int numerics) {
    const rc_blob_kv *x = rc_blob_kv_find(b, RC_Q8_EXACT_KEY);
    return numerics == RC_NUMERICS_Q8 && x && x->type == RC_KV_STR ? x->v.s : NULL;
}

void cli_numerics_describe(const rc_qwen2 *m, char *buf, size_t n) {
    if (rc_qwen2_numerics(m) != RC_NUMERICS_Q8) {
        snprintf(buf, n, "exact");
        return;
    }
    size_t bytes;
    double secs;
    rc_qwen2_q8_stats(m, &bytes, &secs);
    const char *x = rc_qwen2_q8_exact(m); /* the blob's --q8-exact, if any */
    snprintf(buf, n, "q8 (layer matrices int8%s%s%s: %.1f MB packed at open in %.2f s; lm_head, attention, norms exact)",
             *x ? " but " : "", x, *x ? " exact" : "", (double)bytes / 1e6, secs);
}

int cli_each_item(const char *list, size_t cap, int (*one)(void *ctx, const char *item), void *ctx) {
    for (const char *s = list; *s;) {
        size_t l = strcspn(s, ",");
        char item[64];
        if (l == 0 || l >= cap || l >= sizeof item) return -1;
        memcpy(item, s, l);
        item[l] = 0;
        if (one(ctx, item)) return -1;
        s += l;
        if (*s == ',') s++;
    }
    return 0;
}

int cli_add_arm(char *arms, size_t width, int *n, int max, const char *s) {
    if (*n == max || rc_arm_parse(s, NULL) < 0) return -1;
    for (int a = 0; a < *n; a++)
        if (!strcmp(arms + (size_t)a * width, s)) return -1;
    snprintf(arms + (size_t)(*n)++ * width, width, "%s", s);
    return 0;
}
