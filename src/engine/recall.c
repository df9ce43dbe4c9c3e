/* recall.c - the recall loop, one turn at a time (recall_loop.h; docs/LOOP.md). */
#include "recall_loop.h"

#include "draft.h"
#include "mem.h"
#include "rope.h"

#include "heads.h"
#include "lm_screen.h"
#include "pooler.h"
#include "qwen2.h"
#include "retriever.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct rc_recall {
    const rc_blob *blob;
    rc_recall_opts o;
    rc_qwen2 *llm;   /* the conversation: [BOS][SP][injected][window][chunk] */
    rc_qwen2 *seal;  /* faithful mode: standalone forward of each sealed block */
    rc_pooler *pooler;
    rc_qwen2_id_rows gist_ids; /* the pooler's rows: the ids of the history it embeds (gist_rows) */
    rc_bert *bert;
    rc_heads *heads;
    rc_exec *ex;     /* kernels + thread pool shared by every model (RECALL_SIMD / RECALL_THREADS) */
    rc_bpe *bpe;
    rc_wp *wp;
    int H, V, bos, eos, n_sp, gate_dim;
    int user, assistant; /* opts.rerank: tok.user and tok.assistant, around a user's message */
    float *last, *prime_last, *gq; /* [V], [V], [gate_dim] */
    rc_lmscreen *scr;              /* lm_head screening (lm_screen.h), or NULL: picks read `last` */
    float *last_h, *prime_h;       /* with screening: the final-normed rows the picks read, [H] each */
    rc_lm_stats lm;
    float *rows;                   /* rebuild input rows, grown on demand */
    size_t cap_rows;
    struct loop_state *st;         /* carried between turns by the fast schedule */
    /* speculative decoding (opts.draft > 0): the verify forward's rows and outputs */
    rc_drafter dr;
    int32_t *vrows;                /* [1 + draft] the pending token, then the drafted ones */
    float *vlogits, *vnormed, *vq; /* [1 + draft][V] (or, with screening, [1 + draft][H]), [n_gate][1 + draft][NH*D] */
    /* opts.score_rows: the q of every row of a forced forward, [n_gate][chunk][NH*D], and one row's feature */
    float *sq, *sfeat;
};

typedef struct loop_state loop_state;
static void state_free(loop_state *st);

static recall_status cfg_int(const rc_blob *b, const char *key, int dflt, int *out) {
    int64_t v = 0;
    recall_err e = {0};
    *out = rc_blob_get_i64(b, key, &v, &e) == RECALL_OK ? (int)v : dflt;
    return RECALL_OK;
}

void rc_recall_defaults(const rc_blob *b, rc_recall_opts *o) {
    memset(o, 0, sizeof *o);
    cfg_int(b, "loop.window", 512, &o->window);
    cfg_int(b, "loop.block", 128, &o->block);
    cfg_int(b, "loop.chunk", 64, &o->chunk);
    cfg_int(b, "loop.k", 2, &o->k);
    cfg_int(b, "loop.turn_cap", 110, &o->turn_cap);
    cfg_int(b, "loop.buf_min", 16, &o->buf_min);
    double t;
    recall_err e = {0};
    o->threshold = rc_blob_get_f64(b, "gate.thresh", &t, &e) == RECALL_OK ? (float)t : -2.858f;
    o->mode = RC_MODE_FAITHFUL;
    o->arm = RC_ARM_RC_BGE;
}

void rc_recall_close(rc_recall *r) {
    if (!r) return;
    rc_qwen2_close(r->llm);
    rc_qwen2_close(r->seal);
    rc_pooler_close(r->pooler);
    rc_bert_close(r->bert);
    rc_heads_close(r->heads);
    rc_lmscreen_close(r->scr);
    rc_exec_close(r->ex); /* after every model that borrows it */
    state_free(r->st);
    rc_bpe_free(r->bpe);
    rc_wp_free(r->wp);
    RC_FREE(r->last, r->prime_last, r->last_h, r->prime_h, r->gq, r->rows, r->vrows, r->vlogits,
            r->vnormed, r->vq, r->sq, r->sfeat, r);
}

const struct rc_bpe *rc_recall_bpe(const rc_recall *r) { return r->bpe; }
int rc_recall_eos(const rc_recall *r) { return r->eos; }
const char *rc_recall_simd_name(const rc_recall *r) { return rc_simd_name(r->ex->k.path); }
int rc_recall_threads(const rc_recall *r) { return r->ex->threads; }
void rc_recall_lm_stats(const rc_recall *r, rc_lm_stats *out) { *out = r->lm; }
void rc_recall_pooler_stats(const rc_recall *r, rc_pooler_stats *out) {
    if (r->pooler) rc_pooler_get_stats(r->pooler, out);
    else memset(out, 0, sizeof *out);
}

static const char *const MODE_NAMES[] = {"faithful", "clean"};
static const char *const ARM_NAMES[] = {"RC_bge", "SP", "FULL"};
static const char *const EDGE_NAMES[] = {"off", "inject", "exchange"};
static const char *const SPAN_NAMES[] = {"block", "exchange"};
static const char *const RERANK_NAMES[] = {"off", "words", "single"};

/* s's index in names[0..n), else -1 with the message naming what was wanted. */
static int name_index(const char *const *names, int n, const char *what, const char *want, const char *s,
                      recall_err *err) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    if (err) rc_fail(err, RECALL_E_ARG, "%s '%s': expected %s", what, s ? s : "", want);
    return -1;
}

int rc_mode_parse(const char *s, recall_err *err) { return name_index(MODE_NAMES, 2, "mode", RC_MODE_NAMES, s, err); }
int rc_arm_parse(const char *s, recall_err *err) { return name_index(ARM_NAMES, 3, "arm", RC_ARM_NAMES, s, err); }
int rc_edge_parse(const char *s, recall_err *err) { return name_index(EDGE_NAMES, 3, "edge", RC_EDGE_NAMES, s, err); }
const char *rc_mode_name(int mode) { return (unsigned)mode < 2 ? MODE_NAMES[mode] : "?"; }
const char *rc_arm_name(int arm) { return (unsigned)arm < 3 ? ARM_NAMES[arm] : "?"; }
const char *rc_edge_name(int edge) { return (unsigned)edge < 3 ? EDGE_NAMES[edge] : "?"; }
int rc_span_parse(const char *s, recall_err *err) { return name_index(SPAN_NAMES, 2, "span", RC_SPAN_NAMES, s, err); }
const char *rc_span_name(int span) { return (unsigned)span < 2 ? SPAN_NAMES[span] : "?"; }
int rc_rerank_parse(const char *s, recall_err *err) {
    return name_index(RERANK_NAMES, 3, "rerank", RC_RERANK_NAMES, s, err);
}
const char *rc_rerank_name(int rerank) { return (unsigned)rerank < 3 ? RERANK_NAMES[rerank] : "?"; }

static const char *const SCREEN_NAMES[] = {"auto", "on", "off"}; /* RC_LM_SCREEN_* */
int rc_lm_screen_parse(const char *s) { return name_index(SCREEN_NAMES, 3, NULL, NULL, s, NULL); }
const char *rc_lm_screen_name(int m) { return (unsigned)m < 3 ? SCREEN_NAMES[m] : "?"; }
int rc_lm_screen_resolve(int mode) {
    const char *env = getenv("RECALL_LM_SCREEN");
    return mode == RC_LM_SCREEN_AUTO && env && *env ? rc_lm_screen_parse(env) : mode;
}

/* Screening on or off (rc_recall_opts.lm_screen), and its buffers. */
static recall_status open_screen(rc_recall *r, const rc_blob *b, recall_err *err) {
    const int mode = rc_lm_screen_resolve(r->o.lm_screen);
    if (mode < 0 && r->o.lm_screen == RC_LM_SCREEN_AUTO)
        return rc_fail(err, RECALL_E_ARG, "RECALL_LM_SCREEN=%s: expected " RC_LM_SCREEN_NAMES, getenv("RECALL_LM_SCREEN"));
    if (mode == RC_LM_SCREEN_OFF) return RECALL_OK;
    if (mode < 0 || mode > RC_LM_SCREEN_OFF) return rc_fail(err, RECALL_E_ARG, "recall: lm_screen %d invalid", mode);
    RC_TRY(rc_lmscreen_open(b, r->ex, &r->scr, err));
    if (!r->scr && mode == RC_LM_SCREEN_ON)
        return rc_fail(err, RECALL_E_MISSING, "%s: lm_head screening asked for but the blob has no %s (convert "
                       "--lm-head-screen)", rc_blob_path(b), RC_LM_SCREEN_Q);
    if (!r->scr) return RECALL_OK;
    r->lm.screening = 1;
    r->last_h = malloc((size_t)r->H * sizeof *r->last_h);
    r->prime_h = malloc((size_t)r->H * sizeof *r->prime_h);
    return r->last_h && r->prime_h ? RECALL_OK : rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
}

recall_status rc_recall_opts_check(const rc_recall_opts *o, recall_err *err) {
    const int lim = 1 << 20;
    if (o->window < 1 || o->window > lim || o->block < 1 || o->block > lim || o->chunk < 1 || o->chunk > lim ||
        o->k < 1 || o->k > RC_MAX_K || o->turn_cap < 0 || o->turn_cap > RC_TURN_CAP_MAX || o->buf_min < 1 ||
        o->buf_min > lim)
        return rc_fail(err, RECALL_E_ARG,
                       "recall: window %d, block %d, chunk %d (1..%d), k %d (1..%d), turn_cap %d (0..%d), "
                       "buf_min %d (1..%d)",
                       o->window, o->block, o->chunk, lim, o->k, RC_MAX_K, o->turn_cap, RC_TURN_CAP_MAX, o->buf_min,
                       lim);
    if (o->draft < 0 || o->draft > RC_DRAFT_MAX)
        return rc_fail(err, RECALL_E_ARG, "recall: draft %d (0..%d)", o->draft, RC_DRAFT_MAX);
    RC_TRY(rc_recall_mode_check(o, err));
    RC_TRY(rc_kv_dtype_check(o->kv, err));
    return rc_exec_opts_check(&o->exec, err);
}

recall_status rc_recall_mode_check(const rc_recall_opts *o, recall_err *err) {
    if ((unsigned)o->mode > RC_MODE_CLEAN)
        return rc_fail(err, RECALL_E_ARG, "mode %d unknown (faithful = %d, clean = %d)", (int)o->mode,
                       RC_MODE_FAITHFUL, RC_MODE_CLEAN);
    if ((unsigned)o->arm > RC_ARM_FULL)
        return rc_fail(err, RECALL_E_ARG, "arm %d unknown (RC_bge = %d, SP = %d, FULL = %d)", (int)o->arm,
                       RC_ARM_RC_BGE, RC_ARM_SP, RC_ARM_FULL);
    /* the options only clean mode takes: the reference loop has none of them */
    const struct {
        const char *what, *names, *reference;
        int value, last;
        const char *(*name)(int);
    } clean_only[] = {
        {"edge", RC_EDGE_NAMES, "whose rebuilds have no edge", o->edge, RC_EDGE_EXCHANGE, rc_edge_name},
        {"span", RC_SPAN_NAMES, "which injects the sealed blocks as they are", o->span, RC_SPAN_EXCHANGE, rc_span_name},
        {"rerank", RC_RERANK_NAMES, "which injects the bridge head's top k", o->rerank, RC_RERANK_SINGLE, rc_rerank_name},
    };
    for (size_t i = 0; i < sizeof clean_only / sizeof clean_only[0]; i++) {
        const int v = clean_only[i].value;
        if (v < 0 || v > clean_only[i].last)
            return rc_fail(err, RECALL_E_ARG, "%s %d unknown (0..%d: %s)", clean_only[i].what, v, clean_only[i].last,
                           clean_only[i].names);
        if (v && o->mode == RC_MODE_FAITHFUL)
            return rc_fail(err, RECALL_E_ARG, "%s %s needs clean mode: faithful mode (the default) reproduces the "
                           "reference loop, %s", clean_only[i].what, clean_only[i].name(v), clean_only[i].reference);
    }
    return RECALL_OK;
}

int64_t rc_recall_positions(const rc_recall_opts *o, int64_t n_sp) {
    const int64_t edge = (o->edge == RC_EDGE_INJECT && o->arm == RC_ARM_RC_BGE) || o->edge == RC_EDGE_EXCHANGE
                             ? 2 * (int64_t)o->block
                             : 0;
    const int64_t inj = (o->span == RC_SPAN_EXCHANGE ? 2 : 1) * (int64_t)o->block; /* a pick's most ids */
    return 1 + n_sp + (int64_t)o->k * inj + edge + o->window + o->chunk;
}

/* opts.rerank: the chat template's markers around a user's message (the blob's tok.user and
 * tok.assistant, the ids the converter stores). */
static recall_status user_markers(rc_recall *r, const rc_blob *b, recall_err *err) {
    int64_t u = 0, a = 0;
    RC_TRY(rc_blob_get_i64(b, "tok.user", &u, err));
    RC_TRY(rc_blob_get_i64(b, "tok.assistant", &a, err));
    if (u < 0 || u >= r->V || a < 0 || a >= r->V)
        return rc_fail(err, RECALL_E_FORMAT, "%s: tok.user %lld / tok.assistant %lld outside the vocab (%d)",
                       rc_blob_path(b), (long long)u, (long long)a, r->V);
    r->user = (int)u;
    r->assistant = (int)a;
    return RECALL_OK;
}

recall_status rc_recall_open(const rc_blob *b, const rc_recall_opts *o, rc_recall **out, recall_err *err) {
    *out = NULL;
    RC_TRY(rc_recall_opts_check(o, err));
    rc_recall *r = calloc(1, sizeof *r);
    if (!r) return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    r->blob = b;
    r->o = *o;
    recall_status s = RECALL_OK;
    int64_t v = 0;
    if (!s) s = rc_blob_get_i64(b, "tok.bos", &v, err);
    r->bos = (int)v;
    if (!s) s = rc_blob_get_i64(b, "tok.eos", &v, err);
    r->eos = (int)v;
    int max_pos = 0; /* trained positions under the RoPE profile (rope.h) */
    if (!s) s = rc_rope_blob_positions(b, &max_pos, err);
    if (!s) {
        size_t size;
        const void *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
        s = sec ? rc_bpe_load(sec, size, &r->bpe, err)
                : rc_fail(err, RECALL_E_MISSING, "%s: no BPE tokenizer section", rc_blob_path(b));
    }
    if (!s) s = rc_exec_open(&o->exec, &r->ex, err);
    if (!s && o->arm != RC_ARM_FULL) s = rc_pooler_open_ex(b, r->ex, &r->pooler, err);
    if (!s && r->pooler) {
        r->n_sp = rc_pooler_cfg(r->pooler)->n_sp;
        /* the reference schedule recomputes every rebuild from scratch: no cache there */
        const size_t mb = (size_t)(o->pooler_cache_mb ? o->pooler_cache_mb : RC_POOLER_CACHE_MB);
        if (o->pooler_cache_mb >= 0 && !o->reference_schedule)
            rc_pooler_set_cache(r->pooler, mb > (SIZE_MAX >> 20) ? SIZE_MAX : mb << 20);
    }
    /* the bounds of rc_recall_opts_check keep this inside int */
    int max_ctx = (int)rc_recall_positions(o, r->n_sp);
    const int inj = (o->span == RC_SPAN_EXCHANGE ? 2 : 1) * o->block, /* a pick's most ids */
        edge = max_ctx - (1 + r->n_sp + o->k * inj + o->window + o->chunk);
    if (o->arm == RC_ARM_FULL) max_ctx = o->max_ctx > 0 ? o->max_ctx : max_pos; /* KV grows on demand */
    if (!s && o->arm != RC_ARM_FULL && max_ctx > max_pos) /* FULL: rc_qwen2_open names both */
        s = rc_fail(err, RECALL_E_LIMIT,
                    "recall: the loop needs %d positions (1 + %d SP + %d x %d injected + %d edge + %d window + %d "
                    "chunk) but the model was trained on %d",
                    max_ctx, r->n_sp, o->k, inj, edge, o->window, o->chunk, max_pos);
    if (!s) s = rc_qwen2_open_ex(b, max_ctx, r->ex, &r->llm, err);
    if (!s) s = rc_qwen2_set_kv_dtype(r->llm, (rc_kv_dtype)o->kv, err);
    if (!s) {
        r->H = rc_qwen2_cfg(r->llm)->hidden;
        r->V = rc_qwen2_cfg(r->llm)->vocab;
        if (r->bos < 0 || r->bos >= r->V || r->eos < 0 || r->eos >= r->V)
            s = rc_fail(err, RECALL_E_FORMAT, "%s: tok.bos %d / tok.eos %d outside the vocab (%d)", rc_blob_path(b),
                        r->bos, r->eos, r->V);
    }
    if (!s && o->rerank) s = user_markers(r, b, err);
    if (!s && o->arm == RC_ARM_RC_BGE) {
        size_t size;
        const void *sec = rc_blob_section(b, RC_SECT_TOK_WORDPIECE, &size);
        s = sec ? rc_wp_load(sec, size, &r->wp, err)
                : rc_fail(err, RECALL_E_MISSING, "%s: no WordPiece tokenizer section", rc_blob_path(b));
        if (!s) s = rc_bert_open_ex(b, r->ex, &r->bert, err);
        if (!s) s = rc_heads_open(b, &r->heads, err);
        if (!s && o->mode == RC_MODE_FAITHFUL) s = rc_qwen2_open_shared(b, o->block, r->llm, &r->seal, err);
        if (!s && r->seal) s = rc_qwen2_set_kv_dtype(r->seal, (rc_kv_dtype)o->kv, err);
    }
    if (!s) {
        const rc_qwen2_config *c = rc_qwen2_cfg(r->llm);
        r->gate_dim = c->n_gate * c->heads * c->head_dim;
        if (r->heads && rc_gate_dim(r->heads) != r->gate_dim)
            s = rc_fail(err, RECALL_E_SHAPE, "%s: gate expects %d features, the model captures %d", rc_blob_path(b),
                        rc_gate_dim(r->heads), r->gate_dim);
    }
    if (!s) s = open_screen(r, b, err);
    if (!s) {
        r->last = malloc((size_t)r->V * sizeof *r->last);
        r->prime_last = malloc((size_t)r->V * sizeof *r->prime_last);
        r->gq = calloc((size_t)(r->gate_dim ? r->gate_dim : 1), sizeof *r->gq);
        if (!r->last || !r->prime_last || !r->gq) s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    }
    if (!s && o->draft > 0) { /* a draft never reaches past the chunk: at most chunk rows verified */
        const size_t n = (size_t)(o->draft < o->chunk ? o->draft + 1 : o->chunk);
        rc_drafter_init(&r->dr, o->draft);
        r->vrows = malloc(n * sizeof *r->vrows);
        /* with screening the verify rows stay final-normed hidden states: lm_head runs per pick */
        if (r->scr) r->vnormed = malloc(n * (size_t)r->H * sizeof *r->vnormed);
        else r->vlogits = malloc(n * (size_t)r->V * sizeof *r->vlogits);
        r->vq = malloc(n * (size_t)(r->gate_dim ? r->gate_dim : 1) * sizeof *r->vq);
        if (!r->vrows || !(r->vlogits || r->vnormed) || !r->vq) s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    }
    if (!s && o->score_rows && o->arm != RC_ARM_RC_BGE)
        s = rc_fail(err, RECALL_E_ARG, "recall: score_rows needs the RC_bge arm (the gate)");
    if (!s && o->score_rows) {
        r->sq = malloc((size_t)o->chunk * r->gate_dim * sizeof *r->sq);
        r->sfeat = malloc((size_t)r->gate_dim * sizeof *r->sfeat);
        if (!r->sq || !r->sfeat) s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    }
    if (s) {
        rc_recall_close(r);
        return s;
    }
    *out = r;
    return RECALL_OK;
}

void rc_turn_free(rc_turn *t) {
    free(t->reply);
    free(t->gates);
    for (int i = 0; i < t->n_fires; i++) {
        free(t->fires[i].bridge);
        free(t->fires[i].rid);
    }
    free(t->fires);
    free(t->rebuilds);
    free(t->top5);
    free(t->low);
    memset(t, 0, sizeof *t);
}

/* Appends one record to a growable array; returns NULL on allocation failure. */
static void *push(void **arr, int *n, int *cap, size_t size) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        void *na = realloc(*arr, (size_t)nc * size);
        if (!na) return NULL;
        *arr = na;
        *cap = nc;
    }
    void *p = (char *)*arr + (size_t)(*n)++ * size;
    memset(p, 0, size);
    return p;
}
#define PUSH(t, field) push((void **)&(t)->field, &(t)->n_##field, &(t)->cap_##field, sizeof *(t)->field)

/* Scratch of n floats whose contents the caller rewrites in full. It grows by at least half its
 * size and never copies (free, then malloc): regrowing a few buffers by one chunk at every rebuild
 * with realloc left a trail of heap holes that cost more than the buffers themselves (bench/soak.c). */
static float *grow_rows(float **p, size_t *cap, size_t n) {
    if (n > *cap) {
        size_t nc = n;
        free(*p);
        *cap = 0;
        *p = malloc(nc * sizeof **p);
        if (!*p) return NULL;
        *cap = nc;
    }
    return *p;
}

/* A forward's last row goes where the picks read it: `out` is r->last or r->prime_last (the
 * logits), or NULL (not needed); with screening the final-normed row goes to last_h / prime_h
 * instead and lm_head is skipped. */
static void last_out(const rc_recall *r, rc_qwen2_fwd *f, float *out) {
    if (!out) return;
    if (r->scr) f->normed_last = out == r->prime_last ? r->prime_h : r->last_h;
    else f->logits_last = out;
}

/* The pick of one row (lm_screen.h): argmax, margin and, k = 5, torch.topk's top-5. The row is
 * its logits [V] without screening, its final-normed hidden state [H] with it (the other is unused). */
static recall_status pick_row(rc_recall *r, const float *logits, const float *normed, int k, rc_lm_pick *pk,
                              recall_err *err) {
    if (!r->scr) {
        rc_lm_pick_full(logits, r->V, k, pk);
        r->lm.picks++;
        return RECALL_OK;
    }
    RC_TRY(rc_lmscreen_pick(r->scr, normed, k, pk, err));
    r->lm.picks++;
    r->lm.exact_rows += pk->n_exact;
    r->lm.full += pk->full;
    r->lm.bytes += rc_lmscreen_bytes(r->scr, pk);
    r->lm.full_bytes += rc_lmscreen_full_bytes(r->scr);
    return RECALL_OK;
}

/* The pick of the latest forward's last row (`last` / `last_h`). */
static recall_status pick_last(rc_recall *r, int k, rc_lm_pick *pk, recall_err *err) {
    return pick_row(r, r->last, r->last_h, k, pk, err);
}

/* A cache position's input, to prove two prefixes identical: a token row (the embedding of id)
 * or row `id` of the SP computed from the first `nd` evicted tokens (the pooler is deterministic). */
typedef struct {
    int32_t id;
    int32_t nd; /* -1 for a token row */
} row_key;

/* Everything the loop carries between rebuilds. The fast schedule keeps it after a turn, so the
 * next turn, whose feed starts with this turn's gen, resumes where this one stopped instead of
 * replaying the whole conversation (each step would recompute exactly the same bits). */
struct loop_state {
    int32_t *gen;
    int n_gen, cap_gen;
    int absorbed, fired, above;
    int32_t *rid; /* injected ids (owned copy) */
    int nrid;
    int c0_last;  /* c0 of the latest rebuild */
    int step;     /* chunk steps done since that rebuild */
    rc_archive ar;
    rc_key_cache keys;
    row_key *rows; /* inputs of cache positions 1.. (position 0 is BOS) */
    int n_rows, cap_rows;
    rc_turn hist;  /* gate / fire / rebuild / top-5 records of the conversation so far */
    int valid;
    /* opts.edge: the raw gate feature of the fire whose injection is alive, and the lowest bridge
     * score among the candidates it injected (the bar the edge span must reach) */
    float *fire_f;
    float fire_bar;
};

/* The mapped pages a phase of the loop read, released once the phase is over (rc_blob_release:
 * with a blob mapped from its file, clean pages that a later read faults in again from the file;
 * nothing for a blob held in memory). The results are the same bits; what changes is that the
 * process keeps resident only what the phase at hand reads (docs/MEMORY.md, "The device profile"):
 *   RELEASE_EMBED    the token embeddings' rows (the pooler embeds the evicted history past its
 *                    cache at every rebuild, a forward its rows): after each tile the pooler
 *                    embeds (gist_embed_rows), after a forward of more than one row (a decode
 *                    step's single rows wait for the next rebuild);
 *   RELEASE_BERT     the encoder's weights: after the BERT encodes of a fire (and of an edge span);
 *   RELEASE_LM_HEAD  lm_head and its int8 screen, which the decode steps read: when a rebuild
 *                    starts (its pooler and forward do not read them; its top-5 pick reads them
 *                    again) and when a fire starts (its BERT encodes do not).
 * The decoder's layer matrices (exact: read by every forward; q8: released once packed) and the
 * pooler's (released matrix by matrix inside rc_pooler_run_src) are not this function's. */
enum { RELEASE_EMBED, RELEASE_BERT, RELEASE_LM_HEAD };
static void release_phase(const rc_recall *r, int what) {
    static const char *const prefix[] = {"qwen2.model.embed_tokens.", "bert.", "qwen2.lm_head."};
    rc_blob_release_prefix(r->blob, prefix[what]);
}

static recall_status forward_ids(rc_recall *r, rc_qwen2 *m, const int32_t *ids, int n, float *logits,
                                 recall_err *err) {
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = ids;
    f.n = n;
    last_out(r, &f, logits);
    RC_TRY(rc_qwen2_forward(m, &f, err));
    if (n > 1) release_phase(r, RELEASE_EMBED); /* a forced piece or a sealed block: its rows */
    memcpy(r->gq, rc_qwen2_gate_q(m), (size_t)r->gate_dim * sizeof *r->gq);
    return RECALL_OK;
}

static int push_key(loop_state *st, int32_t id, int32_t nd) {
    if (st->n_rows == st->cap_rows) {
        int nc = st->cap_rows ? st->cap_rows * 2 : 1024;
        row_key *nr = realloc(st->rows, (size_t)nc * sizeof *nr);
        if (!nr) return 0;
        st->rows = nr;
        st->cap_rows = nc;
    }
    st->rows[st->n_rows].id = id;
    st->rows[st->n_rows].nd = nd;
    st->n_rows++;
    return 1;
}

/* Appends deep copies of src's gate / fire / rebuild / top-5 records to dst. */
static int records_append(rc_turn *dst, const rc_turn *src) {
    for (int i = 0; i < src->n_gates; i++) {
        rc_gate_rec *g = PUSH(dst, gates);
        if (!g) return 0;
        *g = src->gates[i];
    }
    for (int i = 0; i < src->n_rebuilds; i++) {
        rc_rebuild_rec *b = PUSH(dst, rebuilds);
        if (!b) return 0;
        *b = src->rebuilds[i];
    }
    for (int i = 0; i < src->n_top5; i++) {
        rc_top5_rec *t = PUSH(dst, top5);
        if (!t) return 0;
        *t = src->top5[i];
    }
    for (int i = 0; i < src->n_fires; i++) {
        rc_fire_rec *f = PUSH(dst, fires);
        if (!f) return 0;
        *f = src->fires[i];
        f->bridge = malloc((size_t)(f->ncand ? f->ncand : 1) * sizeof *f->bridge);
        f->rid = malloc((size_t)(f->nrid ? f->nrid : 1) * sizeof *f->rid);
        if (!f->bridge || !f->rid) {
            free(f->bridge);
            free(f->rid);
            f->bridge = NULL;
            f->rid = NULL;
            dst->n_fires--;
            return 0;
        }
        memcpy(f->bridge, src->fires[i].bridge, (size_t)f->ncand * sizeof *f->bridge);
        memcpy(f->rid, src->fires[i].rid, (size_t)f->nrid * sizeof *f->rid);
    }
    return 1;
}

static void state_reset(loop_state *st, int block) {
    st->n_gen = st->absorbed = st->fired = st->above = st->nrid = st->c0_last = st->step = st->n_rows = 0;
    st->valid = 0;
    free(st->rid);
    st->rid = NULL;
    rc_archive_free(&st->ar);
    rc_archive_init(&st->ar, block);
    rc_key_cache_free(&st->keys);
    rc_turn_free(&st->hist);
}

static void state_free(loop_state *st) {
    if (!st) return;
    state_reset(st, 0);
    free(st->fire_f);
    free(st->gen);
    free(st->rows);
    free(st);
}

void rc_recall_forget(rc_recall *r) {
    if (r->st) state_reset(r->st, r->o.block);
}

static int set_rid(loop_state *st, const int32_t *rid, int n) {
    int32_t *c = malloc((size_t)(n ? n : 1) * sizeof *c);
    if (!c) return 0;
    memcpy(c, rid, (size_t)n * sizeof *c);
    free(st->rid);
    st->rid = c;
    st->nrid = n;
    return 1;
}

static recall_status oom(recall_err *err) { return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory"); }

/* BOS stays at cache position 0 for the whole turn; every rebuild crops back to it. */
enum { MQ = 1 };

/* The caller's event callback; a non-zero return cancels the turn. */
typedef struct {
    rc_event_fn fn;
    void *ctx;
} events;

static recall_status emit(const events *ev, const loop_state *st, rc_event_kind kind, const void *rec, int32_t token,
                          recall_err *err) {
    if (ev->fn && ev->fn(ev->ctx, &(rc_event){kind, rec, token}))
        return rc_fail(err, RECALL_E_CANCELLED, "recall: turn cancelled by the event callback at history position %d",
                       st->n_gen);
    return RECALL_OK;
}

/* This turn's feed and how far the chunks have taken it. */
typedef struct {
    const int32_t *ids;
    int n;
    int fi;     /* next feed token to force */
    int newtok; /* tokens generated so far (the turn cap counts these) */
    int done;   /* EOS or the turn cap reached */
} feed_cursor;

/* Checks the feed and sizes the state for it. A feed longer than the window is fine on the
 * recall arms (it is forced through chunk by chunk and the window slides over it); only the
 * FULL arm, which keeps everything in its cache, is bounded by the cache. */
static recall_status turn_ready(rc_recall *r, const int32_t *feed, int n_feed, recall_err *err) {
    const rc_recall_opts *o = &r->o;
    for (int i = 0; i < n_feed; i++)
        if (feed[i] < 0 || feed[i] >= r->V)
            return rc_fail(err, RECALL_E_ARG, "recall: feed token %d at position %d is outside the vocab (%d)", feed[i],
                           i, r->V);
    if (o->arm == RC_ARM_FULL && 1 + n_feed + o->turn_cap + 1 > rc_qwen2_max_ctx(r->llm))
        return rc_fail(err, RECALL_E_LIMIT, "recall: FULL arm needs %d positions for %d history tokens, the cache holds %d",
                       1 + n_feed + o->turn_cap + 1, n_feed, rc_qwen2_max_ctx(r->llm));
    if (!r->st) {
        r->st = calloc(1, sizeof *r->st);
        if (!r->st) return oom(err);
        rc_archive_init(&r->st->ar, o->block);
    }
    loop_state *st = r->st;
    int need = n_feed + o->turn_cap + o->chunk + 1; /* gen: feed + reply + one chunk */
    if (need > st->cap_gen) {
        int32_t *ng = realloc(st->gen, (size_t)need * sizeof *ng);
        if (!ng) return oom(err);
        st->gen = ng;
        st->cap_gen = need;
    }
    return RECALL_OK;
}

/* Fast schedule: the feed extends the conversation the state holds, so every record and cache
 * row up to there is what replaying it would recompute bit for bit. */
static int can_resume(const rc_recall *r, const loop_state *st, const feed_cursor *fc) {
    return !r->o.reference_schedule && st->valid && fc->n >= st->n_gen &&
           !memcmp(fc->ids, st->gen, (size_t)st->n_gen * sizeof *fc->ids);
}

/* Continues inside the chunk the previous turn stopped in (*step: the steps it had done). */
static recall_status resume(loop_state *st, feed_cursor *fc, rc_turn *turn, int *step, recall_err *err) {
    if (!records_append(turn, &st->hist)) return oom(err);
    fc->fi = st->n_gen;
    *step = st->step;
    turn->rows_reused += 1 + st->n_rows;
    return RECALL_OK;
}

/* A fresh turn: [BOS] through the model at position 0; its logits are `last` until the first
 * rebuild has rows to run. */
static recall_status prime(rc_recall *r, loop_state *st, rc_turn *turn, recall_err *err) {
    state_reset(st, r->o.block);
    RC_TRY(rc_qwen2_crop(r->llm, 0, err));
    int32_t bos = r->bos;
    turn->rows_computed += 1;
    return forward_ids(r, r->llm, &bos, 1, r->prime_last, err);
}

/* (1) gen[absorbed:nd] leaves the window: into the archive (RC arm), which seals every `block`
 * ids; kept is gen[0:nd] (the pooler reads it from gen). Faithful mode runs each sealed block
 * standalone (positions 0.., no lm_head) and its q_proj capture replaces the gate feature
 * (docs/LOOP.md, "Faithful and clean mode"). */
static recall_status evict_and_seal(rc_recall *r, loop_state *st, int nd, rc_turn *turn, recall_err *err) {
    if (nd <= st->absorbed) return RECALL_OK;
    if (r->o.arm == RC_ARM_RC_BGE) {
        RC_TRY(rc_archive_push(&st->ar, st->gen + st->absorbed, nd - st->absorbed, err));
        while (st->ar.n_buf >= st->ar.block) {
            const int32_t *blk = rc_archive_seal(&st->ar, err);
            if (!blk) return err && err->code ? err->code : RECALL_E_NOMEM;
            if (r->o.mode != RC_MODE_FAITHFUL) continue;
            RC_TRY(rc_qwen2_crop(r->seal, 0, err));
            RC_TRY(forward_ids(r, r->seal, blk, st->ar.block, NULL, err));
            turn->rows_computed += st->ar.block;
            turn->rows_seal += st->ar.block;
        }
    }
    st->absorbed = nd;
    return RECALL_OK;
}

/* opts.edge: what the edge span is measured against while this fire's injection is alive (the
 * fire's query feature and its weakest chosen candidate's bridge score). */
static recall_status keep_fire_query(rc_recall *r, loop_state *st, const rc_fire_rec *f, recall_err *err) {
    if (!st->fire_f) {
        st->fire_f = malloc((size_t)r->gate_dim * sizeof *st->fire_f);
        if (!st->fire_f) return oom(err);
    }
    memcpy(st->fire_f, r->gq, (size_t)r->gate_dim * sizeof *st->fire_f);
    st->fire_bar = INFINITY;
    for (int i = 0; i < f->ntop; i++)
        if (f->bridge[f->top[i]] < st->fire_bar) st->fire_bar = f->bridge[f->top[i]];
    return RECALL_OK;
}

/* The exchange that gen[s - 1] | gen[s] cuts (a user's message and the reply to it: the chat
 * template closes each with EOS) starts just after the EOS before s, never below lo, and ends
 * (exclusive) at the EOS from e on, never past hi. (opts.span and opts.edge exchange, docs/LOOP.md.) */
static int exchange_start(const rc_recall *r, const int32_t *gen, int s, int lo) {
    while (s > lo && gen[s - 1] != r->eos) s--;
    return s;
}
static int exchange_end(const rc_recall *r, const int32_t *gen, int e, int hi) {
    while (e < hi && gen[e] != r->eos) e++;
    return e;
}

/* opts.span exchange: the chosen candidates' ids widened to the exchanges they cut. Candidate c
 * holds gen[c * block : (c + 1) * block] (the pending buffer, c = n_blocks: up to the evicted end);
 * each is extended backwards to the start of its exchange and forwards to the EOS that ends it, at
 * most block / 2 ids each way and inside gen[0:absorbed]; spans are joined in order without
 * repeats. */
static recall_status widen_to_exchanges(const rc_recall *r, const loop_state *st, rc_retrieval *rv, recall_err *err) {
    const int B = st->ar.block, half = B / 2, held = st->ar.n_blocks * B + st->ar.n_buf;
    const int end = held < st->n_gen ? held : st->n_gen; /* the archive is gen[0:absorbed], in order */
    int32_t *rid = malloc((size_t)(rv->ntop ? rv->ntop : 1) * 2 * B * sizeof *rid);
    if (!rid) return oom(err);
    int n = 0, last = 0;
    for (int i = 0; i < rv->ntop; i++) {
        const int s0 = rv->top[i] * B, e0 = s0 + B < end ? s0 + B : end;
        int s = exchange_start(r, st->gen, s0, s0 - half > 0 ? s0 - half : 0);
        const int e = exchange_end(r, st->gen, e0, e0 + half < end ? e0 + half : end);
        if (s < last) s = last;
        for (int j = s; j < e; j++) rid[n++] = st->gen[j];
        if (e > last) last = e;
    }
    free(rv->rid);
    rv->rid = rid;
    rv->nrid = n;
    return RECALL_OK;
}

/* opts.rerank: the user's message being answered, gen[*q0:*q1]: after the last tok.user marker in
 * gen[0:c0], up to the tok.assistant marker that follows it (or c0); empty when there is none. */
static void users_message(const rc_recall *r, const loop_state *st, int c0, int *q0, int *q1) {
    int u = c0 - 1;
    while (u >= 0 && st->gen[u] != r->user) u--;
    *q0 = *q1 = u + 1;
    if (u < 0) return;
    while (*q1 < c0 && st->gen[*q1] != r->assistant) (*q1)++;
}

/* A fire: BERT-encode the candidates (sealed blocks once each on the fast schedule), bridge-score
 * them against the gate feature, take the top k; their ids replace any earlier injection unless
 * the floor holds them back. */
static recall_status fire(rc_recall *r, loop_state *st, int c0, float score, const events *ev, rc_turn *turn,
                          recall_err *err) {
    const rc_recall_opts *o = &r->o;
    const int fast = !o->reference_schedule;
    release_phase(r, RELEASE_LM_HEAD); /* the encodes do not read it: not resident beside the encoder */
    rc_retriever rt = {r->bpe, r->wp, r->bert, r->heads, rc_bert_cfg(r->bert)->max_seq};
    rc_retrieval rv;
    int before = st->keys.encodes;
    RC_TRY(rc_retrieve_bge(&rt, &st->ar, r->gq, o->k, o->buf_min, fast ? &st->keys : NULL, &rv, err));
    release_phase(r, RELEASE_BERT);
    if (o->rerank) {
        int q0, q1;
        users_message(r, st, c0, &q0, &q1);
        recall_status s = q1 > q0 ? rc_retrieve_rerank_words(&st->ar, r->bpe, st->gen + q0, q1 - q0, o->k,
                                                             o->rerank == RC_RERANK_SINGLE, &rv, err)
                                  : RECALL_OK;
        if (s) {
            rc_retrieval_free(&rv);
            return s;
        }
    }
    if (o->span == RC_SPAN_EXCHANGE) {
        recall_status s = widen_to_exchanges(r, st, &rv, err);
        if (s) {
            rc_retrieval_free(&rv);
            return s;
        }
    }
    turn->bert_encodes += fast ? st->keys.encodes - before : rv.ncand;
    rc_fire_rec *f = PUSH(turn, fires);
    if (!f) {
        rc_retrieval_free(&rv);
        return oom(err);
    }
    f->c0 = c0;
    f->score = score;
    f->ncand = rv.ncand;
    f->bridge = rv.bridge;
    f->ntop = rv.ntop;
    memcpy(f->top, rv.top, sizeof f->top);
    f->rid = rv.rid;
    f->nrid = rv.nrid;
    float best = -INFINITY;
    for (int i = 0; i < rv.ncand; i++)
        if (rv.bridge[i] > best) best = rv.bridge[i];
    f->injected = rv.nrid > 0 && !(o->use_floor && !(best >= o->floor));
    if (f->injected) {
        if (!set_rid(st, f->rid, f->nrid)) return oom(err);
        st->fired = 1;
        if (o->edge) RC_TRY(keep_fire_query(r, st, f, err));
    }
    return emit(ev, st, RC_EV_FIRE, f, 0, err);
}

/* (2) On the RC arm, once the archive has a sealed block or buf_min pending ids: score the
 * feature of the most recent forward; fire if it is above the threshold (strictly) and neither
 * fire-once nor hysteresis holds it back. */
static recall_status gate_and_fire(rc_recall *r, loop_state *st, int c0, const events *ev, rc_turn *turn,
                                   recall_err *err) {
    const rc_recall_opts *o = &r->o;
    if (o->arm != RC_ARM_RC_BGE || !(st->ar.n_blocks > 0 || st->ar.n_buf >= o->buf_min)) return RECALL_OK;
    rc_gate_rec *g = PUSH(turn, gates);
    if (!g) return oom(err);
    g->c0 = c0;
    g->score = rc_gate_score(r->heads, r->gq);
    int over = g->score > o->threshold;
    st->above = over ? st->above + 1 : 0;
    g->fired = over && !(o->fire_once && st->fired) && st->above >= (o->hysteresis > 1 ? o->hysteresis : 1);
    RC_TRY(emit(ev, st, RC_EV_GATE, g, 0, err));
    return g->fired ? fire(r, st, c0, g->score, ev, turn, err) : RECALL_OK;
}

/* A rebuild's rows after BOS: [n_sp rows of the SP of nd][injected][gen[e0:e0+ne]][gen[c0-R:c0]]
 * (the edge span gen[e0:e0+ne] only with opts.edge, while an injection is alive). */
typedef struct {
    int c0, nd, n_sp, e0, ne, R;
} layout;

static int layout_rows(const layout *L, const loop_state *st) { return L->n_sp + st->nrid + L->ne + L->R; }

/* The token of layout row j, for rows after the SP. */
static int32_t layout_id(const layout *L, const loop_state *st, int j) {
    j -= L->n_sp;
    if (j < st->nrid) return st->rid[j];
    j -= st->nrid;
    return j < L->ne ? st->gen[L->e0 + j] : st->gen[L->c0 - L->R + j - L->ne];
}

/* The inputs of cache positions 1.. for the layout, and *keep: how many leading rows the cache
 * already holds with the same inputs (fast schedule; 0 on the reference one). */
static recall_status rebuild_keys(loop_state *st, const layout *L, int fast, int *keep, recall_err *err) {
    const int rows = layout_rows(L, st);
    int old_rows = fast ? st->n_rows : 0, k = 0;
    row_key *old = NULL;
    if (old_rows) {
        old = malloc((size_t)old_rows * sizeof *old);
        if (!old) return oom(err);
        memcpy(old, st->rows, (size_t)old_rows * sizeof *old);
    }
    st->n_rows = 0;
    int ok = 1;
    for (int j = 0; j < L->n_sp && ok; j++) ok = push_key(st, j, L->nd);
    for (int j = L->n_sp; j < rows && ok; j++) ok = push_key(st, layout_id(L, st, j), -1);
    while (ok && k < old_rows && k < rows && old[k].id == st->rows[k].id && old[k].nd == st->rows[k].nd) k++;
    free(old);
    if (!ok) return oom(err);
    /* Everything reused only if the cache ends exactly there: `last` and the gate q then already
     * belong to the prefix's last row. Otherwise that row is recomputed. */
    if (k == rows && !(old_rows == rows && rows > 0)) k = rows > 0 ? rows - 1 : 0;
    *keep = k;
    return RECALL_OK;
}

/* The pooler's row source (ctx: the loop): the history's token embeddings (r->gist_ids), a tile
 * at a time, whose mapped pages are released as soon as the tile is embedded. Rows past the
 * pooler's K/V cache (all of them with --pooler-cache 0) are read twice per pooler block at every
 * rebuild: holding the whole evicted history's pages between those reads would cost about what
 * the cache saves. */
static recall_status gist_embed_rows(void *ctx, int j0, int n, float *dst, recall_err *err) {
    const rc_recall *r = ctx;
    recall_status s = RECALL_OK;
    for (int i = 0; i < n && !s; i += RC_BLOB_RELEASE_ROWS) { /* blob.h: rows at random, released often */
        const int m = n - i < RC_BLOB_RELEASE_ROWS ? n - i : RC_BLOB_RELEASE_ROWS;
        s = rc_qwen2_embed_rows((void *)&r->gist_ids, j0 + i, m, dst + (size_t)i * r->H, err);
        release_phase(r, RELEASE_EMBED);
    }
    return s;
}

/* SP rows j..n_sp-1 (H floats each) into dst: the pooler over the embeddings of kept = ids[0:nd],
 * embedded a tile at a time (pooler.h: memory flat in nd); the ids are the keys of its K/V cache. */
static recall_status gist_rows(rc_recall *r, const int32_t *ids, int nd, int j, float *dst, recall_err *err) {
    const int H = r->H;
    float *sp = malloc((size_t)r->n_sp * H * sizeof *sp);
    if (!sp) return oom(err);
    r->gist_ids = (rc_qwen2_id_rows){r->llm, ids};
    const rc_pooler_src src = {gist_embed_rows, r, ids};
    recall_status s = rc_pooler_run_src(r->pooler, &src, nd, sp, err);
    if (!s) memcpy(dst, sp + (size_t)j * H, (size_t)(r->n_sp - j) * H * sizeof *dst);
    free(sp);
    return s;
}

/* Rows keep.. of the layout run after cache position MQ + keep; `last` and the gate feature come
 * from the last row. Token rows are embedded one contiguous piece (injected, edge, window) at a
 * time. */
static recall_status rebuild_forward(rc_recall *r, loop_state *st, const layout *L, int keep, recall_err *err) {
    const int H = r->H, rows = layout_rows(L, st), n_new = rows - keep;
    if (!grow_rows(&r->rows, &r->cap_rows, (size_t)n_new * H)) return oom(err);
    float *dst = r->rows;
    int j = keep;
    if (j < L->n_sp) {
        RC_TRY(gist_rows(r, st->gen, L->nd, j, dst, err));
        dst += (size_t)(L->n_sp - j) * H;
        j = L->n_sp;
    }
    const int32_t *piece[3] = {st->rid, st->gen + L->e0, st->gen + L->c0 - L->R};
    const int len[3] = {st->nrid, L->ne, L->R};
    for (int p = 0, start = L->n_sp; p < 3; start += len[p++]) {
        if (j >= start + len[p]) continue;
        const int a = j - start, n = len[p] - a;
        RC_TRY(rc_qwen2_embed(r->llm, piece[p] + a, n, dst, err));
        dst += (size_t)n * H;
        j += n;
    }
    RC_TRY(rc_qwen2_crop(r->llm, MQ + keep, err));
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.embeds = r->rows;
    f.n = n_new;
    last_out(r, &f, r->last);
    RC_TRY(rc_qwen2_forward(r->llm, &f, err));
    release_phase(r, RELEASE_EMBED);
    memcpy(r->gq, rc_qwen2_gate_q(r->llm), (size_t)r->gate_dim * sizeof *r->gq);
    return RECALL_OK;
}

/* The rebuild's layout. With opts.edge, while an injection is alive, the edge span is the text
 * around the window's start, gen[nd - block : nd + block] clipped to gen[0:c0]: the last block of
 * evicted tokens and the window's first block. A fact that straddles the window's start (half
 * evicted while the reply is being written) is whole neither in the window nor in any archived
 * block, but it is in the span. The span joins the injection only if the fire that made the
 * injection would have chosen it: its bridge score against that fire's query reaches the score of
 * the weakest candidate the fire injected. So unrelated recent text is not injected (the trained
 * world answers worse with it), and the model reads the fact where it reads recalled text. */
static recall_status rebuild_layout(rc_recall *r, loop_state *st, int c0, int R, layout *L, rc_turn *turn,
                                    recall_err *err) {
    *L = (layout){c0, c0 - R, 0, 0, 0, R};
    if (L->nd > 0 && r->o.arm != RC_ARM_FULL) L->n_sp = r->n_sp;
    if (r->o.edge == RC_EDGE_EXCHANGE && L->nd > 0) { /* the window starts where the exchange it cuts does */
        const int B2 = 2 * r->o.block;
        L->R = c0 - exchange_start(r, st->gen, L->nd, L->nd > B2 ? L->nd - B2 : 0);
        return RECALL_OK;
    }
    if (r->o.edge != RC_EDGE_INJECT || st->nrid == 0 || L->nd == 0) return RECALL_OK;
    const int B = r->o.block, e0 = L->nd > B ? L->nd - B : 0, ne = (R > B ? L->nd + B : c0) - e0;
    const rc_retriever rt = {r->bpe, r->wp, r->bert, r->heads, rc_bert_cfg(r->bert)->max_seq};
    float score = 0;
    RC_TRY(rc_retrieve_score(&rt, st->fire_f, st->gen + e0, ne, &score, err));
    release_phase(r, RELEASE_BERT);
    turn->bert_encodes++;
    if (score >= st->fire_bar) {
        L->e0 = e0;
        L->ne = ne;
    }
    return RECALL_OK;
}

/* (3) Crop to [BOS] and forward [SP = pooler(embed(kept))][embed(injected)][embed(edge)]
 * [embed(window)] (the SP only once something was evicted, FULL never evicts; the edge only with
 * opts.edge). The fast schedule recomputes only the rows after the longest unchanged prefix. */
static recall_status rebuild(rc_recall *r, loop_state *st, int c0, int R, const events *ev, rc_turn *turn,
                             recall_err *err) {
    release_phase(r, RELEASE_LM_HEAD); /* the decode phase's: not needed again before the rebuild's pick */
    layout L;
    RC_TRY(rebuild_layout(r, st, c0, R, &L, turn, err));
    const int n_sp = L.n_sp, rows = layout_rows(&L, st);
    rc_rebuild_rec *rb = PUSH(turn, rebuilds);
    if (!rb) return oom(err);
    rb->c0 = c0;
    rb->has_sp = n_sp > 0;
    rb->inj_len = st->nrid;
    rb->window_len = L.R;
    rb->edge_len = L.ne;
    int keep = 0;
    RC_TRY(rebuild_keys(st, &L, !r->o.reference_schedule, &keep, err));
    rb->reused = keep;
    if (rows == 0) { /* c0 = 0: nothing to run, `last` is the primed BOS's */
        RC_TRY(rc_qwen2_crop(r->llm, MQ, err));
        if (r->scr) memcpy(r->last_h, r->prime_h, (size_t)r->H * sizeof *r->last_h);
        else memcpy(r->last, r->prime_last, (size_t)r->V * sizeof *r->last);
    } else if (keep < rows) {
        RC_TRY(rebuild_forward(r, st, &L, keep, err));
        turn->rows_computed += rows - keep;
        if (keep < n_sp) turn->rows_new_gist += rows - keep; /* the gist changed, so did every row after it */
    }
    turn->rows_reused += keep;
    RC_TRY(emit(ev, st, RC_EV_REBUILD, rb, 0, err));
    rc_top5_rec *t5 = PUSH(turn, top5);
    if (!t5) return oom(err);
    t5->c0 = c0;
    rc_lm_pick pk;
    RC_TRY(pick_last(r, 5, &pk, err));
    memcpy(t5->ids, pk.ids, sizeof t5->ids);
    memcpy(t5->logits, pk.logits, sizeof t5->logits);
    st->c0_last = c0;
    st->step = 0;
    return RECALL_OK;
}

/* opts.score_rows: the gate's score of row j of n whose q_proj outputs are q[n_gate][n][NH*D] (the
 * token at position pos), as an RC_EV_SCORE event. */
static recall_status score_row(rc_recall *r, const loop_state *st, const float *q, int n, int j, int pos,
                               const events *ev, recall_err *err) {
    const rc_qwen2_config *c = rc_qwen2_cfg(r->llm);
    const size_t qd = (size_t)c->heads * c->head_dim;
    for (int g = 0; g < c->n_gate; g++) memcpy(r->sfeat + g * qd, q + ((size_t)g * n + j) * qd, qd * sizeof *q);
    const rc_gate_rec rec = {pos, rc_gate_score(r->heads, r->sfeat), 0};
    return emit(ev, st, RC_EV_SCORE, &rec, 0, err);
}

/* m feed tokens teacher-forced in one forward (m = 1 on the reference schedule). With
 * opts.score_rows every row's q is kept and scored. */
static recall_status force(rc_recall *r, loop_state *st, const int32_t *ids, int m, const events *ev, rc_turn *turn,
                           recall_err *err) {
    memcpy(st->gen + st->n_gen, ids, (size_t)m * sizeof *ids);
    if (r->o.score_rows) {
        rc_qwen2_fwd f;
        memset(&f, 0, sizeof f);
        f.ids = ids;
        f.n = m;
        f.q_all = r->sq;
        last_out(r, &f, r->last);
        RC_TRY(rc_qwen2_forward(r->llm, &f, err));
        memcpy(r->gq, rc_qwen2_gate_q(r->llm), (size_t)r->gate_dim * sizeof *r->gq);
        for (int j = 0; j < m; j++) RC_TRY(score_row(r, st, r->sq, m, j, st->n_gen + j, ev, err));
    } else {
        RC_TRY(forward_ids(r, r->llm, ids, m, r->last, err));
    }
    for (int j = 0; j < m; j++)
        if (!push_key(st, ids[j], -1)) return oom(err);
    st->n_gen += m;
    turn->rows_computed += m;
    return RECALL_OK;
}

/* The greedy choice from one row's pick (margins recorded): EOS or the turn cap ends the turn
 * (that token is not kept, fc->done), otherwise the token is streamed and appended to gen (not run). */
static recall_status choose(rc_recall *r, loop_state *st, feed_cursor *fc, const rc_lm_pick *pk, const events *ev,
                            rc_turn *turn, int32_t *tok, recall_err *err) {
    const float mg = pk->margin;
    const int32_t t = pk->argmax;
    if (mg < turn->min_margin) turn->min_margin = mg;
    if (mg < 1e-3f) {
        rc_margin_rec *lm = PUSH(turn, low);
        if (!lm) return oom(err);
        lm->pos = st->n_gen;
        lm->margin = mg;
    }
    if (t == r->eos || fc->newtok >= r->o.turn_cap) {
        fc->done = 1;
        return RECALL_OK;
    }
    fc->newtok++;
    RC_TRY(emit(ev, st, RC_EV_TOKEN, NULL, t, err));
    st->gen[st->n_gen++] = t;
    *tok = t;
    return RECALL_OK;
}

/* One greedy step: the choice from `last`, then the chosen token is run. */
static recall_status greedy_step(rc_recall *r, loop_state *st, feed_cursor *fc, const events *ev, rc_turn *turn,
                                 recall_err *err) {
    int32_t t = 0;
    rc_lm_pick pk;
    RC_TRY(pick_last(r, 0, &pk, err));
    RC_TRY(choose(r, st, fc, &pk, ev, turn, &t, err));
    if (fc->done) return RECALL_OK;
    RC_TRY(forward_ids(r, r->llm, &t, 1, r->last, err));
    if (r->o.score_rows) RC_TRY(score_row(r, st, r->gq, 1, 0, st->n_gen - 1, ev, err));
    if (!push_key(st, t, -1)) return oom(err);
    turn->rows_computed += 1;
    return RECALL_OK;
}

/* Rows 0..n-1 of vrows through the model in one forward: the rows the picks read (logits, or the
 * final-normed rows with screening) and gate-layer q of every row. */
static recall_status verify_forward(rc_recall *r, int n, recall_err *err) {
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = r->vrows;
    f.n = n;
    if (r->scr) f.normed_all = r->vnormed;
    else f.logits_all = r->vlogits;
    f.q_all = r->gate_dim ? r->vq : NULL;
    return rc_qwen2_forward(r->llm, &f, err);
}

/* The cache, `last` and the gate feature as if row a (of n verified) had been the latest forward:
 * rows after it are cropped, so rejected drafts leave no trace. */
static recall_status keep_rows(rc_recall *r, int base, int a, int n, recall_err *err) {
    if (a + 1 < n) RC_TRY(rc_qwen2_crop(r->llm, base + a + 1, err));
    if (r->scr) memcpy(r->last_h, r->vnormed + (size_t)a * r->H, (size_t)r->H * sizeof *r->last_h);
    else memcpy(r->last, r->vlogits + (size_t)a * r->V, (size_t)r->V * sizeof *r->last);
    const rc_qwen2_config *c = rc_qwen2_cfg(r->llm);
    const size_t qd = (size_t)c->heads * c->head_dim;
    for (int g = 0; g < c->n_gate; g++)
        memcpy(r->gq + g * qd, r->vq + ((size_t)g * n + a) * qd, qd * sizeof *r->gq);
    return RECALL_OK;
}

/* (4b) The greedy steps from `*step` to the chunk's end (or the turn's), speculatively: the
 * chosen, not yet run token goes through one forward together with up to k tokens drafted by
 * prompt lookup (draft.h). A row's logits do not depend on the rows run with it (qwen2.h), so
 * the choice from row i is bitwise plain decoding's; the choices are taken one by one, with
 * all their records and events, while each equals the draft's next token (then that row is
 * already run). The first disagreeing choice is kept and runs first in the next forward. k
 * stops at the chunk's end (a rebuild follows; the choice after the chunk's last step comes
 * from it) and at the turn cap, so no row is run that plain decoding would not run. */
static recall_status spec_steps(rc_recall *r, loop_state *st, feed_cursor *fc, int *step, const events *ev,
                                rc_turn *turn, recall_err *err) {
    int32_t t = 0;
    rc_lm_pick pk;
    RC_TRY(pick_last(r, 0, &pk, err));
    RC_TRY(choose(r, st, fc, &pk, ev, turn, &t, err));
    while (!fc->done) { /* t: chosen at step *step, appended, not run */
        const int room = r->o.chunk - *step - 1, cap_left = r->o.turn_cap - fc->newtok;
        int k = room < cap_left ? room : cap_left;
        if (k > 0) {
            const int len = rc_drafter_len(&r->dr);
            k = rc_draft_lookup(st->gen, st->n_gen, k < len ? k : len, r->vrows + 1);
        }
        r->vrows[0] = t;
        const int base = rc_qwen2_n_cached(r->llm), n = k + 1;
        RC_TRY(verify_forward(r, n, err));
        turn->rows_computed += n;
        int a = 0; /* drafted rows accepted */
        const int pos0 = st->n_gen - 1; /* vrows[0]'s position */
        for (;;) { /* row a is the sequence's: its step is done */
            if (r->o.score_rows) RC_TRY(score_row(r, st, r->vq, n, a, pos0 + a, ev, err));
            if (!push_key(st, r->vrows[a], -1)) return oom(err);
            if (++*step == r->o.chunk) break;
            const float *lg = r->scr ? NULL : r->vlogits + (size_t)a * r->V;
            const float *nm = r->scr ? r->vnormed + (size_t)a * r->H : NULL;
            RC_TRY(pick_row(r, lg, nm, 0, &pk, err));
            RC_TRY(choose(r, st, fc, &pk, ev, turn, &t, err));
            if (fc->done || a == k || t != r->vrows[a + 1]) break;
            a++;
        }
        RC_TRY(keep_rows(r, base, a, n, err));
        if (k > 0) {
            rc_drafter_update(&r->dr, k, a);
            turn->drafted += k;
            turn->accepted += a;
            turn->verifies++;
        }
        if (*step == r->o.chunk) break;
    }
    return RECALL_OK;
}

/* (4) The chunk from its step `step` on: feed tokens are teacher-forced (the fast schedule runs
 * all of the chunk's forced tokens in one multi-row forward), then greedy steps until EOS or the
 * turn cap (speculatively with opts.draft). A feed longer than a chunk simply continues in the
 * next chunk, after a rebuild. */
static recall_status run_chunk(rc_recall *r, loop_state *st, feed_cursor *fc, int step, const events *ev,
                               rc_turn *turn, recall_err *err) {
    const rc_recall_opts *o = &r->o;
    recall_status s = RECALL_OK;
    while (!s && !fc->done && step < o->chunk) {
        if (fc->fi < fc->n) {
            int m = o->reference_schedule ? 1 : o->chunk - step;
            if (m > fc->n - fc->fi) m = fc->n - fc->fi;
            s = force(r, st, fc->ids + fc->fi, m, ev, turn, err);
            fc->fi += m;
            step += m;
        } else if (o->draft > 0) {
            s = spec_steps(r, st, fc, &step, ev, turn, err);
        } else {
            s = greedy_step(r, st, fc, ev, turn, err);
            if (!fc->done) step++;
        }
    }
    st->step = step;
    return s;
}

/* The reply is gen after the feed; the fast schedule keeps the state for the next turn. */
static recall_status finish_turn(rc_recall *r, loop_state *st, int n_feed, rc_turn *turn, recall_err *err) {
    turn->n_reply = st->n_gen - n_feed;
    turn->reply = malloc((size_t)(turn->n_reply > 0 ? turn->n_reply : 1) * sizeof *turn->reply);
    if (!turn->reply) return oom(err);
    if (turn->n_reply > 0) memcpy(turn->reply, st->gen + n_feed, (size_t)turn->n_reply * sizeof *turn->reply);
    if (!r->o.reference_schedule) {
        rc_turn_free(&st->hist);
        if (!records_append(&st->hist, turn)) return oom(err);
        st->valid = 1;
    }
    return RECALL_OK;
}

/* One turn, as recall_loop.h states it: prime (or resume), then rebuild-and-chunk until done. */
recall_status rc_recall_reply(rc_recall *r, const int32_t *feed, int n_feed, rc_event_fn on_event, void *ctx,
                              rc_turn *turn, recall_err *err) {
    memset(turn, 0, sizeof *turn);
    turn->min_margin = INFINITY;
    RC_TRY(turn_ready(r, feed, n_feed, err));
    const rc_recall_opts *o = &r->o;
    loop_state *st = r->st;
    const events ev = {on_event, ctx};
    feed_cursor fc = {feed, n_feed, 0, 0, 0};
    int step = -1; /* >= 0: the first chunk continues the one the previous turn stopped in */
    recall_status s = can_resume(r, st, &fc) ? resume(st, &fc, turn, &step, err) : prime(r, st, turn, err);
    st->valid = 0; /* until this turn completes */
    while (!s && !fc.done) {
        if (step < 0) {
            const int c0 = st->n_gen;
            const int R = o->arm == RC_ARM_FULL ? c0 : (c0 < o->window ? c0 : o->window);
            const int nd = c0 - R; /* kept = gen[0:nd] */
            s = evict_and_seal(r, st, nd, turn, err);
            if (!s) s = gate_and_fire(r, st, c0, &ev, turn, err);
            if (!s) s = rebuild(r, st, c0, R, &ev, turn, err);
            step = 0;
        }
        if (!s) s = run_chunk(r, st, &fc, step, &ev, turn, err);
        step = -1;
    }
    if (!s) s = finish_turn(r, st, n_feed, turn, err);
    if (s) {
        rc_turn_free(turn);
        state_reset(st, o->block);
    }
    return s;
}
