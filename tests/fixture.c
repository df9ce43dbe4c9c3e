/* fixture.c - worldA blob cache and golden readers for the model tests (see fixture.h). */
#include "fixture.h"

#include "blob.h"
#include "convert.h"
#include "npy.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WA "tests/golden/worldA/"

static int newer_than_exe(const char *path) {
    struct stat sb, se;
    if (stat(path, &sb) != 0) return 0;
    if (stat("/proc/self/exe", &se) != 0) return 1;
    return sb.st_mtime >= se.st_mtime;
}

static const char *worldA_blob(const char *weights, int screen) {
    const char *path;
    if (!strcmp(weights, "f32")) path = screen ? "build/fixture_worldA_f32_screen.blob" : "build/fixture_worldA_f32.blob";
    else if (!strcmp(weights, "bf16")) path = screen ? "build/fixture_worldA_bf16_screen.blob" : "build/fixture_worldA_bf16.blob";
    else if (!strcmp(weights, "nf4")) path = screen ? "build/fixture_worldA_nf4_screen.blob" : "build/fixture_worldA_nf4.blob";
    else return NULL;
    if (newer_than_exe(path)) return path;
    mkdir("build", 0777);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.%ld.part", path, (long)getpid());
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.qwen2_dir = WA "qwen2";
    o.bge_dir = WA "bge";
    o.pooler_path = WA "pooler.pt";
    o.gate_path = WA "gate.npz";
    o.bridge_path = WA "bge_head.npz";
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

const char *fixture_worldA_blob(const char *weights) { return worldA_blob(weights, 0); }
const char *fixture_worldA_screen_blob(const char *weights) { return worldA_blob(weights, 1); }

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

rc_blob *fixture_open_worldA(const char *weights) {
    const char *p = fixture_worldA_blob(weights);
    cr_assert(p, "cannot build the worldA %s blob", weights);
    rc_blob *b = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(p, 0, &b, &err), RECALL_OK, "%s", err.msg);
    return b;
}
