/* longctx.c - the exact-answer cases of `recall longctx` (longctx.h states every definition):
 * haystack slicing, inserts at a depth, the chat template, the prompt length search and the
 * depth measured on the prompt's own tokens. Token ids in, token ids out; no model runs here. */
#include "longctx.h"

#include "checksum.h"
#include "chat.h" /* rc_chat_segment: the reference chat template */
#include "problems.h"
#include "tokenize_bpe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char INTRO[] = "Below is a long text with a piece of information hidden in it. Read it, find the "
                            "information and remember it: you will be asked about it at the end.\n";
static const char *const KEYS[16] = {"amber",  "birch",   "cedar",   "delta",   "ember",  "fjord",
                                     "glacier", "harbor", "indigo",  "juniper", "kestrel", "lantern",
                                     "meadow", "nectar",  "orchid",  "pebble"};
/* A haystack that already holds one of these could hide a second "answer". */
static const char *const MARKERS[2] = {"magic number", "VAR "};
/* The chat template's user prefix, as rc_chat_segment writes it. */
static const char USER_TAG[] = "<\xef\xbd\x9cUser\xef\xbd\x9c>", ASSISTANT_TAG[] = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";

static const char *const TASK_NAMES[RC_LCTX_NTASKS] = {"needle", "multikey", "vartrack"};

const char *rc_lctx_task_name(rc_lctx_task t) { return t >= 0 && t < RC_LCTX_NTASKS ? TASK_NAMES[t] : "?"; }

int rc_lctx_task_parse(const char *s, rc_lctx_task *out) {
    for (int t = 0; t < RC_LCTX_NTASKS; t++)
        if (!strcmp(s, TASK_NAMES[t])) {
            *out = (rc_lctx_task)t;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------- the haystack */

void rc_lctx_haystack_free(rc_lctx_haystack *h) {
    free(h->text);
    free(h->ids);
    free(h->off);
    memset(h, 0, sizeof *h);
}

/* Byte length of every token's text: prefix sums into off[0..n]; the sum must be the text's
 * length (byte-level BPE on ASCII decodes byte for byte). */
static recall_status token_offsets(const rc_bpe *bpe, const int32_t *ids, int n, size_t total, const char *what,
                                   size_t **out, recall_err *err) {
    size_t *off = malloc(((size_t)n + 1) * sizeof *off);
    if (!off) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        char *t = NULL;
        size_t l = 0;
        recall_status s = rc_bpe_decode(bpe, ids + i, 1, 0, &t, &l, err);
        free(t);
        if (s) {
            free(off);
            return s;
        }
        off[i + 1] = off[i] + l;
    }
    if (off[n] != total) {
        size_t got = off[n];
        free(off);
        return rc_fail(err, RECALL_E_FORMAT, "longctx: %s: %d tokens decode to %zu bytes, not the %zu encoded", what, n,
                       got, total);
    }
    *out = off;
    return RECALL_OK;
}

recall_status rc_lctx_haystack_from_text(const rc_bpe *bpe, const char *text, size_t len, const char *what,
                                         rc_lctx_haystack *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!(c == '\t' || c == '\n' || (c >= 0x20 && c < 0x7f)))
            return rc_fail(err, RECALL_E_FORMAT,
                           "longctx: haystack %s: byte 0x%02x at offset %zu is not printable ASCII, tab or newline", what,
                           c, i);
    }
    out->text = malloc(len + 1);
    if (!out->text) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    memcpy(out->text, text, len);
    out->text[len] = 0;
    out->len = len;
    for (int m = 0; m < 2; m++) {
        const char *p = strstr(out->text, MARKERS[m]);
        if (p) {
            size_t at = (size_t)(p - out->text);
            rc_lctx_haystack_free(out);
            return rc_fail(err, RECALL_E_FORMAT, "longctx: haystack %s holds the insert marker \"%s\" at offset %zu",
                           what, MARKERS[m], at);
        }
    }
    size_t n = 0;
    recall_status s = rc_bpe_encode(bpe, out->text, len, 0, &out->ids, &n, err);
    if (!s && n > 0x7fffffff) s = rc_fail(err, RECALL_E_LIMIT, "longctx: haystack %s: %zu tokens", what, n);
    out->n = (int)n;
    if (!s) s = token_offsets(bpe, out->ids, out->n, len, what, &out->off, err);
    if (s) {
        rc_lctx_haystack_free(out);
        return s;
    }
    out->xxh64 = rc_xxh64(out->text, len, 0);
    return RECALL_OK;
}

recall_status rc_lctx_haystack_load(const rc_bpe *bpe, const char *path, rc_lctx_haystack *out, recall_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return rc_fail(err, RECALL_E_IO, "longctx: cannot open haystack %s", path);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    recall_status s = bad ? rc_fail(err, RECALL_E_IO, "longctx: cannot read haystack %s", path)
                          : rc_lctx_haystack_from_text(bpe, buf, len, path, out, err);
    free(buf);
    return s;
}

/* ---------------------------------------------------------------- the seeded choices */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint32_t below(uint64_t *x, uint32_t n) { return (uint32_t)((splitmix64(x) >> 32) * n >> 32); }
static double unit(uint64_t *x) { return (double)(splitmix64(x) >> 11) * 0x1.0p-53; } /* [0, 1) */

uint64_t rc_lctx_case_seed(uint64_t seed, rc_lctx_task task, int len, double depth) {
    /* the depth in millionths: 0.5 and 0.500000 are one case */
    int64_t v[4] = {(int64_t)seed, (int64_t)task, (int64_t)len, (int64_t)llround(depth * 1e6)};
    int32_t w[8];
    for (int i = 0; i < 4; i++) {
        w[2 * i] = (int32_t)(uint32_t)((uint64_t)v[i] & 0xffffffffu);
        w[2 * i + 1] = (int32_t)(uint32_t)((uint64_t)v[i] >> 32);
    }
    return rc_xxh64_ids(w, 8); /* little-endian bytes: the same on any host */
}

/* A 6-digit value absent from the haystack and from the values already drawn. */
static void draw_value(uint64_t *rng, const rc_lctx_haystack *h, char (*vals)[8], int n_have, char *out) {
    for (;;) {
        snprintf(out, 8, "%06u", 100000u + below(rng, 900000u));
        int dup = strstr(h->text, out) != NULL;
        for (int i = 0; i < n_have; i++) dup |= !strcmp(vals[i], out);
        if (!dup) return;
    }
}

/* ---------------------------------------------------------------- the case */

typedef struct {
    char text[96]; /* "\n" sentence "\n" */
    double depth;
    int order;     /* task order (ties at one cut keep it) */
} insert;

static int cmp_insert(const void *a, const void *b) {
    const insert *x = a, *y = b;
    if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
    return x->order - y->order;
}

/* The task's inserts (key first, in task order) and question. */
static void make_inserts(rc_lctx_task task, double depth, uint64_t *rng, const rc_lctx_haystack *h, insert *ins,
                         int *n_ins, char *question, size_t qcap, char *expected) {
    char vals[RC_LCTX_MAX_INSERTS][8];
    if (task == RC_LCTX_NEEDLE) {
        draw_value(rng, h, vals, 0, vals[0]);
        snprintf(ins[0].text, sizeof ins[0].text, "\nThe special magic number is %s.\n", vals[0]);
        ins[0].depth = depth;
        *n_ins = 1;
        snprintf(question, qcap, "What is the special magic number mentioned in the text above? Answer with the number only.");
    } else if (task == RC_LCTX_MULTIKEY) {
        int pick[16];
        for (int i = 0; i < 16; i++) pick[i] = i;
        for (int i = 0; i < 4; i++) { /* partial Fisher-Yates: 4 distinct keys */
            int j = i + (int)below(rng, (uint32_t)(16 - i)), t = pick[i];
            pick[i] = pick[j];
            pick[j] = t;
        }
        for (int i = 0; i < 4; i++) {
            draw_value(rng, h, vals, i, vals[i]);
            snprintf(ins[i].text, sizeof ins[i].text, "\nThe special magic number for %s is %s.\n", KEYS[pick[i]], vals[i]);
            ins[i].depth = i ? unit(rng) : depth;
        }
        *n_ins = 4;
        snprintf(question, qcap,
                 "What is the special magic number for %s mentioned in the text above? Answer with the number only.",
                 KEYS[pick[0]]);
    } else {
        char names[4][6];
        for (int i = 0; i < 4; i++) {
            int dup;
            do {
                for (int k = 0; k < 5; k++) names[i][k] = (char)('A' + below(rng, 26));
                names[i][5] = 0;
                dup = 0;
                for (int j = 0; j < i; j++) dup |= !strcmp(names[j], names[i]);
            } while (dup);
        }
        draw_value(rng, h, vals, 0, vals[0]);
        double d[4] = {depth, 0, 0, 0};
        for (int i = 1; i < 4; i++) d[i] = depth + unit(rng) * (1.0 - depth);
        for (int i = 1; i < 4; i++) /* the hops in chain order: ascending depths */
            for (int j = i; j > 1 && d[j] < d[j - 1]; j--) {
                double t = d[j];
                d[j] = d[j - 1];
                d[j - 1] = t;
            }
        snprintf(ins[0].text, sizeof ins[0].text, "\nVAR %s = %s.\n", names[0], vals[0]);
        for (int i = 1; i < 4; i++)
            snprintf(ins[i].text, sizeof ins[i].text, "\nVAR %s = VAR %s.\n", names[i], names[i - 1]);
        for (int i = 0; i < 4; i++) ins[i].depth = d[i];
        *n_ins = 4;
        snprintf(question, qcap, "What is the value of VAR %s in the text above? Answer with the number only.",
                 names[3]);
    }
    for (int i = 0; i < *n_ins; i++) ins[i].order = i;
    memcpy(expected, vals[0], 8);
}

/* INTRO + haystack tokens [off, off+H) with the inserts (sorted by depth) at round(depth x H) +
 * "\n" + question. ins_at[i]: byte offset of insert i in the text. */
static char *make_user(const rc_lctx_haystack *h, int off, int H, const insert *ins, int n_ins, const char *question,
                       size_t *ins_at, size_t *q_at) {
    size_t cap = strlen(INTRO) + (h->off[off + H] - h->off[off]) + strlen(question) + 2;
    for (int i = 0; i < n_ins; i++) cap += strlen(ins[i].text);
    char *u = malloc(cap), *p = u;
    if (!u) return NULL;
    p += sprintf(p, "%s", INTRO);
    int prev = 0;
    for (int i = 0; i <= n_ins; i++) {
        int cut = i < n_ins ? (int)lround(ins[i].depth * H) : H;
        if (cut < prev) cut = prev;
        size_t a = h->off[off + prev], b = h->off[off + cut];
        memcpy(p, h->text + a, b - a);
        p += b - a;
        prev = cut;
        if (i < n_ins) {
            ins_at[i] = (size_t)(p - u);
            p += sprintf(p, "%s", ins[i].text);
        }
    }
    *q_at = (size_t)(p - u);
    p += sprintf(p, "\n%s", question);
    return u;
}

/* One attempt at H haystack tokens: the user text and its prompt. */
typedef struct {
    char *user;
    int32_t *ids;
    int n, H, off;
    size_t ins_at[RC_LCTX_MAX_INSERTS], q_at;
} attempt;

static void attempt_free(attempt *a) {
    free(a->user);
    free(a->ids);
    memset(a, 0, sizeof *a);
}

static recall_status try_len(const rc_bpe *bpe, const rc_lctx_haystack *h, double u, int H, const insert *ins,
                             int n_ins, const char *question, attempt *a, recall_err *err) {
    memset(a, 0, sizeof *a);
    a->H = H;
    a->off = (int)floor(u * (double)(h->n - H + 1));
    if (a->off > h->n - H) a->off = h->n - H;
    a->user = make_user(h, a->off, H, ins, n_ins, question, a->ins_at, &a->q_at);
    if (!a->user) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    size_t n = 0;
    recall_status s = rc_chat_segment(bpe, 0, 0, a->user, NULL, &a->ids, &n, err);
    a->n = (int)n;
    if (s) attempt_free(a);
    return s;
}

/* The largest-prompt attempt with n <= len: H moves by len - n until the prompt lands on len (at
 * most 16 tries; growing, H always passes the best H so far, so the search does not cycle there). */
static recall_status search_len(const rc_bpe *bpe, const rc_lctx_haystack *h, rc_lctx_task task, int len, double u,
                                const insert *ins, int n_ins, const char *question, attempt *best, recall_err *err) {
    attempt a;
    RC_TRY(try_len(bpe, h, u, 0, ins, n_ins, question, &a, err));
    const int fixed = a.n;
    if (fixed > len) {
        attempt_free(&a);
        return rc_fail(err, RECALL_E_LIMIT,
                       "longctx: a %s case of %d tokens is below its %d tokens of instructions, inserts and question",
                       rc_lctx_task_name(task), len, fixed);
    }
    *best = a;
    int H = len - fixed;
    for (int it = 0; it < 16 && best->n != len; it++) {
        if (H > h->n) {
            attempt_free(best);
            return rc_fail(err, RECALL_E_LIMIT,
                           "longctx: the haystack holds %d tokens but a %d-token %s case needs about %d of them "
                           "(a longer haystack or a shorter --len)",
                           h->n, len, rc_lctx_task_name(task), H);
        }
        recall_status s = try_len(bpe, h, u, H, ins, n_ins, question, &a, err);
        if (s) {
            attempt_free(best);
            return s;
        }
        int step = len - a.n;
        if (a.n <= len && a.n > best->n) {
            attempt_free(best);
            *best = a;
        } else {
            attempt_free(&a);
        }
        if (step == 0) break;
        /* overshoot: back off at least one token; undershoot: grow by the gap */
        H += step;
        if (H <= best->H && step > 0) H = best->H + 1;
        if (H < 0) break;
    }
    return RECALL_OK;
}

/* Token holding byte b: the largest t with off[t] <= b. */
static int token_at(const size_t *off, int n, size_t b) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

recall_status rc_lctx_build(const rc_bpe *bpe, const rc_lctx_haystack *h, rc_lctx_task task, int len, double depth,
                            uint64_t seed, rc_lctx_case *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    if (task < 0 || task >= RC_LCTX_NTASKS) return rc_fail(err, RECALL_E_ARG, "longctx: unknown task %d", (int)task);
    if (!(depth >= 0.0 && depth <= 1.0)) return rc_fail(err, RECALL_E_ARG, "longctx: depth %g is outside [0, 1]", depth);
    if (len < 1) return rc_fail(err, RECALL_E_ARG, "longctx: length %d is not positive", len);
    out->task = task;
    out->len = len;
    out->depth = depth;
    out->seed = seed;
    uint64_t rng = rc_lctx_case_seed(seed, task, len, depth);
    insert ins[RC_LCTX_MAX_INSERTS];
    int n_ins = 0;
    make_inserts(task, depth, &rng, h, ins, &n_ins, out->question, sizeof out->question, out->expected);
    const double u = unit(&rng);
    qsort(ins, (size_t)n_ins, sizeof *ins, cmp_insert);
    attempt a;
    RC_TRY(search_len(bpe, h, task, len, u, ins, n_ins, out->question, &a, err));

    /* where everything landed, in prompt tokens */
    size_t *off = NULL, base = strlen(USER_TAG);
    size_t total = base + strlen(a.user) + strlen(ASSISTANT_TAG);
    recall_status s = token_offsets(bpe, a.ids, a.n, total, "prompt", &off, err);
    if (s) {
        attempt_free(&a);
        return s;
    }
    out->n_inserts = n_ins;
    size_t ib[RC_LCTX_MAX_INSERTS], ie[RC_LCTX_MAX_INSERTS];
    for (int i = 0; i < n_ins; i++) {
        if (ins[i].order == 0) out->key = i;
        ib[i] = base + a.ins_at[i];
        ie[i] = ib[i] + strlen(ins[i].text);
        out->ins_first[i] = token_at(off, a.n, ib[i]);
        out->ins_last[i] = token_at(off, a.n, ie[i] - 1);
        out->ins_depth[i] = ins[i].depth;
    }
    out->ctx_first = token_at(off, a.n, base + strlen(INTRO));
    out->ctx_end = token_at(off, a.n, base + a.q_at);
    int before = 0, hay = 0;
    for (int t = out->ctx_first; t < out->ctx_end; t++) {
        int in_insert = 0;
        for (int i = 0; i < n_ins; i++) in_insert |= off[t] < ie[i] && off[t + 1] > ib[i];
        if (in_insert) continue;
        hay++;
        before += t < out->ins_first[out->key];
    }
    free(off);
    out->depth_actual = hay ? (double)before / hay : depth;
    out->ids = a.ids;
    out->n_ids = a.n;
    out->user = a.user;
    out->hay_off = a.off;
    out->hay_tokens = a.H;
    out->ids_xxh64 = rc_xxh64_ids(a.ids, (size_t)a.n);
    return RECALL_OK;
}

void rc_lctx_case_free(rc_lctx_case *c) {
    free(c->ids);
    free(c->user);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- scoring */

