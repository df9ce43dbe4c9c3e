/* farfact.c - far-back recall cases and their scoring (farfact.h states every definition): a chat
 * of the bench's exchanges with one fact DIST tokens before its question. Token ids in, token ids
 * out; no model runs here. */
#include "farfact.h"

#include "checksum.h"
#include "chat.h"    /* rc_lctx_answer: the exact-match rule of every longctx task */
#include "longctx.h"
#include "tokenize_bpe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the seeded choices */

/* The generator of longctx.c, so that both tasks' draws are read the same way. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int below(uint64_t *x, int n) { return (int)((splitmix64(x) >> 32) * (uint64_t)n >> 32); }
static double unit(uint64_t *x) { return (double)(splitmix64(x) >> 11) * 0x1.0p-53; } /* [0, 1) */

uint64_t rc_ff_case_seed(uint64_t seed, int dist, int index) {
    /* a tag, so that no (seed, dist, index) shares its stream with a longctx case's seed */
    int64_t v[4] = {(int64_t)seed, 0x66617266616374LL /* "farfact" */, (int64_t)dist, (int64_t)index};
    int32_t w[8];
    for (int i = 0; i < 4; i++) {
        w[2 * i] = (int32_t)(uint32_t)((uint64_t)v[i] & 0xffffffffu);
        w[2 * i + 1] = (int32_t)(uint32_t)((uint64_t)v[i] >> 32);
    }
    return rc_xxh64_ids(w, 8); /* little-endian bytes: the same on any host */
}

/* ---------------------------------------------------------------- the chat */

/* The chat template's tags around a user message, as rc_chat_segment writes them. */
static const char USER_TAG[] = "<\xef\xbd\x9cUser\xef\xbd\x9c>", ASSISTANT_TAG[] = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";

/* tpl with {kw} and {val} replaced (Python's str.format with those two fields only); *val_at: the
 * byte offset of the first {val}'s substitution, -1 if none. */
static char *format(const char *tpl, const char *kw, const char *val, long *val_at) {
    size_t kl = strlen(kw), vl = strlen(val), cap = 1, n = 0;
    for (const char *p = tpl; *p; p++) cap += 1 + kl + vl; /* a bound: every byte a field */
    char *o = malloc(cap);
    if (!o) return NULL;
    *val_at = -1;
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{kw}", 4)) {
            memcpy(o + n, kw, kl), n += kl, p += 4;
        } else if (!strncmp(p, "{val}", 5)) {
            if (*val_at < 0) *val_at = (long)n;
            memcpy(o + n, val, vl), n += vl, p += 5;
        } else {
            o[n++] = *p++;
        }
    }
    o[n] = 0;
    return o;
}

/* The feed as it grows. */
typedef struct {
    int32_t *ids;
    int n, cap;
} feed;

static recall_status feed_add(feed *f, const int32_t *ids, size_t m, recall_err *err) {
    if ((size_t)f->n + m > 0x7fffffff) return rc_fail(err, RECALL_E_LIMIT, "farfact: the chat exceeds 2^31 tokens");
    if (f->n + (int)m > f->cap) {
        int nc = f->cap ? f->cap : 4096;
        while (nc < f->n + (int)m) nc = nc > 0x3fffffff ? 0x7fffffff : nc * 2;
        int32_t *ni = realloc(f->ids, (size_t)nc * sizeof *ni);
        if (!ni) return rc_fail(err, RECALL_E_NOMEM, "farfact: out of memory");
        f->ids = ni;
        f->cap = nc;
    }
    memcpy(f->ids + f->n, ids, m * sizeof *ids);
    f->n += (int)m;
    return RECALL_OK;
}

/* What building a case reads. */
typedef struct {
    const rc_bpe *bpe;
    int eos;
    const rc_bench *b;
    rc_bench_view v;
    const char *kw, *val; /* the target's */
    int *kws, *vals;      /* the other facts whose keyword / value differ from the target's */
    int n_kws, n_vals;
} builder;

/* One exchange (user, assistant) appended; *first: where its segment starts in the feed. */
static recall_status add_exchange(const builder *bd, feed *f, const char *user, const char *assistant, int *first,
                                  size_t *n_seg, recall_err *err) {
    int32_t *seg = NULL;
    size_t n = 0;
    RC_TRY(rc_chat_segment(bd->bpe, bd->eos, f->n > 0, user, assistant, &seg, &n, err));
    if (first) *first = f->n;
    if (n_seg) *n_seg = n;
    recall_status s = feed_add(f, seg, n, err);
    free(seg);
    return s;
}

/* A filler exchange (farfact.h): another keyword with another value, or a casual pair. */
static recall_status add_filler(const builder *bd, uint64_t *rng, feed *f, rc_ff_case *c, recall_err *err) {
    if (unit(rng) < c->spec.fact_share) {
        const char *kw, *val, *k2, *v2;
        rc_bench_fact(bd->b, bd->kws[below(rng, bd->n_kws)], &kw, &v2);
        rc_bench_fact(bd->b, bd->vals[below(rng, bd->n_vals)], &k2, &val);
        long at;
        char *user = format(bd->v.fact_user, kw, val, &at);
        if (!user) return rc_fail(err, RECALL_E_NOMEM, "farfact: out of memory");
        recall_status s = add_exchange(bd, f, user, bd->v.fact_assistant, NULL, NULL, err);
        free(user);
        c->n_fill_facts++;
        return s;
    }
    const char *u, *a;
    rc_bench_casual(bd->b, below(rng, bd->v.n_casual), &u, &a);
    c->n_fill_casual++;
    return add_exchange(bd, f, u, a, NULL, NULL, err);
}

/* The target's fact exchange, and the value's tokens in it: byte offsets of every token (decoded
 * on its own, specials kept) must add up to the segment's text. */
static recall_status add_target(const builder *bd, feed *f, rc_ff_case *c, recall_err *err) {
    long at;
    char *user = format(bd->v.fact_user, bd->kw, bd->val, &at);
    if (!user) return rc_fail(err, RECALL_E_NOMEM, "farfact: out of memory");
    size_t el = 0, n_seg = 0, pos = 0;
    if (f->n > 0 && !rc_bpe_token_str(bd->bpe, bd->eos, &el)) el = 0; /* rc_chat_segment refuses it below */
    /* the segment's text, as rc_chat_segment writes it: [EOS] USER_TAG user ASSISTANT_TAG assistant */
    const size_t head = el + strlen(USER_TAG), vb = head + (size_t)at, ve = vb + strlen(bd->val);
    const size_t total = head + strlen(user) + strlen(ASSISTANT_TAG) + strlen(bd->v.fact_assistant);
    recall_status s = add_exchange(bd, f, user, bd->v.fact_assistant, &c->fact_first, &n_seg, err);
    free(user);
    if (s) return s;
    c->fact_last = c->fact_first + (int)n_seg - 1;
    c->val_first = c->val_last = -1;
    for (size_t i = 0; i < n_seg && !s; i++) {
        char *t = NULL;
        size_t l = 0;
        s = rc_bpe_decode(bd->bpe, f->ids + c->fact_first + i, 1, 0, &t, &l, err);
        free(t);
        if (!s && pos < ve && pos + l > vb) { /* the token holds a byte of the value */
            if (c->val_first < 0) c->val_first = c->fact_first + (int)i;
            c->val_last = c->fact_first + (int)i;
        }
        pos += l;
    }
    if (!s && (pos != total || c->val_first < 0))
        s = rc_fail(err, RECALL_E_FORMAT,
                    "farfact: the fact exchange of \"%s\" decodes token by token to %zu bytes, not its %zu (a "
                    "character split across tokens): the value's tokens cannot be located",
                    bd->kw, pos, total);
    return s;
}

/* The templates and the other facts (farfact.h's refusals). */
static recall_status builder_init(builder *bd, const rc_bpe *bpe, int eos, const rc_bench *b, int t, recall_err *err) {
    memset(bd, 0, sizeof *bd);
    bd->bpe = bpe;
    bd->eos = eos;
    bd->b = b;
    rc_bench_view_of(b, &bd->v);
    if (!strstr(bd->v.fact_user, "{kw}") || !strstr(bd->v.fact_user, "{val}") || !strstr(bd->v.question_user, "{kw}"))
        return rc_fail(err, RECALL_E_FORMAT, "farfact: fact_user needs {kw} and {val}, question_user {kw}");
    rc_bench_fact(b, t, &bd->kw, &bd->val);
    bd->kws = malloc((size_t)bd->v.n_facts * sizeof *bd->kws);
    bd->vals = malloc((size_t)bd->v.n_facts * sizeof *bd->vals);
    if (!bd->kws || !bd->vals) return rc_fail(err, RECALL_E_NOMEM, "farfact: out of memory");
    for (int i = 0; i < bd->v.n_facts; i++) {
        const char *kw, *val;
        rc_bench_fact(b, i, &kw, &val);
        if (strcmp(kw, bd->kw)) bd->kws[bd->n_kws++] = i;
        if (strcmp(val, bd->val)) bd->vals[bd->n_vals++] = i;
    }
    if (!bd->n_kws || !bd->n_vals)
        return rc_fail(err, RECALL_E_FORMAT, "farfact: the bench has no keyword or value other than \"%s\" / \"%s\"",
                       bd->kw, bd->val);
    return RECALL_OK;
}

static char *dup(const char *s) {
    size_t l = strlen(s) + 1;
    char *d = malloc(l);
    if (d) memcpy(d, s, l);
    return d;
}

recall_status rc_ff_build(const rc_bpe *bpe, int eos_id, const rc_bench *b, const rc_ff_spec *spec,
                          rc_ff_case *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    const int dist = spec->dist;
    if (dist < 0) return rc_fail(err, RECALL_E_ARG, "farfact: distance %d is negative", dist);
    if (!(spec->fact_share >= 0.0 && spec->fact_share <= 1.0))
        return rc_fail(err, RECALL_E_ARG, "farfact: fact share %g is outside [0, 1]", spec->fact_share);
    out->spec = *spec;
    uint64_t rng = rc_ff_case_seed(spec->seed, dist, spec->index);
    rc_bench_view v;
    rc_bench_view_of(b, &v);
    out->target = below(&rng, v.n_facts);
    builder bd;
    feed f = {NULL, 0, 0};
    recall_status s = builder_init(&bd, bpe, eos_id, b, out->target, err);
    out->lead = below(&rng, RC_FF_MAX_LEAD + 1);
    for (int i = 0; i < out->lead && !s; i++) s = add_filler(&bd, &rng, &f, out, err);
    if (!s) s = add_target(&bd, &f, out, err);
    while (!s && f.n - (out->val_last + 1) < dist) s = add_filler(&bd, &rng, &f, out, err);
    out->n_exchanges = out->n_fill_facts + out->n_fill_casual + 1;
    long unused;
    if (!s) {
        out->q_first = f.n;
        out->distance = f.n - (out->val_last + 1);
        out->kw = dup(bd.kw);
        out->val = dup(bd.val);
        out->question = format(bd.v.question_user, bd.kw, "", &unused);
        if (!out->kw || !out->val || !out->question) s = rc_fail(err, RECALL_E_NOMEM, "farfact: out of memory");
    }
    if (!s) s = add_exchange(&bd, &f, out->question, NULL, NULL, NULL, err);
    free(bd.kws);
    free(bd.vals);
    out->ids = f.ids;
    out->n_ids = f.n;
    if (s) {
        rc_ff_case_free(out);
        return s;
    }
    out->ids_xxh64 = rc_xxh64_ids(out->ids, (size_t)out->n_ids);
    return RECALL_OK;
}

void rc_ff_case_free(rc_ff_case *c) {
    free(c->ids);
    free(c->kw);
    free(c->val);
    free(c->question);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- scoring */

/* Candidate k of a fire at c0: the feed tokens [*a, *b) it holds; the candidate count the
 * geometry gives is *n. */
static void candidate_span(const rc_recall_opts *o, int c0, int k, int *a, int *b, int *n) {
    const int nd = c0 > o->window ? c0 - o->window : 0, nb = nd / o->block;
    *n = nb + (nd - nb * o->block >= o->buf_min);
    *a = k * o->block;
    *b = k < nb ? *a + o->block : nd;
}

recall_status rc_ff_score(const rc_ff_case *c, const rc_turn *t, const char *reply_text, const rc_recall_opts *o,
                          rc_ff_result *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    out->first_c0 = -1;
    out->q_gate_max = -INFINITY;
    for (int i = 0; i < t->n_gates; i++)
        if (t->gates[i].c0 > c->q_first) {
            out->q_gates++;
            if (t->gates[i].score > out->q_gate_max) out->q_gate_max = t->gates[i].score;
        }
    for (int i = 0; i < t->n_fires; i++) {
        const rc_fire_rec *f = &t->fires[i];
        int a, b, n;
        candidate_span(o, f->c0, 0, &a, &b, &n);
        if (n != f->ncand)
            return rc_fail(err, RECALL_E_FORMAT,
                           "farfact: the fire at c0 = %d had %d candidates; window %d, block %d and buf_min %d give %d",
                           f->c0, f->ncand, o->window, o->block, o->buf_min, n);
        if (f->c0 <= c->q_first) {
            out->early++;
            continue;
        }
        int held = 0, holder = -1; /* value tokens in the chosen candidates; the candidate of its first */
        for (int k = 0; k < f->ncand; k++) {
            candidate_span(o, f->c0, k, &a, &b, &n);
            if (c->val_first >= a && c->val_first < b) holder = k;
        }
        for (int j = 0; j < f->ntop; j++) {
            candidate_span(o, f->c0, f->top[j], &a, &b, &n);
            for (int p = c->val_first; p <= c->val_last; p++) held += p >= a && p < b;
        }
        if (!out->fired) {
            out->first_c0 = f->c0;
            out->ncand = f->ncand;
            if (holder >= 0) {
                out->rank = 1;
                for (int k = 0; k < f->ncand; k++) out->rank += f->bridge[k] > f->bridge[holder];
            }
        }
        out->fired = 1;
        out->injected |= f->injected;
        out->retrieved |= f->injected && held == c->val_last - c->val_first + 1;
    }
    out->exact = rc_lctx_answer(reply_text, c->val, out->answer, sizeof out->answer);
    return RECALL_OK;
}
