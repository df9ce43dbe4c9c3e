/* cli_farfact.c - `recall longctx --task farfact`: far-back recall (docs/LONG_CONTEXT.md, "Far-back
 * recall"). Per distance (--len) and case (--cases), a chat of the bench's exchanges with one fact
 * that far before its question (src/harness/farfact.c builds it; farfact.h has every definition) is forced
 * through the recall loop as one feed and the question answered greedily on each arm, as `eval`
 * runs a problem's question turns. FULL runs only the cases its context holds (BOS + feed +
 * reply cap + 1 positions); the others are recorded as not run, with the positions they need. A
 * line per case on stderr, a table per distance and arm on stdout, every record in --json. */
#include "blob.h"
#include "checksum.h"
#include "cli.h"
#include "farfact.h"
#include "json.h"
#include "problems.h"
#include "q8.h"
#include "qwen2.h"
#include "recall_loop.h"
#include "rope.h"
#include "tokenize_bpe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DISTS 16
#define MAX_ARMS 3

typedef struct {
    int ran; /* 0: FULL could not hold the case, or --no-run */
    rc_ff_result r;
    char *reply;
    int32_t *reply_ids;
    int n_reply, n_gates, n_fires, bert_encodes;
    double seconds;
} ff_res;

typedef struct {
    const cli_args *a;
    int dists[MAX_DISTS], n_dists, n_per; /* distances; cases per distance */
    double share;                         /* --fact-share */
    char arms[MAX_ARMS][16];
    int n_arms;
    rc_blob *b;
    rc_bpe *bpe;
    rc_bench *bench;
    uint64_t bench_xxh64;
    int eos, trained, ctx, max_new;
    rc_recall_opts geo; /* the loop's geometry (window, block, buf_min, threshold) */
    rc_ff_case *cases;  /* [dist][case] */
    int n_cases;
    ff_res *res;        /* [case][arm] */
    recall_err err;
} ff_run;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The gist pools every evicted token and refuses more than 2^24 of them (pooler.c): a chat must
 * stay below that, so a distance is at most half of it. */
#define MAX_DIST (1L << 23)

static int add_dist(void *ctx, const char *s) {
    ff_run *r = ctx;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > MAX_DIST || r->n_dists == MAX_DISTS) return -1;
    r->dists[r->n_dists++] = (int)v;
    return 0;
}

static int add_arm(void *ctx, const char *s) {
    ff_run *r = ctx;
    return cli_add_arm((char *)r->arms, sizeof r->arms[0], &r->n_arms, MAX_ARMS, s);
}

/* The options farfact reads, and those it refuses (they belong to the haystack tasks); 0 or 2. */
static int ff_parse(const cli_args *a, ff_run *r) {
    if (strcmp(a->task, "farfact"))
        return cli_usage_error("longctx", "--task %s: farfact runs alone (its cases are chats, not haystack prompts)",
                               a->task);
    const char *refused = a->depth ? "--depth" : a->haystack ? "--haystack" : a->prompts ? "--prompts" : NULL;
    if (refused) return cli_usage_error("longctx", "%s is an option of the haystack tasks, not of farfact", refused);
    if (!a->bench) return cli_usage_error("longctx", "--task farfact needs --bench FILE (the facts and casual pairs)");
    if (cli_each_item(a->len, 16, add_dist, r))
        return cli_usage_error("longctx", "--len %s: expected a comma-separated list of distances in tokens, 0..%ld "
                               "(at most %d; the gist pools at most 2^24 tokens)", a->len, MAX_DIST, MAX_DISTS);
    if (cli_each_item(a->arms ? a->arms : "FULL,SP,RC_bge", 16, add_arm, r))
        return cli_usage_error("longctx", "--arms %s: expected " RC_ARM_NAMES ", each once", a->arms);
    r->n_per = a->cases ? a->cases : 10;
    r->share = isnan(a->fact_share) ? RC_FF_FACT_SHARE : a->fact_share;
    return 0;
}

/* The blob, its tokenizer, the bench and the cases; 0 or 1 (printed). */
static int ff_open(ff_run *r) {
    const cli_args *a = r->a;
    size_t size, len;
    char *text = NULL;
    const void *sec;
    if (cli_blob_open(a, a->pos[0], 0, &r->b, &r->err) || rc_rope_blob_positions(r->b, &r->trained, &r->err) ||
        rc_blob_get_int(r->b, "tok.eos", 0, 0x7fffffff, &r->eos, &r->err) || rc_read_file(a->bench, &text, &len, &r->err) ||
        rc_bench_load(a->bench, &r->bench, &r->err))
        goto fail;
    r->bench_xxh64 = rc_xxh64(text, len, 0);
    free(text);
    text = NULL;
    sec = rc_blob_section(r->b, RC_SECT_TOK_BPE, &size);
    if (!sec) {
        fprintf(stderr, "recall longctx: %s: no BPE tokenizer section\n", a->pos[0]);
        return 1;
    }
    if (rc_bpe_load(sec, size, &r->bpe, &r->err)) goto fail;
    cli_loop_opts(a, r->b, &r->geo);
    r->max_new = a->max_new ? a->max_new : r->geo.turn_cap;
    r->ctx = a->ctx ? a->ctx : r->trained;
    if (r->ctx > r->trained) {
        fprintf(stderr, "recall longctx: a context of %d positions was requested but the model was trained on %d\n",
                r->ctx, r->trained);
        return 1;
    }
    r->cases = calloc((size_t)r->n_dists * r->n_per, sizeof *r->cases);
    r->res = calloc((size_t)r->n_dists * r->n_per * MAX_ARMS, sizeof *r->res);
    if (!r->cases || !r->res) {
        fprintf(stderr, "recall longctx: out of memory\n");
        return 1;
    }
    for (int d = 0; d < r->n_dists; d++)
        for (int i = 0; i < r->n_per; i++) {
            const rc_ff_spec sp = {r->dists[d], a->seed, i, r->share};
            if (rc_ff_build(r->bpe, r->eos, r->bench, &sp, &r->cases[r->n_cases], &r->err)) goto fail;
            r->n_cases++;
        }
    fprintf(stderr, "longctx: %d farfact cases (%d distances x %d) from %s\n", r->n_cases, r->n_dists, r->n_per, a->bench);
    return 0;
fail:
    free(text);
    fprintf(stderr, "recall longctx: %s\n", r->err.msg);
    return 1;
}

/* One case on an open loop: the turn, its reply and its score. */
static int ff_case(ff_run *r, rc_recall *rec, int c, int a) {
    const rc_ff_case *k = &r->cases[c];
    ff_res *res = &r->res[(size_t)c * MAX_ARMS + a];
    rc_turn turn;
    size_t len;
    rc_recall_forget(rec);
    double t0 = now_s();
    if (rc_recall_reply(rec, k->ids, k->n_ids, NULL, NULL, &turn, &r->err)) return cli_fail("longctx", &r->err);
    res->seconds = now_s() - t0;
    int rc = 0;
    res->reply_ids = malloc((size_t)(turn.n_reply ? turn.n_reply : 1) * sizeof *res->reply_ids);
    if (!res->reply_ids) rc = fprintf(stderr, "recall longctx: out of memory\n") > 0;
    else if (rc_bpe_decode(r->bpe, turn.reply, (size_t)turn.n_reply, 1, &res->reply, &len, &r->err) ||
             rc_ff_score(k, &turn, res->reply, &r->geo, &res->r, &r->err))
        rc = cli_fail("longctx", &r->err);
    if (!rc) {
        memcpy(res->reply_ids, turn.reply, (size_t)turn.n_reply * sizeof *turn.reply);
        res->ran = 1;
        res->n_reply = turn.n_reply;
        res->n_gates = turn.n_gates;
        res->n_fires = turn.n_fires;
        res->bert_encodes = turn.bert_encodes;
        fprintf(stderr, "[%s] farfact distance %d case %d (%d tokens): answer \"%s\", expected %s, %s; fired %s, "
                        "retrieved %s, rank %d of %d (%.1f s)\n",
                r->arms[a], k->spec.dist, k->spec.index, k->n_ids, res->r.answer, k->val, res->r.exact ? "exact" : "wrong",
                res->r.fired ? "yes" : "no", res->r.retrieved ? "yes" : "no", res->r.rank, res->r.ncand, res->seconds);
    }
    rc_turn_free(&turn);
    return rc;
}

/* Every case on arm a, one loop for all of them (each case a new conversation). */
static int ff_run_arm(ff_run *r, int a) {
    rc_recall_opts ro;
    cli_loop_opts(r->a, r->b, &ro);
    ro.turn_cap = r->max_new;
    ro.arm = (rc_arm)rc_arm_parse(r->arms[a], NULL); /* a label cli_add_arm took */
    rc_recall *rec = NULL;
    if (rc_recall_open(r->b, &ro, &rec, &r->err)) return cli_fail("longctx", &r->err);
    if (a == 0) cli_banner("longctx", rc_recall_simd_name(rec), rc_recall_threads(rec));
    int rc = 0;
    for (int c = 0; !rc && c < r->n_cases; c++) {
        const long need = 1L + r->cases[c].n_ids + r->max_new + 1; /* as the loop checks it (recall_loop.h) */
        if (ro.arm == RC_ARM_FULL && need > r->ctx) continue; /* recorded as not run */
        rc = ff_case(r, rec, c, a);
    }
    rc_recall_close(rec);
    return rc;
}

/* ---------------------------------------------------------------- the table and the document */

typedef struct {
    int cases, ran, exact, fired, retrieved, early, tokens, min_tokens;
    double seconds;
} ff_sum;

static ff_sum ff_summarize(const ff_run *r, int d, int a) {
    ff_sum s = {0};
    s.min_tokens = 0x7fffffff;
    for (int i = 0; i < r->n_per; i++) {
        const int c = d * r->n_per + i;
        const ff_res *x = &r->res[(size_t)c * MAX_ARMS + a];
        s.cases++;
        s.tokens += r->cases[c].n_ids;
        if (r->cases[c].n_ids < s.min_tokens) s.min_tokens = r->cases[c].n_ids;
        if (!x->ran) continue;
        s.ran++;
        s.exact += x->r.exact;
        s.fired += x->r.fired;
        s.retrieved += x->r.retrieved;
        s.early += x->r.early;
        s.seconds += x->seconds;
    }
    return s;
}

static void ff_table(const ff_run *r) {
    printf("%-9s %-7s %-13s %-8s %-10s %-12s %-12s %s\n", "distance", "arm", "exact", "fired", "retrieved",
           "early fires", "feed tokens", "s/case");
    for (int d = 0; d < r->n_dists; d++)
        for (int a = 0; a < r->n_arms; a++) {
            const ff_sum s = ff_summarize(r, d, a);
            if (!s.ran) {
                printf("%-9d %-7s not run: %s\n", r->dists[d], r->arms[a],
                       r->a->no_run ? "--no-run" : "no case fits the FULL arm's context");
                continue;
            }
            char ex[32], fi[16] = "-", re[16] = "-", ea[16] = "-";
            snprintf(ex, sizeof ex, "%d/%d (%.0f%%)", s.exact, s.ran, 100.0 * s.exact / s.ran);
            if (rc_arm_parse(r->arms[a], NULL) == RC_ARM_RC_BGE) {
                snprintf(fi, sizeof fi, "%d/%d", s.fired, s.ran);
                snprintf(re, sizeof re, "%d/%d", s.retrieved, s.ran);
                snprintf(ea, sizeof ea, "%.1f", (double)s.early / s.ran);
            }
            printf("%-9d %-7s %-13s %-8s %-10s %-12s %-12d %.1f\n", r->dists[d], r->arms[a], ex, fi, re, ea,
                   s.tokens / s.cases, s.seconds / s.ran);
        }
    fflush(stdout);
}

static void put_bool(FILE *f, const char *key, int v) { fprintf(f, ", \"%s\": %s", key, v ? "true" : "false"); }

/* One record: the case, the arm and what it did (farfact.h defines each field). */
static void ff_record(FILE *f, const ff_run *r, int c, int a, int first) {
    const rc_ff_case *k = &r->cases[c];
    const ff_res *x = &r->res[(size_t)c * MAX_ARMS + a];
    const int nd = k->q_first > r->geo.window ? k->q_first - r->geo.window : 0;
    fprintf(f, "%s\n{\"arm\": \"%s\", \"mode\": \"%s\", \"edge\": \"%s\", \"span\": \"%s\", \"rerank\": \"%s\", "
               "\"numerics\": \"%s\", \"kv\": \"%s\", \"distance\": %d, \"case\": %d",
            first ? "" : ",", r->arms[a], rc_mode_name(r->a->loop.mode), rc_edge_name(r->a->loop.edge),
            rc_span_name(r->a->loop.span), rc_rerank_name(r->a->loop.rerank),
            rc_numerics_name(r->a->loop.exec.numerics), rc_kv_dtype_name((rc_kv_dtype)r->a->loop.kv), k->spec.dist,
            k->spec.index);
    fputs(", \"kw\": ", f), rc_json_put_str(f, k->kw);
    fputs(", \"val\": ", f), rc_json_put_str(f, k->val);
    fprintf(f, ", \"prompt_tokens\": %d, \"prompt_xxh64\": \"%016llx\", \"distance_actual\": %d, \"lead\": %d, "
               "\"exchanges\": %d, \"filler_facts\": %d, \"filler_casual\": %d, \"fact_tokens\": [%d, %d], "
               "\"value_tokens\": [%d, %d], \"question_token\": %d, \"archived_blocks\": %d",
            k->n_ids, (unsigned long long)k->ids_xxh64, k->distance, k->lead, k->n_exchanges, k->n_fill_facts,
            k->n_fill_casual, k->fact_first, k->fact_last, k->val_first, k->val_last, k->q_first, nd / r->geo.block);
    put_bool(f, "ran", x->ran);
    if (!x->ran && !r->a->no_run)
        fprintf(f, ", \"not_run\": \"FULL needs %d positions, its context holds %d\"", 1 + k->n_ids + r->max_new + 1,
                r->ctx);
    if (x->ran) {
        put_bool(f, "fired", x->r.fired);
        put_bool(f, "injected", x->r.injected);
        put_bool(f, "retrieved", x->r.retrieved);
        fprintf(f, ", \"rank\": %d, \"candidates\": %d, \"first_fire_c0\": %d, \"early_fires\": %d, \"gates\": %d, "
                   "\"question_gates\": %d, \"question_gate_max\": ",
                x->r.rank, x->r.ncand, x->r.first_c0, x->r.early, x->n_gates, x->r.q_gates);
        rc_json_put_num(f, x->r.q_gate_max);
        fprintf(f, ", \"fires\": %d, \"bert_encodes\": %d, \"answer\": ", x->n_fires, x->bert_encodes);
        rc_json_put_str(f, x->r.answer);
        put_bool(f, "exact", x->r.exact);
        fprintf(f, ", \"n_reply\": %d, \"reply\": ", x->n_reply);
        rc_json_put_str(f, x->reply);
        fputs(", \"reply_ids\": ", f);
        rc_json_put_ids(f, x->reply_ids, x->n_reply);
        fprintf(f, ", \"seconds\": %.2f", x->seconds);
    }
    fputc('}', f);
}

static int ff_write_json(const ff_run *r) {
    const cli_args *a = r->a;
    rc_afile af;
    FILE *f = cli_create("longctx", &af, a->json);
    if (!f) return 1;
    fputs("{\"task\": \"farfact\", \"blob\": ", f);
    rc_json_put_str(f, a->pos[0]);
    fprintf(f, ", \"blob_xxh64\": \"%016llx\", \"bench\": ", (unsigned long long)rc_blob_hdr(r->b)->body_checksum);
    rc_json_put_str(f, a->bench);
    fprintf(f, ", \"bench_xxh64\": \"%016llx\", \"seed\": %llu, \"cases_per_distance\": %d, \"fact_share\": %.17g, "
               "\"max_new\": %d, "
               "\"mode\": \"%s\", \"edge\": \"%s\", \"span\": \"%s\", \"rerank\": \"%s\", \"kv\": \"%s\", "
               "\"numerics\": \"%s\", \"context\": %d, "
               "\"trained_positions\": %d, \"window\": %d, \"block\": %d, \"buf_min\": %d, \"top_k\": %d",
            (unsigned long long)r->bench_xxh64, (unsigned long long)a->seed, r->n_per, r->share, r->max_new,
            rc_mode_name(a->loop.mode), rc_edge_name(a->loop.edge), rc_span_name(a->loop.span),
            rc_rerank_name(a->loop.rerank),
            rc_kv_dtype_name((rc_kv_dtype)a->loop.kv),
            rc_numerics_name(a->loop.exec.numerics), r->ctx, r->trained, r->geo.window, r->geo.block, r->geo.buf_min,
            r->geo.k);
    cli_put_firing(f, &r->geo);
    fprintf(f, ", \"ran\": %s", a->no_run ? "false" : "true");
    cli_put_build(f, r->b, a->loop.exec.numerics, a->loop.kv, a->loop.lm_screen);
    fputs(",\n\"records\": [", f);
    int first = 1;
    for (int c = 0; c < r->n_cases; c++)
        for (int k = 0; k < r->n_arms; k++, first = 0) ff_record(f, r, c, k, first);
    fputs("],\n\"summary\": [", f);
    first = 1;
    for (int d = 0; d < r->n_dists; d++)
        for (int k = 0; k < r->n_arms; k++, first = 0) {
            const ff_sum s = ff_summarize(r, d, k);
            fprintf(f, "%s\n{\"arm\": \"%s\", \"distance\": %d, \"cases\": %d, \"ran\": %d, \"exact\": %d, \"fired\": %d, "
                       "\"retrieved\": %d, \"rate\": ",
                    first ? "" : ",", r->arms[k], r->dists[d], s.cases, s.ran, s.exact, s.fired, s.retrieved);
            rc_json_put_num(f, s.ran ? (double)s.exact / s.ran : NAN);
            fputc('}', f);
        }
    fputs("]}\n", f);
    return cli_commit("longctx", &af, 1);
}

static void ff_close(ff_run *r) {
    for (int c = 0; c < r->n_cases; c++) {
        rc_ff_case_free(&r->cases[c]);
        for (int a = 0; a < MAX_ARMS; a++) {
            free(r->res[(size_t)c * MAX_ARMS + a].reply);
            free(r->res[(size_t)c * MAX_ARMS + a].reply_ids);
        }
    }
    free(r->cases);
    free(r->res);
    rc_bench_free(r->bench);
    rc_bpe_free(r->bpe);
    rc_blob_close(r->b);
}

int cli_farfact(const cli_args *a) {
    ff_run r;
    memset(&r, 0, sizeof r);
    r.a = a;
    int rc = ff_parse(a, &r);
    if (rc) return rc;
    int has_full = 0;
    for (int k = 0; k < r.n_arms; k++) has_full |= rc_arm_parse(r.arms[k], NULL) == RC_ARM_FULL;
    if (cli_ctx_needs_full(a, has_full)) return 2;
    rc = ff_open(&r);
    for (int k = 0; !rc && !a->no_run && k < r.n_arms; k++) rc = ff_run_arm(&r, k);
    if (!rc) {
        ff_table(&r);
        if (a->json) rc = ff_write_json(&r);
    }
    ff_close(&r);
    return rc;
}
