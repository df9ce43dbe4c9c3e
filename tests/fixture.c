/* fixture.c - worldA blob cache and golden readers for the model tests (see fixture.h). */
#include "fixture.h"

#include "blob.h"
#include "convert.h"
#include "json.h"
#include "npy.h"
#include "qwen2.h"
#include "simd.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


#define WA "tests/golden/worldA/"

/* One engine thread per test unless the test asks for more (fixture.h); runs before Criterion's
 * main, so every forked test and every command a test runs inherits it. */
__attribute__((constructor)) static void one_thread_per_test(void) { setenv("RECALL_THREADS", "1", 0); }

/* A converted blob is reused while it is newer than the test binary and than its world's files
 * (a retrained world's MANIFEST.xxh64 is written last). */
static int blob_is_fresh(const char *path, const char *dir) {
    struct stat sb, se, sm;
    char manifest[256];
    if (stat(path, &sb) != 0) return 0;
    snprintf(manifest, sizeof manifest, "%s/MANIFEST.xxh64", dir);
    if (stat(manifest, &sm) == 0 && sm.st_mtime > sb.st_mtime) return 0;
    if (stat("/proc/self/exe", &se) != 0) return 1;
    return sb.st_mtime >= se.st_mtime;
}

rc_convert_opts fixture_worldA_convert_opts(const char *weights, const char *out) {
    const rc_convert_opts o = {.qwen2_dir = WA "qwen2", .bge_dir = WA "bge", .pooler_path = WA "pooler.pt",
                               .gate_path = WA "gate.npz", .bridge_path = WA "bge_head.npz", .weights = weights,
                               .out_path = out};
    return o;
}

static int weights_index(const char *weights) {
    return !strcmp(weights, "f32") ? 0 : !strcmp(weights, "bf16") ? 1 : !strcmp(weights, "nf4") ? 2 : -1;
}

/* The blob of world `name` (its artifacts under dir/), converted once per test binary build;
 * bge: the BERT encoder's storage (NULL: f32, the converter's default). */
static const char *world_blob(const char *dir, const char *name, const char *weights, int screen, const char *bgew) {
    /* per world (worldA, trained, templated, wide), weights, screen, BERT storage */
    static char paths[4][3][2][3][128];
    const int w = weights_index(weights), bw = bgew ? weights_index(bgew) : 0;
    if (w < 0 || bw < 0) return NULL;
    static const char *const worlds[4] = {"worldA", "trained", "templated", "wide"};
    int world = 0;
    while (world < 3 && strcmp(name, worlds[world])) world++;
    char *path = paths[world][w][screen != 0][bw];
    snprintf(path, 128, "build/fixture_%s_%s%s%s%s.blob", name, weights, screen ? "_screen" : "", bw ? "_bge" : "",
             bw ? bgew : "");
    if (blob_is_fresh(path, dir)) return path;
    mkdir("build", 0777);
    char tmp[256], q[256], bge[256], pooler[256], gate[256], bridge[256];
    snprintf(tmp, sizeof tmp, "%s.%ld.part", path, (long)getpid());
    snprintf(q, sizeof q, "%s/qwen2", dir);
    snprintf(bge, sizeof bge, "%s/bge", dir);
    snprintf(pooler, sizeof pooler, "%s/pooler.pt", dir);
    snprintf(gate, sizeof gate, "%s/gate.npz", dir);
    snprintf(bridge, sizeof bridge, "%s/bge_head.npz", dir);
    const rc_convert_opts o = {.qwen2_dir = q, .bge_dir = bge, .pooler_path = pooler, .gate_path = gate,
                               .bridge_path = bridge, .weights = weights, .bge_weights = bgew,
                               .lm_head_screen = screen, .out_path = tmp};
    recall_err err = {0};
    if (rc_convert(&o, &err) != RECALL_OK) {
        fprintf(stderr, "fixture: convert %s failed: %s\n", weights, err.msg);
        unlink(tmp);
        return NULL;
    }
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return NULL;
    }
    return path;
}

const char *fixture_worldA_blob(const char *weights) { return world_blob(WA, "worldA", weights, 0, NULL); }
const char *fixture_worldA_screen_blob(const char *weights) {
    return world_blob(WA, "worldA", weights, 1, NULL);
}
const char *fixture_trained_blob(const char *weights) {
    return world_blob(FIXTURE_TRAINED, "trained", weights, 0, NULL);
}
const char *fixture_wide_blob(const char *weights) { return world_blob(FIXTURE_WIDE, "wide", weights, 0, NULL); }
const char *fixture_templated_blob(const char *weights) {
    return world_blob(FIXTURE_TEMPLATED, "templated", weights, 0, NULL);
}
const char *fixture_bge_blob(const char *world, const char *weights, const char *bge_weights) {
    const int trained = !strcmp(world, "trained");
    return world_blob(trained ? FIXTURE_TRAINED : WA, trained ? "trained" : "worldA", weights, 0, bge_weights);
}
const char *fixture_device_blob(const char *world) {
    const int trained = !strcmp(world, "trained");
    return world_blob(trained ? FIXTURE_TRAINED : WA, trained ? "trained" : "worldA", "nf4", 1, "nf4");
}

static rc_npy get(const char *path, const char *key, rc_npz **z) {
    recall_err err = {0};
    rc_npy a;
    memset(&a, 0, sizeof a);
    cr_assert_eq(rc_npz_open(path, z, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_get(*z, key, &a, &err), RECALL_OK, "%s", err.msg);
    return a;
}

void fixture_expect_same_bits(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &want[i], 4);
        if (a != b)
            cr_assert_fail("%s: first difference at float %zu: got 0x%08x (%.9g) want 0x%08x (%.9g)", what, i, a,
                           (double)got[i], b, (double)want[i]);
    }
}

float *fixture_npz_f32(const char *path, const char *key, size_t *n) {
    rc_npz *z = NULL;
    rc_npy a = get(path, key, &z);
    recall_err err = {0};
    float *out = NULL;
    cr_assert_eq(rc_npy_to_f32(&a, key, &out, &err), RECALL_OK, "%s", err.msg);
    *n = (size_t)a.numel;
    rc_npy_free(&a);
    rc_npz_close(z);
    return out;
}

int *fixture_npz_i32(const char *path, const char *key, size_t *n) {
    float *f = fixture_npz_f32(path, key, n); /* ids < 2^24: exact in fp32 */
    int *out = malloc((*n ? *n : 1) * sizeof(int));
    cr_assert(out);
    for (size_t i = 0; i < *n; i++) out[i] = (int)f[i];
    free(f);
    return out;
}

int fixture_sh(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    cr_assert(buf);
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert(buf);
        }
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* build/NAME.out is fresh while it is at least as new as ./recall and the test binary. */
static int once_is_fresh(const char *path) {
    struct stat so, sr, se;
    if (stat(path, &so) != 0) return 0;
    if (stat("recall", &sr) == 0 && sr.st_mtime > so.st_mtime) return 0;
    return stat("/proc/self/exe", &se) != 0 || se.st_mtime <= so.st_mtime;
}

int fixture_sh_once(const char *name, const char *cmd, char **out) {
    char path[256], lock[256], tmp[300];
    snprintf(path, sizeof path, "build/%s.out", name);
    snprintf(lock, sizeof lock, "build/%s.lock", name);
    mkdir("build", 0777);
    const int fd = open(lock, O_RDWR | O_CREAT, 0666);
    cr_assert(fd >= 0, "cannot open %s", lock);
    cr_assert_eq(flock(fd, LOCK_EX), 0, "cannot lock %s", lock);
    if (!once_is_fresh(path)) {
        char *got;
        const int st = fixture_sh(cmd, &got);
        snprintf(tmp, sizeof tmp, "%s.%ld.part", path, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        cr_assert(f, "cannot write %s", tmp);
        fprintf(f, "%d\n%s", st, got);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(rename(tmp, path), 0, "cannot rename %s", tmp);
        free(got);
    }
    flock(fd, LOCK_UN);
    close(fd);
    size_t n;
    char *rec = fixture_read(path, &n), *nl = strchr(rec, '\n');
    cr_assert(nl, "%s: no exit status", path);
    const int st = atoi(rec);
    if (out) {
        *out = strdup(nl + 1);
        cr_assert(*out);
    }
    free(rec);
    return st;
}

const char *fixture_worldA_replay(const char *weights, const char *mode, char **out) {
    static char trace[128];
    const char *blob = fixture_worldA_blob(weights);
    cr_assert(blob);
    char name[64], cmd[512];
    snprintf(name, sizeof name, "replay_worldA_%s_%s", weights, mode);
    snprintf(trace, sizeof trace, "build/%s.json", name);
    snprintf(cmd, sizeof cmd,
             "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 --mode %s --trace %s 2>&1", blob,
             mode, trace);
    char *got;
    const int st = fixture_sh_once(name, cmd, &got);
    cr_assert_eq(st, 0, "%s\n%s", cmd, got);
    if (out) *out = got;
    else free(got);
    return trace;
}

char *fixture_cmd(int status, const char *needle, const char *fmt, ...) {
    char cmd[8192], *out;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < sizeof cmd, "command too long");
    const int got = fixture_sh(cmd, &out);
    cr_assert_eq(got, status, "%s -> exit %d, wanted %d\n%s", cmd, got, status, out);
    cr_assert(!needle || strstr(out, needle), "%s\n-> %s (wanted '%s')", cmd, out, needle);
    return out;
}

rc_blob *fixture_open(const char *path) {
    cr_assert(path, "no blob");
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(path, 0, &b, &err), RECALL_OK, "%s", err.msg);
    return b;
}

uint64_t fixture_blob_counted(const char *path) {
#ifdef RECALL_NO_MMAP
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: cannot stat", path);
    return (uint64_t)st.st_size;
#else
    (void)path;
    return 0;
#endif
}

rc_blob *fixture_open_worldA(const char *weights) {
    const char *p = fixture_worldA_blob(weights);
    cr_assert(p, "cannot build the worldA %s blob", weights);
    return fixture_open(p);
}

rc_bpe *fixture_blob_bpe(const rc_blob *b) {
    size_t size;
    const void *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
    cr_assert(sec, "%s: no BPE tokenizer section", rc_blob_path(b));
    rc_bpe *t = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_load(sec, size, &t, &err), RECALL_OK, "%s", err.msg);
    return t;
}

rc_qwen2 *fixture_qwen2(const rc_blob *b, int max_ctx) {
    rc_qwen2 *m = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_open(b, max_ctx, &m, &err), RECALL_OK, "%s", err.msg);
    return m;
}

char *fixture_read(const char *path, size_t *len) {
    char *t = NULL;
    size_t n = 0;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(path, &t, &n, &err), RECALL_OK, "%s", err.msg);
    if (len) *len = n;
    return t;
}

void fixture_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s", path);
    cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text), "%s", path);
    cr_assert_eq(fclose(f), 0, "%s", path);
}

json_doc *fixture_json(const char *path) {
    size_t n;
    char *t = fixture_read(path, &n);
    json_doc *d = NULL;
    recall_err err = {0};
    cr_assert_eq(json_parse(t, n, path, &d, &err), RECALL_OK, "%s", err.msg);
    free(t);
    return d;
}

rc_problem fixture_problem(uint32_t seed) {
    rc_bench *bench = NULL;
    rc_problem p;
    recall_err err = {0};
    cr_assert_eq(rc_bench_load("tests/golden/recall_bench.json", &bench, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bench_problem(bench, seed, &p, &err), RECALL_OK, "%s", err.msg);
    rc_bench_free(bench);
    return p;
}

/* ---- two runs of the loop, bitwise ---------------------------------------------------------- */

/* n elements of two arrays bitwise equal (NULL arrays when n is 0 included). */
static int same_bytes(const void *a, const void *b, size_t n) { return n == 0 || !memcmp(a, b, n); }

void fixture_expect_same_turn(const rc_turn *x, const rc_turn *y, const char *tag, int t) {
    cr_assert_eq(x->n_reply, y->n_reply, "%s turn %d: reply length", tag, t);
    cr_assert(same_bytes(x->reply, y->reply, (size_t)x->n_reply * sizeof *x->reply), "%s turn %d: reply", tag, t);
    cr_assert(x->n_gates == y->n_gates && x->n_fires == y->n_fires && x->n_rebuilds == y->n_rebuilds &&
                  x->n_top5 == y->n_top5 && x->n_low == y->n_low,
              "%s turn %d: record counts (gates %d/%d, fires %d/%d, rebuilds %d/%d, top5 %d/%d, low %d/%d)", tag, t,
              x->n_gates, y->n_gates, x->n_fires, y->n_fires, x->n_rebuilds, y->n_rebuilds, x->n_top5, y->n_top5,
              x->n_low, y->n_low);
    for (int i = 0; i < x->n_gates; i++)
        cr_assert(same_bytes(&x->gates[i], &y->gates[i], sizeof x->gates[i]), "%s turn %d gate %d: %a vs %a", tag, t, i,
                  x->gates[i].score, y->gates[i].score);
    for (int i = 0; i < x->n_rebuilds; i++) {
        const rc_rebuild_rec *a = &x->rebuilds[i], *b = &y->rebuilds[i];
        cr_assert(a->c0 == b->c0 && a->has_sp == b->has_sp && a->inj_len == b->inj_len && a->window_len == b->window_len &&
                      a->edge_len == b->edge_len,
                  "%s turn %d rebuild %d", tag, t, i);
    }
    cr_assert(same_bytes(x->top5, y->top5, (size_t)x->n_top5 * sizeof *x->top5), "%s turn %d: rebuild top-5", tag, t);
    cr_assert(same_bytes(x->low, y->low, (size_t)x->n_low * sizeof *x->low), "%s turn %d: low margins", tag, t);
    for (int i = 0; i < x->n_fires; i++) {
        const rc_fire_rec *f = &x->fires[i], *g = &y->fires[i];
        cr_assert(f->c0 == g->c0 && f->ncand == g->ncand && f->ntop == g->ntop && f->nrid == g->nrid &&
                      f->injected == g->injected && same_bytes(&f->score, &g->score, sizeof f->score),
                  "%s turn %d fire %d", tag, t, i);
        cr_assert(same_bytes(f->bridge, g->bridge, (size_t)f->ncand * sizeof *f->bridge) &&
                      same_bytes(f->top, g->top, (size_t)f->ntop * sizeof *f->top) &&
                      same_bytes(f->rid, g->rid, (size_t)f->nrid * sizeof *f->rid),
                  "%s turn %d fire %d: retrieval", tag, t, i);
    }
    cr_assert(same_bytes(&x->min_margin, &y->min_margin, sizeof x->min_margin), "%s turn %d: min margin %a vs %a", tag,
              t, x->min_margin, y->min_margin);
}

void fixture_expect_same_run(const rc_problem_run *a, const rc_problem_run *b, const char *tag) {
    cr_assert_eq(a->n_turns, b->n_turns, "%s: turns", tag);
    cr_assert_eq(a->n_history, b->n_history, "%s: history length", tag);
    cr_assert(same_bytes(a->history, b->history, (size_t)a->n_history * sizeof *a->history), "%s: history", tag);
    for (int t = 0; t < a->n_turns; t++) fixture_expect_same_turn(&a->turns[t].turn, &b->turns[t].turn, tag, t);
}

/* every word of `need` (space-separated) is a word of the first "flags" line of /proc/cpuinfo;
 * -1 when the file cannot be read */
static int cpuinfo_has(const char *need) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[8192];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            found = 1;
            char want[128];
            snprintf(want, sizeof want, "%s", need);
            for (char *w = strtok(want, " "); w && found; w = strtok(NULL, " ")) {
                size_t n = strlen(w);
                const char *p = line;
                found = 0;
                while ((p = strstr(p, w)) != NULL) {
                    if ((p == line || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || !p[n])) {
                        found = 1;
                        break;
                    }
                    p += n;
                }
            }
        }
    fclose(f);
    return found;
}

static int host_runs(rc_simd_path p) {
    switch (p) {
    case RC_SIMD_SCALAR: return 1;
    case RC_SIMD_AVX2:
    case RC_SIMD_AVX512: {
#if defined(__x86_64__)
        const int have = cpuinfo_has(p == RC_SIMD_AVX2 ? "avx2 fma" : "avx512f avx512bw avx512vl fma");
        if (have >= 0) return have;
        return p == RC_SIMD_AVX2 ? __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                 : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
#else
        return 0;
#endif
    }
    case RC_SIMD_NEON:
#if defined(__aarch64__)
        return 1;
#else
        return 0;
#endif
    default: return 0;
    }
}

int fixture_path_runs(int p) {
    const int avail = rc_simd_available((rc_simd_path)p);
    cr_assert(avail || !host_runs((rc_simd_path)p),
              "this CPU runs %s but the path is not available (not built in, or its dispatch is broken): the test "
              "would pass on the paths left",
              rc_simd_name((rc_simd_path)p));
    return avail;
}
