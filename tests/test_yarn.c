/* test_yarn.c - YaRN as an explicit RoPE profile (REQ-CTX-002) and its limits (REQ-CTX-001), on
 * worldA (head_dim 16, rope_theta 10000, 4096 trained positions). A YaRN copy of worldA is made
 * under build/ at test time: the same weights with config.json's rope block replaced by
 * {yarn, factor 4, original 256} (1024 trained positions), in transformers 5's
 * `rope_parameters` and transformers 4's `rope_scaling` spelling.
 *   - inv_freq equals torch 1.13's float32 evaluation of transformers' _compute_yarn_parameters
 *     bitwise (hex below, made with Debian's python3-torch; truncate on and off; D = 16 and 128);
 *   - every cos / sin table row of the YaRN instance equals an fp64 evaluation of the formula,
 *     rounded to fp32, within the bound docs/NUMERICS.md states: attention x
 *     (|angle| x 2^-21 + 2^-22) (fp32 inv_freq and angle roundings grow with the position);
 *     inv_freq itself within 1 ulp of the fp64 value;
 *   - without scaling the tables are bitwise the previous fp32 expression, at every position;
 *   - a YaRN instance accepts exactly factor x original = 1024 positions and refuses 1025, naming
 *     both numbers; the API's forward does the same; the profile changes the logits;
 *   - a runtime profile that contradicts the file's fails naming both; one that repeats it is
 *     accepted; a blob without one takes it (yarn:4:1024 on worldA: 4096 positions);
 *   - convert reads both spellings into the same keys, and refuses linear / dynamic / llama3 /
 *     longrope naming the type, leaving no output; `recall info` shows the profile and `recall
 *     forward --rope-scaling` refuses a contradiction. */
#include "blob.h"
#include "convert.h"
#include "fixture.h"
#include "ops.h"
#include "qwen2.h"
#include "recall.h"
#include "rope.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WA "tests/golden/worldA/"

static const char YARN5[] = "\"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"yarn\", \"factor\": 4.0, "
                            "\"original_max_position_embeddings\": 256}";
static const char YARN4[] = "\"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                            "\"original_max_position_embeddings\": 256}";

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* build/yarn_<tag>/qwen2: worldA's files, config.json with its rope_parameters block replaced by
 * `rope` and max_position_embeddings set to max_pos. Returns the directory (static buffer). */
static const char *make_qwen2_dir(const char *tag, const char *rope, int max_pos) {
    static char dir[256];
    char path[512], abs[PATH_MAX];
    mkdir("build", 0777);
    snprintf(dir, sizeof dir, "build/yarn_%s_%ld", tag, (long)getpid());
    mkdir(dir, 0777);
    const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, WA "qwen2/%s", files[i]);
        cr_assert(realpath(path, abs), "%s", path);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        cr_assert_eq(symlink(abs, path), 0, "symlink %s", path);
    }
    char *cfg = slurp(WA "qwen2/config.json");
    char *a = strstr(cfg, "\"rope_parameters\"");
    cr_assert(a);
    char *b = strchr(a, '}');
    cr_assert(b);
    char *mp = strstr(cfg, "\"max_position_embeddings\": 4096");
    cr_assert(mp && mp < a);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fprintf(f, "%.*s\"max_position_embeddings\": %d%.*s%s%s", (int)(mp - cfg), cfg, max_pos,
            (int)(a - (mp + strlen("\"max_position_embeddings\": 4096"))), mp + strlen("\"max_position_embeddings\": 4096"),
            rope, b + 1);
    fclose(f);
    free(cfg);
    return dir;
}

/* removes this test process's build/yarn_* directories and blobs */
static void cleanup(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf build/yarn_*_%ld build/yarn_*_%ld.blob", (long)getpid(), (long)getpid());
    cr_assert_eq(fixture_sh(cmd, NULL), 0);
}

static recall_status convert_dir(const char *qdir, const char *out, recall_err *err) {
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.qwen2_dir = qdir;
    o.bge_dir = WA "bge";
    o.pooler_path = WA "pooler.pt";
    o.gate_path = WA "gate.npz";
    o.bridge_path = WA "bge_head.npz";
    o.weights = "f32";
    o.out_path = out;
    return rc_convert(&o, err);
}

/* worldA with {yarn, factor 4, original 256} (spelling: YARN5 or YARN4); path in a static buffer */
static const char *yarn_blob(const char *tag, const char *rope) {
    static char out[256];
    const char *dir = make_qwen2_dir(tag, rope, 4096);
    snprintf(out, sizeof out, "%s.blob", dir);
    recall_err err = {0};
    cr_assert_eq(convert_dir(dir, out, &err), RECALL_OK, "%s", err.msg);
    return out;
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static void check_hex(const float *got, const uint32_t *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        cr_assert_eq(bits(got[i]), want[i], "%s: inv_freq[%d] = %08x (%.9g), torch %08x", what, i, bits(got[i]),
                     (double)got[i], want[i]);
}

Test(yarn, inv_freq_equals_torch_float32_bitwise) {
    /* torch 1.13 float32, transformers' formula (rope.h); low/high 0/4 (truncate) and
     * 0.2098/3.2201 (no truncate) for D = 16; 20.944/45.027 for D = 128, factor 3, original 4096 */
    static const uint32_t t16[8] = {0x3f800000, 0x3e838cfe, 0x3d800000, 0x3c62ac0d,
                                    0x3b23d70a, 0x3a4f3e38, 0x3983126f, 0x38a5cb60};
    static const uint32_t n16[8] = {0x3f800000, 0x3e8208a8, 0x3d62e9ae, 0x3c1df0da,
                                    0x3b23d70a, 0x3a4f3e38, 0x3983126f, 0x38a5cb60};
    static const uint32_t n128[64] = {
        0x3f800000, 0x3f5dafd7, 0x3f3ff911, 0x3f263de0, 0x3f0ff59a, 0x3ef953cf, 0x3ed7e89b, 0x3ebaf81b,
        0x3ea1e89b, 0x3e8c3504, 0x3e72d423, 0x3e5247ed, 0x3e361887, 0x3e1db040, 0x3e088d77, 0x3dec7fd6,
        0x3dcccccd, 0x3db15978, 0x3d99940d, 0x3d84fe4d, 0x3d6655c2, 0x3d4727c4, 0x3d27ae0c, 0x3d0d106a,
        0x3ced2446, 0x3cc72568, 0x3ca71362, 0x3c8c0653, 0x3c6a7283, 0x3c4409e3, 0x3c23b6d7, 0x3c08887a,
        0x3be364ff, 0x3bbd0f70, 0x3b9ceac9, 0x3b81fe7b, 0x3b56f036, 0x3b314b56, 0x3b11e14a, 0x3aef675b,
        0x3ac3d74c, 0x3a9fa7b7, 0x3a81a6bb, 0x3a51a507, 0x3a28a3d9, 0x3a06dc78, 0x39e90cbd, 0x39c9d013,
        0x39aec33e, 0x39975697, 0x39830db3, 0x3962f9b0, 0x39448d73, 0x392a351e, 0x391364c4, 0x38ff4675,
        0x38dd0f2a, 0x38bf6dee, 0x38a5c563, 0x388f8d43, 0x38789f1b, 0x38574c1e, 0x383a7097, 0x38217342};
    rc_rope_profile p;
    float inv[64], att;
    rc_rope_yarn_init(&p, 4.0, 256);
    rc_rope_inv_freq(&p, 10000.0, 16, inv, &att);
    check_hex(inv, t16, 8, "D 16 truncate");
    cr_assert_eq(bits(att), 0x3f91be9cu, "attention %.9g = (float)(0.1 ln 4 + 1)", (double)att);
    p.truncate = 0;
    rc_rope_inv_freq(&p, 10000.0, 16, inv, &att);
    check_hex(inv, n16, 8, "D 16 no truncate");
    rc_rope_yarn_init(&p, 3.0, 4096);
    p.truncate = 0;
    rc_rope_inv_freq(&p, 10000.0, 128, inv, &att);
    check_hex(inv, n128, 64, "D 128 factor 3");
    cr_assert_eq(bits(att), 0x3f8e0fefu, "attention %.9g = (float)(0.1 ln 3 + 1)", (double)att);
    /* low == high (both 0: original 6): transformers nudges high by 0.001, else 0 / 0 = NaN */
    static const uint32_t e16[8] = {0x3f800000, 0x3da1e89b, 0x3ccccccd, 0x3c0186e3,
                                    0x3b23d70a, 0x3a4f3e38, 0x3983126f, 0x38a5cb60};
    rc_rope_yarn_init(&p, 4.0, 6);
    rc_rope_inv_freq(&p, 10000.0, 16, inv, &att);
    check_hex(inv, e16, 8, "D 16 original 6 (low == high)");
    /* mscale / mscale_all_dim and an explicit attention_factor (DeepSeek style) */
    rc_rope_yarn_init(&p, 40.0, 4096);
    p.mscale = p.mscale_all_dim = 0.707;
    rc_rope_inv_freq(&p, 10000.0, 64, inv, &att);
    cr_assert_eq(att, 1.0f, "equal mscales cancel: %.9g", (double)att);
    p.attention_factor = 0.5;
    rc_rope_inv_freq(&p, 10000.0, 64, inv, &att);
    cr_assert_eq(att, 0.5f);
}

/* fp64 evaluation of the YaRN formula (rope.h) with libm's pow / cos / sin */
static void fp64_inv(const rc_rope_profile *p, double theta, int D, double *inv, double *att) {
    double low, high;
    rc_rope_yarn_constants(p, theta, D, &low, &high, att);
    for (int i = 0; i < D / 2; i++) {
        double pf = pow(theta, (double)(2 * i) / D);
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double e = 1.0 - ramp;
        inv[i] = (1.0 / (p->factor * pf)) * (1.0 - e) + (1.0 / pf) * e;
    }
}

Test(yarn, tables_match_fp64_formula) {
    rc_blob *b = fixture_open(yarn_blob("tables", YARN5));
    rc_qwen2 *m = fixture_qwen2(b, 1024);
    recall_err err = {0};
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    cr_assert_eq(c->rope.type, RC_ROPE_YARN);
    cr_assert_eq(c->trained_pos, 1024);
    const int half = c->head_dim / 2;
    double inv[64], att;
    fp64_inv(&c->rope, c->rope_theta, c->head_dim, inv, &att);
    cr_assert_eq(c->rope_attention, (float)att);
    const float *fi = rc_qwen2_inv_freq(m);
    for (int i = 0; i < half; i++) {
        long d = labs((long)bits(fi[i]) - (long)bits((float)inv[i]));
        cr_assert_leq(d, 1, "inv_freq[%d] %.9g vs fp64 %.17g: %ld ulp", i, (double)fi[i], inv[i], d);
    }
    double worst = 0;
    for (int p = 0; p < 1024; p++) {
        const float *cs, *sn;
        cr_assert_eq(rc_qwen2_rope_row(m, p, &cs, &sn, &err), RECALL_OK, "%s", err.msg);
        for (int i = 0; i < half; i++) {
            const double ang = (double)p * inv[i];
            const double bound = att * (fabs(ang) * 0x1p-21 + 0x1p-22);
            const double dc = fabs((double)cs[i] - (double)(float)(cos(ang) * att));
            const double ds = fabs((double)sn[i] - (double)(float)(sin(ang) * att));
            cr_assert_leq(dc, bound, "cos row %d [%d]: %.9g vs fp64 %.9g", p, i, (double)cs[i], cos(ang) * att);
            cr_assert_leq(ds, bound, "sin row %d [%d]: %.9g vs fp64 %.9g", p, i, (double)sn[i], sin(ang) * att);
            if ((dc > ds ? dc : ds) / bound > worst) worst = (dc > ds ? dc : ds) / bound;
        }
    }
    cr_log_info("yarn tables vs fp64: worst |diff| / bound = %.3f", worst);
    cleanup();
    rc_qwen2_close(m);
    rc_blob_close(b);
}

Test(yarn, unscaled_tables_stay_bitwise) {
    rc_blob *b = fixture_open(fixture_worldA_blob("f32"));
    rc_qwen2 *m = fixture_qwen2(b, 4096);
    recall_err err = {0};
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    cr_assert_eq(c->rope.type, RC_ROPE_DEFAULT);
    cr_assert_eq(c->trained_pos, 4096);
    cr_assert_eq(c->rope_attention, 1.0f);
    const int D = c->head_dim, half = D / 2;
    const float th = (float)c->rope_theta;
    for (int p = 0; p < 4096; p++) {
        const float *cs, *sn;
        cr_assert_eq(rc_qwen2_rope_row(m, p, &cs, &sn, &err), RECALL_OK, "%s", err.msg);
        for (int i = 0; i < half; i++) {
            /* the expression the tables were built with before profiles existed */
            const float inv = 1.0f / rc_powf_pos(th, (float)(2 * i) / (float)D);
            float s, co;
            rc_sincosf(inv * (float)p, &s, &co);
            cr_assert_eq(bits(cs[i]), bits(co), "cos row %d [%d]", p, i);
            cr_assert_eq(bits(sn[i]), bits(s), "sin row %d [%d]", p, i);
        }
    }
    rc_qwen2_close(m);
    rc_blob_close(b);
}

static void make_ids(int32_t *ids, int n, int V) {
    uint32_t s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
}

Test(yarn, context_extends_to_factor_times_original_exactly) {
    const char *path = yarn_blob("limit", YARN4);
    rc_blob *b = fixture_open(path);
    rc_qwen2 *m = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_qwen2_open(b, 1025, &m, &err), RECALL_E_LIMIT);
    cr_assert(strstr(err.msg, "1025") && strstr(err.msg, "1024") && strstr(err.msg, "yarn"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_qwen2_open(b, 1024, &m, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t *ids = malloc(1025 * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof(float));
    cr_assert(ids && logits);
    make_ids(ids, 1025, V);
    rc_qwen2_fwd f = {.ids = ids, .n = 1024, .logits_last = logits};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_fwd one = {.ids = ids + 1024, .n = 1, .logits_last = logits};
    cr_assert_eq(rc_qwen2_forward(m, &one, &err), RECALL_E_LIMIT, "one more position is refused");
    rc_qwen2_close(m);
    rc_blob_close(b);

    /* the API: 1024 ids run, 1025 fail before any compute, naming both numbers */
    recall_model *rm = NULL;
    recall_err e2 = {0};
    cr_assert_eq(recall_open(path, NULL, &rm, &e2), RECALL_OK, "%s", e2.msg);
    recall_model_info info;
    recall_model_get_info(rm, &info);
    cr_assert_eq(info.max_pos, 1024, "the API reports the trained positions under the profile");
    for (int i = 0; i < V; i++) logits[i] = NAN;
    cr_assert_eq(recall_forward(rm, ids, 1024, logits, (size_t)V, &e2), RECALL_OK, "%s", e2.msg);
    cr_assert(isfinite(logits[0]) && isfinite(logits[V - 1]));
    cr_assert_eq(recall_forward(rm, ids, 1025, logits, (size_t)V, &e2), RECALL_E_LIMIT);
    cr_assert(strstr(e2.msg, "1025") && strstr(e2.msg, "1024"), "%s", e2.msg);
    cleanup();
    recall_close(rm);
    free(ids);
    free(logits);
}

Test(yarn, contradicting_profile_fails_naming_both) {
    rc_blob *b = fixture_open(yarn_blob("contra", YARN5));
    rc_rope_profile p;
    recall_err err = {0};
    cr_assert_eq(rc_rope_parse("yarn:2:256", &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_rope_attach(b, &p, &err), RECALL_E_ARG);
    cr_assert(strstr(err.msg, "yarn:2:256") && strstr(err.msg, "yarn:4:256"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    cr_assert_eq(rc_rope_parse("yarn:4:256", &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_rope_attach(b, &p, &err), RECALL_OK, "repeating the file's profile is fine: %s", err.msg);
    rc_blob_close(b);

    /* worldA has none: the runtime profile is used (4 x 1024 = 4096 positions) and changes the logits */
    rc_blob *w = fixture_open(fixture_worldA_blob("f32"));
    rc_qwen2 *plain = NULL, *scaled = NULL;
    cr_assert_eq(rc_qwen2_open(w, 64, &plain, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_rope_parse("yarn:4:1024", &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_rope_attach(w, &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open(w, 64, &scaled, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_cfg(scaled)->rope.type, RC_ROPE_YARN);
    cr_assert_eq(rc_qwen2_cfg(scaled)->trained_pos, 4096);
    const int V = rc_qwen2_cfg(plain)->vocab;
    int32_t ids[40];
    make_ids(ids, 40, V);
    float *a = malloc((size_t)V * sizeof(float)), *c = malloc((size_t)V * sizeof(float));
    rc_qwen2_fwd fa = {.ids = ids, .n = 40, .logits_last = a}, fc = {.ids = ids, .n = 40, .logits_last = c};
    cr_assert_eq(rc_qwen2_forward(plain, &fa, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(scaled, &fc, &err), RECALL_OK, "%s", err.msg);
    cr_assert(memcmp(a, c, (size_t)V * sizeof(float)) != 0, "the profile must change the logits");
    /* a second, different runtime profile now contradicts the first */
    cr_assert_eq(rc_rope_parse("yarn:2:2048", &p, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_rope_attach(w, &p, &err), RECALL_E_ARG);
    free(a);
    free(c);
    rc_qwen2_close(plain);
    rc_qwen2_close(scaled);
    rc_blob_close(w);

    cleanup();
    const char *bad[] = {"linear:4:256", "yarn", "yarn:x:256", "yarn:4:", "yarn:4:256x", "yarn:0.5:256",
                         "yarn:4:0", "yarn:1e7:4096"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        cr_assert_eq(rc_rope_parse(bad[i], &p, &err), RECALL_E_ARG, "%s accepted", bad[i]);
        cr_assert(strstr(err.msg, bad[i]) || strstr(err.msg, "yarn"), "%s: %s", bad[i], err.msg);
    }
}

Test(yarn, convert_reads_both_spellings_and_refuses_other_types) {
    rc_blob *b5 = fixture_open(yarn_blob("t5", YARN5));
    rc_rope_profile p5, p4;
    recall_err err = {0};
    cr_assert_eq(rc_rope_read(b5, &p5, &err), RECALL_OK, "%s", err.msg);
    rc_blob_close(b5);
    rc_blob *b4 = fixture_open(yarn_blob("t4", YARN4));
    cr_assert_eq(rc_rope_read(b4, &p4, &err), RECALL_OK, "%s", err.msg);
    rc_blob_close(b4);
    cr_assert(p5.type == RC_ROPE_YARN && p5.factor == 4.0 && p5.orig == 256 && p5.beta_fast == 32.0 &&
              p5.beta_slow == 1.0 && p5.truncate == 1 && p5.attention_factor == 0.0);
    cr_assert(memcmp(&p5, &p4, sizeof p5) == 0, "rope_scaling and rope_parameters give the same profile");

    const char *types[] = {"linear", "dynamic", "llama3", "longrope"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char rope[256], out[300];
        snprintf(rope, sizeof rope,
                 "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"%s\", \"factor\": 4.0}", types[i]);
        const char *dir = make_qwen2_dir(types[i], rope, 4096);
        snprintf(out, sizeof out, "%s.blob", dir);
        unlink(out);
        memset(&err, 0, sizeof err);
        cr_assert_eq(convert_dir(dir, out, &err), RECALL_E_UNSUPPORTED, "%s accepted", types[i]);
        cr_assert(strstr(err.msg, types[i]) && strstr(err.msg, "config.json"), "%s", err.msg);
        struct stat sb;
        cr_assert_neq(stat(out, &sb), 0, "no output left for %s", types[i]);
    }
    cleanup();
}

static uint32_t file_version(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    unsigned char h[12];
    cr_assert_eq(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    return (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
}

/* A version-1 reader would ignore the qwen2.rope.* keys and run plain RoPE; the writer stamps
 * such a blob version 2 so those readers refuse it, and leaves every other blob at version 1. */
Test(yarn, profile_blob_is_version_2_and_plain_stays_version_1) {
    const char *yb = yarn_blob("v2", YARN5);
    cr_assert_eq(file_version(yb), RECALL_BLOB_VERSION_ROPE);
    rc_blob_close(fixture_open(yb)); /* this build reads it */
    const char *plain = fixture_worldA_blob("f32");
    cr_assert(plain);
    cr_assert_eq(file_version(plain), 1u);
    cleanup();
}

Test(yarn, cli_info_shows_profile_and_forward_refuses_contradiction) {
    char cmd[1024], *out = NULL;
    const char *path = yarn_blob("cli", YARN5);
    free(fixture_cmd(0, "rope: yarn:4:256 (factor 4 x 256 original = 1024 positions",
                     "./recall info %s --no-tensors", path));
    free(fixture_cmd(0, "rope: default (4096 positions)",
                     "./recall info %s --no-tensors", fixture_worldA_blob("f32")));
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '[1,2,3]' --rope-scaling yarn:8:256 2>&1", path);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_assert(strstr(out, "yarn:8:256") && strstr(out, "yarn:4:256"), "%s", out);
    free(out);
    free(fixture_cmd(0, "context 3 of 1024 trained positions, rope yarn:4:256",
                     "./recall forward %s --ids '[1,2,3]' --rope-scaling yarn:4:256 2>&1", path));
    cleanup();
}

/* ---- hostile profile keys: the file's qwen2.rope.* keys are read strictly ------------------------ */

typedef struct {
    const char *key;
    char kind;  /* 'i' one i64, 'f' one f64, 's' a string, '3' three f64 */
    double v;
    const char *s;
} kv_spec;

/* A blob holding only the given config keys; rc_rope_read's status, its message in msg. */
static recall_status read_profile(const kv_spec *kv, int n, rc_rope_profile *p, char *msg, size_t cap) {
    recall_err err = {0};
    rc_blob_writer *w;
    cr_assert_eq(rc_writer_new(&w, &err), RECALL_OK);
    const int64_t max_pos = 4096;
    cr_assert_eq(rc_writer_kv_i64(w, "qwen2.max_pos", &max_pos, 1, &err), RECALL_OK);
    for (int i = 0; i < n; i++) {
        recall_status s;
        if (kv[i].kind == 'i') {
            const int64_t v = (int64_t)kv[i].v;
            s = rc_writer_kv_i64(w, kv[i].key, &v, 1, &err);
        } else if (kv[i].kind == '3') {
            const int64_t v[3] = {1, 2, 3};
            s = rc_writer_kv_i64(w, kv[i].key, v, 3, &err);
        } else if (kv[i].kind == 's') {
            s = rc_writer_kv_str(w, kv[i].key, kv[i].s, &err);
        } else {
            s = rc_writer_kv_f64(w, kv[i].key, kv[i].v, &err);
        }
        cr_assert_eq(s, RECALL_OK, "%s", err.msg);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/recall_rope_keys_%ld.blob", (long)getpid());
    cr_assert_eq(rc_writer_write(w, path, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(w);
    rc_blob *b = fixture_open(path);
    remove(path);
    const recall_status st = rc_rope_read(b, p, &err);
    snprintf(msg, cap, "%s", err.msg);
    rc_blob_close(b);
    return st;
}

#define YT {RC_ROPE_KEY_TYPE, 's', 0, "yarn"}
#define YF {RC_ROPE_KEY_FACTOR, 'f', 4.0, NULL}
#define YO {RC_ROPE_KEY_ORIG, 'i', 256, NULL}

Test(yarn, hostile_profile_keys_refused) {
    rc_rope_profile p;
    char msg[512];
    const kv_spec ok[] = {YT, YF, YO, {RC_ROPE_KEY_TRUNCATE, 'i', 0, NULL}, {RC_ROPE_KEY_BETA_FAST, 'i', 16, NULL}};
    cr_assert_eq(read_profile(ok, 5, &p, msg, sizeof msg), RECALL_OK, "%s", msg);
    cr_assert(p.type == RC_ROPE_YARN && p.factor == 4.0 && p.orig == 256 && p.truncate == 0 && p.beta_fast == 16.0);
    const kv_spec none[] = {{"qwen2.rope_theta", 'f', 10000.0, NULL}};
    cr_assert_eq(read_profile(none, 1, &p, msg, sizeof msg), RECALL_OK, "%s", msg);
    cr_assert_eq(p.type, RC_ROPE_DEFAULT);
    static const struct {
        kv_spec kv[4];
        int n;
        recall_status want;
        const char *says;
    } bad[] = {
        /* a profile whose type key is gone would run plain RoPE */
        {{YF, YO}, 2, RECALL_E_FORMAT, "qwen2.rope.factor without qwen2.rope.type"},
        /* a key this build does not read would be silently ignored */
        {{YT, YF, YO, {"qwen2.rope.low_freq_factor", 'f', 1.0, NULL}}, 4, RECALL_E_UNSUPPORTED,
         "qwen2.rope.low_freq_factor is not a RoPE profile key"},
        {{YT, YO}, 2, RECALL_E_MISSING, "qwen2.rope.factor is missing"},
        {{YT, YF}, 2, RECALL_E_MISSING, "qwen2.rope.orig_max_pos is missing"},
        {{YT, {RC_ROPE_KEY_FACTOR, 's', 0, "4"}, YO}, 3, RECALL_E_FORMAT, "qwen2.rope.factor must be one number"},
        {{YT, {RC_ROPE_KEY_FACTOR, '3', 0, NULL}, YO}, 3, RECALL_E_FORMAT, "qwen2.rope.factor must be one number"},
        {{YT, YF, {RC_ROPE_KEY_ORIG, 'f', 256.0, NULL}}, 3, RECALL_E_FORMAT, "qwen2.rope.orig_max_pos must be one integer"},
        {{YT, YF, {RC_ROPE_KEY_ORIG, 'i', 1e18, NULL}}, 3, RECALL_E_FORMAT, "qwen2.rope.orig_max_pos 1e+18 outside"},
        {{YT, YF, YO, {RC_ROPE_KEY_TRUNCATE, 'i', 5, NULL}}, 4, RECALL_E_FORMAT, "qwen2.rope.truncate is 5 (0 or 1)"},
        {{YT, YF, YO, {RC_ROPE_KEY_ATTN, 'f', 1e-300, NULL}}, 4, RECALL_E_FORMAT, "attention factor 1e-300 is not a normal"},
        {{YT, {RC_ROPE_KEY_FACTOR, 'f', NAN, NULL}, YO}, 3, RECALL_E_FORMAT, "yarn factor nan outside"},
        {{{RC_ROPE_KEY_TYPE, 's', 0, "yarn2"}, YF, YO}, 3, RECALL_E_UNSUPPORTED, "is 'yarn2'; this build knows yarn only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(read_profile(bad[i].kv, bad[i].n, &p, msg, sizeof msg), bad[i].want, "case %zu accepted: %s", i, msg);
        cr_assert(strstr(msg, "/tmp/recall_rope_keys_") && strstr(msg, bad[i].says), "case %zu: %s", i, msg);
    }
}
