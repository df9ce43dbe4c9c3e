/* eval.c - the recall benchmark's scoring, its result document, and the merge of shard documents
 * (eval.h states the rules and the document). */
#include "eval.h"

#include "tokenize_bpe.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- scoring ---------------------------------------------------------------------------------- */



static recall_status decode(const rc_bpe *bpe, const int32_t *ids, int n, char **out, recall_err *err) {
    size_t len;
    return rc_bpe_decode(bpe, ids, (size_t)(n > 0 ? n : 0), 0, out, &len, err);
}

static double best_bridge(const rc_fire_rec *fr) {
    double best = -INFINITY;
    for (int c = 0; c < fr->ncand; c++)
        if (fr->bridge[c] > best) best = fr->bridge[c];
    return best;
}

/* One generated turn: the reply text, the fires, and the question's two checks. */
static recall_status score_turn(const rc_bpe *bpe, const rc_step *st, const rc_problem_turn *pt, rc_eval_turn *e,
                                recall_err *err) {
    const rc_turn *u = &pt->turn;
    memset(e, 0, sizeof *e);
    e->step = st;
    e->pt = pt;
    e->max_gate = e->top_bridge = -INFINITY;
    RC_TRY(decode(bpe, u->reply, u->n_reply, &e->reply_text, err));
    for (int g = 0; g < u->n_gates; g++)
        if (u->gates[g].score > e->max_gate) e->max_gate = u->gates[g].score;
    for (int k = 0; k < u->n_fires; k++) {
        const rc_fire_rec *fr = &u->fires[k];
        const double best = best_bridge(fr);
        if (best > e->top_bridge) e->top_bridge = best;
        if (!fr->injected) continue;
        e->n_injected++;
        if (st->kind == RC_STEP_Q && !e->retrieved_ok) {
            char *blk = NULL;
            RC_TRY(decode(bpe, fr->rid, fr->nrid, &blk, err));
            e->retrieved_ok = rc_eval_contains(blk, st->val, ",");
            free(blk);
        }
    }
    if (st->kind == RC_STEP_Q) e->recall_ok = rc_eval_contains(e->reply_text, st->val, ", ");
    return RECALL_OK;
}

recall_status rc_eval_score(const rc_bpe *bpe, const rc_problem *p, const rc_problem_run *run, rc_eval_problem *out,
                            recall_err *err) {
    memset(out, 0, sizeof *out);
    for (int i = 0, ti = 0; i < p->n && ti < run->n_turns; i++) {
        const rc_step *st = &p->steps[i];
        if (st->kind != RC_STEP_PROBE && st->kind != RC_STEP_Q) continue;
        rc_eval_turn *e = &out->turns[out->n_turns];
        recall_status s = score_turn(bpe, st, &run->turns[ti], e, err);
        out->n_turns++;
        if (s) {
            rc_eval_problem_free(out);
            return s;
        }
        if (st->kind == RC_STEP_Q) {
            out->n_q++;
            out->n_ok += e->recall_ok;
            out->n_ret += e->retrieved_ok;
        } else {
            out->n_probe++;
            out->n_probe_fired += run->turns[ti].turn.n_fires > 0;
        }
        ti++;
    }
    return RECALL_OK;
}

void rc_eval_problem_free(rc_eval_problem *e) {
    for (int i = 0; i < e->n_turns; i++) free(e->turns[i].reply_text);
    memset(e, 0, sizeof *e);
}

void rc_eval_tally_push(rc_eval_tally *t, int q, double v) {
    double **arr = q ? &t->top_q : &t->top_c;
    int *n = q ? &t->n_top_q : &t->n_top_c, *cap = q ? &t->cap_top_q : &t->cap_top_c;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        double *na = realloc(*arr, (size_t)nc * sizeof *na);
        if (!na) {
            t->oom = 1;
            return;
        }
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = v;
}

recall_status rc_eval_tally_add(rc_eval_tally *t, const rc_eval_problem *e, recall_err *err) {
    for (int i = 0; i < e->n_turns; i++) {
        const rc_turn *u = &e->turns[i].pt->turn;
        const int q = e->turns[i].step->kind == RC_STEP_Q;
        for (int k = 0; k < u->n_fires; k++) rc_eval_tally_push(t, q, best_bridge(&u->fires[k]));
        t->fires += u->n_fires;
        t->injected += e->turns[i].n_injected;
    }
    t->n_q += e->n_q;
    t->n_ok += e->n_ok;
    t->n_ret += e->n_ret;
    t->n_probe += e->n_probe;
    t->n_probe_fired += e->n_probe_fired;
    return t->oom ? rc_fail(err, RECALL_E_NOMEM, "eval: out of memory while scoring") : RECALL_OK;
}

void rc_eval_tally_free(rc_eval_tally *t) {
    free(t->top_q);
    free(t->top_c);
    t->top_q = t->top_c = NULL;
}

/* ---- the document ------------------------------------------------------------------------------ */

void rc_eval_json_str(FILE *f, const char *s) { rc_json_put_str(f, s); }
void rc_eval_json_num(FILE *f, double x) { rc_json_put_num(f, x); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_list(FILE *f, double *v, int n) {
    if (n > 0) qsort(v, (size_t)n, sizeof *v, cmp_double); /* v is NULL when a shard ran no such job */
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        rc_json_put_num(f, v[i]);
    }
    fputc(']', f);
}

/* the document's keys of rc_eval_json_head's build[] */
static const char *const BUILD_KEYS[RC_EVAL_BUILD_KEYS] = {"weights", "bge_weights", "profile", "q8_exact",
                                                           "nf4_keep"};

void rc_eval_json_head(FILE *f, const char *blob, const char *const build[RC_EVAL_BUILD_KEYS], const char *mode,
                       const uint32_t *seeds, int n_seeds, const rc_eval_opt *opts, int n_opts,
                       const rc_eval_shard_info *sh) {
    fprintf(f, "{\"blob\": ");
    rc_json_put_str(f, blob);
    for (int i = 0; i < RC_EVAL_BUILD_KEYS; i++)
        if (build[i]) fprintf(f, ", \"%s\": ", BUILD_KEYS[i]), rc_json_put_str(f, build[i]);
    fprintf(f, ", \"mode\": \"%s\", \"problems\": [", mode);
    for (int i = 0; i < n_seeds; i++) fprintf(f, "%s%u", i ? ", " : "", seeds[i]);
    fputs("],\n\"options\": {", f);
    for (int i = 0; i < n_opts; i++) {
        fputs(i ? ", " : "", f);
        rc_json_put_str(f, opts[i].flag);
        fputs(": ", f);
        if (opts[i].is_int) fprintf(f, "%lld", opts[i].num);
        else if (opts[i].str) rc_json_put_str(f, opts[i].str);
        else fputs("null", f);
    }
    fputc('}', f);
    if (sh) {
        fprintf(f, ",\n\"shard\": {\"k\": %d, \"n\": %d, \"n_jobs\": %d, \"jobs\": [", sh->k, sh->n, sh->n_jobs);
        for (int i = 0; i < sh->n_ran; i++) fprintf(f, "%s%d", i ? ", " : "", sh->jobs[i]);
        fprintf(f, "], \"blob_xxh64\": \"%016llx\", \"bench\": ", (unsigned long long)sh->blob_xxh64);
        rc_json_put_str(f, sh->bench);
        fprintf(f, ", \"bench_xxh64\": \"%016llx\", \"threads\": %d, \"simd\": ", (unsigned long long)sh->bench_xxh64,
                sh->threads);
        rc_json_put_str(f, sh->simd);
        fputc('}', f);
    }
    fputs(",\n\"arms\": [", f);
}

void rc_eval_json_arm_head(FILE *f, int a, const rc_eval_arm_info *arm) {
    fprintf(f, "%s\n{\"label\": ", a ? "," : "");
    rc_json_put_str(f, arm->label);
    fputs(", \"threshold\": ", f);
    rc_json_put_num(f, arm->threshold);
    fputs(", \"floor\": ", f);
    if (arm->has_floor) rc_json_put_num(f, arm->floor);
    else fputs("null", f);
    fputs(", \"per_problem\": [", f);
}

void rc_eval_json_problem(FILE *f, uint32_t seed, double seconds, const rc_eval_problem *e) {
    fprintf(f, "{\"seed\": %u, \"seconds\": %.1f, \"turns\": [", seed, seconds);
    for (int i = 0; i < e->n_turns; i++) {
        const rc_eval_turn *t = &e->turns[i];
        const rc_step *st = t->step;
        const rc_turn *u = &t->pt->turn;
        fprintf(f, "%s{\"kind\": \"%s\", \"user\": ", i ? ", " : "", rc_step_kind_name(st->kind));
        rc_json_put_str(f, st->user);
        if (st->kind == RC_STEP_Q) {
            fputs(", \"kw\": ", f), rc_json_put_str(f, st->kw);
            fputs(", \"val\": ", f), rc_json_put_str(f, st->val);
            fprintf(f, ", \"recall_ok\": %s, \"retrieved_ok\": %s", t->recall_ok ? "true" : "false",
                    t->retrieved_ok ? "true" : "false");
        } else {
            fprintf(f, ", \"false_fire\": %s", u->n_fires > 0 ? "true" : "false");
        }
        fprintf(f, ", \"feed_len\": %d, \"n_reply\": %d, \"reply_text\": ", t->pt->feed_len, u->n_reply);
        rc_json_put_str(f, t->reply_text);
        fprintf(f, ", \"n_gates\": %d, \"max_gate\": ", u->n_gates);
        rc_json_put_num(f, t->max_gate);
        fprintf(f, ", \"n_fires\": %d, \"n_injected\": %d, \"fire_c0\": [", u->n_fires, t->n_injected);
        for (int k = 0; k < u->n_fires; k++) fprintf(f, "%s%d", k ? ", " : "", u->fires[k].c0);
        fputs("], \"top_bridge\": ", f);
        rc_json_put_num(f, t->top_bridge);
        fputc('}', f);
    }
    fputs("]}", f);
}

void rc_eval_json_arm_tail(FILE *f, rc_eval_tally *t) {
    fprintf(f, "],\n \"questions\": %d, \"recall_ok\": %d, \"retrieved_ok\": %d, \"probes\": %d, "
               "\"probes_fired\": %d, \"fires\": %d, \"injected\": %d, \"recall\": ",
            t->n_q, t->n_ok, t->n_ret, t->n_probe, t->n_probe_fired, t->fires, t->injected);
    rc_json_put_num(f, t->n_q ? (double)t->n_ok / t->n_q : NAN);
    fputs(", \"retrieved\": ", f);
    rc_json_put_num(f, t->n_q ? (double)t->n_ret / t->n_q : NAN);
    fputs(", \"casual_fire\": ", f);
    rc_json_put_num(f, t->n_probe ? (double)t->n_probe_fired / t->n_probe : NAN);
    fputs(", \"top_bridge_q_fires\": ", f);
    json_list(f, t->top_q, t->n_top_q);
    fputs(", \"top_bridge_c_fires\": ", f);
    json_list(f, t->top_c, t->n_top_c);
    fputc('}', f);
}

void rc_eval_json_end(FILE *f, const rc_eval_failure *failed, int n_failed) {
    fputc(']', f);
    if (n_failed) {
        fputs(",\n\"failed\": [", f);
        for (int i = 0; i < n_failed; i++) {
            fprintf(f, "%s{\"job\": %d, \"arm\": ", i ? ", " : "", failed[i].job);
            rc_json_put_str(f, failed[i].arm);
            fprintf(f, ", \"seed\": %u, \"error\": ", failed[i].seed);
            rc_json_put_str(f, failed[i].error);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}

/* ---- reading shard documents ------------------------------------------------------------------- */

#define MAX_INT 0x7fffffffL

/* One line naming the file; RECALL_E_FORMAT (a refused merge). */
static recall_status refuse(recall_err *err, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static recall_status refuse(recall_err *err, const char *path, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rc_fail(err, RECALL_E_FORMAT, "%s: %s", path, msg);
}

/* obj[key], known to be a string (checked when the file was parsed). */
static const char *str_at(const json_value *obj, const char *key) { return json_get_type(obj, key, JSON_STR)->str; }

/* obj[key] as an integer in lo..hi, else -1 (lo >= 0 throughout). */
static long get_int(const json_value *obj, const char *key, long lo, long hi) {
    const json_value *v = json_get_type(obj, key, JSON_NUM);
    return v && v->is_int && v->i >= lo && v->i <= hi ? (long)v->i : -1;
}

/* A number or null (non-finite, as rc_json_put_num writes it) as a double; null reads as NaN. */
static int get_num_or_null(const json_value *v, double *out) {
    if (v && v->type == JSON_NUM) *out = v->num;
    else if (v && v->type == JSON_NULL) *out = NAN;
    else return -1;
    return 0;
}

static int same_num(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static const char *AGG_KEYS[] = {"questions", "recall_ok", "retrieved_ok", "probes", "probes_fired", "fires", "injected"};
#define N_AGG (int)(sizeof AGG_KEYS / sizeof AGG_KEYS[0])

/* The failure record of job j in s, or NULL. */
static const json_value *failure_of(const rc_eval_shard *s, long j) {
    for (size_t i = 0; s->failed && i < s->failed->len; i++)
        if (get_int(&s->failed->items[i], "job", 0, MAX_INT) == j) return &s->failed->items[i];
    return NULL;
}

/* Arm a: the fields the merge reads, checked; per_problem holds one object per job of arm a in
 * the file that did not fail, with that job's seed. */
static recall_status check_arm(const rc_eval_shard *s, int a, recall_err *err) {
    const json_value *arm = &s->arms->items[a];
    const json_value *pp = json_get_type(arm, "per_problem", JSON_ARR), *label = json_get_type(arm, "label", JSON_STR);
    double x;
    if (arm->type != JSON_OBJ || !label || label->len >= sizeof ((rc_eval_arm_info *)0)->label ||
        strlen(label->str) != label->len || !pp || get_num_or_null(json_get(arm, "threshold"), &x) ||
        get_num_or_null(json_get(arm, "floor"), &x) || !json_get_type(arm, "top_bridge_q_fires", JSON_ARR) ||
        !json_get_type(arm, "top_bridge_c_fires", JSON_ARR))
        return refuse(err, s->path, "arm %d lacks label, threshold, floor, per_problem or the top_bridge lists", a);
    for (int k = 0; k < N_AGG; k++)
        if (get_int(arm, AGG_KEYS[k], 0, MAX_INT) < 0)
            return refuse(err, s->path, "arm %d: \"%s\" is not a count", a, AGG_KEYS[k]);
    for (int q = 0; q < 2; q++) {
        const json_value *l = json_get(arm, q ? "top_bridge_q_fires" : "top_bridge_c_fires");
        for (size_t i = 0; i < l->len; i++)
            if (l->items[i].type != JSON_NUM && l->items[i].type != JSON_NULL)
                return refuse(err, s->path, "arm %d: a top_bridge list holds a %s", a, json_type_name(l->items[i].type));
    }
    size_t e = 0;
    for (size_t q = 0; q < s->jobs->len; q++) {
        const long j = (long)s->jobs->items[q].i;
        if (j / s->n_seeds != a || failure_of(s, j)) continue;
        const long i = j % s->n_seeds;
        if (e == pp->len || pp->items[e].type != JSON_OBJ ||
            get_int(&pp->items[e], "seed", 0, MAX_INT) != (long)s->problems->items[i].i)
            return refuse(err, s->path, "arm %d: per_problem entry %zu is not the result of job %ld (seed %lld)", a, e, j,
                          (long long)s->problems->items[i].i);
        e++;
    }
    if (e != pp->len) return refuse(err, s->path, "arm %d: %zu per_problem entries for %zu jobs", a, pp->len, e);
    return RECALL_OK;
}

/* The shard's jobs must be exactly {j < n_jobs : j % n == k-1}, ascending; a failure record names
 * one of them, once. */
static recall_status check_jobs(const rc_eval_shard *s, recall_err *err) {
    size_t q = 0;
    for (long j = s->k - 1; j < s->n_jobs; j += s->n, q++)
        if (q == s->jobs->len || !s->jobs->items[q].is_int || s->jobs->items[q].i != j)
            return refuse(err, s->path, "shard %d/%d of %d jobs must hold jobs %d, %ld, ...; its \"jobs\" differ at entry %zu",
                          s->k, s->n, s->n_jobs, s->k - 1, (long)s->k - 1 + s->n, q);
    if (q != s->jobs->len)
        return refuse(err, s->path, "shard %d/%d of %d jobs holds %zu jobs, expected %zu", s->k, s->n, s->n_jobs,
                      s->jobs->len, q);
    for (size_t i = 0; s->failed && i < s->failed->len; i++) {
        const json_value *f = &s->failed->items[i];
        const long j = get_int(f, "job", 0, MAX_INT);
        if (f->type != JSON_OBJ || j < 0 || j >= s->n_jobs || j % s->n != s->k - 1 ||
            !json_get_type(f, "error", JSON_STR) || failure_of(s, j) != f)
            return refuse(err, s->path, "failed[%zu] is not a failure record of one of the shard's jobs", i);
    }
    return RECALL_OK;
}

recall_status rc_eval_shard_parse(rc_eval_shard *s, const char *path, char *text, size_t len, recall_err *err) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->text = text;
    s->len = len;
    RC_TRY(json_parse(text, len, path, &s->doc, err));
    s->root = json_root(s->doc);
    s->shard = json_get_type(s->root, "shard", JSON_OBJ);
    if (!s->shard)
        return refuse(err, path, "not a shard file (no \"shard\" object: write shards with recall eval --shard K/N --json)");
    s->options = json_get_type(s->root, "options", JSON_OBJ);
    if (!s->options)
        return refuse(err, path, "no \"options\" record (a shard written by an older recall: run it again)");
    for (size_t i = 0; i < s->options->len; i++) {
        const json_value *v = &s->options->items[i];
        if (v->type != JSON_STR && v->type != JSON_NULL && !(v->type == JSON_NUM && v->is_int))
            return refuse(err, path, "options: \"%.40s\" is a %s (a string, an integer or null expected)",
                          s->options->keys[i], json_type_name(v->type));
    }
    s->problems = json_get_type(s->root, "problems", JSON_ARR);
    s->arms = json_get_type(s->root, "arms", JSON_ARR);
    s->jobs = json_get_type(s->shard, "jobs", JSON_ARR);
    s->failed = json_get(s->root, "failed");
    s->n = (int)get_int(s->shard, "n", 1, MAX_INT);
    s->k = (int)get_int(s->shard, "k", 1, s->n > 0 ? s->n : 1);
    s->n_jobs = (int)get_int(s->shard, "n_jobs", 0, MAX_INT);
    if (!s->problems || !s->arms || !s->jobs || s->n < 0 || s->k < 0 || s->n_jobs < 0 ||
        (s->failed && s->failed->type != JSON_ARR) || !json_get_type(s->root, "blob", JSON_STR) ||
        !json_get_type(s->root, "mode", JSON_STR) || !json_get_type(s->shard, "blob_xxh64", JSON_STR) ||
        !json_get_type(s->shard, "bench", JSON_STR) || !json_get_type(s->shard, "bench_xxh64", JSON_STR))
        return refuse(err, path, "not a shard file (blob, mode, problems, arms, failed or shard.{k, n, n_jobs, jobs, "
                                 "blob_xxh64, bench, bench_xxh64} missing or malformed)");
    s->n_seeds = (int)s->problems->len;
    for (size_t i = 0; i < s->problems->len; i++)
        if (!s->problems->items[i].is_int || s->problems->items[i].i < 0 || s->problems->items[i].i > MAX_INT)
            return refuse(err, path, "problems[%zu] is not a seed", i);
    const char *mode = str_at(s->root, "mode");
    recall_err e = {0};
    if (rc_mode_parse(mode, &e) < 0) return refuse(err, path, "%s", e.msg);
    if (!s->n_seeds || !s->arms->len || s->arms->len > (size_t)MAX_INT / s->problems->len ||
        (size_t)s->n_jobs != s->arms->len * s->problems->len)
        return refuse(err, path, "n_jobs %d is not arms (%zu) x problems (%zu)", s->n_jobs, s->arms->len,
                      s->problems->len);
    RC_TRY(check_jobs(s, err));
    for (int a = 0; a < (int)s->arms->len; a++) RC_TRY(check_arm(s, a, err));
    return RECALL_OK;
}

recall_status rc_eval_shard_load(rc_eval_shard *s, const char *path, recall_err *err) {
    char *text = NULL;
    size_t len = 0;
    memset(s, 0, sizeof *s);
    RC_TRY(rc_read_file(path, &text, &len, err));
    return rc_eval_shard_parse(s, path, text, len, err);
}

void rc_eval_shard_free(rc_eval_shard *s) {
    json_free(s->doc);
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* ---- merging ----------------------------------------------------------------------------------- */

/* JSON scalars equal by type and value (numbers bitwise as doubles and as integers). */
static int same_scalar(const json_value *x, const json_value *y) {
    if (!x || !y || x->type != y->type) return 0;
    switch (x->type) {
    case JSON_NULL: return 1;
    case JSON_BOOL: return x->num == y->num;
    case JSON_NUM: return x->is_int == y->is_int && (x->is_int ? x->i == y->i : same_num(x->num, y->num));
    case JSON_STR: return x->len == y->len && !memcmp(x->str, y->str, x->len);
    default: return 0;
    }
}

static void describe(const json_value *v, char *buf, size_t n) {
    if (!v) snprintf(buf, n, "(absent)");
    else if (v->type == JSON_NUM && v->is_int) snprintf(buf, n, "%lld", (long long)v->i);
    else if (v->type == JSON_NUM) snprintf(buf, n, "%.9g", v->num);
    else if (v->type == JSON_STR) snprintf(buf, n, "%.40s", v->str);
    else snprintf(buf, n, "%s", json_type_name(v->type));
}

/* The first "options" entry on which f and t differ (a key either lacks counts), into what. */
static void options_differ(const json_value *f, const json_value *t, char *what, size_t n) {
    for (int pass = 0; pass < 2 && !what[0]; pass++) {
        const json_value *a = pass ? t : f, *b = pass ? f : t;
        for (size_t i = 0; i < a->len && !what[0]; i++) {
            const json_value *va = &a->items[i], *vb = json_get(b, a->keys[i]);
            if (same_scalar(va, vb)) continue;
            char sa[64], sb[64];
            describe(va, sa, sizeof sa);
            describe(vb, sb, sizeof sb);
            /* as "this file's value vs the first file's" */
            snprintf(what, n, "option %.40s: %s vs %s", a->keys[i], pass ? sa : sb, pass ? sb : sa);
        }
    }
}

/* t (a later file) must define the same run as f (the first); the first difference is named. */
static recall_status same_run(const rc_eval_shard *f, const rc_eval_shard *t, recall_err *err) {
    static const char *const keys[][2] = {{"", "mode"}, {"s", "blob_xxh64"}, {"s", "bench_xxh64"}};
    char what[200] = "";
    for (int k = 0; k < 3 && !what[0]; k++) {
        const char *x = str_at(keys[k][0][0] ? f->shard : f->root, keys[k][1]);
        const char *y = str_at(keys[k][0][0] ? t->shard : t->root, keys[k][1]);
        if (strcmp(x, y)) snprintf(what, sizeof what, "%s %.40s vs %.40s", keys[k][1], y, x);
    }
    if (!what[0]) options_differ(f->options, t->options, what, sizeof what);
    if (!what[0] && f->problems->len != t->problems->len)
        snprintf(what, sizeof what, "%zu problems vs %zu", t->problems->len, f->problems->len);
    for (size_t i = 0; !what[0] && i < f->problems->len; i++)
        if (f->problems->items[i].i != t->problems->items[i].i)
            snprintf(what, sizeof what, "problems[%zu] %lld vs %lld", i, (long long)t->problems->items[i].i,
                     (long long)f->problems->items[i].i);
    if (!what[0] && f->arms->len != t->arms->len)
        snprintf(what, sizeof what, "%zu arms vs %zu", t->arms->len, f->arms->len);
    for (size_t a = 0; !what[0] && a < f->arms->len; a++) {
        const json_value *x = &f->arms->items[a], *y = &t->arms->items[a];
        const char *lx = str_at(x, "label"), *ly = str_at(y, "label");
        if (strcmp(lx, ly)) snprintf(what, sizeof what, "arm %zu label %.60s vs %.60s", a, ly, lx);
        for (int k = 0; k < 2 && !what[0]; k++) {
            const char *key = k ? "floor" : "threshold";
            double vx = NAN, vy = NAN;
            get_num_or_null(json_get(x, key), &vx);
            get_num_or_null(json_get(y, key), &vy);
            if (!same_num(vx, vy)) snprintf(what, sizeof what, "arm %zu %s %.9g vs %.9g", a, key, vy, vx);
        }
    }
    if (!what[0]) return RECALL_OK;
    return refuse(err, t->path, "not the same run as %s: %s (shards of one run share BLOB, --bench, --problems, --arms, "
                                "--mode and every option in \"options\")", f->path, what);
}

/* owner[j] = the file holding job j; every job exactly once. A job nobody holds is named with the
 * failure a shard recorded for it, if any. */
static recall_status check_cover(const rc_eval_shard *s, int n_files, int *owner, recall_err *err) {
    const int n_jobs = s[0].n_jobs, P = s[0].n_seeds;
    for (int j = 0; j < n_jobs; j++) owner[j] = -1;
    for (int f = 0; f < n_files; f++)
        for (size_t q = 0; q < s[f].jobs->len; q++) {
            const int j = (int)s[f].jobs->items[q].i;
            if (failure_of(&s[f], j)) continue;
            if (owner[j] >= 0)
                return refuse(err, s[f].path, "job %d (arm %s, seed %lld) is also in %s (shard %d/%d given twice?)", j,
                              str_at(&s[0].arms->items[j / P], "label"), (long long)s[0].problems->items[j % P].i,
                              s[owner[j]].path, s[f].k, s[f].n);
            owner[j] = f;
        }
    for (int j = 0; j < n_jobs; j++) {
        if (owner[j] >= 0) continue;
        const char *label = str_at(&s[0].arms->items[j / P], "label");
        const long long seed = (long long)s[0].problems->items[j % P].i;
        for (int f = 0; f < n_files; f++) {
            const json_value *why = failure_of(&s[f], j);
            if (why)
                return refuse(err, s[f].path, "job %d (arm %s, seed %lld) of its run is missing: it failed in shard %d/%d: %.200s",
                              j, label, seed, s[f].k, s[f].n, str_at(why, "error"));
        }
        return refuse(err, s[0].path, "no file holds job %d (arm %s, seed %lld) of its run: shard %d/%d is missing", j, label,
                      seed, j % s[0].n + 1, s[0].n);
    }
    return RECALL_OK;
}

/* Adds arm a of file s to the tally: counts, and the per-fire scores (null = no candidate, -inf). */
static void add_arm(const rc_eval_shard *s, int a, rc_eval_tally *t) {
    const json_value *arm = &s->arms->items[a];
    int *dst[N_AGG] = {&t->n_q, &t->n_ok, &t->n_ret, &t->n_probe, &t->n_probe_fired, &t->fires, &t->injected};
    for (int k = 0; k < N_AGG; k++) *dst[k] += (int)get_int(arm, AGG_KEYS[k], 0, MAX_INT);
    for (int q = 0; q < 2; q++) {
        const json_value *l = json_get(arm, q ? "top_bridge_q_fires" : "top_bridge_c_fires");
        for (size_t i = 0; i < l->len; i++)
            rc_eval_tally_push(t, q, l->items[i].type == JSON_NUM ? l->items[i].num : -INFINITY);
    }
}

recall_status rc_eval_merge_plan(const rc_eval_shard *s, int n_files, rc_eval_merge *m, recall_err *err) {
    memset(m, 0, sizeof *m);
    if (n_files < 1) return rc_fail(err, RECALL_E_ARG, "eval merge: no shard files");
    for (int f = 1; f < n_files; f++) RC_TRY(same_run(&s[0], &s[f], err));
    m->n_arms = (int)s[0].arms->len;
    m->n_jobs = s[0].n_jobs;
    m->n_seeds = s[0].n_seeds;
    m->owner = malloc((size_t)m->n_jobs * sizeof *m->owner + 1);
    m->info = calloc((size_t)m->n_arms, sizeof *m->info);
    m->tally = calloc((size_t)m->n_arms, sizeof *m->tally);
    if (!m->owner || !m->info || !m->tally) return rc_fail(err, RECALL_E_NOMEM, "eval merge: out of memory");
    RC_TRY(check_cover(s, n_files, m->owner, err));
    for (int a = 0; a < m->n_arms; a++) {
        const json_value *arm = &s[0].arms->items[a];
        rc_eval_arm_info *in = &m->info[a];
        snprintf(in->label, sizeof in->label, "%s", str_at(arm, "label"));
        get_num_or_null(json_get(arm, "threshold"), &in->threshold);
        in->has_floor = get_num_or_null(json_get(arm, "floor"), &in->floor) == 0 && !isnan(in->floor);
        for (int f = 0; f < n_files; f++) add_arm(&s[f], a, &m->tally[a]);
        if (m->tally[a].oom) return rc_fail(err, RECALL_E_NOMEM, "eval merge: out of memory");
    }
    return RECALL_OK;
}

/* End (exclusive) of the object or array that starts at t[off]; the parser has validated it. */
static size_t value_end(const char *t, size_t len, size_t off) {
    int depth = 0, in_str = 0;
    for (size_t i = off; i < len; i++) {
        char c = t[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return len;
}

/* The options of the first file back as rc_eval_opt entries (strings borrowed from its document). */
static recall_status options_of(const rc_eval_shard *s, rc_eval_opt **out, recall_err *err) {
    const json_value *o = s->options;
    *out = calloc(o->len + 1, sizeof **out);
    if (!*out) return rc_fail(err, RECALL_E_NOMEM, "eval merge: out of memory");
    for (size_t i = 0; i < o->len; i++) { /* scalars only: checked by rc_eval_shard_parse */
        const json_value *v = &o->items[i];
        rc_eval_opt *e = &(*out)[i];
        e->flag = o->keys[i];
        if (v->type == JSON_NUM) e->is_int = 1, e->num = (long long)v->i;
        else if (v->type == JSON_STR) e->str = v->str;
    }
    return RECALL_OK;
}

recall_status rc_eval_merge_write(FILE *f, const rc_eval_shard *s, int n_files, rc_eval_merge *m, recall_err *err) {
    (void)n_files;
    const int P = m->n_seeds;
    uint32_t *seeds = malloc((size_t)P * sizeof *seeds);
    size_t *cursor = calloc((size_t)n_files, sizeof *cursor);
    rc_eval_opt *opts = NULL;
    recall_status st = seeds && cursor ? options_of(&s[0], &opts, err)
                                       : rc_fail(err, RECALL_E_NOMEM, "eval merge: out of memory");
    if (!st) {
        for (int i = 0; i < P; i++) seeds[i] = (uint32_t)s[0].problems->items[i].i;
        const char *build[RC_EVAL_BUILD_KEYS] = {NULL};
        for (int i = 0; i < RC_EVAL_BUILD_KEYS; i++) {
            const json_value *v = json_get_type(s[0].root, BUILD_KEYS[i], JSON_STR);
            build[i] = v ? v->str : NULL;
        }
        rc_eval_json_head(f, str_at(s[0].root, "blob"), build, str_at(s[0].root, "mode"), seeds, P, opts,
                          (int)s[0].options->len, NULL);
        for (int a = 0; a < m->n_arms; a++) {
            rc_eval_json_arm_head(f, a, &m->info[a]);
            memset(cursor, 0, (size_t)n_files * sizeof *cursor);
            for (int i = 0; i < P; i++) {
                const int o = m->owner[a * P + i];
                const json_value *e = &json_get(&s[o].arms->items[a], "per_problem")->items[cursor[o]++];
                if (i) fputs(",\n", f);
                fwrite(s[o].text + e->offset, 1, value_end(s[o].text, s[o].len, e->offset) - e->offset, f);
            }
            rc_eval_json_arm_tail(f, &m->tally[a]);
        }
        rc_eval_json_end(f, NULL, 0);
    }
    free(opts);
    free(seeds);
    free(cursor);
    return st;
}

void rc_eval_merge_free(rc_eval_merge *m) {
    for (int a = 0; m->tally && a < m->n_arms; a++) rc_eval_tally_free(&m->tally[a]);
    free(m->owner);
    free(m->info);
    free(m->tally);
    memset(m, 0, sizeof *m);
}
