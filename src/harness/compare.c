/* compare.c - an engine output (A) against a reference output (B): .npz stage dumps array by
 * array, loop traces record by record up to the first divergence (see compare.h).
 *
 * npz:   for each array both files hold (shape S, N elements): max |A-B|, max |B|, their ratio,
 *        the worst multi-index, PASS iff within the array's row of the tolerance table.
 * trace: turns[t] for t < min(turns), each merged chronologically by the key (c0, type) with
 *        type gate 0 < fire 1 < rebuild 2 < top-5 3 < reply token 4 (a reply token at history
 *        position p has c0 = p: the chunk that starts at p checks the gate, fires, rebuilds and
 *        reads its top-5 before it chooses token p). The first record that differs is the
 *        divergence; every later one is counted as its consequence. */
#include "compare.h"

#include "json.h"
#include "npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ulps and the tolerance table ------------------------------------------------------- */

static int64_t ord_float(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

int64_t rc_ulp_gap(float a, float b) {
    if (isnan(a) || isnan(b)) return INT64_MAX;
    int64_t d = ord_float(a) - ord_float(b);
    return d < 0 ? -d : d;
}

/* One row per quantity, from the tolerance table of docs/NUMERICS.md. The
 * trace rows are the recall-loop row's float tolerances; the measured errors against the HF
 * goldens are 7.6e-6 (gate), 1.1e-5 (bridge) and 9.8e-7 (top-5 logits). */
static const rc_cmp_tol TOLS[] = {
    {"logits", RC_TOL_REL_MAX, 1e-4, "Qwen2 logits / hidden / q_proj (f32 or NF4 weights)"},
    {"hidden_last", RC_TOL_REL_MAX, 1e-4, "Qwen2 logits / hidden / q_proj (f32 or NF4 weights)"},
    {"q_layers", RC_TOL_REL_MAX, 1e-4, "Qwen2 logits / hidden / q_proj (f32 or NF4 weights)"},
    {"embeds_logits_last", RC_TOL_REL_MAX, 1e-4, "inputs_embeds path (SP + injected rows)"},
    {"embeds_q_last", RC_TOL_REL_MAX, 1e-4, "inputs_embeds path (SP + injected rows)"},
    {"sp", RC_TOL_REL_MAX, 1e-5, "AttnPoolSP"},
    {"embeds_sp", RC_TOL_REL_MAX, 1e-5, "AttnPoolSP"},
    {"emb", RC_TOL_REL_MAX, 1e-5, "BERT CLS + L2"},
    {"trace.gate", RC_TOL_ABS, 1e-4, "recall loop: gate score"},
    {"trace.bridge", RC_TOL_REL_MAX, 1e-4, "recall loop: bridge scores (rel. to the fire's max |B|)"},
    {"trace.top5", RC_TOL_REL_MAX, 1e-4, "recall loop: rebuild top-5 logits (rel. to the record's max |B|)"},
    {"score.nll", RC_TOL_ABS, 1e-4, "recall score: per-position NLL"},
};

const rc_cmp_tol *rc_cmp_tolerances(size_t *n) {
    if (n) *n = sizeof TOLS / sizeof TOLS[0];
    return TOLS;
}

const rc_cmp_tol *rc_cmp_tolerance(const char *name) {
    for (size_t i = 0; name && i < sizeof TOLS / sizeof TOLS[0]; i++)
        if (!strcmp(TOLS[i].name, name)) return &TOLS[i];
    return NULL;
}

static const rc_cmp_tol BITWISE = {"", RC_TOL_EXACT, 0.0, NULL};

/* Float arrays without a table row are compared bitwise. */
static const rc_cmp_tol *tol_of(const char *name) {
    const rc_cmp_tol *t = rc_cmp_tolerance(name);
    return t ? t : &BITWISE;
}

const char *rc_div_kind_name(rc_div_kind k) {
    static const char *names[] = {"none", "turn count", "feed length", "gate checks", "gate decision",
                                  "gate score", "fire", "candidate set", "bridge score", "injected ids",
                                  "rebuild shape", "rebuild top-5", "top-5 logit", "reply token", "final history"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

void rc_cmp_report_free(rc_cmp_report *r) {
    if (!r) return;
    free(r->arrays);
    memset(r, 0, sizeof *r);
}

/* ---- npz -------------------------------------------------------------------------------- */

static int is_int_dtype(rc_npy_dtype t) { return t != RC_NPY_F16 && t != RC_NPY_F32 && t != RC_NPY_F64; }

static int64_t int_at(const rc_npy *a, uint64_t i) {
    const uint8_t *p = (const uint8_t *)a->data + i * a->itemsize;
    uint64_t v = 0;
    for (size_t k = 0; k < a->itemsize; k++) v |= (uint64_t)p[k] << (8 * k);
    switch (a->dtype) {
    case RC_NPY_I8: return (int8_t)(uint8_t)v;
    case RC_NPY_I16: return (int16_t)(uint16_t)v;
    case RC_NPY_I32: return (int32_t)(uint32_t)v;
    default: return (int64_t)v; /* u64 beyond INT64_MAX wraps: still unequal to any other value */
    }
}

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void unflatten(rc_cmp_array *c, uint64_t flat) {
    c->worst_flat = flat;
    for (int d = c->ndim - 1; d >= 0; d--) {
        uint64_t s = c->shape[d] > 0 ? (uint64_t)c->shape[d] : 1;
        c->worst[d] = (int64_t)(flat % s);
        flat /= s;
    }
}

static recall_status cmp_float_arrays(const rc_npy *x, const rc_npy *y, const char *pa, const char *pb, rc_cmp_array *c,
                                      recall_err *err) {
    float *a = NULL, *b = NULL;
    recall_status st = rc_npy_to_f32(x, pa, &a, err);
    if (!st) st = rc_npy_to_f32(y, pb, &b, err);
    if (st) {
        free(a);
        free(b);
        return st;
    }
    uint64_t worst = 0;
    int have_worst = 0;
    for (uint64_t i = 0; i < c->numel; i++) {
        double ab = fabs((double)b[i]);
        if (ab > c->ref_max_abs) c->ref_max_abs = ab;
        if (!memcmp(&a[i], &b[i], 4) || (isnan(a[i]) && isnan(b[i]))) continue;
        c->n_diff++;
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) d = INFINITY; /* NaN on one side only */
        if (!have_worst || d > c->max_abs) {
            c->max_abs = d;
            worst = i;
            have_worst = 1;
        }
    }
    if (have_worst) {
        unflatten(c, worst);
        c->worst_a = a[worst];
        c->worst_b = b[worst];
        c->worst_ulps = rc_ulp_gap(a[worst], b[worst]);
    }
    c->max_rel = c->ref_max_abs > 0 ? c->max_abs / c->ref_max_abs : c->max_abs;
    c->pass = c->tol_kind == RC_TOL_EXACT ? c->n_diff == 0
            : c->tol_kind == RC_TOL_ABS   ? c->max_abs <= c->tol
                                          : c->max_rel <= c->tol;
    free(a);
    free(b);
    return RECALL_OK;
}

static void cmp_int_arrays(const rc_npy *x, const rc_npy *y, rc_cmp_array *c) {
    for (uint64_t i = 0; i < c->numel; i++) {
        int64_t va = int_at(x, i), vb = int_at(y, i);
        double ab = fabs((double)vb);
        if (ab > c->ref_max_abs) c->ref_max_abs = ab;
        if (va == vb) continue;
        if (!c->n_diff++) {
            unflatten(c, i);
            c->worst_a = (double)va;
            c->worst_b = (double)vb;
        }
        double d = fabs((double)va - (double)vb);
        if (d > c->max_abs) c->max_abs = d;
    }
    c->max_rel = c->ref_max_abs > 0 ? c->max_abs / c->ref_max_abs : c->max_abs;
    c->pass = c->n_diff == 0;
}

/* Compares one array both archives hold; different dtype classes or shapes are input errors. */
static recall_status cmp_array(const rc_npz *za, const rc_npz *zb, const char *pa, const char *pb, rc_cmp_array *c,
                               recall_err *err) {
    rc_npy x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    recall_status st = rc_npz_get(za, c->name, &x, err);
    if (!st) st = rc_npz_get(zb, c->name, &y, err);
    if (st) goto out;
    snprintf(c->dtype_a, sizeof c->dtype_a, "%s", rc_npy_dtype_name(x.dtype));
    snprintf(c->dtype_b, sizeof c->dtype_b, "%s", rc_npy_dtype_name(y.dtype));
    char sa[160], sb[160];
    fmt_shape(sa, sizeof sa, x.ndim, x.shape);
    fmt_shape(sb, sizeof sb, y.ndim, y.shape);
    if (x.ndim != y.ndim || memcmp(x.shape, y.shape, (size_t)x.ndim * sizeof x.shape[0]) || x.ndim > RC_CMP_MAX_DIMS) {
        st = rc_fail(err, RECALL_E_SHAPE, "array '%s' has shape %s in %s but %s in %s", c->name, sa, pa, sb, pb);
        goto out;
    }
    if (is_int_dtype(x.dtype) != is_int_dtype(y.dtype)) {
        st = rc_fail(err, RECALL_E_SHAPE, "array '%s' is %s in %s but %s in %s (integer vs float)", c->name, c->dtype_a,
                     pa, c->dtype_b, pb);
        goto out;
    }
    c->ndim = x.ndim;
    memcpy(c->shape, x.shape, (size_t)x.ndim * sizeof x.shape[0]);
    c->numel = x.numel;
    c->integer = is_int_dtype(x.dtype);
    const rc_cmp_tol *t = tol_of(c->name);
    c->tol_kind = c->integer ? RC_TOL_EXACT : t->kind;
    c->tol = c->integer ? 0.0 : t->tol;
    c->tol_row = c->integer ? "integers: identical" : t->row;
    c->worst_ulps = -1;
    if (c->integer) cmp_int_arrays(&x, &y, c);
    else st = cmp_float_arrays(&x, &y, pa, pb, c, err);
out:
    rc_npy_free(&x);
    rc_npy_free(&y);
    return st;
}

/* forward / pool / embed, from the arrays a dump holds. */
static const char *npz_kind(const rc_npz *z) {
    if (rc_npz_has(z, "logits") || rc_npz_has(z, "hidden_last") || rc_npz_has(z, "q_layers")) return "forward";
    if (rc_npz_has(z, "sp")) return "pool";
    if (rc_npz_has(z, "emb")) return "embed";
    return "npz";
}

/* A forward dump's KV storage (RC_CMP_KV_ARRAY) into out[8]: "f32" / "f16", "?" for another
 * value, "" when absent. */
static recall_status npz_kv(const rc_npz *z, const char *path, char *out, recall_err *err) {
    out[0] = 0;
    if (!rc_npz_has(z, RC_CMP_KV_ARRAY)) return RECALL_OK;
    rc_npy a;
    memset(&a, 0, sizeof a);
    int64_t bits = 0;
    recall_status st = rc_npz_get(z, RC_CMP_KV_ARRAY, &a, err);
    if (!st) st = rc_npy_scalar_i64(&a, path, &bits, err);
    rc_npy_free(&a);
    if (!st) snprintf(out, 8, "%s", bits == 32 ? "f32" : bits == 16 ? "f16" : "?");
    return st;
}

/* Both sides' KV storage into the report; absent reads as f32 for kv_differ. */
static void note_kv(rc_cmp_report *r) {
    const char *a = r->kv_a[0] ? r->kv_a : "f32", *b = r->kv_b[0] ? r->kv_b : "f32";
    r->kv_differ = strcmp(a, b) != 0;
}

static recall_status add_name(rc_cmp_report *r, size_t *cap, const char *name, int side) {
    for (size_t i = 0; i < r->n_arrays; i++)
        if (!strcmp(r->arrays[i].name, name)) {
            if (side) r->arrays[i].in_b = 1;
            else r->arrays[i].in_a = 1;
            return RECALL_OK;
        }
    if (r->n_arrays == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        rc_cmp_array *p = realloc(r->arrays, nc * sizeof *p);
        if (!p) return RECALL_E_NOMEM;
        r->arrays = p;
        *cap = nc;
    }
    rc_cmp_array *c = &r->arrays[r->n_arrays++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->in_a = !side;
    c->in_b = side;
    return RECALL_OK;
}

static recall_status compare_npz(const void *ba, size_t la, const char *pa, const void *bb, size_t lb, const char *pb,
                                 rc_cmp_report *r, recall_err *err) {
    rc_npz *za = NULL, *zb = NULL;
    recall_status st = rc_npz_open_mem(ba, la, pa, &za, err);
    if (!st) st = rc_npz_open_mem(bb, lb, pb, &zb, err);
    if (st) goto out;
    const char *ka = npz_kind(za), *kb = npz_kind(zb);
    if (strcmp(ka, kb)) {
        st = rc_fail(err, RECALL_E_SHAPE, "%s is %s %s dump but %s is %s %s dump", pa, ka[0] == 'e' ? "an" : "a", ka, pb, kb[0] == 'e' ? "an" : "a", kb);
        goto out;
    }
    r->kind = 1;
    snprintf(r->what, sizeof r->what, "%s", ka);
    st = npz_kv(za, pa, r->kv_a, err);
    if (!st) st = npz_kv(zb, pb, r->kv_b, err);
    note_kv(r);
    size_t cap = 0;
    for (int side = 0; side < 2 && !st; side++) {
        const rc_npz *z = side ? zb : za;
        for (size_t i = 0; i < rc_npz_count(z); i++) {
            char key[64];
            if (!rc_npz_key(z, i, key, sizeof key)) continue; /* not an .npy member, or a name too long */
            if (!strcmp(key, RC_CMP_KV_ARRAY)) continue;      /* a setting, reported as kv_a / kv_b */
            if (add_name(r, &cap, key, side)) {
                st = rc_fail(err, RECALL_E_NOMEM, "out of memory");
                break;
            }
        }
    }
    for (size_t i = 0; i < r->n_arrays && !st; i++) {
        rc_cmp_array *c = &r->arrays[i];
        if (!c->in_a || !c->in_b) continue;
        st = cmp_array(za, zb, pa, pb, c, err);
        r->n_compared++;
        r->n_failed += !c->pass;
    }
    if (!st && !r->n_compared)
        st = rc_fail(err, RECALL_E_SHAPE, "%s and %s have no array in common", pa, pb);
    r->verdict = r->n_failed ? 1 : 0;
out:
    rc_npz_close(za);
    rc_npz_close(zb);
    return st;
}

/* ---- traces: parsing -------------------------------------------------------------------- */

typedef struct { int c0, fired; float score; } t_gate;
typedef struct {
    int c0, ncand, ntop, nrid;
    float score;
    float *bridge;
    int top[8];
    int32_t *rid;
} t_fire;
typedef struct { int64_t v[4]; } t_rebuild;
typedef struct { int c0; int32_t ids[5]; float lg[5]; } t_top5;
typedef struct { int pos; float m; } t_low;
typedef struct {
    int64_t feed_len;
    int32_t *reply;
    int n_reply;
    t_gate *gates;
    t_fire *fires;
    t_rebuild *rb;
    t_top5 *t5;
    t_low *low;
    int n_gates, n_fires, n_rb, n_t5, n_low;
    int has_gates, has_fires, has_rb, has_t5, has_low, has_min;
    float min_margin;
} t_turn;
typedef struct {
    const char *path;
    const json_value *root;
    t_turn *turns;
    int n_turns;
    int has_thr;
    float thr;
    int32_t *hist;
    int n_hist, has_hist;
} t_trace;

static void trace_free(t_trace *t) {
    for (int i = 0; t->turns && i < t->n_turns; i++) {
        t_turn *u = &t->turns[i];
        for (int f = 0; u->fires && f < u->n_fires; f++) {
            free(u->fires[f].bridge);
            free(u->fires[f].rid);
        }
        free(u->reply);
        free(u->gates);
        free(u->fires);
        free(u->rb);
        free(u->t5);
        free(u->low);
    }
    free(t->turns);
    free(t->hist);
}

typedef struct {
    const char *path;
    char where[96];
    recall_err *err;
} pctx;

static recall_status pbad(pctx *p, const char *what) {
    return rc_fail(p->err, RECALL_E_FORMAT, "%s: %s: %s", p->path, p->where, what);
}

static int j_int(const json_value *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || v->type != JSON_NUM || !v->is_int || v->i < lo || v->i > hi) return 0;
    *out = v->i;
    return 1;
}

/* A float32 recorded as a JSON number (null: a non-finite value, read as NaN). */
static int j_float(const json_value *v, float *out) {
    if (v && v->type == JSON_NULL) {
        *out = NAN;
        return 1;
    }
    if (!v || v->type != JSON_NUM) return 0;
    *out = (float)v->num;
    return 1;
}

static recall_status p_ids(pctx *p, const json_value *a, int32_t **out, int *n) {
    if (!a || a->type != JSON_ARR) return pbad(p, "expected an array of token ids");
    *out = malloc((a->len ? a->len : 1) * sizeof **out);
    if (!*out) return rc_fail(p->err, RECALL_E_NOMEM, "%s: out of memory", p->path);
    for (size_t i = 0; i < a->len; i++) {
        int64_t v;
        if (!j_int(&a->items[i], INT32_MIN, INT32_MAX, &v)) return pbad(p, "expected an array of token ids");
        (*out)[i] = (int32_t)v;
    }
    *n = (int)a->len;
    return RECALL_OK;
}

/* An array member of a turn: NULL when absent (a trace may omit what it does not record). */
static const json_value *p_list(pctx *p, const json_value *turn, int ti, const char *key, size_t elem, void **out) {
    const json_value *a = json_get(turn, key);
    snprintf(p->where, sizeof p->where, "turns[%d].%s", ti, key);
    if (!a) return NULL;
    if (a->type != JSON_ARR || !(*out = calloc(a->len ? a->len : 1, elem))) return NULL;
    return a;
}

static recall_status p_gates(pctx *p, const json_value *turn, int ti, t_turn *u) {
    const json_value *a = p_list(p, turn, ti, "gates", sizeof *u->gates, (void **)&u->gates);
    if (!a) return json_get(turn, "gates") && !u->gates ? pbad(p, "expected an array") : RECALL_OK;
    for (size_t i = 0; i < a->len; i++) {
        const json_value *e = &a->items[i];
        int64_t c0;
        if (e->type != JSON_ARR || e->len != 3 || !j_int(&e->items[0], 0, INT32_MAX, &c0) ||
            !j_float(&e->items[1], &u->gates[i].score) || e->items[2].type != JSON_BOOL) {
            snprintf(p->where, sizeof p->where, "turns[%d].gates[%zu]", ti, i);
            return pbad(p, "expected [c0, score, fired]");
        }
        u->gates[i].c0 = (int)c0;
        u->gates[i].fired = e->items[2].num != 0;
    }
    u->n_gates = (int)a->len;
    u->has_gates = 1;
    return RECALL_OK;
}

static recall_status p_fire(pctx *p, const json_value *e, t_fire *f) {
    int64_t c0, nc;
    const json_value *br = json_get_type(e, "bridge", JSON_ARR), *top = json_get_type(e, "top", JSON_ARR);
    if (e->type != JSON_OBJ || !j_int(json_get(e, "c0"), 0, INT32_MAX, &c0) ||
        !j_int(json_get(e, "ncand"), 0, 1 << 20, &nc) || !br || br->len != (size_t)nc || !top || top->len > 8)
        return pbad(p, "expected {c0, score, ncand, bridge[ncand], top, rid}");
    f->c0 = (int)c0;
    f->ncand = (int)nc;
    if (!j_float(json_get(e, "score"), &f->score)) f->score = NAN;
    if (!(f->bridge = malloc((size_t)(nc ? nc : 1) * sizeof *f->bridge)))
        return rc_fail(p->err, RECALL_E_NOMEM, "%s: out of memory", p->path);
    for (int64_t c = 0; c < nc; c++)
        if (!j_float(&br->items[c], &f->bridge[c])) return pbad(p, "bridge: expected numbers");
    for (size_t k = 0; k < top->len; k++) {
        int64_t v;
        if (!j_int(&top->items[k], 0, nc - 1, &v)) return pbad(p, "top: expected candidate indices < ncand");
        f->top[k] = (int)v;
    }
    f->ntop = (int)top->len;
    return p_ids(p, json_get(e, "rid"), &f->rid, &f->nrid);
}

static recall_status p_fires(pctx *p, const json_value *turn, int ti, t_turn *u) {
    const json_value *a = p_list(p, turn, ti, "fires", sizeof *u->fires, (void **)&u->fires);
    if (!a) return json_get(turn, "fires") && !u->fires ? pbad(p, "expected an array") : RECALL_OK;
    u->n_fires = (int)a->len; /* set first: trace_free releases what a failed parse allocated */
    u->has_fires = 1;
    for (size_t i = 0; i < a->len; i++) {
        snprintf(p->where, sizeof p->where, "turns[%d].fires[%zu]", ti, i);
        RC_TRY(p_fire(p, &a->items[i], &u->fires[i]));
    }
    return RECALL_OK;
}

static recall_status p_rebuilds(pctx *p, const json_value *turn, int ti, t_turn *u) {
    const json_value *a = p_list(p, turn, ti, "rebuilds", sizeof *u->rb, (void **)&u->rb);
    if (!a) return json_get(turn, "rebuilds") && !u->rb ? pbad(p, "expected an array") : RECALL_OK;
    for (size_t i = 0; i < a->len; i++) {
        const json_value *e = &a->items[i];
        int ok = e->type == JSON_ARR && e->len == 4;
        for (int k = 0; ok && k < 4; k++) ok = j_int(&e->items[k], 0, INT32_MAX, &u->rb[i].v[k]);
        if (!ok) {
            snprintf(p->where, sizeof p->where, "turns[%d].rebuilds[%zu]", ti, i);
            return pbad(p, "expected [c0, has_SP, injected_len, window_len]");
        }
    }
    u->n_rb = (int)a->len;
    u->has_rb = 1;
    return RECALL_OK;
}

static recall_status p_top5(pctx *p, const json_value *turn, int ti, t_turn *u) {
    const json_value *a = p_list(p, turn, ti, "rebuild_top5", sizeof *u->t5, (void **)&u->t5);
    if (!a) return json_get(turn, "rebuild_top5") && !u->t5 ? pbad(p, "expected an array") : RECALL_OK;
    for (size_t i = 0; i < a->len; i++) {
        const json_value *e = &a->items[i];
        int64_t c0 = 0, id = 0;
        int ok = e->type == JSON_ARR && e->len == 3 && j_int(&e->items[0], 0, INT32_MAX, &c0) &&
                 e->items[1].type == JSON_ARR && e->items[1].len == 5 && e->items[2].type == JSON_ARR &&
                 e->items[2].len == 5;
        for (int k = 0; ok && k < 5; k++) {
            ok = j_int(&e->items[1].items[k], INT32_MIN, INT32_MAX, &id) && j_float(&e->items[2].items[k], &u->t5[i].lg[k]);
            u->t5[i].ids[k] = (int32_t)id;
        }
        if (!ok) {
            snprintf(p->where, sizeof p->where, "turns[%d].rebuild_top5[%zu]", ti, i);
            return pbad(p, "expected [c0, [5 ids], [5 logits]]");
        }
        u->t5[i].c0 = (int)c0;
    }
    u->n_t5 = (int)a->len;
    u->has_t5 = 1;
    return RECALL_OK;
}

static recall_status p_margins(pctx *p, const json_value *turn, int ti, t_turn *u) {
    const json_value *mm = json_get(turn, "greedy_min_margin");
    snprintf(p->where, sizeof p->where, "turns[%d].greedy_min_margin", ti);
    if (mm && !j_float(mm, &u->min_margin)) return pbad(p, "expected a number or null");
    u->has_min = mm && !isnan(u->min_margin);
    const json_value *a = p_list(p, turn, ti, "greedy_low_margin", sizeof *u->low, (void **)&u->low);
    if (!a) return json_get(turn, "greedy_low_margin") && !u->low ? pbad(p, "expected an array") : RECALL_OK;
    for (size_t i = 0; i < a->len; i++) {
        const json_value *e = &a->items[i];
        int64_t pos;
        if (e->type != JSON_ARR || e->len != 2 || !j_int(&e->items[0], 0, INT32_MAX, &pos) ||
            !j_float(&e->items[1], &u->low[i].m)) {
            snprintf(p->where, sizeof p->where, "turns[%d].greedy_low_margin[%zu]", ti, i);
            return pbad(p, "expected [position, margin]");
        }
        u->low[i].pos = (int)pos;
    }
    u->n_low = (int)a->len;
    u->has_low = 1;
    return RECALL_OK;
}

static recall_status p_turn(pctx *p, const json_value *turn, int ti, t_turn *u) {
    snprintf(p->where, sizeof p->where, "turns[%d]", ti);
    if (turn->type != JSON_OBJ || !j_int(json_get(turn, "feed_len"), 0, INT32_MAX, &u->feed_len))
        return pbad(p, "expected an object with feed_len and reply");
    snprintf(p->where, sizeof p->where, "turns[%d].reply", ti);
    RC_TRY(p_ids(p, json_get(turn, "reply"), &u->reply, &u->n_reply));
    RC_TRY(p_gates(p, turn, ti, u));
    RC_TRY(p_fires(p, turn, ti, u));
    RC_TRY(p_rebuilds(p, turn, ti, u));
    RC_TRY(p_top5(p, turn, ti, u));
    return p_margins(p, turn, ti, u);
}

static recall_status parse_trace(const json_value *root, const char *path, t_trace *t, recall_err *err) {
    pctx p = {path, "top level", err};
    memset(t, 0, sizeof *t);
    t->path = path;
    t->root = root;
    const json_value *turns = json_get_type(root, "turns", JSON_ARR);
    if (!turns) return pbad(&p, "no \"turns\" array: not a loop trace");
    if (!(t->turns = calloc(turns->len ? turns->len : 1, sizeof *t->turns)))
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", path);
    t->n_turns = (int)turns->len;
    for (int i = 0; i < t->n_turns; i++) RC_TRY(p_turn(&p, &turns->items[i], i, &t->turns[i]));
    const json_value *thr = json_get(root, "threshold");
    if (thr) {
        snprintf(p.where, sizeof p.where, "threshold");
        if (!j_float(thr, &t->thr) || isnan(t->thr)) return pbad(&p, "expected a number");
        t->has_thr = 1;
    }
    const json_value *fh = json_get(root, "final_history");
    if (fh) {
        snprintf(p.where, sizeof p.where, "final_history");
        RC_TRY(p_ids(&p, fh, &t->hist, &t->n_hist));
        t->has_hist = 1;
    }
    return RECALL_OK;
}

/* Traces of different problems or settings cannot be compared: an input error. */
static recall_status same_problem(const t_trace *a, const t_trace *b, recall_err *err) {
    static const char *str_keys[] = {"mode", "arm"};
    for (int k = 0; k < 2; k++) {
        const json_value *x = json_get_type(a->root, str_keys[k], JSON_STR), *y = json_get_type(b->root, str_keys[k], JSON_STR);
        if (x && y && strcmp(x->str, y->str))
            return rc_fail(err, RECALL_E_SHAPE, "%s has %s=%s but %s has %s=%s", a->path, str_keys[k], x->str,
                           b->path, str_keys[k], y->str);
    }
    const json_value *sa = json_get(a->root, "seed"), *sb = json_get(b->root, "seed");
    if (sa && sb && sa->type == JSON_NUM && sb->type == JSON_NUM && sa->num != sb->num)
        return rc_fail(err, RECALL_E_SHAPE, "%s is problem %g but %s is problem %g", a->path, sa->num, b->path, sb->num);
    static const char *consts[] = {"RW", "C", "BLOCK", "RECALL_K", "TURN_CAP"};
    for (int k = 0; k < 5; k++) {
        const json_value *x = json_path(a->root, "constants"), *y = json_path(b->root, "constants");
        x = x ? json_get_type(x, consts[k], JSON_NUM) : NULL;
        y = y ? json_get_type(y, consts[k], JSON_NUM) : NULL;
        if (x && y && x->num != y->num)
            return rc_fail(err, RECALL_E_SHAPE, "constants.%s is %g in %s but %g in %s", consts[k], x->num, a->path,
                           y->num, b->path);
    }
    const json_value *xa = json_get_type(a->root, "steps", JSON_ARR), *xb = json_get_type(b->root, "steps", JSON_ARR);
    if (xa && xb) {
        if (xa->len != xb->len)
            return rc_fail(err, RECALL_E_SHAPE, "%s has %zu steps but %s has %zu: different problems", a->path, xa->len,
                           b->path, xb->len);
        for (size_t i = 0; i < xa->len; i++) {
            const json_value *ua = json_get_type(&xa->items[i], "u", JSON_STR), *ub = json_get_type(&xb->items[i], "u", JSON_STR);
            if (ua && ub && (ua->len != ub->len || memcmp(ua->str, ub->str, ua->len)))
                return rc_fail(err, RECALL_E_SHAPE, "steps[%zu].u differs between %s and %s: different problems", i,
                               a->path, b->path);
        }
    }
    if (a->has_thr && b->has_thr && memcmp(&a->thr, &b->thr, 4))
        return rc_fail(err, RECALL_E_SHAPE, "%s ran with gate threshold %.9g but %s with %.9g", a->path, (double)a->thr,
                       b->path, (double)b->thr);
    return RECALL_OK;
}

/* ---- traces: the walk ------------------------------------------------------------------- */

enum { T_GATE, T_FIRE, T_REBUILD, T_TOP5, T_REPLY, T_N };
#define KEY(c0, type) ((int64_t)(c0) * 8 + (type))

typedef struct {
    rc_cmp_report *r;
    int ti;
    const t_turn *a, *b;
    int n[2][T_N]; /* records per type compared on each side (0 for a list one side lacks) */
} walk;

static int64_t key_of(const walk *w, int side, const int *cur, int type) {
    const t_turn *u = side ? w->b : w->a;
    int i = cur[type];
    if (i >= w->n[side][type]) return INT64_MAX;
    switch (type) {
    case T_GATE: return KEY(u->gates[i].c0, T_GATE);
    case T_FIRE: return KEY(u->fires[i].c0, T_FIRE);
    case T_REBUILD: return KEY(u->rb[i].v[0], T_REBUILD);
    case T_TOP5: return KEY(u->t5[i].c0, T_TOP5);
    default: return KEY(u->feed_len + i, T_REPLY);
    }
}

static int64_t next_key(const walk *w, int side, const int *cur) {
    int64_t k = INT64_MAX;
    for (int t = 0; t < T_N; t++) {
        int64_t x = key_of(w, side, cur, t);
        if (x < k) k = x;
    }
    return k;
}

/* The first difference becomes the divergence (returned for the caller to fill); later ones are
 * counted as its consequences (NULL returned). */
static rc_cmp_divergence *differ(walk *w, rc_div_kind kind, int c0) {
    rc_cmp_report *r = w->r;
    r->last_turn_affected = w->ti;
    if (r->diverged) {
        r->n_consequences++;
        return NULL;
    }
    r->diverged = 1;
    rc_cmp_divergence *d = &r->first;
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->turn = w->ti;
    d->c0 = c0;
    d->reply_index = d->position = d->rank = d->index = -1;
    d->cand[0] = d->cand[1] = -1;
    d->a.ulps = d->b.ulps = -1;
    d->a.token = d->b.token = -1;
    d->has_threshold = r->has_threshold;
    d->threshold = r->threshold;
    return d;
}

static int near(const rc_div_side *s) { return s->ulps >= 0 && !s->margin_bound && s->ulps <= RC_CMP_NEAR_TIE_ULPS; }

static void gate_side(rc_div_side *s, const t_gate *g, const rc_cmp_report *r) {
    if (!g) return;
    s->present = 1;
    s->fired = g->fired;
    s->has_score = !isnan(g->score);
    s->score = g->score;
    if (!s->has_score) snprintf(s->note, sizeof s->note, "gate score absent (null) from this trace");
    else if (!r->has_threshold) snprintf(s->note, sizeof s->note, "threshold absent from both traces (--threshold T)");
    else s->ulps = rc_ulp_gap(g->score, r->threshold);
}

static void walk_gate(walk *w, const t_gate *ga, const t_gate *gb, int c0) {
    rc_cmp_divergence *d;
    if (!ga || !gb || ga->fired != gb->fired) {
        if ((d = differ(w, ga && gb ? RC_DIV_GATE : RC_DIV_GATE_CHECKS, c0))) {
            gate_side(&d->a, ga, w->r);
            gate_side(&d->b, gb, w->r);
            d->near_tie = ga && gb && (near(&d->a) || near(&d->b));
        }
        return;
    }
    double delta = isnan(ga->score) && isnan(gb->score) ? 0.0 : fabs((double)ga->score - (double)gb->score);
    if (isnan(delta)) delta = INFINITY;
    const rc_cmp_tol *t = tol_of("trace.gate");
    if (!w->r->diverged) {
        w->r->n_gates++;
        if (delta > w->r->max_gate_abs) w->r->max_gate_abs = delta;
    }
    if (delta > t->tol && (d = differ(w, RC_DIV_GATE_SCORE, c0))) {
        gate_side(&d->a, ga, w->r);
        gate_side(&d->b, gb, w->r);
        d->delta = delta;
        d->tol = t->tol;
    }
}

static int in_set(const int *s, int n, int x) {
    for (int i = 0; i < n; i++)
        if (s[i] == x) return 1;
    return 0;
}

static void fire_side(rc_div_side *s, const t_fire *f) {
    if (!f) return;
    s->present = 1;
    s->ncand = f->ncand;
    s->ntop = f->ntop;
    memcpy(s->top, f->top, sizeof s->top);
    s->n = f->nrid;
}

/* The chosen sets differ: pair the candidates only A chose with those only B chose; on each side
 * the gap is the largest over the pairs (a near-tie needs every pair within reach). */
static void candidates(rc_cmp_divergence *d, const t_fire *fa, const t_fire *fb) {
    int xa[8], ya[8], nx = 0, ny = 0;
    for (int i = 0; i < fa->ntop; i++)
        if (!in_set(fb->top, fb->ntop, fa->top[i])) xa[nx++] = fa->top[i];
    for (int i = 0; i < fb->ntop; i++)
        if (!in_set(fa->top, fa->ntop, fb->top[i])) ya[ny++] = fb->top[i];
    if (!nx || !ny) return; /* different sizes only */
    d->cand[0] = xa[0];
    d->cand[1] = ya[0];
    for (int side = 0; side < 2; side++) {
        rc_div_side *s = side ? &d->b : &d->a;
        const t_fire *f = side ? fb : fa;
        s->has_pair = 1;
        s->vals[0] = f->bridge[xa[0]];
        s->vals[1] = f->bridge[ya[0]];
        s->ulps = 0;
        for (int i = 0; i < nx && i < ny; i++) {
            int64_t g = rc_ulp_gap(f->bridge[xa[i]], f->bridge[ya[i]]);
            if (g > s->ulps) s->ulps = g;
        }
    }
    d->near_tie = near(&d->a) || near(&d->b);
}

static int same_set(const t_fire *fa, const t_fire *fb) {
    if (fa->ntop != fb->ntop) return 0;
    for (int i = 0; i < fa->ntop; i++)
        if (!in_set(fb->top, fb->ntop, fa->top[i])) return 0;
    return 1;
}

static void walk_fire(walk *w, const t_fire *fa, const t_fire *fb, int c0) {
    rc_cmp_divergence *d;
    if (!fa || !fb || fa->ncand != fb->ncand || !same_set(fa, fb)) {
        if ((d = differ(w, fa && fb ? RC_DIV_CANDIDATES : RC_DIV_FIRE, c0))) {
            fire_side(&d->a, fa);
            fire_side(&d->b, fb);
            if (fa && fb && fa->ncand == fb->ncand) candidates(d, fa, fb);
        }
        return;
    }
    int k = 0;
    while (k < fa->nrid && k < fb->nrid && fa->rid[k] == fb->rid[k]) k++;
    if (k < fa->nrid || k < fb->nrid) {
        if ((d = differ(w, RC_DIV_INJECTED, c0))) {
            fire_side(&d->a, fa);
            fire_side(&d->b, fb);
            d->index = k;
            d->a.token = k < fa->nrid ? fa->rid[k] : -1;
            d->b.token = k < fb->nrid ? fb->rid[k] : -1;
        }
        return;
    }
    double mb = 0, md = 0;
    int worst = -1;
    for (int c = 0; c < fa->ncand; c++) {
        double x = fabs((double)fb->bridge[c]), e = fabs((double)fa->bridge[c] - (double)fb->bridge[c]);
        if (isnan(e)) e = INFINITY;
        if (x > mb) mb = x;
        if (e > md || worst < 0) md = e, worst = c;
    }
    double rel = mb > 0 ? md / mb : md;
    const rc_cmp_tol *t = tol_of("trace.bridge");
    if (!w->r->diverged) {
        w->r->n_fires++;
        if (rel > w->r->max_bridge_rel) w->r->max_bridge_rel = rel;
    }
    if (rel > t->tol && (d = differ(w, RC_DIV_BRIDGE_SCORE, c0))) {
        fire_side(&d->a, fa);
        fire_side(&d->b, fb);
        d->delta = rel;
        d->tol = t->tol;
        d->index = worst;
        d->a.has_pair = d->b.has_pair = 1;
        d->a.vals[0] = fa->bridge[worst];
        d->b.vals[0] = fb->bridge[worst];
    }
}

static void walk_rebuild(walk *w, const t_rebuild *ra, const t_rebuild *rb, int c0) {
    if (ra && rb && !memcmp(ra->v, rb->v, sizeof ra->v)) {
        if (!w->r->diverged) w->r->n_rebuilds++;
        return;
    }
    rc_cmp_divergence *d = differ(w, RC_DIV_REBUILD, c0);
    if (!d) return;
    if (ra) d->a.present = 1, memcpy(d->a.rb, ra->v, sizeof ra->v);
    if (rb) d->b.present = 1, memcpy(d->b.rb, rb->v, sizeof rb->v);
}

static int32_t reply_at(const t_turn *u, int j) { return j < u->n_reply ? u->reply[j] : -1; }

/* On one side: the logits of the two competing ids, when its top-5 holds both. */
static void top5_side(rc_div_side *s, const t_top5 *t, int32_t x, int32_t y) {
    s->present = 1;
    s->ids[0] = x;
    s->ids[1] = y;
    int ix = -1, iy = -1;
    for (int k = 0; k < 5; k++) {
        if (t->ids[k] == x) ix = k;
        if (t->ids[k] == y) iy = k;
    }
    if (ix < 0 || iy < 0) {
        snprintf(s->note, sizeof s->note, "id %d is not in this side's top-5", ix < 0 ? x : y);
        return;
    }
    s->has_pair = 1;
    s->vals[0] = t->lg[ix];
    s->vals[1] = t->lg[iy];
    s->ulps = rc_ulp_gap(t->lg[ix], t->lg[iy]);
}

static void walk_top5(walk *w, const t_top5 *ta, const t_top5 *tb, int c0) {
    rc_cmp_divergence *d;
    if (!ta || !tb) {
        if ((d = differ(w, RC_DIV_TOP5, c0))) d->a.present = !!ta, d->b.present = !!tb;
        return;
    }
    int k = 0;
    while (k < 5 && ta->ids[k] == tb->ids[k]) k++;
    if (k < 5) {
        /* top-1 at a generating position is the reply token: reported there, with these logits */
        int j = c0 - (int)w->a->feed_len;
        if (k == 0 && j >= 0 && (j < w->a->n_reply || j < w->b->n_reply) && reply_at(w->a, j) != reply_at(w->b, j))
            return;
        if ((d = differ(w, RC_DIV_TOP5, c0))) {
            d->rank = k;
            top5_side(&d->a, ta, ta->ids[k], tb->ids[k]);
            top5_side(&d->b, tb, ta->ids[k], tb->ids[k]);
            d->near_tie = near(&d->a) || near(&d->b);
        }
        return;
    }
    double mb = 0, md = 0;
    int worst = 0;
    for (int i = 0; i < 5; i++) {
        double x = fabs((double)tb->lg[i]), e = fabs((double)ta->lg[i] - (double)tb->lg[i]);
        if (isnan(e)) e = INFINITY;
        if (x > mb) mb = x;
        if (e > md) md = e, worst = i;
    }
    double rel = mb > 0 ? md / mb : md;
    const rc_cmp_tol *t = tol_of("trace.top5");
    if (!w->r->diverged) {
        w->r->n_top5++;
        if (rel > w->r->max_top5_rel) w->r->max_top5_rel = rel;
    }
    if (rel > t->tol && (d = differ(w, RC_DIV_TOP5_LOGIT, c0))) {
        d->delta = rel;
        d->tol = t->tol;
        d->index = d->rank = worst;
        d->a.present = d->b.present = d->a.has_pair = d->b.has_pair = 1;
        d->a.ids[0] = d->b.ids[0] = ta->ids[worst];
        d->a.vals[0] = ta->lg[worst];
        d->b.vals[0] = tb->lg[worst];
    }
}

/* ulps a margin spans at the magnitude of the turn's largest rebuild top-1 logit (an estimate:
 * the trace does not hold the logits of that step). */
static int64_t margin_ulps(float m, float mag) {
    if (!(m > 0)) return 0;
    if (!(mag > 0) || isinf(mag)) return -1;
    double u = (double)nextafterf(mag, INFINITY) - (double)mag, q = ceil((double)m / u);
    return q > 1e18 ? (int64_t)1e18 : (int64_t)q;
}

/* The numbers behind the token this side chose at history position p. */
static void reply_side(rc_div_side *s, const t_turn *u, int p, int32_t tok) {
    s->present = 1;
    s->token = tok;
    float mag = 0;
    for (int i = 0; i < u->n_t5; i++) {
        if (u->t5[i].c0 == p) {
            s->has_pair = s->has_margin = 1;
            s->ids[0] = u->t5[i].ids[0];
            s->ids[1] = u->t5[i].ids[1];
            s->vals[0] = u->t5[i].lg[0];
            s->vals[1] = u->t5[i].lg[1];
            s->margin = u->t5[i].lg[0] - u->t5[i].lg[1];
            s->ulps = rc_ulp_gap(u->t5[i].lg[0], u->t5[i].lg[1]);
            return;
        }
        if (fabsf(u->t5[i].lg[0]) > mag) mag = fabsf(u->t5[i].lg[0]);
    }
    for (int i = 0; i < u->n_low; i++)
        if (u->low[i].pos == p) {
            s->has_margin = s->ulps_estimated = 1;
            s->margin = u->low[i].m;
            s->ulps = margin_ulps(s->margin, mag);
            snprintf(s->note, sizeof s->note,
                     "top-2 logits absent from this trace; greedy_low_margin gives the margin (ulps estimated at "
                     "|logit| %.4g, the turn's largest rebuild top-1)", (double)mag);
            return;
        }
    if (u->has_low || u->has_min) {
        /* the reference and `replay` record every margin below 1e-3 */
        float bound = u->has_low ? 1e-3f : u->min_margin;
        if (u->has_min && u->min_margin > bound) bound = u->min_margin;
        s->has_margin = s->margin_bound = s->ulps_estimated = 1;
        s->margin = bound;
        s->ulps = margin_ulps(bound, mag);
        snprintf(s->note, sizeof s->note, "top-2 logits absent from this trace; %s, so the margin is >= %.3g",
                 u->has_low ? "no greedy_low_margin entry here" : "greedy_min_margin bounds it", (double)bound);
        return;
    }
    snprintf(s->note, sizeof s->note, "no logits or margins for this position in this trace");
}

static void walk_reply(walk *w, int j) {
    int32_t ta = reply_at(w->a, j), tb = reply_at(w->b, j);
    if (ta == tb) {
        if (!w->r->diverged) w->r->n_tokens++;
        return;
    }
    int p = (int)w->a->feed_len + j, c0 = -1;
    for (int i = 0; i < w->a->n_rb; i++)
        if (w->a->rb[i].v[0] <= p) c0 = (int)w->a->rb[i].v[0];
    rc_cmp_divergence *d = differ(w, RC_DIV_REPLY, c0);
    if (!d) return;
    d->reply_index = j;
    d->position = p;
    reply_side(&d->a, w->a, p, ta);
    reply_side(&d->b, w->b, p, tb);
    d->near_tie = near(&d->a) || near(&d->b);
}

static void note_absent(rc_cmp_report *r, const char *what, int in_a, int in_b) {
    if (in_a && in_b) return;
    if (strstr(r->not_compared, what)) return;
    size_t n = strlen(r->not_compared);
    snprintf(r->not_compared + n, sizeof r->not_compared - n, "%s%s (absent from %s)", n ? ", " : "", what,
             !in_a && !in_b ? "both" : !in_a ? "A" : "B");
}

static void walk_turn(rc_cmp_report *r, int ti, const t_turn *a, const t_turn *b) {
    walk w = {r, ti, a, b, {{0}}};
    if (a->feed_len != b->feed_len) {
        rc_cmp_divergence *d = differ(&w, RC_DIV_FEED, -1);
        if (d) d->a.present = d->b.present = 1, d->a.n = a->feed_len, d->b.n = b->feed_len;
        return; /* every position of the turn moves: the rest is its consequence */
    }
    const int ha[T_N] = {a->has_gates, a->has_fires, a->has_rb, a->has_t5, 1}, hb[T_N] = {b->has_gates, b->has_fires, b->has_rb, b->has_t5, 1};
    const int na[T_N] = {a->n_gates, a->n_fires, a->n_rb, a->n_t5, a->n_reply}, nb[T_N] = {b->n_gates, b->n_fires, b->n_rb, b->n_t5, b->n_reply};
    static const char *names[T_N] = {"gates", "fires", "rebuilds", "rebuild_top5", "reply"};
    for (int t = 0; t < T_N; t++) {
        note_absent(r, names[t], ha[t], hb[t]);
        w.n[0][t] = ha[t] && hb[t] ? na[t] : 0;
        w.n[1][t] = ha[t] && hb[t] ? nb[t] : 0;
    }
    note_absent(r, "greedy_low_margin", a->has_low, b->has_low);
    int ca[T_N] = {0}, cb[T_N] = {0};
    for (;;) {
        int64_t ka = next_key(&w, 0, ca), kb = next_key(&w, 1, cb), k = ka < kb ? ka : kb;
        if (k == INT64_MAX) break;
        int type = (int)(k & 7), c0 = (int)(k >> 3);
        int in_a = key_of(&w, 0, ca, type) == k, in_b = key_of(&w, 1, cb, type) == k;
        switch (type) {
        case T_GATE: walk_gate(&w, in_a ? &a->gates[ca[type]] : NULL, in_b ? &b->gates[cb[type]] : NULL, c0); break;
        case T_FIRE: walk_fire(&w, in_a ? &a->fires[ca[type]] : NULL, in_b ? &b->fires[cb[type]] : NULL, c0); break;
        case T_REBUILD: walk_rebuild(&w, in_a ? &a->rb[ca[type]] : NULL, in_b ? &b->rb[cb[type]] : NULL, c0); break;
        case T_TOP5: walk_top5(&w, in_a ? &a->t5[ca[type]] : NULL, in_b ? &b->t5[cb[type]] : NULL, c0); break;
        default: walk_reply(&w, in_a ? ca[type] : cb[type]); break;
        }
        ca[type] += in_a;
        cb[type] += in_b;
    }
}

static recall_status compare_traces(const json_value *ra, const char *pa, const json_value *rb, const char *pb,
                                    const rc_cmp_opts *o, rc_cmp_report *r, recall_err *err) {
    t_trace a, b;
    memset(&b, 0, sizeof b);
    recall_status st = parse_trace(ra, pa, &a, err);
    if (!st) st = parse_trace(rb, pb, &b, err);
    if (!st) st = same_problem(&a, &b, err);
    if (st) goto out;
    r->kind = 2;
    snprintf(r->what, sizeof r->what, "trace");
    r->last_turn_affected = -1;
    for (int side = 0; side < 2; side++) {
        const json_value *kv = json_get_type(side ? rb : ra, "kv", JSON_STR);
        if (kv) snprintf(side ? r->kv_b : r->kv_a, sizeof r->kv_a, "%.7s", kv->str);
    }
    note_kv(r);
    r->has_threshold = a.has_thr || b.has_thr || (o && o->has_threshold);
    r->threshold = a.has_thr ? a.thr : b.has_thr ? b.thr : o && o->has_threshold ? o->threshold : 0.0f;
    int nt = a.n_turns < b.n_turns ? a.n_turns : b.n_turns;
    walk w = {r, nt > 0 ? nt - 1 : 0, NULL, NULL, {{0}}}; /* whole-trace records: the last turn */
    for (int t = 0; t < nt; t++) {
        walk_turn(r, t, &a.turns[t], &b.turns[t]);
        if (!r->diverged) r->n_turns = t + 1;
    }
    if (a.n_turns != b.n_turns) {
        rc_cmp_divergence *d = differ(&w, RC_DIV_TURNS, -1);
        if (d) d->a.present = d->b.present = 1, d->a.n = a.n_turns, d->b.n = b.n_turns;
    }
    if (a.has_hist && b.has_hist) {
        int k = 0;
        while (k < a.n_hist && k < b.n_hist && a.hist[k] == b.hist[k]) k++;
        rc_cmp_divergence *d;
        if ((k < a.n_hist || k < b.n_hist) && (d = differ(&w, RC_DIV_HISTORY, -1))) {
            d->index = d->position = k;
            d->a.present = d->b.present = 1;
            d->a.n = a.n_hist;
            d->b.n = b.n_hist;
            d->a.token = k < a.n_hist ? a.hist[k] : -1;
            d->b.token = k < b.n_hist ? b.hist[k] : -1;
        }
    }
    r->verdict = !r->diverged ? 0 : r->first.near_tie ? 3 : 1;
out:
    trace_free(&a);
    trace_free(&b);
    return st;
}

/* ---- score files ------------------------------------------------------------------------- */

/* positions[i] of a score file: chunk, pos, nll, greedy, scored */
static int score_row(const json_value *v, int *chunk, int *pos, double *nll, int64_t *greedy, int *scored) {
    const json_value *c = json_get_type(v, "chunk", JSON_NUM), *p = json_get_type(v, "pos", JSON_NUM);
    const json_value *n = json_get_type(v, "nll", JSON_NUM), *g = json_get_type(v, "greedy", JSON_NUM);
    const json_value *s = json_get_type(v, "scored", JSON_BOOL);
    if (!c || !p || !n || !g || !s) return 0;
    *chunk = (int)c->num;
    *pos = (int)p->num;
    *nll = n->num;
    *greedy = (int64_t)g->num;
    *scored = s->num != 0.0;
    return 1;
}

static recall_status compare_scores(const json_value *ra, const char *pa, const json_value *rb, const char *pb,
                                    rc_cmp_report *r, recall_err *err) {
    static const char *same_keys[] = {"ids_xxh64", "n_ctx", "n_chunks", "first", "scored"};
    for (int k = 0; k < 5; k++) {
        const json_value *x = json_get(ra, same_keys[k]), *y = json_get(rb, same_keys[k]);
        if (!x || !y || x->type != y->type || (x->type == JSON_STR ? strcmp(x->str, y->str) : x->num != y->num))
            return rc_fail(err, RECALL_E_SHAPE, "%s and %s score different runs: %s differs (or is missing)", pa, pb,
                           same_keys[k]);
    }
    const json_value *xa = json_get_type(ra, "positions", JSON_ARR), *xb = json_get_type(rb, "positions", JSON_ARR);
    if (!xa || !xb || xa->len != xb->len)
        return rc_fail(err, RECALL_E_SHAPE, "%s / %s: per-position rows missing or of different counts (recall score "
                       "--per-position --json)", pa, pb);
    r->kind = 3;
    snprintf(r->what, sizeof r->what, "score");
    const json_value *pa_ = json_get_type(ra, "ppl", JSON_NUM), *pb_ = json_get_type(rb, "ppl", JSON_NUM);
    r->ppl_a = pa_ ? pa_->num : NAN;
    r->ppl_b = pb_ ? pb_->num : NAN;
    double sum_abs = 0.0, sum = 0.0;
    for (size_t i = 0; i < xa->len; i++) {
        int ca, pa1, sa, cb, pb1, sb;
        double na, nb;
        int64_t ga, gb;
        if (!score_row(&xa->items[i], &ca, &pa1, &na, &ga, &sa) || !score_row(&xb->items[i], &cb, &pb1, &nb, &gb, &sb))
            return rc_fail(err, RECALL_E_FORMAT, "%s / %s: positions[%zu] malformed", pa, pb, i);
        if (ca != cb || pa1 != pb1 || sa != sb)
            return rc_fail(err, RECALL_E_SHAPE, "%s / %s: positions[%zu] is chunk %d pos %d on one side, chunk %d pos %d "
                           "on the other", pa, pb, i, ca, pa1, cb, pb1);
        if (!sa) continue;
        const double d = na - nb;
        r->n_scored++;
        sum += d;
        sum_abs += fabs(d);
        if (!(fabs(d) <= r->nll_max_abs)) {
            r->nll_max_abs = fabs(d);
            r->worst_chunk = ca;
            r->worst_pos = pa1;
        }
        r->greedy_same += ga == gb;
    }
    r->nll_mean_abs = r->n_scored ? sum_abs / (double)r->n_scored : 0.0;
    r->nll_mean_signed = r->n_scored ? sum / (double)r->n_scored : 0.0;
    r->verdict = r->nll_max_abs <= rc_cmp_tolerance("score.nll")->tol && r->greedy_same == r->n_scored ? 0 : 1;
    return RECALL_OK;
}

/* ---- entry ------------------------------------------------------------------------------ */

typedef struct {
    const char *buf;
    size_t len;
    json_doc *doc;
    int is_npz;
} in_file;

static recall_status classify(const char *buf, size_t len, const char *what, in_file *f, recall_err *err) {
    f->buf = buf;
    f->len = len;
    if (len >= 4 && !memcmp(buf, "PK\x03\x04", 4)) {
        f->is_npz = 1;
        return RECALL_OK;
    }
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
    if (i == len || buf[i] != '{')
        return rc_fail(err, RECALL_E_FORMAT, "%s: neither an .npz archive nor a JSON loop trace or score file", what);
    return json_parse(buf, len, what, &f->doc, err);
}

/* The profile an input ran: a trace's "numerics" string, an npz's numerics_q8 array (compared or
 * named by compare_npz), else "exact". */
static void input_numerics(const in_file *f, const rc_cmp_report *r, char *out, size_t n, int side_a) {
    const char *s = "exact";
    if (f->is_npz) {
        for (size_t i = 0; i < r->n_arrays; i++)
            if (!strcmp(r->arrays[i].name, "numerics_q8") && (side_a ? r->arrays[i].in_a : r->arrays[i].in_b)) s = "q8";
    } else {
        const json_value *v = json_get_type(json_root(f->doc), "numerics", JSON_STR);
        if (v) s = v->str;
    }
    snprintf(out, n, "%s", s);
}

/* A `recall score --json` document: per-position rows and no turns. */
static int is_score_file(const in_file *f) {
    return !f->is_npz && json_get(json_root(f->doc), "positions") && !json_get(json_root(f->doc), "turns");
}

recall_status rc_compare_mem(const void *a, size_t len_a, const char *what_a, const void *b, size_t len_b,
                             const char *what_b, const rc_cmp_opts *opts, rc_cmp_report *out, recall_err *err) {
    if (!a || !b || !what_a || !what_b || !out) return rc_fail(err, RECALL_E_ARG, "rc_compare_mem: NULL argument");
    memset(out, 0, sizeof *out);
    out->last_turn_affected = -1;
    in_file fa = {0}, fb = {0};
    recall_status st = classify(a, len_a, what_a, &fa, err);
    if (!st) st = classify(b, len_b, what_b, &fb, err);
    if (!st && fa.is_npz != fb.is_npz)
        st = rc_fail(err, RECALL_E_SHAPE, "%s is %s but %s is %s: different kinds", what_a,
                     fa.is_npz ? "an .npz dump" : "a JSON trace", what_b, fb.is_npz ? "an .npz dump" : "a JSON trace");
    const int score_a = !st && is_score_file(&fa), score_b = !st && is_score_file(&fb);
    if (!st && score_a != score_b)
        st = rc_fail(err, RECALL_E_SHAPE, "%s is %s but %s is %s: different kinds", what_a,
                     score_a ? "a score file" : "not a score file", what_b, score_b ? "a score file" : "not one");
    if (!st)
        st = fa.is_npz  ? compare_npz(fa.buf, fa.len, what_a, fb.buf, fb.len, what_b, out, err)
             : score_a ? compare_scores(json_root(fa.doc), what_a, json_root(fb.doc), what_b, out, err)
                       : compare_traces(json_root(fa.doc), what_a, json_root(fb.doc), what_b, opts, out, err);
    if (!st) {
        input_numerics(&fa, out, out->numerics_a, sizeof out->numerics_a, 1);
        input_numerics(&fb, out, out->numerics_b, sizeof out->numerics_b, 0);
    }
    if (st) rc_cmp_report_free(out);
    json_free(fa.doc);
    json_free(fb.doc);
    return st;
}

recall_status rc_compare_files(const char *path_a, const char *path_b, const rc_cmp_opts *opts, rc_cmp_report *out,
                               recall_err *err) {
    if (!path_a || !path_b || !out) return rc_fail(err, RECALL_E_ARG, "rc_compare_files: NULL argument");
    memset(out, 0, sizeof *out);
    out->last_turn_affected = -1;
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    recall_status st = rc_read_file(path_a, &a, &la, err);
    if (!st) st = rc_read_file(path_b, &b, &lb, err);
    if (!st) st = rc_compare_mem(a, la, path_a, b, lb, path_b, opts, out, err);
    free(a);
    free(b);
    return st;
}
