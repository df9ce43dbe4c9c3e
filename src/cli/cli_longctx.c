/* cli_longctx.c - `recall longctx`: the exact-answer long-context tasks (docs/LONG_CONTEXT.md,
 * REQ-CTX-003 / REQ-CTX-005). Cases come from src/harness/longctx.c (every definition is in longctx.h);
 * each case's prompt is one user message answered greedily on every arm through the recall loop
 * (rc_recall_reply, as `eval` runs its arms): FULL keeps the whole prompt in its cache, SP and
 * RC_bge slide their window over it. Every case is checked against the FULL arm's context before
 * any arm runs. Prefill progress goes to stderr, the table to stdout, the cases with each arm's
 * answer to --json (temp + rename). */
#include "blob.h"
#include "cli.h"
#include "json.h"
#include "longctx.h"
#include "qwen2.h"
#include "recall_loop.h"
#include "rope.h"
#include "tokenize_bpe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_LIST 64
#define MAX_ARMS 3

/* The command line, with its lists parsed. */
typedef struct {
    const cli_args *a;
    rc_lctx_task tasks[RC_LCTX_NTASKS];
    int n_tasks;
    int lens[MAX_LIST], n_lens;
    double depths[MAX_LIST];
    int n_depths;
    char arms[MAX_ARMS][8];
    int n_arms;
} longctx_opts;

static const char *haystack_path(const cli_args *a) {
    return a->haystack ? a->haystack : "tests/golden/longctx/haystack.txt";
}

static int add_task(void *ctx, const char *s) {
    longctx_opts *o = ctx;
    rc_lctx_task t;
    if (o->n_tasks == RC_LCTX_NTASKS || rc_lctx_task_parse(s, &t)) return -1;
    for (int i = 0; i < o->n_tasks; i++)
        if (o->tasks[i] == t) return -1; /* each once */
    o->tasks[o->n_tasks++] = t;
    return 0;
}
static int add_len(void *ctx, const char *s) {
    longctx_opts *o = ctx;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 1 || v > 0x7fffffffL || o->n_lens == MAX_LIST) return -1;
    o->lens[o->n_lens++] = (int)v;
    return 0;
}
static int add_depth(void *ctx, const char *s) {
    longctx_opts *o = ctx;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0.0 && v <= 1.0) || o->n_depths == MAX_LIST) return -1;
    o->depths[o->n_depths++] = v;
    return 0;
}
static int add_arm(void *ctx, const char *s) {
    longctx_opts *o = ctx;
    return cli_add_arm((char *)o->arms, sizeof o->arms[0], &o->n_arms, MAX_ARMS, s);
}

/* Parses the lists of the command line; 0, or 2 (printed). */
static int longctx_parse_lists(const cli_args *a, longctx_opts *o) {
    memset(o, 0, sizeof *o);
    o->a = a;
    struct {
        const char *flag, *val, *want;
        int (*one)(void *, const char *);
    } lists[4] = {{"--task", a->task, "needle, multikey or vartrack, each once", add_task},
                  {"--len", a->len, "positive token counts", add_len},
                  {"--depth", a->depth ? a->depth : "0.5", "fractions in 0..1", add_depth},
                  {"--arms", a->arms ? a->arms : "FULL,SP,RC_bge", RC_ARM_NAMES ", each once", add_arm}};
    for (int k = 0; k < 4; k++)
        if (cli_each_item(lists[k].val, 64, lists[k].one, o))
            return cli_usage_error("longctx", "%s %s: expected a comma-separated list of %s (at most %d)", lists[k].flag,
                                   lists[k].val, lists[k].want, MAX_LIST);
    return 0;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    char *reply;
    char answer[64];
    int exact, n_reply;
    int n_gates, n_fires; /* the recall loop's gate scores and retrievals during the case */
    double seconds;
} arm_result;

typedef struct {
    const longctx_opts *o;
    rc_blob *b;
    rc_bpe *bpe;
    int trained, ctx; /* the model's trained positions; the FULL arm's context */
    rc_lctx_haystack hay;
    rc_lctx_case *cases;
    int n_cases;
    arm_result *res; /* [case][arm] */
    recall_err err;
} longctx_run;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Opens the blob, its tokenizer and the haystack; 0 or the exit code (message printed). */
static int longctx_open(longctx_run *r) {
    const longctx_opts *o = r->o;
    size_t size;
    const void *sec;
    if (cli_blob_open(o->a, o->a->pos[0], 0, &r->b, &r->err) ||
        rc_rope_blob_positions(r->b, &r->trained, &r->err))
        goto fail;
    sec = rc_blob_section(r->b, RC_SECT_TOK_BPE, &size);
    if (!sec) {
        fprintf(stderr, "recall longctx: %s: no BPE tokenizer section\n", o->a->pos[0]);
        return 1;
    }
    if (rc_bpe_load(sec, size, &r->bpe, &r->err) || rc_lctx_haystack_load(r->bpe, haystack_path(o->a), &r->hay, &r->err))
        goto fail;
    r->ctx = o->a->ctx ? o->a->ctx : r->trained;
    if (r->ctx > r->trained) {
        fprintf(stderr, "recall longctx: a context of %d positions was requested but the model was trained on %d\n",
                r->ctx, r->trained);
        return 1;
    }
    return 0;
fail:
    fprintf(stderr, "recall longctx: %s\n", r->err.msg);
    return 1;
}

static int has_arm(const longctx_opts *o, rc_arm arm) {
    for (int a = 0; a < o->n_arms; a++)
        if (rc_arm_parse(o->arms[a], NULL) == (int)arm) return 1;
    return 0;
}

static void case_label(const rc_lctx_case *c, char *buf, size_t n) {
    snprintf(buf, n, "%s len %d depth %g", rc_lctx_task_name(c->task), c->len, c->depth);
}

/* Every case of task x len x depth, then the FULL arm's check of each: nothing has run yet. */
static int longctx_build(longctx_run *r) {
    const longctx_opts *o = r->o;
    int n = o->n_tasks * o->n_lens * o->n_depths;
    r->cases = calloc((size_t)n, sizeof *r->cases);
    r->res = calloc((size_t)n * MAX_ARMS, sizeof *r->res);
    if (!r->cases || !r->res) {
        fprintf(stderr, "recall longctx: out of memory\n");
        return 1;
    }
    for (int t = 0; t < o->n_tasks; t++)
        for (int l = 0; l < o->n_lens; l++)
            for (int d = 0; d < o->n_depths; d++) {
                if (rc_lctx_build(r->bpe, &r->hay, o->tasks[t], o->lens[l], o->depths[d], o->a->seed,
                                  &r->cases[r->n_cases], &r->err)) {
                    fprintf(stderr, "recall longctx: %s\n", r->err.msg);
                    return 1;
                }
                r->n_cases++;
            }
    fprintf(stderr, "longctx: %d cases from %s (%d tokens, xxh64 %016llx)\n", r->n_cases, haystack_path(o->a), r->hay.n,
            (unsigned long long)r->hay.xxh64);
    if (!has_arm(o, RC_ARM_FULL)) return 0;
    for (int c = 0; c < r->n_cases; c++) {
        const rc_lctx_case *k = &r->cases[c];
        long need = 1L + k->n_ids + o->a->max_new + 1; /* as the loop checks it (recall_loop.h) */
        if (need > r->ctx) {
            char lab[96];
            case_label(k, lab, sizeof lab);
            fprintf(stderr,
                    "recall longctx: case %d (%s): the FULL arm needs %ld positions (BOS + %d prompt + %d reply + 1) "
                    "but its context holds %d (the model was trained on %d); nothing was run\n",
                    c, lab, need, k->n_ids, o->a->max_new, r->ctx, r->trained);
            return 1;
        }
    }
    return 0;
}

/* --prompts DIR: every case's ids and text, so that another engine gets the same prompt. */
static int longctx_write_prompts(const longctx_run *r) {
    const char *dir = r->o->a->prompts;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "recall longctx: --prompts %s: %s\n", dir, strerror(errno));
        return 1;
    }
    size_t cap = strlen(dir) + 32;
    char *path = malloc(cap);
    if (!path) {
        fprintf(stderr, "recall longctx: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int c = 0; !rc && c < r->n_cases; c++) {
        const rc_lctx_case *k = &r->cases[c];
        char *text = NULL;
        size_t len;
        recall_err err = {0};
        rc_afile af;
        snprintf(path, cap, "%s/case-%d.ids", dir, c);
        FILE *f = cli_create("longctx", &af, path);
        if (!f) rc = 1;
        else rc_json_put_ids(f, k->ids, k->n_ids), fputc('\n', f), rc = cli_commit("longctx", &af, 1);
        if (rc) break;
        if (rc_bpe_decode(r->bpe, k->ids, (size_t)k->n_ids, 0, &text, &len, &err)) {
            rc = cli_fail("longctx", &err);
            break;
        }
        snprintf(path, cap, "%s/case-%d.txt", dir, c);
        f = cli_create("longctx", &af, path);
        if (!f) rc = 1;
        else fwrite(text, 1, len, f), rc = cli_commit("longctx", &af, 1);
        free(text);
    }
    free(path);
    return rc;
}

/* Prefill progress: a line each time the forced prompt passes another tenth. */
typedef struct {
    const char *arm;
    const rc_lctx_case *c;
    int next; /* the next tenth to report */
} progress;

static int on_event(void *ctx, const rc_event *ev) {
    progress *p = ctx;
    if (ev->kind != RC_EV_REBUILD) return 0;
    int c0 = ((const rc_rebuild_rec *)ev->rec)->c0, n = p->c->n_ids;
    if (c0 > n || (long)c0 * 10 < (long)p->next * n) return 0;
    while ((long)c0 * 10 >= (long)p->next * n) p->next++;
    char lab[96];
    case_label(p->c, lab, sizeof lab);
    fprintf(stderr, "[%s] %s: prefill %d/%d\n", p->arm, lab, c0, n);
    return 0;
}

/* Every case on arm a, one recall loop for all of them (each case is a new conversation). */
static int longctx_run_arm(longctx_run *r, int a) {
    const longctx_opts *o = r->o;
    rc_recall_opts ro;
    cli_loop_opts(o->a, r->b, &ro);
    ro.turn_cap = o->a->max_new;
    ro.arm = (rc_arm)rc_arm_parse(o->arms[a], NULL); /* a label cli_add_arm took */
    rc_recall *rec = NULL;
    if (rc_recall_open(r->b, &ro, &rec, &r->err)) return cli_fail("longctx", &r->err);
    if (a == 0) cli_banner("longctx", rc_recall_simd_name(rec), rc_recall_threads(rec));
    int rc = 0;
    for (int c = 0; !rc && c < r->n_cases; c++) {
        const rc_lctx_case *k = &r->cases[c];
        arm_result *res = &r->res[(size_t)c * MAX_ARMS + a];
        progress pg = {o->arms[a], k, 1};
        rc_turn turn;
        size_t len;
        rc_recall_forget(rec);
        double t0 = now_s();
        if (rc_recall_reply(rec, k->ids, k->n_ids, on_event, &pg, &turn, &r->err) ||
            rc_bpe_decode(r->bpe, turn.reply, (size_t)turn.n_reply, 1, &res->reply, &len, &r->err)) {
            fprintf(stderr, "recall longctx: %s\n", r->err.msg);
            rc = 1;
        } else {
            res->seconds = now_s() - t0;
            res->n_reply = turn.n_reply;
            res->n_gates = turn.n_gates;
            res->n_fires = turn.n_fires;
            res->exact = rc_lctx_answer(res->reply, k->expected, res->answer, sizeof res->answer);
            char lab[96];
            case_label(k, lab, sizeof lab);
            fprintf(stderr, "[%s] %s: answer \"%s\", expected %s, %s (%.1f s)\n", o->arms[a], lab, res->answer,
                    k->expected, res->exact ? "exact" : "wrong", res->seconds);
        }
        rc_turn_free(&turn);
    }
    rc_recall_close(rec);
    return rc;
}

static int arm_exact(const longctx_run *r, int a) {
    int k = 0;
    for (int c = 0; c < r->n_cases; c++) k += r->res[(size_t)c * MAX_ARMS + a].exact;
    return k;
}

static void write_case(FILE *f, const longctx_run *r, int c) {
    const longctx_opts *o = r->o;
    const rc_lctx_case *k = &r->cases[c];
    fprintf(f, "%s\n{\"task\": \"%s\", \"len\": %d, \"prompt_tokens\": %d, \"prompt_xxh64\": \"%016llx\", \"depth\": ",
            c ? "," : "", rc_lctx_task_name(k->task), k->len, k->n_ids, (unsigned long long)k->ids_xxh64);
    rc_json_put_num(f, k->depth);
    fputs(", \"depth_actual\": ", f);
    rc_json_put_num(f, k->depth_actual);
    fprintf(f, ", \"answer_token\": %d, \"context_tokens\": [%d, %d], \"haystack_offset\": %d, \"haystack_tokens\": %d, "
               "\"expected\": \"%s\", \"question\": ",
            k->ins_first[k->key], k->ctx_first, k->ctx_end, k->hay_off, k->hay_tokens, k->expected);
    rc_json_put_str(f, k->question);
    fputs(", \"inserts\": [", f);
    for (int i = 0; i < k->n_inserts; i++) {
        fprintf(f, "%s{\"first\": %d, \"last\": %d, \"depth\": ", i ? ", " : "", k->ins_first[i], k->ins_last[i]);
        rc_json_put_num(f, k->ins_depth[i]);
        fprintf(f, ", \"asked\": %s}", i == k->key ? "true" : "false");
    }
    fputs("], \"arms\": {", f);
    for (int a = 0; !o->a->no_run && a < o->n_arms; a++) {
        const arm_result *res = &r->res[(size_t)c * MAX_ARMS + a];
        fprintf(f, "%s\"%s\": {\"answer\": ", a ? ", " : "", o->arms[a]);
        rc_json_put_str(f, res->answer);
        fprintf(f, ", \"exact\": %s, \"n_reply\": %d, \"gates\": %d, \"fires\": %d, \"reply\": ",
                res->exact ? "true" : "false", res->n_reply, res->n_gates, res->n_fires);
        rc_json_put_str(f, res->reply ? res->reply : "");
        fprintf(f, ", \"seconds\": %.2f}", res->seconds);
    }
    fputs("}}", f);
}

static int longctx_write_json(const longctx_run *r) {
    const longctx_opts *o = r->o;
    rc_afile af;
    FILE *f = cli_create("longctx", &af, o->a->json);
    if (!f) return 1;
    rc_recall_opts ro; /* the loop's options as the arms ran them: top_k and the firing rules */
    cli_loop_opts(o->a, r->b, &ro);
    fputs("{\"blob\": ", f);
    rc_json_put_str(f, o->a->pos[0]);
    fprintf(f, ", \"blob_xxh64\": \"%016llx\", \"haystack\": ", (unsigned long long)rc_blob_hdr(r->b)->body_checksum);
    rc_json_put_str(f, haystack_path(o->a));
    fprintf(f, ", \"haystack_xxh64\": \"%016llx\", \"haystack_tokens\": %d, \"seed\": %llu, \"max_new\": %d, "
               "\"mode\": \"%s\", \"edge\": \"%s\", \"span\": \"%s\", \"rerank\": \"%s\", \"top_k\": %d, "
               "\"kv\": \"%s\", \"numerics\": \"%s\", "
               "\"context\": %d, \"trained_positions\": %d, "
               "\"ran\": %s",
            (unsigned long long)r->hay.xxh64, r->hay.n, (unsigned long long)o->a->seed, o->a->max_new,
            rc_mode_name(o->a->loop.mode), rc_edge_name(o->a->loop.edge), rc_span_name(o->a->loop.span),
            rc_rerank_name(o->a->loop.rerank), ro.k,
            rc_kv_dtype_name((rc_kv_dtype)o->a->loop.kv), rc_numerics_name(o->a->loop.exec.numerics), r->ctx,
            r->trained, o->a->no_run ? "false" : "true");
    cli_put_firing(f, &ro);
    cli_put_build(f, r->b, o->a->loop.exec.numerics, o->a->loop.kv, o->a->loop.lm_screen);
    fputs(",\n\"cases\": [", f);
    for (int c = 0; c < r->n_cases; c++) write_case(f, r, c);
    fputs("],\n\"summary\": {", f);
    for (int a = 0; !o->a->no_run && a < o->n_arms; a++) {
        int k = arm_exact(r, a);
        fprintf(f, "%s\"%s\": {\"cases\": %d, \"exact\": %d, \"rate\": ", a ? ", " : "", o->arms[a], r->n_cases, k);
        rc_json_put_num(f, r->n_cases ? (double)k / r->n_cases : NAN);
        fputc('}', f);
    }
    fputs("}}\n", f);
    return cli_commit("longctx", &af, 1);
}

static void longctx_close(longctx_run *r) {
    for (int c = 0; c < r->n_cases; c++) {
        rc_lctx_case_free(&r->cases[c]);
        for (int a = 0; a < MAX_ARMS; a++) free(r->res[(size_t)c * MAX_ARMS + a].reply);
    }
    free(r->cases);
    free(r->res);
    rc_lctx_haystack_free(&r->hay);
    rc_bpe_free(r->bpe);
    rc_blob_close(r->b);
}

int cli_longctx(const cli_args *given) {
    if (strstr(given->task, "farfact")) return cli_farfact(given); /* chats, not haystack prompts */
    if (given->bench || given->cases || !isnan(given->fact_share))
        return cli_usage_error("longctx", "%s is an option of --task farfact",
                               given->bench ? "--bench" : given->cases ? "--cases" : "--fact-share");
    cli_args args = *given;
    if (!args.max_new) args.max_new = 32;
    const cli_args *a = &args;
    longctx_opts o;
    int rc = longctx_parse_lists(a, &o);
    if (rc) return rc;
    if (cli_ctx_needs_full(a, has_arm(&o, RC_ARM_FULL))) return 2;
    longctx_run r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    rc = longctx_open(&r);
    if (!rc) rc = longctx_build(&r);
    if (!rc && a->prompts) rc = longctx_write_prompts(&r);
    for (int k = 0; !rc && !a->no_run && k < o.n_arms; k++) rc = longctx_run_arm(&r, k);
    if (!rc) {
        printf("%-8s %s\n", "arm", "exact");
        for (int k = 0; !a->no_run && k < o.n_arms; k++) printf("%-8s %d/%d\n", o.arms[k], arm_exact(&r, k), r.n_cases);
        fflush(stdout);
        if (a->json) rc = longctx_write_json(&r);
    }
    longctx_close(&r);
    return rc;
}
