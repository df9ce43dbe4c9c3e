/* bench_farback.c - what far-back recall costs (docs/LONG_CONTEXT.md, "Far-back recall"): per
 * distance, the far-fact chats of `recall longctx --task farfact` (src/harness/farfact.h builds them)
 * forced through the RC_bge loop, and what each fire of those turns cost.
 *
 * usage: bench_farback BLOB BENCH.json [--len 2048,8192,32768] [--cases 3] [--seed 0] [--threads 1]
 *                      [--mode faithful|clean] [--fact-share 0.25]
 *
 * In the loop (one line per case): the turn's wall time (the whole chat forced, the question
 * answered), the question's share of it (from the first rebuild after the question's first token
 * to the turn's end: its forced tokens, every check and fire at it, the reply), and every fire:
 * early (at a check of the forced chat) or at the question, the candidates it scored, the BERT
 * encodes it ran and its wall time (from the gate event that decided it to the fire event, so: the
 * encodes, the bridge scoring of every candidate, the top-k). The encodes follow from the fast
 * schedule's rule (src/engine/retriever.c): a sealed block is encoded once, at the first fire after it was
 * sealed, and its bridge key reused at every later fire of the conversation; the pending buffer is
 * encoded at every fire. So a fire at c0 encodes the blocks sealed since the previous fire (all of
 * them at the first) plus the buffer when it is a candidate; their sum is checked against the
 * turn's count (rc_turn.bert_encodes), so a schedule that encodes otherwise stops the bench. Peak
 * RSS per distance (VmHWM reset before its first case), and what the gist pooler's K/V cache held
 * after the turn (it keeps the evicted tokens' rows between rebuilds, up to its budget).
 *
 * Isolated (one line per distance, on case 0's archive as it stands at the question: the blocks
 * sealed from the first q_first - window tokens, and the pending buffer): a cold fire (no key
 * cached: every block encoded; what every fire costs on the reference schedule and the first fire
 * costs on the fast one), a warm fire (every sealed block's key cached: the buffer encoded), the
 * scoring alone (keys cached, no buffer: the bridge dot products and the top-k), and one block's
 * encode; medians of 5 (cold: of 3); and what --rerank words adds to a fire (the word scores over
 * the archive's ids and the choice, on a warm fire's bridge scores, the question as the query).
 * The gate feature is a fixed vector: values do not change the cost. Same bits as the loop's
 * retrieval (it is rc_retrieve_bge).
 */
#include "bench_util.h"
#include "blob.h"
#include "farfact.h"
#include "heads.h"
#include "pool.h"
#include "pooler.h"
#include "problems.h"
#include "recall_loop.h"
#include "retriever.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DISTS 16
#define MAX_FIRES 4096

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_farback: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(1);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What the event callback sees of one turn. */
typedef struct {
    const rc_recall_opts *o;
    int cached; /* sealed blocks whose keys the fires so far have encoded */
    int q_first;
    double t_gate, t_q; /* the deciding gate event; the first rebuild after the question began */
    int n;
    struct {
        int c0, ncand, encodes;
        double s;
    } fire[MAX_FIRES];
} watch;

static int on_event(void *ctx, const rc_event *ev) {
    watch *w = ctx;
    const double now = bench_now_s();
    if (ev->kind == RC_EV_GATE && ((const rc_gate_rec *)ev->rec)->fired) w->t_gate = now;
    if (ev->kind == RC_EV_REBUILD && w->t_q < 0 && ((const rc_rebuild_rec *)ev->rec)->c0 > w->q_first) w->t_q = now;
    if (ev->kind == RC_EV_FIRE && w->n < MAX_FIRES) {
        const rc_fire_rec *f = ev->rec;
        const int nd = f->c0 > w->o->window ? f->c0 - w->o->window : 0, nb = nd / w->o->block;
        w->fire[w->n].c0 = f->c0;
        w->fire[w->n].ncand = f->ncand;
        w->fire[w->n].encodes = (nb > w->cached ? nb - w->cached : 0) + (nd - nb * w->o->block >= w->o->buf_min);
        if (nb > w->cached) w->cached = nb;
        w->fire[w->n].s = now - w->t_gate;
        w->n++;
    }
    return 0;
}

/* Per distance, over its cases. */
typedef struct {
    int cases, exact, fired, retrieved, early, q_fires, encodes, tokens;
    double turn_s, q_s, fire_s, q_fire_s, q_fire_enc;
} tally;

/* One case on the loop: a line, and the tally. */
static void run_case(rc_recall *rec, const rc_bpe *bpe, const rc_recall_opts *o, const rc_ff_case *c, tally *t) {
    recall_err err = {0};
    static watch w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.q_first = c->q_first;
    w.t_q = -1;
    rc_turn turn;
    rc_recall_forget(rec);
    const double t0 = bench_now_s();
    if (rc_recall_reply(rec, c->ids, c->n_ids, on_event, &w, &turn, &err)) die("turn", &err);
    const double t1 = bench_now_s();
    rc_pooler_stats ps;
    rc_recall_pooler_stats(rec, &ps);
    char *text = NULL;
    size_t len;
    rc_ff_result r;
    if (rc_bpe_decode(bpe, turn.reply, (size_t)turn.n_reply, 1, &text, &len, &err) ||
        rc_ff_score(c, &turn, text, o, &r, &err))
        die("score", &err);
    int q_fires = 0, q_enc = 0;
    double fire_s = 0, q_fire_s = 0;
    int enc = 0;
    for (int i = 0; i < w.n; i++) enc += w.fire[i].encodes;
    if (w.n >= MAX_FIRES || enc != turn.bert_encodes) {
        fprintf(stderr, "bench_farback: the turn ran %d BERT encodes in %d fires; the fast schedule's rule gives %d\n",
                turn.bert_encodes, w.n, enc);
        exit(1);
    }
    for (int i = 0; i < w.n; i++) {
        fire_s += w.fire[i].s;
        if (w.fire[i].c0 > c->q_first) q_fires++, q_enc += w.fire[i].encodes, q_fire_s += w.fire[i].s;
    }
    printf("case distance=%d index=%d tokens=%d blocks=%d turn_s=%.3f question_s=%.3f fires=%d early=%d "
           "encodes=%d fire_s=%.4f q_fires=%d q_encodes=%d q_fire_s=%.4f exact=%d fired=%d retrieved=%d rank=%d "
           "pooler_cache_mib=%.1f fires_list=",
           c->spec.dist, c->spec.index, c->n_ids, (c->q_first > o->window ? c->q_first - o->window : 0) / o->block, t1 - t0,
           w.t_q >= 0 ? t1 - w.t_q : 0.0, w.n, r.early, turn.bert_encodes, fire_s, q_fires, q_enc, q_fire_s, r.exact,
           r.fired, r.retrieved, r.rank, ps.cache_bytes / 1048576.0);
    for (int i = 0; i < w.n; i++)
        printf("%s%d:%d:%d:%.2fms", i ? "," : "", w.fire[i].c0, w.fire[i].ncand, w.fire[i].encodes, w.fire[i].s * 1e3);
    printf("\n");
    fflush(stdout);
    t->cases++;
    t->exact += r.exact;
    t->fired += r.fired;
    t->retrieved += r.retrieved;
    t->early += r.early;
    t->q_fires += q_fires;
    t->encodes += turn.bert_encodes;
    t->tokens += c->n_ids;
    t->turn_s += t1 - t0;
    t->q_s += w.t_q >= 0 ? t1 - w.t_q : 0.0;
    t->fire_s += fire_s;
    t->q_fire_s += q_fire_s;
    t->q_fire_enc += q_enc;
    free(text);
    rc_turn_free(&turn);
}

/* The median of `reps` retrievals over archive a; kc NULL: nothing cached (cold). */
static double time_fire(const rc_retriever *rt, const rc_archive *a, const float *f, rc_key_cache *kc, int reps,
                        const rc_recall_opts *o) {
    double t[5];
    for (int r = 0; r < reps; r++) {
        recall_err err = {0};
        rc_retrieval rv;
        const double t0 = bench_now_s();
        if (rc_retrieve_bge(rt, a, f, o->k, o->buf_min, kc, &rv, &err)) die("retrieve", &err);
        t[r] = bench_now_s() - t0;
        rc_retrieval_free(&rv);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    return t[reps / 2];
}

/* The isolated fires on case c's archive at its question (see the header). */
static void isolated(const rc_blob *b, const rc_exec *ex, const rc_bpe *bpe, const rc_recall_opts *o,
                     const rc_ff_case *c) {
    recall_err err = {0};
    rc_bert *bert;
    rc_heads *heads;
    rc_wp *wp;
    size_t size;
    if (rc_bert_open_ex(b, ex, &bert, &err) || rc_heads_open(b, &heads, &err)) die("bert / heads", &err);
    const void *sec = rc_blob_section(b, RC_SECT_TOK_WORDPIECE, &size);
    if (!sec || rc_wp_load(sec, size, &wp, &err)) die("wordpiece", &err);
    const int nd = c->q_first > o->window ? c->q_first - o->window : 0, nb = nd / o->block;
    rc_archive a, sealed, one;
    rc_archive_init(&a, o->block);
    if (rc_archive_push(&a, c->ids, nd, &err)) die("archive", &err);
    for (int i = 0; i < nb; i++)
        if (!rc_archive_seal(&a, &err)) die("seal", &err);
    sealed = one = a;
    sealed.n_buf = one.n_buf = 0;
    one.n_blocks = nb > 0 ? 1 : 0;
    const int qdim = rc_bridge_qdim(heads);
    float *f = malloc((size_t)qdim * sizeof *f);
    if (!f) die("gate feature", NULL);
    for (int i = 0; i < qdim; i++) f[i] = (float)((i * 40503u) % 2001) * 1e-3f - 1.0f;
    rc_retriever rt = {bpe, wp, bert, heads, rc_bert_cfg(bert)->max_seq};
    const double cold = time_fire(&rt, &a, f, NULL, 3, o);
    rc_key_cache kc = {0};
    const double first = time_fire(&rt, &sealed, f, &kc, 1, o); /* fills the cache */
    const double warm = time_fire(&rt, &a, f, &kc, 5, o), scoring = time_fire(&rt, &sealed, f, &kc, 5, o);
    const double block = time_fire(&rt, &one, f, NULL, 5, o);
    /* --rerank words on a warm fire's scores, the question segment as the query (its added tokens
     * are not words): the pass over the archive's ids that the option adds to a fire */
    rc_retrieval rv;
    if (rc_retrieve_bge(&rt, &a, f, o->k, o->buf_min, &kc, &rv, &err)) die("retrieve", &err);
    double tw[5];
    for (int r = 0; r < 5; r++) {
        const double t0 = bench_now_s();
        if (rc_retrieve_rerank_words(&a, bpe, c->ids + c->q_first, c->n_ids - c->q_first, o->k, 0, &rv, &err))
            die("rerank words", &err);
        tw[r] = bench_now_s() - t0;
    }
    rc_retrieval_free(&rv);
    qsort(tw, 5, sizeof *tw, cmp_d);
    printf("isolated distance=%d blocks=%d buffer=%d cold_fire_ms=%.3f cold_per_block_ms=%.4f fill_ms=%.3f "
           "warm_fire_ms=%.3f scoring_ms=%.4f block_encode_ms=%.4f rerank_words_ms=%.4f\n",
           c->spec.dist, nb, a.n_buf, cold * 1e3, nb ? cold * 1e3 / nb : 0.0, first * 1e3, warm * 1e3, scoring * 1e3,
           block * 1e3, tw[2] * 1e3);
    fflush(stdout);
    rc_key_cache_free(&kc);
    rc_archive_free(&a);
    free(f);
    rc_wp_free(wp);
    rc_heads_close(heads);
    rc_bert_close(bert);
}

/* The command line: "a,b,c" into dists. */
static int parse_dists(const char *s, int *d) {
    int n = 0;
    for (char *end; *s && n < MAX_DISTS; s = *end ? end + 1 : end) {
        d[n++] = (int)strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || d[n - 1] < 0) return -1;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *usage = "usage: bench_farback BLOB BENCH.json [--len 2048,8192,32768] [--cases 3] [--seed 0] "
                        "[--threads 1] [--mode faithful|clean] [--fact-share 0.25]\n";
    if (argc < 3) {
        fputs(usage, stderr);
        return 2;
    }
    int dists[MAX_DISTS] = {2048, 8192, 32768}, n_dists = 3, n_cases = 3, threads = 1, mode = RC_MODE_FAITHFUL;
    unsigned long long seed = 0;
    double share = RC_FF_FACT_SHARE;
    for (int i = 3; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) n_dists = -1;
        else if (!strcmp(argv[i], "--len")) n_dists = parse_dists(v, dists);
        else if (!strcmp(argv[i], "--cases")) n_cases = atoi(v);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--fact-share")) share = strtod(v, NULL);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(v);
        else if (!strcmp(argv[i], "--mode")) mode = rc_mode_parse(v, NULL);
        else n_dists = -1;
        if (n_dists < 1 || n_cases < 1 || threads < 1 || mode < 0) {
            fputs(usage, stderr);
            return 2;
        }
    }
    recall_err err = {0};
    rc_blob *b;
    rc_bench *bench;
    rc_bpe *bpe;
    rc_recall *rec;
    rc_exec *ex;
    size_t size;
    int eos;
    if (rc_blob_open(argv[1], bench_open_flags(), &b, &err) || rc_bench_load(argv[2], &bench, &err) ||
        rc_blob_get_int(b, "tok.eos", 0, 0x7fffffff, &eos, &err))
        die(argv[1], &err);
    const void *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
    if (!sec || rc_bpe_load(sec, size, &bpe, &err)) die("bpe", &err);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.mode = (rc_loop_mode)mode;
    o.exec.threads = threads;
    rc_exec_opts eo = {.threads = threads};
    if (rc_recall_open(b, &o, &rec, &err) || rc_exec_open(&eo, &ex, &err)) die("loop", &err);
    printf("farback blob=%s bench=%s mode=%s threads=%d simd=%s window=%d block=%d k=%d cases=%d seed=%llu "
           "fact_share=%g\n", argv[1], argv[2], rc_mode_name(mode), threads,
           rc_recall_simd_name(rec), o.window, o.block, o.k, n_cases, seed, share);
    for (int d = 0; d < n_dists; d++) {
        tally t = {0};
        bench_reset_peak();
        rc_ff_case c0 = {0};
        for (int i = 0; i < n_cases; i++) {
            rc_ff_case c;
            const rc_ff_spec sp = {dists[d], seed, i, share};
            if (rc_ff_build(bpe, eos, bench, &sp, &c, &err)) die("case", &err);
            run_case(rec, bpe, &o, &c, &t);
            if (i == 0) c0 = c;
            else rc_ff_case_free(&c);
        }
        const double n = t.cases;
        printf("distance=%d cases=%d tokens=%.0f exact=%d fired=%d retrieved=%d turn_s=%.3f question_s=%.3f "
               "early_fires=%.1f q_fires=%.1f encodes=%.1f fire_s=%.4f q_fire_ms=%.2f q_fire_encodes=%.1f "
               "peak_rss_mib=%.1f\n",
               dists[d], t.cases, t.tokens / n, t.exact, t.fired, t.retrieved, t.turn_s / n, t.q_s / n, t.early / n,
               t.q_fires / n, t.encodes / n, t.fire_s / n, t.q_fires ? t.q_fire_s * 1e3 / t.q_fires : 0.0,
               t.q_fires ? t.q_fire_enc / t.q_fires : 0.0, bench_status_mib("VmHWM:"));
        fflush(stdout);
        isolated(b, ex, bpe, &o, &c0);
        rc_ff_case_free(&c0);
    }
    rc_exec_close(ex);
    rc_recall_close(rec);
    rc_bpe_free(bpe);
    rc_bench_free(bench);
    rc_blob_close(b);
    return 0;
}
