/* calibrate.c - the gate threshold by the gate's training rule, and the threshold file
 * (calibrate.h; docs/LOOP.md, "Calibration"). */
#include "calibrate.h"

#include "json.h"
#include "q8.h"
#include "qwen2.h"
#include "tokenize_bpe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rc_calibration_free(rc_calibration *c) {
    free(c->pos);
    memset(c, 0, sizeof *c);
}

/* Row scores by position, as RC_EV_SCORE events bring them (NaN: not scored). */
typedef struct {
    float *v;
    int n, cap;
    int oom;
} row_scores;

static int on_event(void *ctx, const rc_event *ev) {
    row_scores *rs = ctx;
    if (ev->kind != RC_EV_SCORE) return 0;
    const rc_gate_rec *g = ev->rec;
    if (g->c0 >= rs->cap) {
        int nc = rs->cap ? rs->cap : 1024;
        while (nc <= g->c0) nc *= 2;
        float *nv = realloc(rs->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            rs->oom = 1;
            return 1; /* cancels the turn */
        }
        for (int i = rs->cap; i < nc; i++) nv[i] = NAN;
        rs->v = nv;
        rs->cap = nc;
    }
    rs->v[g->c0] = g->score;
    if (g->c0 >= rs->n) rs->n = g->c0 + 1;
    return 0;
}

int rc_floats_push(rc_floats *f, float x) {
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 256;
        float *nv = realloc(f->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        f->v = nv;
        f->cap = nc;
    }
    f->v[f->n++] = x;
    return 0;
}

/* Tokens of the chat segment of `user` (with the EOS string when not first), without the trailing
 * <｜Assistant｜> that rc_chat_segment adds: the ids the question's text up to some point takes. */
static recall_status segment_len(const rc_recall *r, int with_eos, const char *user, size_t n_user, int *out,
                                 recall_err *err) {
    char *u = malloc(n_user + 1);
    if (!u) return rc_fail(err, RECALL_E_NOMEM, "calibrate: out of memory");
    memcpy(u, user, n_user);
    u[n_user] = 0;
    int32_t *seg = NULL;
    size_t n = 0;
    recall_status s = rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), with_eos, u, NULL, &seg, &n, err);
    free(u);
    free(seg);
    *out = (int)n - 1;
    return s;
}

/* The first occurrence of ids[0..n) in v[0..m), or -1. */
static int find_ids(const int32_t *v, int m, const int32_t *ids, int n) {
    for (int i = 0; n > 0 && i + n <= m; i++)
        if (!memcmp(v + i, ids, (size_t)n * sizeof *ids)) return i;
    return -1;
}

/* Where the reply's restatement of the fact begins, as an offset in reply[]: the reply's first
 * occurrence of the keyword (the ids of " " + kw), backed up over the tokens before it that equal
 * the ones before the keyword in the fact's own turn (fact[0..nf)), since the reply restates the
 * fact in its words (": the gallery label is" after the fact's "note: the gallery label is").
 * n (the whole reply) when the keyword does not recur. */
static recall_status restatement(const rc_recall *r, const char *kw, const int32_t *reply, int n, const int32_t *fact,
                                 int nf, int *out, recall_err *err) {
    size_t len = strlen(kw) + 2, nk = 0;
    char *t = malloc(len);
    if (!t) return rc_fail(err, RECALL_E_NOMEM, "calibrate: out of memory");
    snprintf(t, len, " %s", kw);
    int32_t *ids = NULL;
    recall_status s = rc_bpe_encode(rc_recall_bpe(r), t, strlen(t), 0, &ids, &nk, err);
    free(t);
    *out = n;
    const int i = s ? -1 : find_ids(reply, n, ids, (int)nk), a = s ? -1 : find_ids(fact, nf, ids, (int)nk);
    free(ids);
    if (i < 0) return s;
    int back = 0;
    while (a >= 0 && back < i && back < a && reply[i - back - 1] == fact[a - back - 1]) back++;
    *out = i - back;
    return RECALL_OK;
}

/* One problem's recall positions: walks its steps as rc_run_problem laid them out (each fact
 * turn's start, each question turn's keyword end and reply) and adds the score of every position
 * of [keyword end, restatement) whose chunk's window starts after the fact's turn. */
static recall_status add_positions(const rc_recall *r, const rc_recall_opts *o, const rc_problem *p,
                                   const rc_problem_run *run, const row_scores *rs, rc_floats *pos, int *n_q,
                                   int *n_used, recall_err *err) {
    int off = 0, t = 0, fact_start[17], fact_end[17];
    for (int i = 0; i < p->n; i++) {
        const rc_step *st = &p->steps[i];
        const int forced = st->kind == RC_STEP_FACT || st->kind == RC_STEP_FILLER;
        int32_t *seg = NULL;
        size_t n = 0;
        RC_TRY(rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), off > 0, st->user, forced ? st->assistant : NULL,
                               &seg, &n, err));
        free(seg);
        fact_start[i] = off;
        const int s0 = off;
        off += (int)n;
        fact_end[i] = off;
        if (forced) continue;
        const rc_problem_turn *pt = &run->turns[t++];
        off += pt->turn.n_reply;
        if (st->kind != RC_STEP_Q || !st->kw) continue;
        int f0 = -1, f_i = 0; /* the fact's turn: the fact step that states this keyword and value */
        for (int k = 0; k < i; k++)
            if (p->steps[k].kind == RC_STEP_FACT && strstr(p->steps[k].user, st->kw) && st->val &&
                strstr(p->steps[k].user, st->val))
                f0 = fact_start[k], f_i = k;
        const char *at = strstr(st->user, st->kw);
        (*n_q)++;
        if (f0 < 0 || !at) continue;
        int kw_end = 0, rest = 0;
        RC_TRY(segment_len(r, s0 > 0, st->user, (size_t)(at - st->user) + strlen(st->kw), &kw_end, err));
        RC_TRY(restatement(r, st->kw, pt->turn.reply, pt->turn.n_reply, run->history + f0, fact_end[f_i] - f0, &rest,
                           err));
        int used = 0;
        for (int q = s0 + kw_end; q < pt->feed_len + rest; q++) {
            const int c0 = q - q % o->chunk, nd = c0 - (c0 < o->window ? c0 : o->window);
            if (f0 >= nd) continue; /* the fact's turn is still (partly) in view */
            if (q >= rs->n || isnan(rs->v[q]))
                return rc_fail(err, RECALL_E_FORMAT, "calibrate: position %d of a question turn was not scored", q);
            if (rc_floats_push(pos, rs->v[q])) return rc_fail(err, RECALL_E_NOMEM, "calibrate: out of memory");
            used = 1;
        }
        *n_used += used;
    }
    return RECALL_OK;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

recall_status rc_calibrate(const rc_blob *b, const rc_recall_opts *base, const rc_bench *bench, const uint32_t *seeds,
                           int n, double pct, rc_calibrate_fn on_run, void *ctx, rc_calibration *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    if (!(pct >= 0 && pct <= 100)) return rc_fail(err, RECALL_E_ARG, "calibrate: percentile %g outside 0..100", pct);
    rc_recall_opts o = *base;
    o.arm = RC_ARM_RC_BGE;
    o.threshold = INFINITY; /* score every check, fire none */
    o.score_rows = 1;
    rc_recall *r = NULL;
    RC_TRY(rc_recall_open(b, &o, &r, err));
    rc_floats pos = {0};
    row_scores rs = {0};
    recall_status s = RECALL_OK;
    for (int i = 0; i < n && !s; i++) {
        rc_problem p;
        rc_problem_run run;
        s = rc_bench_problem(bench, seeds[i], &p, err);
        if (s) break;
        rc_recall_forget(r); /* each problem is a conversation of its own */
        for (int k = 0; k < rs.cap; k++) rs.v[k] = NAN;
        rs.n = 0;
        s = rc_run_problem(r, &p, on_event, NULL, &rs, &run, err);
        if (s && rs.oom) s = rc_fail(err, RECALL_E_NOMEM, "calibrate: out of memory");
        if (!s) {
            s = add_positions(r, &o, &p, &run, &rs, &pos, &out->n_q, &out->n_q_used, err);
            if (!s && on_run) on_run(ctx, r, &run);
            rc_problem_run_free(&run);
        }
        rc_problem_free(&p);
    }
    rc_recall_close(r);
    free(rs.v);
    if (!s && pos.n == 0)
        s = rc_fail(err, RECALL_E_ARG, "calibrate: no recall position in %d problems (no question turn had its fact "
                    "evicted before the reply restated the keyword)", n);
    if (s) {
        free(pos.v);
        return s;
    }
    qsort(pos.v, (size_t)pos.n, sizeof *pos.v, cmp_float);
    const double idx = pct / 100.0 * (pos.n - 1); /* numpy.percentile, "linear" */
    const int lo = (int)floor(idx), hi = lo + 1 < pos.n ? lo + 1 : lo;
    out->pct = pct;
    out->threshold = (float)(pos.v[lo] + ((double)pos.v[hi] - pos.v[lo]) * (idx - lo));
    out->pos = pos.v;
    out->n_pos = pos.n;
    return RECALL_OK;
}

/* ---- the threshold file ---------------------------------------------------------------------- */

void rc_calibration_write(FILE *f, const rc_blob *b, const rc_recall_opts *o, const rc_calibration *c,
                          const rc_calibration_src *src) {
    double file_thresh = NAN;
    recall_err e = {0};
    if (rc_blob_get_f64(b, "gate.thresh", &file_thresh, &e)) file_thresh = NAN;
    fprintf(f, "{\"recall_calibration\": %d, \"threshold\": ", RC_CALIBRATION_VERSION);
    rc_json_put_num(f, c->threshold);
    fputs(",\n \"blob\": ", f);
    rc_json_put_str(f, rc_blob_path(b));
    fprintf(f, ", \"blob_xxh64\": \"%016llx\", \"weights\": ", (unsigned long long)rc_blob_hdr(b)->body_checksum);
    rc_json_put_str(f, rc_blob_weights(b, "qwen2"));
    fputs(", \"bge_weights\": ", f);
    rc_json_put_str(f, rc_blob_weights(b, "bert"));
    fprintf(f, ", \"numerics\": \"%s\", \"kv\": \"%s\", \"mode\": \"%s\",\n", rc_numerics_name(o->exec.numerics),
            rc_kv_dtype_name((rc_kv_dtype)o->kv), rc_mode_name(o->mode));
    fputs(" \"rule\": \"percentile of the gate scores at recall positions (a question turn from its keyword's end "
          "to the reply's restatement, the fact's turn evicted), every token scored on its own q, firing disabled: "
          "the rule the gate's thresh was trained with\",\n \"percentile\": ", f);
    rc_json_put_num(f, c->pct);
    fputs(", \"bench\": ", f);
    rc_json_put_str(f, src->bench);
    fprintf(f, ", \"bench_xxh64\": \"%016llx\", \"problems\": [", (unsigned long long)src->bench_xxh64);
    for (int i = 0; i < src->n_seeds; i++) fprintf(f, "%s%u", i ? ", " : "", src->seeds[i]);
    fprintf(f, "], \"positions\": %d, \"gate_file_thresh\": ", c->n_pos);
    rc_json_put_num(f, file_thresh);
    fputs("}\n", f);
}

static recall_status want_str(const json_value *root, const char *key, const char *path, const char **out,
                              recall_err *err) {
    const json_value *v = json_get_type(root, key, JSON_STR);
    if (!v) return rc_fail(err, RECALL_E_FORMAT, "%s: no \"%s\" string: not a threshold file of recall calibrate", path, key);
    *out = v->str;
    return RECALL_OK;
}

/* The checks of a threshold file against the run, in the order a person would look. */
static recall_status check_file(const json_value *root, const char *path, const rc_blob *b, const rc_recall_opts *o,
                                float *threshold, recall_err *err) {
    const json_value *ver = json_get_type(root, "recall_calibration", JSON_NUM);
    const json_value *thr = json_get_type(root, "threshold", JSON_NUM);
    if (!ver || !thr || ver->i != RC_CALIBRATION_VERSION)
        return rc_fail(err, RECALL_E_FORMAT, "%s: not a threshold file of recall calibrate (version %d)", path,
                       RC_CALIBRATION_VERSION);
    const char *xx = NULL, *weights = NULL, *numerics = NULL, *kv = NULL, *blob = NULL;
    RC_TRY(want_str(root, "blob_xxh64", path, &xx, err));
    RC_TRY(want_str(root, "weights", path, &weights, err));
    RC_TRY(want_str(root, "numerics", path, &numerics, err));
    RC_TRY(want_str(root, "kv", path, &kv, err));
    RC_TRY(want_str(root, "blob", path, &blob, err));
    char mine[17];
    snprintf(mine, sizeof mine, "%016llx", (unsigned long long)rc_blob_hdr(b)->body_checksum);
    if (strcmp(xx, mine))
        return rc_fail(err, RECALL_E_ARG, "%s was calibrated on another blob (%s, weights %s, body xxh64 %s); this is "
                       "%s (weights %s, body xxh64 %s): run recall calibrate on it", path, blob, weights, xx,
                       rc_blob_path(b), rc_blob_weights(b, "qwen2"), mine);
    if (strcmp(numerics, rc_numerics_name(o->exec.numerics)))
        return rc_fail(err, RECALL_E_ARG, "%s was calibrated under --numerics %s; this run uses %s", path, numerics,
                       rc_numerics_name(o->exec.numerics));
    if (strcmp(kv, rc_kv_dtype_name((rc_kv_dtype)o->kv)))
        return rc_fail(err, RECALL_E_ARG, "%s was calibrated with --kv %s; this run uses %s", path, kv,
                       rc_kv_dtype_name((rc_kv_dtype)o->kv));
    if (!isfinite(thr->num)) return rc_fail(err, RECALL_E_FORMAT, "%s: the threshold is not a finite number", path);
    *threshold = (float)thr->num;
    return RECALL_OK;
}

recall_status rc_calibration_read(const char *path, const rc_blob *b, const rc_recall_opts *o, float *threshold,
                                  recall_err *err) {
    json_doc *doc = NULL;
    recall_status s = json_read_file(path, &doc, err);
    if (!s) s = check_file(json_root(doc), path, b, o, threshold, err);
    json_free(doc);
    return s;
}
