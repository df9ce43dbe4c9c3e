/* fixture.c - worldA blob cache and golden readers for the model tests (see fixture.h). */
#include "fixture.h"

#include "blob.h"
#include "convert.h"
#include "json.h"
#include "npy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static int newer_than_exe(const char *path) {
    struct stat sb, se;
    if (stat(path, &sb) != 0) return 0;
    if (stat("/proc/self/exe", &se) != 0) return 1;
    return sb.st_mtime >= se.st_mtime;
}

/* The blob of world `name` (its artifacts under dir/), converted once per test binary build. */
static const char *world_blob(const char *dir, const char *name, const char *weights, int screen) {
    static char paths[2][3][2][128];
    const int w = !strcmp(weights, "f32") ? 0 : !strcmp(weights, "bf16") ? 1 : !strcmp(weights, "nf4") ? 2 : -1;
    if (w < 0) return NULL;
    char *path = paths[strcmp(name, "worldA") != 0][w][screen != 0];
    snprintf(path, 128, "build/fixture_%s_%s%s.blob", name, weights, screen ? "_screen" : "");
    if (newer_than_exe(path)) return path;
    mkdir("build", 0777);
    char tmp[256], q[256], bge[256], pooler[256], gate[256], bridge[256];
    snprintf(tmp, sizeof tmp, "%s.%ld.part", path, (long)getpid());
    snprintf(q, sizeof q, "%s/qwen2", dir);
    snprintf(bge, sizeof bge, "%s/bge", dir);
    snprintf(pooler, sizeof pooler, "%s/pooler.pt", dir);
    snprintf(gate, sizeof gate, "%s/gate.npz", dir);
    snprintf(bridge, sizeof bridge, "%s/bge_head.npz", dir);
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.qwen2_dir = q;
    o.bge_dir = bge;
    o.pooler_path = pooler;
    o.gate_path = gate;
    o.bridge_path = bridge;
    o.weights = weights;
    o.lm_head_screen = screen;
    o.out_path = tmp;
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

const char *fixture_worldA_blob(const char *weights) { return world_blob("tests/golden/worldA", "worldA", weights, 0); }
const char *fixture_worldA_screen_blob(const char *weights) {
    return world_blob("tests/golden/worldA", "worldA", weights, 1);
}
const char *fixture_trained_blob(const char *weights) { return world_blob(FIXTURE_TRAINED, "trained", weights, 0); }

static rc_npy get(const char *path, const char *key, rc_npz **z) {
    recall_err err = {0};
    rc_npy a;
    memset(&a, 0, sizeof a);
    cr_assert_eq(rc_npz_open(path, z, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_npz_get(*z, key, &a, &err), RECALL_OK, "%s", err.msg);
    return a;
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

rc_blob *fixture_open_worldA(const char *weights) {
    const char *p = fixture_worldA_blob(weights);
    cr_assert(p, "cannot build the worldA %s blob", weights);
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(p, 0, &b, &err), RECALL_OK, "%s", err.msg);
    return b;
}

json_doc *fixture_read_json(const char *path) {
    char *text;
    size_t len;
    json_doc *doc;
    recall_err err = {0};
    cr_assert_eq(rc_read_file(path, &text, &len, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(json_parse(text, len, path, &doc, &err), RECALL_OK, "%s", err.msg);
    free(text); /* the document keeps its own copies */
    return doc;
}
