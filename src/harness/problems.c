/* problems.c - CPython random.Random replica and the benchmark's problem builder (problems.h). */
#include "problems.h"

#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rc_pyrandom_seed(rc_pyrandom *r, uint32_t seed) {
    /* init_genrand(19650218) then init_by_array(key = [seed]), as CPython's random_seed does
     * for a non-negative int below 2**32. */
    uint32_t *mt = r->mt;
    mt[0] = 19650218u;
    for (int i = 1; i < 624; i++) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + (uint32_t)i;
    uint32_t key[1] = {seed};
    int i = 1, j = 0, k = 624;
    for (; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= 624) {
            mt[0] = mt[623];
            i = 1;
        }
        if (j >= 1) j = 0;
    }
    for (k = 623; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= 624) {
            mt[0] = mt[623];
            i = 1;
        }
    }
    mt[0] = 0x80000000u;
    r->mti = 624;
}

uint32_t rc_pyrandom_u32(rc_pyrandom *r) {
    uint32_t *mt = r->mt, y;
    if (r->mti >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        for (; kk < 623; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        y = (mt[623] & 0x80000000u) | (mt[0] & 0x7fffffffu);
        mt[623] = mt[396] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        r->mti = 0;
    }
    y = mt[r->mti++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint32_t rc_pyrandom_below(rc_pyrandom *r, uint32_t n) {
    int k = 0;
    while (k < 32 && (n >> k)) k++; /* n.bit_length() */
    uint32_t v;
    do v = rc_pyrandom_u32(r) >> (32 - k);
    while (v >= n);
    return v;
}

/* random.sample(range(n), k), CPython's two methods: when n is at most setsize (21, plus
 * 4**ceil(log4(3k)) for k > 5) a pool of the indices is drawn from and refilled from its end;
 * above it, indices are drawn from range(n) and redrawn while already taken. The two give different
 * picks for the same generator state, so a benchmark of more than 21 facts takes the second. The
 * log is Python's math.log(3k, 4) = log(3k) / log(4) in double. */
void rc_pysample(rc_pyrandom *r, int n, int k, int *out) {
    double setsize = 21.0;
    if (k > 5) setsize += pow(4.0, ceil(log(3.0 * k) / log(4.0)));
    if (n <= setsize) {
        int pool[RC_PYSAMPLE_MAX];
        for (int i = 0; i < n; i++) pool[i] = i;
        for (int i = 0; i < k; i++) {
            int j = (int)rc_pyrandom_below(r, (uint32_t)(n - i));
            out[i] = pool[j];
            pool[j] = pool[n - i - 1];
        }
        return;
    }
    for (int i = 0; i < k; i++) {
        int j, taken;
        do {
            j = (int)rc_pyrandom_below(r, (uint32_t)n);
            taken = 0;
            for (int t = 0; t < i; t++) taken |= out[t] == j;
        } while (taken);
        out[i] = j;
    }
}

typedef struct {
    char *a, *b;
} pair;

struct rc_bench {
    char *fact_user, *fact_assistant, *question_user;
    pair facts[32], casual[32];
    int n_facts, n_casual;
};

static char *dup(const char *s) {
    size_t l = strlen(s);
    char *d = malloc(l + 1);
    if (d) memcpy(d, s, l + 1);
    return d;
}

void rc_bench_free(rc_bench *b) {
    if (!b) return;
    free(b->fact_user);
    free(b->fact_assistant);
    free(b->question_user);
    for (int i = 0; i < b->n_facts; i++) free(b->facts[i].a), free(b->facts[i].b);
    for (int i = 0; i < b->n_casual; i++) free(b->casual[i].a), free(b->casual[i].b);
    free(b);
}

static recall_status read_pairs(const json_value *arr, const char *path, const char *key, pair *out, int *n,
                                recall_err *err) {
    if (!arr || arr->type != JSON_ARR || arr->len < 12 || arr->len > 32)
        return rc_fail(err, RECALL_E_FORMAT, "%s: \"%s\" must be an array of 12..32 [a, b] pairs", path, key);
    for (size_t i = 0; i < arr->len; i++) {
        const json_value *p = &arr->items[i];
        if (p->type != JSON_ARR || p->len != 2 || p->items[0].type != JSON_STR || p->items[1].type != JSON_STR)
            return rc_fail(err, RECALL_E_FORMAT, "%s: %s[%zu] is not a pair of strings", path, key, i);
        out[i].a = dup(p->items[0].str);
        out[i].b = dup(p->items[1].str);
        (*n)++;
        if (!out[i].a || !out[i].b) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    }
    return RECALL_OK;
}

recall_status rc_bench_load(const char *path, rc_bench **out, recall_err *err) {
    *out = NULL;
    json_doc *doc;
    recall_status s = json_read_file(path, &doc, err);
    if (s) return s;
    rc_bench *b = calloc(1, sizeof *b);
    if (!b) {
        json_free(doc);
        return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    }
    const json_value *r = json_root(doc);
    const char *keys[3] = {"fact_user", "fact_assistant", "question_user"};
    char **dst[3] = {&b->fact_user, &b->fact_assistant, &b->question_user};
    for (int i = 0; i < 3 && !s; i++) {
        const json_value *v = json_get_type(r, keys[i], JSON_STR);
        if (!v) s = rc_fail(err, RECALL_E_MISSING, "%s: string \"%s\" missing", path, keys[i]);
        else if (!(*dst[i] = dup(v->str))) s = rc_fail(err, RECALL_E_NOMEM, "out of memory");
    }
    if (!s) s = read_pairs(json_get(r, "facts"), path, "facts", b->facts, &b->n_facts, err);
    if (!s) s = read_pairs(json_get(r, "casual"), path, "casual", b->casual, &b->n_casual, err);
    json_free(doc);
    if (s) {
        rc_bench_free(b);
        return s;
    }
    *out = b;
    return RECALL_OK;
}

void rc_bench_view_of(const rc_bench *b, rc_bench_view *out) {
    out->fact_user = b->fact_user;
    out->fact_assistant = b->fact_assistant;
    out->question_user = b->question_user;
    out->n_facts = b->n_facts;
    out->n_casual = b->n_casual;
}

void rc_bench_fact(const rc_bench *b, int i, const char **kw, const char **val) {
    *kw = b->facts[i].a;
    *val = b->facts[i].b;
}

void rc_bench_casual(const rc_bench *b, int i, const char **user, const char **assistant) {
    *user = b->casual[i].a;
    *assistant = b->casual[i].b;
}

/* Python str.format with only {kw} and {val} fields. */
static char *format(const char *tpl, const char *kw, const char *val) {
    size_t cap = strlen(tpl) + strlen(kw) + (val ? strlen(val) : 0) + 1, n = 0;
    char *o = malloc(cap);
    if (!o) return NULL;
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{kw}", 4)) {
            memcpy(o + n, kw, strlen(kw));
            n += strlen(kw);
            p += 4;
        } else if (val && !strncmp(p, "{val}", 5)) {
            memcpy(o + n, val, strlen(val));
            n += strlen(val);
            p += 5;
        } else {
            o[n++] = *p++;
        }
    }
    o[n] = 0;
    return o;
}

static void free_steps(rc_problem *p, int from) {
    for (int i = from; i < p->n; i++) {
        free(p->steps[i].user);
        free(p->steps[i].assistant);
        free(p->steps[i].kw);
        free(p->steps[i].val);
    }
    p->n = from;
}

void rc_problem_free(rc_problem *p) {
    free_steps(p, 0);
    memset(p, 0, sizeof *p);
}

void rc_problem_keep_turns(rc_problem *p, int turns) {
    int gen = 0;
    for (int i = 0; i < p->n; i++)
        if ((p->steps[i].kind == RC_STEP_PROBE || p->steps[i].kind == RC_STEP_Q) && ++gen > turns) {
            free_steps(p, i);
            return;
        }
}

const char *rc_step_kind_name(rc_step_kind k) {
    return k == RC_STEP_FACT ? "fact" : k == RC_STEP_FILLER ? "filler" : k == RC_STEP_PROBE ? "probe" : "q";
}

recall_status rc_bench_problem(const rc_bench *b, uint32_t seed, rc_problem *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    rc_pyrandom r;
    rc_pyrandom_seed(&r, seed);
    int fi[3], fills[32], order[3];
    rc_pysample(&r, b->n_facts, 3, fi);
    rc_pysample(&r, b->n_casual, b->n_casual, fills);
    rc_pysample(&r, 3, 3, order);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        rc_step *s = &out->steps[out->n++];
        s->kind = RC_STEP_FACT;
        s->user = format(b->fact_user, b->facts[fi[i]].a, b->facts[fi[i]].b);
        s->assistant = dup(b->fact_assistant);
        ok &= s->user && s->assistant;
    }
    for (int j = 0; j < 9; j++) {
        rc_step *s = &out->steps[out->n++];
        s->kind = RC_STEP_FILLER;
        s->user = dup(b->casual[fills[j % b->n_casual]].a);
        s->assistant = dup(b->casual[fills[j % b->n_casual]].b);
        ok &= s->user && s->assistant;
    }
    for (int j = 9; j < 11; j++) {
        rc_step *s = &out->steps[out->n++];
        s->kind = RC_STEP_PROBE;
        s->user = dup(b->casual[fills[j]].a);
        ok &= s->user != NULL;
    }
    for (int i = 0; i < 3; i++) {
        const pair *f = &b->facts[fi[order[i]]];
        rc_step *s = &out->steps[out->n++];
        s->kind = RC_STEP_Q;
        s->user = format(b->question_user, f->a, NULL);
        s->kw = dup(f->a);
        s->val = dup(f->b);
        ok &= s->user && s->kw && s->val;
    }
    if (!ok) {
        rc_problem_free(out);
        return rc_fail(err, RECALL_E_NOMEM, "out of memory building problem %u", seed);
    }
    return RECALL_OK;
}

/* ---- running a problem -------------------------------------------------------------------- */

#include "tokenize_bpe.h"

void rc_problem_run_free(rc_problem_run *run) {
    for (int i = 0; i < run->n_turns; i++) rc_turn_free(&run->turns[i].turn);
    free(run->history);
    memset(run, 0, sizeof *run);
}

static recall_status append(int32_t **h, int *n, int *cap, const int32_t *ids, size_t m, recall_err *err) {
    if (*n + (int)m > *cap) {
        int nc = *cap ? *cap : 1024;
        while (nc < *n + (int)m) nc *= 2;
        int32_t *nh = realloc(*h, (size_t)nc * sizeof *nh);
        if (!nh) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
        *h = nh;
        *cap = nc;
    }
    memcpy(*h + *n, ids, m * sizeof *ids);
    *n += (int)m;
    return RECALL_OK;
}

recall_status rc_run_problem(rc_recall *r, const rc_problem *p, rc_event_fn on_event, rc_turn_fn on_turn, void *ctx,
                             rc_problem_run *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    const rc_bpe *bpe = rc_recall_bpe(r);
    int eos = rc_recall_eos(r), cap = 0;
    recall_status s = RECALL_OK;
    for (int i = 0; i < p->n && !s; i++) {
        const rc_step *st = &p->steps[i];
        int32_t *seg;
        size_t n;
        int forced = st->kind == RC_STEP_FACT || st->kind == RC_STEP_FILLER;
        s = rc_chat_segment(bpe, eos, out->n_history > 0, st->user, forced ? st->assistant : NULL, &seg, &n, err);
        if (s) break;
        s = append(&out->history, &out->n_history, &cap, seg, n, err);
        free(seg);
        if (s || forced) continue;
        if (out->n_turns == 8) {
            s = rc_fail(err, RECALL_E_LIMIT, "problem has more than 8 generated turns");
            break;
        }
        rc_problem_turn *t = &out->turns[out->n_turns];
        t->kind = st->kind;
        t->user = st->user;
        t->feed_len = out->n_history;
        s = rc_recall_reply(r, out->history, out->n_history, on_event, ctx, &t->turn, err);
        if (s) break;
        out->n_turns++;
        s = append(&out->history, &out->n_history, &cap, t->turn.reply, (size_t)t->turn.n_reply, err);
        if (!s && on_turn) on_turn(ctx, out->n_turns - 1, t);
    }
    if (s) rc_problem_run_free(out);
    return s;
}
