/* cli_eval_merge.c - `recall eval --merge SHARD.json... [--json OUT]`: the shard files of one
 * `recall eval` run (cli_eval.c, --shard K/N, any order) back into the table and JSON of that run.
 *
 * A shard file is the run's JSON document holding only the shard's jobs, plus
 *   "shard": {"k", "n", "n_jobs", "jobs": [ascending job numbers], "blob_xxh64", "bench", "bench_xxh64"}
 * (job j = a*P + i: arm a, problem i of P; cli_eval.h). Refused, with one line naming the file and
 * what differs (exit 2):
 *   - a file that is not a shard file, or whose jobs are not exactly those j < n_jobs with
 *     j % n == k-1, or whose per-problem objects do not match its jobs;
 *   - a file of another run: mode, numerics profile (a file without the key ran exact), problems,
 *     arms (label, threshold, floor), the blob's body
 *     checksum or the benchmark file's checksum differ from the first file's (paths may differ;
 *     the merged "blob" is the first file's);
 *   - a job held by two files, or by none.
 * Output: per arm, the per-problem objects copied byte for byte from the shard that ran them, in
 * job order; the counts summed; the per-fire bridge score lists concatenated (they are written
 * sorted); the ratios recomputed from the sums. Only the per-problem "seconds" (wall time of that
 * job on its machine) differ from one unsharded run. */
#include "cli_eval.h"
#include "json.h"
#include "q8.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path;
    char *text;
    size_t len;
    json_doc *doc;
    const json_value *root, *problems, *arms, *shard, *jobs;
    int k, n, n_jobs, n_seeds;
} shard_file;

/* obj[key], known to be a string (checked when the file was loaded). */
static const char *str_at(const json_value *obj, const char *key) { return json_get_type(obj, key, JSON_STR)->str; }

/* One line on stderr naming the file; returns 2 (the exit code of a refused merge). */
static int refuse(const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "recall eval --merge: %s: ", path);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* obj[key] as an integer in lo..hi, else -1 (lo >= 0 throughout). */
static long get_int(const json_value *obj, const char *key, long lo, long hi) {
    const json_value *v = json_get_type(obj, key, JSON_NUM);
    return v && v->is_int && v->i >= lo && v->i <= hi ? (long)v->i : -1;
}

/* A number or null (non-finite, as eval_json_num writes it) as a double; null reads as NaN. */
static int get_num_or_null(const json_value *v, double *out) {
    if (v && v->type == JSON_NUM) *out = v->num;
    else if (v && v->type == JSON_NULL) *out = NAN;
    else return -1;
    return 0;
}

static int same_num(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

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

static const char *AGG_KEYS[] = {"questions", "recall_ok", "retrieved_ok", "probes", "probes_fired", "fires", "injected"};
#define N_AGG (int)(sizeof AGG_KEYS / sizeof AGG_KEYS[0])

/* Arm a of file s: the fields the merge reads, checked; per_problem must hold one object per job
 * of arm a in the file, with that job's seed. */
static int check_arm(const shard_file *s, int a) {
    const json_value *arm = &s->arms->items[a], *pp = json_get_type(arm, "per_problem", JSON_ARR);
    double x;
    const json_value *label = json_get_type(arm, "label", JSON_STR);
    if (arm->type != JSON_OBJ || !label || label->len >= sizeof ((eval_arm_info *)0)->label || !pp ||
        get_num_or_null(json_get(arm, "threshold"), &x) || get_num_or_null(json_get(arm, "floor"), &x) ||
        !json_get_type(arm, "top_bridge_q_fires", JSON_ARR) || !json_get_type(arm, "top_bridge_c_fires", JSON_ARR))
        return refuse(s->path, "arm %d lacks label, threshold, floor, per_problem or the top_bridge lists", a);
    for (int k = 0; k < N_AGG; k++)
        if (get_int(arm, AGG_KEYS[k], 0, 0x7fffffffL) < 0)
            return refuse(s->path, "arm %d: \"%s\" is not a count", a, AGG_KEYS[k]);
    size_t e = 0;
    for (size_t q = 0; q < s->jobs->len; q++) {
        const int j = (int)s->jobs->items[q].i;
        if (j / s->n_seeds != a) continue;
        const int i = j % s->n_seeds;
        if (e == pp->len || pp->items[e].type != JSON_OBJ ||
            get_int(&pp->items[e], "seed", 0, 0x7fffffffL) != (long)s->problems->items[i].i)
            return refuse(s->path, "arm %d: per_problem entry %zu is not the result of job %d (seed %lld)", a, e, j,
                          (long long)s->problems->items[i].i);
        e++;
    }
    if (e != pp->len) return refuse(s->path, "arm %d: %zu per_problem entries for %zu jobs", a, pp->len, e);
    return 0;
}

/* The shard's jobs must be exactly {j < n_jobs : j % n == k-1}, ascending. */
static int check_jobs(const shard_file *s) {
    size_t q = 0;
    for (long j = s->k - 1; j < s->n_jobs; j += s->n, q++)
        if (q == s->jobs->len || !s->jobs->items[q].is_int || s->jobs->items[q].i != j)
            return refuse(s->path, "shard %d/%d of %d jobs must hold jobs %d, %ld, ...; its \"jobs\" differ at entry %zu",
                          s->k, s->n, s->n_jobs, s->k - 1, (long)s->k - 1 + s->n, q);
    if (q != s->jobs->len)
        return refuse(s->path, "shard %d/%d of %d jobs holds %zu jobs, expected %zu", s->k, s->n, s->n_jobs,
                      s->jobs->len, q);
    return 0;
}

/* Reads and parses one file and checks it is a self-consistent shard file. */
static int load_shard(shard_file *s) {
    recall_err err = {0};
    if (rc_read_file(s->path, &s->text, &s->len, &err) || json_parse(s->text, s->len, s->path, &s->doc, &err)) {
        fprintf(stderr, "recall eval --merge: %s\n", err.msg);
        return 1;
    }
    s->root = json_root(s->doc);
    s->shard = json_get_type(s->root, "shard", JSON_OBJ);
    if (!s->shard)
        return refuse(s->path, "not a shard file (no \"shard\" object: write shards with recall eval --shard K/N --json)");
    s->problems = json_get_type(s->root, "problems", JSON_ARR);
    s->arms = json_get_type(s->root, "arms", JSON_ARR);
    s->jobs = json_get_type(s->shard, "jobs", JSON_ARR);
    s->n = (int)get_int(s->shard, "n", 1, 0x7fffffffL);
    s->k = (int)get_int(s->shard, "k", 1, s->n > 0 ? s->n : 1);
    s->n_jobs = (int)get_int(s->shard, "n_jobs", 0, 0x7fffffffL);
    if (!s->problems || !s->arms || !s->jobs || s->n < 0 || s->k < 0 || s->n_jobs < 0 ||
        !json_get_type(s->root, "blob", JSON_STR) || !json_get_type(s->root, "mode", JSON_STR) ||
        !json_get_type(s->shard, "blob_xxh64", JSON_STR) || !json_get_type(s->shard, "bench", JSON_STR) ||
        !json_get_type(s->shard, "bench_xxh64", JSON_STR))
        return refuse(s->path, "not a shard file (blob, mode, problems, arms or shard.{k, n, n_jobs, jobs, "
                               "blob_xxh64, bench, bench_xxh64} missing or malformed)");
    if (json_get(s->root, "numerics") && rc_numerics_parse(json_get(s->root, "numerics")->str) < 0)
        return refuse(s->path, "numerics is not \"exact\" or \"q8\"");
    s->n_seeds = (int)s->problems->len;
    for (size_t i = 0; i < s->problems->len; i++)
        if (!s->problems->items[i].is_int || s->problems->items[i].i < 0 || s->problems->items[i].i > 0x7fffffffL)
            return refuse(s->path, "problems[%zu] is not a seed", i);
    const char *mode = str_at(s->root, "mode");
    if (strcmp(mode, "faithful") && strcmp(mode, "clean")) return refuse(s->path, "mode \"%s\" is not faithful or clean", mode);
    if (!s->n_seeds || !s->arms->len || (size_t)s->n_jobs != s->arms->len * s->problems->len)
        return refuse(s->path, "n_jobs %d is not arms (%zu) x problems (%zu)", s->n_jobs, s->arms->len,
                      s->problems->len);
    int rc = check_jobs(s);
    for (int a = 0; !rc && a < (int)s->arms->len; a++) rc = check_arm(s, a);
    return rc;
}

/* The run's numerics profile: "exact" when the file predates the key. */
static const char *numerics_of(const shard_file *s) {
    const json_value *v = json_get_type(s->root, "numerics", JSON_STR);
    return v ? v->str : "exact";
}

/* t (a later file) must define the same run as f (the first); the first difference is named. */
static int same_run(const shard_file *f, const shard_file *t) {
    static const char *const keys[][2] = {{"", "mode"}, {"s", "blob_xxh64"}, {"s", "bench_xxh64"}};
    char what[200] = "";
    for (int k = 0; k < 3 && !what[0]; k++) {
        const char *x = str_at(keys[k][0][0] ? f->shard : f->root, keys[k][1]);
        const char *y = str_at(keys[k][0][0] ? t->shard : t->root, keys[k][1]);
        if (strcmp(x, y)) snprintf(what, sizeof what, "%s %.40s vs %.40s", keys[k][1], y, x);
    }
    if (!what[0] && strcmp(numerics_of(f), numerics_of(t)))
        snprintf(what, sizeof what, "numerics %.20s vs %.20s (the profiles may not be mixed)", numerics_of(t),
                 numerics_of(f));
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
    if (!what[0]) return 0;
    return refuse(t->path, "not the same run as %s: %s (shards of one run share BLOB, --bench, --problems, --arms "
                           "and --mode)", f->path, what);
}

/* owner[j] = the file holding job j; every job exactly once. */
static int check_cover(const shard_file *s, int n_files, int *owner) {
    const int n_jobs = s[0].n_jobs, P = s[0].n_seeds;
    for (int j = 0; j < n_jobs; j++) owner[j] = -1;
    for (int f = 0; f < n_files; f++)
        for (size_t q = 0; q < s[f].jobs->len; q++) {
            const int j = (int)s[f].jobs->items[q].i;
            if (owner[j] >= 0)
                return refuse(s[f].path, "job %d (arm %s, seed %lld) is also in %s (shard %d/%d given twice?)", j,
                              str_at(&s[0].arms->items[j / P], "label"), (long long)s[0].problems->items[j % P].i,
                              s[owner[j]].path, s[f].k, s[f].n);
            owner[j] = f;
        }
    for (int j = 0; j < n_jobs; j++)
        if (owner[j] < 0)
            return refuse(s[0].path, "no file holds job %d (arm %s, seed %lld) of its run: shard %d/%d is missing", j,
                          str_at(&s[0].arms->items[j / P], "label"), (long long)s[0].problems->items[j % P].i,
                          j % s[0].n + 1, s[0].n);
    return 0;
}

/* Adds arm a of file s to the tally: counts, and the per-fire scores (null = no candidate, -inf). */
static void add_arm(const shard_file *s, int a, eval_tally *t) {
    const json_value *arm = &s->arms->items[a];
    int *dst[N_AGG] = {&t->n_q, &t->n_ok, &t->n_ret, &t->n_probe, &t->n_probe_fired, &t->fires, &t->injected};
    for (int k = 0; k < N_AGG; k++) *dst[k] += (int)get_int(arm, AGG_KEYS[k], 0, 0x7fffffffL);
    for (int q = 0; q < 2; q++) {
        const json_value *l = json_get(arm, q ? "top_bridge_q_fires" : "top_bridge_c_fires");
        for (size_t i = 0; i < l->len; i++)
            eval_tally_push(t, q, l->items[i].type == JSON_NUM ? l->items[i].num : -INFINITY);
    }
}

/* The merged document: arm by arm, each job's per-problem object from the file that ran it, in
 * job order (a file's objects of one arm are in its job order, so a cursor per file suffices).
 * -1 when out of memory (nothing written). */
static int write_merged(FILE *f, const shard_file *s, int n_files, const int *owner, const eval_arm_info *info,
                        eval_tally *tally) {
    const int P = s[0].n_seeds;
    uint32_t *seeds = malloc((size_t)P * sizeof *seeds);
    size_t *cursor = malloc((size_t)n_files * sizeof *cursor);
    if (!seeds || !cursor) {
        free(seeds);
        free(cursor);
        return -1;
    }
    for (int i = 0; i < P; i++) seeds[i] = (uint32_t)s[0].problems->items[i].i;
    eval_json_head(f, str_at(s[0].root, "blob"), str_at(s[0].root, "mode"), numerics_of(&s[0]), seeds, P, NULL);
    for (int a = 0; a < (int)s[0].arms->len; a++) {
        eval_json_arm_head(f, a, &info[a]);
        memset(cursor, 0, (size_t)n_files * sizeof *cursor);
        for (int i = 0; i < P; i++) {
            const int o = owner[a * P + i];
            const json_value *e = &json_get(&s[o].arms->items[a], "per_problem")->items[cursor[o]++];
            if (i) fputs(",\n", f);
            fwrite(s[o].text + e->offset, 1, value_end(s[o].text, s[o].len, e->offset) - e->offset, f);
        }
        eval_json_arm_tail(f, &tally[a]);
    }
    eval_json_end(f);
    free(seeds);
    free(cursor);
    return 0;
}

int cli_eval_merge(const char *const *files, int n_files, const char *json_path) {
    shard_file *s = calloc((size_t)n_files, sizeof *s);
    eval_arm_info *info = NULL;
    eval_tally *tally = NULL;
    int *owner = NULL, rc = 1, n_arms = 0;
    if (!s) goto oom;
    for (int f = 0; f < n_files; f++) s[f].path = files[f];
    rc = 0;
    for (int f = 0; !rc && f < n_files; f++) rc = load_shard(&s[f]);
    for (int f = 1; !rc && f < n_files; f++) rc = same_run(&s[0], &s[f]);
    if (rc) goto out;
    n_arms = (int)s[0].arms->len;
    owner = malloc((size_t)s[0].n_jobs * sizeof *owner);
    info = calloc((size_t)n_arms, sizeof *info);
    tally = calloc((size_t)n_arms, sizeof *tally);
    if (!owner || !info || !tally) goto oom;
    if ((rc = check_cover(s, n_files, owner))) goto out;
    for (int a = 0; a < n_arms; a++) {
        const json_value *arm = &s[0].arms->items[a];
        snprintf(info[a].label, sizeof info[a].label, "%s", str_at(arm, "label"));
        get_num_or_null(json_get(arm, "threshold"), &info[a].threshold);
        info[a].has_floor = get_num_or_null(json_get(arm, "floor"), &info[a].floor) == 0 && !isnan(info[a].floor);
        for (int f = 0; f < n_files; f++) add_arm(&s[f], a, &tally[a]);
        if (tally[a].oom) goto oom;
    }
    fprintf(stderr, "eval: merged %d shard file%s, %d jobs\n", n_files, n_files == 1 ? "" : "s", s[0].n_jobs);
    eval_print_table(info, tally, n_arms);
    if (json_path) {
        char *tmp = NULL;
        FILE *jf = eval_json_create(json_path, &tmp);
        rc = 1;
        if (jf && write_merged(jf, s, n_files, owner, info, tally)) {
            fclose(jf);
            remove(tmp);
            free(tmp);
            goto oom;
        }
        if (jf) rc = eval_json_commit(jf, tmp, json_path);
        free(tmp);
    }
    goto out;
oom:
    fprintf(stderr, "recall eval --merge: out of memory\n");
    rc = 1;
out:
    for (int a = 0; tally && a < n_arms; a++) eval_tally_free(&tally[a]);
    for (int f = 0; s && f < n_files; f++) {
        json_free(s[f].doc);
        free(s[f].text);
    }
    free(s);
    free(owner);
    free(info);
    free(tally);
    return rc;
}
