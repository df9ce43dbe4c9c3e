/* test_convert.c - `recall convert` on worldA: exact tensors, byte-identical reruns, NF4 bytes,
 * equivalent pooler/gate sources, and every malformed input refused with a clear message and
 * no output file left behind. */
#include "blob.h"
#include "convert.h"
#include "fixture.h"
#include "npy.h"
#include "safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define W "tests/golden/worldA"

static const char *tmpname(const char *tag) {
    static char p[8][256];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 256, "build/tconv_%d_%s.blob", (int)getpid(), tag);
    return s;
}

static rc_blob *convert_open(rc_convert_opts *o) {
    recall_err err = {0};
    cr_assert_eq(rc_convert(o, &err), RECALL_OK, "%s", err.msg);
    rc_blob *b;
    cr_assert_eq(rc_blob_open(o->out_path, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg);
    return b;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len + 1);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

static void spit(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s", path);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

Test(convert, f32_tensors_equal_their_sources) {
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("f32"));
    rc_blob *b = convert_open(&o);
    rc_st *st;
    recall_err err = {0};
    cr_assert_eq(rc_st_open(W "/qwen2", &st, &err), RECALL_OK, "%s", err.msg);
    size_t checked = 0;
    for (size_t i = 0; i < rc_st_count(st); i++) {
        const rc_st_tensor *t = rc_st_at(st, i);
        char name[200];
        snprintf(name, sizeof name, "qwen2.%s", t->name);
        const rc_tensor *bt = rc_blob_find(b, name);
        cr_assert(bt, "%s missing from the blob", name);
        cr_expect_eq(bt->dtype, RC_DT_F32);
        float *f;
        cr_assert_eq(rc_st_to_f32(t, &f, &err), RECALL_OK);
        cr_expect_eq(bt->numel, t->numel);
        cr_expect(memcmp(bt->data, f, (size_t)t->numel * 4) == 0, "%s differs from its bf16 source", name);
        free(f);
        checked++;
    }
    cr_expect_eq(checked, 2 + 24 * 12 + 1);
    rc_st_close(st);
    cr_assert_eq(rc_st_open(W "/bge", &st, &err), RECALL_OK, "%s", err.msg);
    for (size_t i = 0; i < rc_st_count(st); i++) {
        const rc_st_tensor *t = rc_st_at(st, i);
        if (!strncmp(t->name, "pooler.", 7)) continue; /* BERT's dense pooler is unused */
        char name[200];
        snprintf(name, sizeof name, "bert.%s", t->name);
        const rc_tensor *bt = rc_blob_find(b, name);
        cr_assert(bt, "%s missing", name);
        cr_expect(bt->nbytes == t->nbytes && memcmp(bt->data, t->data, t->nbytes) == 0, "%s differs", name);
    }
    rc_st_close(st);
    int64_t v;
    double d;
    cr_expect_eq(rc_blob_get_i64(b, "qwen2.layers", &v, &err), 0);
    cr_expect_eq(v, 24);
    cr_expect_eq(rc_blob_get_f64(b, "qwen2.rope_theta", &d, &err), 0); /* from rope_parameters */
    cr_expect_eq(d, 10000.0);
    cr_expect_eq(rc_blob_get_i64(b, "tok.bos", &v, &err), 0);
    cr_expect_eq(v, 1027);
    cr_expect_eq(rc_blob_get_i64(b, "tok.eos", &v, &err), 0);
    cr_expect_eq(v, 1024);
    cr_expect_eq(rc_blob_get_i64(b, "pooler.heads", &v, &err), 0); /* from the .pt's args */
    cr_expect_eq(v, 4);
    cr_expect_eq(rc_blob_get_i64(b, "pooler.n_sp", &v, &err), 0);
    cr_expect_eq(v, 8);
    cr_expect_eq(rc_blob_get_i64(b, "bert.max_seq", &v, &err), 0);
    cr_expect_eq(v, 512);
    cr_expect_eq(rc_blob_get_f64(b, "gate.thresh", &d, &err), 0);
    cr_expect_eq(d, 0.0);
    cr_expect(rc_blob_section(b, RC_SECT_TOK_BPE, NULL));
    cr_expect(rc_blob_section(b, RC_SECT_TOK_WORDPIECE, NULL));
    rc_blob_close(b);
    unlink(o.out_path);
}

Test(convert, twice_gives_identical_bytes) {
    rc_convert_opts o1 = fixture_worldA_convert_opts("nf4", tmpname("twice1")), o2 = fixture_worldA_convert_opts("nf4", tmpname("twice2"));
    rc_blob_close(convert_open(&o1));
    rc_blob_close(convert_open(&o2));
    size_t l1, l2;
    unsigned char *a = slurp(o1.out_path, &l1), *b = slurp(o2.out_path, &l2);
    cr_assert_eq(l1, l2);
    cr_expect(memcmp(a, b, l1) == 0, "two conversions differ");
    free(a);
    free(b);
    unlink(o1.out_path);
    unlink(o2.out_path);
}

Test(convert, nf4_bytes_match_bitsandbytes_layout) {
    rc_convert_opts o = fixture_worldA_convert_opts("nf4", tmpname("nf4"));
    rc_blob *b = convert_open(&o);
    const rc_tensor *t = rc_blob_find(b, "qwen2.model.layers.0.self_attn.q_proj.weight");
    cr_assert(t);
    cr_assert_eq(t->dtype, RC_DT_NF4);
    rc_npz *z;
    recall_err err = {0};
    cr_assert_eq(rc_npz_open(W "/nf4_layer0_q_proj.npz", &z, &err), RECALL_OK, "%s", err.msg);
    rc_npy packed, absmax;
    cr_assert_eq(rc_npz_get(z, "packed", &packed, &err), RECALL_OK);
    cr_assert_eq(rc_npz_get(z, "absmax", &absmax, &err), RECALL_OK);
    cr_assert_eq(packed.nbytes, (size_t)t->numel / 2);
    cr_expect(memcmp(packed.data, t->data, packed.nbytes) == 0, "nf4 codes differ from the golden");
    cr_assert_eq(absmax.nbytes, (size_t)t->numel / 64 * 4);
    cr_expect(memcmp(absmax.data, t->absmax, absmax.nbytes) == 0, "absmax differs from the golden");
    /* norms, biases, embeddings stay unquantised */
    cr_expect_eq(rc_blob_find(b, "qwen2.model.layers.0.self_attn.q_proj.bias")->dtype, RC_DT_F32);
    cr_expect_eq(rc_blob_find(b, "qwen2.model.embed_tokens.weight")->dtype, RC_DT_BF16);
    cr_expect_eq(rc_blob_find(b, "qwen2.lm_head.weight")->dtype, RC_DT_BF16);
    rc_npy_free(&packed);
    rc_npy_free(&absmax);
    rc_npz_close(z);
    rc_blob_close(b);
    unlink(o.out_path);
}

Test(convert, bf16_keeps_source_bytes) {
    rc_convert_opts o = fixture_worldA_convert_opts("bf16", tmpname("bf16"));
    rc_blob *b = convert_open(&o);
    rc_st *st;
    recall_err err = {0};
    cr_assert_eq(rc_st_open(W "/qwen2", &st, &err), RECALL_OK);
    const rc_st_tensor *s = rc_st_find(st, "model.layers.3.mlp.up_proj.weight");
    const rc_tensor *t = rc_blob_find(b, "qwen2.model.layers.3.mlp.up_proj.weight");
    cr_assert(s && t);
    cr_expect_eq(t->dtype, RC_DT_BF16);
    cr_expect(t->nbytes == s->nbytes && memcmp(t->data, s->data, s->nbytes) == 0);
    rc_st_close(st);
    rc_blob_close(b);
    unlink(o.out_path);
}

/* Tensors with `prefix` in two blobs are bitwise identical. */
static void expect_same_prefix(rc_blob *a, rc_blob *b, const char *prefix) {
    size_t n = 0;
    for (size_t i = 0; i < rc_blob_n_tensors(a); i++) {
        const rc_tensor *t = rc_blob_tensor_at(a, i);
        if (strncmp(t->name, prefix, strlen(prefix))) continue;
        const rc_tensor *u = rc_blob_find(b, t->name);
        cr_assert(u, "%s missing", t->name);
        cr_expect(t->nbytes == u->nbytes && t->ndim == u->ndim && memcmp(t->data, u->data, t->nbytes) == 0,
                  "%s differs", t->name);
        n++;
    }
    cr_expect_gt(n, 3);
}

Test(convert, pooler_sources_agree) {
    rc_convert_opts o1 = fixture_worldA_convert_opts("f32", tmpname("ppt")), o2 = fixture_worldA_convert_opts("f32", tmpname("pst"));
    o2.pooler_path = W "/pooler.safetensors";
    o2.pooler_heads = 4; /* safetensors carries no args */
    rc_blob *a = convert_open(&o1), *b = convert_open(&o2);
    expect_same_prefix(a, b, "pooler.");
    cr_expect_eq(rc_blob_n_tensors(a), rc_blob_n_tensors(b));
    const rc_tensor *os = rc_blob_find(a, "pooler.out_scale");
    cr_assert(os);
    cr_expect_eq(os->ndim, 0);
    cr_expect_lt(((const float *)os->data)[0], 0.0f); /* stored negative; the pooler uses |.| */
    rc_blob_close(a);
    rc_blob_close(b);
    /* without args and without an override the default is 8 heads */
    rc_convert_opts o3 = fixture_worldA_convert_opts("f32", tmpname("p8"));
    o3.pooler_path = W "/pooler.safetensors";
    rc_blob *c = convert_open(&o3);
    int64_t h;
    recall_err err = {0};
    cr_expect_eq(rc_blob_get_i64(c, "pooler.heads", &h, &err), RECALL_OK);
    cr_expect_eq(h, 8);
    rc_blob_close(c);
    unlink(o1.out_path);
    unlink(o2.out_path);
    unlink(o3.out_path);
}

Test(convert, gate_sources_agree) {
    rc_convert_opts o1 = fixture_worldA_convert_opts("f32", tmpname("g1")), o2 = fixture_worldA_convert_opts("f32", tmpname("g2"));
    o2.gate_path = W "/gate_compressed.npz";
    rc_blob *a = convert_open(&o1), *b = convert_open(&o2);
    expect_same_prefix(a, b, "gate.");
    rc_blob_close(a);
    rc_blob_close(b);
    unlink(o1.out_path);
    unlink(o2.out_path);
}

/* --threshold T: the blob carries T as the gate's thresh, in its key and its tensor alike (the
 * engine reads the key, the heads the tensor), and every other tensor is the plain convert's; a
 * value that is not finite is refused and nothing is written. */
Test(convert, stored_threshold_replaces_the_gate_file_s) {
    rc_convert_opts o1 = fixture_worldA_convert_opts("f32", tmpname("t1")), o2 = fixture_worldA_convert_opts("f32", tmpname("t2"));
    o2.set_gate_threshold = 1;
    o2.gate_threshold = 0.3125; /* exact in float */
    rc_blob *a = convert_open(&o1), *b = convert_open(&o2);
    recall_err err = {0};
    double ka, kb;
    cr_assert_eq(rc_blob_get_f64(a, "gate.thresh", &ka, &err), RECALL_OK);
    cr_assert_eq(rc_blob_get_f64(b, "gate.thresh", &kb, &err), RECALL_OK);
    cr_expect_eq(kb, 0.3125);
    cr_expect_neq(ka, 0.3125, "worldA's own thresh differs, or the test shows nothing");
    float tb;
    cr_assert_eq(rc_blob_vec(b, "gate.thresh", 1, &tb, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(tb, 0.3125f);
    cr_assert_eq(rc_blob_n_tensors(a), rc_blob_n_tensors(b));
    for (size_t i = 0; i < rc_blob_n_tensors(a); i++) {
        const rc_tensor *t = rc_blob_tensor_at(a, i), *u = rc_blob_find(b, t->name);
        cr_assert_not_null(u, "%s", t->name);
        if (!strcmp(t->name, "gate.thresh")) continue;
        cr_expect(t->nbytes == u->nbytes && !memcmp(t->data, u->data, t->nbytes), "%s differs", t->name);
    }
    rc_blob_close(a);
    rc_blob_close(b);
    unlink(o1.out_path);
    unlink(o2.out_path);
    rc_convert_opts o3 = fixture_worldA_convert_opts("f32", tmpname("t3"));
    o3.set_gate_threshold = 1;
    o3.gate_threshold = INFINITY;
    cr_expect_eq(rc_convert(&o3, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "gate.npz") && strstr(err.msg, "--threshold"), "%s", err.msg);
    cr_expect_neq(access(o3.out_path, F_OK), 0, "nothing written");
}

Test(convert, tokenizers_only) {
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.qwen2_dir = "tests/golden/tokenizers/deepseek-r1-distill-qwen";
    o.bge_dir = "tests/golden/tokenizers/bge-base-en-v1.5";
    o.tokenizers_only = 1;
    o.out_path = tmpname("tok");
    rc_blob *b = convert_open(&o);
    int64_t v;
    recall_err err = {0};
    cr_expect_eq(rc_blob_n_tensors(b), 0);
    cr_expect_eq(rc_blob_get_i64(b, "tok.bos", &v, &err), RECALL_OK);
    cr_expect_eq(v, 151646);
    cr_expect_eq(rc_blob_get_i64(b, "tok.user", &v, &err), RECALL_OK);
    cr_expect_eq(v, 151644);
    rc_blob_close(b);
    unlink(o.out_path);
}

/* The loop geometry and the gate layers are optional in the artifacts: absent, convert writes the
 * reference's (gate.layers 8, 14, 20; loop.* 512, 128, 64, 2, 110, 16), and worldA's blobs are the
 * bytes the converter wrote before the keys existed (checksums of that converter's output). */
Test(convert, worldA_bytes_unchanged_by_optional_loop_keys) {
    static const struct { const char *w; uint64_t header, body; size_t size; } pin[] = {
        {"f32", 0x1bf72104cc9f769dULL, 0x321f8cbc5c25d8c2ULL, 6070720},
        {"nf4", 0x5de7b07e7df4264cULL, 0xf2165bc59345baa8ULL, 2244032},
    };
    for (size_t i = 0; i < 2; i++) {
        rc_convert_opts o = fixture_worldA_convert_opts(pin[i].w, tmpname(pin[i].w));
        recall_err err = {0};
        cr_assert_eq(rc_convert(&o, &err), RECALL_OK, "%s", err.msg);
        size_t len;
        unsigned char *b = slurp(o.out_path, &len);
        uint64_t h, body;
        memcpy(&body, b + 40, 8);
        memcpy(&h, b + 120, 8);
        cr_expect_eq(len, pin[i].size, "%s: %zu bytes", pin[i].w, len);
        cr_expect_eq(body, pin[i].body, "%s: body checksum %016llx", pin[i].w, (unsigned long long)body);
        cr_expect_eq(h, pin[i].header, "%s: header checksum %016llx", pin[i].w, (unsigned long long)h);
        free(b);
        unlink(o.out_path);
    }
}

/* The trained world carries its own geometry: gate.npz `layers` and config.json "recall_loop". */
Test(convert, trained_world_carries_its_geometry) {
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("trained"));
    o.qwen2_dir = "tests/golden/trained/qwen2";
    o.bge_dir = "tests/golden/trained/bge";
    o.pooler_path = "tests/golden/trained/pooler.pt";
    o.gate_path = "tests/golden/trained/gate.npz";
    o.bridge_path = "tests/golden/trained/bge_head.npz";
    rc_blob *b = convert_open(&o);
    const rc_blob_kv *kv = rc_blob_kv_find(b, "gate.layers");
    cr_assert(kv && kv->type == RC_KV_I64 && kv->count == 3);
    cr_expect(kv->v.i[0] == 1 && kv->v.i[1] == 2 && kv->v.i[2] == 3);
    static const struct { const char *k; int64_t v; } want[] = {
        {"loop.window", 96}, {"loop.block", 32}, {"loop.chunk", 16}, {"loop.k", 2}, {"loop.turn_cap", 64},
        {"loop.buf_min", 16}, {"gate.dim", 384}, {"bridge.qdim", 384},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t v = -1;
        recall_err err = {0};
        cr_expect_eq(rc_blob_get_i64(b, want[i].k, &v, &err), RECALL_OK, "%s", err.msg);
        cr_expect_eq(v, want[i].v, "%s = %lld", want[i].k, (long long)v);
    }
    rc_blob_close(b);
    unlink(o.out_path);
}

/* ---- malformed inputs ------------------------------------------------------------------- */

static void remove_scratch(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf build/tconv_%d_*", (int)getpid());
    if (system(cmd) != 0) cr_log_warn("could not remove scratch folders");
}
TestSuite(convert_bad, .fini = remove_scratch);

/* A scratch copy of the worldA qwen2 folder whose safetensors / config can be damaged. */
static const char *scratch_qwen2(const char *tag) {
    static char dir[256];
    snprintf(dir, sizeof dir, "build/tconv_%d_%s_qwen2", (int)getpid(), tag);
    mkdir("build", 0755);
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"};
    for (size_t i = 0; i < 4; i++) {
        char src[512], dst[512];
        snprintf(src, sizeof src, W "/qwen2/%s", files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        size_t len;
        unsigned char *buf = slurp(src, &len);
        spit(dst, buf, len);
        free(buf);
    }
    return dir;
}

/* Replaces `from` by `to` (same length) in dir/file. */
static void patch(const char *dir, const char *file, const char *from, const char *to) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    size_t len;
    unsigned char *buf = slurp(p, &len);
    buf[len] = 0;
    cr_assert_eq(strlen(from), strlen(to));
    unsigned char *hit = NULL;
    for (size_t i = 0; i + strlen(from) <= len && !hit; i++)
        if (!memcmp(buf + i, from, strlen(from))) hit = buf + i;
    cr_assert(hit, "'%s' not found in %s", from, p);
    memcpy(hit, to, strlen(to));
    spit(p, buf, len);
    free(buf);
}

/* Converting must fail with `code`, a message containing `needle` and `needle2`, and no output. */
static void expect_refused(rc_convert_opts *o, recall_status code, const char *needle, const char *needle2) {
    recall_err err = {0};
    recall_status s = rc_convert(o, &err);
    cr_expect_eq(s, code, "status %d (%s), message: %s", s, recall_strerror(s), err.msg);
    cr_expect(strstr(err.msg, needle), "message lacks '%s': %s", needle, err.msg);
    if (needle2) cr_expect(strstr(err.msg, needle2), "message lacks '%s': %s", needle2, err.msg);
    cr_expect(!strchr(err.msg, '\n'), "message is not one line: %s", err.msg);
    cr_expect_neq(access(o->out_path, F_OK), 0, "an output file was left behind");
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", o->out_path, (int)getpid());
    cr_expect_neq(access(tmp, F_OK), 0, "a temp file was left behind");
}

Test(convert_bad, truncated_safetensors) {
    const char *d = scratch_qwen2("trunc");
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    cr_assert_eq(truncate(p, 1000), 0); /* inside the JSON header */
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad1"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_FORMAT, "model.safetensors", "past end of file");
    cr_assert_eq(truncate(p, 5), 0);
    expect_refused(&o, RECALL_E_FORMAT, "model.safetensors", "truncated");
}

Test(convert_bad, safetensors_too_short_for_data) {
    const char *d = scratch_qwen2("short");
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    cr_assert_eq(truncate(p, 2385888 - 64), 0);
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad1b"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_FORMAT, "model.safetensors", "out of range");
}

Test(convert_bad, header_length_past_eof) {
    const char *d = scratch_qwen2("hlen");
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    size_t len;
    unsigned char *buf = slurp(p, &len);
    uint64_t big = len - 7; /* one byte more than fits after the 8-byte length */
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(big >> (8 * i));
    spit(p, buf, len);
    free(buf);
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad2"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_FORMAT, "model.safetensors", "past end of file");
}

Test(convert_bad, offsets_out_of_range) {
    const char *d = scratch_qwen2("oor");
    patch(d, "model.safetensors", "\"data_offsets\":[2355200,2355328]", "\"data_offsets\":[2355300,2355428]");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad3"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_FORMAT, "model.norm.weight", "out of range");
}

Test(convert_bad, overlapping_offsets) {
    const char *d = scratch_qwen2("ovl");
    patch(d, "model.safetensors", "\"data_offsets\":[139264,278528]", "\"data_offsets\":[069632,208896]");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad4"));
    o.qwen2_dir = d;
    /* JSON forbids leading zeros: a malformed header is refused too; use a valid overlap next */
    expect_refused(&o, RECALL_E_FORMAT, "model.safetensors", "byte");
    const char *d2 = scratch_qwen2("ovl2");
    patch(d2, "model.safetensors", "\"data_offsets\":[139264,278528]", "\"data_offsets\":[ 69632,208896]");
    o.qwen2_dir = d2;
    expect_refused(&o, RECALL_E_FORMAT, "overlap", "model.embed_tokens.weight");
}

Test(convert_bad, shape_mismatch_with_config) {
    const char *d = scratch_qwen2("shape");
    patch(d, "config.json", "\"intermediate_size\": 160", "\"intermediate_size\": 128");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad5"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_SHAPE, "mlp.gate_proj.weight", "[160,64]");
}

Test(convert_bad, dtype_mismatch) {
    const char *d = scratch_qwen2("dtype");
    /* a valid file whose norm weight is 128 u8 values instead of 64 floats */
    patch(d, "model.safetensors", "\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[64]",
          "\"model.norm.weight\":{\"dtype\":\"U8\",\"shape\":[128] ");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad6"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_SHAPE, "model.norm.weight", "u8");
}

Test(convert_bad, missing_tensor) {
    const char *d = scratch_qwen2("miss");
    patch(d, "model.safetensors", "\"model.norm.weight\"", "\"model.norx.weight\"");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad7"));
    o.qwen2_dir = d;
    expect_refused(&o, RECALL_E_MISSING, "model.norm.weight", "missing");
}

Test(convert_bad, npz_bad_crc) {
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad8"));
    o.gate_path = "tests/golden/bad/gate_badcrc.npz";
    expect_refused(&o, RECALL_E_CHECKSUM, "gate_badcrc.npz", "coef");
}

Test(convert_bad, npy_unsupported_dtype) {
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad9"));
    o.gate_path = "tests/golden/bad/gate_bigendian.npz";
    expect_refused(&o, RECALL_E_UNSUPPORTED, "gate_bigendian.npz", ">f4");
    o.gate_path = "tests/golden/bad/gate_complex.npz";
    expect_refused(&o, RECALL_E_UNSUPPORTED, "gate_complex.npz", "c8");
}

Test(convert_bad, pickle_foreign_global_is_never_run) {
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad10"));
    o.pooler_path = "tests/golden/pickle/os_system_p2.pt";
    expect_refused(&o, RECALL_E_SECURITY, "os_system_p2.pt", "system");
    o.pooler_path = "tests/golden/pickle/os_system_p4.pt";
    expect_refused(&o, RECALL_E_SECURITY, "os_system_p4.pt", "system");
}

Test(convert_bad, pooling_mode_not_cls) {
    char dir[256];
    snprintf(dir, sizeof dir, "build/tconv_%d_bge", (int)getpid());
    mkdir(dir, 0755);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    mkdir(sub, 0755);
    const char *files[] = {"config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors",
                           "sentence_bert_config.json", "1_Pooling/config.json"};
    for (size_t i = 0; i < 6; i++) {
        char src[512], dst[512];
        snprintf(src, sizeof src, W "/bge/%s", files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        size_t len;
        unsigned char *buf = slurp(src, &len);
        spit(dst, buf, len);
        free(buf);
    }
    patch(dir, "1_Pooling/config.json", "\"pooling_mode_cls_token\": true", "\"pooling_mode_cls_token\": fals");
    rc_convert_opts o = fixture_worldA_convert_opts("f32", tmpname("bad11"));
    o.bge_dir = dir;
    expect_refused(&o, RECALL_E_FORMAT, "1_Pooling/config.json", "JSON");
    patch(dir, "1_Pooling/config.json", "\"pooling_mode_cls_token\": fals", "\"pooling_mode_cls_token\":false");
    expect_refused(&o, RECALL_E_UNSUPPORTED, "1_Pooling/config.json", "CLS");
}

Test(convert_bad, cli_exit_code_and_one_line) {
    FILE *p = popen("./recall convert --qwen2 tests/golden/worldA/qwen2 --bge tests/golden/worldA/bge "
                    "--pooler tests/golden/pickle/os_system_p2.pt --gate tests/golden/worldA/gate.npz "
                    "--bridge tests/golden/worldA/bge_head.npz --quiet -o build/cli_bad.blob 2>&1 >/dev/null",
                    "r");
    cr_assert(p);
    char line[1024] = "";
    char *got = fgets(line, sizeof line, p);
    char extra[256];
    cr_expect_null(fgets(extra, sizeof extra, p), "more than one line: %s", extra);
    int rc = pclose(p);
    cr_expect_neq(rc, 0);
    cr_assert(got);
    cr_expect(strstr(line, "recall convert: ") == line, "%s", line);
    cr_expect(strstr(line, "os_system_p2.pt") && strstr(line, "system"), "%s", line);
    cr_expect_neq(access("build/cli_bad.blob", F_OK), 0);
    cr_expect_neq(system("./recall convert --qwen2 nope --bge nope --pooler x.pt --gate g.npz --bridge b.npz "
                         "-o build/cli_bad.blob 2>/dev/null"),
                  0);
}

/* The CLI refuses damaged blobs with exit status 1 and one line naming the file. */
static void expect_cli_line(const char *cmd, const char *needle1, const char *needle2) {
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char line[1024] = "", extra[256];
    char *got = fgets(line, sizeof line, p);
    cr_expect_null(fgets(extra, sizeof extra, p), "more than one line: %s", extra);
    int rc = pclose(p);
    cr_assert(got, "no output from: %s", cmd);
    cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "exit status %d: %s", rc, cmd);
    cr_expect(strstr(line, needle1) && strstr(line, needle2), "%s", line);
}

Test(convert_bad, cli_damaged_blobs) {
    rc_convert_opts o = fixture_worldA_convert_opts("nf4", tmpname("clib"));
    rc_blob_close(convert_open(&o));
    size_t len;
    unsigned char *buf = slurp(o.out_path, &len);
    char path[300], cmd[700];
    snprintf(path, sizeof path, "build/tconv_%d_damaged.blob", (int)getpid());

    spit(path, buf, len / 2); /* truncated */
    snprintf(cmd, sizeof cmd, "./recall info %s 2>&1 >/dev/null", path);
    expect_cli_line(cmd, path, "truncated");

    memcpy(buf, "NOTABLOB", 8); /* wrong magic */
    spit(path, buf, len);
    expect_cli_line(cmd, path, "magic");

    unsigned char *orig = slurp(o.out_path, &len);
    orig[len - 100] ^= 0x01; /* one flipped byte in the last tensor */
    spit(path, orig, len);
    snprintf(cmd, sizeof cmd, "./recall verify %s 2>&1 >/dev/null", path);
    expect_cli_line(cmd, path, "checksum");

    orig[len - 100] ^= 0x01;
    ((rc_blob_header *)orig)->version = 7; /* future version */
    spit(path, orig, len);
    snprintf(cmd, sizeof cmd, "./recall info %s 2>&1 >/dev/null", path);
    expect_cli_line(cmd, path, "version 7");
    free(buf);
    free(orig);
    unlink(path);
    unlink(o.out_path);
}
