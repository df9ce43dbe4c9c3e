/* bench_draft.c - exact speculative decoding (--draft N) against plain decoding, interleaved in
 * one process: decode tokens/s, the draft acceptance, and a check that both produced the same
 * reply ids (bitwise the same outputs is what tests/test_draft.c proves; here it is a guard).
 *
 * Cases (each a turn on the FULL arm: the feed is prefilled once, then the reply is decoded;
 * decode time runs from the first streamed token to the turn's end, so the prefill is not in it):
 *   bench   the recall benchmark problem P's first T generated turns (the loop's chat template)
 *   copy    a copy-heavy feed: a random passage of L ids, then the model's own plain reply to it,
 *           then the passage again: a model that copies replies what followed the passage before.
 *           The random world never copies (every draft is rejected: this measures their cost);
 *           the copy world (`make synth-copy`, gen_synth --copy-world: same shapes, a model
 *           whose greedy replies cycle) is the case the drafts are for
 *   random  L random ids (below the special tokens)
 *   rows    the verify forward's cost: n = 1, 2, 3, 5, 9, 17 rows after 512 cached positions, logits
 *           of every row (what a verify computes), median of 5 interleaved rounds; n / time is
 *           the decode rate when every draft of n - 1 tokens is accepted (teacher-forced bound)
 *
 * usage: bench_draft BLOB BENCH.json [--case bench|copy|random|rows|all] [--draft N] [--reps R]
 *                    [--problem P] [--turns T] [--len L] [--cap C] [--show]
 * (RECALL_THREADS / RECALL_SIMD pick threads and path; RECALL_BENCH_LOAD=huge the blob's loading)
 */
#include "bench_problem.h"
#include "bench_util.h"
#include "problems.h"
#include "blob.h"
#include "qwen2.h"
#include "recall_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Decode time of a turn: from its first token event to its end. */
typedef struct {
    double t_first, decode_s;
    int started;
} clock_ev;

static int on_event(void *ctx, const rc_event *e) {
    clock_ev *c = ctx;
    if (e->kind == RC_EV_TOKEN && !c->started) {
        c->t_first = bench_now_s();
        c->started = 1;
    }
    return 0;
}

static void on_turn(void *ctx, int index, const rc_problem_turn *t) {
    (void)index;
    clock_ev *c = ctx;
    if (c->started && t->turn.n_reply > 0) c->decode_s += bench_now_s() - c->t_first;
    c->started = 0;
}

typedef struct {
    double decode_s;
    long tokens, drafted, accepted, verifies;
    int32_t *reply; /* all turns' replies, concatenated */
    int n_reply;
} result;

static void add_turn(result *res, const rc_turn *t) {
    res->tokens += t->n_reply;
    res->drafted += t->drafted;
    res->accepted += t->accepted;
    res->verifies += t->verifies;
    res->reply = realloc(res->reply, (size_t)(res->n_reply + t->n_reply + 1) * sizeof *res->reply);
    memcpy(res->reply + res->n_reply, t->reply, (size_t)t->n_reply * sizeof *t->reply);
    res->n_reply += t->n_reply;
}

static rc_recall *open_loop(const rc_blob *b, int draft, int cap) {
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.arm = RC_ARM_FULL;
    o.draft = draft;
    if (cap >= 0) o.turn_cap = cap;
    rc_recall *r;
    recall_err err = {0};
    bench_check(rc_recall_open(b, &o, &r, &err), "bench_draft", &err);
    return r;
}

/* One turn for `feed` (p NULL), or the benchmark problem p's first turns. */
static void run_loop(const rc_blob *b, int draft, int cap, const int32_t *feed, int n, const rc_problem *p,
                     result *res) {
    memset(res, 0, sizeof *res);
    rc_recall *r = open_loop(b, draft, cap);
    clock_ev c = {0, 0, 0};
    recall_err err = {0};
    if (!p) {
        rc_turn t;
        bench_check(rc_recall_reply(r, feed, n, on_event, &c, &t, &err), "bench_draft", &err);
        res->decode_s = c.started ? bench_now_s() - c.t_first : 0;
        add_turn(res, &t);
        rc_turn_free(&t);
    } else {
        rc_problem_run run;
        bench_check(rc_run_problem(r, p, on_event, on_turn, &c, &run, &err), "bench_draft", &err);
        res->decode_s = c.decode_s;
        for (int i = 0; i < run.n_turns; i++) add_turn(res, &run.turns[i].turn);
        rc_problem_run_free(&run);
    }
    rc_recall_close(r);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The verify forward's cost curve (the `rows` case). */
static void rows_curve(const rc_blob *b, const int32_t *ids, int eos) {
    enum { CTX = 512, NN = 6, ROUNDS = 5 };
    const int ns[NN] = {1, 2, 3, 5, 9, 17};
    recall_err err = {0};
    rc_exec *ex;
    rc_qwen2 *m;
    rc_exec_opts xo = {.threads = 0};
    if (rc_exec_open(&xo, &ex, &err) || rc_qwen2_open_ex(b, CTX + 32, ex, &m, &err) ||
        rc_qwen2_reserve(m, CTX + 32, &err)) {
        fprintf(stderr, "bench_draft: %s\n", err.msg);
        exit(1);
    }
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t *prompt = malloc(CTX * sizeof *prompt);
    for (int i = 0; i < CTX; i++) prompt[i] = (int32_t)(((uint32_t)i * 2654435761u) % (uint32_t)eos);
    float *logits = malloc((size_t)17 * V * sizeof *logits);
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = prompt;
    f.n = CTX;
    f.logits_last = logits;
    double t[NN][ROUNDS];
    int s = rc_qwen2_forward(m, &f, &err);
    for (int r = 0; r < ROUNDS && !s; r++)
        for (int i = 0; i < NN && !s; i++) {
            memset(&f, 0, sizeof f);
            f.ids = ids;
            f.n = ns[i];
            f.logits_all = logits;
            double t0 = bench_now_s();
            s = rc_qwen2_forward(m, &f, &err);
            t[i][r] = bench_now_s() - t0;
            if (!s) s = rc_qwen2_crop(m, CTX, &err);
        }
    bench_check(s, "bench_draft", &err);
    printf("verify forward after %d positions, %s, %d thread(s), median of %d:\n", CTX, ex->k.name, ex->threads, ROUNDS);
    printf("| rows | ms | vs 1 row | ms per row | tok/s if all accepted | vs 1 row |\n|---|---|---|---|---|---|\n");
    double base = 0;
    for (int i = 0; i < NN; i++) {
        qsort(t[i], ROUNDS, sizeof t[i][0], cmp_double);
        const double med = t[i][ROUNDS / 2];
        if (i == 0) base = med;
        printf("| %d | %.1f | %.2fx | %.1f | %.2f | %.2fx |\n", ns[i], 1e3 * med, med / base, 1e3 * med / ns[i],
               ns[i] / med, ns[i] * base / med);
    }
    free(prompt);
    free(logits);
    rc_qwen2_close(m);
    rc_exec_close(ex);
}

static void show(const char *what, const int32_t *ids, int n) {
    printf("%s (%d):", what, n);
    for (int i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_draft BLOB BENCH.json [--case bench|copy|random|rows|all] [--draft N] [--reps R]\n"
                        "                   [--problem P] [--turns T] [--len L] [--cap C] [--show]\n");
        return 2;
    }
    const char *which = "all";
    int draft = 8, reps = 2, problem = 0, turns = 2, len = 64, cap = -1, show_ids = 0;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--show")) {
            show_ids = 1;
            continue;
        }
        if (!strcmp(a, "--case")) which = v;
        else if (!strcmp(a, "--draft")) draft = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--problem")) problem = atoi(v);
        else if (!strcmp(a, "--turns")) turns = atoi(v);
        else if (!strcmp(a, "--len")) len = atoi(v);
        else if (!strcmp(a, "--cap")) cap = atoi(v);
        else {
            fprintf(stderr, "bench_draft: unknown argument %s\n", a);
            return 2;
        }
        i++;
    }
    recall_err err = {0};
    rc_blob *b;
    rc_bench *bench;
    rc_problem p;
    bench_open_problem("bench_draft", argv[1], argv[2], problem, turns, &b, &bench, &p);
    int64_t eos = 0;
    if (rc_blob_get_i64(b, "tok.eos", &eos, &err)) {
        fprintf(stderr, "bench_draft: %s\n", err.msg);
        return 1;
    }
    /* random ids below the special tokens (a fixed LCG: the same feed every run) */
    int32_t *rnd = malloc((size_t)(len > 17 ? len : 17) * sizeof *rnd);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < (len > 17 ? len : 17); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        rnd[i] = (int32_t)((s >> 33) % (uint64_t)eos);
    }
    /* copy: passage + its plain reply + passage */
    int32_t *copy = NULL;
    int n_copy = 0;
    const int want_copy = !strcmp(which, "copy") || !strcmp(which, "all");
    if (want_copy) {
        result g;
        run_loop(b, 0, cap, rnd, len, NULL, &g);
        n_copy = 2 * len + g.n_reply;
        copy = malloc((size_t)n_copy * sizeof *copy);
        memcpy(copy, rnd, (size_t)len * sizeof *copy);
        memcpy(copy + len, g.reply, (size_t)g.n_reply * sizeof *copy);
        memcpy(copy + len + g.n_reply, rnd, (size_t)len * sizeof *copy);
        if (show_ids) show("copy passage's reply", g.reply, g.n_reply);
        free(g.reply);
    }
    if (!strcmp(which, "rows") || !strcmp(which, "all")) rows_curve(b, rnd, (int)eos);
    if (!strcmp(which, "rows")) which = "none";
    const char *names[3] = {"bench", "copy", "random"};
    printf("bench_draft %s: draft %d vs 0, %d reps interleaved, FULL arm\n", argv[1], draft, reps);
    printf("| case | feed | tokens | tok/s plain | tok/s draft %d | speed ratio | drafted | accepted | accept rate | "
           "tokens per forward |\n|---|---|---|---|---|---|---|---|---|---|\n", draft);
    int status = 0;
    for (int k = 0; k < 3; k++) {
        if (strcmp(which, "all") && strcmp(which, names[k])) continue;
        double best[2] = {0, 0};
        result res[2] = {{0}};
        for (int rep = 0; rep < reps; rep++)
            for (int d = 0; d < 2; d++) {
                free(res[d].reply);
                const int dr = d ? draft : 0;
                if (k == 0) run_loop(b, dr, cap, NULL, 0, &p, &res[d]);
                else if (k == 1) run_loop(b, dr, cap, copy, n_copy, NULL, &res[d]);
                else run_loop(b, dr, cap, rnd, len, NULL, &res[d]);
                double tps = res[d].decode_s > 0 ? res[d].tokens / res[d].decode_s : 0;
                fprintf(stderr, "%s rep %d draft %d: %ld tokens in %.2f s (%.2f tok/s)\n", names[k], rep, dr,
                        res[d].tokens, res[d].decode_s, tps);
                if (tps > best[d]) best[d] = tps;
            }
        if (res[0].n_reply != res[1].n_reply ||
            memcmp(res[0].reply, res[1].reply, (size_t)res[0].n_reply * sizeof *res[0].reply)) {
            fprintf(stderr, "bench_draft: %s: the replies differ\n", names[k]);
            status = 1;
        }
        if (show_ids) show(names[k], res[0].reply, res[0].n_reply);
        char feed[32];
        if (k == 0) snprintf(feed, sizeof feed, "problem %d", problem);
        else snprintf(feed, sizeof feed, "%d ids", k == 1 ? n_copy : len);
        const double fwd = (double)(res[1].tokens - res[1].accepted);
        printf("| %s | %s | %ld | %.2f | %.2f | %.2fx | %ld | %ld | %.0f %% | %.2f |\n", names[k], feed, res[0].tokens,
               best[0], best[1], best[0] > 0 ? best[1] / best[0] : 0, res[1].drafted, res[1].accepted,
               res[1].drafted ? 100.0 * res[1].accepted / res[1].drafted : 0, fwd > 0 ? res[1].tokens / fwd : 0);
        free(res[0].reply);
        free(res[1].reply);
    }
    free(rnd);
    free(copy);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
    return status;
}
